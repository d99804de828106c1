import CZeroMQ
import Synchronization

/// The connection and security-handshake events of one socket, read through
/// libzmq's socket monitor (`zmq_socket_monitor`): libzmq publishes them on
/// an inproc PAIR socket that this type owns and reads.
///
/// A client needs them to tell a refused key from a server that is not
/// there: with CURVE, a server whose ZAP handler refuses the client's key
/// answers the handshake with an error, and the client's socket then simply
/// never becomes ready; the refusal is visible only here
/// (`ZMQ_EVENT_HANDSHAKE_FAILED_AUTH` with the ZAP status code).
///
/// Threading: the monitor's PAIR socket belongs to the thread that owns the
/// watched socket (like any socket); make the monitor there and read it there.
public final class SocketMonitor {
    /// What happened on a connection of the watched socket.
    public enum Event: Sendable, Hashable {
        /// A TCP (or IPC) connection was made.
        case connected
        /// A connection attempt failed (refused, or no answer within the
        /// connect timeout) and another is scheduled.
        case connectRetried
        /// The connection was lost or closed.
        case disconnected
        /// The security handshake (NULL, PLAIN or CURVE) succeeded: the
        /// connection carries messages now.
        case handshakeSucceeded
        /// The server's ZAP handler refused the client: `status` is the ZAP
        /// status code (300 temporary, 400 refused, 500 internal error).
        case handshakeFailedAuth(status: UInt32)
        /// The peers do not speak the same security mechanism or protocol:
        /// `code` is a `ZMQ_PROTOCOL_ERROR_*` value.
        case handshakeFailedProtocol(code: UInt32)
        /// The handshake ended without a reason, for example the server
        /// closed the connection because it could not read the client's
        /// CURVE hello (it was made for another server key); `errno` is the
        /// local error.
        case handshakeFailedNoDetail(errno: UInt32)
        /// Another libzmq event, with its value.
        case other(event: UInt16, value: UInt32)
    }

