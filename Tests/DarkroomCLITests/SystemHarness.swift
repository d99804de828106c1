import DarkroomImage
import DarkroomZMQ
import Foundation
import Synchronization
import Testing

/// Runs real `darkroom` role processes on free loopback ports, for tests that
/// exercise the whole system the way a user deploys it.
final class SystemHarness {
    let dir: TemporaryDirectory
    let frontend: String
    let backend: String
    let events: String
    let store: String
    private(set) var processes: [String: Process] = [:]

    init() throws {
        dir = try TemporaryDirectory()
        let ports = try SystemHarness.freePorts(4)
        frontend = "tcp://127.0.0.1:\(ports[0])"
        backend = "tcp://127.0.0.1:\(ports[1])"
        events = "tcp://127.0.0.1:\(ports[2])"
        store = "tcp://127.0.0.1:\(ports[3])"
    }

    deinit {
        for process in processes.values where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Ports the kernel just handed out, released again for the roles to
    /// bind, and never handed out before in this test run. Tests run in
    /// parallel: a port one harness released and has not bound yet, or one
    /// whose broker a test killed and will start again, could otherwise
    /// come back from the kernel to another harness, whose clients would
    /// then reach the first test's broker.
    static func freePorts(_ count: Int) throws -> [Int] {
        let context = try Context()
        var sockets: [Socket] = []
        var ports: [Int] = []
        while ports.count < count {
            let socket = try context.socket(.router)
            try socket.bind("tcp://127.0.0.1:*")
            let endpoint = try socket.lastEndpoint()
            let port = Int(endpoint.split(separator: ":").last ?? "") ?? 0
            // Held while the search goes on, so the kernel gives another.
            sockets.append(socket)
            if handedOut.withLock({ $0.insert(port).inserted }) { ports.append(port) }
        }
        for socket in sockets { socket.close() }
        return ports
    }

    /// Every port `freePorts` has handed out in this process.
    private static let handedOut = Mutex<Set<Int>>([])

    var clientFlags: [String] { ["--broker", frontend, "--events", events] }
    var storeFlags: [String] { ["--store", store] }
    var brokerFlags: [String] { ["--broker", frontend] }

    /// Starts a role as a background process whose output goes to a log
    /// file. A role started again under the same name (a restart) appends
    /// to the same log, which then tells the whole story of that role.
    /// With `separateStderr`, stderr goes to `NAME.err` instead (read it
    /// with `errors(NAME)`), for a client whose stdout is its result.
    @discardableResult
    func start(_ name: String, _ arguments: [String], separateStderr: Bool = false) throws -> Process {
        func appending(_ file: String) throws -> FileHandle {
            let url = dir.url.appendingPathComponent(file)
            if !FileManager.default.fileExists(atPath: url.path) {
                _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            }
            let handle = try FileHandle(forWritingTo: url)
            handle.seekToEndOfFile()
            return handle
        }
        let handle = try appending("\(name).log")
        let process = Process()
        process.executableURL = DarkroomProcess.executable
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = separateStderr ? try appending("\(name).err") : handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        processes[name] = process
        return process
    }

    /// Starts the broker on `data` (default: the harness's data directory)
    /// and waits until it answers.
    func startBroker(_ extra: [String] = [], data: String? = nil) throws {
        let broker = try start("broker", ["broker", "--data", data ?? dir.path("data"), "--frontend", frontend, "--backend", backend, "--events", events] + extra)
        try waitUntil("the broker answers") { try self.run(["status", "--check", "--only", "broker", "--broker", self.frontend, "--timeout", "1"]).status == 0 }
        // The answer was this broker's, not another's on a port it could not bind.
        #expect(broker.isRunning, "the broker exited: \(log("broker"))")
    }

    func startStore() throws {
        let node = try start("store", ["store", "--data", dir.path("data"), "--bind", store])
        try waitUntil("the store answers") { try self.run(["status", "--check", "--only", "store", "--store", self.store, "--timeout", "1"]).status == 0 }
        #expect(node.isRunning, "the storage node exited: \(log("store"))")
    }

    func startWorker(_ name: String, concurrency: Int = 1, grace: Int = 5, _ extra: [String] = []) throws {
        try start(name, ["worker", "--broker", backend, "--store", store, "--concurrency", String(concurrency), "--id", name, "--grace", String(grace)] + extra)
    }

    /// The broker and the storage node, each waited for until it answers,
    /// then a worker for each name, with its processing threads.
    func startSystem(workers: [(name: String, concurrency: Int)] = []) throws {
        try startBroker()
        try startStore()
        for worker in workers { try startWorker(worker.name, concurrency: worker.concurrency) }
    }

    func log(_ name: String) -> String {
        (try? String(contentsOf: dir.url.appendingPathComponent("\(name).log"), encoding: .utf8)) ?? ""
    }

    /// Runs a client command to completion.
    func run(_ arguments: [String]) throws -> DarkroomProcess.Output {
        try DarkroomProcess.run(arguments)
    }

    /// Sends a signal and waits for the process to exit; returns its status.
    @discardableResult
    func signal(_ name: String, _ sig: Int32) -> Int32 {
        guard let process = processes[name] else { return -1 }
        // An exited process's id may already belong to another.
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, sig)
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Polls `condition` until it holds or `timeout` passes.
    func waitUntil(_ what: String, timeout: Duration = .seconds(60), _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if (try? condition()) == true { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw HarnessError("timed out waiting until \(what)\n--- broker log ---\n\(log("broker").suffix(3000))\n--- store log ---\n\(log("store").suffix(1500))")
    }

    /// Writes `count` small JPEGs made in code into a fresh input directory.
    /// Waits until the broker's events show a job started (by `worker`,
    /// as the failure message names it).
    func waitUntilAJobStarts(_ worker: String) throws {
        try waitUntil("\(worker) starts a job") {
            let watch = try run(["watch", "--from", "1", "--duration", "1", "--json"] + clientFlags)
            return SystemHarness.jsonLines(watch.stdout).contains { $0["kind"] as? String == "started" }
        }
    }

    func writeImages(_ count: Int, name: String = "input", size: Size = Size(width: 160, height: 120)) throws -> URL {
        let folder = dir.url.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for i in 0..<count {
            let bytes = try JPEG.encode(SamplePhoto.render(size, seed: UInt64(i + 1)), options: EncodeOptions(quality: 85))
            try Data(bytes).write(to: folder.appendingPathComponent(String(format: "photo-%03d.jpg", i)))
        }
        return folder
    }

    /// Parses one JSON object per line.
    static func jsonLines(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { line in
            try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
    }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
