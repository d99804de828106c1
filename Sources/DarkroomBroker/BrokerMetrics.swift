import DarkroomProtocol

/// What the broker's metrics show (`Broker.metrics`): the status a STATUS
/// request would get, and the jobs counted since the broker started.
public struct BrokerMetrics: Sendable, Equatable {
    /// The queue by priority, the delayed, in-flight and dead jobs, the
    /// event seq and each connected worker, with `time` the moment it was
    /// read and each worker's `lastHeartbeat` when it was last heard (both
    /// Unix ms, broker clock).
    public var status: BrokerStatus
    /// Jobs accepted (committed) since the broker started.
    public var accepted: UInt64
    /// Jobs stored (DONE committed) since the broker started.
    public var stored: UInt64
    /// Attempts that failed since the broker started (a FAIL, or a worker
    /// lost with the job): a job retried twice counts twice.
    public var failed: UInt64
    /// Jobs ended cancelled since the broker started (CANCEL, or a
    /// deadline passed), and of those the ones whose deadline passed.
    public var cancelled: UInt64
    public var expired: UInt64
    /// Input files mapped for JOBs now, sent or waiting for their workers
    /// to read them; past the cap (16,384) inputs are read into memory.
    public var mappedInputs: UInt64

    public init(status: BrokerStatus, accepted: UInt64, stored: UInt64, failed: UInt64, cancelled: UInt64 = 0, expired: UInt64 = 0,
                mappedInputs: UInt64 = 0) {
        self.status = status
        self.accepted = accepted
        self.stored = stored
        self.failed = failed
        self.cancelled = cancelled
        self.expired = expired
        self.mappedInputs = mappedInputs
    }
}
