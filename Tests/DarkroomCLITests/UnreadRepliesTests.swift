import DarkroomCore
import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A client that asks the storage node for a large image hundreds of times
/// and reads none of the replies must not cost the node the images' bytes
/// in memory: a GET of an image kept in a blob file sends the file mapped,
/// not copied, so what waits in ZeroMQ's queue for that client is page
/// cache. Against a real `darkroom store` process, measured by its
/// anonymous (heap) memory, with the blob deleted while the replies wait.
@Suite("Replies a client does not read", .serialized)
struct UnreadRepliesTests {
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

    @Test("300 unread GET-REPLYs of an 8 MiB image leave the storage node's heap where it was, and arrive intact once read")
    func unreadImagesCostNoHeap() throws {
        let h = try SystemHarness()
        try h.start("store", ["store", "--data", h.dir.path("data"), "--bind", h.store, "--metrics", "127.0.0.1:0"])
        try h.waitUntil("the store answers") { try h.run(["status", "--check", "--only", "store", "--store", h.store, "--timeout", "1"]).status == 0 }
        let metricsPort = try MetricsSystemTests.metricsPort(h, "store")
        guard let pid = h.processes["store"]?.processIdentifier else {
            Issue.record("no storage node process")
            return
        }
        // A real 64x48 JPEG header and scan, then 8 MiB the checks do not
        // read (they stop at the first scan): a blob file, stored as sent.
        let size = Size(width: 64, height: 48)
        let small = try JPEG.encode(SamplePhoto.render(size, seed: 7), options: EncodeOptions(quality: 85))
        var pattern = [UInt8](repeating: 0, count: 8 << 20)
        for index in pattern.indices { pattern[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 13) }
        let full = small + pattern
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
        let gets = 300
        for index in 0..<gets {
            try idle.send(GetRequest(requestID: UInt64(index + 1), id: stored.recordID, variant: .full).frames())
        }
        // Answered when the node's CPU time stops growing.
        var last = Self.cpuTicks(of: pid) ?? 0
        var still = 0
        let deadline = Date().addingTimeInterval(120)
        while still < 3 && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.3)
            let now = Self.cpuTicks(of: pid) ?? 0
            still = now == last ? still + 1 : 0
            last = now
        }
        let after = try #require(Self.anonymousMemory(of: pid))
        let grown = after - before
        print("unread replies: storage node RssAnon \(before >> 20) MiB before \(gets) GETs of \(full.count >> 20) MiB, \(after >> 20) MiB after")
        // Copied, they would be 2,400 MiB.
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
}
