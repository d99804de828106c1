import DarkroomProtocol

/// One decision of the broker, made by `BrokerState` without touching
/// anything: the rows to write and the events to append (together, in one
/// savepoint of the turn's transaction), then the changes to the in-memory
/// state, applied only once the writes have succeeded. A decision whose
/// writes fail therefore leaves neither rows nor memory half-changed.
struct Transition: Sendable {
    var writes: [QueueWrite] = []
    /// The events, with their seqs already assigned (gapless after the
    /// state's `eventSeq`).
    var events: [Event] = []
    var changes: [StateChange] = []
    /// Jobs this decision accepts, stores or fails, for the rates.
    var accepted = 0
    var stored = 0
    var failed = 0
    var cancelled = 0
    /// Of `cancelled`, the jobs whose deadline passed.
    var expired = 0
    /// Lines for the log once the transition is committed.
    var notes: [String] = []

    var isEmpty: Bool { writes.isEmpty && events.isEmpty && changes.isEmpty }
}

/// A row change in the queue database. Events are written separately
/// (`Transition.events`).
enum QueueWrite: Sendable, Equatable {
    /// Insert a queued job, its inline input (if any) and its submit key
    /// (named by the seq of its `accepted` event).
    case insert(NewJob, acceptedSeq: UInt64, at: UInt64)
    /// Mark a queued job leased to `worker` with `job.attempt`; the store
    /// reads the JOB's payload while it is at it.
    case lease(JobHandle, worker: String)
    /// Delete a stored job with its inline input; its input file goes after the commit.
    case delete(JobHandle)
    /// Put a job back in the queue, ready at `notBefore` (Unix ms; 0 = now),
    /// with `job.attemptBase` and the failure that sent it back.
    case requeue(JobHandle, notBefore: UInt64, failure: FailureDetail?)
    /// Move a job to the dead-letter set.
    case bury(JobHandle, failure: FailureDetail, at: UInt64)
    /// Move a dead job back to the queue; its budget starts again from `job.attempt`.
    case revive(JobHandle)
    /// Mark a leased job as asked to stop (CANCEL) at `at` (Unix ms), so
    /// that the broker asks its worker again after a restart.
    case requestCancel(JobHandle, at: UInt64)
    /// Record that dispatch is paused since `since` (Unix ms), or runs (nil).
    case pause(since: UInt64?)
}

/// A change to the in-memory state, applied after the writes succeeded.
enum StateChange: Sendable, Equatable {
    /// A job joins the ready queue (now, or at `notBefore`).
    case enqueue(JobHandle, notBefore: UInt64)
    /// A job leaves the ready queue (dispatched or finished).
    case unqueue(ULID)
    /// A job is leased to its worker; `usesCredit` when it is a new JOB
    /// (a job the worker reclaimed uses no credit).
    case lease(Lease, usesCredit: Bool)
    /// A lease ends (the job finished, failed or was handed back).
    case release(ULID)
    /// A held lease ends (reclaimed, requeued or finished).
    case unhold(ULID)
    /// A job enters (+1) or leaves (−1) the dead-letter set.
    case deadCount(Int)
    /// A worker's held jobs from an earlier connection are settled.
    case settled(worker: String)
    /// A worker is gone: it leaves the registry once its leases have been released.
    case forget(worker: String)
    /// CANCEL asked the worker running this job to stop; the job ends
    /// `cancelled` when the worker answers (or is lost).
    case cancelling(ULID)
    /// PAUSE stopped dispatch at `since` (Unix ms), or RESUME started it (nil).
    case paused(since: UInt64?)
}
