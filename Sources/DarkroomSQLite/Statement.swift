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
    /// Which parameters (index - 1) have been bound since the last reset, and
    /// how many: `step()` starts a run only when all of them are.
    private var bound: [Bool]
    private var boundCount = 0

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
        if !bound[index - 1] {
            bound[index - 1] = true
            boundCount += 1
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
        for (offset, value) in values.enumerated() {
            try bind(value, at: offset + 1)
        }
    }

    /// Sets every parameter to NULL and counts none as bound: the next run
    /// binds them all again.
    public func clearBindings() {
        if let statement { sqlite3_clear_bindings(statement) }
        forgetBindings()
    }

    private func forgetBindings() {
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
        guard boundCount < parameterCount, let statement else { return }
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
        if boundCount > 0 { sqlite3_clear_bindings(statement) }
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
        for (offset, value) in values.enumerated() {
            try bind(value, at: offset + 1)
        }
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

    /// The index of the result column called `name`.
    public func columnIndex(named name: String) -> Int? {
        (0..<columnCount).first { columnName(at: $0) == name }
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
}

@available(*, unavailable, message: "a SQLite statement belongs to its connection's thread")
extension Statement: Sendable {}

/// The current row of a statement, valid only inside the closure that received it.
public struct Row {
    let statement: Statement

    public var count: Int { statement.columnCount }
    public func isNull(_ index: Int) -> Bool { statement.isNull(at: index) }
    public func int64(_ index: Int) -> Int64? { statement.int64(at: index) }
    public func int(_ index: Int) -> Int? { statement.int(at: index) }
    public func double(_ index: Int) -> Double? { statement.double(at: index) }
    public func string(_ index: Int) -> String? { statement.string(at: index) }
    public func blob(_ index: Int) -> [UInt8]? { statement.blob(at: index) }
    public subscript(_ index: Int) -> SQLiteValue { statement.value(at: index) }
    /// The column called `name`, or `.null` if there is none.
    public subscript(_ name: String) -> SQLiteValue {
        statement.columnIndex(named: name).map { statement.value(at: $0) } ?? .null
    }
    /// All columns, in order.
    public var values: [SQLiteValue] { (0..<count).map { statement.value(at: $0) } }
}

@available(*, unavailable)
extension Row: Sendable {}
