import DarkroomCore
import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import DarkroomZMQ
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// The broker's sockets, on a thread that never waits for a disk: the
/// frontend and backend ROUTERs and the events XPUB.
///
/// It reads every message as it arrives, answers at once what needs no
/// queue (PING, STATUS from the core's last snapshot, malformed or
/// forbidden requests, SUBMITs that fail the checks that need no state),
/// keeps each worker's connection alive (HEARTBEAT out, liveness in), and
/// hands everything else to the core in the order read. What the core
/// sends back after each commit (replies, JOBs, events) goes out here.
///
/// Because nothing here writes to disk, a worker's heartbeat is read when
/// it arrives however long the core's turn takes, and a worker is declared
/// dead only after its connection was read empty and stayed silent for the
/// liveness period. If this thread itself was held up (the process was
/// stopped or starved), the time it lost is not counted against anyone.
final class Switchboard {
    let config: BrokerConfiguration
    let logger: Logger
    let frontend: Socket
    let backend: Socket
    /// Opened again, as a new socket, to drop every subscriber (`reopenEvents`).
    private(set) var events: Socket
    private let context: Context
    let inbox: MailboxInbox<SwitchboardInstruction>
    let boundEndpoints: [String: String]
    private let poller = Poller()
    private let frontendIndex: Int
    private let backendIndex: Int
    private let eventsIndex: Int
    private let inboxIndex: Int

    private let core: @Sendable (CoreMessage) -> Void
    private let board: StatusBoard
    private let backlog: Backlog
    private let pipelines = PipelineCache()
    private var subscriptions = EventSubscriptions()
    /// Warnings that peers' messages cause, each kind bounded (`LogLimiter`).
    private var warnings = LogLimiter()

    /// A worker connection: known from its READY until it disconnects, falls
    /// silent, or the core forgets it.
    private struct Peer {
        /// Monotonic ms of the last message from it and to it.
        var lastReceived: UInt64
        var lastSent: UInt64
    }

    private var peers: [[UInt8]: Peer] = [:]
    /// Monotonic ms when the loop last came round, to notice a stalled thread.
    private var lastLap: UInt64
    private var finished = false
    /// Inputs read in this lap, handed to the core in one post.
    private var forward: [CoreInput] = []

    init(configuration: BrokerConfiguration, context: Context, core: @escaping @Sendable (CoreMessage) -> Void,
         board: StatusBoard, backlog: Backlog, logger: Logger) throws {
        config = configuration
        self.logger = logger
        self.core = core
        self.board = board
        self.backlog = backlog
        self.context = context
        lastLap = BrokerCore.monotonicNow()
        var opened: [Socket] = []
        do {
            frontend = try context.socket(.router)
            opened.append(frontend)
            backend = try context.socket(.router)
            opened.append(backend)
            events = try Self.openEvents(context: context, configuration: configuration)
            opened.append(events)
            for socket in [frontend, backend] {
                try socket.setLinger(milliseconds: 100)
                try socket.setMaxMessageSize(Wire.maxMessageSize)
            }
            try frontend.setSendHighWaterMark(100_000)
            try frontend.setReceiveHighWaterMark(100_000)
            // A worker gets JOBs only against its credit, at most its slots.
            try backend.setSendHighWaterMark(Wire.Limit.queuedPerPeer)
            try backend.setRouterHandover(true)
            if let curve = configuration.curve {
                try frontend.setCurveServer(curve, zapDomain: ServerCurve.Domain.frontend)
                try backend.setCurveServer(curve, zapDomain: ServerCurve.Domain.backend)
            }
            try frontend.bind(configuration.frontendEndpoint)
            try backend.bind(configuration.backendEndpoint)
            try events.bind(configuration.eventsEndpoint)
            boundEndpoints = [
                "frontend": try frontend.lastEndpoint(),
                "backend": try backend.lastEndpoint(),
                "events": try events.lastEndpoint(),
            ]
            // After reading the TCP endpoints: `lastEndpoint` names the last bind.
            if let local = configuration.localBackendEndpoint { try backend.bind(local) }
            inbox = try Mailbox<SwitchboardInstruction>.make(context: context).inbox
        } catch {
            for socket in opened { socket.close() }
            throw error
        }
        frontendIndex = poller.add(frontend)
        backendIndex = poller.add(backend)
        eventsIndex = poller.add(events)
        inboxIndex = poller.add(inbox)
        logger.info("listening: frontend \(boundEndpoints["frontend"] ?? "?"), backend \(boundEndpoints["backend"] ?? "?"), events \(boundEndpoints["events"] ?? "?"); data \(config.dataDirectory)")
    }

