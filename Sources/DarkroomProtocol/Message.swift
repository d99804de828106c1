/// One DRK1 message type: its command, how its fields are read and written.
/// `frames()` builds the message; `decode(_:)` checks and parses one.
public protocol WireMessage: Sendable, Equatable {
    static var command: Command { get }
    init(from reader: inout MessageReader) throws(ProtocolError)
    func write(to writer: inout MessageWriter)
}

extension WireMessage {
    /// The message as ZeroMQ frames, starting with "DRK1" (no ROUTER identity).
    public func frames() -> [[UInt8]] {
        var writer = MessageWriter(Self.command)
        write(to: &writer)
        return writer.frames
    }

    /// Decodes a message that must be this command.
    public static func decode(_ frames: [[UInt8]]) throws(ProtocolError) -> Self {
        var reader = try MessageReader(frames, expecting: command, context: "here (expected \(command.name))")
        let message = try Self(from: &reader)
        try reader.finish()
        return message
    }
}

// MARK: - Common messages

/// ERROR: the peer's message was not acted on. Sent on any socket in reply to
/// a message that can be answered. On the backend the request id is 0.
///
///     2 request id  u64 (0 when the message had none or it could not be read)
///     3 code        u16, see `ErrorCode`
///     4 reason      text, one line, 0…4096 bytes
public struct ErrorReply: WireMessage {
    public static let command = Command.error
    public var requestID: UInt64
    public var code: ErrorCode
    public var reason: String

    public init(requestID: UInt64, code: ErrorCode, reason: String) {
        self.requestID = requestID
        self.code = code
        self.reason = reason
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        code = ErrorCode(rawValue: try r.u16("code"))
        reason = try r.text("reason", bytes: 0...Wire.Limit.reasonBytes)
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.u16(code.rawValue)
        w.text(reason)
    }

    /// The error as a Swift error, for rethrowing on the client side.
    public var error: ProtocolError { ProtocolError(code, reason) }
}

/// PING: is the peer alive and speaking DRK1? Answered by PONG with the same id.
///
///     2 request id  u64
public struct Ping: WireMessage {
    public static let command = Command.ping
    public var requestID: UInt64
    public init(requestID: UInt64) { self.requestID = requestID }
    public init(from r: inout MessageReader) throws(ProtocolError) { requestID = try r.u64("request id") }
    public func write(to w: inout MessageWriter) { w.u64(requestID) }
}

/// PONG: the answer to PING.
///
///     2 request id  u64
public struct Pong: WireMessage {
    public static let command = Command.pong
    public var requestID: UInt64
    public init(requestID: UInt64) { self.requestID = requestID }
    public init(from r: inout MessageReader) throws(ProtocolError) { requestID = try r.u64("request id") }
    public func write(to w: inout MessageWriter) { w.u64(requestID) }
}

/// OK: a request that changes state (DEAD-RETRY, DEAD-DISCARD, DELETE) was done.
///
///     2 request id  u64
///     3 count       u64, how many jobs or records it affected
public struct OKReply: WireMessage {
    public static let command = Command.ok
    public var requestID: UInt64
    public var count: UInt64
    public init(requestID: UInt64, count: UInt64) {
        self.requestID = requestID
        self.count = count
    }
    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        count = try r.u64("count")
    }
    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.u64(count)
    }
}
