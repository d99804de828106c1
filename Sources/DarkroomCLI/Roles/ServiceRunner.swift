import DarkroomCore
import Dispatch
import Foundation
import Synchronization

/// Starts a process's services and runs them as one `ServiceGroup` until
/// SIGTERM or SIGINT, or until one of them ends on its own. A second signal
/// exits at once.
enum ServiceRunner {
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
                throw RuntimeError("cannot start the \(entry.name): \(error)")
            }
        }
        return started
    }

    /// Blocks until a termination signal or until a service ends without
    /// being asked to, then stops the others. Returns the exit status: 0
    /// after a signal, 1 when a service ended on its own.
    static func runUntilSignalled(_ entries: [ServiceGroup.Entry], logger: Logger, grace: Duration) -> Int32 {
        let group = ServiceGroup(entries, grace: grace, logger: logger)
        let count = Atomic<Int>(0)
        let queue = DispatchQueue(label: "darkroom.signals")
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
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
        let outcome = group.run()
        withExtendedLifetime(sources) {}
        return outcome.exitStatus
    }
}