    var mailbox: Mailbox<SwitchboardInstruction> { inbox.mailbox }

    // MARK: The loop

    func run() {
        var reason = "stopped"
        while !finished {
            // Above the backlog limit the frontend is not read, nor waited
            // for: its messages wait in the producers' sockets.
            let readFrontend = backlog.current < config.maxBacklogBytes
            poller.setEvents(readFrontend ? .readable : [], for: frontendIndex)
            do {
                let result = try poller.poll(timeoutMilliseconds: pollTimeout())
                let now = BrokerCore.monotonicNow()
                noticeStall(now: now)
                if result.isReadable(inboxIndex) { try handleInstructions(inbox.drain()) }
                let drained = readBackend(now: now)
                if readFrontend { readFrontendMessages() }
                if result.isReadable(eventsIndex) { readSubscriptions() }
                handOver()
                if drained { checkLiveness(now: BrokerCore.monotonicNow()) }
                sendHeartbeats(now: BrokerCore.monotonicNow())
                warnings.flush(logger)
                board.hear(now: now) { peers.mapValues(\.lastReceived) }
            } catch let error as ZMQError where error.isInterrupted {
                continue
            } catch {
                reason = "\(error)"
                logger.error("the broker's sockets failed, stopping: \(error)")
                core(.switchboardEnded(reason))
                break
            }
        }
        frontend.close()
        backend.close()
        events.close()
        inbox.close()
    }

    /// Wakes for the next heartbeat or liveness check; at most 100 ms.
    private func pollTimeout() -> Int {
        let now = BrokerCore.monotonicNow()
        var next = now + 100
        let interval = UInt64(config.heartbeatIntervalMilliseconds)
        let liveness = UInt64(config.livenessMilliseconds)
        for peer in peers.values {
            next = min(next, peer.lastSent + interval, peer.lastReceived + liveness + 1)
        }
        return next > now ? Int(next - now) : 0
    }

    /// If the loop was held up (the process stopped or starved of CPU), the
    /// time lost is not counted as the workers' silence.
    private func noticeStall(now: UInt64) {
        let gap = now &- lastLap
        lastLap = now
        let expected: UInt64 = 100 + 250
        guard gap > expected, !peers.isEmpty else { return }
        let lost = gap - 100
        logger.warn("the broker's socket thread was held up for \(gap) ms; not counted against the workers")
        for key in peers.keys { peers[key]?.lastReceived += lost }
    }

    private func handOver() {
        guard !forward.isEmpty else { return }
        core(.inputs(forward))
        forward.removeAll(keepingCapacity: true)
    }

    // MARK: From the core

    private func handleInstructions(_ instructions: [SwitchboardInstruction]) {
        for instruction in instructions {
            switch instruction {
            case .deliver(let delivery):
                deliver(delivery)
            case .finish:
                finished = true
            case .keysRevoked:
                reopenEvents("after keys were revoked; subscribers reconnect and are checked again")
            }
        }
    }

    private func deliver(_ delivery: Delivery) {
        for connection in delivery.forget { peers[connection] = nil }
        for (client, frames) in delivery.frontend { sendFrontend(client, frames) }
        let now = BrokerCore.monotonicNow()
        for message in delivery.backend { sendBackend(message.connection, message.frames, jobInput: message.jobInput, now: now) }
        publish(delivery.events)
    }

    // MARK: Backend

    /// Reads the backend until it is empty (or a large batch was read).
    /// Returns whether it was read empty.
    private func readBackend(now: UInt64) -> Bool {
        for _ in 0..<10_000 {
            guard let (frames, userID) = receive(backend) else { return true }
            handleBackend(frames, userID: userID, now: now)
        }
        return false
    }

