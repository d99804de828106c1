import CZeroMQ

/// The kinds of ZeroMQ socket this module creates.
public enum SocketKind: Sendable, Hashable, CaseIterable {
    case pair, pub, sub, req, rep, dealer, router, pull, push, xpub, xsub

    var rawValue: Int32 {
        switch self {
        case .pair: return ZMQ_PAIR
        case .pub: return ZMQ_PUB
        case .sub: return ZMQ_SUB
        case .req: return ZMQ_REQ
        case .rep: return ZMQ_REP
        case .dealer: return ZMQ_DEALER
        case .router: return ZMQ_ROUTER
        case .pull: return ZMQ_PULL
        case .push: return ZMQ_PUSH
        case .xpub: return ZMQ_XPUB
        case .xsub: return ZMQ_XSUB
        }
    }
}

/// A ZeroMQ socket.
///
/// Threading: a socket is **owned by one thread for its whole life**. libzmq
/// sockets are not thread-safe, so a socket is created, used and closed on the
/// thread that owns it, and it is deliberately not `Sendable` (the compiler
/// refuses to send it to another isolation domain). Other threads talk to the
/// owner through messages: over inproc sockets of their own, or through a
/// `Mailbox`. The one cross-thread operation is `Context.shutdown()`, which
/// makes a blocked call on this socket throw `ETERM`.
///
/// Messages are whole multipart messages, `[[UInt8]]`, one array per frame:
/// libzmq delivers all frames of a message or none.
///
/// The socket is closed by `close()` or when the last reference goes away.
/// The linger period (`setLinger`) decides what happens to unsent messages
/// then; libzmq's default of "forever" makes context termination wait for
/// them, so services usually set a finite linger.
public final class Socket {
    private var handle: UnsafeMutableRawPointer?
    /// Keeps the context alive (and unterminated) while this socket is open.
    public let context: Context
    public let kind: SocketKind

    init(context: Context, kind: SocketKind) throws {
        guard let handle = zmq_socket(context.handle, kind.rawValue) else {
            throw ZMQError.last("zmq_socket")
        }
        self.handle = handle
        self.context = context
        self.kind = kind
    }

    deinit {
        if let handle { _ = zmq_close(handle) }
    }

    /// Closes the socket. Further calls throw `ENOTSOCK`; calling it again does nothing.
    public func close() {
        if let handle {
            _ = zmq_close(handle)
            self.handle = nil
        }
    }

    /// Whether `close()` has not been called yet.
    public var isOpen: Bool { handle != nil }

    func openHandle(_ call: String) throws(ZMQError) -> UnsafeMutableRawPointer {
        guard let handle else {
            throw ZMQError(code: ZMQError.enotsock, call: call, message: "socket is closed")
        }
        return handle
    }

    // MARK: Endpoints

    /// Binds to an endpoint such as `tcp://127.0.0.1:*`, `tcp://*:5555` or
    /// `inproc://name`. With a `*` port, read `lastEndpoint()` to learn the port.
    public func bind(_ endpoint: String) throws {
        let handle = try openHandle("zmq_bind")
        try Socket.checkPort(endpoint, "zmq_bind")
        try zmqCall("zmq_bind(\(endpoint))") { zmq_bind(handle, endpoint) }
    }

    /// Connects to an endpoint. Returns at once: the connection is made, and
    /// remade after failures, in the background.
    public func connect(_ endpoint: String) throws {
        let handle = try openHandle("zmq_connect")
        try Socket.checkPort(endpoint, "zmq_connect")
        try zmqCall("zmq_connect(\(endpoint))") { zmq_connect(handle, endpoint) }
    }

