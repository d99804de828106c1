import DarkroomCore
import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import DarkroomZMQ
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What other threads post to the service thread.
enum WorkerEvent: Sendable {
    /// A processing thread finished run `run`.
    case finished(run: UInt64, outcome: JobOutcome, stages: StageDurations, elapsed: Duration)
    /// Stop taking jobs; hand back what is not finished after `grace`.
    case stop(grace: Duration)
}

/// The service thread of a worker. It owns the DEALER to the broker backend,
/// the DEALER to the storage node and the mailbox inbox, and never runs image
/// work itself: jobs go to the `JobPool`, results come back through the mailbox.
///
/// A slot is busy from the JOB until its DONE or FAIL is sent (processing, then
/// storing). At the end of each loop turn the worker tops its credit up to
/// the target of its `CreditPlanner` (jobs held plus credit outstanding),
/// which adapts to the measured job time and round trips and never exceeds
/// `slots`, so the broker never has more jobs outstanding here than that.
final class WorkerLoop {
    let configuration: WorkerConfiguration
    let context: Context
    /// The context of the broker connection. Over TCP or IPC it is the
    /// worker's own, terminated as the loop ends: `zmq_close` only hands
    /// what is still queued (the last FAIL `worker.shutdown`s and the
    /// DISCONNECT) to the context's I/O thread, and only terminating the
    /// context waits until it has been written to the connection or the
    /// linger has run out. The shared context cannot be terminated here
    /// (the host's other services use it), and whoever drops the last
    /// reference to it is often another thread, after the process has
    /// already called `exit`: `darkroom worker` then lost both messages in
    /// about one stop in five, and its broker waited out the heartbeat
    /// timeout. Over inproc (the workers of `darkroom up`) a message is in
    /// the broker's queue once sent, and inproc endpoints exist only within
    /// one context, so the shared one is used.
    private let backendContext: Context
    let logger: Logger
    let inbox: MailboxInbox<WorkerEvent>
    private let store: Socket
    private var backend: Socket?
    /// The handshake events of the two connections: a server that refuses
    /// this worker's key says so only there (see `SocketMonitor`).
    private let storeMonitor: SocketMonitor
    private var storeHandshake: HandshakeGuard
    private var backendMonitor: SocketMonitor?
    private var backendHandshake: HandshakeGuard
    /// The storage node refused this worker's key: no credit is granted
    /// (a job could not be stored) until it accepts it.
    private var storeRefusal: HandshakeRefusal?
    /// The first connection to the storage node has finished its handshake
    /// (at once for an in-process one, which has none). Until then the
    /// worker grants no credit: it takes jobs only once it can store them,
    /// so a worker that starts before its storage node, or that the node
    /// refuses, leaves the jobs to others.
    private var storeReached: Bool
    /// Trouble with the broker connection (silence, a refused key, sends
    /// that fail) and with the storage node, logged when it starts and ends.
    private var brokerTrouble = ConnectionTrouble()
    private var sendTrouble = ConnectionTrouble()
    /// The wait before trying again a broker that refused this worker's
    /// key: a refusal does not go away in a second, so it grows to a minute.
    private var refusalBackoff: Duration = WorkerLoop.firstRefusalBackoff
    static let firstRefusalBackoff: Duration = .seconds(5)
    static let longestRefusalBackoff: Duration = .seconds(60)
    private var poller = Poller()
    private var pool: JobPool
    private let clock = ContinuousClock()
    private let status: StatusBoard
    private var snapshot: WorkerStatus

    // The broker connection.
    private var lastHeard: ContinuousClock.Instant
    private var lastSent: ContinuousClock.Instant
    private var reconnectAt: ContinuousClock.Instant?
    private var backoff: Duration
    private var credit = OutstandingCredit()
    /// The PING on the broker connection that waits for its PONG, and when
    /// the next is due: PONG times are the plainest broker round trips.
    private var pendingPing: (requestID: UInt64, sent: ContinuousClock.Instant)?
    private var nextPing: ContinuousClock.Instant
    private var nextPingID: UInt64 = 1
    /// The broker answered a PING with ERROR (one from before PING was
    /// valid on the backend): no more PINGs on this connection.
    private var pingRefused = false
    static let pingInterval: Duration = .seconds(1)
    /// DONE and FAIL to send after the next READY, listed in its HOLDING:
    /// those produced while no broker connection was open, and those still
    /// in doubt when the last one was dropped.
    private var unsentReports: [UnsentReport] = []
    /// DONE and FAIL sent lately, with when they were sent. A report has
    /// taken effect only once the broker's queue has committed it, and
    /// nothing the broker sends says when that was: its heartbeats come from
    /// a thread that never waits for the disk. A broker killed after
    /// reading a report and before committing it has lost it, and a DEALER
    /// that queued a report while its connection was down discards it when
    /// closed. So a dropped connection hands the reports of the last
    /// `reportRetention` on to the next one, which lists them in HOLDING
    /// and sends them again. A repeat is harmless: the broker ignores a
    /// DONE for a finished job and a FAIL for an attempt that is not current.
    private var reportsInDoubt: [(sent: ContinuousClock.Instant, report: UnsentReport)] = []
    /// How long a sent report stays in doubt while the broker is heard
    /// from: well beyond the time a broker takes to commit what it read,
    /// even on a slow disk.
    static let reportRetention: Duration = .seconds(10)
    /// The longest stretch, on any connection so far, in which nothing came
    /// from the broker (see `WorkerStatus.longestBrokerSilence`).
    private var longestSilence: Duration = .zero

    // Credit.
    /// What decides how much credit to grant, from what was measured.
    private var planner: CreditPlanner
    /// The moment the planner's sample times count from.
    private let origin: ContinuousClock.Instant
    /// When the running jobs are next held against the time limit.
    private var nextLimitCheck: ContinuousClock.Instant
    /// The bytes the held jobs take (the sum of their `RunningJob.bytes`).
    private var heldBytes = 0
    /// The credit target last logged, and when.
    private var loggedTarget = 0
    private var targetLoggedAt: ContinuousClock.Instant?

