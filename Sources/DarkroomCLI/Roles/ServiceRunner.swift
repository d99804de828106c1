import DarkroomCore
import Dispatch
import Foundation
import Synchronization

/// What the runner needs from a role's service (broker, store, worker).
protocol RunnableService: Sendable {
    func start() throws
    func stop(grace: Duration)
    func wait()
}

/// Runs long-lived services in the foreground until SIGTERM or SIGINT, then
/// stops them in reverse order of starting, each within a grace period (the
/// swift-service-lifecycle model). A second signal exits at once.
enum ServiceRunner {
    struct Entry {
        var name: String
        var service: any RunnableService
    }

    /// Starts every service in order; if one fails to start, stops those already
    /// started and reports which one failed and why.
    static func start(_ entries: [Entry], logger: Logger) throws -> [Entry] {
        var started: [Entry] = []
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

    /// Blocks until a termination signal, then stops the services.
    static func runUntilSignalled(_ entries: [Entry], logger: Logger, grace: Duration) -> Int32 {
        let signalled = DispatchSemaphore(value: 0)
        let count = Atomic<Int>(0)
        let queue = DispatchQueue(label: "darkroom.signals")
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler {
                let n = count.wrappingAdd(1, ordering: .relaxed).newValue
                if n == 1 {
                    logger.info("received \(sig == SIGTERM ? "SIGTERM" : "SIGINT"); shutting down (send it again to exit at once)")
                    signalled.signal()
                } else {
                    logger.warn("second signal: exiting now")
                    exit(1)
                }
            }
            source.resume()
            sources.append(source)
        }
        // Also return if every service stops on its own (e.g. a fatal error).
        let allDone = DispatchSemaphore(value: 0)
        let watcher = Thread {
            for entry in entries { entry.service.wait() }
            allDone.signal()
        }
        watcher.start()
        while true {
            if signalled.wait(timeout: .now() + .milliseconds(200)) == .success { break }
            if allDone.wait(timeout: .now()) == .success {
                logger.warn("every service has stopped; exiting")
                return 1
            }
        }
        for entry in entries.reversed() {
            logger.info("stopping the \(entry.name)")
            entry.service.stop(grace: grace)
        }
        for entry in entries { entry.service.wait() }
        withExtendedLifetime(sources) {}
        logger.info("stopped cleanly")
        return 0
    }
}
