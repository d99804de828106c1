import DarkroomCore
import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// The storage node's loop, on the thread that owns the ROUTER socket, the
/// mailbox inbox and the `RecordStore`. Never shared with another thread.
final class StoreService {
    let configuration: StoreConfiguration
    let logger: Logger
    let records: RecordStore
    let socket: Socket
    let inbox: MailboxInbox<StoreNode.Control>
    let poller = Poller()
    /// The header checks every STORE passes before it reaches the database.
    let imageCheck: ImageCheck
    /// The endpoint actually bound (the port resolved when it was `*`).
    let endpoint: String
    /// Totals for metrics, kept as requests are answered (counted from the
    /// database once, at start) and published after each change.
    private let board: StoreBoard
    private var metrics = StoreMetrics()

    var mailbox: Mailbox<StoreNode.Control> { inbox.mailbox }

    private let socketItem: Int
    private let inboxItem: Int
    /// When the next look for expired records is due (monotonic ms).
    private var nextExpiry: UInt64 = 0

    /// A request that reads or writes the database, and who sent it.
    private struct Pending {
        let peer: [UInt8]
        let message: StoreMessage
    }

    /// ZeroMQ's queue for each peer, in messages (its default). A peer that
    /// stops reading holds at most this many replies in it: GET-REPLYs of
    /// inline images (at most the blob threshold each) or of mapped files
    /// (page cache, not this process's heap). Replies that find it full
    /// wait in `held`; GET-REPLYs are dropped instead, and the client asks
    /// again.
    static let queuedPerPeer = 1_000

    /// Replies a peer's queue had no room for, oldest first, sent as it
    /// drains: a worker's STOREDs for all its slots at once, across a slow
    /// link, are more than ZeroMQ's queue holds. At most
    /// `Wire.Limit.queuedPerPeer` a peer, each a short reply.
    private var held: [[UInt8]: HeldReplies] = [:]
    /// How long the loop waits before it tries the held replies again (ms):
    /// 1 after one left, doubling to 10 while none can. (A ROUTER is always
    /// writable to poll, so only a timer can tell.) A longer wait would
    /// delay STOREDs behind a slow link's window, which the worker counts
    /// as round trip; 100 tries a second cost nothing.
    private var heldRetry = 1
    /// `metrics.droppedReplies` as `countHeld` last published it: drops
    /// happen while replies are sent, after a turn's totals went out.
    private var droppedPublished: UInt64 = 0
    /// Warnings that peers' messages cause, each kind bounded (`LogLimiter`).
    private var warnings = LogLimiter()

    init(configuration: StoreConfiguration, context: Context, logger: Logger, board: StoreBoard) throws {
        self.configuration = configuration
        self.logger = logger
        self.board = board
        imageCheck = ImageCheck(limits: configuration.imageLimits)
        do {
            records = try RecordStore(
                directory: configuration.dataDirectory,
                threshold: max(0, configuration.externalBlobThreshold),
                maxBlobBytes: Int(clamping: configuration.maxMessageSize),
                logger: logger)
        } catch {
            throw StoreNodeError("cannot open the store in \(configuration.dataDirectory): \(error)")
        }
        do {
            socket = try context.socket(.router)
            try socket.setLinger(milliseconds: configuration.lingerMilliseconds)
            try socket.setMaxMessageSize(configuration.maxMessageSize)
            // A reply to a peer that has gone away fails at once instead of
            // being dropped silently, so it can be logged.
            try socket.setRouterMandatory(true)
            // Bounds what a peer that stops reading costs (see
            // `queuedPerPeer`); replies past it wait in `held`.
            try socket.setSendHighWaterMark(StoreService.queuedPerPeer)
            if let curve = configuration.curve {
                try socket.setCurveServer(curve, zapDomain: ServerCurve.Domain.store)
            }
            try socket.bind(configuration.endpoint)
            endpoint = try socket.lastEndpoint()
            if let local = configuration.localEndpoint { try socket.bind(local) }
            (_, inbox) = try Mailbox<StoreNode.Control>.make(context: context)
        } catch {
            records.close()
            throw error
        }
        socketItem = poller.add(socket)
        inboxItem = poller.add(inbox)
        let totals = try? records.totals()
        metrics.records = totals?.records ?? 0
        metrics.fullBytes = totals?.fullBytes ?? 0
        metrics.thumbnailBytes = totals?.thumbBytes ?? 0
        board.publish(metrics)
        let kept = (configuration.recordLifetime.map { "; records kept for \(StoreService.spoken($0))" } ?? "")
            + (configuration.maxImageBytes.map { "; images kept within \($0) bytes" } ?? "")
        logger.info("store listening on \(endpoint), data in \(configuration.dataDirectory), \(totals?.records ?? 0) record(s)\(kept)")
    }

