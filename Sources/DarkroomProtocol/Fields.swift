/// The job options frame of SUBMIT and JOB: 8 bytes, big-endian.
///
///     offset 0  u16  thumbnail width, 1…4096
///     offset 2  u16  thumbnail height, 1…4096
///     offset 4  u8   full-resolution JPEG quality, 1…100
///     offset 5  u8   thumbnail JPEG quality, 1…100
///     offset 6  u8   output flags: bits 0–1 chroma subsampling (0 auto,
///                    1 4:4:4, 2 4:2:2, 3 4:2:0), bit 2 progressive,
///                    bits 3–4 the full-resolution output's format and
///                    bits 5–6 the thumbnail's (0 JPEG, 1 WebP, 2 PNG,
///                    3 AVIF), bit 7 MUST be 0
///     offset 7  u8   thumbnail gravity, 0…9 (0 center … 9 smart)
public struct JobOptions: Sendable, Hashable {
    public var thumbnailWidth: UInt16
    public var thumbnailHeight: UInt16
    public var quality: UInt8
    public var thumbnailQuality: UInt8
    /// Chroma subsampling of both outputs.
    public var subsampling: Subsampling
    /// Both outputs written as progressive JPEGs.
    public var progressive: Bool
    /// Where the thumbnail's aspect-fill crop sits.
    public var thumbnailGravity: ThumbnailGravity
    /// The file format of the full-resolution output.
    public var format: OutputFormat
    /// The file format of the thumbnail.
    public var thumbnailFormat: OutputFormat

    /// The file format of an output, as bits 3–4 (full resolution) and 5–6
    /// (thumbnail) of the flags carry it.
    public enum OutputFormat: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        case jpeg = 0
        /// Lossy WebP at the output's quality.
        case webp = 1
        /// Lossless PNG; the output's quality is not used.
        case png = 2
        /// Lossy AVIF (AV1 in HEIF) at the output's quality.
        case avif = 3

        /// "jpeg", "webp", "png" or "avif", as the command line spells it.
        public var description: String {
            switch self {
            case .jpeg: "jpeg"
            case .webp: "webp"
            case .png: "png"
            case .avif: "avif"
            }
        }

        public init?(name: String) {
            guard let format = Self.allCases.first(where: { $0.description == name }) else { return nil }
            self = format
        }
    }

    /// Where the thumbnail's crop sits, as byte 7 carries it; the names are
    /// pipeline.md's gravities.
    public enum ThumbnailGravity: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        case center = 0, north, south, east, west, northeast, northwest, southeast, southwest
        /// Where the picture has the most detail.
        case smart

        public var description: String {
            switch self {
            case .center: "center"
            case .north: "north"
            case .south: "south"
            case .east: "east"
            case .west: "west"
            case .northeast: "northeast"
            case .northwest: "northwest"
            case .southeast: "southeast"
            case .southwest: "southwest"
            case .smart: "smart"
            }
        }

        public init?(name: String) {
            guard let gravity = Self.allCases.first(where: { $0.description == name }) else { return nil }
            self = gravity
        }
    }

    /// Chroma subsampling as the flags carry it (bits 0–1).
    public enum Subsampling: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// 4:4:4 at quality 90 and above, else 4:2:0.
        case auto = 0
        case s444 = 1
        case s422 = 2
        case s420 = 3

        /// "auto", "444", "422" or "420", as the command line spells it.
        public var description: String {
            switch self {
            case .auto: "auto"
            case .s444: "444"
            case .s422: "422"
            case .s420: "420"
            }
        }
    }

    public static let frameSize = 8
    static let subsamplingMask: UInt8 = 0b011
    static let progressiveFlag: UInt8 = 0b100
    static let formatShift: UInt8 = 3
    static let thumbnailFormatShift: UInt8 = 5
    static let undefinedFlags: UInt8 = 0b1000_0000
    /// The defaults a producer uses when the user gives none: a 256×256
    /// thumbnail at quality 70, full resolution at quality 95, subsampling
    /// chosen by quality, baseline files.
    public static let `default` = JobOptions(thumbnailWidth: 256, thumbnailHeight: 256, quality: 95, thumbnailQuality: 70)

    public init(thumbnailWidth: UInt16, thumbnailHeight: UInt16, quality: UInt8, thumbnailQuality: UInt8,
                subsampling: Subsampling = .auto, progressive: Bool = false, thumbnailGravity: ThumbnailGravity = .center,
                format: OutputFormat = .jpeg, thumbnailFormat: OutputFormat = .jpeg) {
        self.thumbnailWidth = thumbnailWidth
        self.thumbnailHeight = thumbnailHeight
        self.quality = quality
        self.thumbnailQuality = thumbnailQuality
        self.subsampling = subsampling
        self.progressive = progressive
        self.thumbnailGravity = thumbnailGravity
        self.format = format
        self.thumbnailFormat = thumbnailFormat
    }

    /// The output flags byte (offset 6).
    public var flags: UInt8 {
        subsampling.rawValue | (progressive ? Self.progressiveFlag : 0)
            | format.rawValue << Self.formatShift | thumbnailFormat.rawValue << Self.thumbnailFormatShift
    }

    /// The options with the flags byte `flags` read back; nil when it sets
    /// a bit or a format DRK1 does not define.
    public func with(flags: UInt8) -> JobOptions? {
        guard Self.undefinedReason(flags) == nil,
              let mode = Subsampling(rawValue: flags & Self.subsamplingMask),
              let format = OutputFormat(rawValue: flags >> Self.formatShift & 0b11),
              let thumbnailFormat = OutputFormat(rawValue: flags >> Self.thumbnailFormatShift & 0b11) else { return nil }
        var options = self
        options.subsampling = mode
        options.progressive = flags & Self.progressiveFlag != 0
        options.format = format
        options.thumbnailFormat = thumbnailFormat
        return options
    }

    /// What the flags byte `flags` sets that DRK1 does not define; nil when
    /// nothing.
    /// (Every value of the two format fields names a format.)
    static func undefinedReason(_ flags: UInt8) -> String? {
        flags & undefinedFlags != 0 ? "bit 7 is not defined" : nil
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.frameSize)
        out.appendBigEndian(thumbnailWidth)
        out.appendBigEndian(thumbnailHeight)
        out.append(quality)
        out.append(thumbnailQuality)
        out.append(flags)
        out.append(thumbnailGravity.rawValue)
        return out
    }
}

