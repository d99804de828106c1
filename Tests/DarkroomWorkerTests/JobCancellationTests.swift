import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import Dispatch
import Synchronization
import Testing
@testable import DarkroomWorker

/// The processing threads' entry point takes a cancellation flag: a job
/// whose flag is set ends as an `image.cancelled` failure, one whose flag is
/// never set (or that has none) is processed as ever.
@Suite("Cancelling jobs on the processing threads")
struct JobCancellationTests {
    static let item = WorkItem(run: 1, pipeline: "scale:64x64,mode=fill | crop:square | sepia", options: JobOptions(), image: Fixture.jpeg)

    @Test func aCancelledJobFailsAsCancelled() {
        let flag = CancellationFlag()
        flag.cancel()
        let (outcome, stages) = JobPool.process(Self.item, cancellation: flag)
        guard case let .failed(detail, retryable) = outcome else {
            Issue.record("expected a failure, got \(outcome)")
            return
        }
        #expect(detail.code == "image.cancelled")
        #expect(detail.reason == "decode: cancelled")
        #expect(!retryable)
        #expect(stages.decode == nil && stages.pipeline == nil)
    }

    @Test func aJobNobodyCancelsIsProcessedAsWithoutAFlag() {
        guard case let .processed(flagged, _) = JobPool.process(Self.item, cancellation: CancellationFlag()).0,
              case let .processed(plain, _) = JobPool.process(Self.item).0
        else {
            Issue.record("expected both jobs processed")
            return
        }
        #expect(flagged == plain)
    }

    @Test func thePoolPassesEachJobItsFlag() {
        let outcomes = Mutex<[UInt64: JobOutcome]>([:])
        let done = DispatchSemaphore(value: 0)
        let pool = JobPool(threads: 1, name: "cancel-test") { run, outcome, _, _ in
            outcomes.withLock { $0[run] = outcome }
            done.signal()
        }
        defer { pool.shutdown() }
        let cancelled = CancellationFlag()
        cancelled.cancel()
        var first = Self.item, second = Self.item, third = Self.item
        first.run = 1
        second.run = 2
        third.run = 3
        pool.submit(first, cancellation: cancelled)
        pool.submit(second)
        pool.submit(third, cancellation: CancellationFlag())
        for _ in 0..<3 { done.wait() }
        let results = outcomes.withLock { $0 }
        if case let .failed(detail, _)? = results[1] {
            #expect(detail.code == "image.cancelled")
        } else {
            Issue.record("job 1 should have been cancelled")
        }
        for run in [UInt64(2), 3] {
            guard case .processed? = results[run] else {
                Issue.record("job \(run) should have been processed")
                continue
            }
        }
    }
}