    func run() {
        loop: while true {
            let ready: PollResult
            do {
                ready = try poller.poll(timeoutMilliseconds: pollWait())
            } catch {
                if (error as? ZMQError)?.isTerminated != true { logger.error("store poll failed: \(error)") }
                break loop
            }
            if ready.isReadable(inboxItem) {
                let controls = (try? inbox.drain()) ?? [.stop]
                if controls.contains(.stop) { break loop }
            }
            if ready.isReadable(socketItem) {
                do {
                    try turn()
                } catch {
                    if (error as? ZMQError)?.isTerminated != true { logger.error("store socket failed: \(error)") }
                    break loop
                }
            }
            if !held.isEmpty { sendHeld() }
            if expiryWait() == 0 { expire() }
            warnings.flush(logger)
        }
        shutDown()
    }

    /// The poll's timeout: until the next expiry look, or sooner while
    /// replies are held.
    private func pollWait() -> Int {
        var wait = expiryWait()
        if !held.isEmpty { wait = wait < 0 ? heldRetry : min(wait, heldRetry) }
        if let flush = warnings.untilFlush() {
            let milliseconds = Int(flush.milliseconds) + 1
            wait = wait < 0 ? milliseconds : min(wait, milliseconds)
        }
        return wait
    }

    // MARK: Expiry and the byte cap

    /// How long the poll may wait before the next look for records past
    /// their lifetime or over the byte cap: -1 (forever) with neither.
    private func expiryWait() -> Int {
        guard configuration.recordLifetime != nil || configuration.maxImageBytes != nil else { return -1 }
        let now = StoreService.monotonicNow()
        return nextExpiry > now ? Int(clamping: nextExpiry - now) : 0
    }

    /// The image bytes held past `maxImageBytes`; 0 within it (or without one).
    private var bytesOverCap: UInt64 {
        guard let cap = configuration.maxImageBytes else { return 0 }
        let held = metrics.fullBytes + metrics.thumbnailBytes
        return held > cap ? held - cap : 0
    }

    /// Deletes one batch of the records past `recordLifetime`, then one of
    /// the oldest while the images are over `maxImageBytes`, each in a
    /// transaction of its own; their blob files go after the commit (a
    /// crash between the two leaves them to the startup sweep). Another
    /// look follows at once when a batch was full or the cap is still
    /// passed, after the requests that came meanwhile.
    private func expire() {
        let batch = max(1, configuration.expiryBatch)
        let now = StoreService.monotonicNow()
        // A short lifetime is looked after often enough that a record
        // outlives it by a tenth at most.
        let lifetime = configuration.recordLifetime
        let interval = UInt64(max(100, min(configuration.expiryInterval.milliseconds, (lifetime?.milliseconds ?? .max) / 10)))
        nextExpiry = now + interval
        var again = false
        let wall = ULIDGenerator.systemMilliseconds()
        if let lifetime, wall > UInt64(max(0, lifetime.milliseconds)) {
            let cutoff = wall - UInt64(max(0, lifetime.milliseconds))
            let gone = deleteBatch("the records older than \(StoreService.spoken(lifetime))", retry: interval) {
                try records.expire(before: cutoff, limit: batch)
            }
            metrics.expired += UInt64(gone.count)
            if !gone.isEmpty {
                logger.info("store deleted \(gone.count) record(s) stored before \(Logger.timestamp(milliseconds: Int64(clamping: cutoff))) (kept for \(StoreService.spoken(lifetime)))")
            }
            again = gone.count >= batch
        }
        let over = bytesOverCap
        if over > 0, let cap = configuration.maxImageBytes {
            let gone = deleteBatch("the oldest records over --keep-bytes", retry: interval) {
                try records.evictOldest(freeing: over, limit: batch)
            }
            metrics.evicted += UInt64(gone.count)
            if !gone.isEmpty {
                logger.info("store deleted the \(gone.count) oldest record(s) to keep the images within \(cap) bytes")
            }
            again = again || (!gone.isEmpty && bytesOverCap > 0)
        }
        board.publish(metrics)
        if again { nextExpiry = now }
    }

