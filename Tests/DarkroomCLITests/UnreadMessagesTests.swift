import DarkroomCore
import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A peer that is sent large images and reads none of them must not cost
/// the server the images' bytes in memory. The storage node sends an image
/// kept in a blob file, and the broker a job's input kept in a file,
/// mapped, not copied, so what waits in ZeroMQ's queue for that peer is
/// page cache. Against real `darkroom store` and `darkroom broker`
/// processes, measured by their anonymous (heap) memory.
@Suite("Messages a peer does not read", .serialized)
struct UnreadMessagesTests {
    /// A real JPEG's header and scan, then `padding` bytes the checks do
    /// not read (they stop at the first scan), with its size.
    static func paddedJPEG(seed: UInt64, padding: Int) throws -> (bytes: [UInt8], size: Size) {
        let size = Size(width: 64, height: 48)
        let small = try JPEG.encode(SamplePhoto.render(size, seed: seed), options: EncodeOptions(quality: 85))
        var pattern = [UInt8](repeating: 0, count: padding)
        for index in pattern.indices { pattern[index] = UInt8(truncatingIfNeeded: (index &+ Int(seed)) &* 2_654_435_761 >> 13) }
        return (small + pattern, size)
    }

    /// Waits until the process's CPU time has stopped growing for about a second.
    static func waitUntilIdle(_ pid: Int32, while doing: () throws -> Void = {}) rethrows {
        var last = cpuTicks(of: pid) ?? 0
        var still = 0
        let deadline = Date().addingTimeInterval(120)
        while still < 3 && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.3)
            try doing()
            let now = cpuTicks(of: pid) ?? 0
            still = now == last ? still + 1 : 0
            last = now
        }
    }

    /// The node's anonymous resident memory (`RssAnon`), in bytes.
    static func anonymousMemory(of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count >= 2, let kilobytes = Int(fields[1]) { return kilobytes * 1024 }
        }
        return nil
    }

    /// CPU ticks the process has used (user and system).
    static func cpuTicks(of pid: Int32) -> Int? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    @Test("120 unread GET-REPLYs of an 8 MiB image leave the storage node's heap where it was, and arrive intact once read")
    func unreadImagesCostNoHeap() throws {
        let h = try SystemHarness()
        try h.start("store", ["store", "--data", h.dir.path("data"), "--bind", h.store, "--metrics", "127.0.0.1:0"])
        try h.waitUntil("the store answers") { try h.run(["status", "--check", "--only", "store", "--store", h.store, "--timeout", "1"]).status == 0 }
        let metricsPort = try MetricsSystemTests.metricsPort(h, "store")
        guard let pid = h.processes["store"]?.processIdentifier else {
            Issue.record("no storage node process")
            return
        }
        // 8 MiB: a blob file, stored as sent.
        let (full, size) = try Self.paddedJPEG(seed: 7, padding: 8 << 20)
        let small = try JPEG.encode(SamplePhoto.render(size, seed: 7), options: EncodeOptions(quality: 85))
        let fullHash = SHA256.hex(full)

        let context = try Context()
        let reader = try context.socket(.dealer)
        try reader.setLinger(milliseconds: 0)
        try reader.setReceiveTimeout(milliseconds: 20_000)
        try reader.connect(h.store)
        let imageSize = ImageSize(width: UInt32(size.width), height: UInt32(size.height))
        try reader.send(StoreRequest(requestID: 1, jobID: ULIDGenerator.shared.next(), sourceName: "big.jpg", pipeline: "grayscale",
                                     fullSize: imageSize, thumbnailSize: imageSize, full: full, thumbnail: small).frames())
        guard let reply = try reader.receive(), case .stored(let stored) = try StoreMessage.decode(reply, to: .peer) else {
            Issue.record("the STORE was not answered STORED")
            return
        }

        let before = try #require(Self.anonymousMemory(of: pid))
        // A client whose queue takes one message: the rest stay with the node.
        let idle = try context.socket(.dealer)
        try idle.setLinger(milliseconds: 0)
        try idle.setReceiveHighWaterMark(1)
        try idle.setSendHighWaterMark(0)
        try idle.connect(h.store)
        // Few enough that hashing them (each GET checks the file's SHA-256)
        // does not starve the suites that run beside this one.
        let gets = 120
        for index in 0..<gets {
            try idle.send(GetRequest(requestID: UInt64(index + 1), id: stored.recordID, variant: .full).frames())
        }
        // Answered when the node's CPU time stops growing.
        try Self.waitUntilIdle(pid)
        let after = try #require(Self.anonymousMemory(of: pid))
        let grown = after - before
        print("unread replies: storage node RssAnon \(before >> 20) MiB before \(gets) GETs of \(full.count >> 20) MiB, \(after >> 20) MiB after")
        // Copied, they would be 960 MiB.
        #expect(grown < 256 << 20, "the node's heap grew by \(grown >> 20) MiB with \(gets) unread replies")
        let waiting = try HTTPProbe.scrape(port: metricsPort)
        // The client's queue and the sockets' buffers take the first few.
        #expect((waiting["darkroom_store_images_mapped"] ?? 0) >= Double(gets - 10), "\(waiting["darkroom_store_images_mapped"] ?? -1) mapped")
        #expect(waiting["darkroom_store_replies_dropped_total"] == 0)

        // Deleted while its replies wait: the mapped bytes stay as they were.
        try reader.send(DeleteRequest(requestID: 2, id: stored.recordID).frames())
        guard let deleted = try reader.receive(), case .ok = try StoreMessage.decode(deleted, to: .peer) else {
            Issue.record("the DELETE was not answered OK")
            return
        }
        try idle.setReceiveTimeout(milliseconds: 20_000)
        var received = 0
        var requestIDs: Set<UInt64> = []
        while received < gets, let frames = try idle.receive() {
            guard case .getReply(let got) = try StoreMessage.decode(frames, to: .peer) else {
                Issue.record("reply \(received + 1) is not a GET-REPLY")
                break
            }
            received += 1
            requestIDs.insert(got.requestID)
            #expect(got.image.count == full.count)
            if received == 1 || received == gets { #expect(SHA256.hex(got.image) == fullHash, "reply \(received)") }
        }
        #expect(received == gets && requestIDs.count == gets, "\(received) of \(gets) GET-REPLYs read")
        // Each mapping goes once its reply has left.
        try h.waitUntil("the mappings are released", timeout: .seconds(10)) {
            try HTTPProbe.scrape(port: metricsPort)["darkroom_store_images_mapped"] == 0
        }
        #expect(h.signal("store", SIGTERM) == 0)
    }

    @Test("a worker that asks for 24 jobs of 8 MiB and reads none leaves the broker's heap where it was; the JOBs arrive intact once read")
    func unreadJobsCostTheBrokerNoHeap() throws {
        let h = try SystemHarness()
        try h.startBroker(["--metrics", "127.0.0.1:0"])
        let metricsPort = try MetricsSystemTests.metricsPort(h, "broker")
        guard let pid = h.processes["broker"]?.processIdentifier else {
            Issue.record("no broker process")
            return
        }
        let jobs = 24
        let folder = h.dir.url.appendingPathComponent("big")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var sizes: Set<Int> = []
        for index in 0..<jobs {
            let (bytes, _) = try Self.paddedJPEG(seed: UInt64(index + 1), padding: 8 << 20)
            sizes.insert(bytes.count)
            try Data(bytes).write(to: folder.appendingPathComponent(String(format: "big-%02d.jpg", index)))
        }
        let submit = try h.run(["submit", folder.path, "--ops", "grayscale", "--time-limit", "60s"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        try Self.waitUntilIdle(pid)
        let before = try #require(Self.anonymousMemory(of: pid))

        // A worker whose queue takes one message, asking for every job.
        let context = try Context()
        let worker = try context.socket(.dealer)
        try worker.setLinger(milliseconds: 0)
        try worker.setReceiveHighWaterMark(1)
        try worker.connect(h.backend)
        try worker.send(Ready(workerID: "idle-worker", host: "test", pid: 1, slots: UInt32(jobs)).frames())
        try worker.send(Credit(count: UInt32(jobs)).frames())
        // Its heartbeats keep it alive while it reads nothing.
        let heartbeat = BackendMessage.heartbeat.frames()
        try h.waitUntil("every job is dispatched", timeout: .seconds(60)) {
            try worker.send(heartbeat)
            Thread.sleep(forTimeInterval: 0.2)
            return try HTTPProbe.scrape(port: metricsPort)["darkroom_broker_jobs_in_flight"] == Double(jobs)
        }
        try Self.waitUntilIdle(pid) { try worker.send(heartbeat) }
        // Mapped and counted until they leave (some may sit in the kernel's
        // socket buffers already, their mappings released).
        let mapped = try HTTPProbe.scrape(port: metricsPort)["darkroom_broker_inputs_mapped"] ?? -1
        #expect(mapped >= 1 && mapped <= Double(jobs), "\(mapped) inputs mapped with \(jobs) JOBs unread")
        let after = try #require(Self.anonymousMemory(of: pid))
        let grown = after - before
        print("unread jobs: broker RssAnon \(before >> 20) MiB before \(jobs) JOBs of 8 MiB, \(after >> 20) MiB after; \(Int(mapped)) inputs mapped")
        // Copied, they would be 192 MiB.
        #expect(grown < 80 << 20, "the broker's heap grew by \(grown >> 20) MiB with \(jobs) unread JOBs")

        try worker.setReceiveTimeout(milliseconds: 20_000)
        var received: Set<String> = []
        while received.count < jobs, let frames = try worker.receive() {
            switch try BackendMessage.decode(frames, to: .peer) {
            case .job(let job):
                received.insert(job.jobID.description)
                #expect(sizes.contains(job.image.count), "job \(job.jobID): \(job.image.count) bytes")
                #expect(job.timeLimit == 60)
            case .heartbeat:
                continue
            case let other:
                Issue.record("the worker was sent \(other)")
            }
        }
        #expect(received.count == jobs, "\(received.count) of \(jobs) JOBs read")
        // Read, every mapping is released.
        try h.waitUntil("the broker's mapped inputs are released", timeout: .seconds(20)) {
            try HTTPProbe.scrape(port: metricsPort)["darkroom_broker_inputs_mapped"] == 0
        }
        #expect(h.signal("broker", SIGTERM) == 0)
    }
}
