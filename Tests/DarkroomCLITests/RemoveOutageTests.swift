import Foundation
import Testing

/// `darkroom rm` against a storage node that stops answering (SIGSTOP: its
/// socket stays open, it reads nothing) and comes back while rm would
/// still be running.
@Suite("rm through a storage node outage", .serialized)
struct RemoveOutageTests {
    @Test("rm stops at the first unanswered DELETE, says it may or may not have run, sends no more, and deletes nothing once the node is back")
    func removeStopsAtFirstUnanswered() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 2)])
        let input = try h.writeImages(3)
        let submit = try h.run(["submit", input.path, "--ops", "grayscale", "--thumb", "16x16", "--wait"] + h.clientFlags)
        #expect(submit.status == 0, "\(submit.stderr)")
        func records() throws -> [String] {
            SystemHarness.jsonLines(try h.run(["ls", "--json"] + h.storeFlags).stdout).compactMap { $0["id"] as? String }
        }
        let ids = try records()
        try #require(ids.count == 3)

        h.pause("store")
        let rm = try h.start("rm", ["rm"] + ids + ["--timeout", "2"] + h.storeFlags, separateStderr: true)
        try h.waitUntil("rm reports the first DELETE unanswered", timeout: .seconds(30)) {
            h.errors("rm").contains("\(ids[0]): no answer")
        }
        // rm ends at once. Had it gone on to the next id, the node coming
        // back now would receive the DELETEs still queued on its connection,
        // the first one included, after rm had reported it unanswered.
        let deadline = ContinuousClock.now + .seconds(1)
        while rm.isRunning, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.02) }
        h.resume("store")
        rm.waitUntilExit()
        let errors = h.errors("rm")
        #expect(rm.terminationStatus == 1)
        #expect(errors.contains("\(ids[0]): no answer from the storage node"), "\(errors)")
        #expect(errors.contains("2 not sent, the storage node not answering: \(ids[1]) \(ids[2])"), "\(errors)")
        #expect(!errors.contains("deleted \(ids[0])"))

        // The node answers again; give anything queued a moment to arrive.
        try h.waitUntil("the store answers") { try h.run(["status", "--check", "--only", "store"] + h.storeFlags + ["--timeout", "1"]).status == 0 }
        Thread.sleep(forTimeInterval: 1)
        #expect(Set(try records()) == Set(ids), "a DELETE reported unanswered or never sent ran after all")

        // And rm works again, one id at a time.
        let again = try h.run(["rm", ids[0]] + h.storeFlags)
        #expect(again.status == 0 && again.stderr.contains("deleted \(ids[0])"), "\(again.stderr)")
        #expect(Set(try records()) == Set(ids.dropFirst()))
    }
}