    private func handleBackend(_ frames: [[UInt8]], userID: String?, now: UInt64) {
        guard let connection = frames.first else { return }
        if let userID, !admitted(userID) {
            // A worker whose key was revoked: it is dropped, its jobs go
            // back, and it is told DISCONNECT; its next connection is
            // refused by the ZAP handler.
            if peers.removeValue(forKey: connection) != nil {
                warnings.warn(logger, "backend: revoked keys", "backend: worker connection \(Wire.peerName(connection)) uses a revoked key; disconnected")
                forward.append(.revoked(connection: connection))
                sendBackend(connection, BackendMessage.disconnect.frames(), now: now)
            }
            return
        }
        // Every message from a known worker counts toward its liveness,
        // malformed or not (section 7): it shows the connection is alive.
        let known = peers[connection] != nil
        if known { peers[connection]?.lastReceived = now }
        let body = Array(frames.dropFirst())
        let message: BackendMessage
        do {
            message = try BackendMessage.decode(body, to: .server)
        } catch {
            rejectMalformed(body, error, socket: "backend", identity: connection) { sendBackend(connection, $0, now: now) }
            return
        }
        switch message {
        case .heartbeat where known:
            return
        case .ready:
            peers[connection] = Peer(lastReceived: now, lastSent: now)
        case .disconnect:
            peers[connection] = nil
        case .error(let error):
            warnings.warn(logger, "backend: ERRORs from workers", "backend: \(Wire.peerName(connection)) sent ERROR \(error.code): \(error.reason)")
            return
        case .ping(let ping):
            // A health probe (a worker key checking what a worker reaches):
            // answered here, whoever sends it; it registers nothing.
            sendBackend(connection, Pong(requestID: ping.requestID).frames(), now: now)
            return
        case .pong:
            return
        default:
            break
        }
        forward.append(.backend(message, connection: connection))
    }

    /// Declares silent every worker connection that sent nothing for the
    /// liveness period. Called only after the backend was read empty.
    private func checkLiveness(now: UInt64) {
        let limit = UInt64(config.livenessMilliseconds)
        var silent: [CoreInput] = []
        for (connection, peer) in peers where now > peer.lastReceived && now - peer.lastReceived > limit {
            silent.append(.silent(connection: connection, silence: now - peer.lastReceived))
        }
        guard !silent.isEmpty else { return }
        for case let .silent(connection, _) in silent { peers[connection] = nil }
        core(.inputs(silent))
    }

    private func sendHeartbeats(now: UInt64) {
        let interval = UInt64(config.heartbeatIntervalMilliseconds)
        for (connection, peer) in peers where now >= peer.lastSent + interval {
            sendBackend(connection, BackendMessage.heartbeat.frames(), now: now)
        }
    }

    /// Sends to a worker's connection; a JOB's `jobInput` is sent in place
    /// of its image frame (after the connection's frame).
    private func sendBackend(_ connection: [UInt8], _ frames: [[UInt8]], jobInput: MappedFile? = nil, now: UInt64) {
        do {
            if let jobInput {
                try backend.send([connection] + frames, file: jobInput, at: 1 + JobDispatch.imageFrame, dontWait: true)
            } else {
                try backend.send([connection] + frames, dontWait: true)
            }
        } catch {
            warnings.warn(logger, "backend: messages not sent", "message to worker \(Wire.peerName(connection)) not sent: \(error)")
        }
        peers[connection]?.lastSent = now
    }

    // MARK: Frontend

    /// Most message bytes one lap reads from the frontend. Copying a large
    /// SUBMIT out of ZeroMQ costs about a millisecond per megabyte (fresh
    /// pages included), so a lap that read up to the backlog limit (256 MB)
    /// kept the backend unread and the workers' heartbeats unsent for
    /// several hundred milliseconds. The rest waits for the next lap, which
    /// comes at once: the frontend is still readable.
    static let lapBytes = 32 << 20

    private func readFrontendMessages() {
        var bytes = 0
        for _ in 0..<max(1, config.maxMessagesPerTurn) {
            guard let (frames, role) = receive(frontend) else { return }
            for frame in frames { bytes += frame.count }
            handleFrontend(frames, role: role)
            if backlog.current >= config.maxBacklogBytes || bytes >= Switchboard.lapBytes { return }
        }
    }

