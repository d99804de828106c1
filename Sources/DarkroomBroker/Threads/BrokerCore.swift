import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Dispatch

/// The broker's core: the queue's state and its database, on a thread of
/// their own. It never touches a socket: the switchboard hands it requests
/// and facts, and it hands back what to send.
///
/// It works in turns. A turn takes the inputs waiting, the workers' before
/// the clients' (at most `maxMessagesPerTurn` of the workers' and
/// `maxClientMessagesPerTurn` of the rest, and `maxTurnBytes` of inline
/// input), applies each
/// as a transition in its own savepoint, requeues held jobs whose worker
/// did not come back, dispatches, and commits once; only then does it hand
/// over the replies, JOBs and events the turn produced (group commit:
/// nothing is sent before the commit it reports). If the turn cannot
/// commit, nothing of it happened: every request in it is answered with an
/// error, the state is rebuilt from the database, and the workers' messages
/// of the turn are applied again in the next one.
final class BrokerCore {
    let config: BrokerConfiguration
    let logger: Logger
    let inbox: MailboxInbox<CoreMessage>
    let poller = Poller()
    let store: JobStore
    var state: BrokerState
    let writer: InputWriter
    let board: StatusBoard
    let backlog: Backlog
    let ids = ULIDGenerator()
    var rates: RateCounter
    /// The processes behind each worker id, to report two workers sharing one.
    var workerClaims = WorkerIDClaims()

    var send: (@Sendable (SwitchboardInstruction) -> Void)?
    /// Deliveries made before the switchboard was attached.
    var undelivered: [Delivery] = []

    /// Inputs waiting for a turn, oldest first, in two queues taken in
    /// their own order: the workers' messages, which a turn takes first,
    /// and the rest (clients' requests, inputs written to their files).
    var fromWorkers = InputQueue()
    var fromClients = InputQueue()

    /// SUBMITs whose input is being written to its file, by job id.
    var parked: [ULID: Parked] = [:]
    /// The parked job of each submit key, so a resend joins it.
    var parkedKeys: [String: ULID] = [:]

    struct Parked {
        /// The SUBMIT without its image, which the writer holds.
        var submit: Submit
        var pipeline: String
        var bytes: Int
        /// Whoever sent this SUBMIT (its first sending and any resend with the same key).
        var clients: [(client: [UInt8], requestID: UInt64)]
    }

    // The turn in progress.
    var delivery = Delivery()
    /// Replies that wait on the turn's commit (an error replaces each if it fails).
    var awaiting: [(client: [UInt8], requestID: UInt64, reply: [[UInt8]], isSubmit: Bool)] = []
    var reads: [(client: [UInt8], message: FrontendMessage)] = []
    var turnEvents: [Event] = []
    var turnRates = JobTotals()
    var turnNotes: [String] = []
    /// The turn's worker messages, to apply again if the turn is lost.
    var turnFacts: [CoreInput] = []
    var turnLost = false

    /// After a turn was lost: when writing may be tried again, and why it
    /// failed. Until then SUBMITs are refused at once with the reason. The
    /// first turn after it takes only the workers' messages (and
    /// dispatches), so that a disk that is still full cannot keep jobs from
    /// finishing: once such a turn commits, everything is taken again.
    var writeFailure: (retryAt: UInt64, reason: String)?
    /// The wait after the last lost turn (ms); doubles while turns keep
    /// being lost, and starts again once one that wrote is committed.
    var failureBackoff: UInt64 = 0

    // Stopping.
    var stopDeadline: UInt64?
    var finished = false
    var nextPrune: UInt64 = 0

