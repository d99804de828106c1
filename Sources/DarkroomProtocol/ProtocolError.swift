/// A DRK1 error: a numeric code that travels in ERROR and REJECTED, and a
/// one-line reason naming the command, the frame and what is wrong with it,
/// for example `SUBMIT: frame 5 (pipeline) is not valid UTF-8`.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ErrorCode
    public var reason: String

    public init(_ code: ErrorCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code): \(reason)" }

    /// Lets callers write `catch let e as ProtocolError where e ~= .queueFull`.
    public static func ~= (code: ErrorCode, error: ProtocolError) -> Bool { error.code == code }
}

/// The u16 error codes of DRK1. The hundreds digit is the class, so a peer
/// that meets a code it does not know still knows what to do:
///
/// - 1xx the sender broke the protocol (fix the sender; do not retry);
/// - 2xx the request was refused for now (retry later);
/// - 3xx the request is invalid (do not retry unchanged);
/// - 5xx the receiver failed (retry may help).
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Frame 0 is not "DRK1".
    public static let badVersion = ErrorCode(rawValue: 100)
    /// Wrong frame count, wrong frame length, bad UTF-8, a value out of range.
    public static let malformed = ErrorCode(rawValue: 101)
    /// A command byte DRK1 does not define.
    public static let unknownCommand = ErrorCode(rawValue: 102)
    /// A command DRK1 defines, but not on this socket or not in this state
    /// (CREDIT before READY, a reply sent as a request).
    public static let unexpectedCommand = ErrorCode(rawValue: 103)

    /// The queue is over its depth limit (backpressure). Retry later.
    public static let queueFull = ErrorCode(rawValue: 200)
    /// The peer is shutting down. Retry later, possibly elsewhere.
    public static let shuttingDown = ErrorCode(rawValue: 201)

    /// No such job or record.
    public static let notFound = ErrorCode(rawValue: 300)
    /// The pipeline text does not parse or does not validate.
    public static let invalidPipeline = ErrorCode(rawValue: 301)
    /// The image is not acceptable (not a JPEG, corrupt header).
    public static let invalidImage = ErrorCode(rawValue: 302)
    /// The message or image is over a configured limit.
    public static let tooLarge = ErrorCode(rawValue: 303)
    /// The peer's role (from ZAP) does not allow this command.
    public static let forbidden = ErrorCode(rawValue: 304)
    /// The request clashes with another peer: a worker's READY under an id
    /// that another live process holds as well.
    public static let conflict = ErrorCode(rawValue: 305)

    /// The receiver failed (disk error, bug). Retry may help.
    public static let `internal` = ErrorCode(rawValue: 500)

    /// The code's name as the specification writes it, or its number.
    public var name: String {
        switch rawValue {
        case 100: "bad-version"
        case 101: "malformed"
        case 102: "unknown-command"
        case 103: "unexpected-command"
        case 200: "queue-full"
        case 201: "shutting-down"
        case 300: "not-found"
        case 301: "invalid-pipeline"
        case 302: "invalid-image"
        case 303: "too-large"
        case 304: "forbidden"
        case 305: "conflict"
        case 500: "internal"
        default: "error-\(rawValue)"
        }
    }

    public var description: String { name }

    /// Whether the same request may succeed later: true for 2xx and 5xx.
    public var isRetryable: Bool { (200..<300).contains(rawValue) || rawValue >= 500 }
}
