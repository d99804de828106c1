import DarkroomCore
import DarkroomProtocol
import Dispatch
import Foundation
import Synchronization

/// Writes large input files on threads of its own, so that a burst of big
/// SUBMITs (each file written and fsynced) never holds up the broker's
/// core: the core hands over the bytes, goes on with its turns, and gets a
/// `.written` input back when the file is durable (but for its directory
/// entry, which the core's commit syncs for all the turn's files at once).
final class InputWriter: Sendable {
    private struct Request: Sendable {
        var job: ULID
        var bytes: [UInt8]
    }

    private struct Queue: ~Copyable {
        var requests: [Request] = []
        var closed = false
    }

    private let files: InputFiles
    private let queue = Mutex(Queue())
    private let available = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()
    private let threads: Int
    private let done: @Sendable (ULID, DurableFile.Failure?) -> Void

    /// Starts `threads` writer threads; `done` is called on one of them for
    /// each file, once it is written or has failed.
    init(files: InputFiles, threads: Int = 2, done: @escaping @Sendable (ULID, DurableFile.Failure?) -> Void) {
        self.files = files
        self.threads = max(1, threads)
        self.done = done
        for index in 0..<self.threads {
            finished.enter()
            let thread = Thread { [self] in
                Thread.current.name = "darkroom-input\(index)"
                defer { finished.leave() }
                serve()
            }
            thread.name = "darkroom-input\(index)"
            thread.start()
        }
    }

    /// Queues the input of `job` to be written under the job's id.
    func write(_ bytes: [UInt8], for job: ULID) {
        let accepted = queue.withLock { queue -> Bool in
            guard !queue.closed else { return false }
            queue.requests.append(Request(job: job, bytes: bytes))
            return true
        }
        if accepted {
            available.signal()
        } else {
            done(job, DurableFile.Failure("write", files.path(of: job.description), "the broker is stopping"))
        }
    }

    /// Writes what is queued, then stops the threads and returns.
    func close() {
        let wasOpen = queue.withLock { queue -> Bool in
            defer { queue.closed = true }
            return !queue.closed
        }
        guard wasOpen else { return }
        for _ in 0..<threads { available.signal() }
        finished.wait()
    }

    private func serve() {
        while true {
            available.wait()
            let next = queue.withLock { queue -> Request?? in
                if !queue.requests.isEmpty { return .some(queue.requests.removeFirst()) }
                return queue.closed ? .none : .some(nil)
            }
            guard let request = next else { return }
            guard let request else { continue }
            do {
                try files.write(request.bytes, name: request.job.description)
                done(request.job, nil)
            } catch {
                done(request.job, error)
            }
        }
    }
}