    /// Runs `delete` in a transaction of its own and takes what it deleted
    /// out of the totals; nothing when it fails (logged, tried again later).
    private func deleteBatch(_ what: String, retry interval: UInt64, _ delete: () throws -> [RecordInfo]) -> [RecordInfo] {
        let gone: [RecordInfo]
        do {
            try records.begin()
            gone = try delete()
            try records.commit()
        } catch {
            records.rollback()
            logger.error("store cannot delete \(what): \(error); trying again in \(interval / 1_000) s")
            return []
        }
        var removed = StoreMetrics()
        for record in gone { removed.count(record) }
        metrics.add(StoreMetrics(), removing: removed)
        return gone
    }

    static func monotonicNow() -> UInt64 { DispatchTime.now().uptimeNanoseconds / 1_000_000 }

    /// A lifetime as `--keep-records` takes it: 90s, 15m, 12h or 30d.
    static func spoken(_ lifetime: Duration) -> String {
        let seconds = lifetime.components.seconds
        for (unit, size) in [("d", Int64(86_400)), ("h", 3_600), ("m", 60)] where seconds >= size && seconds % size == 0 {
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }

    // MARK: One turn

    /// Takes the waiting requests, applies them in one transaction, commits,
    /// then replies.
    private func turn() throws {
        var replies: [Reply] = []
        var pending: [Pending] = []
        var bytes = 0
        while pending.count < configuration.maxRequestsPerTurn, bytes < configuration.maxBytesPerTurn,
              let (message, role) = try receiveWithinLimit() {
            bytes += message.reduce(0) { $0 + $1.count }
            if let request = classify(message, role: role, replies: &replies) {
                pending.append(request)
            }
        }
        if !pending.isEmpty {
            replies += apply(pending)
            // Past the byte cap: the oldest go right after these replies.
            if bytesOverCap > 0 { nextExpiry = 0 }
        }
        // Published before the replies: a client that has its answer reads
        // totals that count it.
        board.publish(metrics)
        for reply in replies { send(reply) }
        countHeld()
    }

    /// Decodes one message. Returns the requests that need the database;
    /// answers PING, bad messages and STOREs whose images fail the header
    /// checks directly into `replies`. `role` is the ZAP user id of the
    /// peer's connection (its key's role), nil without keys.
    private func classify(_ message: [[UInt8]], role: String?, replies: inout [Reply]) -> Pending? {
        guard let peer = message.first else { return nil }
        let frames = Array(message.dropFirst())
        let decoded: StoreMessage
        do {
            decoded = try StoreMessage.decode(frames, to: .server)
        } catch {
            reject(frames, from: peer, error, replies: &replies)
            return nil
        }
        if let role, let admission = configuration.admission, !admission(ConnectionIdentity(userID: role)) {
            reject(frames, from: peer, ProtocolError(.forbidden, "this connection's key has been revoked"), replies: &replies)
            return nil
        }
        if let role, Permissions.requests.contains(decoded.command), !Permissions.allows(role: role, decoded.command) {
            if case .store = decoded { metrics.refused += 1 }
            reject(frames, from: peer, ProtocolError(.forbidden, Permissions.refusal(role: role, decoded.command)), replies: &replies)
            return nil
        }
        switch decoded {
        case .store(let request):
            // Checked here, outside the batch: a refused STORE costs the
            // database nothing, and is refused whether or not its job
            // already has a record.
            if let failure = imageCheck.failure(of: request) {
                warnings.warn(logger, "refused STOREs", "store refused the STORE of job \(request.jobID) from peer \(Wire.peerName(peer)): \(failure.code): \(failure.reason)")
                metrics.refused += 1
                replies.append(Reply([peer] + ErrorReply(requestID: request.requestID, code: failure.code, reason: Wire.line(failure.reason)).frames()))
                return nil
            }
            return Pending(peer: peer, message: decoded)
        case .list, .get, .delete, .stats:
            return Pending(peer: peer, message: decoded)
        case .ping(let ping):
            replies.append(Reply([peer] + Pong(requestID: ping.requestID).frames()))
        case .error(let error):
            // Never answer an ERROR with an ERROR.
            warnings.warn(logger, "ERRORs from peers", "store peer \(Wire.peerName(peer)) sent ERROR \(error.code): \(error.reason)")
        case .stored, .listReply, .getReply, .statsReply, .pong, .ok:
            let error = ProtocolError(.unexpectedCommand, "\(decoded.command.name) is a reply; the storage node only takes requests")
            reject(frames, from: peer, error, replies: &replies)
        }
        return nil
    }

    /// Logs a bad message in one line and answers it with ERROR, unless it is
    /// itself an ERROR.
    private func reject(_ frames: [[UInt8]], from peer: [UInt8], _ error: ProtocolError, replies: inout [Reply]) {
        let command = frames.count > 1 && frames[1].count == 1 ? Wire.peerName(frames[1]) : "none"
        warnings.warn(logger, "bad messages", "store dropped a message from peer \(Wire.peerName(peer)), command \(command): \(error.code): \(error.reason)")
        if Wire.isError(frames) { return }
        replies.append(Reply([peer] + Wire.errorReply(to: frames, for: error).frames()))
    }

    /// Applies the requests in one transaction and returns their replies,
    /// which are only valid to send once this returns (after the commit).
    ///
    /// The batch first runs with no savepoints: a savepoint per request
    /// copies every page the request touches into SQLite's statement
    /// journal, several pages per STORE. A write request that fails may
    /// have left part of its changes, so the whole batch is then rolled
    /// back and run again with each write in its own savepoint, where a
    /// failing request undoes only itself.
    private func apply(_ pending: [Pending]) -> [Reply] {
        if let replies = applyBatch(pending, isolated: false) { return replies }
        logger.debug("store: a write failed in a batch of \(pending.count); running it again request by request")
        // Isolated, a failing write undoes only itself: there is always a reply.
        return applyBatch(pending, isolated: true) ?? []
    }

    /// The batch's replies, or nil when a write failed outside a savepoint
    /// (never with `isolated`); the batch was then rolled back.
    private func applyBatch(_ pending: [Pending], isolated: Bool) -> [Reply]? {
        let started = DispatchTime.now()
        do {
            try records.begin()
        } catch {
            logger.error("store cannot begin a transaction: \(error)")
            metrics.refused += StoreService.stores(in: pending)
            return pending.map { failure($0, StoreFailure(.internal, "storage node database unavailable: \(error)")) }
        }
        let now = ULIDGenerator.systemMilliseconds()
        var replies: [Reply] = []
        var stored = 0
        // What this batch changes in the totals, counted in only once it
        // is committed (a batch run again starts from nothing).
        var change = StoreMetrics()
        var removed = StoreMetrics()
        for request in pending {
            do {
                let (frames, image) = try handle(request.message, now: now, isolated: isolated, change: &change, removed: &removed)
                replies.append(Reply([request.peer] + frames, image: image))
                if case .store = request.message { stored += 1 }
            } catch where !isolated && request.message.writes && !(error is StoreFailure) {
                // A StoreFailure is thrown before anything is written; any
                // other error may come halfway through the request.
                records.rollback()
                return nil
            } catch let failure as StoreFailure {
                if failure.code == .queueFull {
                    warnings.warn(logger, "requests refused for unread replies", "store \(request.message.command.name) refused: \(failure.reason)")
                } else if failure.code != .notFound {
                    warnings.log(logger, .error, "failed requests", "store \(request.message.command.name) failed: \(failure.reason)")
                }
                if case .store = request.message { change.refused += 1 }
                replies.append(self.failure(request, failure))
            } catch {
                warnings.log(logger, .error, "failed requests", "store \(request.message.command.name) failed: \(error)")
                if case .store = request.message { change.refused += 1 }
                replies.append(self.failure(request, StoreFailure(.internal, "\(request.message.command.name) failed: \(error)")))
            }
        }
        do {
            try records.commit()
        } catch {
            records.rollback()
            logger.error("store commit of \(pending.count) request(s) failed, all answered ERROR internal: \(error)")
            metrics.refused += StoreService.stores(in: pending)
            return pending.map { failure($0, StoreFailure(.internal, "storage node commit failed: \(error)")) }
        }
        metrics.add(change, removing: removed)
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e6
        logger.debug("store committed \(pending.count) request(s), \(stored) STORE, in \(String(format: "%.2f", elapsed)) ms")
        return replies
    }

    /// The STOREs among `pending`.
    private static func stores(in pending: [Pending]) -> UInt64 {
        UInt64(pending.count { if case .store = $0.message { true } else { false } })
    }

    /// Runs one request; with `isolated`, a write runs in its own savepoint.
    /// What it adds to the totals goes into `change`, what it takes away
    /// into `removed`. Returns the reply's frames, and for a GET its image,
    /// to be sent in place of the image frame (left empty in the frames).
    private func handle(_ message: StoreMessage, now: UInt64, isolated: Bool, change: inout StoreMetrics, removed: inout StoreMetrics) throws -> ([[UInt8]], ImageFrame?) {
        switch message {
        case .store(let request):
            let (recordID, created) = try write(isolated) { try records.store(request, now: now) }
            change.stores += 1
            if created {
                change.records += 1
                change.fullBytes += UInt64(request.full.count)
                change.thumbnailBytes += UInt64(request.thumbnail.count)
                logger.debug("store job \(request.jobID) stored as record \(recordID)")
            } else {
                logger.info("store job \(request.jobID) already has record \(recordID); STORE ignored")
            }
            return (Stored(requestID: request.requestID, jobID: request.jobID, recordID: recordID, created: created).frames(), nil)
        case .list(let request):
            let found = try records.list(limit: Int(request.limit), before: request.before)
            return (ListReply(requestID: request.requestID, records: found).frames(), nil)
        case .get(let request):
            guard let record = try records.record(matching: request.id) else { throw StoreFailure.notFound(request.id) }
            switch try records.image(of: record, variant: request.variant, mappings: board.mappedImages) {
            case .inline(let bytes):
                let queued = board.queuedImageBytes.current
                guard queued + bytes.count <= configuration.maxQueuedImageBytes else {
                    throw StoreFailure(.queueFull, "the storage node holds \(queued) bytes of images for replies its peers have not read; retry later")
                }
                // Copied once, counted until libzmq frees it.
                return (GetReply(requestID: request.requestID, variant: request.variant, record: record, image: []).frames(), .copied(CopiedFrame(copying: bytes, tally: board.queuedImageBytes)))
            case .file(let file):
                // This one counted, mapped until the reply goes out of scope.
                guard board.mappedImages.current <= configuration.maxMappedImages else {
                    throw StoreFailure(.queueFull, "the storage node has \(board.mappedImages.current - 1) images mapped for replies its peers have not read; retry later")
                }
                // The image frame is left empty and sent from the file.
                return (GetReply(requestID: request.requestID, variant: request.variant, record: record, image: []).frames(), .mapped(file))
            }
        case .delete(let request):
            let deleted = try write(isolated) { try records.delete(matching: request.id) }
            guard let deleted else { throw StoreFailure.notFound(request.id) }
            removed.count(deleted)
            logger.info("store deleted the record of \(request.id)")
            return (OKReply(requestID: request.requestID, count: 1).frames(), nil)
        case .stats(let request):
            return (StatsReply(requestID: request.requestID, stats: try records.totals().stats).frames(), nil)
        default:
            throw StoreFailure(.unexpectedCommand, "\(message.command.name) is not a storage request")
        }
    }

    /// Runs a write request, in its own savepoint when `isolated`.
    private func write<T>(_ isolated: Bool, _ body: () throws -> T) throws -> T {
        isolated ? try records.inSavepoint(body) : try body()
    }

    private func failure(_ request: Pending, _ failure: StoreFailure) -> Reply {
        let reason = String(failure.reason.utf8.prefix(Wire.Limit.reasonBytes)) ?? failure.code.name
        return Reply([request.peer] + ErrorReply(requestID: request.message.requestID ?? 0, code: failure.code, reason: Wire.line(reason)).frames())
    }

    // MARK: Replies

    /// Sends a reply now, or holds it behind the peer's earlier held ones
    /// (a GET-REPLY, which is never held, is tried at once: replies carry
    /// their request id, so their order does not matter).
    private func send(_ reply: Reply) {
        if held[reply.peer] != nil && !reply.isImage {
            hold(reply)
            return
        }
        if case .full = attempt(reply) { hold(reply) }
    }

    private enum Attempt { case sent, full, dropped }

    /// One try at queueing a reply in ZeroMQ; `full` when the peer's queue
    /// has no room (the reply is unchanged, its file still mapped).
    private func attempt(_ reply: Reply) -> Attempt {
        do {
            switch reply.image {
            case .mapped(let file)?: try socket.send(reply.frames, file: file, at: 1 + GetReply.imageFrame, dontWait: true)
            case .copied(let copy)?: try socket.send(reply.frames, copied: copy, at: 1 + GetReply.imageFrame, dontWait: true)
            case nil: try socket.send(reply.frames, dontWait: true)
            }
            return .sent
        } catch let error as ZMQError where error.isWouldBlock {
            return .full
        } catch {
            let peer = Wire.peerName(reply.peer)
            if let error = error as? ZMQError, error.isHostUnreachable {
                logger.debug("store reply to peer \(peer) dropped: the peer disconnected")
            } else {
                warnings.warn(logger, "replies not sent", "store reply to peer \(peer) dropped: \(error)")
            }
            return .dropped
        }
    }

    /// Keeps a reply the peer's queue had no room for. A GET-REPLY is
    /// dropped instead (an image is what must not pile up for a peer that
    /// does not read; the client asks again), and so is any reply past
    /// `Wire.Limit.queuedPerPeer` held for one peer: more than a worker
    /// with every slot full and resending has in flight.
    private func hold(_ reply: Reply) {
        let peer = Wire.peerName(reply.peer)
        if reply.isImage {
            metrics.droppedReplies += 1
            warnings.warn(logger, "GET-REPLYs dropped", "store GET-REPLY to peer \(peer) dropped: \(StoreService.queuedPerPeer) replies wait for it to read; it will ask again")
            return
        }
        // Changed in place in the dictionary: a copy taken out and put
        // back would copy every held reply on each change.
        if held[reply.peer] == nil { heldRetry = 1 }
        guard held[reply.peer, default: HeldReplies()].count < Wire.Limit.queuedPerPeer else {
            metrics.droppedReplies += 1
            if held[reply.peer]?.overflowed == false {
                warnings.warn(logger, "replies dropped", "store reply to peer \(peer) dropped: \(Wire.Limit.queuedPerPeer) replies wait for it to read")
            }
            held[reply.peer]?.overflowed = true
            return
        }
        held[reply.peer, default: HeldReplies()].append(reply)
    }

    /// Sends what each peer's queue has room for of its held replies, in order.
    private func sendHeld() {
        var progress = false
        for peer in Array(held.keys) {
            sending: while let reply = held[peer]?.first {
                switch attempt(reply) {
                case .full:
                    break sending
                case .sent:
                    progress = true
                    held[peer]?.removeFirst()
                case .dropped:
                    // The peer has gone: none of the rest can reach it.
                    held[peer] = nil
                }
            }
            if held[peer]?.count == 0 { held[peer] = nil }
        }
        heldRetry = progress ? 1 : min(heldRetry * 2, 10)
        countHeld()
    }

    /// Publishes how many replies are held now, and how many were dropped,
    /// when either changed since the totals were last published.
    private func countHeld() {
        let count = UInt64(held.values.reduce(0) { $0 + $1.count })
        guard count != metrics.heldReplies || metrics.droppedReplies != droppedPublished else { return }
        metrics.heldReplies = count
        droppedPublished = metrics.droppedReplies
        board.publish(metrics)
    }

    /// The next waiting request; messages over DRK1's size limit in all
    /// their frames are dropped (and logged) on the way, unanswered.
    private func receiveWithinLimit() throws -> (frames: [[UInt8]], userID: String?)? {
        while true {
            do {
                return try socket.receiveWithUserID(dontWait: true, maxBytes: Int(configuration.maxMessageSize))
            } catch let oversized as Socket.Oversized {
                let peer = oversized.firstFrame.map { Wire.peerName($0) } ?? "a peer"
                warnings.warn(logger, "oversized messages", "dropped \(oversized) from \(peer): messages here hold at most \(configuration.maxMessageSize) bytes")
            }
        }
    }

    // MARK: Shutdown

    /// Answers requests still queued with `shutting-down`, then closes the
    /// socket (letting replies leave within the linger) and the database.
    private func shutDown() {
        var refused = 0
        while refused < 10_000, let message = try? socket.receive(dontWait: true) {
            guard let peer = message.first else { continue }
            let frames = Array(message.dropFirst())
            if Wire.isError(frames) { continue }
            let error = ProtocolError(.shuttingDown, "the storage node is stopping; retry later")
            send(Reply([peer] + Wire.errorReply(to: frames, for: error).frames()))
            refused += 1
        }
        socket.close()
        inbox.close()
        records.close()
        logger.info("store stopped\(refused > 0 ? " (\(refused) queued request(s) answered shutting-down)" : "")")
    }
}

/// A reply, its frames led by the peer's identity; for a GET of an image
/// kept in a file, that file, sent without being copied in place of the
/// last frame (the image's, left empty).
private struct Reply {
    let frames: [[UInt8]]
    /// A GET-REPLY's image, sent in place of its empty image frame.
    let image: ImageFrame?

