import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Synchronization

/// A storage node failed to start.
public struct StoreNodeError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The storage node: keeps each job's full-resolution image and thumbnail as
/// two linked records, answers STORE, LIST, GET, DELETE, STATS and PING on
/// one ROUTER socket (DRK1 section 11).
///
/// One thread owns the socket, the SQLite connection and the blob files.
/// Each loop turn it takes every request that is waiting (up to
/// `maxRequestsPerTurn`), applies them in one transaction, commits once and
/// only then sends the replies: STORED therefore always means "on disk".
///
/// `stop(grace:)` (SIGTERM) lets the current turn finish its commit and send
/// its replies; requests still queued are answered ERROR `shutting-down`
/// (retryable), and the database is closed cleanly.
public final class StoreNode: Sendable {
    public let configuration: StoreConfiguration
    private let context: Context
    private let logger: Logger

    /// What the service thread can be asked to do.
    enum Control: Sendable { case stop }

    private let service = ServiceThread<Control>(name: "darkroom-store")
    private let board = StoreBoard()

    public init(_ configuration: StoreConfiguration, context: Context, logger: Logger = Logger("store")) {
        self.configuration = configuration
        self.context = context
        self.logger = logger
    }

    /// Opens the database, binds the endpoint on the service thread and
    /// returns once it is bound. Throws what stopped it (a bind error, an
    /// unusable data directory or database).
    public func start() throws {
        let (configuration, context, logger, board) = (self.configuration, self.context, self.logger, self.board)
        do {
            try service.start { try StoreService(configuration: configuration, context: context, logger: logger, board: board) }
        } catch {
            switch error {
            case .alreadyStarted: throw StoreNodeError("the storage node is already started")
            case .failed(let cause): throw cause
            }
        }
    }

    /// Records, bytes and STOREs answered, for metrics: what the service
    /// thread last published, read without touching its socket or database.
    /// Zero until the node has started.
    public var metrics: StoreMetrics {
        var metrics = board.current
        // Read now: libzmq's I/O thread unmaps as replies leave.
        metrics.mappedImages = UInt64(max(0, board.mappedImages.current))
        metrics.queuedImageBytes = UInt64(max(0, board.queuedImageBytes.current))
        return metrics
    }

    /// The endpoint actually bound, keyed "store" (a `*` port resolved).
    public var boundEndpoints: [String: String] {
        service.boundEndpoints
    }

    /// Asks the node to stop: it finishes the turn in hand (its commit and
    /// replies), closes the database and exits. Waits up to `grace`.
    public func stop(grace: Duration = .seconds(10)) {
        guard service.post(.stop) else { return }
        if !service.wait(timeout: grace) {
            logger.warn("store did not stop within \(grace)")
        }
    }

    /// Blocks until the service thread has exited (at once if it never started).
    public func wait() {
        service.wait()
    }
}

/// What the storage node's metrics show (`StoreNode.metrics`).
public struct StoreMetrics: Sendable, Equatable {
    /// Records held (each a full-resolution image and its thumbnail).
    public var records: UInt64 = 0
    /// Bytes of the full-resolution images held.
    public var fullBytes: UInt64 = 0
    /// Bytes of the thumbnails held.
    public var thumbnailBytes: UInt64 = 0
    /// STOREs answered STORED since the node started, a repeat for a job
    /// already stored included (it is answered with the first record).
    public var stores: UInt64 = 0
    /// STOREs answered ERROR since the node started: an image that failed
    /// the header checks, a key not allowed to store, a failed write or commit.
    public var refused: UInt64 = 0
    /// Records deleted for being older than `--keep-records` since the node started.
    public var expired: UInt64 = 0
    /// Records deleted, oldest first, to keep the images within `--keep-bytes`.
    public var evicted: UInt64 = 0
    /// Replies waiting in the node's own list because their peer's ZeroMQ
    /// queue was full (a worker's STOREDs behind a slow link).
    public var heldReplies: UInt64 = 0
    /// Replies dropped since the node started because their peer had left
    /// that many unread: GET-REPLYs past ZeroMQ's queue, or any reply past
    /// the held list's limit.
    public var droppedReplies: UInt64 = 0
    /// Blob files mapped for GET-REPLYs now, sent or waiting for their readers.
    public var mappedImages: UInt64 = 0
    /// Bytes of inline images copied for GET-REPLYs now, sent or waiting
    /// for their readers.
    public var queuedImageBytes: UInt64 = 0

    public init() {}
}

/// Where the service thread leaves its latest `StoreMetrics` for other threads.
final class StoreBoard: Sendable {
    private let value = Mutex(StoreMetrics())
    func publish(_ metrics: StoreMetrics) { value.withLock { $0 = metrics } }
    var current: StoreMetrics { value.withLock { $0 } }
    /// Blob files this node has mapped for GET-REPLYs not yet sent, and
    /// bytes of inline images it has copied for them: lowered by libzmq's
    /// I/O thread as replies leave, so read live rather than published.
    let mappedImages = FrameTally()
    let queuedImageBytes = FrameTally()
}

extension StoreService: ServiceLoop {
    var boundEndpoints: [String: String] { ["store": endpoint] }
}
