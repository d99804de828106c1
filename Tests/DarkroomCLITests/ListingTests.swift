import DarkroomImage
import Foundation
import Testing

/// `darkroom ls` reads every record, page by page, and `watch --from 0`
/// starts at the first event.
@Suite("Listing every record", .serialized)
struct ListingTests {
    @Test("ls --all --json lists 5,000 records newest first, each once; --limit and --before page through them")
    func everyRecord() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w", 64)])
        // 5,000 tiny inputs: one JPEG made in code, written under 5,000 names.
        let folder = h.dir.url.appendingPathComponent("many")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let bytes = Data(try JPEG.encode(SamplePhoto.render(Size(width: 16, height: 16), seed: 3), options: EncodeOptions(quality: 80)))
        for i in 0..<5_000 { try bytes.write(to: folder.appendingPathComponent(String(format: "p%04d.jpg", i))) }
        let submit = try h.run(["submit", folder.path, "--ops", "invert", "--thumb", "8x8", "--wait", "--json", "--timeout", "60"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr.suffix(2000))")

        let all = try h.run(["ls", "--all", "--json"] + h.storeFlags)
        #expect(all.status == 0, "\(all.stderr)")
        let records = SystemHarness.jsonLines(all.stdout)
        let ids = records.compactMap { $0["id"] as? String }
        #expect(ids.count == 5_000)
        #expect(Set(ids).count == 5_000, "each record once")
        #expect(ids == ids.sorted(by: >), "newest first")
        #expect(Set(records.compactMap { $0["jobId"] as? String }).count == 5_000)

        // --limit beyond one page, then --before continues where it stopped.
        let first = try h.run(["ls", "--limit", "1500", "--json"] + h.storeFlags)
        let firstIDs = SystemHarness.jsonLines(first.stdout).compactMap { $0["id"] as? String }
        #expect(firstIDs == Array(ids.prefix(1500)))
        let rest = try h.run(["ls", "--all", "--before", try #require(firstIDs.last), "--json"] + h.storeFlags)
        #expect(SystemHarness.jsonLines(rest.stdout).compactMap { $0["id"] as? String } == Array(ids.dropFirst(1500)))
        // A listing cut short says how to go on, from the same node.
        let human = try h.run(["ls", "--limit", "3"] + h.storeFlags)
        #expect(human.stdout.split(separator: "\n").count == 3)
        #expect(human.stderr.contains("darkroom ls --store \(h.store) --limit 3 --before \(ids[2])"), "\(human.stderr)")
        // Nothing older than the oldest.
        let none = try h.run(["ls", "--before", try #require(ids.last)] + h.storeFlags)
        #expect(none.status == 0 && none.stdout.isEmpty && none.stderr.contains("no records older than"))
        // --all with --limit is a usage error.
        #expect(try h.run(["ls", "--all", "--limit", "5"] + h.storeFlags).status == 64)
    }

    @Test("watch --from 0 starts at the first event, as --from 1 does")
    func watchFromZero() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w", 1)])
        let input = try h.writeImages(2)
        let submit = try h.run(["submit", input.path, "--ops", "invert", "--wait"] + h.clientFlags)
        try #require(submit.status == 0, "\(submit.stderr)")
        let zero = try h.run(["watch", "--from", "0", "--count", "3", "--json", "--duration", "30"] + h.clientFlags)
        #expect(zero.status == 0, "\(zero.stderr)")
        let seqs = SystemHarness.jsonLines(zero.stdout).compactMap { $0["seq"] as? Int }
        #expect(seqs == [1, 2, 3])
        #expect(try h.run(["watch", "--from", "first"] + h.clientFlags).status == 64)

        // Past the newest event (6: two jobs of three events): said so, not
        // taken for a broker whose data was reset.
        let ahead = try h.run(["watch", "--from", "1000", "--duration", "30"] + h.clientFlags)
        #expect(ahead.status == 1)
        #expect(ahead.stderr.contains("has no event 1000 to start from: its newest event is 6"), "\(ahead.stderr)")
        #expect(!ahead.stderr.contains("reset"), "\(ahead.stderr)")
        // The next event is not ahead: watch waits for it.
        let next = try h.run(["watch", "--from", "7", "--duration", "1"] + h.clientFlags)
        #expect(next.status == 0, "\(next.stderr)")
    }
}
