import DarkroomCore
import Synchronization

/// A snapshot of a worker's state, for status output and health checks.
/// The service thread publishes it after every loop turn.
public struct WorkerStatus: Sendable, Equatable {
    /// The slots declared to the broker (`WorkerConfiguration.slots`).
    public var slots: Int
    /// Jobs holding a slot now: being processed or waiting for STORED.
    public var running: Int = 0
    /// The most jobs that ever held a slot at once; never above `slots`.
    public var peakRunning: Int = 0
    /// Jobs reported DONE.
    public var done: Int = 0
    /// Jobs reported FAIL (including jobs handed back).
    public var failed: Int = 0
    /// Of those, the jobs stopped at their time limit (`job.timeout`).
    public var timedOut: Int = 0
    /// Broker sessions opened (READY sent); more than 1 after a reconnect.
    public var sessions: Int = 0
    /// Whether a broker connection is open (false while waiting to reconnect).
    public var connected: Bool = false
    /// Whether `stop` was called: no new jobs are taken.
    public var stopping: Bool = false
    /// The longest the broker has gone without sending this worker anything,
    /// over the life of the worker: on each connection, the longest gap
    /// from READY or a message to the next message, or to the end of the
    /// connection. Any message counts (HEARTBEAT too); time with no
    /// connection does not. A broker that heartbeats as DRK1 asks keeps it
    /// near 1 s; one that stalls shows its stall here.
    public var longestBrokerSilence: Duration = .zero
    /// How long each stage of the jobs took, over the life of the worker.
    public var stageTimes = JobStageTimes()

    // Credit (see `CreditPlanner`).
    /// The jobs (held plus credit outstanding) the worker aims for now:
    /// enough to keep its threads busy across both round trips, within
    /// `slots` and the input budget.
    public var creditTarget: Int = 0
    /// The highest `creditTarget` so far.
    public var peakCreditTarget: Int = 0
    /// Credit granted on the current connection that no JOB has used yet.
    public var creditOutstanding: Int = 0
    /// Processing threads.
    public var threads: Int = 0
    /// The most input bytes the worker holds (`WorkerConfiguration.inputBudget`).
    public var inputBudget: Int = 0
    /// The input bytes of the jobs held now, each counted from its JOB to
    /// its DONE or FAIL.
    public var heldBytes: Int = 0
    /// The most input bytes ever held at once.
    public var peakHeldBytes: Int = 0
    /// The measured processing time of one job on one thread (a moving
    /// average); nil before the first job.
    public var jobTime: Duration?
    /// The measured round trip to the broker (CREDIT to JOB, bounded by
    /// PING); nil before the first sample.
    public var brokerRoundTrip: Duration?
    /// The measured round trip to the storage node (STORE to STORED).
    public var storeRoundTrip: Duration?

    public init(slots: Int) { self.slots = slots }
}

/// The stages of a job a worker times: the compound operation's three
/// (decode, the pipeline's steps together, the two encodings) and the
/// round trip to the storage node.
public enum JobStage: String, Sendable, CaseIterable {
    /// Reading the JPEG into pixels (shrunk and cropped on load where the plan allows).
    case decode
    /// Every pipeline step, together (0 when the decoder did them all).
    case pipeline
    /// Encoding the full-resolution result.
    case encodeFull = "encode_full"
    /// Making and encoding the thumbnail.
    case encodeThumbnail = "encode_thumbnail"
    /// From the first STORE sent to its STORED: the storage node's commit and
    /// both ways over the network, resends included.
    case store

    /// Its place in `allCases`, without building that array.
    var index: Int {
        switch self {
        case .decode: 0
        case .pipeline: 1
        case .encodeFull: 2
        case .encodeThumbnail: 3
        case .store: 4
        }
    }
}

/// A histogram of seconds per `JobStage`. A job that fails counts in the
/// stages it finished; a job stored counts in all five, so each stage's
/// count, `store` above all, follows the jobs done.
public struct JobStageTimes: Sendable, Equatable {
    /// Bucket bounds in seconds: from a tiny job's half millisecond to a
    /// 50-megapixel image's seconds, at about 2.5× steps.
    public static let bounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    private var histograms = Array(repeating: Histogram(bounds: JobStageTimes.bounds), count: JobStage.allCases.count)

    public init() {}

    public subscript(stage: JobStage) -> Histogram {
        histograms[stage.index]
    }

    mutating func record(_ stage: JobStage, _ duration: Duration) {
        histograms[stage.index].record(max(0, duration.fractionalSeconds))
    }
}

/// Where the service thread leaves its latest `WorkerStatus` for other threads.
///
/// The stage times are kept apart and recorded in place, under their own
/// lock: the service thread records up to five values per job, and a
/// histogram inside the published status would be copied whole (its
/// buckets with it) on the first record after every publish. Readers get
/// both in one `WorkerStatus`.
final class StatusBoard: Sendable {
    private let value: Mutex<WorkerStatus>
    private let stages = Mutex(JobStageTimes())
    init(slots: Int) { value = Mutex(WorkerStatus(slots: slots)) }
    func publish(_ status: WorkerStatus) { value.withLock { $0 = status } }
    func record(_ stage: JobStage, _ duration: Duration) { stages.withLock { $0.record(stage, duration) } }
    var current: WorkerStatus {
        var status = value.withLock { $0 }
        status.stageTimes = stages.withLock { $0 }
        return status
    }
}
