import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ

/// Every failure of the client API: what kind of failure it is, and one line
/// a person can act on, for example
/// `no answer from the broker at tcp://127.0.0.1:7700 within 5 s (is `darkroom up` or `darkroom broker` running?)`.
public struct ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The server did not answer (or could not be reached) in time.
        case timeout
        /// The server answered ERROR (or REJECTED) with this DRK1 code.
        case server(ErrorCode)
        /// The server's answer broke DRK1 (malformed, unexpected, or
        /// inconsistent with what was asked).
        case protocolViolation
        /// ZeroMQ refused to create, configure or connect a socket.
        case connection
        /// The bytes received do not match their stated SHA-256 or size.
        case integrity
        /// The caller passed a value DRK1 cannot carry (for example an empty
        /// pipeline or an image over 64 MiB); nothing was sent.
        case invalidArgument
        /// A local input could not be read (an image file).
        case input
        /// The server turned this client away during the security handshake
        /// (a CURVE key it does not allow, CURVE missing or not expected, a
        /// wrong server key). Retrying the same way cannot help.
        case refused
    }

    public let kind: Kind
    /// One line, no trailing period.
    public let message: String
    /// A `.timeout` that came before the request was handed to a
    /// connection: the server cannot have received it.
    public internal(set) var requestNotSent = false

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    /// The DRK1 error code when the server refused the request.
    public var serverCode: ErrorCode? {
        if case .server(let code) = kind { return code }
        return nil
    }

    /// Whether the same request may succeed later: timeouts, lost
    /// connections and server codes of class 2xx and 5xx.
    public var isRetryable: Bool {
        switch kind {
        case .timeout, .connection: true
        case .server(let code): code.isRetryable
        case .protocolViolation, .integrity, .invalidArgument, .input, .refused: false
        }
    }
}

/// Which server a client talks to: names it in error messages and says which
/// command starts it.
public enum ServerRole: Sendable, Hashable, CustomStringConvertible {
    case broker
    case store

    public var description: String {
        switch self {
        case .broker: "the broker"
        case .store: "the storage node"
        }
    }

    /// How to start the server, for the hint in a timeout message.
    var startHint: String {
        switch self {
        case .broker: "is `darkroom up` or `darkroom broker` running?"
        case .store: "is `darkroom up` or `darkroom store` running?"
        }
    }
}

extension ClientError {
    static func noAnswer(from role: ServerRole, at endpoint: String, within timeout: Duration, detail: String = "") -> ClientError {
        let extra = detail.isEmpty ? "" : "; \(detail)"
        return ClientError(.timeout, "no answer from \(role) at \(endpoint) within \(format(timeout)) (\(role.startHint))\(extra)")
    }

    /// Every connection attempt to `endpoint` failed for `duration`:
    /// nothing listens there (or the host does not answer). A timeout as
    /// far as callers go, found sooner.
    static func unreachable(_ role: ServerRole, at endpoint: String, for duration: Duration, detail: String = "") -> ClientError {
        let extra = detail.isEmpty ? "" : "; \(detail)"
        return ClientError(.timeout, "cannot connect to \(role) at \(endpoint): every attempt for \(format(duration)) was refused or unanswered (\(role.startHint))\(extra)")
    }

    /// The server at `endpoint` refused the handshake; says what to check.
    static func refused(_ refusal: HandshakeRefusal, by role: ServerRole, at endpoint: String) -> ClientError {
        let serverKey = role == .store ? "--store-key" : "--server-key"
        let message: String
        switch refusal {
        case .keyRefused:
            message = "\(role) at \(endpoint) refused this client's key: its public key is not in the server's --allow directory, "
                + "or its role may not use this endpoint (producer: submit, watch, status, cancel, ls, get; worker: jobs and stores; admin: everything)"
        case .curveRequired:
            message = "\(role) at \(endpoint) requires CURVE keys: pass --curve-key (this client's secret key file) and \(serverKey) (the server's public key)"
        case .curveNotUsed:
            message = "\(role) at \(endpoint) does not use CURVE: leave out --curve-key and \(serverKey), or start the server with --curve-key and --allow"
        case .serverKeyMismatch:
            // --store-key falls back to --server-key: the key at fault may be
            // the one the user gave under the other name.
            let given = role == .store ? "--store-key (or --server-key, which stands for it when --store-key is not given)" : serverKey
            message = "\(role) at \(endpoint) closed the CURVE handshake: \(given) is not that server's public key"
        }
        return ClientError(.refused, message)
    }

    static func zmq(_ error: any Error, _ doing: String) -> ClientError {
        ClientError(.connection, "\(doing): \(error)")
    }

    static func server(_ reply: ErrorReply, from role: ServerRole, doing what: String) -> ClientError {
        ClientError(.server(reply.code), "\(role) refused \(what): \(reply.code.name): \(reply.reason)")
    }
}

/// A duration as people read it: "5 s", "2.5 s", "250 ms".
func format(_ duration: Duration) -> String {
    let milliseconds = duration.milliseconds
    if milliseconds < 1000 { return "\(milliseconds) ms" }
    if milliseconds % 1000 == 0 { return "\(milliseconds / 1000) s" }
    let tenths = (milliseconds + 50) / 100
    return "\(tenths / 10).\(tenths % 10) s"
}
