import DarkroomCore

/// How much credit a worker grants: enough jobs to keep its processing
/// threads busy across the round trips to the broker and to the storage
/// node, no more than its input bytes may hold, never more than its slots.
///
/// A job holds its place from the CREDIT that asks for it to the DONE that
/// reports it: the CREDIT travels to the broker and the JOB back (the broker
/// round trip), the job is processed on a thread, and its result travels to
/// the storage node and STORED back (the store round trip). For the threads
/// never to wait, the jobs in that cycle must cover it (Little's law):
///
///     needed = threads × (job time + broker round trip + store round trip) / job time
///
/// where the job time is the processing time of one job on one thread. The
/// target is that plus a quarter, for the jitter of batched credit and
/// bursty dispatch, plus one spare job per thread; at least the threads
/// (never starve), at most the slots declared in READY (DRK1 forbids credit
/// beyond them), and at most as many jobs as the input budget holds at the
/// average input size. Before the first JOB shows an input size, inputs
/// count as large ones (`assumedInputBytes`), so a small budget is not
/// overrun by the first CREDIT.
///
/// Pure: it keeps no clock and touches no socket. The worker feeds it what
/// it measured, each sample with the time it was taken (any monotonic
/// origin), and asks for the target and for how much credit to grant.
///
/// The estimates:
/// * job time: a moving average (each job counts a quarter), so larger or
///   slower jobs shrink the target within a few jobs;
/// * round trips: the shortest sample of the last `window` (and always the
///   latest one, however old). The shortest, because time a message spends
///   queued behind others is not a round trip: a mean would grow with the
///   very backlog the credit creates. The broker's round trip is the time
///   from a CREDIT to the JOB it brings, which includes the broker's
///   dispatch, but a CREDIT the broker had no job for waits for one to be
///   submitted; PING answers bound it: it counts at most
///   `dispatchAllowance` more than a PING's round trip.
struct CreditPlanner: Sendable, Equatable {
    /// The fixed bounds of one worker.
    struct Limits: Sendable, Equatable {
        /// Processing threads: the target never goes below this, unless
        /// the input budget allows fewer jobs.
        var threads: Int
        /// The slots declared in READY: the target never exceeds them.
        var slots: Int
        /// The most input bytes the held jobs may take: each job counts
        /// its input from its JOB to its DONE or FAIL.
        var inputBudget: Int
    }

    let limits: Limits

    /// How far back the round-trip minimums look.
    static let window: Duration = .seconds(2)
    /// How much longer than a PING's round trip a CREDIT may wait for its
    /// JOB and still count as a round trip: the broker's dispatch (a commit
    /// or two under load). Longer is a broker with nothing to dispatch.
    static let dispatchAllowance: Duration = .milliseconds(50)
    /// Extra room above the jobs the round trips need, as a fraction.
    static let headroom = 0.25
    /// The input size assumed before the first JOB shows one: a large
    /// photo, so that the first credit fits the budget whatever comes.
    static let assumedInputBytes = 16 << 20
    /// The weight of each new sample in the moving averages.
    static let smoothing = 0.25

    /// Processing time of one job on one thread, in seconds (moving average).
    private(set) var jobSeconds: Double?
    /// Input bytes of one job (moving average).
    private(set) var averageInputBytes: Double?
    private var creditToJob = RecentMinimum()
    private var ping = RecentMinimum()
    private var store = RecentMinimum()

    init(_ limits: Limits) {
        self.limits = Limits(threads: max(1, limits.threads), slots: max(1, limits.slots), inputBudget: max(1, limits.inputBudget))
    }

    // MARK: Samples

    /// A job took `elapsed` on its processing thread.
    mutating func noteJob(_ elapsed: Duration) {
        jobSeconds = CreditPlanner.average(jobSeconds, max(0, elapsed.fractionalSeconds))
    }

    /// A JOB brought an input of `bytes`.
    mutating func noteInput(bytes: Int) {
        averageInputBytes = CreditPlanner.average(averageInputBytes, Double(max(0, bytes)))
    }

    /// A JOB came `elapsed` after the CREDIT that asked for it.
    mutating func noteCreditToJob(_ elapsed: Duration, at now: Duration) {
        creditToJob.add(elapsed, at: now)
    }

    /// A PONG came `elapsed` after its PING.
    mutating func notePing(_ elapsed: Duration, at now: Duration) {
        ping.add(elapsed, at: now)
    }

    /// A STORED came `elapsed` after its STORE.
    mutating func noteStore(_ elapsed: Duration, at now: Duration) {
        store.add(elapsed, at: now)
    }

    // MARK: Estimates

    /// The round trip to the broker: CREDIT to JOB, bounded by PING (above).
    func brokerRoundTrip(at now: Duration) -> Duration? {
        let pinged = ping.minimum(at: now)
        guard let dispatched = creditToJob.minimum(at: now) else { return pinged }
        guard let pinged else { return dispatched }
        return min(max(dispatched, pinged), pinged + CreditPlanner.dispatchAllowance)
    }

