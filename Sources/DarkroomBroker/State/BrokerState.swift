import DarkroomCore
import DarkroomProtocol

/// A connected worker, known from its READY.
struct WorkerEntry: Sendable, Equatable {
    let id: String
    /// The ROUTER identity of its current connection.
    var identity: [UInt8]
    var host: String
    var pid: UInt32
    var slots: UInt32
    /// JOBs the broker may still send: CREDIT adds, each JOB takes one.
    var credit = 0
    /// Jobs leased to it.
    var jobs: Set<ULID> = []
    /// It handed a job back because it is stopping: it gets no more JOBs.
    var stopping = false
    /// Whether the first message after its READY has come. That message
    /// settles the jobs the worker held on an earlier connection (or before
    /// the broker restarted): HOLDING lists those it keeps, anything else
    /// means none (section 6.2 of the protocol). HOLDING is valid only as
    /// that message.
    var settled = false
    /// When it was last sent a JOB (a serial number), so that workers with
    /// equal credit take turns.
    var lastDispatch: UInt64 = 0
}

/// Everything the broker decides from, in memory, and every decision it
/// makes, without sockets, files or SQLite.
///
/// The state is a value that the broker's core thread owns. Each `plan…`
/// method reads it and returns a `Transition`: the rows to write, the
/// events to append and the changes to make here. The core writes the rows
/// in a savepoint and calls `apply` only when they are written, so memory
/// and database never disagree about a message. Registration and credit
/// (`register`, `grant`, `markStopping`, `retire`) write nothing and change
/// the state directly.
///
/// Jobs live in exactly one place: the ready queue (queued or delayed),
/// `leases` (running on a connected worker), `held` (leased to a worker
/// that is not connected, waiting for it to come back), or the dead-letter
/// set, which lives only in the database (its size is `deadCount`).
struct BrokerState {
    let policy: RetryPolicy
    /// How long leases found at start wait for their worker (ms).
    let reclaimWindow: UInt64
    /// How long a reconnecting worker's leases wait for its HOLDING (ms).
    let reconnectWindow: UInt64
    /// A random number in 0...1 for the backoff's jitter.
    let random: @Sendable () -> Double

    private(set) var ready = ReadyQueue()
    private(set) var leases: [ULID: Lease] = [:]
    private(set) var held: [ULID: HeldLease] = [:]
    private(set) var workers: [String: WorkerEntry] = [:]
    private(set) var workerIDs: [[UInt8]: String] = [:]
    private(set) var deadCount = 0
    /// Running jobs whose worker was asked to stop them (CANCEL). The
    /// database marks them too, so a restart asks their workers again.
    private(set) var cancelling: Set<ULID> = []
    /// When PAUSE stopped dispatch (Unix ms), or nil while jobs are sent.
    /// The database holds it, so a pause outlives a restart.
    private(set) var pausedSince: UInt64?
    /// The seq of the newest event (committed, or applied in this turn).
    private(set) var eventSeq: UInt64 = 0
    /// The highest rowid used in `jobs`.
    private(set) var lastRowID: Int64 = 0
    private var dispatchSerial: UInt64 = 0

    /// What the queue database holds: the state is built from it at start,
    /// and rebuilt from it when a turn could not commit.
    struct Loaded: Sendable {
        var queued: [(job: JobHandle, notBefore: UInt64)] = []
        var leased: [Lease] = []
        /// Leased jobs whose worker was asked to stop them.
        var cancelling: Set<ULID> = []
        var pausedSince: UInt64?
        var deadCount = 0
        var eventSeq: UInt64 = 0
        var lastRowID: Int64 = 0
    }

