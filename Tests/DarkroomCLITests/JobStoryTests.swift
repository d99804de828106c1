import DarkroomImage
import Foundation
import Testing

/// `darkroom job ID`: one job's story, read from the broker's event log by
/// job id, through a worker killed mid-job and a broker killed afterwards.
@Suite("One job's story", .serialized)
struct JobStoryTests {
    static func story(_ h: SystemHarness, _ id: String) throws -> [String: Any] {
        let out = try h.run(["job", id, "--json"] + h.brokerFlags)
        guard out.status == 0, let story = SystemHarness.jsonLines(out.stdout).first else {
            throw HarnessError("job \(id) --json exited \(out.status): \(out.stderr)")
        }
        return story
    }

    static func attempts(_ story: [String: Any]) -> [[String: Any]] {
        story["attempts"] as? [[String: Any]] ?? []
    }

    @Test("queued, then running on a worker killed with SIGKILL, then stored by another; the story survives a broker SIGKILL")
    func throughAKilledWorker() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let input = try h.writeImages(1, size: Size(width: 800, height: 600))
        let submit = try h.run(["submit", input.path, "--ops", "blur:8 | scale:400x400,mode=fill | crop:square", "--priority", "7", "--json"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        let id = try #require(SystemHarness.jsonLines(submit.stdout).first?["job"] as? String)

        // No worker yet: queued, no attempt, the canonical pipeline.
        let queued = try Self.story(h, id)
        #expect(queued["state"] as? String == "queued")
        #expect(Self.attempts(queued).isEmpty)
        #expect(queued["priority"] as? Int == 7)
        #expect((queued["pipeline"] as? String)?.hasPrefix("blur:") == true)
        #expect((queued["source"] as? String)?.hasSuffix("photo-000.jpg") == true)
        #expect(queued["complete"] as? Bool == true)

        try h.startWorker("victim")
        try h.waitUntil("the job runs on the victim") {
            let s = try Self.story(h, id)
            return s["state"] as? String == "running" && s["worker"] as? String == "victim"
        }
        h.signal("victim", SIGKILL)
        try h.startWorker("rescuer")
        try h.waitUntil("the job is stored", timeout: .seconds(180)) {
            try Self.story(h, id)["state"] as? String == "stored"
        }

        let stored = try Self.story(h, id)
        let attempts = Self.attempts(stored)
        #expect(attempts.count == 2, "\(attempts)")
        #expect(attempts.first?["worker"] as? String == "victim")
        #expect(attempts.first?["outcome"] as? String == "failed")
        #expect((attempts.first?["failure"] as? [String: Any])?["code"] as? String == "worker.lost")
        #expect(attempts.last?["worker"] as? String == "rescuer")
        #expect(attempts.last?["outcome"] as? String == "stored")
        #expect(attempts.map { $0["attempt"] as? Int } == [1, 2])
        let records = SystemHarness.jsonLines(try h.run(["ls", "--json"] + h.storeFlags).stdout)
        #expect(stored["recordId"] as? String == records.first?["id"] as? String)
        let seqs = (stored["events"] as? [[String: Any]] ?? []).compactMap { $0["seq"] as? Int }
        #expect(seqs == seqs.sorted() && seqs.count >= 5, "accepted, started, failed, retrying, started, stored: \(seqs)")
        #expect(stored["finished"] as? Int ?? 0 >= stored["submitted"] as? Int ?? .max)

        // The story is durable: the same after the broker is killed and restarted.
        h.signal("broker", SIGKILL)
        try h.startBroker()
        let again = try Self.story(h, id)
        #expect(again["state"] as? String == "stored")
        #expect(Self.attempts(again).count == 2)
        #expect(again["recordId"] as? String == stored["recordId"] as? String)

        // The human form names the state, each attempt's worker and outcome.
        let human = try h.run(["job", id] + h.brokerFlags)
        #expect(human.status == 0)
        #expect(human.stdout.contains("job \(id)  stored"), "\(human.stdout)")
        #expect(human.stdout.contains("attempt 1 on victim"), "\(human.stdout)")
        #expect(human.stdout.contains("failed: worker.lost"), "\(human.stdout)")
        #expect(human.stdout.contains("attempt 2 on rescuer"), "\(human.stdout)")
    }

    @Test("a job that dies shows its failing stage; an unknown job exits 1 and says so; a bad id is a usage error")
    func deadAndUnknown() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w", 1)])
        let input = try h.writeImages(1)
        let good = [UInt8](try Data(contentsOf: input.appendingPathComponent("photo-000.jpg")))
        try Data(good.prefix(good.count * 2 / 3)).write(to: input.appendingPathComponent("photo-000.jpg"))
        let submit = try h.run(["submit", input.path, "--ops", "invert", "--wait", "--json"] + h.clientFlags)
        #expect(submit.status == 1)
        let id = try #require(SystemHarness.jsonLines(submit.stdout).first?["job"] as? String)

        let dead = try Self.story(h, id)
        #expect(dead["state"] as? String == "dead")
        let failure = Self.attempts(dead).last?["failure"] as? [String: Any]
        #expect((failure?["code"] as? String)?.hasPrefix("image.") == true, "\(dead)")
        #expect((failure?["reason"] as? String)?.contains("truncated") == true, "\(dead)")
        #expect(dead["recordId"] == nil)

        let unknown = try h.run(["job", "01JBX3Z7Q8M4N6P2R5T9V0W1XY"] + h.brokerFlags)
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("no job 01JBX3Z7Q8M4N6P2R5T9V0W1XY"), "\(unknown.stderr)")
        #expect(try h.run(["job", "not-a-job"] + h.brokerFlags).status == 64)
    }

    /// `job --wait`, for a script that submitted without waiting: it
    /// returns when the jobs have ended, whenever that is, and its exit
    /// status says how.
    @Test("job --wait returns once its jobs are stored (0), at --for with them unfinished (2), at once for a cancelled one (1)")
    func waitForJobsSubmittedEarlier() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let input = try h.writeImages(3)
        let submit = try h.run(["submit", input.path, "--ops", "invert", "--json"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        let ids = SystemHarness.jsonLines(submit.stdout).compactMap { $0["job"] as? String }
        try #require(ids.count == 3)

        // No worker yet: --for ends the wait, and the stories show them queued.
        let early = try h.run(["job", ids[0], "--wait", "--for", "1", "--json"] + h.clientFlags)
        #expect(early.status == 2, "\(early.stderr)")
        #expect(early.stderr.contains("1 of 1 job(s) still unfinished after 1 s"), "\(early.stderr)")
        #expect(SystemHarness.jsonLines(early.stdout).first?["state"] as? String == "queued", "\(early.stdout)")

        let waiter = try h.start("waiter", ["job", ids[0], ids[1], "--wait", "--json"] + h.clientFlags, separateStderr: true)
        Thread.sleep(forTimeInterval: 1)
        #expect(waiter.isRunning, "job --wait returned before its jobs ran: \(h.log("waiter"))")
        #expect(try h.run(["cancel", ids[2]] + h.brokerFlags).status == 0)
        try h.startWorker("w", concurrency: 1)
        waiter.waitUntilExit()
        #expect(waiter.terminationStatus == 0, "\(h.errors("waiter"))")
        let stories = SystemHarness.jsonLines(h.log("waiter"))
        #expect(stories.compactMap { $0["jobId"] as? String } == [ids[0], ids[1]], "\(h.log("waiter"))")
        #expect(stories.allSatisfy { $0["state"] as? String == "stored" && $0["recordId"] != nil }, "\(h.log("waiter"))")

        // Ended before the wait began: shown at once, and not stored is exit 1.
        let cancelled = try h.run(["job", ids[2], "--wait"] + h.clientFlags)
        #expect(cancelled.status == 1)
        #expect(cancelled.stdout.contains("job \(ids[2])  cancelled"), "\(cancelled.stdout)")
        #expect(try h.run(["job", ids[0], "--for", "3"] + h.brokerFlags).status == 64)
    }

    /// The README promises that `job --wait` waits through broker
    /// outages; one already under way when it starts is no different
    /// (it failed at once with "cannot connect").
    @Test("job --wait started while the broker is down waits for it, says so, and shows the job stored")
    func waitStartedDuringAnOutage() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let input = try h.writeImages(1)
        let submit = try h.run(["submit", input.path, "--ops", "invert", "--json"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        let id = try #require(SystemHarness.jsonLines(submit.stdout).first?["job"] as? String)
        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        // With --for, the wait ends then: unfinished, as far as is known.
        let bounded = try h.run(["job", id, "--wait", "--for", "1"] + h.clientFlags)
        #expect(bounded.status == 2, "\(bounded.stderr)")
        #expect(bounded.stderr.contains("did not answer within --for 1 s; 1 job(s) not known to have ended"), "\(bounded.stderr)")

        let waiter = try h.start("waiter", ["job", id, "--wait", "--json"] + h.clientFlags, separateStderr: true)
        try h.waitUntil("job --wait says the broker is not answering") { h.errors("waiter").contains("not answering") }
        #expect(waiter.isRunning, "\(h.errors("waiter"))")
        try h.startBroker()
        try h.startWorker("w", concurrency: 1)
        waiter.waitUntilExit()
        #expect(waiter.terminationStatus == 0, "\(h.errors("waiter"))")
        #expect(h.errors("waiter").contains("job: broker at \(h.frontend) not answering"), "\(h.errors("waiter"))")
        #expect(h.errors("waiter").contains("job: broker back after"), "\(h.errors("waiter"))")
        let story = try #require(SystemHarness.jsonLines(h.log("waiter")).first)
        #expect(story["jobId"] as? String == id && story["state"] as? String == "stored", "\(h.log("waiter"))")
    }
}
