import DarkroomImage
import Foundation
import Testing

extension FaultTests {
    /// Three producers push 150 JPEGs of about 2 MB each (300 MB) at once
    /// into a broker with three workers that run one job at a time. The broker writes the
    /// inputs to disk on its core thread while its switchboard keeps every
    /// connection alive: no worker is ever declared dead, no worker gives
    /// up on the broker, no job is charged an attempt, and a client's PING
    /// is answered throughout, none lost and the 99th percentile within
    /// 250 ms. (The target, p99 under 100 ms, is measured in a release
    /// build by bench/system.sh: 10 ms. In this debug build on two shared
    /// cores the p99 ranged from 36 to 101 ms over CI runs; a socket
    /// thread held up by disk work, as before the broker was split, shows
    /// as seconds.)
    @Test("a 300 MB burst from three producers: every job stored on attempt 1, no worker silent, every PING answered")
    func burst() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let workers = ["burst-w1", "burst-w2", "burst-w3"]
        for worker in workers { try h.startWorker(worker, concurrency: 1, grace: 30) }
        try h.waitUntil("the three workers are ready") { (try h.status()["workers"] as? [Any])?.count == 3 }

        // One noisy picture of about 2 MB, written 150 times under different names.
        let photo = try Fixtures.noisyJPEG(width: 1600, height: 1200, noise: 40)
        #expect(photo.count >= 2_000_000 && photo.count <= 2_500_000, "the fixture is \(photo.count) bytes")
        let folders = try (1...3).map { try h.writeCopies(of: photo, 50, name: "burst\($0)") }
        print("burst: 3 × 50 inputs of \(photo.count) bytes, \(3 * 50 * photo.count / 1_000_000) MB in all")

        // A pipeline that shrinks on load (libjpeg decodes at 1/8 scale):
        // the workers are quick, the broker is the one under load.
        let ops = "scale:64x64,mode=fill | crop:square"
        let probe = PingProbe(endpoint: h.frontend)
        let started = ContinuousClock.now
        let submits = try h.runConcurrently(folders.map { folder in
            ["submit", folder.path, "--ops", ops, "--thumb", "32x32", "--wait", "--json", "--timeout", "30"] + h.clientFlags
        })
        let elapsed = ContinuousClock.now - started
        let pings = try probe.stop()

        var submitted: Set<String> = []
        for (index, submit) in submits.enumerated() {
            #expect(submit.status == 0, "submit \(index + 1) exited \(submit.status): \(submit.stderr.suffix(2000))")
            let lines = SystemHarness.jsonLines(submit.stdout)
            let accepted = Set(lines.filter { $0["status"] as? String == "accepted" }.compactMap { $0["job"] as? String })
            let stored = Set(lines.filter { $0["kind"] as? String == "stored" }.compactMap { $0["job"] as? String })
            #expect(accepted.count == 50 && stored == accepted, "submit \(index + 1): \(accepted.count) accepted, \(stored.count) stored")
            submitted.formUnion(accepted)
        }
        #expect(submitted.count == 150)
        let records = try h.records()
        #expect(records.count == 150 && Set(records.compactMap { $0["jobId"] as? String }) == submitted)

        // No job was charged an attempt: each started once, on attempt 1.
        let events = EventLog(try h.allEvents())
        #expect(events.seqs == Array(1...max(1, events.events.count)))
        #expect(events.of("failed").isEmpty && events.of("retrying").isEmpty,
                "\(EventLog.describe(events.of("failed") + events.of("retrying")))")
        #expect(events.of("started").count == 150 && events.of("started").allSatisfy { $0["attempt"] as? Int == 1 })
        #expect(events.storedCounts.count == 150 && events.storedCounts.values.allSatisfy { $0 == 1 })

        // Nobody was declared dead, and no worker gave up on the broker.
        #expect(h.logLines("broker", containing: "declared dead").isEmpty, "\(h.logLines("broker", containing: "declared dead"))")
        for worker in workers {
            #expect(h.logLines(worker, containing: "broker silent").isEmpty, "\(worker): \(h.logLines(worker, containing: "broker silent"))")
        }

        // Each worker, stopped, says how long the broker was ever silent towards it.
        var silences: [String] = []
        for worker in workers {
            #expect(h.signal(worker, SIGTERM) == 0)
            let silence = h.longestBrokerSilence(worker)
            silences.append("\(worker) \(silence.map { String(format: "%.2f s", $0) } ?? "?")")
            #expect(silence != nil && silence! < 1.5, "\(worker): longest broker silence \(silence.map { "\($0) s" } ?? "not logged")")
        }

        print("burst: 150 jobs stored in \(elapsed); PING: \(pings)")
        print("burst: longest broker silence: \(silences.joined(separator: ", "))")
        for stall in h.logLines("broker", containing: "was held up") { print("burst: broker: \(stall)") }
        #expect(pings.lost == 0, "\(pings)")
        #expect(pings.roundTrips.count >= 50, "\(pings)")
        #expect(pings.p99 < 250, "\(pings)")
    }
}