    /// The state after a start: every job leased when the broker stopped
    /// is held for `reclaimWindow`, for its worker to come back.
    init(policy: RetryPolicy, reclaimWindow: UInt64, reconnectWindow: UInt64,
         random: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }, loaded: Loaded, now: Moment) {
        self.policy = policy
        self.reclaimWindow = reclaimWindow
        self.reconnectWindow = reconnectWindow
        self.random = random
        load(loaded, now: now)
        for lease in loaded.leased {
            held[lease.job.id] = HeldLease(lease: lease, deadline: now.monotonic + reclaimWindow)
        }
    }

    private mutating func load(_ loaded: Loaded, now: Moment) {
        ready = ReadyQueue()
        for (job, notBefore) in loaded.queued { ready.add(job, notBefore: notBefore, now: now.wall) }
        leases = [:]
        held = [:]
        cancelling = loaded.cancelling
        pausedSince = loaded.pausedSince
        deadCount = loaded.deadCount
        eventSeq = loaded.eventSeq
        lastRowID = loaded.lastRowID
    }

    // MARK: Rebuilding after a failed turn

    /// The parts of the state that the database does not hold: taken at the
    /// start of each turn, to rebuild the state if the turn cannot commit.
    struct Memo {
        fileprivate var workers: [String: WorkerEntry]
        fileprivate var workerIDs: [[UInt8]: String]
        fileprivate var held: [ULID: HeldLease]
        fileprivate var dispatchSerial: UInt64
        /// The database knows only the highest rowid still in use, which is
        /// lower once the newest job has been stored and its row deleted.
        fileprivate var lastRowID: Int64
    }

    func memo() -> Memo {
        Memo(workers: workers, workerIDs: workerIDs, held: held, dispatchSerial: dispatchSerial, lastRowID: lastRowID)
    }

    /// The state as it was when `memo` was taken, given what the database
    /// holds after the turn's rollback.
    mutating func restore(_ memo: Memo, loaded: Loaded, now: Moment) {
        load(loaded, now: now)
        lastRowID = max(lastRowID, memo.lastRowID)
        workers = memo.workers.mapValues { entry in
            var entry = entry
            entry.jobs = []
            return entry
        }
        workerIDs = memo.workerIDs
        dispatchSerial = memo.dispatchSerial
        for lease in loaded.leased {
            let id = lease.job.id
            if let before = memo.held[id] {
                held[id] = HeldLease(lease: lease, deadline: before.deadline)
            } else if workers[lease.worker] != nil {
                leases[id] = lease
                workers[lease.worker]?.jobs.insert(id)
            } else {
                held[id] = HeldLease(lease: lease, deadline: now.monotonic + reconnectWindow)
            }
        }
    }

    // MARK: Lookups

    /// Where a job is in memory, if it is unfinished and not dead.
    enum Place: Equatable {
        case waiting(JobHandle)
        case leased(Lease)
        case held(HeldLease)
    }

    func place(of id: ULID) -> Place? {
        if let lease = leases[id] { return .leased(lease) }
        if let hold = held[id] { return .held(hold) }
        if let job = ready.job(id) { return .waiting(job) }
        return nil
    }

    /// When a delayed job becomes ready (Unix ms), if it is delayed.
    func notBefore(of id: ULID) -> UInt64? { ready.notBefore(id) }

    func workerID(for identity: [UInt8]) -> String? { workerIDs[identity] }

    /// The registered worker on this connection whose first message after
    /// READY is still to come (and with it the settling of its held jobs).
    func unsettledWorker(for identity: [UInt8]) -> String? {
        guard let id = workerIDs[identity], let worker = workers[id], !worker.settled else { return nil }
        return id
    }

    /// Jobs waiting, ready or delayed: the depth compared with the queue limit.
    var depth: Int { ready.depth }

    /// The earliest monotonic time at which a held lease expires.
    var nextHoldDeadline: UInt64? { held.values.map(\.deadline).min() }

    // MARK: Workers (memory only)

    /// READY from `identity`. A worker id already registered on another
    /// connection (it reconnected), or a connection that already sent READY,
    /// is retired first: its leases are held for `reconnectWindow`, to be
    /// settled by what the worker says next. Returns the identities of
    /// connections that are no longer any worker's.
    mutating func register(_ ready: Ready, identity: [UInt8], now: Moment) -> [[UInt8]] {
        var forgotten: [[UInt8]] = []
        if let previous = workerIDs[identity] {
            retire(previous, deadline: now.monotonic + reconnectWindow)
        }
        if let existing = workers[ready.workerID] {
            retire(existing.id, deadline: now.monotonic + reconnectWindow)
            if existing.identity != identity { forgotten.append(existing.identity) }
        }
        workers[ready.workerID] = WorkerEntry(id: ready.workerID, identity: identity, host: ready.host, pid: ready.pid,
                                              slots: ready.slots)
        workerIDs[identity] = ready.workerID
        return forgotten
    }

    /// Takes a worker out of the registry, holding its leases until `deadline`.
    mutating func retire(_ workerID: String, deadline: UInt64) {
        guard let worker = workers.removeValue(forKey: workerID) else { return }
        if workerIDs[worker.identity] == workerID { workerIDs[worker.identity] = nil }
        for id in worker.jobs {
            if let lease = leases.removeValue(forKey: id) {
                held[id] = HeldLease(lease: lease, deadline: deadline)
            }
        }
    }

    /// CREDIT: adds to the worker's credit, never beyond its free slots.
    /// Returns a warning when the worker granted more than it has room for.
    mutating func grant(_ count: UInt32, worker workerID: String) -> String? {
        guard let worker = workers[workerID], !worker.stopping else { return nil }
        let room = max(0, Int(worker.slots) - worker.jobs.count)
        let granted = worker.credit + Int(count)
        workers[workerID]?.credit = min(granted, room)
        guard granted > room else { return nil }
        return "worker \(workerID) granted credit \(granted) with \(worker.jobs.count) of \(worker.slots) slot(s) busy; using \(room)"
    }

    /// The worker is stopping (it handed a job back): no more JOBs for it.
    mutating func markStopping(_ workerID: String) {
        workers[workerID]?.stopping = true
        workers[workerID]?.credit = 0
    }

    // MARK: Decisions

    /// Accepts a job: its row, its `accepted` event, its submit key. The
    /// job's rowid is the next one; the ACCEPTED names the event's seq. A
    /// job scheduled for later (`notBefore`, Unix ms) waits as delayed.
    func planAccept(id: ULID, priority: UInt8, source: String, options: JobOptions, pipeline: String,
                    inlineInput: [UInt8]?, inputFile: String?, inputBytes: Int, submitKey: String?, notBefore: UInt64 = 0,
                    maxAttempts: UInt16? = nil, expires: UInt64 = 0, timeLimit: UInt32 = 0, now: Moment) -> Transition {
        let job = JobHandle(id: id, priority: priority, source: source, rowID: lastRowID + 1, inputFile: inputFile, maxAttempts: maxAttempts,
                            expires: expires)
        var t = Transition()
        let accepted = t.event(.accepted, job, attempt: 0, at: now, after: eventSeq)
        t.writes.append(.insert(NewJob(handle: job, options: options, pipeline: pipeline, inlineInput: inlineInput,
                                       inputBytes: inputBytes, submitKey: submitKey, notBefore: notBefore, timeLimit: timeLimit),
                                acceptedSeq: accepted.seq, at: now.wall))
        t.changes.append(.enqueue(job, notBefore: notBefore))
        t.accepted = 1
        return t
    }

    /// The next JOB to send: the first ready job to the connected worker
    /// with the most credit (taking turns when equal), or nil when no job
    /// is ready, no worker has credit or dispatch is paused.
    func planDispatch(now: Moment) -> (transition: Transition, lease: Lease)? {
        guard pausedSince == nil, let job = ready.peek() else { return nil }
        var best: WorkerEntry?
        for worker in workers.values where worker.credit > 0 && !worker.stopping {
            guard let current = best else { best = worker; continue }
            if worker.credit > current.credit || (worker.credit == current.credit && worker.lastDispatch < current.lastDispatch) {
                best = worker
            }
        }
        guard let worker = best else { return nil }
        var leased = job
        leased.attempt += 1
        let lease = Lease(job: leased, worker: worker.id)
        var t = Transition()
        t.writes.append(.lease(leased, worker: worker.id))
        t.event(.started, leased, attempt: leased.attempt, at: now, after: eventSeq, worker: worker.id)
        t.changes.append(.unqueue(job.id))
        t.changes.append(.lease(lease, usesCredit: true))
        return (t, lease)
    }

    /// DONE: the job's record is stored (a worker sends DONE only after
    /// STORED, and every attempt of a job yields the same record), so it
    /// completes the job whatever its attempt and whoever sends it, while
    /// the job is unfinished. `dead` is the job's handle when it is in the
    /// dead-letter set (the core reads it when the job is nowhere in memory).
    /// Nil when the job is finished or unknown.
    func planDone(_ done: Done, from identity: [UInt8], dead: JobHandle?, now: Moment) -> Transition? {
        let sender = workerIDs[identity]
        var t = Transition()
        let job: JobHandle
        var worker = sender ?? ""
        switch place(of: done.jobID) {
        case .leased(let lease):
            job = lease.job
            if sender == nil { worker = lease.worker }
            t.changes.append(.release(job.id))
        case .held(let hold):
            job = hold.lease.job
            if sender == nil { worker = hold.lease.worker }
            t.changes.append(.unhold(job.id))
        case .waiting(let waiting):
            job = waiting
            t.changes.append(.unqueue(job.id))
        case nil:
            guard let dead, dead.id == done.jobID else { return nil }
            job = dead
            t.changes.append(.deadCount(-1))
        }
        t.writes.append(.delete(job))
        t.event(.stored, job, attempt: done.attempt, at: now, after: eventSeq, worker: worker, record: done.recordID)
        t.stored = 1
        return t
    }

    /// FAIL: counts only for the job's current attempt, from the connection
    /// it is leased to, or from any connection while it is held with that
    /// attempt. A job handed back by a stopping worker (`worker.shutdown`)
    /// goes back at once and the attempt does not count. Nil when stale.
    func planFail(_ fail: Fail, from identity: [UInt8], now: Moment) -> Transition? {
        let sender = workerIDs[identity]
        var t = Transition()
        let lease: Lease
        switch place(of: fail.jobID) {
        case .leased(let current) where current.job.attempt == fail.attempt && current.worker == sender:
            lease = current
            t.changes.append(.release(lease.job.id))
        case .held(let hold) where hold.lease.job.attempt == fail.attempt:
            lease = hold.lease
            t.changes.append(.unhold(lease.job.id))
        default:
            return nil
        }
        if fail.failure.code == FailureDetail.Code.workerShutdown {
            requeueUncounted(lease.job, worker: lease.worker, failure: fail.failure, at: now, into: &t)
        } else {
            failAttempt(lease.job, worker: lease.worker, failure: fail.failure, retryable: fail.retryable,
                        immediate: false, at: now, into: &t)
        }
        return t
    }

    /// A worker is lost (silent, disconnected): each of its jobs failed
    /// (`worker.lost`, counted) and goes back at once, or dead when out of
    /// attempts. Not `counted` (its key was revoked: nothing about the jobs
    /// failed), each goes back at once without charging the attempt
    /// (`worker.revoked`). The worker leaves the registry.
    func planLost(_ workerID: String, reason: String, counted: Bool = true, now: Moment) -> Transition {
        var t = Transition()
        if let worker = workers[workerID] {
            let failure = FailureDetail(code: counted ? FailureDetail.Code.workerLost : FailureDetail.Code.workerRevoked, reason: reason)
            for id in worker.jobs.sorted() {
                guard let lease = leases[id] else { continue }
                t.changes.append(.release(id))
                if counted {
                    failAttempt(lease.job, worker: workerID, failure: failure, retryable: true, immediate: true, at: now, into: &t)
                } else {
                    requeueUncounted(lease.job, worker: workerID, failure: failure, at: now, into: &t)
                }
            }
        }
        t.changes.append(.forget(worker: workerID))
        return t
    }

    /// Settles a reconnected worker's held jobs: those it says it still
    /// holds (same attempt) are leased to it again, uncounted and silently;
    /// the others go back to the queue at once, uncounted
    /// (`worker.reconnected`). `holding` is empty when the worker sent
    /// anything but HOLDING first.
    func planSettle(_ workerID: String, holding: [Holding.Entry], now: Moment) -> Transition {
        var t = Transition()
        var listed: [ULID: UInt32] = [:]
        for entry in holding { listed[entry.jobID] = entry.attempt }
        let mine = held.values.filter { $0.lease.worker == workerID }.sorted { $0.lease.job.id < $1.lease.job.id }
        var kept = 0
        for hold in mine {
            let job = hold.lease.job
            t.changes.append(.unhold(job.id))
            if listed[job.id] == job.attempt {
                t.changes.append(.lease(hold.lease, usesCredit: false))
                // The core asks again for the ones being cancelled
                // (`cancellingLeases`): the first CANCEL-JOB may be lost.
                if cancelling.contains(job.id) { t.changes.append(.cancelling(job.id)) }
                kept += 1
            } else {
                let failure = FailureDetail(code: FailureDetail.Code.workerReconnected,
                                            reason: "worker \(workerID) came back without attempt \(job.attempt)")
                requeueUncounted(job, worker: workerID, failure: failure, at: now, into: &t)
            }
        }
        t.changes.append(.settled(worker: workerID))
        if !mine.isEmpty {
            t.notes.append("worker \(workerID) reclaimed \(kept) of its \(mine.count) held job(s)\(kept < mine.count ? "; the rest are requeued" : "")")
        }
        return t
    }

    /// Held leases whose worker did not come back in time: each job failed
    /// (`worker.lost`, counted) and goes back at once. Nil when none expired.
    func planExpiredHolds(now: Moment) -> Transition? {
        let expired = held.values.filter { $0.deadline <= now.monotonic }.sorted { $0.lease.job.id < $1.lease.job.id }
        guard !expired.isEmpty else { return nil }
        var t = Transition()
        for hold in expired {
            let lease = hold.lease
            t.changes.append(.unhold(lease.job.id))
            let failure = FailureDetail(code: FailureDetail.Code.workerLost,
                                        reason: "worker \(lease.worker) did not come back for attempt \(lease.job.attempt)")
            failAttempt(lease.job, worker: lease.worker, failure: failure, retryable: true, immediate: true, at: now, into: &t)
        }
        t.notes.append("\(expired.count) held job(s) requeued: their worker did not come back in time")
        return t
    }

    /// A waiting job that cannot be dispatched (its input is unreadable)
    /// goes to the dead-letter set with the reason.
    func planBury(_ id: ULID, failure: FailureDetail, now: Moment) -> Transition? {
        guard let job = ready.job(id) else { return nil }
        var t = Transition()
        t.changes.append(.unqueue(id))
        t.writes.append(.bury(job, failure: failure, at: now.wall))
        t.event(.dead, job, attempt: job.attempt, at: now, after: eventSeq, failure: failure)
        t.changes.append(.deadCount(1))
        t.notes.append("job \(id) is dead: \(failure.summary)")
        return t
    }

    /// DEAD-RETRY: each dead job goes back to the queue with a fresh budget.
    func planRevive(_ jobs: [JobHandle], now: Moment) -> Transition {
        var t = Transition()
        for dead in jobs {
            var job = dead
            job.attemptBase = job.attempt
            // Retried by hand: its deadline no longer holds it back.
            job.expires = 0
            t.writes.append(.revive(job))
            t.event(.revived, job, attempt: job.attempt + 1, at: now, after: eventSeq)
            t.changes.append(.enqueue(job, notBefore: 0))
            t.changes.append(.deadCount(-1))
        }
        if !jobs.isEmpty { t.notes.append("revived \(jobs.count) dead job(s)") }
        return t
    }

    /// DEAD-DISCARD: each dead job is deleted.
    func planDiscard(_ jobs: [JobHandle], now: Moment) -> Transition {
        var t = Transition()
        for job in jobs {
            t.writes.append(.delete(job))
            t.event(.discarded, job, attempt: job.attempt, at: now, after: eventSeq)
            t.changes.append(.deadCount(-1))
        }
        if !jobs.isEmpty { t.notes.append("discarded \(jobs.count) dead job(s)") }
        return t
    }

    /// What CANCEL of one job does.
    enum CancelPlan {
        /// Cancelled at once (it was waiting, or its worker is away).
        case cancelled(Transition)
        /// Running: CANCEL-JOB goes to its worker; the transition marks it.
        case stopping(Transition, Lease, connection: [UInt8]?)
    }

    /// CANCEL of one job; nil when it is not unfinished in memory (finished,
    /// dead or unknown: the core says which).
    func planCancel(_ id: ULID, now: Moment) -> CancelPlan? {
        var t = Transition()
        switch place(of: id) {
        case .waiting(let job):
            t.changes.append(.unqueue(id))
            cancelNow(job, worker: "", at: now, into: &t)
            return .cancelled(t)
        case .leased(let lease):
            if !cancelling.contains(id) {
                t.writes.append(.requestCancel(lease.job, at: now.wall))
                t.changes.append(.cancelling(id))
            }
            return .stopping(t, lease, connection: workers[lease.worker]?.identity)
        case .held(let hold):
            // Its worker is away; if it comes back with the job stored, its
            // DONE finds the job finished and is ignored.
            t.changes.append(.unhold(id))
            cancelNow(hold.lease.job, worker: hold.lease.worker, at: now, into: &t)
            return .cancelled(t)
        case nil:
            return nil
        }
    }

    /// CANCEL of every waiting job, ready or delayed.
    func planCancelQueued(now: Moment) -> Transition {
        var t = Transition()
        for job in ready.allJobs {
            t.changes.append(.unqueue(job.id))
            cancelNow(job, worker: "", at: now, into: &t)
        }
        if t.cancelled > 0 { t.notes.append("cancelled \(t.cancelled) queued job(s)") }
        return t
    }

    /// PAUSE (`paused`) or RESUME: nil when dispatch already is that way.
    func planPause(_ paused: Bool, now: Moment) -> Transition? {
        guard paused == (pausedSince == nil) else { return nil }
        let since: UInt64? = paused ? now.wall : nil
        var t = Transition()
        t.writes.append(.pause(since: since))
        t.changes.append(.paused(since: since))
        t.notes.append(paused ? "dispatch paused: jobs stay queued until RESUME; \(leases.count + held.count) running job(s) finish"
                              : "dispatch resumed: \(ready.depth - ready.delayedCount) ready job(s) go to workers again")
        return t
    }

    /// Every waiting job whose deadline has passed ends `cancelled` with
    /// the failure `job.expired`: it is never dispatched after its deadline
    /// (nor retried). Nil when none is due.
    func planExpire(now: Moment) -> Transition? {
        let due = ready.expired(by: now.wall)
        guard !due.isEmpty else { return nil }
        var t = Transition()
        for job in due {
            t.changes.append(.unqueue(job.id))
            let reason = "not started by its deadline, \(Logger.timestamp(milliseconds: Int64(clamping: job.expires)))"
            cancelNow(job, worker: "", at: now, into: &t, failure: FailureDetail(code: FailureDetail.Code.expired, reason: reason))
        }
        t.expired = due.count
        t.notes.append("\(due.count) job(s) passed their deadline unstarted: cancelled")
        return t
    }

    /// Leases being cancelled on this worker's connection: CANCEL-JOB is
    /// sent (again) after it settles.
    func cancellingLeases(of workerID: String) -> [Lease] {
        (workers[workerID]?.jobs ?? []).filter { cancelling.contains($0) }.compactMap { leases[$0] }
    }

    /// Ends a job for good with its `cancelled` event: its row and input go.
    private func cancelNow(_ job: JobHandle, worker: String, at now: Moment, into t: inout Transition, failure: FailureDetail? = nil) {
        t.writes.append(.delete(job))
        t.event(.cancelled, job, attempt: job.attempt, at: now, after: eventSeq, worker: worker, failure: failure)
        t.cancelled += 1
    }

    /// An attempt that ends, in any way, while its job is being cancelled
    /// ends the job, cancelled: never failed, retried or dead. True when so.
    private func endsCancelled(_ job: JobHandle, worker: String, at now: Moment, into t: inout Transition) -> Bool {
        guard cancelling.contains(job.id) else { return false }
        cancelNow(job, worker: worker, at: now, into: &t)
        return true
    }

    /// Records a counted failed attempt, then requeues the job (retryable,
    /// attempts left; after a backoff unless `immediate`) or buries it.
    private func failAttempt(_ job: JobHandle, worker: String, failure: FailureDetail, retryable: Bool, immediate: Bool,
                             at now: Moment, into t: inout Transition) {
        if endsCancelled(job, worker: worker, at: now, into: &t) { return }
        t.event(.failed, job, attempt: job.attempt, at: now, after: eventSeq, worker: worker, failure: failure)
        t.failed += 1
        let used = job.attemptsUsed
        if retryable && policy.allowsRetry(afterUsing: used, jobLimit: job.maxAttempts) {
            let delay = immediate ? 0 : policy.backoff(afterUsing: used, unit: random())
            let notBefore = delay > 0 ? now.wall + delay : 0
            let when = delay > 0 ? "attempt \(job.attempt + 1) in \(Double(delay) / 1_000) s" : "attempt \(job.attempt + 1) now"
            t.writes.append(.requeue(job, notBefore: notBefore, failure: failure))
            t.event(.retrying, job, attempt: job.attempt + 1, at: now, after: eventSeq,
                    failure: FailureDetail(stepIndex: failure.stepIndex, step: failure.step, code: failure.code, reason: "\(when): \(failure.reason)"))
            t.changes.append(.enqueue(job, notBefore: notBefore))
        } else {
            var last = failure
            if retryable { last.reason = "gave up after \(used) attempt(s): \(failure.reason)" }
            t.writes.append(.bury(job, failure: last, at: now.wall))
            t.event(.dead, job, attempt: job.attempt, at: now, after: eventSeq, worker: worker, failure: last)
            t.changes.append(.deadCount(1))
            t.notes.append("job \(job.id) is dead: \(last.summary)")
        }
    }

    /// Requeues a job at once without counting its attempt: nothing about
    /// the job failed (its worker stopped or came back without it).
    private func requeueUncounted(_ job: JobHandle, worker: String, failure: FailureDetail, at now: Moment, into t: inout Transition) {
        if endsCancelled(job, worker: worker, at: now, into: &t) { return }
        var requeued = job
        requeued.attemptBase += 1
        t.writes.append(.requeue(requeued, notBefore: 0, failure: failure))
        t.event(.retrying, requeued, attempt: job.attempt + 1, at: now, after: eventSeq,
                failure: FailureDetail(stepIndex: failure.stepIndex, step: failure.step, code: failure.code,
                                       reason: "attempt \(job.attempt + 1) now, not counted: \(failure.reason)"))
        t.changes.append(.enqueue(requeued, notBefore: 0))
    }

    // MARK: Applying

    /// Applies a transition whose writes succeeded.
    mutating func apply(_ t: Transition, now: Moment) {
        for change in t.changes {
            switch change {
            case let .enqueue(job, notBefore):
                ready.add(job, notBefore: notBefore, now: now.wall)
            case .unqueue(let id):
                ready.remove(id)
            case let .lease(lease, usesCredit):
                let id = lease.job.id
                leases[id] = lease
                // Changed in place: a copy of the entry would copy its job set.
                workers[lease.worker]?.jobs.insert(id)
                if usesCredit, workers[lease.worker] != nil {
                    dispatchSerial += 1
                    workers[lease.worker]?.credit -= 1
                    workers[lease.worker]?.lastDispatch = dispatchSerial
                }
            case .release(let id):
                if let lease = leases.removeValue(forKey: id) { workers[lease.worker]?.jobs.remove(id) }
                if held[id] == nil { cancelling.remove(id) }
            case .unhold(let id):
                held[id] = nil
                if leases[id] == nil { cancelling.remove(id) }
            case .cancelling(let id):
                cancelling.insert(id)
            case .paused(let since):
                pausedSince = since
            case .deadCount(let delta):
                deadCount = max(0, deadCount + delta)
            case .settled(let workerID):
                workers[workerID]?.settled = true
            case .forget(let workerID):
                if let worker = workers.removeValue(forKey: workerID), workerIDs[worker.identity] == workerID {
                    workerIDs[worker.identity] = nil
                }
            }
        }
        if let last = t.events.last { eventSeq = last.seq }
        for write in t.writes {
            if case let .insert(job, _, _) = write { lastRowID = max(lastRowID, job.handle.rowID) }
        }
    }

    /// Moves delayed jobs whose time has come into the ready queue.
    mutating func promote(now: Moment) {
        ready.promote(now: now.wall)
    }

    // MARK: Listing

    /// A page of the jobs in one state, for JOB-LIST: ready jobs in
    /// dispatch order, delayed ones soonest first, running (and held) ones
    /// by job id; after `after`'s place in that order when it is given
    /// (its job may have left the state since), then past `offset` more.
    /// The page's `offset` is how many jobs of the state come before it.
    func list(_ which: JobListState, offset: Int, limit: Int, after: JobListCursor? = nil) -> JobList {
        func listed(_ job: JobHandle) -> ListedJob {
            ListedJob(jobID: job.id, priority: job.priority, source: job.source, attempt: job.attempt, expires: job.expires == 0 ? nil : job.expires)
        }
        let end = offset.addingReportingOverflow(limit).overflow ? Int.max : offset + limit
        var jobs: [ListedJob]
        let total: Int
        var before = 0
        switch (which, after) {
        case (.queued, let cursor):
            total = ready.depth - ready.delayedCount
            var from: (priority: UInt8, id: ULID)?
            if case let .queued(priority, id)? = cursor { from = (priority, id) }
            let page = ready.readyInOrder(first: min(end, total), after: from)
            before = page.before
            jobs = page.jobs.dropFirst(offset).map { job in
                var listedJob = listed(job)
                listedJob.cursor = JobListCursor.queued(priority: job.priority, jobID: job.id).text
                return listedJob
            }
        case (.delayed, let cursor):
            total = ready.delayedCount
            var from: (notBefore: UInt64, id: ULID)?
            if case let .delayed(time, id)? = cursor { from = (time, id) }
            let page = ready.delayedInOrder(first: min(end, total), after: from)
            before = page.before
            jobs = page.jobs.dropFirst(offset).map { waiting in
                var job = listed(waiting.job)
                job.notBefore = waiting.notBefore
                job.cursor = JobListCursor.delayed(notBefore: waiting.notBefore, jobID: waiting.job.id).text
                return job
            }
        case (.running, let cursor):
            var running = (Array(leases.values) + held.values.map(\.lease)).sorted { $0.job.id < $1.job.id }
            total = running.count
            if case let .running(id)? = cursor {
                before = running.firstIndex { $0.job.id > id } ?? running.count
                running.removeFirst(before)
            }
            jobs = running.dropFirst(offset).prefix(limit).map { lease in
                var job = listed(lease.job)
                job.worker = lease.worker
                if cancelling.contains(lease.job.id) { job.cancelling = true }
                job.cursor = JobListCursor.running(jobID: lease.job.id).text
                return job
            }
        }
        return JobList(state: which.rawValue, total: UInt64(total), offset: UInt64(before + min(offset, max(0, total - before))), jobs: jobs)
    }

    // MARK: Status

    /// The queue and the workers as STATUS reports them (the workers' last
    /// heartbeat is left 0 for the switchboard, which hears them, to fill in).
    func status(now: Moment, limit: Int, rates: Rates) -> BrokerStatus {
        let list = workers.values.sorted { $0.id < $1.id }.map { worker in
            WorkerStatus(id: worker.id, host: worker.host, pid: worker.pid, slots: worker.slots,
                         busy: UInt32(clamping: worker.jobs.count), credit: UInt32(clamping: max(0, worker.credit)),
                         lastHeartbeat: 0)
        }
        return BrokerStatus(
            time: now.wall, eventSeq: eventSeq,
            queue: QueueStatus(ready: ready.readyCounts, delayed: UInt64(ready.delayedCount),
                               inFlight: UInt64(leases.count + held.count), dead: UInt64(deadCount),
                               limit: UInt64(max(0, limit)), pausedSince: pausedSince),
            workers: list, rates: rates)
    }
}