    /// `role` is the ZAP user id of the client's connection (its key's
    /// role), nil when the frontend runs without keys.
    private func handleFrontend(_ frames: [[UInt8]], role: String?) {
        guard let client = frames.first else { return }
        let body = Array(frames.dropFirst())
        let message: FrontendMessage
        do {
            message = try FrontendMessage.decode(body, to: .server)
        } catch {
            rejectMalformed(body, error, socket: "frontend", identity: client) { sendFrontend(client, $0) }
            return
        }
        if let role, !admitted(role) {
            let reason = "this connection's key has been revoked"
            warnings.warn(logger, "frontend: refused clients", "frontend: client \(Wire.peerName(client)) refused: \(reason)")
            if case .submit(let submit) = message {
                sendFrontend(client, Rejected(requestID: submit.requestID, code: .forbidden, reason: reason).frames())
            } else if message.command != .error {
                sendFrontend(client, ErrorReply(requestID: message.requestID ?? 0, code: .forbidden, reason: reason).frames())
            }
            return
        }
        if let role, let reason = Permissions.refusal(role: role, message) {
            warnings.warn(logger, "frontend: refused clients", "frontend: client \(Wire.peerName(client)) refused: \(reason)")
            if case .submit(let submit) = message {
                sendFrontend(client, Rejected(requestID: submit.requestID, code: .forbidden, reason: reason).frames())
            } else {
                sendFrontend(client, ErrorReply(requestID: message.requestID ?? 0, code: .forbidden, reason: reason).frames())
            }
            return
        }
        switch message {
        case .submit(let submit):
            if let (code, reason) = check(submit) {
                sendFrontend(client, Rejected(requestID: submit.requestID, code: code, reason: reason).frames())
                return
            }
            let canonical: String
            do {
                canonical = try pipelines.parse(submit.pipeline).canonical
            } catch {
                // A line of at most 4096 bytes (section 5.1): the parser's
                // message quotes the bad token, which may be the whole pipeline.
                sendFrontend(client, Rejected(requestID: submit.requestID, code: .invalidPipeline, reason: Wire.line(error.summary)).frames())
                return
            }
            backlog.add(submit.image.count)
            forward.append(.submit(submit, canonicalPipeline: canonical, client: client))
        case .ping(let ping):
            sendFrontend(client, Pong(requestID: ping.requestID).frames())
        case .status(let request):
            sendFrontend(client, StatusReply(requestID: request.requestID, status: currentStatus()).frames())
        case .replay, .deadList, .jobInfo, .jobList:
            forward.append(.read(message, client: client))
        case .deadRetry(let request):
            forward.append(.deadRetry(request, client: client))
        case .deadDiscard(let request):
            forward.append(.deadDiscard(request, client: client))
        case .cancel(let request):
            forward.append(.cancel(request, client: client))
        case .pause(let request):
            forward.append(.pause(paused: true, requestID: request.requestID, client: client))
        case .resume(let request):
            forward.append(.pause(paused: false, requestID: request.requestID, client: client))
        case .error(let error):
            warnings.warn(logger, "frontend: ERRORs from clients", "frontend: client \(Wire.peerName(client)) sent ERROR \(error.code) for request \(error.requestID): \(error.reason)")
        case .accepted, .rejected, .statusReply, .replayEnd, .event, .deadListReply, .jobInfoReply, .jobListReply, .pong, .ok:
            // Not reached: decoding for the server refuses replies.
            let reason = "\(message.command.name) is sent by the broker, not to it"
            warnings.warn(logger, "frontend: bad messages", "frontend: client \(Wire.peerName(client)) command 0x\(String(message.command.rawValue, radix: 16)): \(reason)")
            sendFrontend(client, ErrorReply(requestID: 0, code: .unexpectedCommand, reason: reason).frames())
        }
    }

    /// The checks a SUBMIT passes before the queue sees it: its size and
    /// that it starts like a JPEG, a PNG, a WebP, a GIF, a HEIF or a TIFF at all (the worker
    /// decodes it).
    private func check(_ submit: Submit) -> (ErrorCode, String)? {
        if submit.image.count > config.maxImageBytes {
            return (.tooLarge, "image is \(submit.image.count) bytes; the limit is \(config.maxImageBytes)")
        }
        guard SourceFormat(signatureOf: submit.image) != nil else {
            return (.invalidImage, "image is not a JPEG, PNG, WebP, GIF, HEIF or TIFF file (it starts with neither the FF D8 marker, the PNG signature, RIFF…WEBP, GIF87a or GIF89a, an ftyp box naming a HEIF brand, nor a TIFF byte order mark)")
        }
        return nil
    }

