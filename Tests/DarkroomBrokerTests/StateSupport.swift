@testable import DarkroomBroker
import DarkroomProtocol
import Testing

/// A `BrokerState` driven the way the broker's core drives it, without a
/// database: plan, then apply. Every plan run through `plan` is checked to
/// leave the state exactly as it found it, and every transition applied
/// through `apply` to number its events right after the state's newest and
/// its new rows right after the state's highest rowid.
struct StateDriver {
    static let policy = RetryPolicy(maxAttempts: 3, backoffBase: 1_000, backoffCap: 60_000, jitter: 0.25)
    static let start = Moment(wall: 1_700_000_000_000, monotonic: 500_000)

    var state: BrokerState
    var now: Moment
    private var serial: UInt64

    init(policy: RetryPolicy = StateDriver.policy, reclaimWindow: UInt64 = 6_000, reconnectWindow: UInt64 = 3_000,
         random: @escaping @Sendable () -> Double = { 0.5 }, loaded: BrokerState.Loaded = .init(),
         now: Moment = StateDriver.start, firstID: UInt64 = 1) {
        self.now = now
        serial = firstID
        state = BrokerState(policy: policy, reclaimWindow: reclaimWindow, reconnectWindow: reconnectWindow, random: random,
                            loaded: loaded, now: now)
    }

    /// Job ids in submission order.
    mutating func newID() -> ULID {
        defer { serial += 1 }
        return StateDriver.id(serial)
    }

    static func id(_ serial: UInt64) -> ULID {
        ULID(milliseconds: StateDriver.start.wall, randomHigh: 0, randomLow: serial)
    }

    static func identity(_ name: String) -> [UInt8] { Array("connection-\(name)".utf8) }

    mutating func advance(_ milliseconds: UInt64) {
        now.wall += milliseconds
        now.monotonic += milliseconds
    }

    /// Runs a plan against the state and checks that it changed nothing.
    func plan<T>(_ make: (BrokerState) -> T, sourceLocation: SourceLocation = #_sourceLocation) -> T {
        let before = state
        let result = make(state)
        #expect(state == before, "a plan changed the state", sourceLocation: sourceLocation)
        return result
    }

