import DarkroomImage
import Foundation
import Synchronization
import Testing

@testable import DarkroomPipeline

/// Cancelling a compound operation: before it starts nothing runs, while it
/// runs it stops in the stage it is in and says which, and a run nobody
/// cancels gives what it always gave. Where a test needs the run stopped at an
/// exact point of its work, the flag sets itself at a chosen look of the
/// engine's loops (`CancellationFlag(cancellingAtPoll:)`); the one test that
/// cancels from another thread checks how far the work got, never how long
/// it took.
@Suite("Cancellation of compound operations")
struct CancellationTests {
    /// A value shared with the closures of a run (which may be on another thread).
    final class Shared<Value: Sendable>: Sendable {
        private let mutex: Mutex<Value>
        init(_ value: Value) { mutex = Mutex(value) }
        func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
    }

    // MARK: - The chain itself

    static func stage(_ name: String, _ index: Int) -> Stage { .step(index: index, text: name) }

    /// a: +1, b: x2 (calling `during` first), c: +3, each logging its name.
    static func chain(
        log: Shared<[String]>, during: @escaping @Sendable (CancellationFlag) -> Void = { _ in }
    ) -> CompoundOperation<Int, Int> {
        CompoundOperation(ChainableOperation(stage("a", 1)) { (x: Int) throws(ImageError) -> Int in
            log.withLock { $0.append("a") }
            return x + 1
        })
        .then(ChainableOperation(stage("b", 2)) { (x: Int, cancellation: CancellationFlag) throws(ImageError) -> Int in
            log.withLock { $0.append("b") }
            during(cancellation)
            return x * 2
        })
        .then(ChainableOperation(stage("c", 3)) { (x: Int) throws(ImageError) -> Int in
            log.withLock { $0.append("c") }
            return x + 3
        })
    }

    /// An observer that records the stages it is told about.
    static func recorder(_ seen: Shared<[Stage]>) -> CompoundOperation<Int, Int>.Observer {
        { stage, _ in seen.withLock { $0.append(stage) } }
    }

    @Test("a run nobody cancels runs every link")
    func notCancelled() throws {
        let log = Shared<[String]>([])
        let seen = Shared<[Stage]>([])
        let flag = CancellationFlag()
        #expect(try Self.chain(log: log).run(1, cancellation: flag, observer: Self.recorder(seen)) == 7)
        #expect(log.withLock { $0 } == ["a", "b", "c"])
        #expect(seen.withLock { $0 } == [Self.stage("a", 1), Self.stage("b", 2), Self.stage("c", 3)])
    }

