import Testing
import DarkroomSQLite

@Suite struct MigrationTests {
    typealias Step = (version: Int64, apply: (Connection) throws -> Void)

    /// Three steps that record, in `log`, their version, whether a
    /// transaction was open and the version the database had meanwhile.
    final class Log { var entries: [(version: Int64, inTransaction: Bool, found: Int64)] = [] }

    func steps(_ log: Log) -> [Step] {
        [
            (1, { db in
                log.entries.append((1, db.isInTransaction, try db.userVersion()))
                try db.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY)")
            }),
            (2, { db in
                log.entries.append((2, db.isInTransaction, try db.userVersion()))
                try db.execute("ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0")
            }),
            (3, { db in
                log.entries.append((3, db.isInTransaction, try db.userVersion()))
                try db.execute("CREATE INDEX jobs_priority ON jobs (priority)")
            }),
        ]
    }

    @Test func stepsRunOnceInOrderEachInATransaction() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("migrate.sqlite")
        let log = Log()
        do {
            let db = try Connection(path: path)
            #expect(try db.userVersion() == 0)
            #expect(try db.migrate(to: 3, steps: steps(log)) == [1, 2, 3])
            #expect(try db.userVersion() == 3)
            #expect(!db.isInTransaction)
            #expect(log.entries.map(\.version) == [1, 2, 3])
            #expect(log.entries.allSatisfy { $0.inTransaction })
            #expect(log.entries.map(\.found) == [0, 1, 2])
            // Run again: nothing to do.
            #expect(try db.migrate(to: 3, steps: steps(log)) == [])
            #expect(log.entries.count == 3)
        }
        // The versions and the schema were committed.
        let reopened = try Connection(path: path)
        #expect(try reopened.userVersion() == 3)
        #expect(try reopened.migrate(to: 3, steps: steps(log)) == [])
        #expect(log.entries.count == 3)
        try reopened.execute("INSERT INTO jobs (id) VALUES ('a')")
        #expect(try reopened.query("SELECT priority FROM jobs") { try $0.int64("priority") } == [0])

        // A database at version 1 gets only the steps after it.
        let partial = try Connection(path: directory.path("partial.sqlite"))
        try partial.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY)")
        try partial.setUserVersion(1)
        let later = Log()
        #expect(try partial.migrate(to: 3, steps: steps(later)) == [2, 3])
        #expect(later.entries.map(\.version) == [2, 3])
    }

    @Test func aFailingStepLeavesTheVersionBeforeIt() throws {
        let directory = try TemporaryDirectory()
        let db = try Connection(path: directory.path("failing.sqlite"))
        let log = Log()
        var failing = steps(log)
        failing[1].apply = { db in
            try db.execute("CREATE TABLE half_done (x)")
            throw Injected(tag: 2)
        }
        let error = #expect(throws: Injected.self) { try db.migrate(to: 3, steps: failing) }
        #expect(error == Injected(tag: 2))
        #expect(try db.userVersion() == 1)
        #expect(!db.isInTransaction)
        #expect(try db.query("SELECT count(*) AS n FROM sqlite_master WHERE name = 'half_done'") { try $0.int64("n") } == [0])
        #expect(log.entries.map(\.version) == [1])

        // A SQL error in a step is rethrown as it is, and also undone.
        failing[1].apply = { db in try db.execute("ALTER TABLE no_such_table ADD COLUMN x") }
        let sqlError = #expect(throws: SQLiteError.self) { try db.migrate(to: 3, steps: failing) }
        #expect(sqlError?.message.contains("no_such_table") == true)
        #expect(try db.userVersion() == 1)

        // Fixed, the migration goes on from where it stopped.
        #expect(try db.migrate(to: 3, steps: steps(log)) == [2, 3])
        #expect(try db.userVersion() == 3)
    }

    @Test func aNewerDatabaseIsRefused() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("newer.sqlite")
        let db = try Connection(path: path)
        try db.setUserVersion(7)
        let log = Log()
        let error = #expect(throws: SQLiteError.self) { try db.migrate(to: 3, steps: steps(log)) }
        #expect(error?.message == "\(path): database schema version 7 is newer than this darkroom, which knows up to 3; upgrade darkroom")
        #expect(log.entries.isEmpty)
        #expect(try db.userVersion() == 7)
        // With no steps at all, as a binary that knows no schema yet.
        #expect(throws: SQLiteError.self) { try db.migrate(to: 0, steps: []) }
    }

    @Test func badStepListsAreRefusedBeforeAnythingRuns() throws {
        let db = try Connection(path: ":memory:")
        let log = Log()
        let all = steps(log)
        for (latest, list) in [(Int64(3), [all[0], all[2], all[1]]), (3, [all[0], all[0]]), (4, all), (2, all), (1, [all[1]])] {
            let error = #expect(throws: SQLiteError.self) { try db.migrate(to: latest, steps: list) }
            #expect(error?.code == .misuse)
        }
        #expect(log.entries.isEmpty)
        #expect(try db.userVersion() == 0)
        #expect(throws: SQLiteError.self) { try db.setUserVersion(Int64(Int32.max) + 1) }
        #expect(try db.migrate(to: 0, steps: []) == [])
    }
}