    /// Applies a transition as the core does once its writes succeeded.
    mutating func apply(_ t: Transition, sourceLocation: SourceLocation = #_sourceLocation) {
        let base = state.eventSeq
        #expect(t.events.map(\.seq) == (0..<UInt64(t.events.count)).map { base + 1 + $0 },
                "events are numbered right after the state's newest", sourceLocation: sourceLocation)
        var rowID = state.lastRowID
        for case let .insert(job, acceptedSeq, _) in t.writes {
            rowID += 1
            #expect(job.handle.rowID == rowID, "new rows are numbered right after the highest", sourceLocation: sourceLocation)
            #expect(t.events.contains { $0.seq == acceptedSeq && $0.kind == .accepted && $0.jobID == job.handle.id },
                    sourceLocation: sourceLocation)
        }
        state.apply(t, now: now)
        if let last = t.events.last {
            #expect(state.eventSeq == last.seq, sourceLocation: sourceLocation)
        }
    }

    /// Plans and applies an accept; returns the job as queued.
    @discardableResult
    mutating func accept(priority: UInt8 = 0, source: String = "a.jpg", file: Bool = false, key: String? = nil, expires: UInt64 = 0,
                         sourceLocation: SourceLocation = #_sourceLocation) -> JobHandle {
        let id = newID()
        let now = self.now
        let t = plan({ $0.planAccept(id: id, priority: priority, source: source, options: .default, pipeline: "crop:square",
                                     inlineInput: file ? nil : [0xFF, 0xD8, UInt8(truncatingIfNeeded: id.low)],
                                     inputFile: file ? id.description : nil, inputBytes: 3, submitKey: key, expires: expires, now: now) },
                     sourceLocation: sourceLocation)
        apply(t, sourceLocation: sourceLocation)
        guard case .waiting(let job) = state.place(of: id) else {
            Issue.record("an accepted job is not waiting", sourceLocation: sourceLocation)
            return JobHandle(id: id, priority: priority, source: source, rowID: 0)
        }
        return job
    }

    /// READY from `worker` on its connection (`connection` names another), then CREDIT.
    @discardableResult
    mutating func register(_ worker: String, connection: String? = nil, slots: UInt32 = 4, credit: UInt32 = 0) -> [[UInt8]] {
        let forgotten = state.register(Ready(workerID: worker, host: "host", pid: 1, slots: slots),
                                       identity: StateDriver.identity(connection ?? worker), now: now)
        if credit > 0 { _ = state.grant(credit, worker: worker) }
        return forgotten
    }

    /// The first message after `worker`'s READY: HOLDING with `holding`
    /// (empty: any other message), which settles its held jobs.
    mutating func settle(_ worker: String, holding: [Holding.Entry], sourceLocation: SourceLocation = #_sourceLocation) {
        let now = self.now
        apply(plan({ $0.planSettle(worker, holding: holding, now: now) }, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
    }

    /// Plans and applies the next dispatch, if any.
    @discardableResult
    mutating func dispatch(sourceLocation: SourceLocation = #_sourceLocation) -> Lease? {
        let now = self.now
        guard let (t, lease) = plan({ $0.planDispatch(now: now) }, sourceLocation: sourceLocation) else { return nil }
        apply(t, sourceLocation: sourceLocation)
        return lease
    }

    /// Dispatches until no worker can take a job.
    mutating func dispatchAll() -> [Lease] {
        var leases: [Lease] = []
        while let lease = dispatch() { leases.append(lease) }
        return leases
    }

    /// Plans a FAIL from a worker's connection and applies it when it counts.
    @discardableResult
    mutating func fail(_ lease: Lease, from connection: String? = nil, retryable: Bool = true, code: String = "internal",
                       reason: String = "boom", sourceLocation: SourceLocation = #_sourceLocation) -> Transition? {
        let message = Fail(jobID: lease.job.id, attempt: lease.job.attempt, retryable: retryable,
                           failure: FailureDetail(code: code, reason: reason))
        let identity = StateDriver.identity(connection ?? lease.worker)
        let now = self.now
        guard let t = plan({ $0.planFail(message, from: identity, now: now) }, sourceLocation: sourceLocation) else { return nil }
        apply(t, sourceLocation: sourceLocation)
        return t
    }

    /// What the queue database would hold for this state: its waiting jobs,
    /// its leases (held or not), and the counters (with `lastRowID` as the
    /// highest rowid still in use, which is what a database reports).
    func loaded(lastRowID: Int64? = nil) -> BrokerState.Loaded {
        var loaded = BrokerState.Loaded()
        loaded.queued = state.ready.all.sorted { $0.job.id < $1.job.id }
        loaded.leased = (Array(state.leases.values) + state.held.values.map(\.lease)).sorted { $0.job.id < $1.job.id }
        loaded.cancelling = state.cancelling
        loaded.pausedSince = state.pausedSince
        loaded.deadCount = state.deadCount
        loaded.eventSeq = state.eventSeq
        loaded.lastRowID = lastRowID ?? state.lastRowID
        return loaded
    }
}

/// A `Loaded` in a form that compares: jobs sorted by id.
struct LoadedSummary: Equatable, CustomStringConvertible {
    var queued: [String]
    var leased: [String]
    var cancelling: [String]
    var pausedSince: UInt64?
    var deadCount: Int
    var eventSeq: UInt64
    var lastRowID: Int64

    /// A job whose time has come by `now` (Unix ms) counts as ready (0),
    /// as the ready queue reports it.
    init(_ loaded: BrokerState.Loaded, now: UInt64 = 0) {
        queued = loaded.queued.sorted { $0.job.id < $1.job.id }.map {
            "\($0.job.id) p\($0.job.priority) row \($0.job.rowID) attempt \($0.job.attempt)/\($0.job.attemptBase) \($0.job.source) \($0.job.inputFile ?? "inline") at \($0.notBefore <= now ? 0 : $0.notBefore)"
        }
        leased = loaded.leased.sorted { $0.job.id < $1.job.id }.map {
            "\($0.job.id) p\($0.job.priority) row \($0.job.rowID) attempt \($0.job.attempt)/\($0.job.attemptBase) \($0.job.source) \($0.job.inputFile ?? "inline") to \($0.worker)"
        }
        cancelling = loaded.cancelling.sorted().map(\.description)
        pausedSince = loaded.pausedSince
        deadCount = loaded.deadCount
        eventSeq = loaded.eventSeq
        lastRowID = loaded.lastRowID
    }

    var description: String {
        "queued \(queued), leased \(leased), cancelling \(cancelling), paused since \(pausedSince.map(String.init) ?? "-"), dead \(deadCount), event seq \(eventSeq), last rowid \(lastRowID)"
    }
}

// Swift Testing's `#expect` and `#require` take apart the expression they
// are given, which rules out mutating calls and closures inside it; these
// take values instead.

/// The value, or a recorded issue and a thrown error when there is none.
func unwrap<T>(_ value: T?, _ what: String = "a value", sourceLocation: SourceLocation = #_sourceLocation) throws -> T {
    guard let value else {
        Issue.record("expected \(what), got nil", sourceLocation: sourceLocation)
        throw Missing(what: what)
    }
    return value
}

struct Missing: Error {
    let what: String
}

func expectEqual<T: Equatable>(_ actual: T, _ expected: T, _ comment: Comment? = nil,
                               sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(actual == expected, comment, sourceLocation: sourceLocation)
}

func check(_ condition: Bool, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(condition, comment, sourceLocation: sourceLocation)
}

extension JobPayload {
    /// The input a JOB carries, whether inline or sent from its mapped file.
    var input: [UInt8] {
        file.map { $0.withUnsafeBytes { Array($0) } } ?? image
    }
}
