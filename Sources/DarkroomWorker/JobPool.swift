import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import Dispatch
import Foundation
import Synchronization

/// One job for a processing thread: everything it needs, as values.
struct WorkItem: Sendable {
    /// The service thread's name for this run (unique per process).
    var run: UInt64
    var pipeline: String
    var options: DarkroomPipeline.JobOptions
    var image: [UInt8]
}

/// A fixed set of processing threads that run image jobs. The service thread
/// submits a job only when it holds a free slot for it, so the queue never
/// holds more than the slot count; each result goes to `completion`, which
/// posts it to the service thread's mailbox.
///
/// Threads block on a semaphore that counts queued items; the queue itself is
/// behind a mutex. `shutdown` queues one stop marker per thread, so each thread
/// exits after the job it is running, if any.
///
/// A job may be submitted with a `CancellationFlag`: setting it, from any
/// thread, stops the job where it is (or before it starts) and the job ends
/// as a failure with the `image.cancelled` code. Its `RunStart` says when a
/// thread took it up, for the service thread's time limit.
final class JobPool: Sendable {
    typealias Completion = @Sendable (_ run: UInt64, _ outcome: JobOutcome, _ stages: StageDurations, _ elapsed: Duration) -> Void

    /// A queued job, the flag that cancels it and the mark of its start.
    private struct Queued: Sendable {
        var item: WorkItem
        var cancellation: CancellationFlag
        var start: RunStart?
    }

    private let queue = Mutex<[Queued?]>([])
    private let available = DispatchSemaphore(value: 0)
    private let threadCount: Int

    init(threads: Int, name: String, completion: @escaping Completion) {
        threadCount = threads
        for index in 0..<threads {
            let threadName = "\(name)-\(index)"
            let thread = Thread { [self] in
                Thread.current.name = threadName  // the kernel's name too (see ServiceThread)
                while let queued = next() {
                    let clock = ContinuousClock()
                    let start = clock.now
                    queued.start?.mark(start)
                    let (outcome, stages) = JobPool.process(queued.item, cancellation: queued.cancellation)
                    completion(queued.item.run, outcome, stages, clock.now - start)
                }
            }
            thread.name = threadName
            thread.start()
        }
    }

    /// Queues a job; `cancellation` can stop it until it has finished, and
    /// `start` is marked when a thread takes it up.
    func submit(_ item: WorkItem, cancellation: CancellationFlag = .never, start: RunStart? = nil) {
        queue.withLock { $0.append(Queued(item: item, cancellation: cancellation, start: start)) }
        available.signal()
    }

    /// Lets every thread exit once it has finished its current job.
    func shutdown() {
        queue.withLock { items in
            items.removeAll()
            items.append(contentsOf: Array(repeating: nil, count: threadCount))
        }
        for _ in 0..<threadCount { available.signal() }
    }

    private func next() -> Queued? {
        available.wait()
        return queue.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }

    /// The pipelines of recent jobs, parsed once each (shared by the threads).
    static let pipelines = PipelineCache()

    /// Parses the pipeline and runs the compound operation, timing its
    /// stages. Pure computation: no sockets, and no shared state but the
    /// pipeline cache. Once `cancellation` is set the run stops and the
    /// outcome names the stage it was stopped in.
    static func process(_ item: WorkItem, cancellation: CancellationFlag = .never) -> (JobOutcome, StageDurations) {
        let parsed: PipelineCache.Entry
        do {
            parsed = try pipelines.parse(item.pipeline)
        } catch {
            return (.failed(FailureMapping.invalidPipeline(error), retryable: false), StageDurations())
        }
        let timer = StageTimer()
        do {
            let output = try ImageJob(pipeline: parsed.pipeline, options: item.options)
                .run(item.image, cancellation: cancellation, observer: timer.observe)
            return (.processed(output, pipeline: parsed.canonical), timer.durations)
        } catch where error.isCancellation {
            return (.stopped(error.stage), timer.durations)
        } catch {
            return (.failed(FailureMapping.pipelineFailure(error), retryable: false), timer.durations)
        }
    }
}

/// How long a job's stages took on its processing thread; nil for a stage
/// that did not finish.
struct StageDurations: Sendable {
    var decode: Duration?
    /// Set once the steps are over (when the full-size encoding finished),
    /// so that a job that failed in a step counts no pipeline time.
    var pipeline: Duration?
    var encodeFull: Duration?
    var encodeThumbnail: Duration?
}

/// Collects the compound operation's stage times for one job. The observer
/// is called on the job's own thread, between its links; the lock only
/// makes that provable to the compiler, and is never contended.
final class StageTimer: Sendable {
    private let state = Mutex<(durations: StageDurations, steps: Duration)>((StageDurations(), .zero))

    var durations: StageDurations { state.withLock { $0.durations } }

    @Sendable func observe(_ stage: Stage, _ duration: Duration) {
        state.withLock { state in
            switch stage {
            case .decode:
                state.durations.decode = duration
            case .step:
                state.steps += duration
            case .encode("full"):
                state.durations.pipeline = state.steps
                state.durations.encodeFull = duration
            case .encode:
                state.durations.encodeThumbnail = duration
            }
        }
    }
}