    init(configuration: BrokerConfiguration, context: Context, board: StatusBoard, backlog: Backlog, logger: Logger) throws {
        config = configuration
        self.logger = logger
        self.board = board
        self.backlog = backlog
        rates = RateCounter(windowSeconds: configuration.rateWindowSeconds)
        store = try JobStore(directory: configuration.dataDirectory, maxInputBytes: configuration.maxImageBytes,
                             maxPages: configuration.maxDatabasePages, mappedInputs: board.mappedInputs)
        let (mailbox, inbox): (Mailbox<CoreMessage>, MailboxInbox<CoreMessage>)
        do {
            (mailbox, inbox) = try Mailbox<CoreMessage>.make(context: context)
        } catch {
            store.close()
            throw error
        }
        self.inbox = inbox
        poller.add(inbox)
        writer = InputWriter(files: store.inputs, threads: configuration.inputWriterThreads) { job, failure in
            mailbox.post(.inputs([.written(job: job, failure: failure)]))
        }
        let now = BrokerCore.now()
        let policy = RetryPolicy(maxAttempts: configuration.maxAttempts,
                                 backoffBase: UInt64(max(0, configuration.retryBackoffBase.milliseconds)),
                                 backoffCap: UInt64(max(0, configuration.retryBackoffCap.milliseconds)),
                                 jitter: configuration.retryJitter)
        do {
            let loaded = try store.load()
            state = BrokerState(policy: policy, reclaimWindow: UInt64(configuration.reclaimWindowMilliseconds),
                                reconnectWindow: UInt64(configuration.livenessMilliseconds), loaded: loaded, now: now)
            let removed = try store.sweepInputs()
            if !loaded.queued.isEmpty || !loaded.leased.isEmpty || removed > 0 {
                logger.info("recovered \(loaded.queued.count) queued job(s) and \(loaded.leased.count) leased job(s), held \(configuration.reclaimWindowMilliseconds) ms for their workers to reclaim; removed \(removed) stray input file(s); event seq at \(loaded.eventSeq)")
            }
        } catch {
            writer.close()
            inbox.close()
            store.close()
            throw error
        }
        publishStatus(now: now)
    }

    var mailbox: Mailbox<CoreMessage> { inbox.mailbox }

    // MARK: The loop

    func run() {
        while !finished {
            let timeout = pollTimeout()
            do {
                let result = try poller.poll(timeoutMilliseconds: timeout)
                if result.isReadable(0) { receive(try inbox.drain()) }
            } catch let error as ZMQError where error.isInterrupted {
                continue
            } catch {
                logger.error("core mailbox failed, stopping: \(error)")
                break
            }
            turn()
            if let deadline = stopDeadline, canFinish || BrokerCore.monotonicNow() >= deadline {
                break
            }
        }
        shutdown()
    }

    var canFinish: Bool {
        state.leases.isEmpty && parked.isEmpty && waitingCount == 0
    }

    var waitingCount: Int { fromWorkers.count + fromClients.count }

    func receive(_ messages: [CoreMessage]) {
        for message in messages {
            switch message {
            case .inputs(let inputs):
                for input in inputs {
                    if input.isFromWorkers { fromWorkers.append(input) } else { fromClients.append(input) }
                }
            case .attach(let send):
                self.send = send
                for delivery in undelivered { send(.deliver(delivery)) }
                undelivered.removeAll()
            case .stop(let grace):
                if stopDeadline == nil {
                    // Without sockets (their bind failed) the broker never
                    // started: its start's error says so, nothing else does.
                    if send != nil {
                        logger.info("stopping: no new jobs; waiting up to \(grace) ms for \(state.leases.count) job(s) in flight")
                    }
                    stopDeadline = BrokerCore.monotonicNow() + UInt64(max(0, grace))
                }
            case .switchboardEnded(let reason):
                logger.error("the broker's sockets stopped (\(reason)); stopping")
                stopDeadline = 0
            }
        }
    }

    /// How long to wait for inputs: until the next delayed job, deadline, held lease,
    /// retention pass or retry of a failed write is due; at most 250 ms.
    func pollTimeout() -> Int {
        let now = BrokerCore.now()
        if waitingCount > 0 && (writeFailure.map { now.monotonic >= $0.retryAt } ?? true) { return 0 }
        var wait: UInt64 = 250
        if let next = state.ready.nextDelayedTime { wait = min(wait, next > now.wall ? next - now.wall : 0) }
        if let next = state.ready.nextDeadline { wait = min(wait, next > now.wall ? next - now.wall : 0) }
        if let next = state.nextHoldDeadline { wait = min(wait, next > now.monotonic ? next - now.monotonic : 0) }
        if let failure = writeFailure { wait = min(wait, failure.retryAt > now.monotonic ? failure.retryAt - now.monotonic : 0) }
        if stopDeadline != nil { wait = min(wait, 50) }
        return Int(wait)
    }