    @Test("cancelled before it starts, a run runs no link")
    func cancelledBeforeStart() {
        let log = Shared<[String]>([])
        let seen = Shared<[Stage]>([])
        let flag = CancellationFlag()
        flag.cancel()
        #expect(throws: PipelineFailure.cancelled(in: Self.stage("a", 1))) {
            _ = try Self.chain(log: log).run(1, cancellation: flag, observer: Self.recorder(seen))
        }
        #expect(log.withLock { $0 }.isEmpty)
        #expect(seen.withLock { $0 }.isEmpty)
    }

    @Test("cancelled during a link, the run stops there and drops that link's output")
    func cancelledDuringALink() {
        let log = Shared<[String]>([])
        let seen = Shared<[Stage]>([])
        // Link b returns normally, as a link that does not look at the flag
        // would, but the flag was set while it ran.
        let chain = Self.chain(log: log) { $0.cancel() }
        let failure = PipelineFailure.cancelled(in: Self.stage("b", 2))
        #expect(throws: failure) { _ = try chain.run(1, cancellation: CancellationFlag(), observer: Self.recorder(seen)) }
        #expect(log.withLock { $0 } == ["a", "b"])
        #expect(seen.withLock { $0 } == [Self.stage("a", 1)])
        #expect(failure.isCancellation)
        #expect(failure.description == "step 2 b: cancelled")
    }

    @Test("a link's own cancelled error is reported with its stage")
    func linkThrowsCancelled() {
        let chain = CompoundOperation(ChainableOperation(Stage.decode) { (x: Int, c: CancellationFlag) throws(ImageError) -> Int in
            c.cancel()
            try c.check()
            return x
        })
        #expect(throws: PipelineFailure.cancelled(in: .decode)) { _ = try chain.run(0, cancellation: CancellationFlag()) }
        // The shared never flag cannot be set, so the same chain runs through.
        #expect(throws: Never.self) { _ = try chain.run(0) }
    }

    // MARK: - Image jobs

    /// A 1024x768 picture whose channels vary differently, as a q90 JPEG.
    static let jpeg: [UInt8] = {
        let width = 1024, height = 768
        var bytes = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 4
                bytes[i] = UInt8(truncatingIfNeeded: x)
                bytes[i + 1] = UInt8(truncatingIfNeeded: y * 3)
                bytes[i + 2] = UInt8(truncatingIfNeeded: (x ^ y) >> 1)
            }
        }
        return try! JPEG.encode(Image(width: width, height: height, pixels: bytes), options: EncodeOptions(quality: 90))
    }()

    static let pipelines = [
        "rotate:90 | glitch:seed=3,amount=0.5 | brightness:1.2 | sepia",
        "scale:600x600,mode=fill | crop:square | blur:1",
        "grayscale | invert | pixelate:6",
        "invert | grayscale | sharpen:0.5,amount=2 | flip:v",
        "crop:800x500,gravity=south | saturation:1.4 | contrast:0.8 | rotate:270",
    ]

    static func job(_ text: String) throws -> ImageJob {
        ImageJob(pipeline: try Pipeline(parsing: text), options: JobOptions(thumbnail: Size(width: 64, height: 64)))
    }

    @Test("cancelled before it starts, a job decodes nothing")
    func jobCancelledBeforeStart() throws {
        let flag = CancellationFlag()
        flag.cancel()
        let seen = Shared<[Stage]>([])
        #expect(throws: PipelineFailure.cancelled(in: .decode)) {
            _ = try Self.job(Self.pipelines[0]).run(Self.jpeg, cancellation: flag) { stage, _ in seen.withLock { $0.append(stage) } }
        }
        #expect(flag.pollCount == 0)
        #expect(seen.withLock { $0 }.isEmpty)
    }

    @Test("a job nobody cancels writes the same files as one that cannot be cancelled", arguments: pipelines)
    func sameOutputWithAFlag(_ text: String) throws {
        let job = try Self.job(text)
        let flag = CancellationFlag()
        let output = try job.run(Self.jpeg, cancellation: flag)
        #expect(output == (try job.run(Self.jpeg)))
        #expect(flag.pollCount > 0)
    }

    @Test("every stage of a job stops where the flag is set and is named", arguments: pipelines)
    func everyStageStops(_ text: String) throws {
        let job = try Self.job(text)
        // Where each stage's looks at the flag end, from a run nobody cancels.
        let counting = CancellationFlag()
        let ends = Shared<[(Stage, Int)]>([])
        _ = try job.run(Self.jpeg, cancellation: counting) { stage, _ in ends.withLock { $0.append((stage, counting.pollCount)) } }
        let stages = ends.withLock { $0 }
        #expect(stages.count >= 4)
        var previous = 0
        for (index, (stage, end)) in stages.enumerated() {
            defer { previous = end }
            // Every link of these jobs has loops that look at the flag.
            #expect(end > previous, "\(text): \(stage) never looked at the flag")
            guard end > previous else { continue }
            // Cancelled at the stage's first look: it stops there, the stages
            // before it finished, none after it ran.
            let flag = CancellationFlag(cancellingAtPoll: previous + 1)
            let seen = Shared<[Stage]>([])
            #expect(throws: PipelineFailure.cancelled(in: stage), "\(text): \(stage)") {
                _ = try job.run(Self.jpeg, cancellation: flag) { stage, _ in seen.withLock { $0.append(stage) } }
            }
            #expect(flag.pollCount == previous + 1, "\(text): \(stage)")
            #expect(seen.withLock { $0 } == stages.prefix(index).map(\.0), "\(text): \(stage)")
        }
    }

    @Test("cancelled from another thread, a slow job on a large image stops in the step it is in")
    func cancelFromAnotherThread() throws {
        let width = 8000, height = 6000
        let flat = Image(width: width, height: height, pixels: [UInt8](repeating: 170, count: width * height * 4))
        let jpeg = try JPEG.encode(flat, options: EncodeOptions(quality: 80, subsampling: .s420))
        // blur:20 runs its 122-tap passes with a look at the flag every row.
        let job = ImageJob(pipeline: try Pipeline(parsing: "blur:20 | sharpen:2 | scale:4000x3000"))
        let flag = CancellationFlag()
        let seen = Shared<[Stage]>([])
        let decodeLooks = Shared<Int?>(nil)
        let outcome = Shared<Result<JobOutput, PipelineFailure>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let runner = Thread {
            let result: Result<JobOutput, PipelineFailure>
            do throws(PipelineFailure) {
                result = .success(try job.run(jpeg, cancellation: flag) { stage, _ in
                    seen.withLock { $0.append(stage) }
                    if stage == .decode { decodeLooks.withLock { $0 = flag.pollCount } }
                })
            } catch {
                result = .failure(error)
            }
            outcome.withLock { $0 = result }
            finished.signal()
        }
        runner.start()
        // Wait for the blur to be under way: decoded, and two looks into the step.
        var blurStarted = false
        while !blurStarted && outcome.withLock({ $0 == nil }) {
            if let decoded = decodeLooks.withLock({ $0 }), flag.pollCount >= decoded + 2 {
                blurStarted = true
            } else {
                usleep(1_000)
            }
        }
        #expect(blurStarted)
        flag.cancel()
        finished.wait()

        let blur = Stage.step(index: 1, text: "blur:20")
        let result = try #require(outcome.withLock { $0 })
        guard case let .failure(failure) = result else {
            Issue.record("the job finished although it was cancelled")
            return
        }
        #expect(failure == .cancelled(in: blur))
        #expect(failure.description == "step 1 blur:20: cancelled")
        #expect(seen.withLock { $0 } == [.decode])
        // The blur looks once per row, 6000 times in its first pass alone: it
        // stopped well before the end of that pass.
        let decoded = try #require(decodeLooks.withLock { $0 })
        #expect(flag.pollCount - decoded < height)
    }
}