    // Jobs in their slots.
    private var jobs: [UInt64: RunningJob] = [:]
    private var nextRun: UInt64 = 1
    private var storeRequests: [UInt64: UInt64] = [:]
    private var nextRequestID: UInt64 = 1
    /// No STORE deadline or resend is due before this (nil: none is
    /// waiting). A lower bound, kept without visiting every job: it may be
    /// early (the job it came from has finished), never late, and the
    /// jobs are only scanned once it has passed.
    private var nextStoreTimer: ContinuousClock.Instant?

    // Stopping.
    private var stopDeadline: ContinuousClock.Instant?
    private var stopGrace: Duration = .zero
    private var finished = false

    /// `configuration.slots`, read once: it asks the system for the processor
    /// count, which reads cgroup files, and the loop needs it for every job.
    private let slots: Int
    private var stopping: Bool { stopDeadline != nil }

    struct RunningJob {
        var jobID: ULID
        var attempt: UInt32
        var sourceName: String
        var pipeline: String
        var received: ContinuousClock.Instant
        var storing: StoreAttempt?
        /// The size of its input, counted against the input budget until
        /// the job's DONE or FAIL.
        var bytes: Int
        /// Set by CANCEL-JOB or the time limit: the processing thread stops
        /// at its next check.
        var cancellation = CancellationFlag()
        /// Marked when a processing thread takes the job up.
        var start: RunStart
        /// The longest it may run once started; nil for no limit.
        var limit: JobTimeLimit?
        /// When the time limit stopped it; its FAIL goes when the thread
        /// comes back with the stage it was in, or after `timeoutStopGrace`.
        var timedOut: ContinuousClock.Instant?
    }

    struct StoreAttempt {
        var requestID: UInt64
        /// When the first STORE was sent (queued, if the node was not reached yet).
        var started: ContinuousClock.Instant
        var frames: [[UInt8]]
        var deadline: ContinuousClock.Instant
        var nextSend: ContinuousClock.Instant
        var sends = 0
        /// When the first send left: STORED after one send is a sample of
        /// the storage node's round trip.
        var firstSent: ContinuousClock.Instant?
    }

    enum Report {
        case done(recordID: ULID)
        case fail(FailureDetail, retryable: Bool)
    }

    /// A DONE or FAIL waiting for a broker connection, with the job and
    /// attempt it answers, which HOLDING lists before it is sent.
    struct UnsentReport {
        var jobID: ULID
        var attempt: UInt32
        var frames: [[UInt8]]
    }

    /// Creates the sockets and connects them. Call on the thread that will run
    /// the loop: the sockets and the inbox belong to it.
    init(configuration: WorkerConfiguration, context: Context, logger: Logger, status: StatusBoard) throws {
        self.configuration = configuration
        self.status = status
        self.context = context
        self.logger = logger
        slots = configuration.slots
        let (mailbox, inbox) = try Mailbox<WorkerEvent>.make(context: context)
        self.inbox = inbox
        store = try context.socket(.dealer)
        try store.setLinger(milliseconds: 0)
        try store.setMaxMessageSize(Wire.maxMessageSize)
        // Every held job may have its STORE queued at once; past the mark a
        // send would wait for the retry timer.
        try store.setSendHighWaterMark(Wire.Limit.queuedPerPeer)
        try store.setReconnectInterval(Int(configuration.reconnectInitial.milliseconds), maximum: Int(configuration.reconnectMaximum.milliseconds))
        if let curve = configuration.curve {
            try store.setCurveClient(serverKey: curve.storePublicKey, keyPair: curve.keyPair)
        }
        // A STORE goes to the socket only while the monitor shows a live
        // connection (`storeHandshake.linked`), so "store down" is a send
        // put off and retried, not a message parked in the socket. Not
        // `ZMQ_IMMEDIATE`: see `HandshakeGuard.linked`.
        storeHandshake = HandshakeGuard(usesCurve: configuration.curve != nil, endpoint: configuration.storeEndpoint)
        // Reached from the start only over inproc, which has no handshake events.
        storeReached = storeHandshake.linked
        backendHandshake = HandshakeGuard(usesCurve: configuration.curve != nil, endpoint: configuration.backendEndpoint)
        // Before connecting, so that the first handshake is seen.
        storeMonitor = try SocketMonitor(watching: store)
        try store.connect(configuration.storeEndpoint)
        if configuration.backendEndpoint.hasPrefix("inproc://") {
            backendContext = context
        } else {
            backendContext = try Context(ioThreads: 1)
        }
        let now = clock.now
        lastHeard = now
        lastSent = now
        nextPing = now
        origin = now
        nextLimitCheck = now
        backoff = configuration.reconnectInitial
        planner = CreditPlanner(CreditPlanner.Limits(threads: configuration.concurrency, slots: slots,
                                                     inputBudget: configuration.effectiveInputBudget))
        snapshot = WorkerStatus(slots: slots)
        snapshot.threads = planner.limits.threads
        snapshot.inputBudget = planner.limits.inputBudget
        snapshot.creditTarget = planner.target(at: .zero)
        snapshot.peakCreditTarget = snapshot.creditTarget
        pool = JobPool(threads: configuration.concurrency, name: "darkroom-job") { run, outcome, stages, elapsed in
            mailbox.post(.finished(run: run, outcome: outcome, stages: stages, elapsed: elapsed))
        }
        do {
            try openBackend()
        } catch {
            pool.shutdown()
            store.close()
            inbox.close()
            backend?.close()
            if backendContext !== context { backendContext.close() }
            throw error
        }
    }

    // MARK: The loop

