import DarkroomProtocol
import DarkroomZMQ

/// CURVE keys for a client socket: the server's public key and this client's
/// own key pair. When set, the connection is encrypted and the server's ZAP
/// handler decides from the client's public key what it may do.
public struct CurveClientKeys: Sendable, Hashable {
    public var serverKey: CurveKey
    public var keyPair: CurveKeyPair

    public init(serverKey: CurveKey, keyPair: CurveKeyPair) {
        self.serverKey = serverKey
        self.keyPair = keyPair
    }
}

/// A DEALER socket connected to one DRK1 server (the broker frontend or the
/// storage node), with request ids, deadlines and reply matching. Owned by
/// the thread of the client that holds it.
///
/// It also watches the socket's security handshakes (`SocketMonitor`): a
/// server that refuses this client's key answers nothing at all, so every
/// wait here also ends, with `.refused` and what to check, as soon as the
/// handshake events prove a refusal, instead of running out the timeout.
final class Channel {
    let socket: Socket
    let endpoint: String
    let role: ServerRole
    let timeout: Duration
    private let poller = Poller()
    private let sendPoller = Poller()
    /// Waits for the monitor alone, while there is no connection to send on.
    private let linkPoller = Poller()
    private let monitor: SocketMonitor
    private var handshake: HandshakeGuard
    /// When the handshake events were last looked at.
    private var handshakeCheckedAt: ContinuousClock.Instant?
    /// How long a look at the handshake events stands for a send while the
    /// link is up. Looking costs a system call (libzmq polls its mailbox
    /// for the monitor's socket), and a producer sends thousands of SUBMITs
    /// a second in bursts: one look serves a burst. The events reach the
    /// monitor a moment after the fact anyway, so a drop could already go
    /// unseen for about as long.
    static let handshakeFreshness: Duration = .milliseconds(1)
    private var lastRequestID: UInt64 = 0
    /// The `refusedGrace` of the clients that ask a question and quit
    /// (`Admin`, `StoreClient`): a person at the terminal learns in about a
    /// second, not after the whole timeout, that nothing listens there.
    /// libzmq tries again after 0.1, 0.2, 0.4 and 0.8 s, so the fifth
    /// attempt, some 1.5 s in, decides; a server that is starting binds
    /// well within that.
    static let askersGrace: Duration = .seconds(1)

    /// How long connection attempts may fail in a row (nothing listens at
    /// the endpoint) before a send gives up; nil waits out the timeout.
    private let refusedGrace: Duration?
    /// When the attempts began failing with no connection made since.
    private var failingSince: ContinuousClock.Instant?

    /// - Parameter refusedGrace: for clients that ask one question and
    ///   quit: give up on a send once every connection attempt has failed
    ///   for this long, rather than after the whole timeout. Clients that
    ///   ride out a server's restart (a producer, an event follower) leave
    ///   it nil.
    init(context: Context, endpoint: String, role: ServerRole, timeout: Duration, curve: CurveClientKeys?,
         receiveHighWaterMark: Int? = nil, refusedGrace: Duration? = nil) throws(ClientError) {
        self.endpoint = endpoint
        self.role = role
        self.timeout = timeout
        self.refusedGrace = refusedGrace
        do {
            socket = try context.socket(.dealer)
        } catch {
            throw ClientError.zmq(error, "cannot open a socket for \(role)")
        }
        do {
            try socket.setLinger(milliseconds: 0)
            try socket.setMaxMessageSize(Wire.maxMessageSize)
            try socket.setSendTimeout(milliseconds: milliseconds(timeout))
            try socket.setReconnectInterval(100, maximum: 1000)
            try socket.setConnectTimeout(milliseconds: 2_000)
            if let receiveHighWaterMark { try socket.setReceiveHighWaterMark(receiveHighWaterMark) }
            if let curve {
                try socket.setCurveClient(serverKey: curve.serverKey, keyPair: curve.keyPair)
            }
        } catch {
            throw ClientError.zmq(error, "cannot configure the socket for \(role)")
        }
        handshake = HandshakeGuard(usesCurve: curve != nil, endpoint: endpoint)
        do {
            // Before connecting, so that the first handshake is seen.
            monitor = try SocketMonitor(watching: socket)
        } catch {
            throw ClientError.zmq(error, "cannot watch the socket for \(role)")
        }
        do {
            try socket.connect(endpoint)
        } catch {
            throw ClientError(.connection, "cannot connect to \(role) at \(endpoint): \(error)")
        }
        poller.add(socket)
        poller.add(monitor.socket)
        sendPoller.add(socket, events: .writable)
        sendPoller.add(monitor.socket)
        linkPoller.add(monitor.socket)
    }