    // MARK: Turns

    func turn() {
        let now = BrokerCore.now()
        if let failure = writeFailure {
            if now.monotonic < failure.retryAt {
                refuseSubmitsWhileFailing(failure.reason)
                answerReadsWhileFailing()
                return
            }
        }
        let recovering = writeFailure != nil
        let memo = state.memo()
        takeInputs(now: now, workersOnly: recovering)
        if !turnLost && stopDeadline == nil {
            runTimers(now: now)
            dispatch(now: now)
        } else if !turnLost {
            runTimers(now: now)
        }
        if !turnLost {
            let wrote = store.turnHasWrites
            do {
                try store.commit()
                if recovering {
                    logger.info("the queue is written again; taking submits again")
                    writeFailure = nil
                }
                if wrote { failureBackoff = 0 }
            } catch {
                abandonTurn(error.description, memo: memo, now: now)
            }
        } else {
            abandonTurn(lostReason, memo: memo, now: now)
        }
        finishTurn(now: now)
        if writeFailure == nil { pruneIfDue(now: now) }
    }

    var lostReason = ""

    /// Applies the waiting inputs, up to the turn's limits: messages,
    /// inline bytes and time, so that one turn's commit stays small and the
    /// replies it holds back are not held long.
    /// With `workersOnly`, only the workers' messages are taken; the rest
    /// wait for the next turn.
    func takeInputs(now: Moment, workersOnly: Bool = false) {
        // Workers' messages first, clients' after them, each kind in the
        // order it came: a burst of SUBMITs never holds back the DONEs
        // and CREDITs behind it, and the clients' part of a turn stays
        // short (`maxClientMessagesPerTurn`), so that the JOBs it frees
        // leave soon. The two kinds come from different sockets and were
        // never ordered between them. Each part has its own limit, so
        // neither can starve the other.
        let deadline = now.monotonic + UInt64(max(1, config.maxTurnDuration.milliseconds))
        var bytes = 0
        // Each input is taken off its queue before it is handled (no access
        // to the queue lasts across `handle`).
        func take(from queue: ReferenceWritableKeyPath<BrokerCore, InputQueue>, limit: Int) {
            var count = 0
            while !turnLost, count < limit, bytes < config.maxTurnBytes {
                if count % 64 == 63, BrokerCore.monotonicNow() >= deadline { break }
                guard let input = self[keyPath: queue].popFirst() else { break }
                count += 1
                if case let .submit(submit, _, _) = input { bytes += submit.image.count }
                handle(input, now: now)
            }
            self[keyPath: queue].compact()
        }
        take(from: \.fromWorkers, limit: workersOnly ? Int.max : max(1, config.maxMessagesPerTurn))
        if !workersOnly {
            take(from: \.fromClients, limit: max(1, config.maxClientMessagesPerTurn))
        }
    }

    func runTimers(now: Moment) {
        state.promote(now: now)
        if let expired = state.planExpiredHolds(now: now) {
            _ = apply(expired, now: now)
        }
        if !turnLost, let deadlines = state.planExpire(now: now) {
            _ = apply(deadlines, now: now)
        }
    }

    /// Hands ready jobs to workers with credit, one JOB per transition.
    func dispatch(now: Moment) {
        while !turnLost, let (transition, lease) = state.planDispatch(now: now) {
            switch apply(transition, now: now) {
            case .applied(let payload):
                guard let payload, let connection = state.workers[lease.worker]?.identity else { continue }
                let frames = JobDispatch(jobID: lease.job.id, attempt: lease.job.attempt, options: payload.options,
                                         pipeline: payload.pipeline, sourceName: lease.job.source, image: payload.image,
                                         timeLimit: payload.timeLimit == 0 ? nil : payload.timeLimit).frames()
                // With a file, the image frame is left empty and sent from it.
                delivery.backend.append(.init(connection, frames, jobInput: payload.file))
            case .unreadableInput(let id, let reason):
                logger.error("job \(id) cannot be dispatched: \(reason)")
                let failure = FailureDetail(code: "input.unreadable", reason: "the broker cannot read the job's input: \(reason)")
                if let bury = state.planBury(id, failure: failure, now: now) { _ = apply(bury, now: now) }
            case .rejected(let reason):
                logger.error("dispatch of job \(lease.job.id) failed: \(reason)")
                return
            case .lost:
                return
            }
        }
    }

