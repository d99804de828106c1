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
public struct PipelineFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public var stage: Stage
    public var error: ImageError

    public init(stage: Stage, error: ImageError) {
        self.stage = stage
        self.error = error
    }

    public var description: String { "\(stage): \(error.message)" }
}

/// One link of a compound operation: a named, Sendable transformation from the
/// previous link's output to the next link's input (the server-side form of a
/// `ChainableOperation<Buffer>`). It either returns its output or throws an
/// `ImageError`, which the compound operation wraps with the link's stage.
public struct ChainableOperation<Input, Output>: Sendable {
    public let stage: Stage
    let body: @Sendable (Input) throws(ImageError) -> Output

    public init(_ stage: Stage, _ body: @escaping @Sendable (Input) throws(ImageError) -> Output) {
        self.stage = stage
        self.body = body
    }
}

/// A typed chain of operations run in order, each reading the previous one's
/// result. The first error stops the chain and is reported with the stage that
/// raised it. Stages can be observed (for timings or progress) through `observer`.
public struct CompoundOperation<Input, Output>: Sendable {
    /// Called after each stage with its description and its duration.
    public typealias Observer = @Sendable (Stage, Duration) -> Void

    private let body: @Sendable (Input, Observer?) throws(PipelineFailure) -> Output

    private init(body: @escaping @Sendable (Input, Observer?) throws(PipelineFailure) -> Output) {
        self.body = body
    }

    /// A chain of one operation.
    public init(_ first: ChainableOperation<Input, Output>) {
        self.body = { (input: Input, observer: Observer?) throws(PipelineFailure) -> Output in
            try CompoundOperation.runLink(first, input, observer)
        }
    }

    /// This chain followed by one more operation.
    public func then<Next>(_ next: ChainableOperation<Output, Next>) -> CompoundOperation<Input, Next> {
        let head = body
        return CompoundOperation<Input, Next>(body: { (input: Input, observer: Observer?) throws(PipelineFailure) -> Next in
            let intermediate = try head(input, observer)
            return try CompoundOperation<Output, Next>.runLink(next, intermediate, observer)
        })
    }

    /// Runs the chain.
    public func run(_ input: Input, observer: Observer? = nil) throws(PipelineFailure) -> Output {
        try body(input, observer)
    }

    private static func runLink<A, B>(_ link: ChainableOperation<A, B>, _ input: A, _ observer: Observer?) throws(PipelineFailure) -> B {
        let clock = ContinuousClock()
        let start = clock.now
        let output: B
        do {
            output = try link.body(input)
        } catch {
            throw PipelineFailure(stage: link.stage, error: error)
        }
        observer?(link.stage, clock.now - start)
        return output
    }
}
