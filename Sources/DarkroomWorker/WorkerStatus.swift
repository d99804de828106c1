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

    public init(slots: Int) { self.slots = slots }
}

/// Where the service thread leaves its latest `WorkerStatus` for other threads.
final class StatusBoard: Sendable {
    private let value: Mutex<WorkerStatus>
    init(slots: Int) { value = Mutex(WorkerStatus(slots: slots)) }
    func publish(_ status: WorkerStatus) { value.withLock { $0 = status } }
    var current: WorkerStatus { value.withLock { $0 } }
}
