import DarkroomImage
import Foundation
import Testing

extension FaultTests {
    /// The broker's data directory on a small tmpfs that runs out of space
    /// while producers submit. A SUBMIT that cannot be committed is
    /// refused with a reason that says the disk is full (and, a refusal
    /// for now, retried by `submit` until its deadline); the broker stays
    /// up and keeps answering; everything it did accept survives a crash
    /// with gapless events; and once space comes back, submits are
    /// accepted again and every accepted job runs.
    @Test("a full disk under the broker: submits refused with the reason, nothing accepted is lost, accepted again once there is space",
          .enabled(if: Tmpfs.canMount, "needs to mount an 8 MB tmpfs, which takes root (CAP_SYS_ADMIN); mounting is not permitted here"))
    func fullDisk() throws {
        let h = try SystemHarness()
        let tmpfs = try Tmpfs(size: "8m")
        defer {
            h.signal("broker", SIGKILL)
            tmpfs.unmount()
        }
        try h.startBroker(data: tmpfs.directory)
        try h.startStore()
        let ballast = tmpfs.directory + "/ballast"
        let free = tmpfs.freeBytes
        try Data(count: max(0, free - 2 << 20)).write(to: URL(fileURLWithPath: ballast))
        #expect(tmpfs.freeBytes <= 2 << 20 + 64 << 10, "\(tmpfs.freeBytes) bytes free after the ballast")

        // Small jobs (inputs kept inside the queue database), ten at a time, until some are refused.
        let input = try h.writeImages(10, size: Size(width: 400, height: 300))
        var accepted: Set<String> = []
        var refusals: [String] = []
        for _ in 1...60 where refusals.isEmpty {
            let submit = try h.run(["submit", input.path, "--ops", "grayscale", "--thumb", "32x32", "--json", "--timeout", "30", "--deadline", "2"] + h.clientFlags)
            let lines = SystemHarness.jsonLines(submit.stdout)
            accepted.formUnion(lines.filter { $0["status"] as? String == "accepted" }.compactMap { $0["job"] as? String })
            refusals += lines.filter { $0["status"] as? String == "refused" }.compactMap { $0["reason"] as? String }
        }
        let refusal = try #require(refusals.first, "no submit was refused with \(tmpfs.freeBytes) bytes free")
        print("full disk: \(accepted.count) jobs accepted, then refused: \(refusal)")
        #expect(refusal.contains("refused by the broker"), "\(refusal)")
        #expect(refusal.lowercased().contains("disk is full") || refusal.lowercased().contains("no space"), "\(refusal)")
        #expect(!accepted.isEmpty)

        // A large input (kept in a file of its own) is refused the same way.
        let large = try Fixtures.noisyJPEG(width: 600, height: 400, noise: 40)
        let largeFolder = try h.writeCopies(of: large, 1, name: "large")
        let largeSubmit = try h.run(["submit", largeFolder.path, "--ops", "grayscale", "--json", "--timeout", "30", "--deadline", "2"] + h.clientFlags)
        let largeRefusal = SystemHarness.jsonLines(largeSubmit.stdout).first?["reason"] as? String ?? ""
        #expect(largeSubmit.status == 1 && largeRefusal.lowercased().contains("disk is full"), "\(largeSubmit.stdout)\(largeSubmit.stderr)")

        // The broker is still up and answers.
        #expect(h.processes["broker"]?.isRunning == true)
        #expect(try h.run(["status", "--check", "--only", "broker"] + h.brokerFlags).status == 0)

        // After a crash, on the same full disk: exactly the accepted jobs, with gapless events.
        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        try h.startBroker(data: tmpfs.directory)
        let events = EventLog(try h.allEvents())
        #expect(events.acceptedJobs == accepted, "\(events.acceptedJobs.count) accepted events; \(accepted.count) ACCEPTED answers")
        #expect(events.events.count == accepted.count && events.seqs == Array(1...max(1, accepted.count)))
        let queue = try #require(try h.status()["queue"] as? [String: Any])
        #expect(((queue["ready"] as? [Int]) ?? []).reduce(0, +) == accepted.count)

        // Space again: submits are accepted, and every accepted job runs.
        try FileManager.default.removeItem(atPath: ballast)
        let again = try Self.submit(h, input, ops: "grayscale")
        #expect(again.count == 10)
        accepted.formUnion(again)
        try h.startWorker("disk-w1", concurrency: 2)
        try h.waitForEvents("every accepted job is stored", timeout: .seconds(120)) { Set(EventLog($0).storedCounts.keys) == accepted }
        try Self.expectStoredOnce(accepted, h, EventLog(try h.allEvents()))
    }
}