    /// The round trip to the storage node: STORE to STORED.
    func storeRoundTrip(at now: Duration) -> Duration? {
        store.minimum(at: now)
    }

    /// The processing time of one job on one thread.
    var jobTime: Duration? {
        jobSeconds.map { Duration.seconds($0) }
    }

    /// The target before anything is measured: two jobs per thread, one
    /// running and one on its way.
    var startingTarget: Int { 2 * limits.threads }

    /// The most jobs the input budget holds at the average input size.
    var jobsInBudget: Int {
        let size = max(1, averageInputBytes ?? Double(CreditPlanner.assumedInputBytes))
        return max(1, Int(min(Double(Int.max / 2), Double(limits.inputBudget) / size)))
    }

    /// The jobs (held plus credit outstanding) to aim for now.
    func target(at now: Duration) -> Int {
        let threads = limits.threads
        var wanted = startingTarget
        if let jobSeconds {
            let broker = brokerRoundTrip(at: now)
            let store = storeRoundTrip(at: now)
            let trips = (broker?.fractionalSeconds ?? 0) + (store?.fractionalSeconds ?? 0)
            // A job measured at 0 (a clock too coarse, a job that failed at
            // once) counts as a microsecond, so the ratio stays finite; the
            // slots bound the result anyway.
            let cycle = (jobSeconds + trips) / max(jobSeconds, 1e-6)
            let needed = Double(threads) * cycle * (1 + CreditPlanner.headroom) + Double(threads)
            // Round trips not measured yet count as nothing: even then the
            // result is above the starting target (2.25 jobs per thread).
            wanted = Int(min(needed.rounded(.up), Double(Int.max / 2)))
        }
        wanted = min(max(wanted, threads), limits.slots)
        return max(1, min(wanted, jobsInBudget))
    }

    /// The credit to grant now, given the jobs held, the input bytes they
    /// take and the credit already outstanding: up to the target, and only
    /// as much as the input budget has room for at the average input size.
    /// With nothing held and nothing outstanding it grants at least one,
    /// however large the jobs: a worker must never stall with an idle queue.
    func creditToGrant(held: Int, heldBytes: Int, outstanding: Int, at now: Duration) -> Int {
        let size = max(1, averageInputBytes ?? Double(CreditPlanner.assumedInputBytes))
        var grant = target(at: now) - held - outstanding
        let room = Double(limits.inputBudget) - Double(heldBytes) - Double(outstanding) * size
        grant = min(grant, room > 0 ? Int(min(room / size, Double(Int.max / 2))) : 0)
        grant = min(grant, limits.slots - held - outstanding)
        if held + outstanding == 0 { grant = max(grant, 1) }
        return max(0, grant)
    }

    private static func average(_ old: Double?, _ sample: Double) -> Double {
        guard let old else { return sample }
        return old + (sample - old) * smoothing
    }
}

/// The smallest of the samples taken within `CreditPlanner.window` of a
/// moment, or the latest sample when all are older. Kept as a queue whose
/// values rise from front to back: a sample that is both older and larger
/// than another can never be the minimum again, so it is dropped.
struct RecentMinimum: Sendable, Equatable {
    private var samples: [(at: Duration, value: Duration)] = []

    static func == (a: RecentMinimum, b: RecentMinimum) -> Bool {
        a.samples.elementsEqual(b.samples) { $0.at == $1.at && $0.value == $1.value }
    }

    mutating func add(_ value: Duration, at now: Duration) {
        let value = max(value, .zero)
        while let last = samples.last, last.value >= value { samples.removeLast() }
        samples.append((now, value))
        // The front is the oldest: drop what has left the window, keeping
        // the newest in any case.
        let oldest = now - CreditPlanner.window
        let stale = samples.prefix { $0.at < oldest }.count
        if stale > 0 { samples.removeFirst(min(stale, samples.count - 1)) }
    }

    func minimum(at now: Duration) -> Duration? {
        let oldest = now - CreditPlanner.window
        return samples.first { $0.at >= oldest }?.value ?? samples.last?.value
    }
}

/// The credit granted to the broker that no JOB has used yet, kept as the
/// grants in the order they were sent: a JOB uses the oldest unit, and the
/// time since that grant is a sample of the broker's round trip.
struct OutstandingCredit {
    private var grants: [(at: ContinuousClock.Instant, count: Int)] = []
    /// The units granted and not yet used.
    private(set) var count = 0

    /// Notes `units` granted at `now`.
    mutating func grant(_ units: Int, at now: ContinuousClock.Instant) {
        guard units > 0 else { return }
        count += units
        grants.append((now, units))
    }

    /// Uses the oldest unit and returns when it was granted; nil when none
    /// is outstanding.
    mutating func use() -> ContinuousClock.Instant? {
        guard !grants.isEmpty else { return nil }
        let granted = grants[0].at
        count -= 1
        grants[0].count -= 1
        if grants[0].count == 0 { grants.removeFirst() }
        return granted
    }

    /// A new session with the broker, which forgot every grant.
    mutating func reset() {
        grants = []
        count = 0
    }
}
