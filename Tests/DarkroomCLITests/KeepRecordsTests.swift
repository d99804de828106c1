import DarkroomImage
import DarkroomSQLite
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `store --keep-records` with real processes: records expire in the order
/// they were stored, and a storage node SIGKILLed again and again while
/// they do never leaves a record whose image file is gone; what a kill
/// leaves behind (files of records deleted just before it) goes at the
/// next start.
@Suite("Keeping records for a time", .serialized)
struct KeepRecordsTests {
    /// The blob files on disk and the ones the database's rows name, read
    /// while the node is down.
    static func files(_ h: SystemHarness) throws -> (onDisk: Set<String>, named: Set<String>, records: Int) {
        let store = h.dir.path("data") + "/store"
        var onDisk: Set<String> = []
        if let walker = FileManager.default.enumerator(atPath: store + "/blobs") {
            for case let path as String in walker where !path.contains(".tmp") {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: store + "/blobs/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                    onDisk.insert(path)
                }
            }
        }
        let db = try Connection(path: store + "/store.db")
        defer { try? db.close() }
        let named = Set(try db.query("SELECT blob_path FROM full_res WHERE blob_path IS NOT NULL UNION SELECT blob_path FROM thumbnails WHERE blob_path IS NOT NULL") {
            try $0.string("blob_path")
        })
        let records = try db.query("SELECT count(*) AS n FROM full_res") { try $0.int64("n") }.first ?? -1
        return (onDisk, named, Int(records))
    }

    func startStore(_ h: SystemHarness) throws {
        try h.start("store", ["store", "--data", h.dir.path("data"), "--bind", h.store, "--keep-records", "6s"])
        try h.waitUntil("the store answers") {
            try h.run(["status", "--check", "--only", "store", "--store", h.store, "--timeout", "1"]).status == 0
        }
    }

    @Test("records expire oldest first; SIGKILLs of the storage node while they do leave no record without its files")
    func expiringThroughKills() throws {
        let h = try SystemHarness()
        try h.startBroker()
        try startStore(h)
        try h.startWorker("w1", concurrency: 2)
        // Three waves 1 s apart, large enough that each full image is a blob file.
        let waves = try (0..<3).map { try h.writeImages(5, name: "wave\($0)", size: Size(width: 1200, height: 900)) }
        var jobs: [[String]] = []
        for (wave, inputs) in waves.enumerated() {
            let started = Date()
            let submit = try h.run(["submit", inputs.path, "--ops", "grayscale", "--thumb", "64x64", "--wait", "--json"] + h.clientFlags)
            try #require(submit.status == 0, "\(submit.stderr)")
            jobs.append(SystemHarness.jsonLines(submit.stdout).compactMap { $0["status"] as? String == "stored" ? $0["job"] as? String : nil })
            print("keep-records: wave \(wave) stored in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
            if wave < 2 { Thread.sleep(forTimeInterval: 1) }
        }
        try #require(jobs.map(\.count) == [5, 5, 5])

        var counts: [Int] = []
        let deadline = Date().addingTimeInterval(60)
        var kills = 0
        while Date() < deadline {
            Thread.sleep(forTimeInterval: Double.random(in: 0.3...0.9))
            #expect(h.signal("store", SIGKILL) == SIGKILL)
            kills += 1
            let state = try Self.files(h)
            #expect(state.named.isSubset(of: state.onDisk), "after kill \(kills): records name files that are gone: \(state.named.subtracting(state.onDisk).sorted())")
            if kills == 1 { #expect(!state.named.isEmpty, "the full images are blob files") }
            counts.append(state.records)
            // Oldest first: the records left are the newest ones.
            let records = SystemHarness.jsonLines(try h.run(["ls", "--all", "--json", "--timeout", "1"] + h.storeFlags).stdout)
            #expect(records.isEmpty, "the node is down")
            try startStore(h)
            let left = Set(SystemHarness.jsonLines(try h.run(["ls", "--all", "--json"] + h.storeFlags).stdout).compactMap { $0["jobID"] as? String })
            let waves = jobs.map { Set($0).intersection(left).count }
            #expect(waves == waves.sorted(), "a younger wave expired before an older one: \(waves)")
            if state.records == 0 { break }
        }
        print("keep-records: records after each of \(kills) SIGKILL(s): \(counts)")
        #expect(counts.last == 0, "every record expired: \(counts)")
        // The start after the last kill swept what a kill left behind.
        #expect(h.signal("store", SIGTERM) == 0)
        let end = try Self.files(h)
        #expect(end.onDisk.isEmpty && end.records == 0, "\(end.onDisk.count) file(s), \(end.records) record(s) left")
    }
}
