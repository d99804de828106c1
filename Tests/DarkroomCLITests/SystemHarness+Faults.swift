import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ
import Dispatch
import Foundation
import Synchronization
import Testing

/// What the fault tests read back from a running system: every event, every
/// record, the broker's status and the roles' logs.
extension SystemHarness {
    /// Every event the broker has assigned, from seq 1, as `darkroom watch
    /// --from 1 --json` prints them. Asks the broker for its newest seq
    /// first and reads exactly that many, so nothing depends on how long
    /// the replay takes.
    func allEvents() throws -> [[String: Any]] {
        let head = try status()["eventSeq"] as? Int ?? 0
        guard head > 0 else { return [] }
        let watch = try run(["watch", "--from", "1", "--count", String(head), "--duration", "120", "--json"] + clientFlags)
        guard watch.status == 0 else { throw HarnessError("watch failed (\(watch.status)): \(watch.stderr)") }
        return SystemHarness.jsonLines(watch.stdout)
    }

    /// The broker's STATUS, as `darkroom status --json` prints it.
    func status() throws -> [String: Any] {
        let status = try run(["status", "--json", "--timeout", "5"] + brokerFlags + storeFlags)
        guard status.status == 0, let object = SystemHarness.jsonLines(status.stdout).first else {
            throw HarnessError("status failed (\(status.status)): \(status.stderr)")
        }
        return object
    }

    /// The storage node's records, newest first (`darkroom ls --json`).
    func records(limit: Int = 10_000) throws -> [[String: Any]] {
        let ls = try run(["ls", "--json", "--limit", String(limit), "--timeout", "5"] + storeFlags)
        guard ls.status == 0 else { throw HarnessError("ls failed (\(ls.status)): \(ls.stderr)") }
        return SystemHarness.jsonLines(ls.stdout)
    }

    /// The lines of a role's log (all its runs) that contain `text`.
    func logLines(_ name: String, containing text: String) -> [String] {
        log(name).split(separator: "\n").filter { $0.contains(text) }.map(String.init)
    }

    /// Waits until the broker's events show `condition`.
    func waitForEvents(_ what: String, timeout: Duration = .seconds(60), _ condition: @escaping ([[String: Any]]) -> Bool) throws {
        try waitUntil(what, timeout: timeout) { condition(try self.allEvents()) }
    }

    /// The longest broker silence a stopped worker reported in its last line
    /// ("worker W stopped; longest broker silence 0.41 s"), in seconds.
    func longestBrokerSilence(_ worker: String) -> Double? {
        guard let line = logLines(worker, containing: "stopped; longest broker silence").last,
              let range = line.range(of: "longest broker silence ") else { return nil }
        return Double(line[range.upperBound...].split(separator: " ").first ?? "")
    }

    /// Runs client commands side by side, each in a process of its own, and
    /// returns their outputs in the order given.
    func runConcurrently(_ commands: [[String]]) throws -> [DarkroomProcess.Output] {
        let results = Locked<[Int: Result<DarkroomProcess.Output, HarnessError>]>([:])
        let group = DispatchGroup()
        for (index, arguments) in commands.enumerated() {
            group.enter()
            let thread = Thread {
                let result: Result<DarkroomProcess.Output, HarnessError>
                do {
                    result = .success(try DarkroomProcess.run(arguments))
                } catch {
                    result = .failure(HarnessError("cannot run darkroom \(arguments.first ?? ""): \(error)"))
                }
                results.withLock { $0[index] = result }
                group.leave()
            }
            thread.start()
        }
        group.wait()
        let all = results.withLock { $0 }
        return try commands.indices.map { index in try all[index]!.get() }
    }

    /// Writes `copies` files of the same bytes under different names into a
    /// fresh directory.
    func writeCopies(of bytes: [UInt8], _ copies: Int, name: String) throws -> URL {
        let folder = dir.url.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let data = Data(bytes)
        for i in 0..<copies {
            try data.write(to: folder.appendingPathComponent(String(format: "\(name)-%03d.jpg", i)))
        }
        return folder
    }
}

/// A value shared between threads behind a lock.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T: Sendable>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

/// Events by kind and by job, for the assertions of the fault tests.
struct EventLog {
    let events: [[String: Any]]

    init(_ events: [[String: Any]]) { self.events = events }

    func of(_ kind: String) -> [[String: Any]] { events.filter { $0["kind"] as? String == kind } }

    func of(_ kind: String, job: String) -> [[String: Any]] { of(kind).filter { $0["job"] as? String == job } }

    /// The events of one job, in seq order.
    func job(_ id: String) -> [[String: Any]] { events.filter { $0["job"] as? String == id } }

    var seqs: [Int] { events.compactMap { $0["seq"] as? Int } }

    /// The jobs the broker accepted.
    var acceptedJobs: Set<String> { Set(of("accepted").compactMap { $0["job"] as? String }) }

    /// How many `stored` events each job has.
    var storedCounts: [String: Int] {
        of("stored").reduce(into: [:]) { counts, event in counts[event["job"] as? String ?? "", default: 0] += 1 }
    }

    /// A short line per event, for failure messages.
    static func describe(_ events: [[String: Any]]) -> String {
        events.map { event in
            let error = (event["error"] as? [String: Any]).map { " \($0["code"] ?? "") \($0["reason"] ?? "")" } ?? ""
            return "#\(event["seq"] ?? "?") \(event["kind"] ?? "?") \(event["job"] ?? "?") attempt \(event["attempt"] ?? "?") \(event["worker"] ?? "")\(error)"
        }.joined(separator: "\n")
    }
}

