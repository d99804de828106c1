import CSQLite

/// The open `sqlite3*` shared by a connection and its statements. It is
/// released with `sqlite3_close_v2` once the connection is closed or gone and
/// the last statement is finalized, so a statement never outlives its database.
final class DatabaseHandle {
    private(set) var db: OpaquePointer?

    init(_ db: OpaquePointer) { self.db = db }

    func close() throws {
        guard let db else { return }
        let code = sqlite3_close_v2(db)
        guard code == SQLITE_OK else { throw SQLiteError.from(code, db: db, sql: nil) }
        self.db = nil
    }

    deinit {
        if let db { sqlite3_close_v2(db) }
    }
}

/// A connection to a SQLite database file.
///
/// Threading: a connection is **owned by one thread** (the storage node's or
/// the broker's database thread), together with its statements; it is not
/// `Sendable`. It is opened with `SQLITE_OPEN_NOMUTEX`, which is safe exactly
/// because only its owner touches it. Other threads hand work to the owner
/// (for example through a `Mailbox`) or open their own connection; in WAL mode
/// readers on other connections do not block the writer.
public final class Connection {
    /// How the database is opened and configured.
    public struct Options: Sendable, Hashable {
        /// Open read-only.
        public var readOnly = false
        /// Create the file if it does not exist (ignored when `readOnly`).
        public var create = true
        /// The journal mode to switch to; `.wal` lets readers run beside one writer.
        public var journalMode: JournalMode? = .wal
        /// `PRAGMA synchronous`: `.normal` is durable across application
        /// crashes in WAL mode; `.full` also across power loss.
        public var synchronous: Synchronous? = .full
        /// `PRAGMA foreign_keys`: enforce foreign keys and their actions.
        public var foreignKeys = true
        /// How long to retry when another connection holds a lock, in ms.
        public var busyTimeoutMilliseconds = 5000
        /// `PRAGMA secure_delete`; nil keeps the library's default (Debian
        /// builds SQLite with it on, which zeroes deleted content even in
        /// pages that would otherwise not be written again).
        public var secureDelete: SecureDelete?
        /// `PRAGMA wal_autocheckpoint`, in pages; nil keeps SQLite's 1000
        /// (about 4 MB of log). A larger log is copied back less often, and a
        /// page written many times in between is copied once.
        public var walAutocheckpointPages: Int?
        /// `PRAGMA temp_store`; nil keeps the library's default (a file).
        /// With `.memory` a savepoint's journal stays in memory: on a file,
        /// SQLite keeps writing every savepoint's first change to a page
        /// into it once it has once grown past 64 KiB, a system call per
        /// page.
        public var tempStore: TempStore?
        /// `PRAGMA cache_size` as a size in KiB; nil keeps SQLite's 2,000
        /// KiB. A page that falls out of the cache while its transaction's
        /// frames are still in the log is read back from the log.
        public var cacheKiB: Int?

        public init() {}
    }

    public enum JournalMode: String, Sendable, Hashable {
        case delete, truncate, persist, memory, wal, off
    }

    public enum Synchronous: String, Sendable, Hashable {
        case off, normal, full, extra
    }

    /// `PRAGMA temp_store`: where temporary tables, sorts and statement
    /// and savepoint journals live.
    public enum TempStore: String, Sendable, Hashable {
        case `default`, file, memory
    }

    /// `PRAGMA secure_delete`: `.on` zeroes deleted content always, `.fast`
    /// only where that costs no extra writes, `.off` never.
    public enum SecureDelete: String, Sendable, Hashable {
        case on, fast, off
    }

    /// What `checkpoint` copies and whether it waits (`sqlite3_wal_checkpoint_v2`).
    public enum CheckpointMode: Sendable, Hashable {
        /// Copy what can be copied without waiting for readers or writers.
        case passive
        /// Wait for writers, then copy everything.
        case full
        /// As `full`, then wait for readers so the next writer restarts the log.
        case restart
        /// As `restart`, then truncate the log file to zero bytes.
        case truncate

        var rawValue: Int32 {
            switch self {
            case .passive: return SQLITE_CHECKPOINT_PASSIVE
            case .full: return SQLITE_CHECKPOINT_FULL
            case .restart: return SQLITE_CHECKPOINT_RESTART
            case .truncate: return SQLITE_CHECKPOINT_TRUNCATE
            }
        }
    }

