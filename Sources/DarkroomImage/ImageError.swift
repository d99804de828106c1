/// Everything that can go wrong in the image engine: decoding, limits, operations,
/// encoding. The `code` lets callers branch (`catch let e as ImageError where
/// e.code == .truncated`); the `message` is the sentence a user reads.
public struct ImageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An extensible set of error kinds.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Zero bytes of input.
        public static let empty = Code("empty")
        /// The bytes do not start like a JPEG (no SOI marker).
        public static let notJPEG = Code("not-jpeg")
        /// The bytes do not start like a WebP file ("RIFF", a size, "WEBP").
        public static let notWebP = Code("not-webp")
        /// A job's source starts like none of the formats it may be in:
        /// JPEG, PNG, WebP, GIF, HEIF or TIFF.
        public static let unsupportedFormat = Code("unsupported-format")
        /// The data ends before the image does (libjpeg's premature-end warning).
        public static let truncated = Code("truncated")
        /// The data is malformed: bad markers, bad Huffman codes, bad headers.
        public static let corrupt = Code("corrupt")
        /// The header declares dimensions that are zero or impossible.
        public static let invalidDimensions = Code("invalid-dimensions")
        /// The image is over one of the configured limits (pixels, side, bytes).
        public static let limitExceeded = Code("limit-exceeded")
        /// A valid JPEG using a feature the engine does not handle (e.g. 12-bit).
        public static let unsupported = Code("unsupported")
        /// An operation was given arguments that do not fit the image.
        public static let invalidArgument = Code("invalid-argument")
        /// The encoder failed.
        public static let encodeFailed = Code("encode-failed")
        /// The work was stopped through its `CancellationFlag` before it finished.
        public static let cancelled = Code("cancelled")
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    /// The error of an operation stopped through its `CancellationFlag`.
    public static let cancelled = ImageError(.cancelled, "cancelled")

    /// Whether running the same input again could succeed. Every image error is a
    /// property of the input, so none is retryable. A cancellation is not, but
    /// whoever cancelled asked for the work not to be done: retrying it on its
    /// own would undo that decision.
    public var isRetryable: Bool { false }
}
