import DarkroomImage
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `submit --at` and `--in` with real processes: the broker holds a
/// scheduled job as delayed, through a SIGKILL, and no worker gets it before
/// its time.
@Suite("Scheduled jobs", .serialized)
struct ScheduleTests {
    static func nowMilliseconds() -> UInt64 { UInt64(Date().timeIntervalSince1970 * 1_000) }

    static func notBefore(_ story: [String: Any]) -> UInt64? { (story["notBefore"] as? NSNumber)?.uint64Value }

    static func jobs(_ submit: DarkroomProcess.Output) -> [String] {
        SystemHarness.jsonLines(submit.stdout).compactMap { $0["status"] as? String == "accepted" ? $0["job"] as? String : nil }
    }

    @Test("submit --in: the jobs wait delayed through a broker SIGKILL and start no earlier than their time")
    func delayedThroughABrokerKill() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        let inputs = try h.writeImages(2, name: "later")
        let before = Self.nowMilliseconds()
        let submit = try h.run(["submit", inputs.path, "--ops", "grayscale", "--thumb", "32x32", "--in", "8s", "--json"] + h.clientFlags)
        let after = Self.nowMilliseconds()
        try #require(submit.status == 0, "\(submit.stderr)")
        let jobs = Self.jobs(submit)
        try #require(jobs.count == 2, "\(submit.stdout)")
        var times: [String: UInt64] = [:]
        for job in jobs {
            let story = try JobStoryTests.story(h, job)
            #expect(story["state"] as? String == "delayed", "\(story)")
            let time = try #require(Self.notBefore(story), "\(story)")
            // Counted from each job's submit, by this machine's clock.
            #expect(time >= before + 8_000 && time <= after + 8_000, "\(time) not within \(before + 8_000)…\(after + 8_000)")
            times[job] = time
        }

        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        try h.startBroker()
        for job in jobs {
            let story = try JobStoryTests.story(h, job)
            #expect(Self.notBefore(story) == times[job], "the time survives the kill: \(story)")
            if Self.nowMilliseconds() + 500 < times[job] ?? 0 {
                #expect(story["state"] as? String == "delayed", "\(story)")
            }
        }
        let wait = try h.run(["job"] + jobs + ["--wait", "--for", "90", "--json"] + h.brokerFlags)
        #expect(wait.status == 0, "\(wait.stderr)")
        for job in jobs {
            let story = try JobStoryTests.story(h, job)
            #expect(story["state"] as? String == "stored", "\(story)")
            let attempts = JobStoryTests.attempts(story)
            #expect(attempts.count == 1, "\(story)")
            let started = (attempts.first?["started"] as? NSNumber)?.uint64Value ?? 0
            #expect(started >= times[job] ?? .max, "started at \(started), before its time \(times[job] ?? 0)")
        }
    }

    @Test("submit --at reads RFC 3339 times and Unix seconds; a time past runs at once; cancel takes scheduled jobs; bad values are usage errors")
    func atTimesAndUsage() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let input = try h.writeImages(1, name: "at")
        let cases: [(String, UInt64)] = [
            ("2030-01-01T00:00:00+01:00", 1_893_452_400_000),
            ("2028-02-29 12:00:00.25Z", 1_835_438_400_250),
            ("2031-07-04T09:30-04:30", 1_940_940_000_000),
            ("@1893456000", 1_893_456_000_000),
        ]
        for (text, expected) in cases {
            let submit = try h.run(["submit", input.path, "--ops", "grayscale", "--at", text, "--json"] + h.clientFlags)
            try #require(submit.status == 0, "\(text): \(submit.stderr)")
            let job = try #require(Self.jobs(submit).first, "\(submit.stdout)")
            let story = try JobStoryTests.story(h, job)
            #expect(story["state"] as? String == "delayed" && Self.notBefore(story) == expected, "\(text): \(story)")
        }
        let status = try h.run(["status", "--json"] + h.brokerFlags + h.storeFlags)
        let queue = SystemHarness.jsonLines(status.stdout).first?["queue"] as? [String: Any]
        #expect((queue?["delayed"] as? NSNumber)?.intValue == cases.count, "\(status.stdout)")
        let text = try h.run(["status"] + h.brokerFlags + h.storeFlags)
        #expect(text.stdout.contains("\(cases.count) delayed (retry backoff or scheduled)"), "\(text.stdout)")

        // A time already past: the job runs at once, while the others wait.
        try h.startWorker("w1")
        let past = try h.run(["submit", input.path, "--ops", "grayscale", "--at", "2020-01-01T00:00:00Z", "--wait"] + h.clientFlags)
        #expect(past.status == 0, "\(past.stderr)")
        let cancel = try h.run(["cancel", "--all-queued", "--json"] + h.brokerFlags)
        #expect(SystemHarness.jsonLines(cancel.stdout).first?["cancelled"] as? Int == cases.count, "\(cancel.stdout) \(cancel.stderr)")

        let usage: [([String], String)] = [
            (["--at", "tomorrow"], "--at must be a time with its zone"),
            (["--at", "2026-12-24T18:00:00"], "--at must be a time with its zone"),
            (["--at", "2027-02-29T00:00:00Z"], "--at must be a time with its zone"),
            (["--in", "5x"], "--in must be a duration"),
            (["--in", "30s1h"], "--in must be a duration"),
            (["--in", "999999999999d"], "--in must be a duration"),
            (["--in", "3651d"], "--in must be a duration"),
            (["--at", "@1", "--in", "1s"], "give one of them"),
        ]
        for (flags, message) in usage {
            let out = try h.run(["submit", input.path, "--ops", "grayscale"] + flags + h.clientFlags)
            #expect(out.status == 64 && out.stderr.contains(message), "\(flags): \(out.status) \(out.stderr)")
        }
    }

    @Test("a hot folder with --in: each file's job waits from its own submit")
    func hotFolderCountsFromEachFile() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let hot = h.dir.url.appendingPathComponent("hot")
        try FileManager.default.createDirectory(at: hot, withIntermediateDirectories: true)
        let follow = try h.start("follow", ["submit", "--follow", hot.path, "--ops", "grayscale", "--in", "1h", "--json"] + h.clientFlags,
                                 separateStderr: true)
        func accepted() -> [String] {
            SystemHarness.jsonLines(h.log("follow")).compactMap { $0["status"] as? String == "accepted" ? $0["job"] as? String : nil }
        }
        var dropped: [UInt64] = []
        for seed in 1...2 {
            dropped.append(Self.nowMilliseconds())
            try FollowFolderTests.jpeg(seed: UInt64(seed)).write(to: hot.appendingPathComponent("photo-\(seed).jpg"))
            try h.waitUntil("photo \(seed) is accepted") { accepted().count == seed }
            if seed == 1 { Thread.sleep(forTimeInterval: 2) }
        }
        let times = try accepted().map { job in try #require(Self.notBefore(try JobStoryTests.story(h, job))) }
        for (time, drop) in zip(times, dropped) {
            #expect(time >= drop + 3_600_000 && time < drop + 3_600_000 + 30_000, "\(time) for a file dropped at \(drop)")
        }
        #expect(times.count == 2 && times[1] >= times[0] + 2_000, "counted from each file, not from the start: \(times)")
        kill(follow.processIdentifier, SIGTERM)
        follow.waitUntilExit()
    }

    @Test("submit --expires-in: jobs held past their deadline end cancelled as job.expired, through a broker SIGKILL, and never run")
    func deadlinesThroughABrokerKill() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        // Dispatch held, so the jobs wait past their deadline with a worker idle.
        #expect(try h.run(["pause"] + h.brokerFlags).status == 0)
        let inputs = try h.writeImages(2, name: "late")
        let submit = try h.run(["submit", inputs.path, "--ops", "grayscale", "--thumb", "32x32", "--expires-in", "4s", "--json"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        let jobs = Self.jobs(submit)
        try #require(jobs.count == 2, "\(submit.stdout)")
        let shown = try h.run(["job", jobs[0]] + h.brokerFlags)
        #expect(shown.stdout.contains("expires") && shown.stdout.contains("not run unless a worker starts it by then"), "\(shown.stdout)")

        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        try h.startBroker(["--metrics", "127.0.0.1:0"])
        let metrics = try MetricsSystemTests.metricsPort(h, "broker")
        let wait = try h.run(["job"] + jobs + ["--wait", "--for", "30"] + h.brokerFlags)
        #expect(wait.status == 1, "ended, not stored: \(wait.stdout)\(wait.stderr)")
        #expect(wait.stdout.contains("cancelled: not started by its deadline"), "\(wait.stdout)")
        #expect(wait.stdout.contains("(job.expired)"), "\(wait.stdout)")
        for job in jobs {
            let story = try JobStoryTests.story(h, job)
            #expect(story["state"] as? String == "cancelled", "\(story)")
            let last = (story["events"] as? [[String: Any]])?.last
            #expect((last?["failure"] as? [String: Any])?["code"] as? String == "job.expired", "\(story)")
            #expect(JobStoryTests.attempts(story).isEmpty, "never started: \(story)")
        }
        let counted = try HTTPProbe.scrape(port: metrics)
        #expect(counted["darkroom_broker_jobs_expired_total"] == 2 && counted["darkroom_broker_jobs_cancelled_total"] == 2,
                "\(counted.filter { $0.key.contains("cancelled") || $0.key.contains("expired") })")

        // submit --wait says so, and exits 1.
        let one = try h.writeImages(1, name: "late-wait")
        let waited = try h.run(["submit", one.path, "--ops", "grayscale", "--thumb", "32x32", "--expires-in", "1s", "--wait"] + h.clientFlags)
        #expect(waited.status == 1, "\(waited.stderr)")
        #expect(waited.stderr.contains("cancelled") && waited.stderr.contains("not started by its deadline"), "\(waited.stderr)")

        #expect(try h.run(["resume"] + h.brokerFlags).status == 0)
        Thread.sleep(forTimeInterval: 1)
        #expect(try h.records().isEmpty, "an expired job never ran")
        let never = try h.run(["submit", one.path, "--ops", "grayscale", "--at", "2030-01-01T00:00:00Z", "--expires-at", "2029-01-01T00:00:00Z"] + h.clientFlags)
        #expect(never.status == 64 && never.stderr.contains("would never run"), "\(never.stderr)")
    }
}
