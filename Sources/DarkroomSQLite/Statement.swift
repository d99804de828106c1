import CSQLite

/// A prepared SQL statement, owned by the same thread as its `Connection`
/// (not `Sendable`).
///
/// Parameters are numbered from 1, as in SQL (`?1`, or `?` in order); named
/// parameters (`:name`, `@name`, `$name`) are bound by their full name.
/// Columns are numbered from 0. Strings and blobs are copied into SQLite when
/// bound and copied out when read, so no Swift memory is ever shared with it.
///
/// Every run binds every parameter afresh. SQLite itself keeps bindings
/// across a reset, so a run that binds fewer values than the last one would
/// quietly reuse the rest; here `reset()` clears them, the array forms of
/// `execute` and `query` take exactly one value per parameter, and `step()`
/// will not start a run while a parameter is unbound. A value from one run
/// therefore never reaches the next, and a bound blob is freed with its run.
public final class Statement {
    private var statement: OpaquePointer?
    private let handle: DatabaseHandle
    /// The SQL text of the statement.
    public let sql: String
    /// The number of parameters (the largest parameter index).
    public let parameterCount: Int
    /// Which parameters (index - 1) have been bound one at a time since the
    /// last reset, and how many: `step()` starts a run only when all of
    /// them are.
    private var bound: [Bool]
    private var boundCount = 0
    /// Whether every parameter was bound at once (the array forms of
    /// `execute`, `query` and `bind`) since the last reset. Those count
    /// their values before binding any, so they need no record of each
    /// parameter: the queue's busy loops bind a dozen values a row, and
    /// every write to `bound` is an exclusive access checked at run time.
    private var allBound = false
    /// Result column names to indexes, built at the first lookup by name and
    /// kept for the statement's life, so a row pays one hash lookup per
    /// column it reads by name.
    private var columnSlots: [String: ColumnSlot]?
    /// SQLite's re-prepare count when `columnSlots` was built. SQLite
    /// compiles a statement again by itself after a schema change, which can
    /// change its columns (`SELECT *`); the map is rebuilt then.
    private var columnSlotsReprepares: Int32 = 0

    /// Where a result column name points: its first column, and whether
    /// another column has the same name (then lookup by name refuses it).
    private struct ColumnSlot {
        var index: Int
        var ambiguous: Bool
    }