extension BrokerState: Equatable {
    /// Two states are equal when they hold the same jobs in the same
    /// places, the same workers under the same connections, and the same
    /// counters, so that they make the same decisions. The source of the
    /// backoff's jitter is not compared.
    static func == (lhs: BrokerState, rhs: BrokerState) -> Bool {
        lhs.policy == rhs.policy && lhs.reclaimWindow == rhs.reclaimWindow && lhs.reconnectWindow == rhs.reconnectWindow
            && lhs.ready == rhs.ready && lhs.leases == rhs.leases && lhs.held == rhs.held
            && lhs.workers == rhs.workers && lhs.workerIDs == rhs.workerIDs && lhs.deadCount == rhs.deadCount
            && lhs.cancelling == rhs.cancelling && lhs.pausedSince == rhs.pausedSince
            && lhs.eventSeq == rhs.eventSeq && lhs.lastRowID == rhs.lastRowID && lhs.dispatchSerial == rhs.dispatchSerial
    }
}

extension Transition {
    /// Appends an event with the next seq after `base` and the events already in this transition.
    @discardableResult
    mutating func event(_ kind: EventKind, _ job: JobHandle, attempt: UInt32, at now: Moment, after base: UInt64,
                        worker: String = "", record: ULID? = nil, failure: FailureDetail? = nil) -> Event {
        let event = Event(seq: base + UInt64(events.count) + 1, time: now.wall, kind: kind, jobID: job.id, attempt: attempt,
                          sourceName: job.source, workerID: worker, recordID: record, failure: failure)
        events.append(event)
        return event
    }
}