    /// The outcome of a checkpoint, in WAL frames.
    public struct CheckpointResult: Sendable, Hashable {
        /// Frames in the log.
        public let logFrames: Int
        /// Frames copied back into the database.
        public let checkpointedFrames: Int
    }

    let handle: DatabaseHandle
    /// The path the connection was opened with.
    public let path: String
    private var cache: [String: Statement] = [:]
    /// The statements of each savepoint name used so far.
    private var savepoints: [String: SavepointStatements] = [:]

    /// What one savepoint name runs, prepared together at the name's first
    /// use: undoing a failed body then compiles no SQL, which could itself
    /// fail (for example on `noMemory`), and a savepoint costs no parsing
    /// however often it runs.
    private struct SavepointStatements {
        let begin: Statement
        let release: Statement
        let rollbackTo: Statement
        /// Undoes a savepoint that began the transaction.
        let rollback: Statement
    }

    /// Process-wide settings made once, before the first connection opens
    /// (which initializes SQLite; `sqlite3_config` refuses them after).
    /// Memory statistics are off: no part of Darkroom reads them, and with
    /// them on every allocation SQLite makes, on any connection, takes one
    /// process-wide mutex, contended between the broker's and the storage
    /// node's database threads in `darkroom up`.
    private static let libraryConfigured: Void = {
        let code = darkroom_sqlite3_config_memstatus(0)
        // Refused only once SQLite has initialized: something opened it
        // before this point, and the statistics' mutex stays on.
        assert(code == SQLITE_OK, "sqlite3_config(SQLITE_CONFIG_MEMSTATUS) came after SQLite initialized")
    }()

    /// Opens (and by default creates) the database at `path` and applies
    /// `options`. `":memory:"` opens a private in-memory database.
    public init(path: String, options: Options = Options()) throws {
        _ = Connection.libraryConfigured
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        if options.readOnly {
            flags |= SQLITE_OPEN_READONLY
        } else {
            flags |= SQLITE_OPEN_READWRITE
            if options.create { flags |= SQLITE_OPEN_CREATE }
        }
        var db: OpaquePointer?
        let code = sqlite3_open_v2(path, &db, flags, nil)
        guard code == SQLITE_OK, let db else {
            let error = SQLiteError.from(code, db: db, sql: nil)
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: error.code, message: "cannot open \(path): \(error.message)")
        }
        sqlite3_extended_result_codes(db, 1)
        self.handle = DatabaseHandle(db)
        self.path = path