    /// What became of a transition: written and applied (with the JOB
    /// payload of a lease), undone alone (the turn goes on), undone because
    /// a job's input cannot be read, or lost with the whole turn.
    enum Applied {
        case applied(JobPayload?)
        case rejected(String)
        case unreadableInput(ULID, String)
        case lost
    }

    /// Writes a transition in its own savepoint and, once written, applies
    /// it to the state and collects its events, rates and notes.
    @discardableResult
    func apply(_ transition: Transition, now: Moment) -> Applied {
        guard !transition.isEmpty else { return .applied(nil) }
        var payload: JobPayload?
        // A transition that only changes memory (a worker keeping its held
        // jobs) opens no savepoint.
        if !transition.writes.isEmpty || !transition.events.isEmpty {
            do {
                payload = try store.persist(transition)
            } catch {
                return failed(error)
            }
        }
        state.apply(transition, now: now)
        turnEvents += transition.events
        turnRates.add(transition)
        turnNotes += transition.notes
        return .applied(payload)
    }

    private func failed(_ error: JobStoreError) -> Applied {
        switch error {
        case .rejected(let reason):
            return .rejected(reason)
        case .unreadableInput(let id, let reason):
            return .unreadableInput(id, reason)
        case .turnLost(let reason):
            turnLost = true
            lostReason = reason
            return .lost
        }
    }

    /// The turn could not commit: answer its requests with the reason,
    /// rebuild the state from the database as it was before the turn, put
    /// the workers' messages back to be applied again, and wait a little
    /// before writing again.
    func abandonTurn(_ reason: String, memo: BrokerState.Memo, now: Moment) {
        store.abandonTurn()
        logger.error("a turn could not be written and is rolled back: \(reason)")
        let refusal = "the broker could not write to its queue: \(reason); try again later"
        for reply in awaiting {
            let frames = reply.isSubmit
                ? Rejected(requestID: reply.requestID, code: .internal, reason: Wire.line(refusal)).frames()
                : ErrorReply(requestID: reply.requestID, code: .internal, reason: Wire.line(refusal)).frames()
            delivery.frontend.append((reply.client, frames))
        }
        awaiting.removeAll()
        delivery.backend.removeAll()
        turnEvents.removeAll()
        turnRates = JobTotals()
        turnNotes.removeAll()
        do {
            let loaded = try store.load()
            state.restore(memo, loaded: loaded, now: now)
        } catch {
            logger.error("cannot read the queue back after a failed turn, stopping: \(error)")
            stopDeadline = 0
        }
        // The workers' messages of the lost turn go first in the next one.
        let facts = turnFacts
        turnFacts.removeAll()
        fromWorkers.prepend(facts)
        failureBackoff = min(5_000, max(100, failureBackoff * 2))
        writeFailure = (now.monotonic + failureBackoff, reason)
        turnLost = false
    }

    /// While writes are failing, SUBMITs are refused at once with the reason.
    func refuseSubmitsWhileFailing(_ reason: String) {
        var kept = InputQueue()
        while let input = fromClients.popFirst() {
            switch input {
            case let .submit(submit, _, client):
                backlog.remove(submit.image.count)
                let refusal = "the broker cannot write to its queue: \(reason); try again later"
                delivery.frontend.append((client, Rejected(requestID: submit.requestID, code: .internal, reason: Wire.line(refusal)).frames()))
            case let .read(message, client):
                reads.append((client, message))
            default:
                kept.append(input)
            }
        }
        fromClients = kept
    }