/// Test fixtures made in code.
enum Fixtures {
    /// A JPEG of noisy pixels: a smooth gradient with uniform noise of
    /// `noise` levels on each channel, encoded at `quality`. Noise is what
    /// makes a JPEG large for its size, so a modest picture gives a big
    /// file (1600×1200, noise 40, quality 95: about 2.1 MB).
    static func noisyJPEG(width: Int, height: Int, noise: Int, quality: Int = 95, seed: UInt64 = 1) throws -> [UInt8] {
        var pixels = [UInt8](repeating: 255, count: width * height * Image.bytesPerPixel)
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        let span = UInt64(max(1, noise))
        pixels.withUnsafeMutableBufferPointer { buffer in
            var i = 0
            for y in 0..<height {
                for x in 0..<width {
                    state ^= state << 13
                    state ^= state >> 7
                    state ^= state << 17
                    let red = (x * 160) / width + 40
                    let green = (y * 160) / height + 40
                    let blue = ((x + y) * 80) / (width + height) + 80
                    for (c, base) in [red, green, blue].enumerated() {
                        let jitter = Int((state >> UInt64(c * 16)) % span) - Int(span / 2)
                        buffer[i + c] = UInt8(clamping: base + jitter)
                    }
                    i += 4
                }
            }
        }
        return try JPEG.encode(Image(width: width, height: height, pixels: pixels), options: EncodeOptions(quality: quality))
    }
}

/// Sends PING on the broker's frontend every `interval` over its own DEALER,
/// on a thread of its own, and keeps every round trip: how long a client
/// waits for the broker to answer while the test loads it.
final class PingProbe: Sendable {
    struct Summary: CustomStringConvertible {
        var roundTrips: [Double]
        /// PINGs that got no PONG within the timeout.
        var lost: Int

        private var sorted: [Double] { roundTrips.sorted() }
        func percentile(_ p: Double) -> Double {
            let s = sorted
            guard !s.isEmpty else { return .nan }
            let rank = Int((p / 100 * Double(s.count)).rounded(.up))
            return s[min(s.count - 1, Swift.max(0, rank - 1))]
        }
        var p50: Double { percentile(50) }
        var p99: Double { percentile(99) }
        var max: Double { roundTrips.max() ?? .nan }

        var description: String {
            String(format: "%d PINGs, %d lost; round trip p50 %.2f ms, p99 %.2f ms, max %.2f ms", roundTrips.count + lost, lost, p50, p99, max)
        }
    }

    private struct State: Sendable {
        var roundTrips: [Double] = []
        var lost = 0
        var stopping = false
        var failure: String?
    }

    private let state = Locked(State())
    private let finished = DispatchSemaphore(value: 0)

    /// Starts probing `endpoint` at once.
    init(endpoint: String, interval: Duration = .milliseconds(20), timeout: Duration = .seconds(2)) {
        let thread = Thread { [state, finished] in
            defer { finished.signal() }
            do {
                let context = try Context()
                let dealer = try context.socket(.dealer)
                defer {
                    dealer.close()
                    context.close()
                }
                try dealer.setLinger(milliseconds: 0)
                try dealer.setReceiveTimeout(milliseconds: Int(timeout.inSeconds * 1_000))
                try dealer.connect(endpoint)
                let clock = ContinuousClock()
                var id: UInt64 = 0
                while !state.withLock({ $0.stopping }) {
                    id += 1
                    let sent = clock.now
                    try dealer.send(Ping(requestID: id).frames())
                    var answered = false
                    while !answered, let frames = try dealer.receive() {
                        if case .pong(let pong)? = try? FrontendMessage.decode(frames), pong.requestID == id { answered = true }
                    }
                    let milliseconds = (clock.now - sent).inSeconds * 1_000
                    state.withLock { answered ? $0.roundTrips.append(milliseconds) : ($0.lost += 1) }
                    let next = sent + interval
                    if clock.now < next { Thread.sleep(forTimeInterval: (next - clock.now).inSeconds) }
                }
            } catch {
                state.withLock { $0.failure = "\(error)" }
            }
        }
        thread.name = "ping-probe"
        thread.start()
    }

    /// Stops probing and returns what was measured.
    func stop() throws -> Summary {
        state.withLock { $0.stopping = true }
        finished.wait()
        let final = state.withLock { $0 }
        if let failure = final.failure { throw HarnessError("the PING probe failed: \(failure)") }
        return Summary(roundTrips: final.roundTrips, lost: final.lost)
    }
}

extension Duration {
    /// The duration in seconds, with its fraction.
    fileprivate var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// A small tmpfs mounted in a fresh temporary directory, for running the
/// broker's disk out of space for real.
struct Tmpfs {
    let directory: String

    /// Whether this process may mount one: root with CAP_SYS_ADMIN, as in CI.
    /// Found by trying once, since being uid 0 in a container is not enough.
    static let canMount: Bool = {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/bin/mount") else { return false }
        guard let probe = try? Tmpfs(size: "64k") else { return false }
        probe.unmount()
        return true
    }()

    init(size: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("darkroom-tmpfs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard Tmpfs.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", directory]) else {
            try? FileManager.default.removeItem(atPath: directory)
            throw HarnessError("cannot mount a tmpfs on \(directory)")
        }
    }

    /// Bytes free on the file system.
    var freeBytes: Int {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return -1 }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    func unmount() {
        _ = Tmpfs.run("/bin/umount", [directory])
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func run(_ tool: String, _ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
