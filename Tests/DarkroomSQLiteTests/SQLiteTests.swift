import Foundation
import Testing
import DarkroomSQLite

/// A fresh directory under the system temporary directory, removed afterwards.
final class TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("darkroom-sqlite-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

struct Injected: Error, Equatable { let tag: Int }

@Suite struct SQLiteTests {
    let schema = """
        CREATE TABLE full_res (
            id INTEGER PRIMARY KEY,
            job_id TEXT NOT NULL UNIQUE,
            bytes BLOB NOT NULL
        );
        -- one thumbnail per full-res record
        CREATE TABLE thumbnail (
            id INTEGER PRIMARY KEY,
            full_res_id INTEGER NOT NULL UNIQUE REFERENCES full_res(id) ON DELETE CASCADE,
            bytes BLOB NOT NULL
        );
        """

    @Test func opensAFileInWALModeWithForeignKeys() throws {
        let directory = try TemporaryDirectory()
        let db = try Connection(path: directory.path("store.sqlite"))
        #expect(try db.pragma("journal_mode") == "wal")
        #expect(try db.pragma("foreign_keys") == "1")
        #expect(try db.pragma("synchronous") == "2")  // FULL

        var options = Connection.Options()
        options.synchronous = .normal
        let second = try Connection(path: directory.path("store.sqlite"), options: options)
        #expect(try second.pragma("synchronous") == "1")  // NORMAL
        #expect(FileManager.default.fileExists(atPath: directory.path("store.sqlite")))
        #expect(!Connection.libraryVersion.isEmpty)
    }

    @Test func secureDeleteCheckpointIntervalAndCacheAreApplied() throws {
        let directory = try TemporaryDirectory()
        let plain = try Connection(path: directory.path("q.sqlite"))
        #expect(try plain.pragma("wal_autocheckpoint") == "1000")
        var options = Connection.Options()
        options.secureDelete = .fast
        options.walAutocheckpointPages = 8_000
        let tuned = try Connection(path: directory.path("q.sqlite"), options: options)
        #expect(try tuned.pragma("secure_delete") == "2")  // FAST
        #expect(try tuned.pragma("wal_autocheckpoint") == "8000")
        options.secureDelete = .off
        #expect(try Connection(path: directory.path("q.sqlite"), options: options).pragma("secure_delete") == "0")
        #expect(try plain.pragma("temp_store") == "0")  // the library's default
        options.tempStore = .memory
        #expect(try Connection(path: directory.path("q.sqlite"), options: options).pragma("temp_store") == "2")  // MEMORY
        #expect(try plain.pragma("cache_size") == "-2000")  // the library's default, in KiB
        options.cacheKiB = 16_384
        #expect(try Connection(path: directory.path("q.sqlite"), options: options).pragma("cache_size") == "-16384")
    }

    @Test func transactionCommitsAndReopenedFileSeesTheData() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        do {
            let db = try Connection(path: path)
            try db.execute(schema)
            let id = try db.transaction {
                try db.execute("INSERT INTO full_res (job_id, bytes) VALUES (?, ?)", "job-1", [UInt8]([1, 2, 3]))
                return db.lastInsertRowID
            }
            #expect(id == 1)
            #expect(db.changes == 1)
            #expect(!db.isInTransaction)
            let checkpoint = try db.checkpoint(.truncate)
            #expect(checkpoint.checkpointedFrames == checkpoint.logFrames)
            try db.close()
            #expect(!db.isOpen)
        }
        let reopened = try Connection(path: path)
        let jobs = try reopened.query("SELECT job_id, bytes FROM full_res") { row in
            (row.string(0), row.blob(1))
        }
        #expect(jobs.count == 1)
        #expect(jobs.first?.0 == "job-1")
        #expect(jobs.first?.1 == [1, 2, 3])
    }

    @Test func transactionRollsBackAndRethrowsTheFirstError() throws {
        let directory = try TemporaryDirectory()
        let db = try Connection(path: directory.path("t.sqlite"))
        try db.execute(schema)
        try db.execute("INSERT INTO full_res (job_id, bytes) VALUES ('kept', x'00')")

        let thrown = #expect(throws: Injected.self) {
            try db.transaction {
                try db.execute("INSERT INTO full_res (job_id, bytes) VALUES ('lost', x'01')")
                throw Injected(tag: 7)
            }
        }
        #expect(thrown == Injected(tag: 7))
        #expect(!db.isInTransaction)

        // A database error inside the body is the one that surfaces.
        let constraint = #expect(throws: SQLiteError.self) {
            try db.transaction {
                try db.execute("INSERT INTO full_res (job_id, bytes) VALUES ('also lost', x'02')")
                try db.execute("INSERT INTO full_res (job_id, bytes) VALUES ('kept', x'03')")
            }
        }
        #expect(constraint?.code == .constraintUnique)
        #expect(constraint?.sql?.contains("INSERT INTO full_res") == true)

        let names = try db.query("SELECT job_id FROM full_res ORDER BY id") { $0.string(0) }
        #expect(names == ["kept"])

        // Transactions do not nest.
        #expect(throws: SQLiteError.self) {
            try db.transaction { try db.transaction {} }
        }
        #expect(!db.isInTransaction)
    }

    @Test func constraintErrorsAreCaughtByCode() throws {
        let db = try Connection(path: ":memory:")
        try db.execute(schema)
        let insert = try db.prepare("INSERT INTO full_res (job_id, bytes) VALUES (:job, :bytes)")
        try insert.bind("same", named: ":job")
        try insert.bind([UInt8]([9]), named: ":bytes")
        #expect(try insert.step() == false)

        var caught: ResultCode?
        do {
            try db.execute("INSERT INTO full_res (job_id, bytes) VALUES (?, ?)", "same", [UInt8]([9]))
        } catch ResultCode.busy {
            caught = .busy
        } catch ResultCode.constraint {
            caught = .constraint
        }
        #expect(caught == .constraint)

        let error = #expect(throws: SQLiteError.self) {
            try db.execute("INSERT INTO full_res (job_id, bytes) VALUES (?, NULL)", "other")
        }
        #expect(error?.primaryCode == .constraint)
        #expect(error?.code == .constraintNotNull)
        #expect(error.map { ResultCode.constraint ~= $0 } == true)
        #expect(error.map { ResultCode.constraintUnique ~= $0 } == false)
        #expect(error?.message.contains("NOT NULL") == true)
    }

    @Test func foreignKeyAndCascadeDelete() throws {
        let db = try Connection(path: ":memory:")
        try db.execute(schema)
        try db.transaction {
            try db.execute("INSERT INTO full_res (job_id, bytes) VALUES ('a', x'aa')")
            try db.execute("INSERT INTO thumbnail (full_res_id, bytes) VALUES (?, x'bb')", db.lastInsertRowID)
        }
        let orphan = #expect(throws: SQLiteError.self) {
            try db.execute("INSERT INTO thumbnail (full_res_id, bytes) VALUES (999, x'cc')")
        }
        #expect(orphan?.code == .constraintForeignKey)

        let counts = { () throws -> [Int?] in
            try db.query("SELECT (SELECT count(*) FROM full_res), (SELECT count(*) FROM thumbnail)") { [$0.int(0), $0.int(1)] }.first ?? []
        }
        #expect(try counts() == [1, 1])
        try db.execute("DELETE FROM full_res WHERE job_id = ?", "a")
        #expect(try counts() == [0, 0])
    }

    @Test func blobsAndTextRoundTripExactly() throws {
        let directory = try TemporaryDirectory()
        let db = try Connection(path: directory.path("blobs.sqlite"))
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB, s TEXT, r REAL)")
        var generator = SystemRandomNumberGenerator()
        let big = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let samples: [[UInt8]] = [[], [0], [0, 0, 0], Array(0...255), big]
        let text = "naïve \u{0}embedded NUL, emoji 📷"
        for sample in samples {
            try db.execute("INSERT INTO t (b, s, r) VALUES (?, ?, ?)", sample, text, 0.1)
        }
        try db.execute("INSERT INTO t (b, s, r) VALUES (?, ?, ?)", nil, "", Optional<Double>.none)

        let rows = try db.query("SELECT b, s, r FROM t ORDER BY id") { row in
            (row.blob(0), row.string(1), row.double(2), row[0])
        }
        #expect(rows.count == samples.count + 1)
        for (row, sample) in zip(rows, samples) {
            #expect(row.0 == sample)
            #expect(row.1 == text)
            #expect(row.2 == 0.1)
            #expect(row.3 == .blob(sample))
        }
        let last = try #require(rows.last)
        #expect(last.0 == nil)  // NULL is not an empty blob
        #expect(last.1 == "")  // an empty string is not NULL
        #expect(last.2 == nil)
        #expect(last.3 == .null)
    }

    @Test func statementsAreCachedAndReusable() throws {
        let db = try Connection(path: ":memory:")
        try db.execute("CREATE TABLE n (v INTEGER)")
        let insert = try db.prepare("INSERT INTO n (v) VALUES (?)")
        for value in 1...5 { try insert.execute(value) }
        #expect(try db.prepare("INSERT INTO n (v) VALUES (?)") === insert)

        // A nested query with the same SQL gets its own statement.
        let select = "SELECT v FROM n WHERE v <= ? ORDER BY v"
        let pairs = try db.prepare(select).query(2) { outer -> [Int] in
            let inner = try db.prepare(select).query(outer.int(0) ?? 0) { $0.int(0) ?? -1 }
            return [outer.int(0) ?? -1] + inner
        }
        #expect(pairs == [[1, 1], [2, 1, 2]])

        let stmt = try db.prepare("SELECT v AS value, v * 2 AS twice FROM n WHERE v = ?")
        #expect(stmt.columnCount == 2)
        #expect(stmt.columnName(at: 1) == "twice")
        let named = try stmt.query(3) { row in (row["value"], row["twice"], row.values) }
        #expect(named.first?.0 == .integer(3))
        #expect(named.first?.1 == .integer(6))
        #expect(named.first?.2 == [.integer(3), .integer(6)])
    }

    @Test func misuseIsAnErrorNotACrash() throws {
        let db = try Connection(path: ":memory:")
        try db.execute("CREATE TABLE n (v INTEGER)")
        let syntax = #expect(throws: SQLiteError.self) { try db.prepare("SELEC 1") }
        #expect(syntax?.code == .error)
        #expect(syntax?.sql == "SELEC 1")
        #expect(throws: SQLiteError.self) { try db.prepare("SELECT 1; SELECT 2") }
        let stmt = try db.prepare("INSERT INTO n (v) VALUES (?)")
        let range = #expect(throws: SQLiteError.self) { try stmt.bind(1, at: 2) }
        #expect(range?.code == .range)
        #expect(throws: SQLiteError.self) { try stmt.execute(1, 2) }
        #expect(throws: SQLiteError.self) { try stmt.bind(1, named: ":missing") }
        #expect(stmt.int64(at: 5) == nil)

        try db.close()
        #expect(throws: SQLiteError.self) { try db.execute("SELECT 1") }
        #expect(throws: SQLiteError.self) { try stmt.execute(1) }
        #expect(throws: SQLiteError.self) { try Connection(path: "/nonexistent-dir/x/y.sqlite") }
    }
}
