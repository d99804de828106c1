import Foundation
import Testing

/// Commands that ask one question and quit, run where nothing listens:
/// they say so once the connection attempts have failed for about a second,
/// not after the whole `--timeout`, and name the endpoint and what to start.
@Suite("Nothing listening")
struct NothingListeningTests {
    @Test("status, jobs, dead, ls and status --check give up on refused connections long before a 60 s timeout")
    func refusedConnectionsEndTheWait() throws {
        let ports = try SystemHarness.freePorts(2)
        let broker = "tcp://127.0.0.1:\(ports[0])", store = "tcp://127.0.0.1:\(ports[1])"
        let commands: [(args: [String], names: String)] = [
            (["status", "--broker", broker, "--store", store], "the broker at \(broker)"),
            (["jobs", "--broker", broker], "the broker at \(broker)"),
            (["dead", "--broker", broker], "the broker at \(broker)"),
            (["ls", "--store", store], "the storage node at \(store)"),
        ]
        for command in commands {
            let started = ContinuousClock.now
            let out = try DarkroomProcess.run(command.args + ["--timeout", "60"])
            let took = ContinuousClock.now - started
            #expect(out.status == 1, "\(command.args): \(out.stderr)")
            #expect(out.stderr.contains("cannot connect to \(command.names): every attempt for"), "\(command.args): \(out.stderr)")
            #expect(out.stderr.contains("running?"), "says what to start: \(out.stderr)")
            // Not the 60 s timeout: the refusals ended the wait.
            #expect(took < .seconds(30), "\(command.args) took \(took)")
        }

        // Both servers are probed at once, and both named.
        let check = try DarkroomProcess.run(["status", "--check", "--broker", broker, "--store", store, "--timeout", "60"])
        #expect(check.status == 1)
        #expect(check.stderr.contains("broker: cannot connect to the broker at \(broker)"), "\(check.stderr)")
        #expect(check.stderr.contains("store: cannot connect to the storage node at \(store)"), "\(check.stderr)")
    }

    /// `submit` waits for a broker that may be restarting, but a first
    /// run with nothing listening must say what to start, and its
    /// `--deadline` ends the wait even when one send would wait longer
    /// (`--timeout`).
    @Test("submit with nothing listening names what to start and ends at its --deadline, not after --timeout")
    func submitSaysWhatToStartAndKeepsItsDeadline() throws {
        let scratch = try TemporaryDirectory()
        let photo = scratch.url.appendingPathComponent("photo.jpg")
        try Data(ProcessCommandTests.goodJPEG(width: 40, height: 30)).write(to: photo)
        let broker = "tcp://127.0.0.1:\(try SystemHarness.freePorts(1)[0])"
        let started = ContinuousClock.now
        let out = try DarkroomProcess.run(["submit", photo.path, "--ops", "grayscale", "--broker", broker,
                                           "--timeout", "60", "--deadline", "2"])
        let took = ContinuousClock.now - started
        #expect(out.status == 2, "\(out.stderr)")
        #expect(out.stderr.contains("broker at \(broker) not answering"), "\(out.stderr)")
        #expect(out.stderr.contains("is darkroom up or darkroom broker running?"), "\(out.stderr)")
        #expect(out.stderr.contains("never answered (never sent; not queued)"), "\(out.stderr)")
        // Not the 60 s of one send's timeout: the deadline ended it.
        #expect(took < .seconds(30), "took \(took)")
    }
}
