import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Dispatch
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

    enum Control: Sendable { case stop }

    private struct State {
        var started = false
        var stopRequested = false
        var mailbox: Mailbox<Control>?
        var endpoints: [String: String] = [:]
    }

    private let state = Mutex(State())
    private let running = DispatchGroup()

    public init(_ configuration: StoreConfiguration, context: Context, logger: Logger = Logger("store")) {
        self.configuration = configuration
        self.context = context
        self.logger = logger
    }

    /// Opens the data directory (recovering from any crash), binds the socket
    /// on the node's own thread, and returns once it is bound. Throws the
    /// open or bind error.
    public func start() throws {
        try state.withLock { state in
            guard !state.started else { throw StoreNodeError("the storage node is already started") }
            state.started = true
        }
        let startup = StartupResult()
        running.enter()
        let thread = Thread { [self] in
            defer { running.leave() }
            let service: StoreService
            do {
                service = try StoreService(configuration: configuration, context: context, logger: logger)
            } catch {
                startup.put(.failure(error))
                return
            }
            let stopEarly = state.withLock { state in
                state.mailbox = service.mailbox
                state.endpoints = ["store": service.endpoint]
                return state.stopRequested
            }
            if stopEarly { service.mailbox.post(.stop) }
            startup.put(.success(()))
            service.run()
        }
        thread.name = "darkroom-store"
        thread.start()
        try startup.take().get()
    }

    /// The endpoint actually bound, under the key "store".
    public var boundEndpoints: [String: String] {
        state.withLock { $0.endpoints }
    }

    /// Asks the node to stop after its current commit, and waits up to
    /// `grace` for its thread to exit.
    public func stop(grace: Duration = .seconds(10)) {
        let mailbox = state.withLock { state in
            state.stopRequested = true
            return state.mailbox
        }
        mailbox?.post(.stop)
        let (seconds, attoseconds) = grace.components
        let timeout = Double(seconds) + Double(attoseconds) / 1e18
        if running.wait(timeout: .now() + max(0, timeout)) == .timedOut {
            logger.warn("store did not stop within \(grace)")
        }
    }

    /// Blocks until the node's thread has exited (at once if it never started).
    public func wait() {
        running.wait()
    }
}

/// The outcome of startup, handed from the node's thread to `start()`.
private final class StartupResult: Sendable {
    private let value = Mutex<Result<Void, any Error>?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    func put(_ result: Result<Void, any Error>) {
        value.withLock { $0 = result }
        ready.signal()
    }

    func take() -> Result<Void, any Error> {
        ready.wait()
        return value.withLock { $0 } ?? .failure(StoreNodeError("the storage node thread ended without starting"))
    }
}
