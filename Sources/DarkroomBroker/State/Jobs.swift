import DarkroomProtocol

/// What the broker keeps in memory about a job that is waiting or in
/// flight: everything its decisions need, never the input bytes.
struct JobHandle: Sendable, Equatable {
    let id: ULID
    /// `id` as text, the key of the job's rows: made once per job rather
    /// than for every statement that names it.
    let idText: String
    var priority: UInt8
    var source: String
    /// The job's rowid in the queue database. The state assigns it, so a
    /// decision is complete before anything is written.
    var rowID: Int64
    /// The number of the latest dispatch (0 before the first).
    var attempt: UInt32
    /// `attempt` when the job's retry budget last started again: when it
    /// was revived from the dead-letter set, or after a dispatch that did
    /// not count (handed back by a stopping worker, dropped by a worker
    /// that reconnected).
    var attemptBase: UInt32
    /// The input's file in the broker's `inputs/` directory; nil when the
    /// input is inline in the database.
    var inputFile: String?
    /// The job's own most counted attempts (SUBMIT frame 10); nil for the
    /// broker's `RetryPolicy.maxAttempts`.
    var maxAttempts: UInt16?
    /// The job's deadline (SUBMIT frame 11, Unix ms): no dispatch after
    /// it; 0 for none.
    var expires: UInt64

    init(id: ULID, priority: UInt8, source: String, rowID: Int64, attempt: UInt32 = 0, attemptBase: UInt32 = 0, inputFile: String? = nil,
         maxAttempts: UInt16? = nil, expires: UInt64 = 0) {
        self.id = id
        idText = id.description
        self.priority = priority
        self.source = source
        self.rowID = rowID
        self.attempt = attempt
        self.attemptBase = attemptBase
        self.inputFile = inputFile
        self.maxAttempts = maxAttempts
        self.expires = expires
    }

    /// Whether its deadline has passed by `wall` (Unix ms).
    func hasExpired(by wall: UInt64) -> Bool { expires != 0 && expires <= wall }

    /// Dispatches that counted against the retry budget.
    var attemptsUsed: Int { Int(attempt) - Int(attemptBase) }
}

/// A job leased to a worker: its handle (whose `attempt` is the dispatch
/// the worker runs) and the worker's id.
struct Lease: Sendable, Equatable {
    var job: JobHandle
    var worker: String
}

/// A lease whose worker is not connected: after a broker restart, or
/// while a worker opens a new connection. It is not dispatched again until
/// `deadline` (monotonic ms), so the worker can report that it still runs
/// it (HOLDING) without the job being charged an attempt.
struct HeldLease: Sendable, Equatable {
    var lease: Lease
    var deadline: UInt64
}

/// A job being accepted, with what its rows need.
struct NewJob: Sendable, Equatable {
    var handle: JobHandle
    var options: JobOptions
    /// The canonical pipeline text.
    var pipeline: String
    /// The input, when it is kept inline (nil when `handle.inputFile` names its file).
    var inlineInput: [UInt8]?
    var inputBytes: Int
    var submitKey: String?
    /// Unix ms before which no worker gets it (0: at once).
    var notBefore: UInt64 = 0
    /// The longest an attempt may run on a worker, in seconds (SUBMIT
    /// frame 12); 0 for none of its own.
    var timeLimit: UInt32 = 0
}

/// The two clocks a decision needs, read once: wall time (Unix ms) for
/// what is stored and shown, monotonic time (ms) for deadlines.
struct Moment: Sendable, Equatable {
    var wall: UInt64
    var monotonic: UInt64
}
