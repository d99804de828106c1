import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// Messages other threads post to the broker's service loop.
enum BrokerCommand: Sendable {
    /// Stop dispatching, wait for jobs in flight until `graceMilliseconds`
    /// have passed, commit, and exit.
    case stop(graceMilliseconds: Int64)
}

/// The broker service: the durable job queue behind the frontend (producers
/// and clients), the backend (workers) and the events socket (XPUB).
///
/// One thread, started by `start()`, owns the three sockets and the SQLite
/// connection for their whole life; other threads only post to its mailbox.
/// Each turn of its loop reads every waiting message (up to
/// `maxMessagesPerTurn`), applies them, commits once, and only then sends the
/// replies, JOBs and events that depend on the commit (group commit).
public final class Broker: Sendable {
    public let configuration: BrokerConfiguration
    let context: Context
    let logger: Logger
    private let service = ServiceThread<BrokerCommand>(name: "darkroom-broker")

    public init(_ configuration: BrokerConfiguration, context: Context, logger: Logger) {
        self.configuration = configuration
        self.context = context
        self.logger = logger
    }

    /// Opens the queue, recovers what a previous run left, binds the three
    /// endpoints on the service thread, and returns once they are bound.
    /// Throws `BrokerError.startFailed` with the cause (a bind error, an
    /// unusable data directory).
    public func start() throws {
        let (configuration, context, logger) = (self.configuration, self.context, self.logger)
        do {
            try service.start { try BrokerLoop(configuration: configuration, context: context, logger: logger) }
        } catch {
            switch error {
            case .alreadyStarted: throw BrokerError.alreadyStarted
            case .failed(let cause): throw BrokerError.startFailed("\(cause)")
            }
        }
    }

    /// The endpoints actually bound, keyed "frontend", "backend", "events"
    /// (a `*` port resolved to the real one).
    public var boundEndpoints: [String: String] {
        service.boundEndpoints
    }

    /// Asks the broker to stop: it rejects new SUBMITs with `shutting-down`,
    /// dispatches nothing more, keeps taking DONE and FAIL for jobs in flight
    /// for up to `min(grace, workerGrace)`, commits, tells its workers
    /// DISCONNECT and exits. Waits up to `grace` (plus a moment for the last
    /// commit) for the thread to exit. Jobs still leased are requeued when the
    /// broker starts again.
    public func stop(grace: Duration) {
        let graceMilliseconds = max(0, min(grace.milliseconds, configuration.workerGrace.milliseconds))
        guard service.post(.stop(graceMilliseconds: graceMilliseconds)) else { return }
        service.wait(timeout: max(grace, .zero) + .seconds(2))
    }

    /// Blocks until the service thread has exited (returns at once if it never started).
    public func wait() {
        service.wait()
    }
}

extension BrokerLoop: ServiceLoop {}
