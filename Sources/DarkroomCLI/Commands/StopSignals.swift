import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Work done when SIGINT, SIGTERM or SIGHUP ends the process: removing a
/// directory of this run's own files, saying what became of a submit. Then
/// the signal ends the process as it would have (same signal, same exit
/// status to the shell).
///
/// The first `onStop` blocks the signals in the calling thread, and so in
/// every thread started after it, and starts one thread that takes them
/// with `sigwait`: the actions run as ordinary code, not in a signal
/// handler, in the order they were given. Threads started before keep the
/// signals unblocked, so call it before starting any (Dispatch's threads
/// and ZeroMQ's block every signal themselves).
enum StopSignals {
    private static let actions = Mutex<[@Sendable (Int32) -> Void]>([])
    private static let installed = Atomic<Bool>(false)

    /// Runs `action` (given the signal's number) when a stop signal comes,
    /// after the actions given before it.
    static func onStop(_ action: @escaping @Sendable (Int32) -> Void) {
        actions.withLock { $0.append(action) }
        guard installed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        ServiceRunner.holdTerminationSignals()
        var taken = sigset_t()
        sigemptyset(&taken)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&taken, signal) }
        let thread = Thread { [taken] in
            var waitFor = taken
            var signal: Int32 = 0
            guard sigwait(&waitFor, &signal) == 0 else { return }
            for action in actions.withLock({ $0 }) { action(signal) }
            // The default action again, then the signal itself, now unblocked
            // in this thread: the process ends as the signal's default says.
            Glibc.signal(signal, SIG_DFL)
            var only = sigset_t()
            sigemptyset(&only)
            sigaddset(&only, signal)
            pthread_sigmask(SIG_UNBLOCK, &only, nil)
            raise(signal)
        }
        thread.name = "darkroom-stop"
        thread.start()
    }

    /// Removes the directory at `path` when a stop signal comes.
    static func remove(_ path: String) {
        onStop { _ in
            // Work still running (the next download starting) may create a
            // file between the listing and the directory's own removal,
            // which then fails as not empty; once the directory is gone
            // nothing can be created in it, so remove until it is.
            for _ in 0..<20 where FileManager.default.fileExists(atPath: path) {
                try? FileManager.default.removeItem(atPath: path)
            }
        }
    }

    /// The signal's name: SIGINT, SIGTERM or SIGHUP.
    static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        default: "signal \(signal)"
        }
    }
}
