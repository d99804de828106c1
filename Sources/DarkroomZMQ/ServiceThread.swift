import Dispatch
import Foundation
import Synchronization

/// What a long-running service runs on its own thread: a loop that owns its
/// sockets (and anything else that must stay on one thread, such as a
/// SQLite connection) from its creation to the end of `run`.
public protocol ServiceLoop<Instruction>: AnyObject {
    /// What other threads ask of the loop (stop, for one).
    associatedtype Instruction: Sendable
    /// Where other threads post instructions to the loop.
    var mailbox: Mailbox<Instruction> { get }
    /// The endpoints the loop listens on, by name, with `*` ports resolved.
    var boundEndpoints: [String: String] { get }
    /// Serves until an instruction (or a fatal error) ends it, and closes what
    /// the loop owns before it returns.
    func run()
}

/// The thread of one service (the broker, the storage node, a worker, the
/// ZAP handler). `start` builds the loop on a new thread, so the loop's
/// sockets belong to that thread from the first call, and returns once the
/// loop is listening or has failed to start; `post` hands the loop an
/// instruction from any thread; `wait` returns once the thread has ended.
///
/// An instruction posted while the loop is still being built is delivered
/// as soon as it exists (so a stop right after start is never lost); one
/// posted before `start` or after the loop has ended is dropped.
public final class ServiceThread<Instruction: Sendable>: Sendable {
    public enum StartError: Error, Sendable {
        /// `start` was called before.
        case alreadyStarted
        /// Building the loop threw this.
        case failed(any Error)
    }

    private enum Phase {
        case idle, starting, running, ended
    }

    private struct State {
        var phase = Phase.idle
        var mailbox: Mailbox<Instruction>?
        var endpoints: [String: String] = [:]
        /// Instructions posted while the loop was being built.
        var early: [Instruction] = []
    }

    /// The thread's name, as tools like `top -H` show it.
    public let name: String
    private let state = Mutex(State())
    /// Entered when the thread starts, left when it ends.
    private let ended = DispatchGroup()

    public init(name: String) {
        self.name = name
    }

    /// Starts the thread, builds the loop there with `make`, and returns once
    /// it is built (and, as its initializer guarantees, listening); the
    /// thread then runs the loop until it ends.
    public func start(_ make: @escaping @Sendable () throws -> any ServiceLoop<Instruction>) throws(StartError) {
        let first = state.withLock { state -> Bool in
            guard state.phase == .idle else { return false }
            state.phase = .starting
            return true
        }
        guard first else { throw .alreadyStarted }
        let outcome = StartOutcome()
        ended.enter()
        let name = self.name
        let thread = Thread { [self] in
            defer { ended.leave() }
            // Named again from inside: only a thread naming itself reaches
            // the kernel's name, which `top -H` and profilers show.
            Thread.current.name = name
            let loop: any ServiceLoop<Instruction>
            do {
                loop = try make()
            } catch {
                state.withLock { $0.phase = .ended }
                outcome.put(error)
                return
            }
            let early = state.withLock { state -> [Instruction] in
                state.phase = .running
                state.mailbox = loop.mailbox
                state.endpoints = loop.boundEndpoints
                defer { state.early.removeAll() }
                return state.early
            }
            for instruction in early { _ = loop.mailbox.post(instruction) }
            outcome.put(nil)
            loop.run()
            state.withLock { state in
                state.phase = .ended
                state.mailbox = nil
            }
        }
        thread.name = name
        thread.start()
        if let error = outcome.take() { throw .failed(error) }
    }

    /// Whether the loop is running (started, and not yet ended).
    public var isRunning: Bool {
        state.withLock { $0.phase == .running }
    }

    /// The endpoints the loop listens on, by name (empty before it started).
    public var boundEndpoints: [String: String] {
        state.withLock { $0.endpoints }
    }

    /// Hands `instruction` to the loop. Returns false, dropping it, when the
    /// service was never started or has ended.
    @discardableResult
    public func post(_ instruction: Instruction) -> Bool {
        let route = state.withLock { state -> PostRoute<Instruction> in
            switch state.phase {
            case .starting:
                state.early.append(instruction)
                return .held
            case .running:
                return state.mailbox.map { .deliver($0) } ?? .dropped
            case .idle, .ended:
                return .dropped
            }
        }
        switch route {
        case .deliver(let mailbox): return mailbox.post(instruction)
        case .held: return true
        case .dropped: return false
        }
    }

    /// Waits until the thread has ended, at most `timeout` when one is
    /// given. Returns whether it has ended (at once when it never started).
    @discardableResult
    public func wait(timeout: Duration? = nil) -> Bool {
        guard let timeout else {
            ended.wait()
            return true
        }
        let (seconds, attoseconds) = max(timeout, .zero).components
        let milliseconds = Int(clamping: seconds.multipliedReportingOverflow(by: 1_000).partialValue + attoseconds / 1_000_000_000_000_000)
        return ended.wait(timeout: .now() + .milliseconds(milliseconds)) == .success
    }
}

/// Where `ServiceThread.post` sends an instruction.
private enum PostRoute<Instruction: Sendable> {
    case deliver(Mailbox<Instruction>), held, dropped
}

/// Carries the outcome of building the loop from the new thread back to
/// `start`: nil when it was built, else the error.
private final class StartOutcome: Sendable {
    private let value = Mutex<(any Error)??>(nil)
    private let ready = DispatchSemaphore(value: 0)

    func put(_ error: (any Error)?) {
        value.withLock { $0 = .some(error) }
        ready.signal()
    }

    func take() -> (any Error)? {
        ready.wait()
        return value.withLock { $0 } ?? nil
    }
}
