import DarkroomCore
import DarkroomZMQ
import Dispatch
import Foundation
import Synchronization

/// The worker role: pulls jobs from the broker with credit-based flow control,
/// runs each job's compound operation (decode, pipeline, encode full-resolution
/// and thumbnail) on a pool of processing threads, stores both outputs on the
/// storage node, and reports DONE or FAIL to the broker.
///
/// A worker holds nothing durable and may be killed at any moment: the broker
/// requeues its jobs when its heartbeats stop. See `protocol/drk1.md`, section 6.
///
///     let worker = Worker(WorkerConfiguration(concurrency: 2), context: context, logger: Logger("worker"))
///     try worker.start()
///     // on SIGTERM:
///     worker.stop(grace: .seconds(30))
///
/// Threads: one service thread owns both sockets (broker backend, storage
/// node) and a mailbox; `effectiveProcessingThreads` processing threads run
/// the image work of the `slots` jobs and post results to the mailbox. `stop` and `wait` may be called from any
/// thread.
public final class Worker: Sendable {
    public let configuration: WorkerConfiguration
    private let context: Context
    private let logger: Logger
    private let state = Mutex<ServiceState>(ServiceState())
    /// Signalled once when the service thread exits; waiters pass the signal on.
    private let exited = DispatchSemaphore(value: 0)
    private let statusBoard: StatusBoard

    private struct ServiceState {
        var started = false
        var mailbox: Mailbox<WorkerEvent>?
    }

    public init(_ configuration: WorkerConfiguration = WorkerConfiguration(), context: Context, logger: Logger = Logger("worker")) {
        self.configuration = configuration
        self.context = context
        self.logger = logger
        self.statusBoard = StatusBoard(slots: configuration.slots)
    }

    /// The latest state published by the service thread.
    public var status: WorkerStatus { statusBoard.current }

    /// The endpoints the worker connects to (a worker binds nothing):
    /// `backend` and `store`.
    public var boundEndpoints: [String: String] {
        ["backend": configuration.backendEndpoint, "store": configuration.storeEndpoint]
    }

    /// Checks the configuration, creates and connects the sockets on the
    /// service thread, sends READY and CREDIT, and returns. Throws
    /// `WorkerError` for a bad configuration or a socket that could not be set
    /// up (for example a malformed endpoint). Connecting itself never fails: a
    /// broker or storage node that is not up yet is retried in the background.
    public func start() throws {
        try configuration.validate()
        let alreadyStarted = state.withLock { state in
            defer { state.started = true }
            return state.started
        }
        if alreadyStarted { throw WorkerError("the worker was already started") }

        let handoff = StartHandoff()
        let configuration = self.configuration
        let context = self.context
        let logger = self.logger
        let statusBoard = self.statusBoard
        let thread = Thread { [self] in
            let loop: WorkerLoop
            do {
                loop = try WorkerLoop(configuration: configuration, context: context, logger: logger, status: statusBoard)
            } catch {
                handoff.put(.failure(WorkerError("could not start the worker: \(error)")))
                serviceExited()
                return
            }
            handoff.put(.success(loop.inbox.mailbox))
            loop.run()
            serviceExited()
        }
        thread.name = "darkroom-worker"
        thread.start()
        switch handoff.take() {
        case .success(let mailbox):
            state.withLock { $0.mailbox = mailbox }
        case .failure(let error):
            throw error
        }
    }

    /// Stops gracefully (SIGTERM): no new credit, running jobs get up to
    /// `grace` to finish and be stored; what is left is handed back to the
    /// broker as FAIL retryable (`worker.shutdown`), then DISCONNECT. Returns
    /// when the service thread has exited, or shortly after `grace` if it
    /// has not.
    public func stop(grace: Duration) {
        guard let mailbox = state.withLock({ $0.mailbox }) else { return }
        guard mailbox.post(.stop(grace: max(grace, .zero))) else { return }
        let limit = Double(max(grace, .zero).milliseconds) / 1_000 + 5
        if exited.wait(timeout: .now() + limit) == .success { exited.signal() }
    }

    /// `stop(grace:)` with the configured `shutdownGrace`.
    public func stop() {
        stop(grace: configuration.shutdownGrace)
    }

    /// Blocks until the service thread has exited. Returns at once if the
    /// worker was never started.
    public func wait() {
        guard state.withLock({ $0.started }) else { return }
        exited.wait()
        exited.signal()
    }

    private func serviceExited() {
        state.withLock { $0.mailbox = nil }
        exited.signal()
    }
}

/// The service thread's first answer to `start`: its mailbox, or why it
/// could not set up its sockets.
private final class StartHandoff: Sendable {
    private let value = Mutex<Result<Mailbox<WorkerEvent>, WorkerError>?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    func put(_ result: Result<Mailbox<WorkerEvent>, WorkerError>) {
        value.withLock { $0 = result }
        ready.signal()
    }

    func take() -> Result<Mailbox<WorkerEvent>, WorkerError> {
        ready.wait()
        return value.withLock { $0 } ?? .failure(WorkerError("the service thread gave no answer"))
    }
}
