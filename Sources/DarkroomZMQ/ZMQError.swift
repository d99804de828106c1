import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed ZeroMQ call: the error number libzmq reported, its symbolic name,
/// libzmq's own message and the call that failed.
///
/// Every call into libzmq in this module goes through one place that turns a
/// failure into this error, so callers catch a single type and ask it
/// questions (`isTerminated`, `isWouldBlock`, ...) rather than compare numbers:
///
///     do { ... } catch let error as ZMQError where error.isTerminated { return }
///
/// Public calls are declared plain `throws` although they only ever throw
/// `ZMQError`: Swift 6.3 crashes compiling a non-exhaustive `catch` of a
/// typed-thrown error, which is exactly the form above.
public struct ZMQError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The error number (`zmq_errno()`), an `errno` value or one of libzmq's own.
    public let code: Int32
    /// The name of the libzmq function (or wrapper operation) that failed.
    public let call: String
    /// A human-readable explanation, from `zmq_strerror` unless the failure
    /// was found by this module (for example a malformed CURVE key).
    public var message: String {
        if let explicitMessage { return explicitMessage }
        if let text = zmq_strerror(code) { return String(cString: text) }
        return "error \(code)"
    }
    /// The explanation given when the error was made, if any. libzmq's is
    /// looked up only when asked for: a loop that drains a socket until it
    /// would block makes one of these per turn, and asks only its code.
    private let explicitMessage: String?

    public init(code: Int32, call: String, message: String? = nil) {
        self.code = code
        self.call = call
        explicitMessage = message
    }

    /// Reads `zmq_errno()` right after a failed call.
    static func last(_ call: String) -> ZMQError {
        ZMQError(code: zmq_errno(), call: call)
    }

    /// The context was shut down or terminated (`ETERM`): the socket must be closed.
    public var isTerminated: Bool { code == Self.eterm }
    /// The call would have blocked (`EAGAIN`): non-blocking mode, or a send/receive timeout expired.
    public var isWouldBlock: Bool { code == EAGAIN }
    /// A signal interrupted a blocking call (`EINTR`).
    public var isInterrupted: Bool { code == EINTR }
    /// A ROUTER socket with `routerMandatory` could not route to the given identity (`EHOSTUNREACH`).
    public var isHostUnreachable: Bool { code == darkroom_zmq_ehostunreach() }
    /// The socket was used in the wrong state, e.g. REQ sending twice (`EFSM`).
    public var isWrongState: Bool { code == darkroom_zmq_efsm() }

    /// The symbolic name of `code`, such as `EAGAIN` or `ETERM`.
    public var name: String {
        switch code {
        case EAGAIN: return "EAGAIN"
        case EINTR: return "EINTR"
        case EINVAL: return "EINVAL"
        case EFAULT: return "EFAULT"
        case ENOMEM: return "ENOMEM"
        case EMFILE: return "EMFILE"
        case ENOENT: return "ENOENT"
        case ENODEV: return "ENODEV"
        case EACCES: return "EACCES"
        case ECONNREFUSED: return "ECONNREFUSED"
        case ENOBUFS: return "ENOBUFS"
        case ENETDOWN: return "ENETDOWN"
        case ETIMEDOUT: return "ETIMEDOUT"
        case ECONNRESET: return "ECONNRESET"
        case ECONNABORTED: return "ECONNABORTED"
        case ENETUNREACH: return "ENETUNREACH"
        case EAFNOSUPPORT: return "EAFNOSUPPORT"
        case Self.eterm: return "ETERM"
        case darkroom_zmq_efsm(): return "EFSM"
        case darkroom_zmq_enocompatproto(): return "ENOCOMPATPROTO"
        case darkroom_zmq_emthread(): return "EMTHREAD"
        case darkroom_zmq_ehostunreach(): return "EHOSTUNREACH"
        case darkroom_zmq_enotsock(): return "ENOTSOCK"
        case darkroom_zmq_enotsup(): return "ENOTSUP"
        case darkroom_zmq_eprotonosupport(): return "EPROTONOSUPPORT"
        case darkroom_zmq_eaddrinuse(): return "EADDRINUSE"
        case darkroom_zmq_eaddrnotavail(): return "EADDRNOTAVAIL"
        case darkroom_zmq_emsgsize(): return "EMSGSIZE"
        default: return "E#\(code)"
        }
    }

    /// A bind found its address taken (`EADDRINUSE`): another process
    /// listens there.
    public var isAddressInUse: Bool { code == darkroom_zmq_eaddrinuse() }

    public var description: String {
        "\(call): \(message) (\(name))"
    }

    /// An `EINVAL` found by this module before calling libzmq.
    static func invalid(_ call: String, _ message: String) -> ZMQError {
        ZMQError(code: EINVAL, call: call, message: message)
    }

    static let eterm = darkroom_zmq_eterm()
    static let enotsock = darkroom_zmq_enotsock()

    /// Lets a `catch` clause match an error number: `catch ZMQError.Code.terminated`.
    public struct Code: Sendable, Hashable {
        public let rawValue: Int32
        public init(_ rawValue: Int32) { self.rawValue = rawValue }
        public static let terminated = Code(darkroom_zmq_eterm())
        public static let wouldBlock = Code(EAGAIN)
        public static let interrupted = Code(EINTR)
        public static let hostUnreachable = Code(darkroom_zmq_ehostunreach())
        public static let wrongState = Code(darkroom_zmq_efsm())
        public static let invalidArgument = Code(EINVAL)
        public static let addressInUse = Code(darkroom_zmq_eaddrinuse())

        public static func ~= (pattern: Code, error: any Error) -> Bool {
            (error as? ZMQError)?.code == pattern.rawValue
        }
        public static func ~= (pattern: Code, error: ZMQError) -> Bool {
            error.code == pattern.rawValue
        }
    }
}

/// The one path for raw libzmq calls that return an `int` status: retries the
/// call while a signal interrupts it (unless `retryOnInterrupt` is false) and
/// turns `-1` into a thrown `ZMQError` naming `call`.
@inline(__always)
@discardableResult
func zmqCall(
    _ call: @autoclosure () -> String,
    retryOnInterrupt: Bool = true,
    _ body: () -> Int32
) throws(ZMQError) -> Int32 {
    while true {
        let result = body()
        if result != -1 { return result }
        let error = ZMQError.last(call())
        if retryOnInterrupt && error.isInterrupted { continue }
        throw error
    }
}

/// `zmqCall` for a call that may find nothing to do: nil, with no error
/// made or thrown, when it would block (`EAGAIN`). A loop that drains a
/// socket until then ends every turn so.
@inline(__always)
func zmqCallUnlessWouldBlock(_ call: @autoclosure () -> String, _ body: () -> Int32) throws(ZMQError) -> Int32? {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = zmq_errno()
        if code == EINTR { continue }
        if code == EAGAIN { return nil }
        throw ZMQError(code: code, call: call())
    }
}