        sqlite3_busy_timeout(db, Int32(clamping: options.busyTimeoutMilliseconds))
        if let mode = options.journalMode {
            try execute("PRAGMA journal_mode = \(mode.rawValue)")
        }
        if let synchronous = options.synchronous {
            try execute("PRAGMA synchronous = \(synchronous.rawValue)")
        }
        try execute("PRAGMA foreign_keys = \(options.foreignKeys ? "ON" : "OFF")")
        if let secureDelete = options.secureDelete {
            try execute("PRAGMA secure_delete = \(secureDelete.rawValue)")
        }
        if let pages = options.walAutocheckpointPages {
            try execute("PRAGMA wal_autocheckpoint = \(max(0, pages))")
        }
        if let tempStore = options.tempStore {
            try execute("PRAGMA temp_store = \(tempStore.rawValue)")
        }
        if let kib = options.cacheKiB {
            // A negative cache_size is a size in KiB rather than in pages.
            try execute("PRAGMA cache_size = \(-max(1, kib))")
        }
    }

    deinit {
        for statement in cache.values { statement.finalize() }
    }

    func openDB(sql: String? = nil) throws -> OpaquePointer {
        guard let db = handle.db else { throw SQLiteError.misuse("the database connection is closed", sql: sql) }
        return db
    }

    /// Whether `close()` has not been called.
    public var isOpen: Bool { handle.db != nil }

    /// Closes the connection: finalizes cached statements and releases the
    /// database. Statements still held elsewhere stop working (they throw
    /// `misuse`). Calling it again does nothing.
    public func close() throws {
        savepoints.removeAll()
        for statement in cache.values { statement.finalize() }
        cache.removeAll()
        try handle.close()
    }

    // MARK: Running SQL

    /// Runs every statement in `sql` (a script of `;`-separated statements),
    /// discarding any rows. Stops at the first failing statement.
    public func execute(_ sql: String) throws {
        let db = try openDB(sql: sql)
        var text = sql
        // withUTF8 only rethrows untyped errors, so the failure is carried out as a value.
        let failure: SQLiteError? = text.withUTF8 { buffer in
            guard let base = buffer.baseAddress else { return nil }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { start in
                var offset = 0
                while offset < buffer.count {
                    var statement: OpaquePointer?
                    var tail: UnsafePointer<CChar>?
                    let code = sqlite3_prepare_v2(db, start + offset, Int32(clamping: buffer.count - offset), &statement, &tail)
                    let consumed = tail.map { $0 - (start + offset) } ?? (buffer.count - offset)
                    let piece = String(decoding: UnsafeRawBufferPointer(buffer)[offset..<(offset + consumed)], as: UTF8.self)
                    guard code == SQLITE_OK else {
                        sqlite3_finalize(statement)
                        return SQLiteError.from(code, db: db, sql: piece)
                    }
                    offset += max(consumed, 1)
                    guard let statement else { continue }  // whitespace or a comment
                    defer { sqlite3_finalize(statement) }
                    var step = sqlite3_step(statement)
                    while step == SQLITE_ROW { step = sqlite3_step(statement) }
                    guard step == SQLITE_DONE else {
                        return SQLiteError.from(step, db: db, sql: piece)
                    }
                }
                return nil
            }
        }
        if let failure { throw failure }
    }

    /// Runs one statement with the given parameters, discarding any rows.
    public func execute(_ sql: String, _ bindings: (any SQLiteBindable)?...) throws {
        try prepare(sql).execute(bindings)
    }

    /// Runs one query and maps each row.
    @discardableResult
    public func query<T>(_ sql: String, _ bindings: (any SQLiteBindable)?..., map: (Row) throws -> T) throws -> [T] {
        try prepare(sql).query(bindings, map: map)
    }

    /// Prepares one statement. With `cached` (the default) the compiled
    /// statement is kept and returned again, reset and with its parameters
    /// cleared, for the same SQL; a cached statement that is still being
    /// stepped is not reused, so nested queries with the same SQL are safe.
    public func prepare(_ sql: String, cached: Bool = true) throws -> Statement {
        if cached, let statement = cache[sql], !statement.isBusy {
            statement.reset()
            return statement
        }
        let statement = try Statement(handle: handle, sql: sql)
        if cached && cache[sql] == nil { cache[sql] = statement }
        return statement
    }

    // MARK: Transactions

    /// Whether a transaction is open (`!sqlite3_get_autocommit`).
    public var isInTransaction: Bool {
        guard let db = handle.db else { return false }
        return sqlite3_get_autocommit(db) == 0
    }

    /// Runs `body` in a transaction and commits it; if `body` or the commit
    /// throws, rolls back and rethrows that first error. If the rollback
    /// fails as well, the connection may still be in the transaction, which
    /// the caller has to know: the error is then a `TransactionError` that
    /// carries both, the first error as its `cause`.
    ///
    /// `immediate` (the default) takes the write lock at `BEGIN IMMEDIATE`,
    /// so a busy database fails, or waits out the busy timeout, before any
    /// work is done rather than at the first write. Transactions do not nest;
    /// opening one inside another throws `misuse`.
    @discardableResult
    public func transaction<T>(immediate: Bool = true, _ body: () throws -> T) throws -> T {
        guard !isInTransaction else {
            throw SQLiteError.misuse("a transaction is already open on this connection")
        }
        try prepare(immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED").execute()
        do {
            let result = try body()
            try prepare("COMMIT").execute()
            return result
        } catch {
            guard isInTransaction else { throw error }
            do {
                try prepare("ROLLBACK").execute()
            } catch let rollbackError {
                throw TransactionError(cause: error, transactionRolledBack: false,
                                       rollbackFailure: Connection.sqliteError(rollbackError))
            }
            throw error
        }
    }

    /// Errors from this module are all `SQLiteError`s; anything else is
    /// described in one.
    private static func sqliteError(_ error: any Error) -> SQLiteError {
        error as? SQLiteError ?? SQLiteError(code: .error, message: "\(error)")
    }

    // MARK: Savepoints

    /// Runs `body` in savepoint `name` and releases it, keeping the work in
    /// the enclosing transaction; outside a transaction the savepoint is the
    /// transaction, and its release commits.
    ///
    /// If `body` (or the release) throws, only the savepoint's work is
    /// undone (ROLLBACK TO, then RELEASE; ROLLBACK when the savepoint began
    /// the transaction) and the error is rethrown, so earlier work in the
    /// transaction survives. Two outcomes change what the caller must do,
    /// and throw a `TransactionError` with the error as its `cause`:
    ///
    /// - SQLite had already rolled back the whole enclosing transaction by
    ///   itself (`transactionRolledBack`), which it may do on `full`,
    ///   `ioError`, `busy`, `noMemory` or `interrupt`. A caller that keeps
    ///   one transaction open across many savepoints learns here that the
    ///   transaction's earlier work is gone and that it is no longer in a
    ///   transaction.
    /// - Undoing the savepoint failed (`rollbackFailure`).
    ///
    /// The statements for `name` are prepared at its first use and kept, so
    /// a savepoint costs three statement runs and no parsing. The same name
    /// may nest: each ROLLBACK TO and RELEASE reaches the innermost one.
    /// `name` is letters, digits and underscores, not starting with a digit.
    @discardableResult
    public func withSavepoint<T>(_ name: String = "darkroom", _ body: () throws -> T) throws -> T {
        let statements = try savepointStatements(name)
        let outermost = !isInTransaction
        try statements.begin.execute(values: [])
        let result: T
        do {
            result = try body()
            try statements.release.execute(values: [])
        } catch {
            throw undoSavepoint(statements, outermost: outermost, cause: error)
        }
        return result
    }

    /// Undoes a savepoint whose work failed with `cause`; returns what
    /// `withSavepoint` throws.
    private func undoSavepoint(_ statements: SavepointStatements, outermost: Bool, cause: any Error) -> any Error {
        guard isInTransaction else {
            // SQLite ended the transaction by itself. That is all the undo a
            // savepoint that began the transaction needs; under an enclosing
            // transaction, that transaction's earlier work is gone too.
            return outermost ? cause : TransactionError(cause: cause, transactionRolledBack: true, rollbackFailure: nil)
        }
        do {
            if outermost {
                try statements.rollback.execute(values: [])
            } else {
                try statements.rollbackTo.execute(values: [])
                try statements.release.execute(values: [])
            }
            return cause
        } catch {
            return TransactionError(cause: cause, transactionRolledBack: !outermost && !isInTransaction,
                                    rollbackFailure: Connection.sqliteError(error))
        }
    }

    /// Opens savepoint `name` (SAVEPOINT); outside a transaction this also
    /// begins one, deferred. Prefer `withSavepoint`, which undoes the
    /// savepoint on failure and reports a transaction SQLite rolled back.
    public func savepoint(_ name: String) throws {
        try savepointStatements(name).begin.execute(values: [])
    }

    /// Ends savepoint `name` and the savepoints opened after it, keeping
    /// their work in the enclosing transaction (RELEASE). Releasing the
    /// savepoint that began the transaction commits it.
    public func release(_ name: String) throws {
        try savepointStatements(name).release.execute(values: [])
    }

    /// Undoes the work done since savepoint `name` (ROLLBACK TO). The
    /// savepoint stays open, to be released, and so does the transaction.
    public func rollback(to name: String) throws {
        try savepointStatements(name).rollbackTo.execute(values: [])
    }

    private func savepointStatements(_ name: String) throws -> SavepointStatements {
        if let statements = savepoints[name] { return statements }
        guard Connection.isPlainName(name) else {
            throw SQLiteError.misuse("savepoint name \"\(name)\" must be ASCII letters, digits and underscores, not starting with a digit")
        }
        let statements = SavepointStatements(
            begin: try prepare("SAVEPOINT \(name)"),
            release: try prepare("RELEASE \(name)"),
            rollbackTo: try prepare("ROLLBACK TO \(name)"),
            rollback: try prepare("ROLLBACK"))
        savepoints[name] = statements
        return statements
    }

    /// A name that goes into SQL as it is, with no quoting to get wrong.
    private static func isPlainName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
        }
    }

    // MARK: Schema version

    /// The database's schema version, `PRAGMA user_version` (0 for a new
    /// database).
    public func userVersion() throws -> Int64 {
        let sql = "PRAGMA user_version"
        guard let version = try prepare(sql).query(map: { try $0.int64("user_version") }).first else {
            throw SQLiteError(code: .error, message: "PRAGMA user_version returned no row", sql: sql)
        }
        return version
    }

    /// Sets `PRAGMA user_version`, a 32-bit integer in the database header.
    /// Inside a transaction it commits or rolls back with the transaction.
    public func setUserVersion(_ version: Int64) throws {
        guard let value = Int32(exactly: version) else {
            throw SQLiteError(code: .range, message: "schema version \(version) does not fit PRAGMA user_version, a 32-bit integer")
        }
        try execute("PRAGMA user_version = \(value)")
    }

    /// Brings the schema up to version `latest`: each step newer than the
    /// database's `user_version` runs, in order, in its own transaction,
    /// which also sets `user_version` to the step's version, so a step that
    /// fails leaves the database at the previous version and a crash never
    /// leaves half a step. Returns the versions applied, in order.
    ///
    /// Steps are numbered from 1 and increase, the last one being `latest`;
    /// a new schema version appends a step and existing steps never change.
    /// A database whose version is above `latest` was written by a newer
    /// darkroom and is refused rather than misread: the error says so and
    /// names both versions. Each step reads the version again after BEGIN
    /// IMMEDIATE has taken the write lock, so two processes opening one
    /// database at the same time apply each step once.
    @discardableResult
    public func migrate(to latest: Int64, steps: [(version: Int64, apply: (Connection) throws -> Void)]) throws -> [Int64] {
        var previous: Int64 = 0
        for step in steps {
            guard step.version > previous, step.version <= Int64(Int32.max) else {
                throw SQLiteError.misuse("migration steps must be numbered upwards from 1 within 32 bits; \(step.version) follows \(previous)")
            }
            previous = step.version
        }
        guard previous == latest else {
            throw SQLiteError.misuse("the latest schema version is \(latest) but the last migration step is \(previous)")
        }
        let found = try userVersion()
        try checkSchemaVersion(found, latest: latest)
        var applied: [Int64] = []
        for step in steps where step.version > found {
            let ran = try transaction { () throws -> Bool in
                let current = try userVersion()
                try checkSchemaVersion(current, latest: latest)
                guard current < step.version else { return false }  // applied meanwhile by another connection
                try step.apply(self)
                try setUserVersion(step.version)
                return true
            }
            if ran { applied.append(step.version) }
        }
        return applied
    }

    /// Refuses a schema version this binary cannot read.
    private func checkSchemaVersion(_ found: Int64, latest: Int64) throws {
        guard found >= 0 else {
            throw SQLiteError(code: .error, message: "\(path): database schema version \(found) is negative; darkroom did not write it")
        }
        guard found <= latest else {
            throw SQLiteError(
                code: .error,
                message: "\(path): database schema version \(found) is newer than this darkroom, which knows up to \(latest); upgrade darkroom")
        }
    }

    // MARK: Status

    /// The rowid of the most recent successful INSERT on this connection.
    public var lastInsertRowID: Int64 {
        guard let db = handle.db else { return 0 }
        return sqlite3_last_insert_rowid(db)
    }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE.
    public var changes: Int {
        guard let db = handle.db else { return 0 }
        return Int(sqlite3_changes64(db))
    }

    /// Rows changed since the connection was opened.
    public var totalChanges: Int {
        guard let db = handle.db else { return 0 }
        return Int(sqlite3_total_changes64(db))
    }

    /// Copies the WAL back into the database file.
    @discardableResult
    public func checkpoint(_ mode: CheckpointMode = .passive) throws -> CheckpointResult {
        let db = try openDB()
        var log: Int32 = 0
        var done: Int32 = 0
        let code = sqlite3_wal_checkpoint_v2(db, nil, mode.rawValue, &log, &done)
        guard code == SQLITE_OK else { throw SQLiteError.from(code, db: db, sql: nil) }
        return CheckpointResult(logFrames: Int(log), checkpointedFrames: Int(done))
    }

    /// The value of a pragma as text, e.g. `pragma("journal_mode")` is `"wal"`.
    public func pragma(_ name: String) throws -> String? {
        let statement = try prepare("PRAGMA \(name)", cached: false)
        defer { statement.finalize() }
        guard try statement.step() else { return nil }
        return statement.string(at: 0)
    }

    /// The version of the loaded SQLite library, e.g. `"3.40.1"`.
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }
}

@available(*, unavailable, message: "a SQLite connection belongs to one thread")
extension Connection: Sendable {}
