import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Removes a directory of this run's own files when SIGINT, SIGTERM or
/// SIGHUP ends the process, then lets the signal end it as it would have
/// (same signal, same exit status to the shell).
///
/// The signals are blocked in the calling thread, and so in every thread
/// started after it, and taken by one thread of its own with `sigwait`:
/// the removal runs as ordinary code, not in a signal handler. Threads
/// started before that keep the signals unblocked; call it before starting
/// any (Dispatch's own threads block every signal).
enum RemoveOnSignal {
    static func install(_ path: String) {
        var signals = sigset_t()
        sigemptyset(&signals)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signals, signal) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let taken = signals
        let thread = Thread {
            var waitFor = taken
            var signal: Int32 = 0
            guard sigwait(&waitFor, &signal) == 0 else { return }
            // Work still running (the next download starting) may create a
            // file between the listing and the directory's own removal,
            // which then fails as not empty; once the directory is gone
            // nothing can be created in it, so remove until it is.
            for _ in 0..<20 where FileManager.default.fileExists(atPath: path) {
                try? FileManager.default.removeItem(atPath: path)
            }
            // The default action again, then the signal itself, now unblocked
            // in this thread: the process ends as the signal's default says.
            Glibc.signal(signal, SIG_DFL)
            var only = sigset_t()
            sigemptyset(&only)
            sigaddset(&only, signal)
            pthread_sigmask(SIG_UNBLOCK, &only, nil)
            raise(signal)
        }
        thread.name = "darkroom-cleanup"
        thread.start()
    }
}