    /// Refuses a TCP endpoint whose port is a number above 65535: libzmq
    /// takes such a port modulo 65536 (…:73440 bound port 7904) instead of
    /// refusing it.
    static func checkPort(_ endpoint: String, _ call: String) throws {
        guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":") else { return }
        let port = endpoint[endpoint.index(after: colon)...]
        guard !port.isEmpty, port.allSatisfy(\.isASCII), port.allSatisfy(\.isNumber), (Int(port) ?? Int.max) > 65535 else { return }
        throw ZMQError(code: EINVAL, call: "\(call)(\(endpoint))", message: "port \(port) is out of range: a TCP port is 0 to 65535")
    }

    public func unbind(_ endpoint: String) throws {
        let handle = try openHandle("zmq_unbind")
        try zmqCall("zmq_unbind(\(endpoint))") { zmq_unbind(handle, endpoint) }
    }

    public func disconnect(_ endpoint: String) throws {
        let handle = try openHandle("zmq_disconnect")
        try zmqCall("zmq_disconnect(\(endpoint))") { zmq_disconnect(handle, endpoint) }
    }

    // MARK: Messages

    /// Sends one multipart message; every frame but the last goes with `ZMQ_SNDMORE`.
    ///
    /// libzmq queues a multipart message atomically: if the first frame is
    /// accepted the rest are too. When the message cannot be queued now
    /// (`dontWait`, or the send timeout expired) this throws an error whose
    /// `isWouldBlock` is true and nothing was queued. A ROUTER socket with
    /// `routerMandatory` throws `isHostUnreachable` for an unknown identity.
    /// An empty `frames` array sends nothing.
    public func send(_ frames: [[UInt8]], dontWait: Bool = false) throws {
        try send(frames, handedOver: nil, dontWait: dontWait)
    }

    /// Sends `frames` with the bytes of `file`, not copied, in place of
    /// `frames[position]` (a placeholder, normally empty): see `MappedFile`.
    /// `position` is at least 1, so the first frame goes first.
    ///
    /// When the first frame is refused (`EAGAIN` past the high-water mark,
    /// or a ROUTER's unreachable peer), nothing is sent and `file` keeps its
    /// mapping, to be sent again or dropped. Once the first frame has gone,
    /// the mapping is libzmq's whether or not its frame is accepted: it is
    /// unmapped when the frame has left, or at once if it failed.
    public func send(_ frames: [[UInt8]], file: MappedFile, at position: Int, dontWait: Bool = false) throws {
        try send(frames, handedOver: file.memory, at: position, dontWait: dontWait)
    }

    /// Sends `frames` with the bytes of `copied` in place of
    /// `frames[position]`, as `send(_:file:at:dontWait:)` does with a
    /// file's: see `CopiedFrame`.
    public func send(_ frames: [[UInt8]], copied: CopiedFrame, at position: Int, dontWait: Bool = false) throws {
        try send(frames, handedOver: copied.memory, at: position, dontWait: dontWait)
    }

    private func send(_ frames: [[UInt8]], handedOver: HandedOverMemory, at position: Int, dontWait: Bool) throws {
        precondition(position >= 1 && position < frames.count, "the handed-over frame must follow the first frame")
        try send(frames, handedOver: (handedOver, position), dontWait: dontWait)
    }

    private func send(_ frames: [[UInt8]], handedOver: (memory: HandedOverMemory, position: Int)?, dontWait: Bool) throws {
        let handle = try openHandle("zmq_send")
        let flags: Int32 = dontWait ? ZMQ_DONTWAIT : 0
        let last = frames.count - 1
        for (index, frame) in frames.enumerated() {
            let frameFlags = index < last ? flags | ZMQ_SNDMORE : flags
            if let handedOver, index == handedOver.position {
                var result: Int32 = 0
                handedOver.memory.handOver { base, count, release, hint in
                    var taken: Int32 = 0
                    result = darkroom_zmq_send_owned(handle, base, count, release, hint, frameFlags, &taken)
                    return taken != 0
                }
                if result < 0 { throw ZMQError.last("zmq_msg_send") }
                continue
            }
            try zmqCall("zmq_send") {
                frame.withUnsafeBytes { bytes in
                    zmq_send(handle, bytes.baseAddress, bytes.count, frameFlags)
                }
            }
        }
    }

    /// Sends a single-frame message.
    public func send(_ frame: [UInt8], dontWait: Bool = false) throws {
        try send([frame], dontWait: dontWait)
    }

    /// Receives one whole multipart message, one array per frame.
    ///
    /// Returns nil when no message is available now (`dontWait`) or before the
    /// receive timeout (`setReceiveTimeout`) expires. Throws `ETERM` once the
    /// context is shut down.
    public func receive(dontWait: Bool = false) throws -> [[UInt8]]? {
        try receiveMessage(dontWait: dontWait, property: nil)?.frames
    }

    /// `receive`, plus the ZAP user id of the connection the message came
    /// in on (the "User-Id" metadata libzmq attaches to the frames of a
    /// connection a ZAP handler accepted), or nil when the connection was
    /// not authenticated.
    ///
    /// With `maxBytes`, a message whose frames hold more than that many
    /// bytes in all is read to its end without being copied and reported
    /// as `Oversized`: `ZMQ_MAXMSGSIZE` bounds each frame, not the message,
    /// so a peer could otherwise send a message of many frames just under it.
    public func receiveWithUserID(dontWait: Bool = false, maxBytes: Int? = nil) throws -> (frames: [[UInt8]], userID: String?)? {
        try receiveMessage(dontWait: dontWait, property: "User-Id", maxBytes: maxBytes).map { ($0.frames, $0.property) }
    }

    /// `receive`, plus whether the message came over a peer's connection.
    /// libzmq attaches a connection's metadata (among it "Peer-Address", on
    /// TCP and IPC) to every message read from it, and none to a message
    /// the socket makes itself, such as the unsubscriptions an XPUB passes
    /// up for a subscriber that has gone. (Over inproc there is no metadata
    /// at all: every message reads as made by the socket.)
    public func receiveNotingConnection(dontWait: Bool = false) throws -> (frames: [[UInt8]], fromConnection: Bool)? {
        try receiveMessage(dontWait: dontWait, property: "Peer-Address").map { ($0.frames, $0.property != nil) }
    }

    /// A message over the `maxBytes` given to `receiveWithUserID`, dropped:
    /// its size and frame count, and its first frame (a ROUTER's identity,
    /// to name the peer) when that frame was within the limit.
    public struct Oversized: Error, Sendable, CustomStringConvertible {
        public let bytes: Int
        public let frames: Int
        public let firstFrame: [UInt8]?
        public var description: String { "a message of \(bytes) bytes in \(frames) frames, over the limit" }
    }

    /// Reads one message; with `property`, also that metadata property of
    /// its connection (the ZAP user id is "User-Id"), from the first frame
    /// that came over the wire: a ROUTER's identity frame is made locally
    /// and carries no metadata, so at most the first two frames are asked.
    private func receiveMessage(dontWait: Bool, property: String?, maxBytes: Int? = nil) throws -> (frames: [[UInt8]], property: String?)? {
        let handle = try openHandle("zmq_msg_recv")
        var value: String?
        var frames: [[UInt8]] = []
        var message = zmq_msg_t()
        zmq_msg_init(&message)
        defer { zmq_msg_close(&message) }
        var total = 0
        var count = 0
        var oversized = false
        while true {
            // Only the first frame may be absent; later frames of a message
            // have already arrived, so they are read without DONTWAIT.
            let flags: Int32 = (dontWait && count == 0) ? ZMQ_DONTWAIT : 0
            // Finding nothing waiting makes no error: it is how every drain ends.
            guard try zmqCallUnlessWouldBlock("zmq_msg_recv", { zmq_msg_recv(&message, handle, flags) }) != nil else {
                if count == 0 { return nil }
                throw ZMQError(code: EAGAIN, call: "zmq_msg_recv")
            }
            count += 1
            let size = zmq_msg_size(&message)
            total += size
            if let maxBytes, total > maxBytes { oversized = true }
            if !oversized {
                if let property, value == nil, frames.count < 2, let found = zmq_msg_gets(&message, property) {
                    value = String(cString: found)
                }
                if size == 0 {
                    frames.append([])
                } else if let data = zmq_msg_data(&message) {
                    frames.append(Array(UnsafeRawBufferPointer(start: data, count: size)))
                } else {
                    frames.append([])
                }
            } else if !frames.isEmpty && frames.count > 1 {
                // Keep only the first frame, to name the peer; the rest goes.
                frames.removeLast(frames.count - 1)
            }
            if zmq_msg_more(&message) == 0 {
                if oversized { throw Oversized(bytes: total, frames: count, firstFrame: frames.first) }
                return (frames, value)
            }
        }
    }
}

/// A socket never leaves the thread that owns it.
@available(*, unavailable, message: "a ZeroMQ socket belongs to one thread; use a Mailbox or an inproc socket to talk to its owner")
extension Socket: Sendable {}
