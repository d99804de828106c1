import DarkroomImage
import Foundation
import Testing

/// `darkroom watch` and `submit --wait` across outages made for real: the
/// broker paused (SIGSTOP) longer than the client's timeout, killed and
/// started again on the same data, and the network cut by a proxy. Jobs
/// keep flowing throughout, so events are assigned before, during and
/// after each outage. Afterwards each watch's output is held against a
/// full replay of the broker's events.
extension FaultTests {
    /// Jobs a debug worker finishes in a moment, so events keep coming.
    static let quickOps = "scale:32x32"
    /// The watches' timeout: each outage below lasts longer.
    static let watchTimeout = 2

    /// A producer that keeps submitting three small JPEGs to the harness's broker.
    static func jobStream(_ h: SystemHarness) throws -> SubmitStream {
        let folder = try h.writeImages(3, name: "stream", size: Size(width: 64, height: 48))
        return SubmitStream(["submit", folder.path, "--ops", quickOps, "--thumb", "16x16", "--timeout", "2"] + h.clientFlags)
    }

    /// Starts `darkroom watch --json` under `name`, with `extra` flags.
    static func startWatch(_ name: String, _ h: SystemHarness, _ extra: [String]) throws {
        try h.start(name, ["watch", "--json", "--timeout", String(watchTimeout)] + extra, separateStderr: true)
    }

    /// Waits until each watch has said `count` times that the broker is
    /// back; records an issue if one has not within 20 s, and goes on, so
    /// that the output is still checked.
    static func waitForBack(_ watches: [String], count: Int, _ h: SystemHarness) {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if watches.allSatisfy({ WatchNotices(h.errors($0)).back.count >= count }) { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
        let stderr = watches.map { "[\($0)] \(h.errors($0))" }.joined(separator: "\n")
        Issue.record("the watches did not say \(count) time(s) that the broker is back:\n\(stderr)\n--- broker log ---\n\(h.log("broker").suffix(2000))")
    }

    /// Stops the producer, waits until every watch has printed the broker's
    /// head as it is then, stops the watches and checks each against a
    /// full replay. Returns the checks by watch name.
    static func finish(_ watches: [String], _ stream: SubmitStream, _ h: SystemHarness) throws -> (checks: [String: WatchCheck], head: Int) {
        _ = stream.stop()
        let head = try h.headSeq()
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let lasts = watches.map { WatchCheck(h.log($0), replay: []).seqs.max() ?? 0 }
            if lasts.allSatisfy({ $0 >= head }) { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        for watch in watches { h.signal(watch, SIGTERM) }
        let replay = try h.replayLines()
        try #require(replay.count >= head)
        var checks: [String: WatchCheck] = [:]
        for watch in watches { checks[watch] = WatchCheck(h.log(watch), replay: replay) }
        return (checks, head)
    }

    /// Two watches, one live (no --from) and one from seq 1, follow a broker
    /// that is paused for 6 s and later killed and started again after 4 s
    /// down, while a worker runs and a producer submits throughout. Each
    /// prints every event from where it started exactly once and in order,
    /// each line as the replay has it, and says once per outage that the
    /// broker is not answering and once that it is back.
    @Test("watch, live and from seq 1, across a 6 s SIGSTOP and a SIGKILL with restart while jobs flow: every event printed once, in order; one notice each way per outage")
    func watchAcrossBrokerPauseAndKill() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("watch-w1", 2)])
        let stream = try Self.jobStream(h)
        defer { _ = stream.stop() }
        try h.waitUntil("events flow") { try h.headSeq() >= 10 }

        let watches = ["watch-live", "watch-all"]
        let headBefore = try h.headSeq()
        try Self.startWatch("watch-live", h, h.clientFlags)
        try Self.startWatch("watch-all", h, ["--from", "1"] + h.clientFlags)
        try h.waitUntil("both watches print") { watches.allSatisfy { !h.log($0).isEmpty } }
        Thread.sleep(forTimeInterval: 1.5)

        // Paused for longer than the watches' timeout: sockets stay
        // connected, nothing answers.
        h.pause("broker")
        Thread.sleep(forTimeInterval: 6)
        h.resume("broker")
        Self.waitForBack(watches, count: 1, h)
        Thread.sleep(forTimeInterval: 1.5)

        // Killed, down for 4 s, started again on the same data.
        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        Thread.sleep(forTimeInterval: 4)
        try h.startBroker()
        Self.waitForBack(watches, count: 2, h)
        Thread.sleep(forTimeInterval: 1.5)