    deinit {
        monitor.close()
        socket.close()
    }

    /// The monitor's socket, for owners that wait on this channel in a poller of their own.
    var monitorSocket: Socket { monitor.socket }

    /// Reads the handshake events that came in; throws `.refused` when they
    /// prove that the server turns this client away.
    func checkHandshake() throws(ClientError) {
        handshakeCheckedAt = .now
        while true {
            let next: (event: SocketMonitor.Event, endpoint: String)?
            do {
                next = try monitor.next()
            } catch {
                throw ClientError.zmq(error, "cannot read the handshake events of the socket for \(role)")
            }
            guard let (event, _) = next else { return }
            switch event {
            case .connectRetried: if failingSince == nil { failingSince = handshakeCheckedAt }
            case .connected: failingSince = nil
            default: break
            }
            if let refusal = handshake.observe(event) {
                throw ClientError.refused(refusal, by: role, at: endpoint)
            }
        }
    }

    /// A request id not used before on this channel (never 0, which DRK1
    /// reserves for errors that could not be matched).
    func nextRequestID() -> UInt64 {
        lastRequestID &+= 1
        if lastRequestID == 0 { lastRequestID = 1 }
        return lastRequestID
    }

    /// Sends one message, waiting up to the timeout for a connection: a
    /// message is handed to the socket only while the monitor shows a
    /// finished handshake (as looked at within `handshakeFreshness`), so
    /// that with no server a send waits instead of piling up requests that
    /// would all arrive, stale, when one appears. A refused handshake ends
    /// the wait at once. `within`, when shorter than the timeout, caps the
    /// wait (a caller with a deadline of its own sooner than that).
    func send(_ frames: [[UInt8]], what: String, within: Duration? = nil) throws(ClientError) {
        let start = ContinuousClock.now
        let deadline = start + min(timeout, within ?? timeout)
        if !handshake.linked || handshakeCheckedAt.map({ start - $0 >= Channel.handshakeFreshness }) ?? true {
            try checkHandshake()
        }
        while true {
            if handshake.linked {
                do {
                    try socket.send(frames, dontWait: true)
                    return
                } catch let error as ZMQError where error.isWouldBlock {
                    // The connection's queue is full: wait until it drains.
                } catch {
                    throw ClientError.zmq(error, "cannot send \(what) to \(role) at \(endpoint)")
                }
            }
            let now = ContinuousClock.now
            let remaining = deadline - now
            if remaining <= .zero {
                var error = ClientError.noAnswer(from: role, at: endpoint, within: timeout, detail: "could not send \(what)")
                error.requestNotSent = true
                throw error
            }
            if !handshake.linked, let refusedGrace, let failingSince, now - failingSince >= refusedGrace {
                var error = ClientError.unreachable(role, at: endpoint, for: now - failingSince, detail: "could not send \(what)")
                error.requestNotSent = true
                throw error
            }
            do {
                // Unlinked, the socket itself would take the message at once:
                // only the monitor's events can end this wait.
                let poller = handshake.linked ? sendPoller : linkPoller
                _ = try poller.poll(timeoutMilliseconds: max(1, milliseconds(remaining)))
            } catch {
                throw ClientError.zmq(error, "cannot wait for \(role)")
            }
            try checkHandshake()
        }
    }