    /// The core's last committed status, with each worker's last message
    /// as this thread heard it.
    private func currentStatus() -> BrokerStatus {
        let wall = ULIDGenerator.systemMilliseconds()
        let now = BrokerCore.monotonicNow()
        guard let snapshot = board.current else {
            return BrokerStatus(time: wall, eventSeq: 0,
                                queue: QueueStatus(ready: [], delayed: 0, inFlight: 0, dead: 0, limit: UInt64(config.maxQueueDepth)),
                                workers: [], rates: Rates(windowSeconds: UInt32(config.rateWindowSeconds), accepted: 0, stored: 0, failed: 0))
        }
        var status = snapshot.status
        status.time = wall
        for index in status.workers.indices {
            guard let connection = snapshot.connections[status.workers[index].id], let peer = peers[connection] else { continue }
            let age = now > peer.lastReceived ? now - peer.lastReceived : 0
            status.workers[index].lastHeartbeat = wall > age ? wall - age : 0
        }
        return status
    }

    private func sendFrontend(_ client: [UInt8], _ frames: [[UInt8]]) {
        do {
            try frontend.send([client] + frames, dontWait: true)
        } catch {
            warnings.warn(logger, "frontend: replies not sent", "reply to client \(Wire.peerName(client)) not sent: \(error)")
        }
    }

    // MARK: Events

    /// Publishes committed events in each form someone subscribed to: one
    /// EVENT per event under "ev", and EVENTS of up to
    /// `EventBatch.maxEvents` under "eb".
    private func publish(_ committed: [Event]) {
        guard !committed.isEmpty else { return }
        if subscriptions.wants(Wire.eventTopic) {
            for event in committed {
                publish(event.publishedFrames(), first: event.seq, last: event.seq)
            }
        }
        if subscriptions.wants(Wire.eventBatchTopic) {
            var start = 0
            while start < committed.count {
                let end = min(committed.count, start + EventBatch.maxEvents)
                let batch = EventBatch(events: Array(committed[start..<end]))
                publish(batch.publishedFrames(), first: committed[start].seq, last: committed[end - 1].seq)
                start = end
            }
        }
    }

    private func publish(_ frames: [[UInt8]], first: UInt64, last: UInt64) {
        do {
            try events.send(frames, dontWait: true)
        } catch {
            let seqs = first == last ? "event \(first)" : "events \(first)…\(last)"
            logger.debug("\(seqs) not published (\(error)); subscribers can replay them")
        }
    }

    /// Whether the connection whose ZAP user id is `userID` still has an
    /// admitted key.
    private func admitted(_ userID: String) -> Bool {
        config.admission?(ConnectionIdentity(userID: userID)) ?? true
    }

    /// The events socket, not yet bound. An XPUB rather than a PUB: the same
    /// to subscribers, and it tells the broker which forms (EVENT, EVENTS)
    /// anyone subscribed to.
    private static func openEvents(context: Context, configuration: BrokerConfiguration) throws -> Socket {
        let events = try context.socket(.xpub)
        do {
            try events.setLinger(milliseconds: 100)
            try events.setSendHighWaterMark(100_000)
            // Each subscription applied by the socket to its own connection,
            // and every one passed up (see `EventSubscriptions`).
            try events.setXPubVerboser(true)
            // A subscriber sends one to three messages; a short queue per
            // connection keeps little of anything else waiting. (It does not
            // stop a flood from landing before the broker counts it: the
            // socket applies what it reads at once, and ZeroMQ refills the
            // queue as fast as it is read.)
            try events.setReceiveHighWaterMark(16)
            try events.setMaxMessageSize(EventSubscriptions.maxMessageBytes)
            if let curve = configuration.curve {
                try events.setCurveServer(curve, zapDomain: ServerCurve.Domain.events)
            }
            return events
        } catch {
            events.close()
            throw error
        }
    }