    func run() {
        logger.info("worker \(configuration.workerID) on \(configuration.host): \(slots) slot(s), \(planner.limits.threads) thread(s), input budget \(WorkerLoop.mebibytes(planner.limits.inputBudget)), starting credit target \(snapshot.creditTarget), broker \(configuration.backendEndpoint), store \(configuration.storeEndpoint)")
        while !finished {
            do {
                let result = try poller.poll(timeoutMilliseconds: pollTimeout())
                if result.isReadable(0) { try drainInbox() }
                if result.isReadable(1) { try drainStore() }
                if result.isReadable(2) { try watchStoreHandshakes() }
                if result.isReadable(3) { try drainBackend() }
                if result.isReadable(4) { try watchBrokerHandshakes() }
                try runTimers()
                // Publish before the CREDIT goes out, so that whoever sees the
                // CREDIT (or the DONE before it) also sees the status that led to it.
                publishStatus()
                if !stopping { topUp() }
                noteTarget()
            } catch let error as ZMQError where error.isTerminated {
                logger.warn("context shut down; exiting without handing jobs back")
                break
            } catch {
                logger.error("service loop failed: \(error); exiting")
                break
            }
        }
        pool.shutdown()
        backendMonitor?.close()
        storeMonitor.close()
        if let backend {
            noteBrokerSilence(until: clock.now)
            try? backend.setLinger(milliseconds: Int(WorkerLoop.lastWordsLinger.milliseconds))
            backend.close()
        }
        store.close()
        inbox.close()
        // Returns once the last messages to the broker are on the wire, or
        // after the linger if the broker is unreachable; only then may
        // `Worker.stop` return and the process exit.
        if backendContext !== context { backendContext.close() }
        publishStatus()
        logger.info("credit: highest target \(snapshot.peakCreditTarget), most jobs held \(snapshot.peakRunning), most bytes held \(snapshot.peakHeldBytes) (\(WorkerLoop.mebibytes(snapshot.peakHeldBytes)) of a \(WorkerLoop.mebibytes(planner.limits.inputBudget)) budget)")
        logger.info("worker \(configuration.workerID) stopped; longest broker silence \(WorkerLoop.seconds(longestSilence))")
    }

    /// How long the loop's end waits for its last messages to the broker to
    /// leave: long enough for any live connection, short enough that a
    /// stop is never held up by a broker that is gone.
    static let lastWordsLinger: Duration = .milliseconds(500)

