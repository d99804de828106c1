import Dispatch
import Foundation
import Synchronization

/// A long-lived service that runs on its own thread: the broker, the
/// storage node, a worker, the ZAP handler.
public protocol RunnableService: Sendable {
    /// Returns once the service is listening, or throws what kept it from it.
    func start() throws
    /// Asks the service to stop and waits for it, about `grace` at most.
    /// Does nothing to a service that has already ended.
    func stop(grace: Duration)
    /// Blocks until the service's thread has ended.
    func wait()
}

/// The services of one process, which live and die together (the
/// swift-service-lifecycle model). `run` blocks until either someone asks
/// the group to stop (SIGTERM) or a service ends without being asked to;
/// then it stops every service still running, the last started first,
/// each within the grace period.
///
/// A process whose storage node has died must not go on taking jobs it
/// can never store, so a service that ends on its own takes the others
/// down with it and the process exits non-zero, for a supervisor to see
/// and restart the whole of it.
///
/// One thread per service waits for it, so the group knows which one
/// ended first. Once the group is stopping, a service that ends is no
/// surprise, whether it was asked to yet or not: all of them are on
/// their way out, and only the service that set off the stop is named.
public final class ServiceGroup: Sendable {
    public struct Entry: Sendable {
        /// What the logs call it, as in "the storage node".
        public var name: String
        public var service: any RunnableService

        public init(name: String, service: any RunnableService) {
            self.name = name
            self.service = service
        }
    }

    /// How `run` ended.
    public enum Outcome: Sendable, Equatable {
        /// Asked to stop, and every service stopped.
        case stopped
        /// This service ended without being asked to; the group stopped
        /// the others.
        case serviceEnded(String)

        /// The process's exit status: 0 for a stop that was asked for, 1
        /// when a service ended on its own.
        public var exitStatus: Int32 {
            switch self {
            case .stopped: 0
            case .serviceEnded: 1
            }
        }
    }

    /// Where the group's few lines go.
    public typealias Log = @Sendable (Logger.Level, String) -> Void

    private enum Phase {
        /// `run` has not begun the stop; a stop asked for before `run`
        /// is kept here.
        case running
        /// Stopping, and why.
        case stopping(Outcome)
    }

    private struct State {
        var phase = Phase.running
        var ended: [Bool]
        var runCalled = false
    }

    public let entries: [Entry]
    private let grace: Duration
    private let log: Log
    private let state: Mutex<State>
    /// Signalled on every event `run` may need to act on: a stop asked
    /// for, a service ended.
    private let wake = DispatchSemaphore(value: 0)

    /// `entries` in the order they were started.
    public init(_ entries: [Entry], grace: Duration, log: @escaping Log) {
        self.entries = entries
        self.grace = grace
        self.log = log
        state = Mutex(State(ended: Array(repeating: false, count: entries.count)))
    }

    public convenience init(_ entries: [Entry], grace: Duration, logger: Logger) {
        self.init(entries, grace: grace) { level, message in logger.log(level, message) }
    }

    /// Asks the group to stop every service (the signal handler calls it).
    /// Returns whether this call began the stop: false when the group was
    /// already stopping. When it does begin it, `announcement` is logged
    /// first, so that the reason reads before the lines of the stop. Safe
    /// from any thread, and before `run`.
    @discardableResult
    public func requestStop(announcing announcement: String? = nil) -> Bool {
        let began = state.withLock { state -> Bool in
            guard case .running = state.phase else { return false }
            state.phase = .stopping(.stopped)
            return true
        }
        guard began else { return false }
        if let announcement { log(.info, announcement) }
        wake.signal()
        return true
    }

    /// Watches the (already started) services until a stop is asked for or
    /// one of them ends on its own, stops the rest in reverse order of
    /// starting, and returns once every service has ended. Runs once.
    public func run() -> Outcome {
        let first = state.withLock { state -> Bool in
            defer { state.runCalled = true }
            return !state.runCalled
        }
        precondition(first, "ServiceGroup.run runs once")

        let allEnded = DispatchGroup()
        for (index, entry) in entries.enumerated() {
            allEnded.enter()
            let watcher = Thread { [self] in
                entry.service.wait()
                serviceEnded(index)
                allEnded.leave()
            }
            watcher.start()
        }

        let outcome = untilStopping()
        if case .serviceEnded(let name) = outcome {
            let others = entries.count > 1 ? "stopping the others" : "exiting"
            log(.error, "the \(name) stopped unexpectedly; \(others)")
        }
        for (index, entry) in entries.enumerated().reversed() {
            if state.withLock({ $0.ended[index] }) {
                log(.debug, "the \(entry.name) has already ended")
                continue
            }
            log(.info, "stopping the \(entry.name)")
            entry.service.stop(grace: grace)
        }
        allEnded.wait()
        switch outcome {
        case .stopped: log(.info, "stopped cleanly")
        case .serviceEnded: log(.warn, "every service has stopped; exiting with status \(outcome.exitStatus)")
        }
        return outcome
    }

    /// Blocks until the group is stopping, and says why.
    private func untilStopping() -> Outcome {
        while true {
            if case .stopping(let why) = state.withLock({ $0.phase }) { return why }
            wake.wait()
        }
    }

    /// A watcher saw service `index` end. It is unexpected only while the
    /// group is running: the first such service names the outcome.
    private func serviceEnded(_ index: Int) {
        let name = entries[index].name
        state.withLock { state in
            state.ended[index] = true
            if case .running = state.phase {
                state.phase = .stopping(.serviceEnded(name))
            }
        }
        wake.signal()
    }
}
