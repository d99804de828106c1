import DarkroomImage

/// Where in a job something failed: decoding, one pipeline step, or encoding.
public enum Stage: Sendable, Equatable, CustomStringConvertible {
    /// Reading the JPEG and checking it against the limits.
    case decode
    /// Pipeline step `index` (1-based) with its canonical text.
    case step(index: Int, text: String)
    /// Encoding one of the outputs ("full" or "thumbnail").
    case encode(String)

    public var description: String {
        switch self {
        case .decode: "decode"
        case let .step(index, text): "step \(index) \(text)"
        case let .encode(output): "encode \(output)"
        }
    }

    /// The stage as a number: 1-based for pipeline steps, 0 for decode, -1 for
    /// encode. DRK1 carries the same step numbers but 0 for both decode and
    /// encode, with the stage named in the reason.
    public var index: Int {
        switch self {
        case .decode: 0
        case let .step(index, _): index
        case .encode: -1
        }
    }
}

/// A failure that names the stage and the reason:
/// `step 2 crop:600x600+0+0: rectangle 600x600+0+0 exceeds image 500x400`.
///
/// A cancelled run fails this way too, with the `cancelled` code and the stage
/// it was in: `step 3 blur:20: cancelled`.
public struct PipelineFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public var stage: Stage
    public var error: ImageError

    public init(stage: Stage, error: ImageError) {
        self.stage = stage
        self.error = error
    }

    /// The failure of a run stopped through its `CancellationFlag` in `stage`.
    public static func cancelled(in stage: Stage) -> PipelineFailure {
        PipelineFailure(stage: stage, error: .cancelled)
    }

    /// Whether the run was cancelled rather than failed.
    public var isCancellation: Bool { error.code == .cancelled }

    public var description: String { "\(stage): \(error.message)" }
}

extension ImageError.Code {
    /// The failure code a job's FAIL, its events and `process --json`
    /// carry for this error: `image.truncated` (drk1.md section 6.5).
    public var failureCode: String { "image.\(name)" }
}

/// One link of a compound operation: a named, Sendable transformation from the
/// previous link's output to the next link's input (the server-side form of a
/// `ChainableOperation<Buffer>`). It either returns its output or throws an
/// `ImageError`, which the compound operation wraps with the link's stage.
///
/// A link may take the run's `CancellationFlag` and pass it to the operations
/// it calls, so that a long link stops soon after the flag is set.
public struct ChainableOperation<Input, Output>: Sendable {
    public let stage: Stage
    let body: @Sendable (Input, CancellationFlag) throws(ImageError) -> Output

    /// A link that takes the run's cancellation flag.
    public init(_ stage: Stage, _ body: @escaping @Sendable (Input, CancellationFlag) throws(ImageError) -> Output) {
        self.stage = stage
        self.body = body
    }

    /// A link that does not look at the flag: a run cancelled while it works
    /// stops when it returns.
    public init(_ stage: Stage, _ body: @escaping @Sendable (Input) throws(ImageError) -> Output) {
        self.stage = stage
        self.body = { (input: Input, _: CancellationFlag) throws(ImageError) -> Output in try body(input) }
    }
}

/// A typed chain of operations run in order, each reading the previous one's
/// result. The first error stops the chain and is reported with the stage that
/// raised it. Stages can be observed (for timings or progress) through `observer`.
///
/// A run can be cancelled from any thread through the `CancellationFlag` it
/// was given, as `Operation.cancel()` cancels a Foundation operation. The run
/// looks at the flag before each link and after it, and the links pass it to
/// the engine's long loops; a cancelled run throws `PipelineFailure` with the
/// `cancelled` code and the stage where it stopped, and never returns a
/// partial result. A flag set before the run starts stops it before the first
/// link.
public struct CompoundOperation<Input, Output>: Sendable {
    /// Called after each stage with its description and its duration.
    public typealias Observer = @Sendable (Stage, Duration) -> Void

    private let body: @Sendable (Input, CancellationFlag, Observer?) throws(PipelineFailure) -> Output

    private init(body: @escaping @Sendable (Input, CancellationFlag, Observer?) throws(PipelineFailure) -> Output) {
        self.body = body
    }

    /// A chain of one operation.
    public init(_ first: ChainableOperation<Input, Output>) {
        self.body = { (input: Input, cancellation: CancellationFlag, observer: Observer?) throws(PipelineFailure) -> Output in
            try CompoundOperation.runLink(first, input, cancellation, observer)
        }
    }

    /// This chain followed by one more operation.
    public func then<Next>(_ next: ChainableOperation<Output, Next>) -> CompoundOperation<Input, Next> {
        let head = body
        return CompoundOperation<Input, Next>(body: {
            (input: Input, cancellation: CancellationFlag, observer: Observer?) throws(PipelineFailure) -> Next in
            let intermediate = try head(input, cancellation, observer)
            return try CompoundOperation<Output, Next>.runLink(next, intermediate, cancellation, observer)
        })
    }

    /// Runs the chain. Once `cancellation` is set the run stops and throws
    /// `PipelineFailure.cancelled(in:)` naming the stage it was in.
    public func run(_ input: Input, cancellation: CancellationFlag = .never, observer: Observer? = nil) throws(PipelineFailure) -> Output {
        try body(input, cancellation, observer)
    }

    private static func runLink<A, B>(
        _ link: ChainableOperation<A, B>, _ input: A, _ cancellation: CancellationFlag, _ observer: Observer?
    ) throws(PipelineFailure) -> B {
        if cancellation.isCancelled { throw .cancelled(in: link.stage) }
        let clock = ContinuousClock()
        let start = clock.now
        let output: B
        do {
            output = try link.body(input, cancellation)
        } catch {
            throw PipelineFailure(stage: link.stage, error: error)
        }
        // A link that stopped early may have returned what it had: the output
        // of a link that finished under a set flag is never passed on.
        if cancellation.isCancelled { throw .cancelled(in: link.stage) }
        observer?(link.stage, clock.now - start)
        return output
    }
}
