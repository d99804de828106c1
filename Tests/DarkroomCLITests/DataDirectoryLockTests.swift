import Foundation
import Testing

/// One broker and one storage node a data directory: a second one stops
/// before it reads anything there, and a holder killed with SIGKILL leaves
/// no claim behind.
@Suite("One server a data directory")
struct DataDirectoryLockTests {
    @Test("a second broker or storage node on a directory in use stops at once, naming the holder; the first goes on; after a SIGKILL the directory is free")
    func secondServerOnADirectoryStops() throws {
        let system = try SystemHarness()
        try system.startSystem(workers: [("w1", 1)])
        let data = system.dir.path("data")
        let brokerPID = try #require(system.processes["broker"]).processIdentifier
        let storePID = try #require(system.processes["store"]).processIdentifier
        let ports = try SystemHarness.freePorts(4).map { "tcp://127.0.0.1:\($0)" }

        // Under `timeout`: a second server that did start would serve on
        // until stopped (exit 124 then, not 1).
        func second(_ arguments: [String]) throws -> DarkroomProcess.Output {
            try Child.run("/usr/bin/timeout", ["20", DarkroomProcess.executable.path] + arguments)
        }
        let broker = try second(["broker", "--data", data, "--frontend", ports[0], "--backend", ports[1], "--events", ports[2]])
        #expect(broker.status == 1, "\(broker.stderr)")
        #expect(broker.stderr.contains("\(data)/broker is in use by another broker (pid \(brokerPID))"), "\(broker.stderr)")
        let store = try second(["store", "--data", data, "--bind", ports[3]])
        #expect(store.status == 1, "\(store.stderr)")
        #expect(store.stderr.contains("\(data)/store is in use by another storage node (pid \(storePID))"), "\(store.stderr)")

        // The servers that hold the directory never noticed.
        let images = try system.writeImages(4)
        let first = try system.run(["submit", images.path, "--ops", "grayscale", "--thumb", "32x32", "--wait"] + system.clientFlags)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdoutLines.filter { $0.hasPrefix("stored ") }.count == 4, "\(first.stdout)")

        // The kernel drops a killed holder's lock: the broker starts again
        // on its directory, with the jobs it had.
        system.signal("broker", SIGKILL)
        try system.startBroker()
        let seen = try system.run(["watch", "--from", "1", "--count", "12", "--duration", "30"] + system.clientFlags)
        #expect(seen.stdoutLines.filter { $0.contains("stored") }.count == 4, "\(seen.stdout)\n\(seen.stderr)")
    }
}
