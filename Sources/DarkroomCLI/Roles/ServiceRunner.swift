import DarkroomCore
import DarkroomZMQ
import Dispatch
import Foundation
import Synchronization

/// Starts a process's services and runs them as one `ServiceGroup` until
/// SIGTERM or SIGINT, or until one of them ends on its own. A second signal
/// exits at once.
enum ServiceRunner {
    /// Holds SIGTERM and SIGINT pending in this thread and in every thread
    /// started from it afterwards, the services' threads among them. Called
    /// before the services start: a signal that comes while they start, or
    /// just after a supervisor saw the ready line, then waits for
    /// `runUntilSignalled` instead of being lost in the moment before its
    /// signal sources listen. (Dispatch reads them through a signalfd, made
    /// for blocked signals; ZeroMQ's threads block every signal anyway.)
    static func holdTerminationSignals() {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        // SIGHUP too: its default action ends the process, and a server
        // asked to reload its allowlist must not die of it.
        sigaddset(&signals, SIGHUP)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Starts every service in order; if one fails to start, stops those already
    /// started and reports which one failed and why.
    static func start(_ entries: [ServiceGroup.Entry], logger: Logger) throws -> [ServiceGroup.Entry] {
        var started: [ServiceGroup.Entry] = []
        for entry in entries {
            do {
                try entry.service.start()
                started.append(entry)
            } catch {
                for done in started.reversed() { done.service.stop(grace: .seconds(5)) }
                // The commonest reason by far: say what to do about it.
                let hint = (error as? ZMQError)?.isAddressInUse == true
                    ? "; another process listens there (a `darkroom up` or role already running?): stop it, or choose other endpoints (see --help)"
                    : ""
                throw RuntimeError("cannot start the \(entry.name): \(error)\(hint)", bindFailed: error is ZMQError)
            }
        }
        return started
    }

    /// Blocks until a termination signal or until a service ends without
    /// being asked to, then stops the others. Returns the exit status: 0
    /// after a signal, 1 when a service ended on its own. Expects
    /// `holdTerminationSignals` before the services started.
    ///
    /// SIGHUP calls `onHangUp` (a server reloads its allowlist); without one
    /// it is logged and otherwise ignored.
    static func runUntilSignalled(_ entries: [ServiceGroup.Entry], logger: Logger, grace: Duration,
                                  onHangUp: (@Sendable () -> Void)? = nil) -> Int32 {
        let group = ServiceGroup(entries, grace: grace, logger: logger)
        let count = Atomic<Int>(0)
        let queue = DispatchQueue(label: "darkroom.signals")
        // No SIG_IGN here: it would discard a signal already held pending.
        // Held signals cannot end the process; Dispatch takes them from here.
        holdTerminationSignals()
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                let n = count.wrappingAdd(1, ordering: .relaxed).newValue
                let name = sig == SIGTERM ? "SIGTERM" : "SIGINT"
                if n == 1 {
                    if !group.requestStop(announcing: "received \(name); shutting down (send it again to exit at once)") {
                        logger.info("received \(name) while already shutting down (send it again to exit at once)")
                    }
                } else {
                    logger.warn("second signal: exiting now")
                    exit(1)
                }
            }
            source.resume()
            sources.append(source)
        }
        let hangUp = DispatchSource.makeSignalSource(signal: SIGHUP, queue: queue)
        hangUp.setEventHandler {
            if let onHangUp {
                onHangUp()
            } else {
                logger.info("received SIGHUP: nothing to reload (no --allow directory); going on")
            }
        }
        hangUp.resume()
        sources.append(hangUp)
        let outcome = group.run()
        withExtendedLifetime(sources) {}
        return outcome.exitStatus
    }
}
