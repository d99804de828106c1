import CSQLite

/// A SQLite result code. Primary codes (`busy`, `constraint`, ...) are the low
/// byte; extended codes (`constraintForeignKey`, ...) refine them.
public struct ResultCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary code of an extended code (the low 8 bits).
    public var primary: ResultCode { ResultCode(rawValue: rawValue & 0xff) }

    /// SQLite's English text for the code (`sqlite3_errstr`).
    public var description: String {
        String(cString: sqlite3_errstr(rawValue))
    }

    public static let ok = ResultCode(rawValue: SQLITE_OK)
    public static let error = ResultCode(rawValue: SQLITE_ERROR)
    public static let `internal` = ResultCode(rawValue: SQLITE_INTERNAL)
    public static let permission = ResultCode(rawValue: SQLITE_PERM)
    public static let abort = ResultCode(rawValue: SQLITE_ABORT)
    public static let busy = ResultCode(rawValue: SQLITE_BUSY)
    public static let locked = ResultCode(rawValue: SQLITE_LOCKED)
    public static let noMemory = ResultCode(rawValue: SQLITE_NOMEM)
    public static let readOnly = ResultCode(rawValue: SQLITE_READONLY)
    public static let interrupt = ResultCode(rawValue: SQLITE_INTERRUPT)
    public static let ioError = ResultCode(rawValue: SQLITE_IOERR)
    public static let corrupt = ResultCode(rawValue: SQLITE_CORRUPT)
    public static let full = ResultCode(rawValue: SQLITE_FULL)
    public static let cannotOpen = ResultCode(rawValue: SQLITE_CANTOPEN)
    public static let schema = ResultCode(rawValue: SQLITE_SCHEMA)
    public static let tooBig = ResultCode(rawValue: SQLITE_TOOBIG)
    public static let constraint = ResultCode(rawValue: SQLITE_CONSTRAINT)
    public static let mismatch = ResultCode(rawValue: SQLITE_MISMATCH)
    public static let misuse = ResultCode(rawValue: SQLITE_MISUSE)
    public static let range = ResultCode(rawValue: SQLITE_RANGE)
    public static let notADatabase = ResultCode(rawValue: SQLITE_NOTADB)
    public static let row = ResultCode(rawValue: SQLITE_ROW)
    public static let done = ResultCode(rawValue: SQLITE_DONE)

    public static let constraintUnique = ResultCode(rawValue: SQLITE_CONSTRAINT | (8 << 8))
    public static let constraintPrimaryKey = ResultCode(rawValue: SQLITE_CONSTRAINT | (6 << 8))
    public static let constraintForeignKey = ResultCode(rawValue: SQLITE_CONSTRAINT | (3 << 8))
    public static let constraintNotNull = ResultCode(rawValue: SQLITE_CONSTRAINT | (5 << 8))
    public static let constraintCheck = ResultCode(rawValue: SQLITE_CONSTRAINT | (1 << 8))
    public static let busySnapshot = ResultCode(rawValue: SQLITE_BUSY | (2 << 8))

    /// Matches a primary code against any extended code that refines it, and
    /// an extended code exactly: `.constraint ~= .constraintUnique` is true.
    public static func ~= (pattern: ResultCode, code: ResultCode) -> Bool {
        pattern.rawValue & ~0xff == 0 ? pattern == code.primary : pattern == code
    }

    /// Lets `catch ResultCode.constraint` (or any code) catch a `SQLiteError`.
    public static func ~= (pattern: ResultCode, error: any Error) -> Bool {
        guard let error = error as? SQLiteError else { return false }
        return pattern ~= error.code
    }
}

/// A failed SQLite call: its extended result code, SQLite's message
/// (`sqlite3_errmsg` at the time of failure) and the SQL involved, if any.
///
/// Catch by code with `catch ResultCode.busy` (a primary code also matches
/// its extended codes) or by value with `catch let error as SQLiteError`.
/// Every call in this module throws only this type, except `transaction`,
/// `withSavepoint` and `migrate`, which pass on what their closures throw,
/// and throw a `TransactionError` when the transaction did not end where the
/// caller would assume. Calls are declared plain `throws`: Swift 6.3 crashes
/// compiling a non-exhaustive `catch` of a typed-thrown error.
public struct SQLiteError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The extended result code.
    public let code: ResultCode
    public let message: String
    public let sql: String?

    public init(code: ResultCode, message: String, sql: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
    }

    /// The primary result code (`busy`, `constraint`, ...).
    public var primaryCode: ResultCode { code.primary }

    public var description: String {
        var text = "SQLite error \(code.rawValue) (\(code.primary)): \(message)"
        if let sql { text += " in \"\(sql)\"" }
        return text
    }

    /// Builds an error from a connection's current error state.
    static func from(_ code: Int32, db: OpaquePointer?, sql: String?) -> SQLiteError {
        var extended = code
        var message = String(cString: sqlite3_errstr(code))
        if let db {
            let dbCode = sqlite3_extended_errcode(db)
            if dbCode & 0xff == code & 0xff { extended = dbCode }
            if let text = sqlite3_errmsg(db) { message = String(cString: text) }
        }
        return SQLiteError(code: ResultCode(rawValue: extended), message: message, sql: sql)
    }

    static func misuse(_ message: String, sql: String? = nil) -> SQLiteError {
        SQLiteError(code: .misuse, message: message, sql: sql)
    }

    public static func ~= (pattern: ResultCode, error: SQLiteError) -> Bool {
        pattern ~= error.code
    }
}

/// Work in a transaction or savepoint failed, and the transaction did not end
/// up where the caller would assume, because SQLite had already rolled back
/// the whole transaction by itself, or because undoing the work failed too.
///
/// When only the work failed and undoing it went as planned, `transaction`
/// and `withSavepoint` throw the work's own error, not this type: this one
/// means the caller has to act on the transaction, not just on the error.
public struct TransactionError: Error, CustomStringConvertible {
    /// The error that started it: what the closure threw, or the failure of
    /// the COMMIT or RELEASE that ended the work.
    public let cause: any Error
    /// SQLite rolled back the whole enclosing transaction by itself, as it
    /// may on `full`, `ioError`, `busy`, `noMemory` or `interrupt`
    /// (https://www.sqlite.org/lang_transaction.html, "Response To Errors
    /// Within A Transaction"). Everything since BEGIN is gone, not only the
    /// savepoint's work, and no transaction is open: SQL run from here on
    /// would commit statement by statement, so the caller must give up the
    /// transaction's other work and begin again.
    public let transactionRolledBack: Bool
    /// The ROLLBACK, ROLLBACK TO or RELEASE that should have undone the work,
    /// when it failed. The transaction may then still be open and hold part
    /// of the failed work; roll it back as a whole.
    public let rollbackFailure: SQLiteError?

    public init(cause: any Error, transactionRolledBack: Bool, rollbackFailure: SQLiteError?) {
        self.cause = cause
        self.transactionRolledBack = transactionRolledBack
        self.rollbackFailure = rollbackFailure
    }

    public var description: String {
        var text = "\(cause)"
        if transactionRolledBack { text += "; SQLite rolled back the whole transaction" }
        if let rollbackFailure { text += "; undoing the work failed too: \(rollbackFailure)" }
        return text
    }
}