    init(handle: DatabaseHandle, sql: String) throws {
        guard let db = handle.db else { throw SQLiteError.misuse("the database connection is closed", sql: sql) }
        self.handle = handle
        self.sql = sql
        var prepared: OpaquePointer?
        var trailing = false
        var text = sql
        let code = text.withUTF8 { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return SQLITE_OK }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { start in
                var tail: UnsafePointer<CChar>?
                let code = sqlite3_prepare_v3(db, start, Int32(clamping: buffer.count), UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, &tail)
                if code == SQLITE_OK, let tail {
                    // Anything after the first statement must be blank or a comment.
                    let rest = buffer.count - (tail - start)
                    if rest > 0 {
                        var extra: OpaquePointer?
                        sqlite3_prepare_v2(db, tail, Int32(rest), &extra, nil)
                        if extra != nil { trailing = true }
                        sqlite3_finalize(extra)
                    }
                }
                return code
            }
        }
        guard code == SQLITE_OK else {
            sqlite3_finalize(prepared)
            throw SQLiteError.from(code, db: db, sql: sql)
        }
        guard let prepared else { throw SQLiteError.misuse("no SQL statement to prepare", sql: sql) }
        guard !trailing else {
            sqlite3_finalize(prepared)
            throw SQLiteError.misuse("prepare takes one statement; use execute(_:) for scripts", sql: sql)
        }
        self.statement = prepared
        self.parameterCount = Int(sqlite3_bind_parameter_count(prepared))
        self.bound = Array(repeating: false, count: parameterCount)
    }

    deinit {
        sqlite3_finalize(statement)
    }

    func finalize() {
        sqlite3_finalize(statement)
        statement = nil
    }

    private func live() throws -> OpaquePointer {
        guard let statement, handle.db != nil else {
            throw SQLiteError.misuse("the statement's connection is closed", sql: sql)
        }
        return statement
    }

    private func check(_ code: Int32) throws {
        guard code == SQLITE_OK else { throw SQLiteError.from(code, db: handle.db, sql: sql) }
    }

    /// Whether the statement has been stepped and not yet reset or finished.
    var isBusy: Bool {
        guard let statement else { return false }
        return sqlite3_stmt_busy(statement) != 0
    }

    // MARK: Binding

    /// Binds `value` to parameter `index` (1-based).
    public func bind(_ value: SQLiteValue, at index: Int) throws {
        let statement = try live()
        guard let position = Int32(exactly: index), index >= 1, index <= parameterCount else {
            throw SQLiteError(code: .range, message: "parameter index \(index) is out of range 1...\(parameterCount)", sql: sql)
        }
        try bind(value, at: position, in: statement)
        if !allBound && !bound[index - 1] {
            bound[index - 1] = true
            boundCount += 1
        }
    }

    /// Binds every parameter, in order, from `values` (one per parameter,
    /// counted by the caller first).
    private func bindAll<Values: Sequence>(_ values: Values) throws where Values.Element == SQLiteValue {
        let statement = try live()
        var position: Int32 = 1
        do {
            for value in values {
                try bind(value, at: position, in: statement)
                position += 1
            }
        } catch {
            // None of the run's values stays bound, nor held.
            clearBindings()
            throw error
        }
        allBound = true
    }

    /// Binds one value, with nothing recorded.
    private func bind(_ value: SQLiteValue, at position: Int32, in statement: OpaquePointer) throws {
        switch value {
        case .integer(let number):
            try check(sqlite3_bind_int64(statement, position, number))
        case .real(let number):
            try check(sqlite3_bind_double(statement, position, number))
        case .text(let string):
            var string = string
            let code = string.withUTF8 { buffer in
                buffer.withMemoryRebound(to: CChar.self) {
                    darkroom_sqlite3_bind_text_copy(statement, position, $0.baseAddress, sqlite3_uint64($0.count))
                }
            }
            try check(code)
        case .blob(let bytes):
            let code = bytes.withUnsafeBytes {
                darkroom_sqlite3_bind_blob_copy(statement, position, $0.baseAddress, sqlite3_uint64($0.count))
            }
            try check(code)
        case .null:
            try check(sqlite3_bind_null(statement, position))
        }
    }

    /// Binds a Swift value (nil binds NULL) to parameter `index` (1-based).
    public func bind(_ value: (any SQLiteBindable)?, at index: Int) throws {
        try bind(value?.sqliteValue ?? .null, at: index)
    }

    /// Binds a value to the named parameter, spelled as in the SQL (`":id"`).
    public func bind(_ value: (any SQLiteBindable)?, named name: String) throws {
        let statement = try live()
        let index = sqlite3_bind_parameter_index(statement, name)
        guard index > 0 else {
            throw SQLiteError(code: .range, message: "no parameter named \(name)", sql: sql)
        }
        try bind(value?.sqliteValue ?? .null, at: Int(index))
    }

    /// Binds `values` to parameters 1, 2, ... in order; the count must match.
    public func bind(_ values: [(any SQLiteBindable)?]) throws {
        try checkValueCount(values.count)
        try bindAll(values.lazy.map { $0?.sqliteValue ?? .null })
    }

    /// Sets every parameter to NULL and counts none as bound: the next run
    /// binds them all again.
    public func clearBindings() {
        if let statement { sqlite3_clear_bindings(statement) }
        forgetBindings()
    }

    private func forgetBindings() {
        allBound = false
        guard boundCount > 0 else { return }
        for index in bound.indices { bound[index] = false }
        boundCount = 0
    }

    /// A run takes one value per parameter: fewer would leave some unbound,
    /// more would be dropped without a word.
    private func checkValueCount(_ count: Int) throws {
        guard count == parameterCount else {
            throw SQLiteError(
                code: .range,
                message: "\(count) value\(count == 1 ? "" : "s") given for a statement with \(parameterCount) parameter\(parameterCount == 1 ? "" : "s")",
                sql: sql)
        }
    }

    /// Refuses to start a run while a parameter has not been bound since the
    /// last reset, naming the first such parameter.
    private func checkAllBound() throws {
        guard !allBound, boundCount < parameterCount, let statement else { return }
        let index = (bound.firstIndex(of: false) ?? 0) + 1
        let name = sqlite3_bind_parameter_name(statement, Int32(index)).map { " (\(String(cString: $0)))" } ?? ""
        throw SQLiteError(
            code: .range,
            message: "parameter \(index)\(name) of \(parameterCount) is not bound; each run binds every parameter",
            sql: sql)
    }

    // MARK: Stepping

    /// Advances to the next row: true when a row is available, false when
    /// the statement has finished. A run starts only when every parameter
    /// has been bound since the last reset.
    public func step() throws -> Bool {
        let statement = try live()
        let starting = sqlite3_stmt_busy(statement) == 0
        if starting { try checkAllBound() }
        let code = sqlite3_step(statement)
        if starting, columnSlots != nil,
           sqlite3_stmt_status(statement, SQLITE_STMTSTATUS_REPREPARE, 0) != columnSlotsReprepares
        {
            columnSlots = nil
        }
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = SQLiteError.from(code, db: handle.db, sql: sql)
            sqlite3_reset(statement)
            throw error
        }
    }

    /// Rewinds the statement so it can run again and clears its parameters
    /// (SQLite would keep them): the next run binds every one afresh.
    public func reset() {
        guard let statement else { return }
        sqlite3_reset(statement)
        if allBound || boundCount > 0 { sqlite3_clear_bindings(statement) }
        forgetBindings()
    }

    /// Binds `bindings`, one per parameter, runs the statement to completion
    /// and resets it.
    public func execute(_ bindings: (any SQLiteBindable)?...) throws {
        try execute(bindings)
    }

    /// Array form of `execute(_:...)`.
    public func execute(_ bindings: [(any SQLiteBindable)?]) throws {
        try checkValueCount(bindings.count)
        reset()
        defer { reset() }
        try bind(bindings)
        while try step() {}
    }

    /// `execute` with values already in SQLite's types, bound to
    /// parameters 1, 2, … in order, exactly one per parameter: nothing is
    /// boxed, for statements a busy loop runs for every row it writes.
    public func execute(values: [SQLiteValue]) throws {
        try checkValueCount(values.count)
        reset()
        defer { reset() }
        try bindAll(values)
        while try step() {}
    }

    /// Binds `bindings`, one per parameter, steps through every row calling
    /// `map`, and resets the statement. A `Row` is valid only inside `map`.
    @discardableResult
    public func query<T>(_ bindings: (any SQLiteBindable)?..., map: (Row) throws -> T) throws -> [T] {
        try query(bindings, map: map)
    }

    /// Array form of `query(_:...map:)`.
    @discardableResult
    public func query<T>(_ bindings: [(any SQLiteBindable)?], map: (Row) throws -> T) throws -> [T] {
        try checkValueCount(bindings.count)
        reset()
        defer { reset() }
        try bind(bindings)
        var results: [T] = []
        while try step() {
            results.append(try map(Row(statement: self)))
        }
        return results
    }

    // MARK: Columns

    /// The number of result columns.
    public var columnCount: Int {
        guard let statement else { return 0 }
        return Int(sqlite3_column_count(statement))
    }

    /// The name of result column `index`.
    public func columnName(at index: Int) -> String? {
        guard let column = column(index), let name = sqlite3_column_name(statement, column) else { return nil }
        return String(cString: name)
    }

    /// The index of the first result column called `name` (spelled exactly
    /// as the result names it, its `AS` name if it has one).
    public func columnIndex(named name: String) -> Int? {
        slots()[name]?.index
    }

    /// The index of the one result column called `name`; throws when there
    /// is none, or more than one (`f.width` and `t.width` are both "width"
    /// until one of them gets an `AS` name).
    func requiredColumnIndex(named name: String) throws -> Int {
        guard let slot = slots()[name] else {
            let names = (0..<columnCount).map { columnName(at: $0) ?? "?" }.joined(separator: ", ")
            throw SQLiteError(code: .range, message: "no result column named \"\(name)\" (the columns are: \(names))", sql: sql)
        }
        guard !slot.ambiguous else {
            throw SQLiteError(code: .range, message: "more than one result column is named \"\(name)\"; give them distinct AS names", sql: sql)
        }
        return slot.index
    }

    private func slots() -> [String: ColumnSlot] {
        if let columnSlots { return columnSlots }
        var slots: [String: ColumnSlot] = [:]
        for index in 0..<columnCount {
            guard let name = columnName(at: index) else { continue }
            if slots[name] != nil {
                slots[name]?.ambiguous = true
            } else {
                slots[name] = ColumnSlot(index: index, ambiguous: false)
            }
        }
        if let statement {
            columnSlotsReprepares = sqlite3_stmt_status(statement, SQLITE_STMTSTATUS_REPREPARE, 0)
        }
        columnSlots = slots
        return slots
    }

    private func column(_ index: Int) -> Int32? {
        guard statement != nil, handle.db != nil, index >= 0, index < columnCount else { return nil }
        return Int32(index)
    }

    /// Whether column `index` of the current row is NULL (or out of range).
    public func isNull(at index: Int) -> Bool {
        guard let column = column(index) else { return true }
        return sqlite3_column_type(statement, column) == SQLITE_NULL
    }

    /// Column `index` as an integer; nil when NULL or out of range.
    public func int64(at index: Int) -> Int64? {
        guard let column = column(index), !isNull(at: index) else { return nil }
        return sqlite3_column_int64(statement, column)
    }

    /// Column `index` as an `Int`; nil when NULL or out of range.
    public func int(at index: Int) -> Int? {
        int64(at: index).flatMap { Int(exactly: $0) }
    }

    /// Column `index` as a floating-point number; nil when NULL or out of range.
    public func double(at index: Int) -> Double? {
        guard let column = column(index), !isNull(at: index) else { return nil }
        return sqlite3_column_double(statement, column)
    }

    /// Column `index` as text (invalid UTF-8 is repaired); nil when NULL or out of range.
    public func string(at index: Int) -> String? {
        guard let column = column(index), !isNull(at: index) else { return nil }
        // Ask for the text before its length, as SQLite requires.
        guard let text = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// Column `index` as bytes; nil when NULL or out of range.
    public func blob(at index: Int) -> [UInt8]? {
        guard let column = column(index), !isNull(at: index) else { return nil }
        guard let bytes = sqlite3_column_blob(statement, column) else { return [] }
        let count = Int(sqlite3_column_bytes(statement, column))
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// Column `index` with its stored type.
    public func value(at index: Int) -> SQLiteValue {
        guard let column = column(index) else { return .null }
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT: return .text(string(at: index) ?? "")
        case SQLITE_BLOB: return .blob(blob(at: index) ?? [])
        default: return .null
        }
    }

    // MARK: Checked columns

    /// The storage kinds a checked read accepts.
    enum Expected {
        case integer, real, text, blob

        /// How an error message names the wanted value.
        var noun: String {
            switch self {
            case .integer: return "an integer"
            case .real: return "a real number"
            case .text: return "text"
            case .blob: return "a blob"
            }
        }

        /// A real column also takes integers: SQLite stores a whole number
        /// given to a column without REAL affinity as an integer.
        func accepts(_ type: Int32) -> Bool {
            switch self {
            case .integer: return type == SQLITE_INTEGER
            case .real: return type == SQLITE_FLOAT || type == SQLITE_INTEGER
            case .text: return type == SQLITE_TEXT
            case .blob: return type == SQLITE_BLOB
            }
        }
    }

    private static func storageName(_ type: Int32) -> String {
        switch type {
        case SQLITE_INTEGER: return "an integer"
        case SQLITE_FLOAT: return "a real number"
        case SQLITE_TEXT: return "text"
        case SQLITE_BLOB: return "a blob"
        default: return "NULL"
        }
    }

    /// Result column `name` of the current row as a SQLite column number,
    /// after checking its storage type: nil for NULL, a `mismatch` error
    /// naming the column for a value of another type.
    private func checkedColumn(_ name: String, _ expected: Expected) throws -> Int32? {
        let column = Int32(try requiredColumnIndex(named: name))
        let statement = try live()
        let type = sqlite3_column_type(statement, column)
        guard type != SQLITE_NULL else { return nil }
        guard expected.accepts(type) else {
            throw mismatch(name, "holds \(Statement.storageName(type)) where \(expected.noun) is expected")
        }
        return column
    }

    func mismatch(_ name: String, _ problem: String) -> SQLiteError {
        SQLiteError(code: .mismatch, message: "column \"\(name)\" \(problem)", sql: sql)
    }

    /// The error for NULL in a column that must hold a value.
    func null(_ name: String, _ expected: Expected) -> SQLiteError {
        mismatch(name, "is NULL where \(expected.noun) is required")
    }

    /// Column `name` as an integer, nil for NULL; another type throws.
    func checkedInt64(_ name: String) throws -> Int64? {
        guard let column = try checkedColumn(name, .integer) else { return nil }
        return sqlite3_column_int64(statement, column)
    }

    /// Column `name` as an `Int`, nil for NULL; another type, or an
    /// integer an `Int` cannot hold, throws.
    func checkedInt(_ name: String) throws -> Int? {
        guard let integer = try checkedInt64(name) else { return nil }
        guard let exact = Int(exactly: integer) else {
            throw mismatch(name, "holds \(integer), which does not fit an Int")
        }
        return exact
    }

    /// Column `name` as a floating-point number, nil for NULL; a stored
    /// integer is taken when a Double holds it exactly.
    func checkedDouble(_ name: String) throws -> Double? {
        guard let column = try checkedColumn(name, .real) else { return nil }
        if sqlite3_column_type(statement, column) == SQLITE_INTEGER {
            let integer = sqlite3_column_int64(statement, column)
            guard let exact = Double(exactly: integer) else {
                throw mismatch(name, "holds the integer \(integer), which a Double cannot represent exactly")
            }
            return exact
        }
        return sqlite3_column_double(statement, column)
    }

    /// Column `name` as text, nil for NULL; text that is not valid UTF-8
    /// throws rather than being repaired.
    func checkedString(_ name: String) throws -> String? {
        guard let column = try checkedColumn(name, .text) else { return nil }
        // Ask for the text before its length, as SQLite requires.
        guard let text = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        guard let string = String(validating: UnsafeBufferPointer(start: text, count: count), as: UTF8.self) else {
            throw mismatch(name, "holds text that is not valid UTF-8")
        }
        return string
    }

    /// Column `name` as bytes, nil for NULL.
    func checkedBlob(_ name: String) throws -> [UInt8]? {
        guard let column = try checkedColumn(name, .blob) else { return nil }
        guard let bytes = sqlite3_column_blob(statement, column) else { return [] }
        let count = Int(sqlite3_column_bytes(statement, column))
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}

@available(*, unavailable, message: "a SQLite statement belongs to its connection's thread")
extension Statement: Sendable {}

/// The current row of a statement, valid only inside the closure that received it.
///
/// Read columns by name with the throwing accessors (`try row.int64("width")`,
/// `try row.optionalString("blob_path")`): they are the preferred API. A
/// column that is missing, NULL where a value is required, or stored as
/// another type throws a `SQLiteError` (`range` for a missing or ambiguous
/// name, `mismatch` for the value) naming the column and the statement's SQL,
/// so damage in the database surfaces as an error instead of as a zero or an
/// empty string. The name map is built once per prepared statement, so a
/// lookup costs one hash per column read.
///
/// The positional accessors (`row.int64(3)`) return nil for NULL, convert
/// between types as SQLite does and cannot tell a missing column from NULL;
/// they remain for callers that have not moved to names.
public struct Row {
    let statement: Statement

    public var count: Int { statement.columnCount }

    // MARK: By name, checked (preferred)

    /// Column `name` as an integer; NULL or another type throws.
    public func int64(_ name: String) throws -> Int64 {
        guard let value = try statement.checkedInt64(name) else { throw statement.null(name, .integer) }
        return value
    }

    /// Column `name` as an `Int`; NULL or another type throws.
    public func int(_ name: String) throws -> Int {
        guard let value = try statement.checkedInt(name) else { throw statement.null(name, .integer) }
        return value
    }

    /// Column `name` as an integer of type `T` (`UInt32`, `UInt64`, ...);
    /// NULL, another type, or a value `T` cannot hold (a negative size, for
    /// one) throws rather than being clamped.
    public func integer<T: FixedWidthInteger>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard let value = try optionalInteger(name, as: type) else { throw statement.null(name, .integer) }
        return value
    }

    /// Column `name` as a truth value stored as 1 or 0 (as `Bool` binds);
    /// NULL, another integer or another type throws.
    public func bool(_ name: String) throws -> Bool {
        switch try int64(name) {
        case 0: return false
        case 1: return true
        case let other: throw statement.mismatch(name, "holds \(other) where 0 or 1 is expected")
        }
    }

    /// Column `name` as a floating-point number (a stored integer is taken
    /// when a Double holds it exactly); NULL or another type throws.
    public func double(_ name: String) throws -> Double {
        guard let value = try statement.checkedDouble(name) else { throw statement.null(name, .real) }
        return value
    }

    /// Column `name` as text, which must be valid UTF-8; NULL or another
    /// type (a blob included) throws.
    public func string(_ name: String) throws -> String {
        guard let value = try statement.checkedString(name) else { throw statement.null(name, .text) }
        return value
    }

    /// Column `name` as bytes; NULL or another type (text included) throws.
    public func blob(_ name: String) throws -> [UInt8] {
        guard let value = try statement.checkedBlob(name) else { throw statement.null(name, .blob) }
        return value
    }

    /// Column `name` as an integer, nil for NULL; another type throws.
    public func optionalInt64(_ name: String) throws -> Int64? {
        try statement.checkedInt64(name)
    }

    /// Column `name` as an `Int`, nil for NULL; another type throws.
    public func optionalInt(_ name: String) throws -> Int? {
        try statement.checkedInt(name)
    }

    /// Column `name` as an integer of type `T`, nil for NULL; another type,
    /// or a value `T` cannot hold, throws.
    public func optionalInteger<T: FixedWidthInteger>(_ name: String, as type: T.Type = T.self) throws -> T? {
        guard let integer = try statement.checkedInt64(name) else { return nil }
        guard let value = T(exactly: integer) else {
            throw statement.mismatch(name, "holds \(integer), which is out of range for \(T.self)")
        }
        return value
    }

    /// Column `name` as a floating-point number, nil for NULL; another type throws.
    public func optionalDouble(_ name: String) throws -> Double? {
        try statement.checkedDouble(name)
    }

    /// Column `name` as text, nil for NULL; another type throws.
    public func optionalString(_ name: String) throws -> String? {
        try statement.checkedString(name)
    }

    /// Column `name` as bytes, nil for NULL; another type throws.
    public func optionalBlob(_ name: String) throws -> [UInt8]? {
        try statement.checkedBlob(name)
    }

    /// Whether column `name` is NULL; a missing or ambiguous name throws.
    public func isNull(_ name: String) throws -> Bool {
        statement.isNull(at: try statement.requiredColumnIndex(named: name))
    }

    /// Column `name` with its stored type, NULL included; a missing or
    /// ambiguous name throws.
    public func value(_ name: String) throws -> SQLiteValue {
        statement.value(at: try statement.requiredColumnIndex(named: name))
    }

    // MARK: By position

    public func isNull(_ index: Int) -> Bool { statement.isNull(at: index) }
    public func int64(_ index: Int) -> Int64? { statement.int64(at: index) }
    public func int(_ index: Int) -> Int? { statement.int(at: index) }
    public func double(_ index: Int) -> Double? { statement.double(at: index) }
    public func string(_ index: Int) -> String? { statement.string(at: index) }
    public func blob(_ index: Int) -> [UInt8]? { statement.blob(at: index) }
    public subscript(_ index: Int) -> SQLiteValue { statement.value(at: index) }
    /// The first column called `name`, or `.null` if there is none; prefer
    /// `value(_:)`, which tells a missing column from NULL.
    public subscript(_ name: String) -> SQLiteValue {
        statement.columnIndex(named: name).map { statement.value(at: $0) } ?? .null
    }
    /// All columns, in order.
    public var values: [SQLiteValue] { (0..<count).map { statement.value(at: $0) } }
}

@available(*, unavailable)
extension Row: Sendable {}
