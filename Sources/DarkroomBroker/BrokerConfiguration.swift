import DarkroomProtocol
import DarkroomZMQ

/// Everything the broker can be tuned with. The defaults are the documented
/// DRK1 defaults (`protocol/drk1.md`), so `BrokerConfiguration()` is the
/// broker `darkroom up` runs.
public struct BrokerConfiguration: Sendable {
    /// ROUTER for producers and admin clients.
    public var frontendEndpoint: String = Wire.Endpoint.frontend
    /// ROUTER for workers.
    public var backendEndpoint: String = Wire.Endpoint.backend
    /// XPUB (a PUB to subscribers) for lifecycle events.
    public var eventsEndpoint: String = Wire.Endpoint.events
    /// An `inproc://` endpoint the backend ROUTER also binds, for workers
    /// in the same process (`darkroom up`): their messages then pass between
    /// threads without TCP or the I/O threads. Connections over inproc skip
    /// CURVE and ZAP (libzmq runs no security handshake in-process), so
    /// their requests are not checked against a key's role.
    public var localBackendEndpoint: String?
    /// Directory of the queue database (`queue.sqlite`) and of the external
    /// input files (`inputs/`). Created if missing.
    public var dataDirectory: String = "darkroom-data/broker"
    /// CURVE keys: when set, the frontend, backend and events sockets are
    /// CURVE servers in the ZAP domains "frontend", "backend" and "events",
    /// and a ZAP handler on the same context decides who may connect.
    public var curve: ServerCurve?
    /// With keys: whether a connection's key (as its ZAP user id names it)
    /// is still admitted. Asked for every request and worker message, so a
    /// key revoked while the broker runs (the allowlist reloaded) is
    /// refused from its next message on; nil admits every connection ZAP
    /// admitted.
    public var admission: (@Sendable (ConnectionIdentity) -> Bool)?

    /// Jobs waiting (ready plus delayed) at which SUBMIT gets `queue-full`.
    public var maxQueueDepth: Int = 100_000
    /// The largest image a SUBMIT may carry; larger ones get `too-large`.
    public var maxImageBytes: Int = Wire.maxImageBytes
    /// Dispatches a job gets before a retryable failure makes it dead. A job
    /// revived by DEAD-RETRY gets this many more.
    public var maxAttempts: Int = 5
    /// Backoff after the first retryable failure; doubles with each attempt.
    public var retryBackoffBase: Duration = .seconds(1)
    /// The longest backoff.
    public var retryBackoffCap: Duration = .seconds(60)
    /// Each backoff is multiplied by a random factor in 1 ± this (0.25 = ±25%).
    public var retryJitter: Double = 0.25
    /// The broker sends HEARTBEAT to a worker it has sent nothing else to for this long.
    public var heartbeatInterval: Duration = .milliseconds(Int64(Wire.heartbeatIntervalMilliseconds))
    /// A worker silent for this many intervals is dead; its jobs are requeued at once.
    public var heartbeatLiveness: Int = Int(Wire.heartbeatLiveness)
    /// Input images larger than this are kept in content-addressed files
    /// next to the database instead of inside it.
    public var inputBlobThreshold: Int = 100 * 1024
    /// Most workers' messages one turn of the core applies before it
    /// commits (one group commit); the rest wait for the next turn. (The
    /// switchboard also reads at most this many messages a socket at once.)
    public var maxMessagesPerTurn: Int = 1_000
    /// Most inline input bytes one turn writes before it commits, so a
    /// burst of large SUBMITs is committed in pieces.
    public var maxTurnBytes: Int = 32 << 20
    /// How long one turn goes on taking messages before it commits.
    public var maxTurnDuration: Duration = .milliseconds(200)
    /// Most clients' messages (SUBMITs above all) one turn takes, after
    /// the workers' messages: the jobs a turn hands to workers leave only
    /// with its commit, and a turn of a thousand accepts keeps workers
    /// with tiny jobs idle for tens of milliseconds.
    public var maxClientMessagesPerTurn: Int = 256
    /// Input bytes handed to the core and not yet queued (waiting for a
    /// turn, or being written to a file) above which the broker stops
    /// reading SUBMITs until the core catches up. Heartbeats, PING and
    /// STATUS are answered meanwhile.
    public var maxBacklogBytes: Int = 256 << 20
    /// Threads that write large inputs to their files.
    public var inputWriterThreads: Int = 2
    /// How long jobs that were leased when the broker stopped wait for
    /// their workers to come back and say they still run them (HOLDING),
    /// before they are requeued as lost. Nil: two liveness periods.
    public var reclaimWindow: Duration?
    /// Caps the queue database at this many pages (SQLite's
    /// `max_page_count`); nil leaves it to the disk. When the cap (or the
    /// disk) is reached, SUBMITs are refused with the reason until space
    /// comes back, and nothing accepted is lost.
    public var maxDatabasePages: Int?
    /// Most events one REPLAY answer carries (also used when REPLAY asks for 0).
    public var replayBatchLimit: Int = 2_000
    /// Window of the rates in STATUS.
    public var rateWindowSeconds: Int = 10
    /// Events and submit keys older than this are deleted, a batch at a
    /// time; nil keeps them forever. (A stored job's own row goes as soon
    /// as it is stored; its events keep its history.) Dead jobs stay until
    /// they are retried or discarded, and the newest event always stays, so
    /// sequence numbers carry on after a restart. A REPLAY from before the
    /// oldest kept event starts at the oldest kept event.
    public var retention: Duration? = .seconds(7 * 86_400)
    /// How often the broker looks for rows past the retention. While a pass
    /// finds a full batch, the next follows a second later.
    public var pruneInterval: Duration = .seconds(60)
    /// Most rows of each kind (events, submit keys) one pass deletes.
    public var pruneBatch: Int = 10_000

    public init() {}

    public init(dataDirectory: String) {
        self.dataDirectory = dataDirectory
    }

    var heartbeatIntervalMilliseconds: Int64 { max(1, heartbeatInterval.milliseconds) }
    var livenessMilliseconds: Int64 { heartbeatIntervalMilliseconds * Int64(max(1, heartbeatLiveness)) }
    var reclaimWindowMilliseconds: Int64 { reclaimWindow.map { max(0, $0.milliseconds) } ?? 2 * livenessMilliseconds }
}
