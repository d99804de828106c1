import DarkroomCore
import DarkroomPipeline
import DarkroomProtocol
import DarkroomZMQ
import Dispatch

/// A job leased to a worker: what DONE and FAIL are checked against.
struct Lease {
    var job: JobHandle
    var attempt: UInt32
    var attemptBase: UInt32
    var worker: String
    /// The job's external input file (nil: the input is inline).
    var inputFile: String?
    /// The job's rowid in `jobs`.
    var rowID: Int64
}

/// A connected worker, known from its READY. A class so that updating its
/// job set in `workers` never copies the set.
final class WorkerState {
    var id: String
    var identity: [UInt8]
    var host: String
    var pid: UInt32
    var slots: UInt32
    /// JOBs the broker may still send: CREDIT adds, each JOB subtracts one.
    var credit: Int = 0
    /// Jobs leased to this worker.
    var jobs: Set<ULID> = []
    /// Monotonic ms of the last message from / to the worker.
    var lastReceived: UInt64
    var lastSent: UInt64
    /// Unix ms of the last message from the worker (for STATUS).
    var lastHeard: UInt64

    init(id: String, identity: [UInt8], host: String, pid: UInt32, slots: UInt32, lastReceived: UInt64, lastSent: UInt64, lastHeard: UInt64) {
        self.id = id
        self.identity = identity
        self.host = host
        self.pid = pid
        self.slots = slots
        self.lastReceived = lastReceived
        self.lastSent = lastSent
        self.lastHeard = lastHeard
    }
}

/// The broker's service loop. Lives on the service thread only: it owns the
/// sockets, the mailbox inbox and the queue's SQLite connection.
final class BrokerLoop {
    let config: BrokerConfiguration
    let logger: Logger
    let frontend: Socket
    let backend: Socket
    let events: Socket
    let inbox: MailboxInbox<BrokerCommand>
    var mailbox: Mailbox<BrokerCommand> { inbox.mailbox }
    let boundEndpoints: [String: String]
    let queue: JobQueue
    let poller = Poller()
    let frontendIndex: Int
    let backendIndex: Int
    let eventsIndex: Int
    let inboxIndex: Int
    /// What the events socket's subscribers asked for, as the XPUB socket
    /// reports it (each prefix once, while at least one subscriber has it).
    var subscriptions = EventSubscriptions()

    var ready = ReadyQueue()
    var leases: [ULID: Lease] = [:]
    var workers: [String: WorkerState] = [:]
    var workerByIdentity: [[UInt8]: String] = [:]
    var deadCount = 0
    let ids = ULIDGenerator()
    var rates: RateCounter
    /// Monotonic ms at which a stopping broker exits even with jobs in flight.
    var stopDeadline: UInt64?
    var dispatchRotation = 0
    /// When the next retention pass is due (monotonic ms; 0 = at the first turn).
    var nextPrune: UInt64 = 0
    /// The pipelines submitted lately, parsed once each.
    let pipelines = PipelineCache()


    // What one turn will send once its transaction commits.
    var pendingAccepted: [(identity: [UInt8], reply: Accepted)] = []
    var pendingJobs: [(worker: String, job: JobDispatch)] = []
    var pendingReplies: [(identity: [UInt8], requestID: UInt64, frames: [[UInt8]])] = []
    var pendingReads: [(identity: [UInt8], message: FrontendMessage)] = []
    var pendingEvents: [Event] = []
    var pendingFileRemovals: [String] = []
    var pendingRates: (accepted: Int, stored: Int, failed: Int) = (0, 0, 0)