    init(_ frames: [[UInt8]], image: ImageFrame? = nil) {
        self.frames = frames
        self.image = image
    }

    /// A GET-REPLY (every one carries its image): dropped rather than held
    /// when the peer's queue is full.
    var isImage: Bool { image != nil }

    var peer: [UInt8] { frames.first ?? [] }
}

/// A GET-REPLY's image, sent without another copy and counted until
/// libzmq lets it go: a blob file mapped, or an inline image copied once.
private enum ImageFrame {
    case mapped(MappedFile)
    case copied(CopiedFrame)
}

/// A peer's held replies, oldest first.
private struct HeldReplies {
    private var replies: [Reply] = []
    private var next = 0
    /// Whether a reply was dropped because this queue was at its limit.
    var overflowed = false

    var count: Int { replies.count - next }
    var first: Reply? { next < replies.count ? replies[next] : nil }

    mutating func append(_ reply: Reply) { replies.append(reply) }

    mutating func removeFirst() {
        next += 1
        // Compacted now and then, so the array does not grow without end.
        if next >= 1_024 && next * 2 >= replies.count {
            replies.removeFirst(next)
            next = 0
        }
    }
}

extension StoreMetrics {
    /// Counts a record (both its images) into these totals.
    mutating func count(_ record: RecordInfo) {
        records += 1
        fullBytes += record.full.bytes
        thumbnailBytes += record.thumb.bytes
    }

    /// Adds a committed batch's changes: what it stored and refused, less
    /// what it deleted.
    mutating func add(_ change: StoreMetrics, removing removed: StoreMetrics) {
        func less(_ total: UInt64, _ taken: UInt64) -> UInt64 { total > taken ? total - taken : 0 }
        records = less(records + change.records, removed.records)
        fullBytes = less(fullBytes + change.fullBytes, removed.fullBytes)
        thumbnailBytes = less(thumbnailBytes + change.thumbnailBytes, removed.thumbnailBytes)
        stores += change.stores
        refused += change.refused
    }
}

extension StoreMessage {
    /// Whether the request changes the database (STORE, DELETE).
    var writes: Bool {
        switch self {
        case .store, .delete: true
        default: false
        }
    }
}
