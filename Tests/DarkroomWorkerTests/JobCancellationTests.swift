import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import Dispatch
import Synchronization
import Testing
@testable import DarkroomWorker

/// The processing threads' entry point takes a cancellation flag: a job
/// whose flag is set comes back stopped, with the stage it was in; one whose
/// flag is never set (or that has none) is processed as ever.
@Suite("Cancelling jobs on the processing threads")
struct JobCancellationTests {
    static let item = WorkItem(run: 1, pipeline: "scale:64x64,mode=fill | crop:square | sepia", options: JobOptions(), image: Fixture.jpeg)

    @Test func aCancelledJobFailsAsCancelled() {
        let flag = CancellationFlag()
        flag.cancel()
        let (outcome, stages) = JobPool.process(Self.item, cancellation: flag)
        guard case let .stopped(stage) = outcome else {
            Issue.record("expected a stopped run, got \(outcome)")
            return
        }
        #expect(stage == .decode)
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
        let origin = ContinuousClock.now
        let starts = [RunStart(origin: origin), RunStart(origin: origin)]
        #expect(starts[0].instant == nil)
        pool.submit(first, cancellation: cancelled, start: starts[0])
        pool.submit(second)
        pool.submit(third, cancellation: CancellationFlag(), start: starts[1])
        for _ in 0..<3 { done.wait() }
        let results = outcomes.withLock { $0 }
        if case .stopped(.decode)? = results[1] {} else {
            Issue.record("job 1 should have been stopped before decoding, got \(String(describing: results[1]))")
        }
        // Each start is marked when the thread took the job up.
        let marked = starts.compactMap(\.instant)
        #expect(marked.count == 2 && marked[0] >= origin && marked[0] <= marked[1] && marked[1] <= .now)
        for run in [UInt64(2), 3] {
            guard case .processed? = results[run] else {
                Issue.record("job \(run) should have been processed")
                continue
            }
        }
    }

    @Test func aTimeoutNamesTheStepItStoppedIn() {
        let inStep = FailureMapping.timeout(in: .step(index: 2, text: "blur:30"), limit: JobTimeLimit(duration: .seconds(90), isJobs: false))
        #expect(inStep.code == "job.timeout" && inStep.stepIndex == 2 && inStep.step == "blur:30")
        #expect(inStep.summary == "step 2 blur:30: job.timeout: stopped: ran longer than the worker's time limit of 90 s (--job-timeout)")
        let inEncode = FailureMapping.timeout(in: .encode("full"), limit: JobTimeLimit(duration: .seconds(5), isJobs: true))
        #expect(inEncode.stepIndex == 0 && inEncode.step.isEmpty)
        #expect(inEncode.reason == "encode full: stopped: ran longer than the job's time limit of 5 s (submit --time-limit)")
    }

    @Test func theLowerLimitHolds() {
        #expect(JobTimeLimit.of(job: nil, worker: nil) == nil)
        #expect(JobTimeLimit.of(job: 30, worker: nil) == JobTimeLimit(duration: .seconds(30), isJobs: true))
        #expect(JobTimeLimit.of(job: nil, worker: .seconds(600)) == JobTimeLimit(duration: .seconds(600), isJobs: false))
        #expect(JobTimeLimit.of(job: 30, worker: .seconds(600)) == JobTimeLimit(duration: .seconds(30), isJobs: true))
        #expect(JobTimeLimit.of(job: 900, worker: .seconds(600)) == JobTimeLimit(duration: .seconds(600), isJobs: false))
    }
}