        let (checks, head) = try Self.finish(watches, stream, h)
        let live = try #require(checks["watch-live"])
        let all = try #require(checks["watch-all"])
        #expect(live.isExact, "live watch: \(live)")
        #expect((live.first ?? 0) > headBefore && (live.last ?? 0) >= head, "live watch from \(live.first ?? 0) (head \(headBefore) before it started) to \(live.last ?? 0) (head \(head))")
        #expect(all.isExact, "watch --from 1: \(all)")
        #expect(all.first == 1 && (all.last ?? 0) >= head, "watch --from 1: \(all)")
        for watch in watches {
            let notices = WatchNotices(h.errors(watch))
            #expect(notices.lost.count == 2 && notices.back.count == 2 && notices.other.isEmpty, "[\(watch)] \(h.errors(watch))")
            #expect(notices.lost.allSatisfy { $0.contains("broker at \(h.frontend) not answering") }, "[\(watch)] \(h.errors(watch))")
            print("watch across SIGSTOP 6 s and SIGKILL + 4 s down [\(watch)]: \(checks[watch]!); silences \(notices.silences) s")
        }
    }

    /// The same through a TCP proxy that is cut for 6 s (every connection
    /// closed, new ones refused) and restored, while the broker itself runs
    /// on. A third watch, started live during the cut, waits for its first
    /// STATUS and starts at the head then. A `submit --wait` for jobs that
    /// finish during the cut keeps waiting and ends with every job stored.
    @Test("watch (live, from seq 1, started during the cut) and submit --wait through a TCP proxy cut for 6 s while jobs flow: every event printed once, in order; the wait ends with every job stored")
    func watchAcrossCutConnection() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("cut-w1", 2)])
        let frontend = try TCPProxy(to: SystemHarness.port(of: h.frontend))
        let events = try TCPProxy(to: SystemHarness.port(of: h.events))
        defer {
            frontend.stop()
            events.stop()
        }
        let proxied = ["--broker", frontend.endpoint, "--events", events.endpoint]
        let stream = try Self.jobStream(h)
        defer { _ = stream.stop() }
        try h.waitUntil("events flow") { try h.headSeq() >= 10 }

        let headBefore = try h.headSeq()
        try Self.startWatch("watch-live", h, proxied)
        try Self.startWatch("watch-all", h, ["--from", "1"] + proxied)
        try h.waitUntil("both watches print") { ["watch-live", "watch-all"].allSatisfy { !h.log($0).isEmpty } }

        // Jobs that take a second or two each: accepted before the cut,
        // stored during it.
        let slow = try h.writeImages(4, name: "slow", size: Size(width: 320, height: 240))
        try h.start("submit-wait", ["submit", slow.path, "--ops", Self.slowOps, "--thumb", "32x32", "--wait", "--json", "--timeout", String(Self.watchTimeout)] + proxied,
                    separateStderr: true)
        try h.waitUntil("the slow jobs are accepted") {
            SystemHarness.jsonLines(h.log("submit-wait")).filter { $0["status"] as? String == "accepted" }.count == 4
        }

        let connectionsBefore = frontend.accepted + events.accepted
        frontend.cut()
        events.cut()
        let headAtLateStart = try h.headSeq()
        try Self.startWatch("watch-late", h, proxied)
        Thread.sleep(forTimeInterval: 6)
        frontend.restore()
        events.restore()

        let watches = ["watch-live", "watch-all", "watch-late"]
        Self.waitForBack(watches, count: 1, h)
        let submit = try #require(h.processes["submit-wait"])
        try h.waitUntil("submit --wait ends", timeout: .seconds(60)) { !submit.isRunning }
        #expect(submit.terminationStatus == 0, "submit --wait: \(h.errors("submit-wait"))")
        let stored = SystemHarness.jsonLines(h.log("submit-wait")).filter { $0["kind"] as? String == "stored" }
        #expect(stored.count == 4, "submit --wait printed \(stored.count) stored events: \(h.log("submit-wait"))")
        Thread.sleep(forTimeInterval: 1.5)

        let (checks, head) = try Self.finish(watches, stream, h)
        let live = try #require(checks["watch-live"])
        let all = try #require(checks["watch-all"])
        let late = try #require(checks["watch-late"])
        #expect(live.isExact, "live watch: \(live)")
        #expect((live.first ?? 0) > headBefore && (live.last ?? 0) >= head, "live watch from \(live.first ?? 0) (head \(headBefore) before it started) to \(live.last ?? 0) (head \(head))")
        #expect(all.isExact, "watch --from 1: \(all)")
        #expect(all.first == 1 && (all.last ?? 0) >= head, "watch --from 1: \(all)")
        #expect(late.isExact, "watch started during the cut: \(late)")
        let lateNotices = WatchNotices(h.errors("watch-late"))
        #expect((late.first ?? 0) > headAtLateStart && late.first == lateNotices.resumeSeqs.first,
                "watch started during the cut (head \(headAtLateStart)): \(late); \(h.errors("watch-late"))")
        #expect(lateNotices.lost.first?.contains("watch starts after its newest event once it is back") == true, "\(h.errors("watch-late"))")
        for watch in watches {
            let notices = WatchNotices(h.errors(watch))
            #expect(notices.lost.count == 1 && notices.back.count == 1 && notices.other.isEmpty, "[\(watch)] \(h.errors(watch))")
            #expect(notices.lost.allSatisfy { $0.contains("broker at \(frontend.endpoint) not answering") }, "[\(watch)] \(h.errors(watch))")
            print("watch across a 6 s cut [\(watch)]: \(checks[watch]!); silences \(notices.silences) s")
        }
        // They came back through the proxy, on new connections.
        #expect(frontend.accepted + events.accepted > connectionsBefore)
    }
}