    /// The poller item of a mailbox whose messages also end a wait.
    private var watchedInbox: Int?

    /// Makes `receive(until:)` also return (with nil) as soon as `inbox`
    /// has messages, so that the thread waiting here can take them.
    func watch<Message>(_ inbox: MailboxInbox<Message>) {
        watchedInbox = poller.add(inbox)
    }

    /// Whether the watched mailbox ends waits: a caller that will be woken
    /// soon anyway (answers are due) takes its messages then, and spares
    /// a wake-up per message.
    func watching(_ on: Bool) {
        if let watchedInbox { poller.setEvents(on ? .readable : [], for: watchedInbox) }
    }

    /// Receives the next message, waiting until `deadline`; nil when none
    /// came, or when a watched mailbox has messages.
    func receive(until deadline: ContinuousClock.Instant) throws(ClientError) -> [[UInt8]]? {
        while true {
            if let message = try receiveNow() { return message }
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero { return nil }
            let ready: PollResult
            do {
                ready = try poller.poll(timeoutMilliseconds: max(1, milliseconds(remaining)))
            } catch {
                throw ClientError.zmq(error, "cannot wait for \(role)")
            }
            if let watchedInbox, ready.isReadable(watchedInbox) { return try receiveNow() }
        }
    }

    /// Receives a message if one is waiting (after looking at the handshake
    /// events, unless the caller just did: a refused key throws `.refused`).
    func receiveNow(checkingHandshake: Bool = true) throws(ClientError) -> [[UInt8]]? {
        if checkingHandshake { try checkHandshake() }
        do {
            return try socket.receive(dontWait: true)
        } catch {
            throw ClientError.zmq(error, "cannot receive from \(role) at \(endpoint)")
        }
    }

    /// Handles a message that did not decode: answers ERROR as DRK1 asks
    /// (never to an ERROR), and returns the request id it carried, if any.
    @discardableResult
    func rejectMalformed(_ frames: [[UInt8]], _ error: ProtocolError) -> UInt64 {
        let reply = Wire.errorReply(to: frames, for: error)
        let isError = Wire.isError(frames)
        if !isError {
            _ = try? socket.send(reply.frames(), dontWait: true)
        }
        return reply.requestID
    }

    /// Sends a request and returns the reply that carries its request id.
    /// Replies to earlier requests (that timed out) are skipped. An ERROR
    /// with request id 0 is taken as the answer too: the server could not
    /// read the request well enough to name it.
    ///
    /// - Parameters:
    ///   - what: the request, for messages ("STATUS").
    ///   - build: makes the request's frames from its request id.
    ///   - decode: decodes one reply message.
    ///   - requestID: the request id of a decoded reply, nil if it has none.
    func call<Reply>(
        _ what: String,
        build: (UInt64) -> [[UInt8]],
        decode: ([[UInt8]]) throws(ProtocolError) -> Reply,
        requestID: (Reply) -> UInt64?
    ) throws(ClientError) -> Reply {
        let id = nextRequestID()
        try send(build(id), what: what)
        let deadline = ContinuousClock.now + timeout
        while let frames = try receive(until: deadline) {
            let reply: Reply
            do {
                reply = try decode(frames)
            } catch {
                let carried = rejectMalformed(frames, error)
                if carried == id {
                    throw ClientError(.protocolViolation, "\(role) at \(endpoint) sent a malformed answer to \(what): \(error.reason)")
                }
                continue
            }
            let replyID = requestID(reply)
            if replyID == id || replyID == 0 { return reply }
        }
        throw ClientError.noAnswer(from: role, at: endpoint, within: timeout)
    }
}

/// A duration in whole milliseconds, rounded up, clamped to Int32.
func milliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    if seconds < 0 { return 0 }
    if seconds > Int64(Int32.max / 1000) { return Int(Int32.max) }
    let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    return Int(ms)
}
