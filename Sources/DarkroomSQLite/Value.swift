/// A value as SQLite stores it.
public enum SQLiteValue: Sendable, Hashable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
    case null
}

extension SQLiteValue: ExpressibleByNilLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(stringLiteral value: String) { self = .text(value) }
}

/// A Swift value that can be bound to a statement parameter.
public protocol SQLiteBindable {
    var sqliteValue: SQLiteValue { get }
}

extension SQLiteValue: SQLiteBindable {
    public var sqliteValue: SQLiteValue { self }
}
extension Int64: SQLiteBindable {
    public var sqliteValue: SQLiteValue { .integer(self) }
}
extension Int: SQLiteBindable {
    public var sqliteValue: SQLiteValue { .integer(Int64(self)) }
}
extension Int32: SQLiteBindable {
    public var sqliteValue: SQLiteValue { .integer(Int64(self)) }
}
extension Bool: SQLiteBindable {
    /// Stored as 1 or 0, as SQLite does.
    public var sqliteValue: SQLiteValue { .integer(self ? 1 : 0) }
}
extension Double: SQLiteBindable {
    public var sqliteValue: SQLiteValue { .real(self) }
}
extension String: SQLiteBindable {
    public var sqliteValue: SQLiteValue { .text(self) }
}
extension Substring: SQLiteBindable {
    public var sqliteValue: SQLiteValue { .text(String(self)) }
}
extension Array: SQLiteBindable where Element == UInt8 {
    public var sqliteValue: SQLiteValue { .blob(self) }
}
extension Optional: SQLiteBindable where Wrapped: SQLiteBindable {
    public var sqliteValue: SQLiteValue { self?.sqliteValue ?? .null }
}
