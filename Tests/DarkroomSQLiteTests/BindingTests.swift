import Testing
import DarkroomSQLite

@Suite struct BindingTests {
    @Test func executeValuesWithTheWrongCountThrowsAndNeverReusesBindings() throws {
        let directory = try TemporaryDirectory()
        let db = try Connection(path: directory.path("bind.sqlite"))
        try db.execute("CREATE TABLE t (a, b, c)")
        let sql = "INSERT INTO t (a, b, c) VALUES (?1, ?2, ?3)"
        let insert = try db.prepare(sql)
        try insert.execute(values: [1, 2, 3])

        // Too few: before, ?2 and ?3 would have kept 2 and 3 from the last run.
        let tooFew = #expect(throws: SQLiteError.self) { try insert.execute(values: [4]) }
        #expect(tooFew?.code == .range)
        #expect(tooFew?.message == "1 value given for a statement with 3 parameters")
        #expect(tooFew?.sql == sql)
        #expect(tooFew?.description.contains(sql) == true)
        let tooMany = #expect(throws: SQLiteError.self) { try insert.execute(values: [4, 5, 6, 7]) }
        #expect(tooMany?.message == "4 values given for a statement with 3 parameters")
        #expect(throws: SQLiteError.self) { try insert.execute(values: []) }

        // The same for the boxed forms, on the statement and the connection.
        #expect(throws: SQLiteError.self) { try insert.execute(4, 5) }
        #expect(throws: SQLiteError.self) { try db.execute(sql, 4) }
        #expect(throws: SQLiteError.self) {
            try db.prepare("SELECT ?1 + ?2").query(1) { $0.int64(0) }
        }

        // Binding by hand: a run does not start while a parameter is unbound,
        // even though the previous run bound it.
        try insert.bind(9, at: 1)
        try insert.bind(9, at: 3)
        let unbound = #expect(throws: SQLiteError.self) { _ = try insert.step() }
        #expect(unbound?.code == .range)
        #expect(unbound?.message.contains("parameter 2 (?2) of 3 is not bound") == true)
        try insert.bind(8, at: 2)
        #expect(try insert.step() == false)
        insert.reset()

        // A named parameter left out is named in the error.
        let named = try db.prepare("INSERT INTO t (a, b) VALUES (:a, :b)")
        try named.bind(1, named: ":a")
        try named.bind(1, named: ":b")
        #expect(try named.step() == false)
        named.reset()
        try named.bind(2, named: ":a")
        let missing = #expect(throws: SQLiteError.self) { _ = try named.step() }
        #expect(missing?.message.contains("(:b)") == true)
        named.clearBindings()
        #expect(throws: SQLiteError.self) { _ = try named.step() }
        named.reset()

        let rows = try db.query("SELECT a, b, c FROM t ORDER BY rowid") { $0.values }
        #expect(rows == [[1, 2, 3], [9, 8, 9], [1, 1, .null]])

        // A cached statement comes back from `prepare` with no bindings.
        try db.execute("INSERT INTO t (a, b, c) VALUES (?1, ?2, ?3)", 5, 6, 7)
        #expect(try db.prepare(sql) === insert)
        #expect(throws: SQLiteError.self) { _ = try insert.step() }
        #expect(try db.query("SELECT count(*) FROM t") { $0.int64(0) } == [4])

        // Bound all at once, then one again by hand: a full run. After the
        // reset none is bound, whichever way they were.
        try insert.bind([10, 11, 12])
        try insert.bind(13, at: 2)
        #expect(try insert.step() == false)
        insert.reset()
        let afterAll = #expect(throws: SQLiteError.self) { _ = try insert.step() }
        #expect(afterAll?.message.contains("parameter 1 (?1) of 3 is not bound") == true)
        #expect(throws: SQLiteError.self) { try insert.bind([1, 2]) }
        #expect(throws: SQLiteError.self) { _ = try insert.step() }
        #expect(try db.query("SELECT a, b, c FROM t ORDER BY rowid DESC LIMIT 1") { $0.values } == [[10, 13, 12]])
        #expect(try db.query("SELECT count(*) FROM t") { $0.int64(0) } == [5])
    }

    @Test func statementsWithoutParametersStillRun() throws {
        let db = try Connection(path: ":memory:")
        try db.execute("CREATE TABLE t (v)")
        let insert = try db.prepare("INSERT INTO t (v) VALUES (1)")
        #expect(insert.parameterCount == 0)
        try insert.execute(values: [])
        try insert.execute()
        #expect(try insert.step() == false)
        #expect(try db.query("SELECT count(*) FROM t") { $0.int64(0) } == [3])
        #expect(throws: SQLiteError.self) { try insert.execute(values: [1]) }
    }
}
