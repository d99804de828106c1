import Testing
import DarkroomSQLite

@Suite struct SavepointTests {
    func names(_ db: Connection) throws -> [String] {
        try db.query("SELECT name FROM item ORDER BY rowid") { try $0.string("name") }
    }

    @Test func aFailingBodyUndoesOnlyItsOwnWork() throws {
        let directory = try TemporaryDirectory()
        let db = try Connection(path: directory.path("savepoint.sqlite"))
        try db.execute("CREATE TABLE item (name TEXT NOT NULL UNIQUE)")
        let insert = "INSERT INTO item (name) VALUES (?)"

        try db.transaction {
            try db.execute(insert, "before")
            let thrown = #expect(throws: Injected.self) {
                try db.withSavepoint("request") {
                    try db.execute(insert, "undone")
                    throw Injected(tag: 1)
                }
            }
            #expect(thrown == Injected(tag: 1))
            #expect(db.isInTransaction)
            // A SQL error is rethrown as it is.
            let duplicate = #expect(throws: SQLiteError.self) {
                try db.withSavepoint("request") {
                    try db.execute(insert, "undone too")
                    try db.execute(insert, "before")
                }
            }
            #expect(duplicate?.code == .constraintUnique)
            // Nested savepoints with the same name undo the innermost one.
            try db.withSavepoint("request") {
                try db.execute(insert, "outer")
                #expect(throws: Injected.self) {
                    try db.withSavepoint("request") {
                        try db.execute(insert, "inner")
                        throw Injected(tag: 2)
                    }
                }
            }
            let kept = try db.withSavepoint("request") { () throws -> Int in
                try db.execute(insert, "after")
                return db.changes
            }
            #expect(kept == 1)
        }
        #expect(try names(db) == ["before", "outer", "after"])

        // By hand: savepoint, rollback(to:), release.
        try db.transaction {
            try db.savepoint("manual")
            try db.execute(insert, "dropped")
            try db.rollback(to: "manual")
            try db.execute(insert, "kept")
            try db.release("manual")
        }
        #expect(try names(db) == ["before", "outer", "after", "kept"])

        #expect(throws: SQLiteError.self) { try db.withSavepoint("no spaces") {} }
        #expect(throws: SQLiteError.self) { try db.savepoint("1st") }
    }

    @Test func outsideATransactionTheSavepointIsTheTransaction() throws {
        let db = try Connection(path: ":memory:")
        try db.execute("CREATE TABLE item (name TEXT NOT NULL UNIQUE)")
        try db.withSavepoint {
            #expect(db.isInTransaction)
            try db.execute("INSERT INTO item (name) VALUES ('committed')")
        }
        #expect(!db.isInTransaction)
        #expect(throws: Injected.self) {
            try db.withSavepoint {
                try db.execute("INSERT INTO item (name) VALUES ('rolled back')")
                throw Injected(tag: 3)
            }
        }
        #expect(!db.isInTransaction)
        #expect(try names(db) == ["committed"])
    }

    @Test func aFailedUndoIsReportedWithTheCause() throws {
        let db = try Connection(path: ":memory:")
        try db.execute("CREATE TABLE item (name TEXT NOT NULL UNIQUE)")
        try db.execute("BEGIN IMMEDIATE")
        // The body releases its own savepoint, so ROLLBACK TO finds none.
        let error = #expect(throws: TransactionError.self) {
            try db.withSavepoint("request") {
                try db.execute("INSERT INTO item (name) VALUES ('released')")
                try db.release("request")
                throw Injected(tag: 4)
            }
        }
        #expect(error?.cause as? Injected == Injected(tag: 4))
        #expect(error?.transactionRolledBack == false)
        #expect(error?.rollbackFailure?.message.contains("no such savepoint") == true)
        #expect(error?.description.contains("undoing the work failed too") == true)
        #expect(db.isInTransaction)
        try db.execute("ROLLBACK")
    }

    /// Fills the database past `PRAGMA max_page_count` inside a turn's
    /// transaction with `fill`, in a savepoint; checks that the savepoint
    /// reports whether SQLite rolled back the whole transaction, and that
    /// writes work again once there is room. Returns whether it did.
    func fillInsideATransaction(_ fill: String) throws -> Bool {
        let directory = try TemporaryDirectory()
        let db = try Connection(path: directory.path("full.sqlite"))
        try db.execute("CREATE TABLE item (name TEXT NOT NULL UNIQUE)")
        try db.execute("CREATE TABLE big (k INTEGER NOT NULL UNIQUE, b BLOB)")
        try db.execute("INSERT INTO item (name) VALUES ('committed')")
        let pages = try #require(try db.query("PRAGMA page_count") { try $0.int64("page_count") }.first)
        try db.execute("PRAGMA max_page_count = \(pages + 3)")

        try db.execute("BEGIN IMMEDIATE")
        try db.execute("INSERT INTO item (name) VALUES ('earlier in the turn')")
        var thrown: (any Error)?
        do {
            try db.withSavepoint("request") {
                for k in 0..<100 { try db.execute(fill, k) }
            }
        } catch {
            thrown = error
        }
        let error = try #require(thrown, "the database never filled up")
        let survived = db.isInTransaction
        if let lost = error as? TransactionError {
            #expect(lost.transactionRolledBack)
            #expect(lost.rollbackFailure == nil)
            #expect((lost.cause as? SQLiteError)?.primaryCode == .full)
            #expect(!survived)
            #expect(lost.description.contains("SQLite rolled back the whole transaction"))
        } else {
            // Only the statement was rolled back: the savepoint's work is
            // undone and the turn's earlier work is still there.
            #expect((error as? SQLiteError)?.primaryCode == .full)
            #expect(survived)
            #expect(try db.query("SELECT count(*) AS n FROM big") { try $0.int64("n") } == [0])
            try db.execute("COMMIT")
        }
        #expect(!db.isInTransaction)
        #expect(try names(db) == (survived ? ["committed", "earlier in the turn"] : ["committed"]))

        // With room again, writes work, in a savepoint of a new transaction too.
        try db.execute("PRAGMA max_page_count = 1000000")
        try db.transaction {
            try db.withSavepoint("request") {
                try db.execute(fill, 1000)
                try db.execute("INSERT INTO item (name) VALUES ('after')")
            }
        }
        #expect(try names(db).last == "after")
        #expect(try db.query("SELECT count(*) AS n FROM big WHERE k >= 1000") { try $0.int64("n") } != [0])
        return !survived
    }

    @Test func aFullDatabaseIsReportedWithWhatSQLiteRolledBack() throws {
        // One row per statement: SQLite keeps no statement journal for it, so
        // SQLITE_FULL rolls back the whole transaction.
        let single = try fillInsideATransaction("INSERT INTO big (k, b) VALUES (?, randomblob(20000))")
        // Several rows that may abort halfway (UNIQUE): with a statement
        // journal, SQLite undoes just the statement.
        let multi = try fillInsideATransaction(
            "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 9) INSERT INTO big (k, b) SELECT ? * 10 + i, randomblob(20000) FROM s")
        #expect(single != multi, "the two statements were meant to show both outcomes")
    }
}
