import DarkroomCore
import DarkroomZMQ
import Foundation

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
/// node) and a mailbox; `concurrency` processing threads run the image
/// work of the jobs it holds and post results to the mailbox. `stop` and
/// `wait` may be called from any thread. Over TCP the broker connection lives in a ZeroMQ context of its
/// own (one more I/O thread), so that a stop can wait until its last
/// messages have left; everything else uses the context it is given.
public final class Worker: Sendable {
    public let configuration: WorkerConfiguration
    private let context: Context
    private let logger: Logger
    private let service = ServiceThread<WorkerEvent>(name: "darkroom-worker")
    private let statusBoard: StatusBoard

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
        let (configuration, context, logger, statusBoard) = (self.configuration, self.context, self.logger, self.statusBoard)
        do {
            try service.start { try WorkerLoop(configuration: configuration, context: context, logger: logger, status: statusBoard) }
        } catch {
            switch error {
            case .alreadyStarted: throw WorkerError("the worker was already started")
            case .failed(let cause): throw WorkerError("\(cause)")
            }
        }
    }

    /// Stops gracefully (SIGTERM): no new credit, running jobs get up to
    /// `grace` to finish and be stored; what is left is handed back to the
    /// broker as FAIL retryable (`worker.shutdown`), then DISCONNECT. Returns
    /// when the service thread has exited, by which time those messages
    /// have been written to the broker connection (or, if the broker is
    /// unreachable, given up after half a second), so a process may exit
    /// at once; or shortly after `grace` if the thread has not exited.
    public func stop(grace: Duration) {
        guard service.post(.stop(grace: max(grace, .zero))) else { return }
        service.wait(timeout: max(grace, .zero) + .seconds(5))
    }

    /// `stop(grace:)` with the configured `shutdownGrace`.
    public func stop() {
        stop(grace: configuration.shutdownGrace)
    }

    /// Blocks until the service thread has exited. Returns at once if the
    /// worker was never started.
    public func wait() {
        service.wait()
    }
}

extension WorkerLoop: ServiceLoop {
    var mailbox: Mailbox<WorkerEvent> { inbox.mailbox }
    /// A worker binds nothing.
    var boundEndpoints: [String: String] { [:] }
}
