import Testing
import DarkroomSQLite

@Suite struct RowTests {
    func database() throws -> (TemporaryDirectory, Connection) {
        let directory = try TemporaryDirectory()
        let db = try Connection(path: directory.path("rows.sqlite"))
        try db.execute("""
            CREATE TABLE record (id INTEGER PRIMARY KEY, name TEXT, size INTEGER, data BLOB, score REAL, flag INTEGER);
            INSERT INTO record VALUES (1, 'one', 100, x'0102', 0.5, 1);
            INSERT INTO record VALUES (2, NULL, NULL, NULL, NULL, NULL);
            INSERT INTO record VALUES (3, 'text', 'not a number', 'text, not a blob', 7, 2);
            INSERT INTO record VALUES (4, CAST(x'66ff' AS TEXT), -5, x'', 9007199254740993, 0);
            """)
        return (directory, db)
    }

    /// Runs `body` on the row with `id`, rethrowing what it throws.
    func onRow<T>(_ db: Connection, _ id: Int, _ body: (Row) throws -> T) throws -> T {
        let rows = try db.query("SELECT * FROM record WHERE id = ?", id, map: body)
        return try #require(rows.first)
    }

    @Test func valuesAreReadByName() throws {
        let (_, db) = try database()
        let row = try onRow(db, 1) { row in
            (try row.int64("id"), try row.string("name"), try row.int("size"), try row.blob("data"),
             try row.double("score"), try row.bool("flag"), try row.integer("size", as: UInt32.self))
        }
        #expect(row.0 == 1)
        #expect(row.1 == "one")
        #expect(row.2 == 100)
        #expect(row.3 == [1, 2])
        #expect(row.4 == 0.5)
        #expect(row.5 == true)
        #expect(row.6 == 100)
        // A REAL column read from an integer, and an empty blob.
        #expect(try onRow(db, 3) { try $0.double("score") } == 7)
        #expect(try onRow(db, 4) { try $0.blob("data") } == [])
        #expect(try onRow(db, 1) { try $0.value("name") } == .text("one"))
    }

    @Test func nullInARequiredColumnThrowsNamingIt() throws {
        let (_, db) = try database()
        for read in [
            { (row: Row) throws -> Any in try row.int64("size") },
            { try $0.int("size") }, { try $0.integer("size", as: UInt64.self) }, { try $0.bool("flag") },
            { try $0.double("score") }, { try $0.string("name") }, { try $0.blob("data") },
        ] {
            let error = #expect(throws: SQLiteError.self) { try onRow(db, 2, read) }
            #expect(error?.code == .mismatch)
            #expect(error?.message.contains("is NULL where") == true)
            #expect(error?.sql == "SELECT * FROM record WHERE id = ?")
        }
        let error = #expect(throws: SQLiteError.self) { try onRow(db, 2) { try $0.string("name") } }
        #expect(error?.message == "column \"name\" is NULL where text is required")
    }

    @Test func optionalReadsReturnNilForNull() throws {
        let (_, db) = try database()
        let nulls = try onRow(db, 2) { row in
            [try row.optionalInt64("size") == nil, try row.optionalInt("size") == nil,
             try row.optionalInteger("size", as: UInt8.self) == nil, try row.optionalDouble("score") == nil,
             try row.optionalString("name") == nil, try row.optionalBlob("data") == nil, try row.isNull("name")]
        }
        #expect(nulls.allSatisfy { $0 })
        #expect(try onRow(db, 2) { try $0.value("name") } == .null)
        let present = try onRow(db, 1) { row in (try row.optionalInt64("size"), try row.optionalString("name"), try row.optionalBlob("data")) }
        #expect(present.0 == 100)
        #expect(present.1 == "one")
        #expect(present.2 == [1, 2])
    }

    @Test func aValueOfAnotherTypeThrows() throws {
        let (_, db) = try database()
        let cases: [(Int, String, (Row) throws -> Any)] = [
            (3, "column \"size\" holds text where an integer is expected", { try $0.int64("size") }),
            (3, "column \"size\" holds text where an integer is expected", { try $0.optionalInt64("size") as Any }),
            (3, "column \"data\" holds text where a blob is expected", { try $0.blob("data") }),
            (1, "column \"data\" holds a blob where text is expected", { try $0.string("data") }),
            (1, "column \"size\" holds an integer where text is expected", { try $0.optionalString("size") as Any }),
            (1, "column \"score\" holds a real number where an integer is expected", { try $0.int64("score") }),
            (1, "column \"name\" holds text where a real number is expected", { try $0.double("name") }),
            (3, "column \"flag\" holds 2 where 0 or 1 is expected", { try $0.bool("flag") }),
            (4, "column \"size\" holds -5, which is out of range for UInt32", { try $0.integer("size", as: UInt32.self) }),
            (4, "column \"name\" holds text that is not valid UTF-8", { try $0.string("name") }),
        ]
        for (id, message, read) in cases {
            let error = #expect(throws: SQLiteError.self) { try onRow(db, id, read) }
            #expect(error?.code == .mismatch)
            #expect(error?.message == message)
            #expect(error?.sql == "SELECT * FROM record WHERE id = ?")
        }
        // An integer a Double would round (a REAL column would have stored
        // it as a real number already).
        let inexact = #expect(throws: SQLiteError.self) { try db.query("SELECT 9007199254740993 AS big") { try $0.double("big") } }
        #expect(inexact?.message == "column \"big\" holds the integer 9007199254740993, which a Double cannot represent exactly")
        #expect(try db.query("SELECT 9007199254740992 AS big") { try $0.double("big") } == [9007199254740992])

        // The positional accessors still convert as SQLite does.
        #expect(try onRow(db, 3) { $0.int64(2) } == 0)
        #expect(try onRow(db, 4) { $0.string(1) } == "f\u{FFFD}")
    }

    @Test func aMissingOrAmbiguousColumnThrows() throws {
        let (_, db) = try database()
        let missing = #expect(throws: SQLiteError.self) { try onRow(db, 1) { try $0.int64("sise") } }
        #expect(missing?.code == .range)
        #expect(missing?.message == "no result column named \"sise\" (the columns are: id, name, size, data, score, flag)")
        #expect(throws: SQLiteError.self) { try onRow(db, 1) { try $0.optionalString("Name") } }
        #expect(try onRow(db, 1) { $0["sise"] } == .null)

        let join = "SELECT a.id, b.id, a.name AS a_name FROM record a JOIN record b ON b.id = a.id + 1 WHERE a.id = 1"
        let ambiguous = #expect(throws: SQLiteError.self) { try db.query(join) { try $0.int64("id") } }
        #expect(ambiguous?.code == .range)
        #expect(ambiguous?.message.contains("more than one result column is named \"id\"") == true)
        #expect(try db.query(join) { try $0.string("a_name") } == ["one"])
    }

    @Test func namesFollowTheColumnsWhenSQLitePreparesAgain() throws {
        let (_, db) = try database()
        let select = try db.prepare("SELECT * FROM record WHERE id = 1")
        #expect(try select.query { try $0.string("name") } == ["one"])
        #expect(select.columnIndex(named: "extra") == nil)
        // SQLite compiles `SELECT *` again after the schema changes, with the new column.
        try db.execute("ALTER TABLE record ADD COLUMN extra TEXT DEFAULT 'added'")
        #expect(try select.query { try $0.string("extra") } == ["added"])
        #expect(select.columnIndex(named: "extra") == 6)
    }
}