    func answerReadsWhileFailing() {
        let now = BrokerCore.now()
        finishTurn(now: now)
    }

    /// Publishes the status, hands over what the turn sends, answers reads.
    func finishTurn(now: Moment) {
        if !awaiting.isEmpty {
            for reply in awaiting { delivery.frontend.append((reply.client, reply.reply)) }
            awaiting.removeAll(keepingCapacity: true)
        }
        rates.add(turnRates, now: now.wall)
        turnRates = JobTotals()
        for note in turnNotes { logger.info(note) }
        turnNotes.removeAll(keepingCapacity: true)
        turnFacts.removeAll(keepingCapacity: true)
        delivery.events = turnEvents
        turnEvents.removeAll(keepingCapacity: true)
        for (client, message) in reads {
            answer(message, client: client)
        }
        reads.removeAll(keepingCapacity: true)
        publishStatus(now: now)
        guard !delivery.isEmpty else { return }
        let out = delivery
        delivery = Delivery()
        if let send {
            send(.deliver(out))
        } else {
            undelivered.append(out)
        }
    }

    func publishStatus(now: Moment) {
        var connections: [String: [UInt8]] = [:]
        for (id, worker) in state.workers { connections[id] = worker.identity }
        board.publish(StatusBoard.Snapshot(
            status: state.status(now: now, limit: config.maxQueueDepth, rates: rates.rates(now: now.wall)),
            connections: connections, totals: rates.totals))
    }

    // MARK: Retention

    func pruneIfDue(now: Moment) {
        guard let retention = config.retention, stopDeadline == nil, now.monotonic >= nextPrune else { return }
        let interval = UInt64(max(1, config.pruneInterval.milliseconds))
        let age = UInt64(max(0, retention.milliseconds))
        guard now.wall > age else {
            nextPrune = now.monotonic + interval
            return
        }
        let batch = max(1, config.pruneBatch)
        do {
            let (events, keys) = try store.prune(before: now.wall - age, limit: batch)
            if events > 0 || keys > 0 {
                let oldest = (try? store.oldestEventSeq()).flatMap { $0 }.map(String.init) ?? "none"
                logger.info("pruned \(events) event(s) and \(keys) submit key(s) older than \(retention); oldest event kept: seq \(oldest)")
            }
            nextPrune = now.monotonic + (events >= batch || keys >= batch ? 1_000 : interval)
        } catch {
            logger.error("pruning past the retention failed: \(error)")
            nextPrune = now.monotonic + interval
        }
    }

    // MARK: Stopping

    func shutdown() {
        // Inputs being written are finished and accepted: their producers
        // were promised nothing yet, but the bytes are on disk.
        writer.close()
        if let messages = try? inbox.drain() { receive(messages) }
        stopDeadline = stopDeadline ?? 0
        // Every input waiting gets its answer (SUBMITs are refused, written
        // inputs accepted); a turn takes only so many, so as many turns as
        // that needs, while they make progress (a queue that cannot be
        // written leaves the workers' messages waiting).
        turn()
        var left = Int.max
        while waitingCount > 0, waitingCount < left {
            left = waitingCount
            turn()
        }
        let connections = state.workers.values.map(\.identity)
        var last = Delivery()
        for connection in connections { last.backend.append(.init(connection, BackendMessage.disconnect.frames())) }
        if !last.isEmpty { send?(.deliver(last)) }
        send?(.finish)
        let inFlight = state.leases.count + state.held.count
        if inFlight > 0 {
            logger.info("\(inFlight) job(s) still in flight; their workers can reclaim them when the broker starts again")
        }
        inbox.close()
        store.close()
        if send != nil { logger.info("stopped; event seq at \(store.committedSeq)") }
    }

    // MARK: Clocks

    /// Both clocks, each read once.
    static func now() -> Moment {
        Moment(wall: ULIDGenerator.systemMilliseconds(), monotonic: monotonicNow())
    }

    static func monotonicNow() -> UInt64 { DispatchTime.now().uptimeNanoseconds / 1_000_000 }
}

extension BrokerCore: ServiceLoop {
    var boundEndpoints: [String: String] { [:] }
}
