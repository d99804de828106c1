import Synchronization

/// The longest one attempt may run on a processing thread: the lower of
/// the job's own limit (SUBMIT frame 12, sent in its JOB) and the worker's
/// `--job-timeout`. Which one it is goes into the failure's reason, so the
/// person reading it knows which knob to turn.
struct JobTimeLimit: Sendable, Equatable {
    var duration: Duration
    /// True when it is the job's own limit, false for the worker's.
    var isJobs: Bool

    /// The lower of the two, nil when neither is set.
    static func of(job seconds: UInt32?, worker: Duration?) -> JobTimeLimit? {
        let own = seconds.map { JobTimeLimit(duration: .seconds(Int64($0)), isJobs: true) }
        let workers = worker.map { JobTimeLimit(duration: $0, isJobs: false) }
        guard let own else { return workers }
        guard let workers else { return own }
        return workers.duration < own.duration ? workers : own
    }

    /// "the job's time limit of 90 s (submit --time-limit)", or the worker's.
    var phrase: String {
        let seconds = duration.components.seconds
        return isJobs ? "the job's time limit of \(seconds) s (submit --time-limit)"
                      : "the worker's time limit of \(seconds) s (--job-timeout)"
    }
}

/// When a processing thread took a job up: written once by that thread,
/// read by the service thread, which holds jobs that wait for a thread as
/// well as running ones and limits only the time they run.
final class RunStart: Sendable {
    /// The instant the offsets count from (the same for every job).
    private let origin: ContinuousClock.Instant
    /// Nanoseconds from `origin` to the start, or -1 before it.
    private let offset = Atomic<Int64>(-1)

    init(origin: ContinuousClock.Instant) {
        self.origin = origin
    }

    func mark(_ instant: ContinuousClock.Instant) {
        let (seconds, attoseconds) = (instant - origin).components
        offset.store(max(0, seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000), ordering: .releasing)
    }

    /// When the job started, nil while it waits for a thread.
    var instant: ContinuousClock.Instant? {
        let nanoseconds = offset.load(ordering: .acquiring)
        return nanoseconds < 0 ? nil : origin + .nanoseconds(nanoseconds)
    }
}
