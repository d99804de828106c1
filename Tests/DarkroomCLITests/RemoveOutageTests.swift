import Foundation
import Testing

/// `darkroom rm` against a storage node that stops answering (SIGSTOP: its
/// socket stays open, it reads nothing), before rm connects and in the
/// middle of a run of DELETEs.
@Suite("rm through a storage node outage", .serialized)
struct RemoveOutageTests {
    static func records(_ h: SystemHarness) throws -> [String] {
        SystemHarness.jsonLines(try h.run(["ls", "--all", "--json"] + h.storeFlags).stdout).compactMap { $0["id"] as? String }
    }

    static func storeRecords(_ h: SystemHarness, _ count: Int) throws -> [String] {
        try h.startSystem(workers: [("w1", 2)])
        let input = try h.writeImages(count, size: .init(width: 32, height: 24))
        let submit = try h.run(["submit", input.path, "--ops", "grayscale", "--thumb", "16x16", "--wait"] + h.clientFlags)
        #expect(submit.status == 0, "\(submit.stderr)")
        let ids = try records(h)
        try #require(ids.count == count)
        return ids
    }

    @Test("a node that never completes the handshake: rm sends nothing, names every id as not sent, and nothing is deleted once the node is back")
    func nothingSent() throws {
        let h = try SystemHarness()
        let ids = try Self.storeRecords(h, 3)
        let (status, errors) = try h.runWhilePaused("store", "rm", ["rm"] + ids + ["--timeout", "2"] + h.storeFlags)
        #expect(status == 1)
        #expect(errors.contains("\(ids[0]): not deleted: no answer from the storage node"), "\(errors)")
        #expect(errors.contains("3 not sent, the storage node not answering: \(ids.joined(separator: " "))"), "\(errors)")
        #expect(!errors.contains("may or may not"))

        try h.waitUntilAnswering("store")
        Thread.sleep(forTimeInterval: 1)
        #expect(Set(try Self.records(h)) == Set(ids), "a DELETE reported not sent ran after all")
    }

    /// The node stops in the middle of a run: the DELETE in flight may
    /// reach it or not, and rm says so of that one id only; it sends no
    /// more, so no later DELETE can run once the node is back.
    @Test("a node stopped mid-run: the DELETEs answered are done, the one in flight is named uncertain, the rest are not sent and stay")
    func stoppedMidRun() throws {
        let h = try SystemHarness()
        let ids = try Self.storeRecords(h, 400)
        let rm = try h.start("rm", ["rm"] + ids + ["--timeout", "2"] + h.storeFlags, separateStderr: true)
        let deadline = ContinuousClock.now + .seconds(60)
        while h.errors("rm").components(separatedBy: "deleted ").count <= 20, rm.isRunning, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        h.pause("store")
        rm.waitUntilExit()
        h.resume("store")
        let errors = h.errors("rm")
        let deleted = errors.split(separator: "\n").filter { $0.hasPrefix("deleted ") }.map { String($0.dropFirst("deleted ".count)) }
        try #require(deleted.count < ids.count, "rm finished before the node was stopped")
        #expect(rm.terminationStatus == 1)
        #expect(deleted == Array(ids.prefix(deleted.count)), "deleted in the order given")
        let uncertain = ids[deleted.count]
        #expect(errors.contains("\(uncertain): no answer from the storage node"), "\(errors.suffix(1000))")
        #expect(errors.contains("it may or may not have been deleted"), "\(errors.suffix(1000))")
        let rest = ids[(deleted.count + 1)...]
        #expect(errors.contains("\(rest.count) not sent, the storage node not answering: \(rest.joined(separator: " "))"), "\(errors.suffix(1000))")

        try h.waitUntilAnswering("store")
        Thread.sleep(forTimeInterval: 1)
        let left = Set(try Self.records(h))
        #expect(left.isDisjoint(with: deleted), "a record reported deleted is still there")
        #expect(Set(rest).isSubset(of: left), "a DELETE never sent ran after all")
        print("rm stopped mid-run: \(deleted.count) deleted, \(uncertain) \(left.contains(uncertain) ? "kept" : "deleted") once the node was back, \(rest.count) not sent")
    }
}
