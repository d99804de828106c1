import DarkroomImage
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `submit --retries N` with real processes: a job's own retry budget
/// holds against the broker's, through a worker killed with SIGKILL.
@Suite("A job's own retries", .serialized)
struct RetriesTests {
    @Test("--retries 0: a job whose worker is killed with SIGKILL goes dead at once, where the broker's budget would retry it")
    func noRetryAfterAKilledWorker() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let input = try h.writeImages(2, size: Size(width: 800, height: 600))
        let ops = ["--ops", "blur:8 | scale:400x400,mode=fill | crop:square"]
        let once = try h.run(["submit", input.appendingPathComponent("photo-000.jpg").path, "--retries", "0", "--json"] + ops + h.clientFlags)
        try #require(once.status == 0, "\(once.stderr)")
        let job = try #require(SystemHarness.jsonLines(once.stdout).first?["job"] as? String)

        try h.startWorker("victim", ["--prefetch", "0"])
        try h.waitUntil("the job runs on the victim") {
            try JobStoryTests.story(h, job)["state"] as? String == "running"
        }
        h.signal("victim", SIGKILL)
        try h.waitUntil("the job is dead", timeout: .seconds(120)) {
            try JobStoryTests.story(h, job)["state"] as? String == "dead"
        }
        let story = try JobStoryTests.story(h, job)
        let attempts = JobStoryTests.attempts(story)
        #expect(attempts.count == 1, "\(story)")
        let failure = attempts.first?["failure"] as? [String: Any]
        #expect(failure?["code"] as? String == "worker.lost", "\(story)")
        let dead = SystemHarness.jsonLines(try h.run(["dead", "--json"] + h.brokerFlags).stdout)
        #expect(dead.contains { $0["jobId"] as? String == job && ($0["reason"] as? String ?? "").contains("gave up after 1 attempt(s)") }, "\(dead)")

        // The same kill without --retries: the broker's budget retries it.
        let plain = try h.run(["submit", input.appendingPathComponent("photo-001.jpg").path, "--json"] + ops + h.clientFlags)
        let other = try #require(SystemHarness.jsonLines(plain.stdout).first?["job"] as? String)
        try h.startWorker("victim-2", ["--prefetch", "0"])
        try h.waitUntil("the second job runs") { try JobStoryTests.story(h, other)["state"] as? String == "running" }
        h.signal("victim-2", SIGKILL)
        try h.startWorker("rescuer")
        try h.waitUntil("the second job is stored", timeout: .seconds(180)) {
            try JobStoryTests.story(h, other)["state"] as? String == "stored"
        }

        let usage = try h.run(["submit", input.path, "--retries", "1000"] + ops + h.clientFlags)
        #expect(usage.status == 64 && usage.stderr.contains("--retries"), "\(usage.stderr)")
    }
}