    /// A `ZMQ_PROTOCOL_ERROR_*` code: the peers use different mechanisms.
    public static let mechanismMismatch = UInt32(bitPattern: ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
    /// A `ZMQ_PROTOCOL_ERROR_*` code: a CURVE message could not be decrypted.
    public static let cryptographicError = UInt32(bitPattern: ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)

    private weak var watched: Socket?
    /// The PAIR socket libzmq sends the events to; add it to a `Poller`.
    public let socket: Socket

    /// Starts monitoring `socket`'s connection and handshake events. Call on
    /// the thread that owns `socket`.
    public init(watching socket: Socket) throws {
        let endpoint = "inproc://darkroom.monitor.\(monitorCounter.add(1, ordering: .relaxed).newValue)"
        let events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED
            | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
        let handle = try socket.openHandle("zmq_socket_monitor")
        try zmqCall("zmq_socket_monitor(\(endpoint))") { zmq_socket_monitor(handle, endpoint, events) }
        let pair: Socket
        do {
            pair = try socket.context.socket(.pair)
            try pair.setLinger(milliseconds: 0)
            try pair.connect(endpoint)
        } catch {
            _ = zmq_socket_monitor(handle, nil, 0)
            throw error
        }
        self.socket = pair
        watched = socket
    }

    deinit { close() }

    /// Stops the monitor and closes its socket. Calling it again does nothing.
    public func close() {
        guard socket.isOpen else { return }
        if let watched, let handle = try? watched.openHandle("zmq_socket_monitor") {
            _ = zmq_socket_monitor(handle, nil, 0)
        }
        socket.close()
    }

    /// The next event and the endpoint it concerns, if one is waiting.
    public func next() throws -> (event: Event, endpoint: String)? {
        guard let frames = try socket.receive(dontWait: true) else { return nil }
        // Frame 1: the event (u16) and its value (u32), in the host's byte
        // order; frame 2: the endpoint.
        guard let head = frames.first, head.count >= 6 else { return (.other(event: 0, value: 0), "") }
        let (event, value) = head.withUnsafeBytes { raw in
            (raw.loadUnaligned(fromByteOffset: 0, as: UInt16.self), raw.loadUnaligned(fromByteOffset: 2, as: UInt32.self))
        }
        let endpoint = frames.count > 1 ? String(decoding: frames[1], as: UTF8.self) : ""
        return (Self.event(Int32(event), value: value), endpoint)
    }

    private static func event(_ code: Int32, value: UInt32) -> Event {
        switch code {
        case ZMQ_EVENT_CONNECTED: .connected
        case ZMQ_EVENT_CONNECT_RETRIED: .connectRetried
        case ZMQ_EVENT_DISCONNECTED: .disconnected
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: .handshakeSucceeded
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: .handshakeFailedAuth(status: value)
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: .handshakeFailedProtocol(code: value)
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL: .handshakeFailedNoDetail(errno: value)
        default: .other(event: UInt16(truncatingIfNeeded: code), value: value)
        }
    }
}

@available(*, unavailable, message: "a socket monitor belongs to the thread of the socket it watches")
extension SocketMonitor: Sendable {}

private let monitorCounter = Atomic<Int>(0)

/// Why a server turned a client's connection away during the security
/// handshake, worked out from the monitor's events.
public enum HandshakeRefusal: Sendable, Hashable {
    /// The server's ZAP handler refused the client's key (status 400): it
    /// is not in the server's allowlist, or its role may not use this endpoint.
    case keyRefused
    /// The server requires CURVE and the client connected without it.
    case curveRequired
    /// The client uses CURVE and the server does not.
    case curveNotUsed
    /// The server closed every CURVE handshake before answering: it could
    /// not read the client's hello, which was made for another server key.
    case serverKeyMismatch
}

/// Watches a client socket's handshake events and decides when they mean
/// the server refuses this client, as opposed to a server that is not
/// there yet or is restarting (which a client rides out). It also follows
/// whether the socket has a live connection (`linked`).
public struct HandshakeGuard: Sendable {
    /// Whether the client connects with CURVE.
    public let usesCurve: Bool
    private var closedDuringHandshake = 0
    /// Whether a connection has finished its handshake and the monitor has
    /// not reported it lost since (as of the events read so far: a
    /// connection may be gone a moment before its event is read).
    ///
    /// Clients send only while linked instead of setting `ZMQ_IMMEDIATE`.
    /// With that option, libzmq 4.3 ends a connection's pipe from the
    /// socket's side as soon as it learns of a reconnect, even when the
    /// application has read only part of a multipart message from it, and
    /// then aborts the whole process on the rest (`!_more`, fq.cpp). A
    /// reconnect while a long message is being read (a broker killed
    /// mid-flood) is exactly what clients must ride out.
    public private(set) var linked: Bool

    /// - Parameter endpoint: where the socket connects. Before any event it
    ///   is unlinked, except for an `inproc://` endpoint, which has no
    ///   handshake events (a peer in the same process; a send to one that
    ///   is gone waits for room and times out as before).
    public init(usesCurve: Bool, endpoint: String) {
        self.usesCurve = usesCurve
        self.linked = endpoint.hasPrefix("inproc://")
    }

    /// Takes one event; returns the refusal it proves, if any.
    ///
    /// A server that closes a CURVE handshake without a word once may have
    /// been stopping; twice in a row (libzmq retries within a tenth of a
    /// second) it could not read the hello. A ZAP status 300 (try again) or
    /// 500 (the handler failed) is not a refusal of the key.
    public mutating func observe(_ event: SocketMonitor.Event) -> HandshakeRefusal? {
        switch event {
        case .handshakeSucceeded:
            closedDuringHandshake = 0
            linked = true
            return nil
        case .disconnected:
            linked = false
            return nil
        case .handshakeFailedAuth(let status):
            return status == 400 ? .keyRefused : nil
        case .handshakeFailedProtocol(let code):
            if code == SocketMonitor.mechanismMismatch { return usesCurve ? .curveNotUsed : .curveRequired }
            if code == SocketMonitor.cryptographicError, usesCurve { return .serverKeyMismatch }
            return nil
        case .handshakeFailedNoDetail:
            guard usesCurve else { return nil }
            closedDuringHandshake += 1
            return closedDuringHandshake >= 2 ? .serverKeyMismatch : nil
        case .connected, .connectRetried, .other:
            return nil
        }
    }
}
