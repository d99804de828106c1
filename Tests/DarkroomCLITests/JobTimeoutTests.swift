import DarkroomImage
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Time limits with real processes: a job that runs past the worker's
/// `--job-timeout`, or past its own `submit --time-limit`, is stopped in
/// the step it is in and ends dead with `job.timeout`; the job queued
/// behind it on the same thread is not charged for its wait, and the
/// worker goes on. A job's own limit is kept through a broker SIGKILL.
@Suite("Job time limit", .serialized)
struct JobTimeoutTests {
    @Test("a job past the worker's time limit ends dead with job.timeout in its step; the one waiting behind it is stored")
    func slowJobStopped() throws {
        let h = try SystemHarness()
        try h.startSystem()
        // One thread, so the small job waits on the worker (or in the
        // queue) while the slow one runs: its wait is not running time.
        // 5 s: the job behind the slow one runs under the same limit, and a
        // debug build on a CI machine busy with other suites once took 1.8 s
        // to invert and encode a 32x24 image. The slow job takes far longer.
        try h.startWorker("w", concurrency: 1, ["--job-timeout", "5", "--metrics", "127.0.0.1:0"])
        let slow = try h.writeImages(1, name: "slow", size: Size(width: 2000, height: 1500))
        let pipeline = Array(repeating: "blur:30", count: 12).joined(separator: " | ")
        let submitSlow = try h.run(["submit", slow.path, "--ops", pipeline, "--json"] + h.clientFlags)
        try #require(submitSlow.status == 0, "\(submitSlow.stderr)")
        // Tiny, so that it stays far within the limit.
        let small = try h.writeImages(1, name: "small", size: Size(width: 32, height: 24))
        let submitSmall = try h.run(["submit", small.path, "--ops", "invert", "--json"] + h.clientFlags)
        try #require(submitSmall.status == 0, "\(submitSmall.stderr)")
        let slowID = try #require(SystemHarness.jsonLines(submitSlow.stdout).first?["job"] as? String)
        let smallID = try #require(SystemHarness.jsonLines(submitSmall.stdout).first?["job"] as? String)

        try h.waitUntil("the slow job is dead", timeout: .seconds(120)) {
            try JobStoryTests.story(h, slowID)["state"] as? String == "dead"
        }
        do {
            try h.waitUntil("the small job is stored", timeout: .seconds(120)) {
                try JobStoryTests.story(h, smallID)["state"] as? String == "stored"
            }
        } catch {
            // Say how it ended, and what the worker logged, not only that it was not stored.
            Issue.record("the small job: \((try? JobStoryTests.story(h, smallID)) ?? [:]); worker log: \(h.log("w").suffix(2_000))")
            throw error
        }

        // One attempt, never retried: the same input would take as long again.
        let story = try JobStoryTests.story(h, slowID)
        let attempts = JobStoryTests.attempts(story)
        #expect(attempts.count == 1, "\(story)")
        let failure = try #require(attempts.last?["failure"] as? [String: Any], "\(story)")
        #expect(failure["code"] as? String == "job.timeout", "\(failure)")
        #expect((1...12).contains(failure["stepIndex"] as? Int ?? 0), "stopped in one of the blur steps: \(failure)")
        #expect(failure["step"] as? String == "blur:30", "\(failure)")
        #expect((failure["reason"] as? String)?.contains("time limit of 5 s (--job-timeout)") == true, "\(failure)")
        #expect(attempts.last?["worker"] as? String == "w")

        let metrics = try HTTPProbe.scrape(port: try MetricsSystemTests.metricsPort(h, "w"))
        #expect(metrics[#"darkroom_worker_jobs_timed_out_total{worker="w"}"#] == 1)
        #expect(metrics[#"darkroom_worker_jobs_failed_total{worker="w"}"#] == 1)

        // The person at the terminal reads the step and the reason.
        let dead = try h.run(["dead"] + h.brokerFlags)
        #expect(dead.stdout.contains(slowID) && dead.stdout.contains("blur:30") && dead.stdout.contains("--job-timeout"), "\(dead.stdout)")

        // Nothing stored for it; the worker is still up and takes more work.
        let records = SystemHarness.jsonLines(try h.run(["ls", "--all", "--json"] + h.storeFlags).stdout)
        #expect(records.compactMap { $0["jobId"] as? String } == [smallID])
        let more = try h.writeImages(2, name: "more")
        let after = try h.run(["submit", more.path, "--ops", "grayscale", "--wait"] + h.clientFlags)
        #expect(after.status == 0, "\(after.stdout)\(after.stderr)")
        #expect(after.stdout.split(separator: "\n").filter { $0.hasPrefix("stored ") }.count == 2, "\(after.stdout)")
    }

    @Test("submit --time-limit: the job's own limit, kept through a broker SIGKILL, stops it on a worker whose limit is longer")
    func jobsOwnLimit() throws {
        let h = try SystemHarness()
        try h.startBroker()
        try h.startStore()
        let slow = try h.writeImages(1, name: "slow", size: Size(width: 2000, height: 1500))
        let submit = try h.run(["submit", slow.path, "--ops", "blur:30 | blur:30 | blur:30", "--time-limit", "1s"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        #expect(submit.stderr.contains("an attempt that runs longer than 1 s on a worker is stopped"), "\(submit.stderr)")
        // Without --json, each accepted input is a line "JOB-ID PATH".
        let id = try #require(submit.stdout.split(separator: " ").first.map(String.init))

        // No worker yet: the job waits queued while the broker is killed.
        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        try h.startBroker()
        // Its story names the limit, read back from the queue.
        #expect(try JobStoryTests.story(h, id)["timeLimit"] as? Int == 1)
        let told = try h.run(["job", id] + h.brokerFlags)
        #expect(told.stdout.contains("limit     1 s per attempt (submit --time-limit)"), "\(told.stdout)")
        try h.startWorker("w", concurrency: 1)  // the default limit, 600 s
        try h.waitUntil("the job is dead", timeout: .seconds(120)) {
            try JobStoryTests.story(h, id)["state"] as? String == "dead"
        }
        let failure = try #require(JobStoryTests.attempts(try JobStoryTests.story(h, id)).last?["failure"] as? [String: Any])
        #expect(failure["code"] as? String == "job.timeout", "\(failure)")
        #expect(failure["step"] as? String == "blur:30", "\(failure)")
        #expect((failure["reason"] as? String)?.contains("the job's time limit of 1 s (submit --time-limit)") == true, "\(failure)")

        let bad = try h.run(["submit", slow.path, "--ops", "invert", "--time-limit", "1500ms"] + h.clientFlags)
        #expect(bad.status == 64 && bad.stderr.contains("--time-limit must be whole seconds"), "\(bad.stderr)")
    }

    @Test("wrong --job-timeout values are usage errors")
    func badValues() throws {
        let h = try SystemHarness()
        for value in ["-1", "x", "604801"] {
            let out = try h.run(["worker", "--job-timeout", value])
            #expect(out.status == 64, "--job-timeout \(value): \(out.stderr)")
            #expect(out.stderr.contains("--job-timeout"), "\(out.stderr)")
        }
    }
}
