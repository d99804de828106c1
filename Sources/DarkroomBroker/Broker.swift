import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// The broker service: the durable job queue behind the frontend (producers
/// and clients), the backend (workers) and the events socket (XPUB).
///
/// Two threads, started by `start()`:
///
/// - the switchboard (`Switchboard`) owns the three sockets for their whole
///   life. It never touches the disk, so heartbeats, PING and STATUS are
///   answered within milliseconds whatever the queue is doing;
/// - the core (`BrokerCore`) owns the queue: its state (`BrokerState`) and
///   its SQLite database and input files (`JobStore`). It applies what the
///   switchboard hands it in turns, commits each turn once (group commit),
///   and only then hands back the replies, JOBs and events the turn made.
///
/// Large inputs are written to their files by the input writer's threads.
/// If either thread ends on its own, the other stops too, and `wait()`
/// returns: the broker is one service.
public final class Broker: Sendable {
    public let configuration: BrokerConfiguration
    let context: Context
    let logger: Logger
    private let core = ServiceThread<CoreMessage>(name: "darkroom-queue")
    private let switchboard = ServiceThread<SwitchboardInstruction>(name: "darkroom-broker")
    private let board = StatusBoard()
    private let backlog = Backlog()

    public init(_ configuration: BrokerConfiguration, context: Context, logger: Logger) {
        self.configuration = configuration
        self.context = context
        self.logger = logger
    }

    /// Opens the queue and recovers what a previous run left (on the core's
    /// thread), binds the three endpoints (on the switchboard's), and
    /// returns once both are ready. Throws what stopped it, as it is (a
    /// bind's `ZMQError`, an unusable data directory, a database written by
    /// a newer darkroom), as the storage node does.
    public func start() throws {
        let (configuration, context, logger, board, backlog) = (self.configuration, self.context, self.logger, self.board, self.backlog)
        do {
            try core.start { try BrokerCore(configuration: configuration, context: context, board: board, backlog: backlog, logger: logger) }
        } catch {
            throw Broker.failure(error)
        }
        let core = self.core
        do {
            try switchboard.start {
                try Switchboard(configuration: configuration, context: context, core: { core.post($0) },
                                board: board, backlog: backlog, logger: logger)
            }
        } catch {
            core.post(.stop(graceMilliseconds: 0))
            core.wait()
            throw Broker.failure(error)
        }
        let switchboard = self.switchboard
        core.post(.attach({ switchboard.post($0) }))
    }

    private static func failure<Instruction: Sendable>(_ error: ServiceThread<Instruction>.StartError) -> any Error {
        switch error {
        case .alreadyStarted: BrokerError.alreadyStarted
        case .failed(let cause): cause
        }
    }

    /// The endpoints actually bound, keyed "frontend", "backend", "events"
    /// (a `*` port resolved to the real one).
    public var boundEndpoints: [String: String] {
        switchboard.boundEndpoints
    }

    /// The queue, its workers and the totals since start, for metrics: what
    /// STATUS would answer now, from what the two threads last published.
    /// Reading it never touches the broker's sockets or database, and never
    /// waits for either thread. Nil until the queue is open.
    public var metrics: BrokerMetrics? {
        board.metrics(wall: ULIDGenerator.systemMilliseconds(), monotonic: BrokerCore.monotonicNow())
    }

    /// Asks the broker to stop: it refuses new SUBMITs with
    /// `shutting-down`, dispatches nothing more, keeps taking DONE and FAIL
    /// for jobs in flight for up to `grace`, commits, tells its workers
    /// DISCONNECT and exits. Waits for that (and a few seconds more for
    /// the last commit). Jobs still leased then are held for their workers
    /// to reclaim when the broker starts again.
    public func stop(grace: Duration) {
        let graceMilliseconds = max(0, grace.milliseconds)
        guard core.post(.stop(graceMilliseconds: graceMilliseconds)) else { return }
        core.wait(timeout: max(grace, .zero) + .seconds(5))
        switchboard.wait(timeout: .seconds(2))
    }

    /// Keys were revoked from the allowlist: their requests are already
    /// refused (`BrokerConfiguration.admission`); this also drops the events
    /// socket's subscribers, which reconnect and are admitted again, or not.
    public func keysRevoked() {
        switchboard.post(.keysRevoked)
    }

    /// Blocks until both threads have exited (returns at once if the broker never started).
    public func wait() {
        core.wait()
        switchboard.wait()
    }
}
