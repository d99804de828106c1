import DarkroomCore
import DarkroomProtocol
import DarkroomWorker
import DarkroomZMQ
import Foundation
import Testing

/// A clean stop tells the broker at once: every unfinished job comes back
/// as FAIL `worker.shutdown`, then DISCONNECT, so the broker requeues the
/// jobs and forgets the worker without waiting out the heartbeat timeout.
@Suite("Worker stops")
struct StopTests {
    /// The FAIL for `job` and the DISCONNECT, from `identity`, both by `deadline`.
    static func expectHandBackAndDisconnect(_ broker: TestBroker, identity: [UInt8], job: JobDispatch, by deadline: Date,
                                            round: Int, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fail = try broker.next(seconds: max(0, deadline.timeIntervalSinceNow))
        guard let fail, case .fail(let handedBack) = fail.message else {
            Issue.record("round \(round): no FAIL within the second after the stop, got \(String(describing: fail?.message))",
                         sourceLocation: sourceLocation)
            return
        }
        #expect(fail.identity == identity, sourceLocation: sourceLocation)
        #expect(handedBack.jobID == job.jobID && handedBack.attempt == job.attempt, sourceLocation: sourceLocation)
        #expect(handedBack.retryable && handedBack.failure.code == "worker.shutdown", sourceLocation: sourceLocation)
        let disconnect = try broker.next(seconds: max(0, deadline.timeIntervalSinceNow))
        #expect(disconnect?.identity == identity, "round \(round)", sourceLocation: sourceLocation)
        #expect(disconnect?.message == .disconnect, "round \(round): no DISCONNECT within the second after the stop",
                sourceLocation: sourceLocation)
    }

    @Test func everyStopHandsBackThenDisconnectsWithinASecond() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        for round in 1...20 {
            let worker = try makeWorker(context, broker: broker, store: store.endpoint, concurrency: 1)
            let session = try #require(try broker.handshake())
            let job = Fixture.job(attempt: UInt32(round))
            try broker.send(.job(job), to: session.identity)
            _ = try #require(try store.nextStore())

            let stopped = Date()
            worker.stop(grace: .milliseconds(20))
            try Self.expectHandBackAndDisconnect(broker, identity: session.identity, job: job,
                                                 by: stopped.addingTimeInterval(1), round: round)
        }
    }

    /// The same through a real `darkroom worker` process and SIGTERM: the
    /// process exits right after the worker stops, so the FAIL and the
    /// DISCONNECT must have left before it does.
    @Test(.enabled(if: DarkroomExecutable.url != nil, "needs the darkroom executable built next to the tests"))
    func sigtermedWorkerProcessSaysDisconnectBeforeItExits() throws {
        let executable = try #require(DarkroomExecutable.url)
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let logs = FileManager.default.temporaryDirectory.appendingPathComponent("darkroom-worker-stop-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: logs) }
        for round in 1...20 {
            _ = FileManager.default.createFile(atPath: logs.path, contents: nil)
            let log = try FileHandle(forWritingTo: logs)
            defer { try? log.close() }
            let process = Process()
            process.executableURL = executable
            process.arguments = ["worker", "--broker", broker.endpoint, "--store", store.endpoint,
                                 "--concurrency", "1", "--prefetch", "0", "--grace", "0"]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = log
            try process.run()
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

            let session = try #require(try broker.handshake())
            #expect(session.ready.pid == UInt32(process.processIdentifier))
            let job = Fixture.job(attempt: UInt32(round))
            try broker.send(.job(job), to: session.identity)
            _ = try #require(try store.nextStore())

            let signalled = Date()
            process.terminate()  // SIGTERM
            try Self.expectHandBackAndDisconnect(broker, identity: session.identity, job: job,
                                                 by: signalled.addingTimeInterval(1), round: round)
            process.waitUntilExit()
            #expect(process.terminationReason == .exit && process.terminationStatus == 0, "round \(round)")
            let output = String(decoding: (try? Data(contentsOf: logs)) ?? Data(), as: UTF8.self)
            #expect(output.contains("longest broker silence"), "round \(round): \(output)")
        }
    }
}

/// The `darkroom` executable of this build: `DARKROOM_BIN` if set, else the
/// one next to the test bundle, else the package's debug build.
enum DarkroomExecutable {
    static let url: URL? = {
        let files = FileManager.default
        if let path = ProcessInfo.processInfo.environment["DARKROOM_BIN"] {
            return files.isExecutableFile(atPath: path) ? URL(fileURLWithPath: path) : nil
        }
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent("darkroom")
            if files.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let built = root.appendingPathComponent(".build/debug/darkroom")
        return files.isExecutableFile(atPath: built.path) ? built : nil
    }()
}