extension MessageReader {
    mutating func options(_ field: String) throws(ProtocolError) -> JobOptions {
        let (i, parts) = try structure(field, width: JobOptions.frameSize) { (r: inout FrameReader) throws(FrameReader.OutOfBytes) in
            (try r.u16(), try r.u16(), try r.u8(), try r.u8(), try r.u8(), try r.u8())
        }
        let (w, h, q, tq, flags, gravityByte) = parts
        let side = 1...Wire.Limit.maxThumbnailSide
        guard side.contains(w) else { throw error(frame: i, field, "thumbnail width is \(w), must be 1…\(side.upperBound)") }
        guard side.contains(h) else { throw error(frame: i, field, "thumbnail height is \(h), must be 1…\(side.upperBound)") }
        guard (1...100).contains(q) else { throw error(frame: i, field, "quality is \(q), must be 1…100") }
        guard (1...100).contains(tq) else { throw error(frame: i, field, "thumbnail quality is \(tq), must be 1…100") }
        guard var options = JobOptions(thumbnailWidth: w, thumbnailHeight: h, quality: q, thumbnailQuality: tq).with(flags: flags) else {
            throw error(frame: i, field, "output flags are \(flags): \(JobOptions.undefinedReason(flags) ?? "not defined")")
        }
        guard let gravity = JobOptions.ThumbnailGravity(rawValue: gravityByte) else {
            throw error(frame: i, field, "thumbnail gravity is \(gravityByte), must be 0…\(JobOptions.ThumbnailGravity.allCases.count - 1)")
        }
        options.thumbnailGravity = gravity
        return options
    }

    mutating func size(_ field: String) throws(ProtocolError) -> ImageSize {
        let (i, parts) = try structure(field, width: 8) { (r: inout FrameReader) throws(FrameReader.OutOfBytes) in
            (try r.u32(), try r.u32())
        }
        let range = 1...Wire.Limit.maxImageSide
        guard range.contains(parts.0), range.contains(parts.1) else {
            throw error(frame: i, field, "is \(parts.0)x\(parts.1), each side must be 1…\(range.upperBound)")
        }
        return ImageSize(width: parts.0, height: parts.1)
    }

    mutating func pipeline(_ field: String = "pipeline") throws(ProtocolError) -> String {
        try text(field, bytes: 1...Wire.Limit.pipelineBytes)
    }

    /// A submit key: 1–64 bytes of printable ASCII without spaces.
    mutating func submitKey(_ field: String = "submit key") throws(ProtocolError) -> String {
        try token(field, bytes: 1...Wire.Limit.submitKeyBytes)
    }