    /// Drops every subscriber by closing the events socket and binding a
    /// new one on the same endpoint: an XPUB cannot close one subscriber's
    /// connection, and a revoked key's subscriber must not go on receiving,
    /// nor a peer go on holding stray subscriptions. Closed, the socket
    /// reads nothing more from any connection at once (an unbind would end
    /// them a few hops later, while it went on reading). The subscribers
    /// reconnect by themselves and miss nothing they cannot replay. `why`
    /// ends the log line.
    private func reopenEvents(_ why: String) {
        let endpoint = boundEndpoints["events"] ?? config.eventsEndpoint
        let fresh: Socket
        do { fresh = try Self.openEvents(context: context, configuration: config) } catch {
            logger.error("events socket: could not open it again (\(why)): \(error)")
            return
        }
        events.close()
        events = fresh
        poller.replace(eventsIndex, with: fresh)
        // The new socket holds no subscription yet.
        subscriptions = EventSubscriptions()
        for attempt in 1...50 {
            do {
                try events.bind(endpoint)
                logger.info("events socket bound again on \(endpoint) \(why)")
                return
            } catch ZMQError.Code.addressInUse where attempt < 50 {
                // The old socket's listener closes on ZeroMQ's own thread, a moment later.
                usleep(20_000)
            } catch {
                logger.error("events socket: could not bind \(endpoint) again (\(why)): \(error); no events are published until the broker restarts")
                return
            }
        }
    }

    /// Reads the subscribe and unsubscribe messages the XPUB socket passes
    /// up, and the peers' messages that are neither, which it drops.
    private func readSubscriptions() {
        for _ in 0..<1_000 {
            let message: (frames: [[UInt8]], fromConnection: Bool)?
            do { message = try events.receiveNotingConnection(dontWait: true) } catch {
                logger.warn("events socket: \(error)")
                return
            }
            guard let message else { return }
            // Every frame: libzmq takes any frame that starts with 0 or 1 for
            // a subscription, the later frames of a message too.
            for frame in message.frames where subscriptions.take(frame, fromConnection: message.fromConnection) == .overLimit {
                logger.warn("events socket: subscriptions to topics the broker never publishes hold over \(EventSubscriptions.strayLimitBytes >> 10) KiB; dropping every events connection (ZeroMQ cannot close one), subscribers reconnect and replay what they missed")
                reopenEvents("after stray subscriptions; subscribers reconnect")
                return
            }
        }
    }

    // MARK: Helpers

    /// The next waiting message and its client's role (the ZAP user id;
    /// nil without keys), or nil when none is waiting.
    private func receive(_ socket: Socket) -> (frames: [[UInt8]], role: String?)? {
        // Messages over DRK1's size limit in all their frames are dropped
        // (and logged) on the way, unanswered.
        for _ in 0..<1_000 {
            do {
                return try socket.receiveWithUserID(dontWait: true, maxBytes: Int(Wire.maxMessageSize))
                    .map { (frames: $0.frames, role: $0.userID) }
            } catch let oversized as Socket.Oversized {
                let peer = oversized.firstFrame.map { Wire.peerName($0) } ?? "a peer"
                warnings.warn(logger, "oversized messages", "dropped \(oversized) from \(peer): DRK1 messages hold at most \(Wire.maxMessageSize) bytes")
                // Still a sign of life from a worker (section 7).
                if socket === backend, let connection = oversized.firstFrame, peers[connection] != nil {
                    peers[connection]?.lastReceived = BrokerCore.monotonicNow()
                }
            } catch {
                logger.warn("receive failed: \(error)")
                return nil
            }
        }
        return nil
    }

    /// Logs a message that did not decode and answers it with ERROR (never an ERROR with an ERROR).
    private func rejectMalformed(_ body: [[UInt8]], _ error: ProtocolError, socket: String, identity: [UInt8], send: ([[UInt8]]) -> Void) {
        let commandByte = body.count > 1 && body[1].count == 1 ? "0x" + String(body[1][0], radix: 16) : "none"
        warnings.warn(logger, "\(socket): bad messages", "\(socket): bad message from \(Wire.peerName(identity)), command \(commandByte): \(error.code): \(error.reason)")
        if Wire.isError(body) { return }
        send(Wire.errorReply(to: body, for: error).frames())
    }

}

extension Switchboard: ServiceLoop {}
