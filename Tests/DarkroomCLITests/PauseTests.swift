import DarkroomZMQ
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `darkroom pause` and `resume` with real processes: jobs submitted while
/// dispatch is paused stay queued with a worker idle beside them, through a
/// broker SIGKILL, until `resume` lets them go.
@Suite("Pause and resume", .serialized)
struct PauseTests {
    static func queue(_ h: SystemHarness) throws -> [String: Any] {
        try h.status()["queue"] as? [String: Any] ?? [:]
    }

    @Test("jobs submitted while paused stay queued through a broker SIGKILL; resume stores them")
    func pausedThroughABrokerKill() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 2)])
        let paused = try h.run(["pause"] + h.brokerFlags)
        #expect(paused.status == 0, "\(paused.stderr)")
        #expect(paused.stdout.contains("dispatch paused"), "\(paused.stdout)")
        #expect(paused.stderr.contains("darkroom resume"), "\(paused.stderr)")
        let again = try h.run(["pause", "--json"] + h.brokerFlags)
        #expect(again.status == 0 && again.stdout.contains("\"changed\":false"), "\(again.stdout)\(again.stderr)")

        let inputs = try h.writeImages(3, name: "held")
        let submit = try h.run(["submit", inputs.path, "--ops", "grayscale", "--thumb", "32x32", "--json"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        let jobs = ScheduleTests.jobs(submit)
        try #require(jobs.count == 3, "\(submit.stdout)")
        // A worker with free slots is connected the whole time.
        Thread.sleep(forTimeInterval: 1.5)
        for job in jobs {
            let story = try JobStoryTests.story(h, job)
            #expect(story["state"] as? String == "queued", "\(story)")
        }
        let since = try #require((try Self.queue(h)["pausedSince"] as? NSNumber)?.uint64Value, "status --json shows the pause")
        // `jobs` lists them in the order workers will get them, and says why they wait.
        let listed = try h.run(["jobs"] + h.brokerFlags)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("dispatch: PAUSED since") && listed.stdout.contains("queued: 3 (in the order workers get them)"),
                "\(listed.stdout)")
        #expect(listed.stdout.contains("running: 0") && listed.stdout.contains("delayed: 0"), "\(listed.stdout)")
        let lines = SystemHarness.jsonLines(try h.run(["jobs", "queued", "--json"] + h.brokerFlags).stdout)
        #expect(lines.compactMap { $0["jobId"] as? String } == jobs.sorted(), "submission order within one priority: \(lines)")
        #expect(lines.compactMap { $0["position"] as? Int } == [1, 2, 3])
        let second = SystemHarness.jsonLines(try h.run(["jobs", "queued", "--offset", "1", "--limit", "1", "--json"] + h.brokerFlags).stdout)
        #expect(second.compactMap { $0["jobId"] as? String } == [jobs.sorted()[1]] && second.first?["position"] as? Int == 2)
        // Paging by cursor: the text listing names the next page's command,
        // and that command lists the jobs after the last one shown.
        let firstPage = try h.run(["jobs", "queued", "--limit", "2"] + h.brokerFlags)
        let next = try #require(firstPage.stdout.split(separator: "\n").first { $0.hasPrefix("next page: darkroom jobs queued --limit 2 --after ") },
                                "\(firstPage.stdout)")
        let cursor = String(next.split(separator: " ").last ?? "")
        #expect(cursor == (lines[1]["cursor"] as? String), "the second job's cursor: \(lines)")
        let after = SystemHarness.jsonLines(try h.run(["jobs", "queued", "--after", cursor, "--json"] + h.brokerFlags).stdout)
        #expect(after.compactMap { $0["jobId"] as? String } == [jobs.sorted()[2]] && after.first?["position"] as? Int == 3, "\(after)")
        let badCursor = try h.run(["jobs", "running", "--after", cursor] + h.brokerFlags)
        #expect(badCursor.status == 64 && badCursor.stderr.contains("--after takes the cursor of a running job"), "\(badCursor.stderr)")
        // A waiting job's story, and a wait for it, say why it waits.
        let story = try h.run(["job", jobs.sorted()[0]] + h.brokerFlags)
        #expect(story.status == 0 && story.stdout.contains("dispatch paused since"), "\(story.stdout)\(story.stderr)")
        #expect(story.stdout.contains("queued (next to go)"), "\(story.stdout)")
        #expect(try h.run(["job", jobs.sorted()[2]] + h.brokerFlags).stdout.contains("queued (3rd in line)"))
        let waited = try h.run(["job", jobs[0], "--wait", "--for", "1"] + h.clientFlags)
        #expect(waited.status == 2, "\(waited.stdout)\(waited.stderr)")
        #expect(waited.stderr.contains("dispatch is paused since"), "\(waited.stderr)")

        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        try h.startBroker(["--metrics", "127.0.0.1:0"])
        let metrics = try MetricsSystemTests.metricsPort(h, "broker")
        #expect(try HTTPProbe.scrape(port: metrics)["darkroom_broker_dispatch_paused"] == 1)
        let status = try h.run(["status"] + h.brokerFlags + h.storeFlags)
        #expect(status.stdout.contains("dispatch: PAUSED since"), "\(status.stdout)")
        #expect((try Self.queue(h)["pausedSince"] as? NSNumber)?.uint64Value == since, "the same pause after the kill")
        Thread.sleep(forTimeInterval: 1.5)
        for job in jobs {
            let story = try JobStoryTests.story(h, job)
            #expect(story["state"] as? String == "queued", "still queued after the restart: \(story)")
        }

        // A submit --wait while paused says why it waits, and ends once dispatch resumes.
        let more = try h.writeImages(1, name: "more")
        let waiting = try h.start("waiting-submit", ["submit", more.path, "--ops", "grayscale", "--thumb", "32x32", "--wait"] + h.clientFlags)
        try h.waitUntil("submit --wait says dispatch is paused") { h.log("waiting-submit").contains("dispatch is paused since") }

        let resumed = try h.run(["resume"] + h.brokerFlags)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("dispatch resumed: 4 ready job(s)"), "\(resumed.stdout)")
        waiting.waitUntilExit()
        #expect(waiting.terminationStatus == 0, "\(h.log("waiting-submit"))")
        let wait = try h.run(["job"] + jobs + ["--wait", "--for", "60", "--json"] + h.brokerFlags)
        #expect(wait.status == 0, "\(wait.stderr)")
        for job in jobs {
            let story = try JobStoryTests.story(h, job)
            #expect(story["state"] as? String == "stored", "\(story)")
        }
        #expect(try Self.queue(h)["pausedSince"] == nil)
        #expect(try HTTPProbe.scrape(port: metrics)["darkroom_broker_dispatch_paused"] == 0)
        let notPaused = try h.run(["resume"] + h.brokerFlags)
        #expect(notPaused.status == 0 && notPaused.stdout.contains("was not paused"), "\(notPaused.stdout)")
    }

    @Test("a producer key may not pause the broker; an admin key may", .enabled(if: Curve.isAvailable, "libzmq built without CURVE"))
    func onlyAdminsPause() throws {
        let system = try RefusedKeyTests.KeyedSystem()
        let h = system.h
        let producer = try h.run(["pause"] + h.brokerFlags + system.keyFlags("allow/producer.key_secret"))
        #expect(producer.status == 1, "\(producer.stdout)\(producer.stderr)")
        #expect(producer.stderr.contains("PAUSE needs a key with the role admin"), "\(producer.stderr)")
        let admin = try h.run(["pause", "--json"] + h.brokerFlags + system.keyFlags("allow/admin.key_secret"))
        #expect(admin.status == 0 && admin.stdout.contains("\"changed\":true"), "\(admin.stdout)\(admin.stderr)")
        let resume = try h.run(["resume", "--json"] + h.brokerFlags + system.keyFlags("allow/producer.key_secret"))
        #expect(resume.status == 1 && resume.stderr.contains("RESUME needs a key with the role admin"), "\(resume.stderr)")
    }

    /// Emptying the queue is an admin's act, as pausing it is; a producer
    /// still cancels a job of its own by id.
    @Test("a producer key may cancel one job but not every queued job; an admin key may", .enabled(if: Curve.isAvailable, "libzmq built without CURVE"))
    func onlyAdminsCancelTheQueue() throws {
        let system = try RefusedKeyTests.KeyedSystem()
        let h = system.h
        let producerKeys = system.keyFlags("allow/producer.key_secret")
        let input = try h.writeImages(3)
        let submit = try h.run(["submit", input.path, "--ops", "invert", "--json"] + h.clientFlags + producerKeys)
        try #require(submit.status == 0, "\(submit.stderr)")
        let jobs = SystemHarness.jsonLines(submit.stdout).compactMap { $0["job"] as? String }
        try #require(jobs.count == 3)
        let all = try h.run(["cancel", "--all-queued"] + h.brokerFlags + producerKeys)
        #expect(all.status == 1 && all.stderr.contains("CANCEL queued (every waiting job) needs a key with the role admin"), "\(all.stderr)")
        let one = try h.run(["cancel", jobs[0]] + h.brokerFlags + producerKeys)
        #expect(one.status == 0, "\(one.stderr)")
        let admin = try h.run(["cancel", "--all-queued", "--json"] + h.brokerFlags + system.keyFlags("allow/admin.key_secret"))
        #expect(admin.status == 0 && admin.stdout.contains("2"), "\(admin.stdout)\(admin.stderr)")
    }
}