    mutating func sourceName(_ field: String = "source name") throws(ProtocolError) -> String {
        try text(field, bytes: 0...Wire.Limit.sourceNameBytes)
    }

    mutating func failure(requireCode: Bool) throws(ProtocolError) -> FailureDetail {
        let stepIndex = try i32("step index", 0...Int32.max)
        let step = try text("step", bytes: 0...Wire.Limit.stepBytes)
        let code = try text("error code", bytes: (requireCode ? 1 : 0)...Wire.Limit.errorCodeBytes)
        let reason = try text("reason", bytes: 0...Wire.Limit.reasonBytes)
        return FailureDetail(stepIndex: stepIndex, step: step, code: code, reason: reason)
    }
}

extension MessageWriter {
    mutating func options(_ o: JobOptions) { raw(o.bytes) }
    mutating func size(_ s: ImageSize) {
        var out: [UInt8] = []
        out.appendBigEndian(s.width)
        out.appendBigEndian(s.height)
        raw(out)
    }
    mutating func failure(_ f: FailureDetail) {
        i32(f.stepIndex)
        text(f.step)
        text(f.code)
        text(f.reason)
    }
}

/// Width and height in pixels, as an 8-byte frame (two u32).
public struct ImageSize: Sendable, Hashable, Codable {
    public var width: UInt32
    public var height: UInt32
    public init(width: UInt32, height: UInt32) {
        self.width = width
        self.height = height
    }
}

/// Why a job attempt failed, as FAIL and EVENT carry it: which pipeline step
/// (numbered from 1 in pipeline order, as people read it, or 0 when the
/// failure is not in a step: decode, encode, store, shutdown, a lost worker;
/// the reason then starts with the stage), that step's canonical text, a
/// short machine code (`image.corrupt`, `pipeline.invalid`, `worker.lost`…)
/// and a sentence.
public struct FailureDetail: Sendable, Hashable, Codable {
    public var stepIndex: Int32
    public var step: String
    public var code: String
    public var reason: String

    public init(stepIndex: Int32 = 0, step: String = "", code: String, reason: String) {
        self.stepIndex = stepIndex
        self.step = step
        self.code = code
        self.reason = reason
    }

    static let none = FailureDetail(stepIndex: 0, step: "", code: "", reason: "")

    /// Error codes DRK1 itself defines. Image and pipeline errors use
    /// `image.<code>` and `pipeline.<code>`.
    public enum Code {
        /// The broker declared the worker dead while it held the job.
        public static let workerLost = "worker.lost"
        /// The worker came back, after a broker restart or on a new
        /// connection, without listing the job in HOLDING; the broker
        /// requeues it without counting the attempt.
        public static let workerReconnected = "worker.reconnected"
        /// The worker's key was revoked while it held the job: the broker
        /// dropped it and requeues the job without counting the attempt.
        public static let workerRevoked = "worker.revoked"
        /// The worker handed the job back while shutting down.
        public static let workerShutdown = "worker.shutdown"
        /// The worker could not reach the storage node.
        public static let storeUnreachable = "store.unreachable"
        /// The storage node answered STORE with ERROR.
        public static let storeRejected = "store.rejected"
        /// The job's pipeline text did not parse on the worker.
        public static let invalidPipeline = "pipeline.invalid"
        /// The job was cancelled (CANCEL-JOB) while it ran; not retried.
        public static let cancelled = "job.cancelled"
        /// No worker started the job by its deadline (SUBMIT frame 11): it
        /// ends cancelled, with this failure in its event.
        public static let expired = "job.expired"
        /// The attempt ran longer than the worker's time limit
        /// (`--job-timeout`): the worker stopped it in the step it was in.
        /// Not retried, as the same input would take as long again.
        public static let timeout = "job.timeout"
        /// An unexpected failure inside the worker.
        public static let `internal` = "internal"
    }

    /// One line for a log: `step 2 crop:600x600+0+0: image.invalid-argument: rectangle exceeds image 500x400`.
    public var summary: String { text(withCode: true) }

    /// One line for a person: the step (when there is one), the code when
    /// `withCode` (logs want it; a terminal user reads the reason), and the
    /// reason.
    public func text(withCode: Bool) -> String {
        let head = stepIndex >= 1 && !step.isEmpty ? "step \(stepIndex) \(step): " : ""
        return head + (withCode && !code.isEmpty ? "\(code): " : "") + reason
    }
}
