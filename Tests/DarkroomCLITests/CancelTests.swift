import DarkroomImage
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `darkroom cancel` with real processes: a queued job and a running one
/// (a large image through a slow pipeline) both end cancelled, nothing is
/// stored for them, and the worker goes on to its next job.
@Suite("Cancel", .serialized)
struct CancelTests {
    @Test("a running job and a queued one end cancelled, store nothing, and the worker takes its next job")
    func runningAndQueued() throws {
        let h = try SystemHarness()
        try h.startSystem()
        try h.startWorker("w", concurrency: 1, ["--prefetch", "0"])
        let slow = try h.writeImages(2, name: "slow", size: Size(width: 800, height: 600))
        let submit = try h.run(["submit", slow.path, "--ops", "blur:8 | scale:300x300", "--json"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        let small = try h.writeImages(1, name: "small")
        let after = try h.run(["submit", small.path, "--ops", "invert", "--json"] + h.clientFlags)
        try #require(after.status == 0, "\(after.stderr)")
        let ids = SystemHarness.jsonLines(submit.stdout + after.stdout).compactMap { $0["job"] as? String }
        try #require(ids.count == 3)
        // The two slow jobs are answered together and printed in the order
        // the answers are read, which need not be the order they run in:
        // the one that runs first is found by its state.
        let last = ids[2]
        var (running, queued) = ("", "")
        try h.waitUntil("one of the slow jobs runs") {
            for (one, other) in [(ids[0], ids[1]), (ids[1], ids[0])] where try JobStoryTests.story(h, one)["state"] as? String == "running" {
                (running, queued) = (one, other)
                return true
            }
            return false
        }
        // One slot, no prefetch: the other waits in the queue.
        #expect(try JobStoryTests.story(h, queued)["state"] as? String == "queued")

        // With --json: one object, no worker since it was queued.
        let cancelQueued = try h.run(["cancel", queued, "--json"] + h.brokerFlags)
        #expect(cancelQueued.status == 0, "\(cancelQueued.stderr)")
        let queuedObjects = SystemHarness.jsonLines(cancelQueued.stdout)
        #expect(queuedObjects.count == 1 && queuedObjects.first?["job"] as? String == queued, "\(cancelQueued.stdout)")
        #expect(queuedObjects.first?["status"] as? String == "cancelled")
        #expect(queuedObjects.first?["worker"] is NSNull, "\(cancelQueued.stdout)")

        let cancelRunning = try h.run(["cancel", running, "--timeout", "60"] + h.brokerFlags)
        #expect(cancelRunning.status == 0, "\(cancelRunning.stderr)")
        #expect(cancelRunning.stdout.contains("cancelled \(running) on worker w"), "\(cancelRunning.stdout)")

        // The worker goes on with the last job, which is stored.
        try h.waitUntil("the last job is stored", timeout: .seconds(300)) {
            try JobStoryTests.story(h, last)["state"] as? String == "stored"
        }
        let records = SystemHarness.jsonLines(try h.run(["ls", "--all", "--json"] + h.storeFlags).stdout)
        #expect(records.compactMap { $0["jobId"] as? String } == [last], "nothing stored for the cancelled jobs")

        for id in [running, queued] {
            let story = try JobStoryTests.story(h, id)
            #expect(story["state"] as? String == "cancelled")
            #expect(story["recordId"] == nil)
        }
        let runningStory = try JobStoryTests.story(h, running)
        #expect(JobStoryTests.attempts(runningStory).last?["outcome"] as? String == "cancelled")
        #expect(JobStoryTests.attempts(runningStory).last?["worker"] as? String == "w")
        #expect(JobStoryTests.attempts(try JobStoryTests.story(h, queued)).isEmpty)
        let human = try h.run(["job", running] + h.brokerFlags)
        #expect(human.stdout.contains("job \(running)  cancelled"), "\(human.stdout)")

        // Never retried, never dead; the events say cancelled once each.
        let events = SystemHarness.jsonLines(try h.run(["watch", "--from", "0", "--duration", "2", "--json"] + h.clientFlags).stdout)
        #expect(events.filter { $0["kind"] as? String == "cancelled" }.compactMap { $0["job"] as? String }.sorted() == [running, queued].sorted())
        #expect(!events.contains { ["retrying", "dead"].contains($0["kind"] as? String ?? "") })
        #expect(try h.run(["dead", "--json"] + h.brokerFlags).stdout.isEmpty)

        // A stored job cannot be cancelled; nor can one cancelled already.
        let tooLate = try h.run(["cancel", last] + h.brokerFlags)
        #expect(tooLate.status == 1)
        #expect(tooLate.stderr.contains("already stored"), "\(tooLate.stderr)")
        // With --json each id gets its object, a refusal with its reason,
        // and one refused does not stop the next.
        let mixed = try h.run(["cancel", last, queued, "--json"] + h.brokerFlags)
        #expect(mixed.status == 1)
        let refusals = SystemHarness.jsonLines(mixed.stdout)
        #expect(refusals.compactMap { $0["job"] as? String } == [last, queued], "\(mixed.stdout)")
        #expect(refusals.allSatisfy { $0["status"] as? String == "refused" }, "\(mixed.stdout)")
        let reasons = refusals.map { $0["reason"] as? String ?? "" }
        #expect(reasons.first?.contains("already stored") == true, "\(mixed.stdout)")
        #expect(reasons.last?.contains("already cancelled") == true, "\(mixed.stdout)")
        let again = try h.run(["cancel", queued] + h.brokerFlags)
        #expect(again.status == 1 && again.stderr.contains("already cancelled"), "\(again.stderr)")
        #expect(try h.run(["cancel"] + h.brokerFlags).status == 64)
    }

    @Test("a cancel asked of a running job outlives a SIGKILL of the broker: its worker is asked again and nothing is stored")
    func pendingCancelOutlivesABrokerKill() throws {
        let h = try SystemHarness()
        try h.startSystem()
        // The worker reaches the broker through a proxy that can hold the
        // broker's messages back while both ends stay connected.
        let proxy = try TCPProxy(to: SystemHarness.port(of: h.backend))
        defer { proxy.stop() }
        try h.start("w", ["worker", "--broker", proxy.endpoint, "--store", h.store, "--concurrency", "1", "--id", "w", "--prefetch", "0"])
        let slow = try h.writeImages(1, name: "slow", size: Size(width: 1600, height: 1200))
        let submit = try h.run(["submit", slow.path, "--ops", "blur:8 | scale:300x300", "--json"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        let job = try #require(SystemHarness.jsonLines(submit.stdout).first?["job"] as? String)
        try h.waitUntil("the job runs") { try JobStoryTests.story(h, job)["state"] as? String == "running" }

        // CANCEL-JOB leaves the broker but does not reach the worker, and
        // the broker is killed before the worker could have answered.
        proxy.stall()
        let cancel = try h.run(["cancel", job, "--timeout", "1"] + h.brokerFlags)
        #expect(cancel.status == 1 && cancel.stderr.contains("has not stopped it"), "\(cancel.stderr)")
        #expect(h.log("broker").contains("job \(job) attempt 1: asking worker w to stop it"))
        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        proxy.cut()
        proxy.unstall()
        proxy.restore()

        // The restarted broker still knows the job is being cancelled; the
        // worker comes back holding it, is asked again, and stops it.
        try h.startBroker()
        // (Its worker may have come back and stopped it already.)
        let after = try JobStoryTests.story(h, job)["state"] as? String
        #expect(after == "cancelling" || after == "cancelled", "state \(after ?? "?") right after the restart")
        try h.waitUntil("the job ends", timeout: .seconds(180)) {
            !["running", "cancelling"].contains(try JobStoryTests.story(h, job)["state"] as? String ?? "")
        }
        let story = try JobStoryTests.story(h, job)
        #expect(story["state"] as? String == "cancelled", "\(story)")
        #expect(JobStoryTests.attempts(story).last?["outcome"] as? String == "cancelled")
        #expect(h.log("broker").contains("job \(job) attempt 1: asking worker w again to stop it"), "\(h.log("broker"))")
        #expect(try h.records().isEmpty, "nothing stored for the cancelled job")
        let events = try h.allEvents()
        #expect(events.filter { $0["kind"] as? String == "cancelled" }.count == 1)
        #expect(!events.contains { ["stored", "retrying", "dead"].contains($0["kind"] as? String ?? "") }, "\(events)")
    }

    @Test("--all-queued cancels every waiting job and submit --wait reports them cancelled")
    func allQueued() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let input = try h.writeImages(4)
        // No worker: every job waits. submit --wait follows them until they end.
        let waiting = try h.start("submit", ["submit", input.path, "--ops", "invert", "--wait", "--json", "--timeout", "30"] + h.clientFlags,
                                  separateStderr: true)
        try h.waitUntil("four jobs wait") {
            let status = try h.run(["status", "--json"] + h.brokerFlags)
            return (SystemHarness.jsonLines(status.stdout).first?["queue"] as? [String: Any]).map {
                ($0["ready"] as? [Int] ?? []).reduce(0, +) == 4
            } ?? false
        }
        let cancel = try h.run(["cancel", "--all-queued"] + h.brokerFlags)
        #expect(cancel.status == 0)
        #expect(cancel.stderr.contains("cancelled 4 queued job(s)"), "\(cancel.stderr)")
        let none = try h.run(["cancel", "--all-queued", "--json"] + h.brokerFlags)
        #expect(none.status == 0)
        #expect(SystemHarness.jsonLines(none.stdout).first?["cancelled"] as? Int == 0, "\(none.stdout)")
        waiting.waitUntilExit()
        #expect(waiting.terminationStatus == 1, "cancelled jobs are not stored")
        #expect(h.errors("submit").contains("4 cancelled"), "\(h.errors("submit"))")
    }

    /// The broker paused (SIGSTOP) before `cancel` connects: no CANCEL can
    /// reach it, cancel says so of every id, and nothing is cancelled once
    /// the broker is back.
    @Test("cancel against a broker that does not answer: nothing sent, every id named, the jobs still queued after it resumes")
    func brokerNotAnswering() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let input = try h.writeImages(3)
        // No worker: the jobs wait.
        let submit = try h.run(["submit", input.path, "--ops", "invert", "--json"] + h.clientFlags)
        #expect(submit.status == 0, "\(submit.stderr)")
        let jobs = SystemHarness.jsonLines(submit.stdout).compactMap { $0["job"] as? String }
        try #require(jobs.count == 3)

        let (status, errors) = try h.runWhilePaused("broker", "cancel", ["cancel"] + jobs + ["--timeout", "2"] + h.brokerFlags)
        #expect(status == 1)
        #expect(errors.contains("\(jobs[0]): not cancelled: no answer from the broker"), "\(errors)")
        #expect(errors.contains("3 not sent, the broker not answering: \(jobs.joined(separator: " "))"), "\(errors)")
        // With --json: an object for each id, each not sent, and stderr quiet.
        try h.waitUntilAnswering("broker")
        let (jsonStatus, jsonErrors) = try h.runWhilePaused("broker", "cancel-json", ["cancel"] + jobs + ["--json", "--timeout", "2"] + h.brokerFlags)
        #expect(jsonStatus == 1)
        let objects = SystemHarness.jsonLines(h.log("cancel-json"))
        #expect(objects.compactMap { $0["job"] as? String } == jobs, "\(h.log("cancel-json"))")
        #expect(objects.allSatisfy { $0["status"] as? String == "not_sent" }, "\(h.log("cancel-json"))")
        let firstReason = objects.first?["reason"] as? String ?? ""
        #expect(firstReason.contains("no answer from the broker"), "\(h.log("cancel-json"))")
        #expect(!jsonErrors.contains("not sent"), "\(jsonErrors)")

        try h.waitUntilAnswering("broker")
        Thread.sleep(forTimeInterval: 1)
        for job in jobs {
            let story = try h.run(["job", job, "--json"] + h.brokerFlags)
            let state = SystemHarness.jsonLines(story.stdout).first?["state"] as? String
            #expect(state == "queued" || state == "ready", "\(job): \(state ?? story.stderr)")
        }
    }
}
