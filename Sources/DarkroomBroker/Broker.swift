import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Dispatch
import Foundation
import Synchronization

/// Messages other threads post to the broker's service loop.
enum BrokerCommand: Sendable {
    /// Stop dispatching, wait for jobs in flight until `graceMilliseconds`
    /// have passed, commit, and exit.
    case stop(graceMilliseconds: Int64)
}

/// The broker service: the durable job queue behind the frontend (producers
/// and clients), the backend (workers) and the events PUB socket.
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

    private struct Control {
        var started = false
        var mailbox: Mailbox<BrokerCommand>?
        var endpoints: [String: String] = [:]
        var startError: String?
    }

    private let control = Mutex(Control())
    /// Entered when the service thread starts, left when it exits.
    private let running = DispatchGroup()

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
        try control.withLock { control in
            guard !control.started else { throw BrokerError.alreadyStarted }
            control.started = true
        }
        let bound = DispatchSemaphore(value: 0)
        running.enter()
        let thread = Thread { [self] in
            defer { running.leave() }
            let loop: BrokerLoop
            do {
                loop = try BrokerLoop(configuration: configuration, context: context, logger: logger)
            } catch {
                control.withLock { $0.startError = "\(error)" }
                bound.signal()
                return
            }
            control.withLock {
                $0.mailbox = loop.mailbox
                $0.endpoints = loop.boundEndpoints
            }
            bound.signal()
            loop.run()
            control.withLock { $0.mailbox = nil }
        }
        thread.name = "darkroom-broker"
        thread.start()
        bound.wait()
        if let error = control.withLock({ $0.startError }) {
            throw BrokerError.startFailed(error)
        }
    }

    /// The endpoints actually bound, keyed "frontend", "backend", "events"
    /// (a `*` port resolved to the real one).
    public var boundEndpoints: [String: String] {
        control.withLock { $0.endpoints }
    }

    /// Asks the broker to stop: it rejects new SUBMITs with `shutting-down`,
    /// dispatches nothing more, keeps taking DONE and FAIL for jobs in flight
    /// for up to `min(grace, workerGrace)`, commits, tells its workers
    /// DISCONNECT and exits. Waits up to `grace` (plus a moment for the last
    /// commit) for the thread to exit. Jobs still leased are requeued when the
    /// broker starts again.
    public func stop(grace: Duration) {
        let mailbox = control.withLock { $0.mailbox }
        guard let mailbox else { return }
        let graceMilliseconds = max(0, min(grace.milliseconds, configuration.workerGrace.milliseconds))
        mailbox.post(.stop(graceMilliseconds: graceMilliseconds))
        _ = running.wait(timeout: .now() + .milliseconds(Int(clamping: max(0, grace.milliseconds) + 2_000)))
    }

    /// Blocks until the service thread has exited (returns at once if it never started).
    public func wait() {
        running.wait()
    }
}