    /// A duration as seconds with two decimals, as the stop line shows it: `0.41 s`.
    static func seconds(_ duration: Duration) -> String {
        let hundredths = (max(duration, .zero).milliseconds + 5) / 10
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction) s"
    }

    /// Bytes as MiB with one decimal: `12.5 MiB`.
    static func mebibytes(_ bytes: Int) -> String {
        let tenths = (max(0, bytes) * 10 + (1 << 19)) >> 20
        return "\(tenths / 10).\(tenths % 10) MiB"
    }

    private func publishStatus() {
        snapshot.running = jobs.count
        snapshot.peakRunning = max(snapshot.peakRunning, jobs.count)
        snapshot.stopping = stopping
        snapshot.connected = backend != nil
        snapshot.creditOutstanding = credit.count
        snapshot.heldBytes = heldBytes
        snapshot.peakHeldBytes = max(snapshot.peakHeldBytes, heldBytes)
        status.publish(snapshot)
    }

    /// Puts the planner's target and estimates in the status, and logs
    /// the target when it has moved by a quarter or more since it was last
    /// logged, at most once a second.
    private func noteTarget() {
        let now = clock.now
        let since = now - origin
        let target = planner.target(at: since)
        snapshot.creditTarget = target
        snapshot.peakCreditTarget = max(snapshot.peakCreditTarget, target)
        snapshot.jobTime = planner.jobTime
        snapshot.brokerRoundTrip = planner.brokerRoundTrip(at: since)
        snapshot.storeRoundTrip = planner.storeRoundTrip(at: since)
        guard abs(target - loggedTarget) * 4 >= max(loggedTarget, 4) else { return }
        if let targetLoggedAt, now - targetLoggedAt < .seconds(1) { return }
        loggedTarget = target
        targetLoggedAt = now
        func ms(_ duration: Duration?) -> String {
            guard let duration else { return "?" }
            let value = duration.fractionalMilliseconds
            return value < 10 ? "\((value * 10).rounded() / 10) ms" : "\(Int(value.rounded())) ms"
        }
        logger.info("credit target \(target) job(s): \(planner.limits.threads) thread(s), \(ms(snapshot.jobTime)) a job, round trips broker \(ms(snapshot.brokerRoundTrip)) store \(ms(snapshot.storeRoundTrip)); holding \(jobs.count) job(s), \(WorkerLoop.mebibytes(heldBytes)) of \(WorkerLoop.mebibytes(planner.limits.inputBudget)); cap \(slots)")
    }

    private func pollTimeout() -> Int {
        let now = clock.now
        var next = now + .seconds(1)
        if backend != nil {
            next = min(next, lastHeard + liveness, lastSent + configuration.heartbeatInterval)
            if !stopping, !pingRefused { next = min(next, nextPing) }
        } else if let reconnectAt {
            next = min(next, reconnectAt)
        }
        if let nextStoreTimer { next = min(next, nextStoreTimer) }
        if let stopDeadline { next = min(next, stopDeadline) }
        guard next > now else { return 0 }
        // Round up so a timer that is due in 0.4 ms does not spin.
        return Int((next - now).milliseconds) + 1
    }

    private var liveness: Duration { configuration.heartbeatInterval * configuration.heartbeatLiveness }

    private func drainInbox() throws {
        for event in try inbox.drain() {
            switch event {
            case let .finished(run, outcome, stages, elapsed):
                record(stages)
                processed(run: run, outcome: outcome, elapsed: elapsed)
            case let .stop(grace):
                beginStop(grace: grace)
            }
        }
    }

    private func drainStore() throws {
        for _ in 0..<1_000 {
            guard let frames = try store.receive(dontWait: true) else { return }
            handleStore(frames)
        }
    }

    private func drainBackend() throws {
        for _ in 0..<1_000 {
            guard let socket = backend, let frames = try socket.receive(dontWait: true) else { return }
            handleBackend(frames)
        }
    }

    private func runTimers() throws {
        let now = clock.now
        if backend != nil {
            if now - lastHeard >= liveness {
                if brokerTrouble.failed(at: now) {
                    logger.warn("broker at \(configuration.backendEndpoint) silent for \(liveness); reconnecting until it answers (one line when it does)")
                }
                dropBackend()
            } else {
                if !stopping, !pingRefused, now >= nextPing { sendPing() }
                if now - lastSent >= configuration.heartbeatInterval {
                    sendToBroker(BackendMessage.heartbeat.frames())
                }
            }
        } else if let reconnectAt, now >= reconnectAt {
            do {
                try openBackend()
            } catch let error as ZMQError where error.isTerminated {
                throw error
            } catch {
                // Out of sockets or file descriptors: try again later rather
                // than give up on the jobs still held.
                if brokerTrouble.failed(at: now) {
                    logger.error("could not open a new broker connection: \(error); retrying until it works (one line when it does)")
                }
                self.reconnectAt = now + jittered(backoff)
                backoff = min(backoff * 2, configuration.reconnectMaximum)
            }
        }
        if let due = nextStoreTimer, now >= due { runStoreTimers(now: now) }
        if now >= nextLimitCheck {
            holdToTimeLimits(now: now)
            nextLimitCheck = now + WorkerLoop.limitCheckInterval
        }
        if let stopDeadline, now >= stopDeadline, !finished {
            finishStop()
        }
    }

    /// Fails the jobs whose STORE timed out and resends the STOREs that are
    /// due, then finds the next time one will be.
    private func runStoreTimers(now: ContinuousClock.Instant) {
        var expired: [(run: UInt64, sends: Int)] = []
        var resend: [UInt64] = []
        var next: ContinuousClock.Instant?
        for (run, job) in jobs {
            guard let attempt = job.storing else { continue }
            if now >= attempt.deadline {
                expired.append((run, attempt.sends))
            } else {
                if now >= attempt.nextSend { resend.append(run) }
                next = min(next ?? attempt.deadline, attempt.deadline, attempt.nextSend)
            }
        }
        nextStoreTimer = next
        for (run, sends) in expired {
            let sent = sends == 0 ? "the result could not be sent" : "the result was sent \(sends) time(s)"
            let reason = "storage node unreachable: it did not confirm the result within \(configuration.storeTimeout.components.seconds) s (\(sent))"
            report(run: run, .fail(FailureMapping.detail(code: FailureDetail.Code.storeUnreachable, reason: reason), retryable: true))
        }
        for run in resend { sendStore(run: run) }
    }

    /// Makes sure the store timers are looked at by `time`.
    private func scheduleStoreTimer(_ time: ContinuousClock.Instant) {
        nextStoreTimer = min(nextStoreTimer ?? time, time)
    }

    // MARK: The broker connection

    /// Opens a new DEALER (a new identity for the broker) and sends READY;
    /// then HOLDING, which lists the jobs still running and those whose
    /// report waits here, so that a broker that restarted (or saw this worker
    /// go quiet) leases them back instead of running them again and charging
    /// an attempt; then the waiting reports; then credit for the free slots.
    /// HOLDING goes before the reports because the broker settles its held
    /// jobs at the first message after READY: a report first would have
    /// them requeued.
    private func openBackend() throws {
        let socket = try backendContext.socket(.dealer)
        try socket.setLinger(milliseconds: 0)
        try socket.setMaxMessageSize(Wire.maxMessageSize)
        try socket.setSendHighWaterMark(100_000)
        if let curve = configuration.curve {
            try socket.setCurveClient(serverKey: curve.brokerPublicKey, keyPair: curve.keyPair)
        }
        let monitor = try SocketMonitor(watching: socket)
        try socket.connect(configuration.backendEndpoint)
        backend = socket
        backendMonitor = monitor
        backendHandshake = HandshakeGuard(usesCurve: configuration.curve != nil, endpoint: configuration.backendEndpoint)
        snapshot.sessions += 1
        snapshot.connected = true
        status.publish(snapshot)  // before READY: a peer that sees READY sees the new session
        reconnectAt = nil
        rebuildPoller()
        let now = clock.now
        lastHeard = now
        credit.reset()
        let ready = Ready(workerID: configuration.workerID, host: configuration.host, pid: UInt32(truncatingIfNeeded: getpid()), slots: UInt32(slots))
        sendToBroker(BackendMessage.ready(ready).frames())
        let held = heldJobs()
        if !held.isEmpty { sendToBroker(BackendMessage.holding(Holding(jobs: held)).frames()) }
        let reports = unsentReports
        unsentReports = []
        for report in reports { sendToBroker(report) }
        if !stopping {
            topUp()
            sendPing()
        }
    }

    /// Every job HOLDING must list: those holding a slot, in the order they
    /// came, then those whose report waits to be sent. A job can appear
    /// twice (a broker that requeued it sent it here again while the first
    /// attempt still ran): it is listed once, with the higher attempt, the
    /// only one the broker can still hold for this worker. Never more than
    /// a HOLDING can carry: the jobs in slots and the reports waiting held
    /// at most `slots` ≤ 4096 slots when the broker was last heard from,
    /// and no JOB has come since.
    private func heldJobs() -> [Holding.Entry] {
        var order: [ULID] = []
        var attempts: [ULID: UInt32] = [:]
        func note(_ jobID: ULID, _ attempt: UInt32) {
            if let known = attempts[jobID] {
                attempts[jobID] = max(known, attempt)
            } else {
                attempts[jobID] = attempt
                order.append(jobID)
            }
        }
        for run in jobs.keys.sorted() {
            if let job = jobs[run] { note(job.jobID, job.attempt) }
        }
        for report in unsentReports { note(report.jobID, report.attempt) }
        return order.prefix(Holding.maxEntries).map { Holding.Entry(jobID: $0, attempt: attempts[$0] ?? 1) }
    }

    /// Forgets the broker connection and schedules a new one after the
    /// backoff (with jitter, so that workers cut off together do not all
    /// come back in the same millisecond), or after `delay`.
    private func dropBackend(after delay: Duration? = nil) {
        // The silence that ended the connection counts: a broker that went
        // quiet for the whole liveness period was the quietest of all.
        if backend != nil { noteBrokerSilence(until: clock.now) }
        // Counted from when the broker was last heard from, not from now: a
        // broker that was down for a minute committed nothing meanwhile.
        forgetSettledReports(now: lastHeard)
        unsentReports = reportsInDoubt.map(\.report) + unsentReports
        reportsInDoubt = []
        backendMonitor?.close()
        backendMonitor = nil
        backend?.close()
        backend = nil
        credit.reset()
        pendingPing = nil
        pingRefused = false
        nextPing = clock.now
        rebuildPoller()
        reconnectAt = clock.now + jittered(delay ?? backoff)
        if delay == nil { backoff = min(backoff * 2, configuration.reconnectMaximum) }
    }

    /// Drops reports sent longer than `reportRetention` before `now`, the
    /// last time the broker was heard from: it has long since committed them.
    private func forgetSettledReports(now: ContinuousClock.Instant) {
        guard let first = reportsInDoubt.first, now - first.sent > WorkerLoop.reportRetention else { return }
        let kept = reportsInDoubt.firstIndex { now - $0.sent <= WorkerLoop.reportRetention } ?? reportsInDoubt.count
        reportsInDoubt.removeFirst(kept)
    }

    /// Keeps the longest time the broker has left this worker without a
    /// message, from READY or the previous message to `now`. Any message
    /// counts, HEARTBEAT included; time without a connection does not.
    private func noteBrokerSilence(until now: ContinuousClock.Instant) {
        let silence = now - lastHeard
        if silence > longestSilence {
            longestSilence = silence
            snapshot.longestBrokerSilence = silence
        }
    }

    /// Items: 0 the inbox, 1 the store, 2 the store's handshakes, 3 the
    /// broker connection, 4 its handshakes (3 and 4 only while connected).
    private func rebuildPoller() {
        poller = Poller()
        poller.add(inbox)
        poller.add(store)
        poller.add(storeMonitor.socket)
        if let backend, let backendMonitor {
            poller.add(backend)
            poller.add(backendMonitor.socket)
        }
    }

    /// `duration` times a random factor in 0.8...1.2.
    private func jittered(_ duration: Duration) -> Duration {
        duration * Double.random(in: 0.8...1.2)
    }

    /// A broker that refuses this worker's key is tried again after a wait
    /// that grows to a minute, with one log line for the whole refusal.
    private func watchBrokerHandshakes() throws {
        while let monitor = backendMonitor, let (event, _) = try monitor.next() {
            guard let refusal = backendHandshake.observe(event) else { continue }
            let now = clock.now
            if brokerTrouble.failed(at: now) {
                logger.error("the broker at \(configuration.backendEndpoint) refused this worker: \(WorkerLoop.explain(refusal, server: "broker", keyOption: "--server-key")); trying again every minute at most (one line when it is accepted)")
            }
            dropBackend(after: refusalBackoff)
            refusalBackoff = min(refusalBackoff * 2, WorkerLoop.longestRefusalBackoff)
            return
        }
    }

    /// While the storage node refuses this worker's key, the worker takes
    /// no jobs: it could not store them.
    private func watchStoreHandshakes() throws {
        while let (event, _) = try storeMonitor.next() {
            let refusal = storeHandshake.observe(event)
            if event == .handshakeSucceeded, storeRefusal != nil || !storeReached {
                if storeRefusal != nil {
                    logger.info("the storage node at \(configuration.storeEndpoint) accepts this worker again; taking jobs")
                }
                storeRefusal = nil
                storeReached = true
                if !stopping { topUp() }
                continue
            }
            guard let refusal, storeRefusal == nil else { continue }
            storeRefusal = refusal
            logger.error("the storage node at \(configuration.storeEndpoint) refused this worker: \(WorkerLoop.explain(refusal, server: "storage node", keyOption: "--store-key")); taking no jobs until it accepts it")
        }
    }

    /// What a refusal means, and what to check.
    static func explain(_ refusal: HandshakeRefusal, server: String, keyOption: String) -> String {
        switch refusal {
        case .keyRefused:
            "the \(server) does not allow this worker's key (its public key must be in the \(server)'s --allow directory with the role worker)"
        case .curveRequired:
            "the \(server) requires CURVE keys (pass --curve-key and \(keyOption))"
        case .curveNotUsed:
            "the \(server) does not use CURVE (leave out --curve-key and \(keyOption), or start it with --curve-key and --allow)"
        case .serverKeyMismatch:
            "\(keyOption) is not the \(server)'s public key (it closed the CURVE handshake)"
        }
    }

    /// Sends to the broker. A send that fails still counts as sent for the
    /// heartbeat's timing, or the loop would try again at once, and again,
    /// as fast as it can; failures are logged once until one succeeds.
    /// Without `isHeartbeat` (a PING) the message does not count: the
    /// HEARTBEAT is still sent when nothing else was.
    private func sendToBroker(_ frames: [[UInt8]], isHeartbeat: Bool = true) {
        guard let backend else { return }
        let now = clock.now
        if isHeartbeat { lastSent = now }
        do {
            try backend.send(frames, dontWait: true)
            if let (lasted, tries) = sendTrouble.ended(at: now) {
                logger.info("sends to the broker work again after \(WorkerLoop.seconds(lasted)) (\(tries) failed)")
            }
        } catch {
            if sendTrouble.failed(at: now) {
                logger.warn("could not send \(commandName(frames)) to the broker: \(error); counting further failures quietly")
            }
        }
    }

    /// Sends a DONE or FAIL, which stays in doubt until the broker is heard
    /// from again.
    private func sendToBroker(_ report: UnsentReport) {
        sendToBroker(report.frames)
        reportsInDoubt.append((clock.now, report))
        if reportsInDoubt.count > 2 * Holding.maxEntries { reportsInDoubt.removeFirst(reportsInDoubt.count - Holding.maxEntries) }
    }

    /// Grants the credit the planner asks for now: up to its target, less
    /// the jobs held and the credit outstanding, within the input budget.
    /// None while the storage node is out of reach or refuses this worker,
    /// and none once stopping (callers check).
    private func topUp() {
        guard backend != nil, storeReached, storeRefusal == nil else { return }
        let count = planner.creditToGrant(held: jobs.count, heldBytes: heldBytes, outstanding: credit.count, at: clock.now - origin)
        grant(count)
    }

    private func grant(_ count: Int) {
        guard count > 0, backend != nil, storeReached, storeRefusal == nil else { return }
        credit.grant(count, at: clock.now)
        sendToBroker(BackendMessage.credit(Credit(count: UInt32(count))).frames())
    }

    /// Uses the oldest unit of outstanding credit for a JOB that came now,
    /// and tells the planner how long that credit waited; false when no
    /// credit was outstanding.
    private func useCredit(now: ContinuousClock.Instant) -> Bool {
        guard let granted = credit.use() else { return false }
        planner.noteCreditToJob(now - granted, at: now - origin)
        return true
    }

    /// Sends a PING to the broker, whose PONG measures the round trip. A
    /// PING that got no PONG by the next one is forgotten.
    ///
    /// A PING does not stand in for a HEARTBEAT: a broker answers PING from
    /// any connection, one it does not know too (after it restarted, say),
    /// while a HEARTBEAT from such a connection gets DISCONNECT. A worker
    /// that only PINGed while idle would hear PONGs and never learn that it
    /// must register again.
    private func sendPing() {
        guard backend != nil, !pingRefused else { return }
        let now = clock.now
        pendingPing = (nextPingID, now)
        sendToBroker(BackendMessage.ping(Ping(requestID: nextPingID)).frames(), isHeartbeat: false)
        nextPingID += 1
        nextPing = now + WorkerLoop.pingInterval
    }

    private func handleBackend(_ frames: [[UInt8]]) {
        let now = clock.now
        noteBrokerSilence(until: now)
        lastHeard = now
        forgetSettledReports(now: now)
        refusalBackoff = WorkerLoop.firstRefusalBackoff
        if let (lasted, tries) = brokerTrouble.ended(at: now) {
            logger.info("broker at \(configuration.backendEndpoint) answering again after \(WorkerLoop.seconds(lasted)) (\(tries) connection(s) tried)")
        }
        let message: BackendMessage
        do {
            message = try BackendMessage.decode(frames, to: .peer)
        } catch {
            logger.warn("broker: dropped \(commandName(frames)): \(error)")
            if !Wire.isError(frames) { sendToBroker(Wire.errorReply(to: frames, for: error).frames()) }
            return
        }
        // A DISCONNECT, or the broker turning this worker's id away (ERROR
        // conflict, before its DISCONNECT), keeps the reconnect backoff
        // growing: the next READY would only be turned away again.
        var turnedAway = false
        if case .error(let reply) = message, reply.code == .conflict { turnedAway = true }
        if message != .disconnect, !turnedAway { backoff = configuration.reconnectInitial }
        switch message {
        case .job(let job):
            accept(job)
        case .heartbeat:
            break
        case .disconnect:
            logger.warn("broker sent DISCONNECT; reconnecting")
            dropBackend()
            // The broker is alive and asked for a new session: no need to wait
            // out a silence, only the backoff that stops a DISCONNECT loop.
        case .error(let reply):
            if let pendingPing, reply.requestID == pendingPing.requestID {
                pingRefused = true
                self.pendingPing = nil
                logger.info("the broker answers PING with ERROR \(reply.code) (\(reply.reason)); its round trip is measured from CREDIT to JOB alone")
                return
            }
            logger.warn("broker answered ERROR \(reply.code): \(reply.reason)")
        case .pong(let pong):
            if let pendingPing, pong.requestID == pendingPing.requestID {
                planner.notePing(now - pendingPing.sent, at: now - origin)
                self.pendingPing = nil
            }
        case .ping(let ping):
            sendToBroker(Pong(requestID: ping.requestID).frames())
        case .cancelJob(let request):
            cancel(request)
        case .ready, .credit, .done, .fail, .holding:
            logger.warn("broker: dropped \(message.command), which only a worker sends")
            sendToBroker(ErrorReply(requestID: 0, code: .unexpectedCommand, reason: "\(message.command.name) is sent by workers, not to them").frames())
        }
    }

    // MARK: Jobs

    /// CANCEL-JOB: the job stops for good. Its slot is freed and FAIL
    /// `job.cancelled` (not retryable) goes to the broker at once; the
    /// result of a run still going is dropped when it comes, so nothing is
    /// stored for it. A job whose STORE is already out is left to finish:
    /// its DONE tells the broker the cancel came too late.
    private func cancel(_ request: CancelJob) {
        guard let run = jobs.first(where: { $0.value.jobID == request.jobID && $0.value.attempt == request.attempt })?.key else {
            logger.debug("CANCEL-JOB for job \(request.jobID) attempt \(request.attempt), which this worker does not run")
            return
        }
        guard jobs[run]?.storing == nil else {
            logger.info("job \(request.jobID) attempt \(request.attempt): cancel came while storing; letting it finish")
            return
        }
        jobs[run]?.cancellation.cancel()
        let detail = FailureMapping.detail(code: FailureDetail.Code.cancelled, reason: "cancelled while running")
        report(run: run, .fail(detail, retryable: false))
    }

    /// How often the running jobs are held against the time limit: the
    /// limit is in seconds, and the look is a pass over the jobs held.
    static let limitCheckInterval: Duration = .seconds(1)
    /// How long a job the time limit stopped has to come back from its
    /// thread (with the stage it was in) before its FAIL goes without it.
    static let timeoutStopGrace: Duration = .seconds(10)

    /// Stops each job that has run past its time limit; its FAIL
    /// `job.timeout` goes when its thread returns it (`processed`). One that
    /// has not returned `timeoutStopGrace` later (a stage that does not look
    /// at its flag) is failed at once and its slot freed, as a cancel does;
    /// its result is dropped if it ever comes.
    private func holdToTimeLimits(now: ContinuousClock.Instant) {
        for (run, job) in jobs where job.storing == nil {
            guard let limit = job.limit else { continue }
            if let stopped = job.timedOut {
                guard now - stopped >= WorkerLoop.timeoutStopGrace else { continue }
                logger.warn("job \(job.jobID) attempt \(job.attempt): still on its thread \(WorkerLoop.seconds(now - stopped)) after the time limit stopped it; failing it without its stage")
                snapshot.timedOut += 1
                report(run: run, .fail(FailureMapping.timeout(limit: limit, unstoppedFor: WorkerLoop.timeoutStopGrace), retryable: false))
            } else if let started = job.start.instant, now - started >= limit.duration {
                jobs[run]?.timedOut = now
                job.cancellation.cancel()
            }
        }
    }

    private func accept(_ job: JobDispatch) {
        let label = "job \(job.jobID) attempt \(job.attempt)"
        if stopping {
            logger.info("\(label) source '\(job.sourceName)': handed back, worker is stopping")
            let detail = FailureMapping.detail(code: FailureDetail.Code.workerShutdown, reason: "worker is shutting down")
            sendToBroker(Fail(jobID: job.jobID, attempt: job.attempt, retryable: true, failure: detail).frames())
            return
        }
        guard jobs.count < slots else {
            // The broker sent more JOBs than the credit granted. Running it
            // would exceed the slots, so it goes back at once.
            logger.warn("\(label): all \(slots) slot(s) busy, JOB exceeds the credit granted; handed back")
            let detail = FailureMapping.detail(code: FailureDetail.Code.internal, reason: "no free slot: the broker sent a JOB beyond the \(slots) credit(s) granted")
            sendToBroker(Fail(jobID: job.jobID, attempt: job.attempt, retryable: true, failure: detail).frames())
            return
        }
        let now = clock.now
        if !useCredit(now: now) {
            logger.warn("\(label): JOB without outstanding credit; running it in a free slot")
        }
        planner.noteInput(bytes: job.image.count)
        let run = nextRun
        nextRun += 1
        jobs[run] = RunningJob(jobID: job.jobID, attempt: job.attempt, sourceName: job.sourceName, pipeline: job.pipeline, received: now,
                               bytes: job.image.count, start: RunStart(origin: origin),
                               limit: JobTimeLimit.of(job: job.timeLimit, worker: configuration.jobTimeout))
        heldBytes += job.image.count
        let thumbnail = Size(width: Int(job.options.thumbnailWidth), height: Int(job.options.thumbnailHeight))
        let options = DarkroomPipeline.JobOptions(
            thumbnail: thumbnail,
            quality: Int(job.options.quality),
            thumbnailQuality: Int(job.options.thumbnailQuality),
            subsampling: ChromaSubsampling(job.options.subsampling),
            progressive: job.options.progressive,
            thumbnailGravity: Gravity(job.options.thumbnailGravity),
            format: ImageFormat(job.options.format),
            thumbnailFormat: ImageFormat(job.options.thumbnailFormat),
            limits: configuration.limits
        )
        snapshot.peakRunning = max(snapshot.peakRunning, jobs.count)
        pool.submit(WorkItem(run: run, pipeline: job.pipeline, options: options, image: job.image),
                    cancellation: jobs[run]?.cancellation ?? .never, start: jobs[run]?.start)
    }

    private func processed(run: UInt64, outcome: JobOutcome, elapsed: Duration) {
        guard let job = jobs[run] else {
            logger.debug("run \(run) finished after its job was handed back; result dropped")
            return
        }
        planner.noteJob(elapsed)
        switch outcome {
        case let .failed(detail, retryable):
            report(run: run, .fail(detail, retryable: retryable))
        case let .stopped(stage):
            // Only the time limit leaves a stopped job here: a CANCEL-JOB
            // reports its job at once.
            let limit = job.limit ?? JobTimeLimit(duration: elapsed, isJobs: false)
            snapshot.timedOut += 1
            report(run: run, .fail(FailureMapping.timeout(in: stage, limit: limit), retryable: false))
        case let .processed(output, canonical):
            guard let thumbnail = output.thumbnail else {
                report(run: run, .fail(FailureMapping.detail(code: FailureDetail.Code.internal, reason: "the job produced no thumbnail"), retryable: true))
                return
            }
            guard let fullSize = wireSize(output.full.size), let thumbSize = wireSize(thumbnail.size) else {
                let reason = "output \(output.full.size) is over the protocol's 65535 pixels a side"
                report(run: run, .fail(FailureMapping.detail(code: ImageError.Code.limitExceeded.failureCode, reason: reason), retryable: false))
                return
            }
            let pipeline = canonical.utf8.count <= Wire.Limit.pipelineBytes ? canonical : job.pipeline
            let requestID = nextRequestID
            nextRequestID += 1
            let request = StoreRequest(
                requestID: requestID, jobID: job.jobID, sourceName: job.sourceName, pipeline: pipeline,
                fullSize: fullSize, thumbnailSize: thumbSize, full: output.full.bytes, thumbnail: thumbnail.bytes
            )
            let now = clock.now
            jobs[run]?.storing = StoreAttempt(requestID: requestID, started: now, frames: request.frames(), deadline: now + configuration.storeTimeout, nextSend: now)
            storeRequests[requestID] = run
            logger.debug("job \(job.jobID) attempt \(job.attempt): processed in \(elapsed), storing \(output.full.bytes.count) + \(thumbnail.bytes.count) bytes")
            sendStore(run: run)
        }
    }

    /// Records a job's stage times, whatever became of the job: the work
    /// was done.
    private func record(_ stages: StageDurations) {
        if let decode = stages.decode { status.record(.decode, decode) }
        if let pipeline = stages.pipeline { status.record(.pipeline, pipeline) }
        if let encodeFull = stages.encodeFull { status.record(.encodeFull, encodeFull) }
        if let encodeThumbnail = stages.encodeThumbnail { status.record(.encodeThumbnail, encodeThumbnail) }
    }

    private func wireSize(_ size: Size) -> ImageSize? {
        let range = 1...Int(Wire.Limit.maxImageSide)
        guard range.contains(size.width), range.contains(size.height) else { return nil }
        return ImageSize(width: UInt32(size.width), height: UInt32(size.height))
    }

    /// Sends (or resends) a job's STORE and sets when to resend it. Only
    /// the attempt is taken out and put back: a copy of the whole job would
    /// retain its strings for nothing.
    private func sendStore(run: UInt64) {
        guard var attempt = jobs[run]?.storing else { return }
        let now = clock.now
        let soon = now + min(configuration.storeRetryInterval, .milliseconds(250))
        do {
            // The monitor's latest events first: a connection lost since the
            // last poll must stop this STORE, which the socket would
            // otherwise keep and deliver after a reconnect, even once the
            // job has been given up and retried.
            try watchStoreHandshakes()
            if storeHandshake.linked {
                try store.send(attempt.frames, dontWait: true)
                attempt.sends += 1
                if attempt.firstSent == nil { attempt.firstSent = now }
                attempt.nextSend = now + configuration.storeRetryInterval
            } else {
                // No live connection to the storage node: try again soon.
                attempt.nextSend = soon
            }
        } catch let error as ZMQError where error.isWouldBlock {
            // The connection's queue is full: try again soon.
            attempt.nextSend = soon
        } catch {
            logger.warn("job \(jobs[run]?.jobID.description ?? "?"): could not send STORE: \(error)")
            attempt.nextSend = now + configuration.storeRetryInterval
        }
        jobs[run]?.storing = attempt
        scheduleStoreTimer(min(attempt.deadline, attempt.nextSend))
    }

    private func handleStore(_ frames: [[UInt8]]) {
        let message: StoreMessage
        do {
            message = try StoreMessage.decode(frames, to: .peer)
        } catch {
            logger.warn("store: dropped \(commandName(frames)): \(error)")
            if !Wire.isError(frames) { try? store.send(Wire.errorReply(to: frames, for: error).frames(), dontWait: true) }
            return
        }
        switch message {
        case .stored(let stored):
            guard let run = storeRequests[stored.requestID], jobs[run]?.jobID == stored.jobID else {
                logger.debug("store: STORED for request \(stored.requestID) (job \(stored.jobID)) matches no waiting job")
                return
            }
            // After a resend it is unclear which send STORED answers.
            if let attempt = jobs[run]?.storing, attempt.sends == 1, let sent = attempt.firstSent {
                let now = clock.now
                planner.noteStore(now - sent, at: now - origin)
            }
            report(run: run, .done(recordID: stored.recordID))
        case .error(let reply):
            guard let run = storeRequests[reply.requestID], jobs[run] != nil else {
                logger.warn("store answered ERROR \(reply.code) for unknown request \(reply.requestID): \(reply.reason)")
                return
            }
            let reason = "storage node rejected the result: \(reply.code): \(reply.reason)"
            report(run: run, .fail(FailureMapping.detail(code: FailureDetail.Code.storeRejected, reason: reason), retryable: reply.code.isRetryable))
        case .pong:
            break
        default:
            logger.warn("store: dropped \(message.command), which is not an answer to STORE")
            try? store.send(ErrorReply(requestID: 0, code: .unexpectedCommand, reason: "\(message.command.name) is not sent to workers").frames(), dontWait: true)
        }
    }

    /// Ends a job: one DONE or FAIL to the broker, one log line, and the slot
    /// becomes free again: the credit is topped up at the end of the loop
    /// turn, in one CREDIT with the other slots freed, unless the worker is
    /// stopping.
    private func report(run: UInt64, _ result: Report) {
        guard let job = jobs.removeValue(forKey: run) else { return }
        heldBytes -= job.bytes
        if let attempt = job.storing { storeRequests[attempt.requestID] = nil }
        // The line is built as bytes, and only when it is logged: as
        // strings, the text of a line a job cost more than the rest of the
        // report.
        func logLine(_ outcome: (inout [UInt8]) -> Void) {
            logger.info { line in
                line.append(contentsOf: "job ".utf8)
                job.jobID.appendASCII(to: &line)
                line.append(contentsOf: " attempt ".utf8)
                line.append(contentsOf: String(job.attempt).utf8)
                line.append(contentsOf: " source '".utf8)
                line.append(contentsOf: job.sourceName.utf8)
                line.append(contentsOf: "': ".utf8)
                outcome(&line)
                line.append(contentsOf: " (".utf8)
                line.append(contentsOf: String((clock.now - job.received).milliseconds).utf8)
                line.append(contentsOf: " ms)".utf8)
            }
        }
        let frames: [[UInt8]]
        switch result {
        case .done(let recordID):
            snapshot.done += 1
            if let attempt = job.storing { status.record(.store, clock.now - attempt.started) }
            frames = Done(jobID: job.jobID, attempt: job.attempt, recordID: recordID).frames()
            logLine { line in
                line.append(contentsOf: "stored record ".utf8)
                recordID.appendASCII(to: &line)
            }
        case let .fail(detail, retryable):
            snapshot.failed += 1
            frames = Fail(jobID: job.jobID, attempt: job.attempt, retryable: retryable, failure: detail).frames()
            logLine { line in
                line.append(contentsOf: (retryable ? "failed (retryable) " : "failed (final) ").utf8)
                line.append(contentsOf: detail.summary.utf8)
            }
        }
        // Publish the counts before the broker (or a test playing it) can see
        // the DONE/FAIL, so status never lags behind what was reported.
        publishStatus()
        let unsent = UnsentReport(jobID: job.jobID, attempt: job.attempt, frames: frames)
        if backend != nil {
            sendToBroker(unsent)
        } else {
            // Sent after the next READY and its HOLDING; the CREDIT that
            // follows counts this slot.
            unsentReports.append(unsent)
        }
        if stopping, jobs.isEmpty, !finished { finishStop() }
    }

    // MARK: Stopping

    private func beginStop(grace: Duration) {
        let deadline = clock.now + grace
        if let stopDeadline, stopDeadline <= deadline { return }
        stopGrace = grace
        stopDeadline = deadline
        logger.info("stopping: no new jobs; \(jobs.count) running, grace \(grace)")
        if jobs.isEmpty { finishStop() }
    }

    /// Hands back every unfinished job (FAIL retryable, `worker.shutdown`),
    /// says DISCONNECT and ends the loop.
    private func finishStop() {
        finished = true
        for run in jobs.keys.sorted() {
            let reason = "worker stopped before the job finished (grace \(stopGrace))"
            report(run: run, .fail(FailureMapping.detail(code: FailureDetail.Code.workerShutdown, reason: reason), retryable: true))
        }
        sendToBroker(BackendMessage.disconnect.frames())
    }

    // MARK: Helpers

    private func commandName(_ frames: [[UInt8]]) -> String {
        guard frames.first == Wire.protocolID else { return "non-\(Wire.version) message of \(frames.count) frame(s)" }
        guard frames.count > 1, frames[1].count == 1 else { return "message of \(frames.count) frame(s)" }
        let byte = frames[1][0]
        let name = Command(rawValue: byte)?.name ?? "unknown"
        return "\(name) (0x\(String(byte, radix: 16)))"
    }
}

extension Gravity {
    /// The gravity a JOB's options give its thumbnail.
    init(_ gravity: DarkroomProtocol.JobOptions.ThumbnailGravity) {
        self = Gravity(rawValue: gravity.description) ?? .center
    }
}

extension ChromaSubsampling {
    /// The subsampling a JOB's output flags ask for.
    init(_ mode: DarkroomProtocol.JobOptions.Subsampling) {
        switch mode {
        case .auto: self = .auto
        case .s444: self = .s444
        case .s422: self = .s422
        case .s420: self = .s420
        }
    }
}

extension ImageFormat {
    /// The file format a JOB's output flags ask for.
    init(_ format: DarkroomProtocol.JobOptions.OutputFormat) {
        switch format {
        case .jpeg: self = .jpeg
        case .webp: self = .webp
        case .png: self = .png
        case .avif: self = .avif
        }
    }
}