    init(configuration: BrokerConfiguration, context: Context, logger: Logger) throws {
        config = configuration
        self.logger = logger
        rates = RateCounter(windowSeconds: configuration.rateWindowSeconds)
        queue = try JobQueue(directory: configuration.dataDirectory, blobThreshold: configuration.inputBlobThreshold)
        var opened: [Socket] = []
        do {
            frontend = try context.socket(.router)
            opened.append(frontend)
            backend = try context.socket(.router)
            opened.append(backend)
            // XPUB rather than PUB: the same to subscribers, and it tells
            // the broker which forms (EVENT, EVENTS) anyone subscribed to.
            events = try context.socket(.xpub)
            opened.append(events)
            for socket in opened {
                try socket.setLinger(milliseconds: 100)
                try socket.setMaxMessageSize(Wire.maxMessageSize)
            }
            try frontend.setSendHighWaterMark(100_000)
            try frontend.setReceiveHighWaterMark(100_000)
            try backend.setSendHighWaterMark(10_000)
            try backend.setRouterHandover(true)
            try events.setSendHighWaterMark(100_000)
            if let curve = configuration.curve {
                try frontend.setCurveServer(curve, zapDomain: ServerCurve.Domain.frontend)
                try backend.setCurveServer(curve, zapDomain: ServerCurve.Domain.backend)
                try events.setCurveServer(curve, zapDomain: ServerCurve.Domain.events)
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
            inbox = try Mailbox<BrokerCommand>.make(context: context).inbox
        } catch {
            for socket in opened { socket.close() }
            queue.close()
            throw error
        }
        frontendIndex = poller.add(frontend)
        backendIndex = poller.add(backend)
        eventsIndex = poller.add(events)
        inboxIndex = poller.add(inbox)
        do {
            try recover()
        } catch {
            frontend.close()
            backend.close()
            events.close()
            inbox.close()
            queue.close()
            throw error
        }
        logger.info("listening: frontend \(boundEndpoints["frontend"] ?? "?"), backend \(boundEndpoints["backend"] ?? "?"), events \(boundEndpoints["events"] ?? "?"); data \(config.dataDirectory)")
    }

    // MARK: Start-up recovery

    /// Rebuilds the ready queue from the database and requeues every job a
    /// previous run left leased (its worker's connection died with that run).
    private func recover() throws {
        let now = wallNow()
        let (queued, leased) = try queue.unfinished()
        for (job, notBefore) in queued {
            ready.add(job, notBefore: notBefore, now: now)
        }
        for lease in leased {
            let failure = FailureDetail(code: FailureDetail.Code.workerLost,
                                        reason: "the broker restarted while attempt \(lease.attempt) was running")
            try retryOrBury(lease, failure: failure, retryable: true, immediate: true, now: now)
        }
        try queue.commit()
        pendingEvents.removeAll()  // Nobody can be subscribed yet; REPLAY serves them.
        pendingRates = (0, 0, 0)
        deadCount = try queue.deadCount()
        let removed = queue.inputs.sweep(keeping: try queue.referencedInputFiles())
        if !queued.isEmpty || !leased.isEmpty || removed > 0 {
            logger.info("recovered \(queued.count) queued job(s), requeued \(leased.count) leased job(s), removed \(removed) stray input file(s); event seq at \(queue.committedSeq)")
        }
    }

    // MARK: The loop

    func run() {
        while true {
            let timeout = pollTimeout()
            let result: PollResult
            do {
                result = try poller.poll(timeoutMilliseconds: timeout)
            } catch let error as ZMQError where error.isInterrupted {
                continue
            } catch {
                logger.error("poll failed, stopping: \(error)")
                break
            }
            if result.isReadable(inboxIndex) { handleCommands() }
            if result.isReadable(eventsIndex) { readSubscriptions() }
            readMessages()
            let now = wallNow()
            do {
                try checkWorkers(now: now)
                ready.promote(now: now)
                if stopDeadline == nil { try dispatch(now: now) }
            } catch {
                logger.error("queue update failed: \(error)")
            }
            finishTurn()
            sendHeartbeats()
            pruneIfDue()
            if let deadline = stopDeadline, leases.isEmpty || monotonicNow() >= deadline {
                break
            }
        }
        shutdown()
    }

    // MARK: Retention

    /// Deletes a batch of events and submit keys past the retention, when a
    /// pass is due, in its own transaction between two turns.
    private func pruneIfDue() {
        guard let retention = config.retention, stopDeadline == nil else { return }
        let now = monotonicNow()
        guard now >= nextPrune else { return }
        let interval = UInt64(max(1, config.pruneInterval.milliseconds))
        let wall = wallNow()
        let age = UInt64(max(0, retention.milliseconds))
        guard wall > age else {
            nextPrune = now + interval
            return
        }
        let batch = max(1, config.pruneBatch)
        do {
            let (events, keys) = try queue.prune(before: wall - age, limit: batch)
            try queue.commit()
            if events > 0 || keys > 0 {
                let oldest = (try? queue.oldestEventSeq()).flatMap { $0 }.map(String.init) ?? "none"
                logger.info("pruned \(events) event(s) and \(keys) submit key(s) older than \(retention); oldest event kept: seq \(oldest)")
            }
            nextPrune = now + (events >= batch || keys >= batch ? 1_000 : interval)
        } catch {
            queue.rollback()
            logger.error("pruning past the retention failed: \(error)")
            nextPrune = now + interval
        }
    }

    private func pollTimeout() -> Int {
        var timeout = Int(min(250, max(1, config.heartbeatIntervalMilliseconds / 2)))
        if let next = ready.nextDelayedTime {
            let wait = next > wallNow() ? Int(clamping: next - wallNow()) : 0
            timeout = min(timeout, wait)
        }
        if stopDeadline != nil { timeout = min(timeout, 50) }
        return timeout
    }

    private func handleCommands() {
        let commands: [BrokerCommand]
        do { commands = try inbox.drain() } catch {
            logger.error("mailbox failed: \(error)")
            stopDeadline = monotonicNow()
            return
        }
        for command in commands {
            switch command {
            case .stop(let grace):
                if stopDeadline == nil {
                    logger.info("stopping: no new jobs; waiting up to \(grace) ms for \(leases.count) job(s) in flight")
                    stopDeadline = monotonicNow() + UInt64(max(0, grace))
                }
            }
        }
    }

    /// Reads every waiting message from both ROUTERs, alternating, up to the turn's cap.
    private func readMessages() {
        var budget = max(1, config.maxMessagesPerTurn)
        var frontendOpen = true
        var backendOpen = true
        while budget > 0 && (frontendOpen || backendOpen) {
            if frontendOpen {
                if let (frames, role) = receive(frontend) {
                    handleFrontend(frames, role: role)
                    budget -= 1
                } else {
                    frontendOpen = false
                }
            }
            if backendOpen && budget > 0 {
                if let (frames, _) = receive(backend) {
                    handleBackend(frames)
                    budget -= 1
                } else {
                    backendOpen = false
                }
            }
        }
    }

    /// The next waiting message and its client's role (the ZAP user id;
    /// nil without keys), or nil when none is waiting.
    private func receive(_ socket: Socket) -> (frames: [[UInt8]], role: String?)? {
        do {
            return try socket.receiveWithUserID(dontWait: true).map { (frames: $0.frames, role: $0.userID) }
        } catch {
            logger.warn("receive failed: \(error)")
            return nil
        }
    }

    // MARK: Commit and send

    /// Commits the turn's writes, then sends everything that waited on them.
    private func finishTurn() {
        if queue.inTransaction {
            do {
                try queue.commit()
            } catch {
                logger.error("commit failed, the turn's changes are rolled back: \(error)")
                queue.rollback()
                abandonTurn(reason: "the broker could not commit: \(error)")
                return
            }
        }
        for (identity, reply) in pendingAccepted {
            sendFrontend(identity, reply.frames())
        }
        for (worker, job) in pendingJobs {
            sendToWorker(worker, job.frames())
        }
        publishEvents()
        for (identity, _, frames) in pendingReplies {
            sendFrontend(identity, frames)
        }
        for file in pendingFileRemovals {
            queue.removeInputIfUnused(file)
        }
        rates.add(accepted: pendingRates.accepted, stored: pendingRates.stored, failed: pendingRates.failed, now: wallNow())
        let reads = pendingReads
        clearPending()
        for (identity, message) in reads {
            answerRead(identity, message)
        }
    }

    /// After a failed commit: nothing of the turn happened. Tell the
    /// producers, give the workers their credit back, and reload the
    /// in-memory queue from the database.
    private func abandonTurn(reason: String) {
        for (identity, reply) in pendingAccepted {
            sendFrontend(identity, Rejected(requestID: reply.requestID, code: .internal, reason: reason).frames())
        }
        for (identity, requestID, _) in pendingReplies {
            sendFrontend(identity, ErrorReply(requestID: requestID, code: .internal, reason: reason).frames())
        }
        for (identity, message) in pendingReads {
            if let requestID = message.requestIDForError {
                sendFrontend(identity, ErrorReply(requestID: requestID, code: .internal, reason: reason).frames())
            }
        }
        clearPending()
        do {
            try resync()
        } catch {
            logger.error("cannot reload the queue after a failed commit, stopping: \(error)")
            stopDeadline = monotonicNow()
        }
    }

    private func clearPending() {
        pendingAccepted.removeAll(keepingCapacity: true)
        pendingJobs.removeAll(keepingCapacity: true)
        pendingReplies.removeAll(keepingCapacity: true)
        pendingReads.removeAll(keepingCapacity: true)
        pendingEvents.removeAll(keepingCapacity: true)
        pendingFileRemovals.removeAll(keepingCapacity: true)
        pendingRates = (0, 0, 0)
    }

    /// Makes the in-memory queue and leases match the database again.
    private func resync() throws {
        let now = wallNow()
        ready = ReadyQueue()
        let (queued, leased) = try queue.unfinished()
        for (job, notBefore) in queued { ready.add(job, notBefore: notBefore, now: now) }
        let leasedIDs = Set(leased.map(\.job.id))
        for (id, lease) in leases where !leasedIDs.contains(id) {
            leases[id] = nil
            if let worker = workers[lease.worker] {
                worker.jobs.remove(id)
                worker.credit += 1  // Its JOB was never sent.
            }
        }
        var orphans: [Lease] = []
        for lease in leased where leases[lease.job.id] == nil {
            if let worker = workers[lease.worker] {
                worker.jobs.insert(lease.job.id)
                leases[lease.job.id] = lease
            } else {
                orphans.append(lease)
            }
        }
        for lease in orphans {
            let failure = FailureDetail(code: FailureDetail.Code.workerLost, reason: "worker \(lease.worker) is no longer connected")
            try retryOrBury(lease, failure: failure, retryable: true, immediate: true, now: now)
        }
        deadCount = try queue.deadCount()
    }

    private func sendFrontend(_ identity: [UInt8], _ frames: [[UInt8]]) {
        do {
            try frontend.send([identity] + frames, dontWait: true)
        } catch {
            logger.warn("reply to client \(peerName(identity)) not sent: \(error)")
        }
    }

    private func sendToWorker(_ workerID: String, _ frames: [[UInt8]]) {
        guard let worker = workers[workerID] else { return }
        do {
            try backend.send([worker.identity] + frames, dontWait: true)
        } catch {
            logger.warn("message to worker \(workerID) not sent: \(error)")
        }
        worker.lastSent = monotonicNow()
    }

    private func sendHeartbeats() {
        let now = monotonicNow()
        let interval = UInt64(config.heartbeatIntervalMilliseconds)
        for (id, worker) in workers where now &- worker.lastSent >= interval {
            sendToWorker(id, BackendMessage.heartbeat.frames())
        }
    }

    private func shutdown() {
        do {
            try queue.commit()
        } catch {
            logger.error("final commit failed: \(error)")
            queue.rollback()
        }
        for id in workers.keys {
            sendToWorker(id, BackendMessage.disconnect.frames())
        }
        if !leases.isEmpty {
            logger.info("\(leases.count) job(s) still in flight will be requeued on the next start")
        }
        frontend.close()
        backend.close()
        events.close()
        inbox.close()
        queue.close()
        logger.info("stopped; event seq at \(queue.committedSeq)")
    }

    // MARK: Events

    /// Publishes the turn's committed events in each form someone
    /// subscribed to: one EVENT per event under "ev", and EVENTS of up to
    /// `EventBatch.maxEvents` under "eb".
    private func publishEvents() {
        guard !pendingEvents.isEmpty else { return }
        if subscriptions.wants(Wire.eventTopic) {
            for event in pendingEvents {
                publish(event.publishedFrames(), first: event.seq, last: event.seq)
            }
        }
        if subscriptions.wants(Wire.eventBatchTopic) {
            var start = 0
            while start < pendingEvents.count {
                let end = min(pendingEvents.count, start + EventBatch.maxEvents)
                let batch = EventBatch(events: Array(pendingEvents[start..<end]))
                publish(batch.publishedFrames(), first: pendingEvents[start].seq, last: pendingEvents[end - 1].seq)
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

    /// Reads the subscribe and unsubscribe messages the XPUB socket passes up.
    private func readSubscriptions() {
        for _ in 0..<1_000 {
            let message: [[UInt8]]?
            do { message = try events.receive(dontWait: true) } catch {
                logger.warn("events socket: \(error)")
                return
            }
            guard let frame = message?.first else { return }
            subscriptions.apply(frame)
        }
    }

    /// Appends an event to the open transaction; it is published after the commit.
    @discardableResult
    func record(_ kind: EventKind, _ job: JobHandle, attempt: UInt32, now: UInt64, worker: String = "",
                record: ULID? = nil, failure: FailureDetail? = nil) throws -> Event {
        let event = try queue.append(kind, job: job, attempt: attempt, time: now, worker: worker, record: record, failure: failure)
        pendingEvents.append(event)
        return event
    }

    // MARK: Clocks

    func wallNow() -> UInt64 { ULIDGenerator.systemMilliseconds() }
    func monotonicNow() -> UInt64 { DispatchTime.now().uptimeNanoseconds / 1_000_000 }

    func peerName(_ identity: [UInt8]) -> String {
        "0x" + identity.prefix(8).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}

extension FrontendMessage {
    /// The request id to put in an ERROR or REJECTED answering this message.
    var requestIDForError: UInt64? {
        switch self {
        case .submit(let m): m.requestID
        case .status(let m): m.requestID
        case .replay(let m): m.requestID
        case .deadList(let m): m.requestID
        case .deadRetry(let m): m.requestID
        case .deadDiscard(let m): m.requestID
        case .ping(let m): m.requestID
        default: nil
        }
    }
}

/// Jobs accepted, stored and failed per second over a sliding window of whole seconds.
struct RateCounter {
    let windowSeconds: Int
    private var buckets: [(second: UInt64, accepted: Int, stored: Int, failed: Int)]

    init(windowSeconds: Int) {
        self.windowSeconds = max(1, windowSeconds)
        buckets = Array(repeating: (0, 0, 0, 0), count: self.windowSeconds)
    }

    mutating func add(accepted: Int, stored: Int, failed: Int, now: UInt64) {
        guard accepted + stored + failed > 0 else { return }
        let second = now / 1_000
        let slot = Int(second % UInt64(windowSeconds))
        if buckets[slot].second != second { buckets[slot] = (second, 0, 0, 0) }
        buckets[slot].accepted += accepted
        buckets[slot].stored += stored
        buckets[slot].failed += failed
    }

    func rates(now: UInt64) -> Rates {
        let second = now / 1_000
        var totals = (0, 0, 0)
        for bucket in buckets where bucket.second + UInt64(windowSeconds) > second && bucket.second <= second {
            totals.0 += bucket.accepted
            totals.1 += bucket.stored
            totals.2 += bucket.failed
        }
        let window = Double(windowSeconds)
        return Rates(windowSeconds: UInt32(windowSeconds), accepted: Double(totals.0) / window,
                     stored: Double(totals.1) / window, failed: Double(totals.2) / window)
    }
}

/// The topic prefixes subscribed to on the events socket. An XPUB socket
/// passes up one message per change: byte 1 then the prefix when the first
/// subscriber takes it, byte 0 then the prefix when the last one drops it
/// (or disconnects).
struct EventSubscriptions {
    private(set) var prefixes: Set<[UInt8]> = []

    mutating func apply(_ message: [UInt8]) {
        guard let kind = message.first else { return }
        let prefix = Array(message.dropFirst())
        switch kind {
        case 1: prefixes.insert(prefix)
        case 0: prefixes.remove(prefix)
        default: break
        }
    }

    /// Whether some subscriber receives messages published under `topic`.
    func wants(_ topic: [UInt8]) -> Bool {
        prefixes.contains { topic.starts(with: $0) }
    }
}
