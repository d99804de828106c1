import DarkroomImage

/// What a job produces besides its pipeline: output qualities, the thumbnail and
/// the decode limits.
public struct JobOptions: Sendable, Equatable {
    /// Thumbnail size (aspect-fill, then centre crop), or nil for no thumbnail.
    public var thumbnail: Size?
    /// Quality of the full-resolution output, 1 to 100.
    public var quality: Int
    /// Quality of the thumbnail, 1 to 100.
    public var thumbnailQuality: Int
    /// Chroma subsampling of JPEG outputs (`auto`: 4:4:4 at quality 90 and above).
    public var subsampling: ChromaSubsampling
    /// Write progressive JPEGs.
    public var progressive: Bool
    /// The file format of the full-resolution output.
    public var format: ImageFormat
    /// The file format of the thumbnail.
    public var thumbnailFormat: ImageFormat
    /// Where the thumbnail's aspect-fill crop sits (`smart`: the most detail).
    public var thumbnailGravity: Gravity
    /// Input limits, checked from the header before any pixel is allocated.
    public var limits: DecodeLimits

    public static let defaultThumbnail = Size(width: 256, height: 256)

    public init(
        thumbnail: Size? = JobOptions.defaultThumbnail,
        quality: Int = 95,
        thumbnailQuality: Int = 70,
        subsampling: ChromaSubsampling = .auto,
        progressive: Bool = false,
        thumbnailGravity: Gravity = .center,
        format: ImageFormat = .jpeg,
        thumbnailFormat: ImageFormat = .jpeg,
        limits: DecodeLimits = .default
    ) {
        self.format = format
        self.thumbnailFormat = thumbnailFormat
        self.thumbnailGravity = thumbnailGravity
        self.thumbnail = thumbnail
        self.quality = quality
        self.thumbnailQuality = thumbnailQuality
        self.subsampling = subsampling
        self.progressive = progressive
        self.limits = limits
    }
}

/// One encoded output: the file's bytes (JPEG, WebP, PNG or AVIF) and its pixel size.
public struct EncodedImage: Sendable, Equatable {
    public var bytes: [UInt8]
    public var size: Size
    public init(bytes: [UInt8], size: Size) {
        self.bytes = bytes
        self.size = size
    }
}

/// The two outputs of one job.
public struct JobOutput: Sendable, Equatable {
    /// The pipeline's result.
    public var full: EncodedImage
    /// The aspect-fill thumbnail of `full`, if one was asked for.
    public var thumbnail: EncodedImage?
    /// The upright size of the source image.
    public var sourceSize: Size
    /// The DCT shrink the decoder used (1 = full size).
    public var decodeShrink: Int
}

/// The compound operation a worker runs for one job: decode once (shrinking on
/// load and cropping early where the pipeline allows), run the pipeline's steps,
/// then encode the full-resolution result and its thumbnail.
///
/// Any failure stops the chain and names its stage: `decode`, `step N TEXT`, or
/// `encode full|thumbnail`. So does a cancellation, with the `cancelled` code:
/// every link passes the run's `CancellationFlag` to the engine, whose loops
/// look at it every millisecond or so of work.
public struct ImageJob: Sendable {
    public let pipeline: Pipeline
    public let options: JobOptions

    public init(pipeline: Pipeline, options: JobOptions = JobOptions()) {
        self.pipeline = pipeline
        self.options = options
    }

    /// Runs the job on a source's bytes: a JPEG, a PNG or a WebP. Once `cancellation` is set, from any
    /// thread, the run stops within a few milliseconds and throws the
    /// `cancelled` failure of the stage it was in (`decode` if it had not
    /// started); it never returns a partial output.
    public func run(
        _ source: [UInt8], cancellation: CancellationFlag = .never,
        observer: CompoundOperation<[UInt8], JobOutput>.Observer? = nil
    ) throws(PipelineFailure) -> JobOutput {
        if cancellation.isCancelled { throw .cancelled(in: .decode) }
        let header: SourceHeader
        do {
            header = try Source.readHeader(source, limits: options.limits)
        } catch {
            throw PipelineFailure(stage: .decode, error: error)
        }
        try checkPlan(for: header)
        return try operation(for: header).run(source, cancellation: cancellation, observer: observer)
    }

    /// Checks, from a source's header alone, what the job would fail on
    /// before it decoded anything: every step against the size it will
    /// receive, and a WebP or AVIF output against the size it may have.
    /// `run` checks this first; a producer checks it before it submits.
    public func checkPlan(for header: SourceHeader) throws(PipelineFailure) {
        let result = try pipeline.plannedSizes(from: header.uprightSize, limits: options.limits).last ?? header.uprightSize
        if let refusal = Self.sizeRefusal(result, as: options.format) {
            throw PipelineFailure(stage: .encode("full"), error: refusal)
        }
        if let thumbnail = options.thumbnail, let refusal = Self.sizeRefusal(thumbnail, as: options.thumbnailFormat) {
            throw PipelineFailure(stage: .encode("thumbnail"), error: refusal)
        }
    }

    /// Why an output of `size` cannot be written in `format`, nil when it can.
    static func sizeRefusal(_ size: Size, as format: ImageFormat) -> ImageError? {
        switch format {
        case .webp: WebP.sizeRefusal(size)
        case .avif: HEIF.avifSizeRefusal(size)
        case .jpeg, .png: nil
        }
    }

    /// Builds the chain for an image with this header. A JPEG is decoded
    /// with the pipeline's load plan (shrink on load, region, luma); the
    /// other formats whole and upright, before every step. A source with
    /// transparency keeps it when an output has alpha
    /// (`transparentOperation`); otherwise it is composited onto white.
    func operation(for header: SourceHeader) -> CompoundOperation<[UInt8], JobOutput> {
        let outputsKeepAlpha = options.format.hasAlpha || (options.thumbnail != nil && options.thumbnailFormat.hasAlpha)
        if outputsKeepAlpha, header.keepsAlpha { return transparentOperation(for: header) }
        // An opaque source runs opaque up to the first step that makes
        // clear pixels (a transparent `pad`), when an output would keep them.
        let clearFrom = outputsKeepAlpha ? pipeline.steps.firstIndex(where: \.makesTransparency) : nil
        let opaqueSteps = Array(pipeline.steps[..<(clearFrom ?? pipeline.steps.count)])
        let plan = header.format == .jpeg ? LoadPlan.make(for: opaqueSteps, source: header.uprightSize) : LoadPlan()
        let decodeOptions = DecodeOptions(limits: options.limits, shrink: plan.shrink, region: plan.region, lumaOnly: plan.lumaStep != nil)
        let sourceSize = header.uprightSize
        let decode = ChainableOperation<[UInt8], ImageCarrier>(.decode) {
            (bytes: [UInt8], cancel: CancellationFlag) throws(ImageError) -> ImageCarrier in
            ImageCarrier(try Source.decode(bytes, header: header, options: decodeOptions, cancellation: cancel))
        }
        var chain = CompoundOperation(decode)
        for (offset, step) in opaqueSteps.enumerated() {
            let stage = Stage.step(index: offset + 1, text: step.canonical)
            if offset == plan.lumaStep {
                // The decoder already produced the luma.
                continue
            } else if offset < plan.foldedSteps {
                // The folded steps become one exact resample of the decoded region,
                // reported under the first of them (the scale).
                guard offset == 0, let resize = plan.resize else { continue }
                chain = chain.then(ChainableOperation(stage) {
                    (carrier: ImageCarrier, cancel: CancellationFlag) throws(ImageError) -> ImageCarrier in
                    let image = carrier.take()
                    if image.width == resize.size.width, image.height == resize.size.height { return ImageCarrier(image) }
                    return ImageCarrier(try image.resized(to: resize.size, kernel: resize.kernel, cancellation: cancel))
                })
            } else if case .srgb = step {
                // The source's profile says what the decoded numbers mean; a
                // source with none (or one that cannot be used) is taken to
                // be sRGB already, as browsers take it, and left as it is.
                let source = header.rgbProfile
                chain = chain.then(ChainableOperation(stage) {
                    (carrier: ImageCarrier, cancel: CancellationFlag) throws(ImageError) -> ImageCarrier in
                    let image = carrier.take()
                    guard let source else { return ImageCarrier(image) }
                    return ImageCarrier(try (consume image).convertedToSRGB(from: source, cancellation: cancel).image)
                })
            } else if case let .glitch(seed, amount) = step {
                // The job owns its image, so the glitch rewrites it in place.
                chain = chain.then(ChainableOperation(stage) {
                    (carrier: ImageCarrier, cancel: CancellationFlag) throws(ImageError) -> ImageCarrier in
                    var image = carrier.take()
                    try image.glitch(seed: seed, amount: amount, cancellation: cancel)
                    return ImageCarrier(image)
                })
            } else {
                chain = chain.then(ChainableOperation(stage) {
                    (carrier: ImageCarrier, cancel: CancellationFlag) throws(ImageError) -> ImageCarrier in
                    ImageCarrier(try step.apply(to: carrier.take(), cancellation: cancel))
                })
            }
        }
        if let clearFrom {
            let step = pipeline.steps[clearFrom]
            let clearing = chain.then(ChainableOperation(.step(index: clearFrom + 1, text: step.canonical)) {
                (carrier: ImageCarrier, cancel: CancellationFlag) throws(ImageError) -> Carrier<AlphaImage> in
                Carrier(try step.apply(to: AlphaImage(opaque: carrier.take()), sourceProfile: nil, cancellation: cancel))
            })
            return transparentSteps(clearing, from: clearFrom + 1, header: header, decodeShrink: plan.shrink)
        }
        let options = self.options
        // A result whose pixels are all gray is stored as a one-component
        // JPEG: the same picture, in about a third of the encoding work and
        // of the bytes. Only pipelines with a grayscale step are checked.
        // The check extracts the luma plane, and the thumbnail is made from
        // it: one channel filtered instead of three equal ones, the same
        // bytes. The full-size file is still encoded from the RGBX pixels,
        // which exist anyway: libjpeg-turbo turns RGBX into gray with SIMD
        // code but copies one-component input sample by sample, so the RGBX
        // input is the cheaper one (the file is the same).
        let checkGray = checksGray
        let profile = outputProfile(header)
        let encodeFull = ChainableOperation<ImageCarrier, (JobResult, EncodedImage)>(.encode("full")) {
            (carrier: ImageCarrier, cancel: CancellationFlag) throws(ImageError) -> (JobResult, EncodedImage) in
            try ImageJob.encodedOpaque(carrier.take(), checkGray: checkGray, options: options, profile: profile, cancellation: cancel)
        }
        return chain.then(encodeFull).then(encodeThumbnail(profile: profile, sourceSize: sourceSize, decodeShrink: plan.shrink))
    }

    /// Whether the pipeline has a grayscale step, after which a result whose
    /// pixels are all gray is written gray (`encodedOpaque`).
    var checksGray: Bool { pipeline.steps.contains { if case .grayscale = $0 { true } else { false } } }

    /// The profile both files carry: the source's, so that they look as the
    /// source does, or none after an `srgb` step converted the pixels
    /// (untagged means sRGB). A gray result is written without one.
    func outputProfile(_ header: SourceHeader) -> [UInt8]? {
        pipeline.steps.contains { if case .srgb = $0 { true } else { false } } ? nil : header.rgbProfile
    }

    /// The full-resolution file of an opaque result, and the result the
    /// thumbnail is made from: with `checkGray`, a result whose pixels are
    /// all gray is written gray (see `operation(for:)`).
    static func encodedOpaque(
        _ image: Image, checkGray: Bool, options: JobOptions, profile: [UInt8]?, cancellation cancel: CancellationFlag
    ) throws(ImageError) -> (JobResult, EncodedImage) {
        let plane = checkGray ? try GrayImage(exactly: image, cancellation: cancel) : nil
        let bytes: [UInt8]
        switch options.format {
        case .jpeg:
            bytes = try JPEG.encode(image, options: EncodeOptions(quality: options.quality, subsampling: options.subsampling,
                                                                  progressive: options.progressive, grayscale: plane != nil,
                                                                  iccProfile: profile),
                                    cancellation: cancel)
        case .webp:
            // A gray result is three equal channels in WebP, untagged
            // as a gray JPEG is.
            bytes = try WebP.encode(image, quality: options.quality, iccProfile: plane == nil ? profile : nil, cancellation: cancel)
        case .png:
            // PNG has a gray mode: a gray result is written from its
            // plane, untagged.
            if let plane {
                bytes = try PNG.encode(plane, cancellation: cancel)
            } else {
                bytes = try PNG.encode(image, iccProfile: profile, cancellation: cancel)
            }
        case .avif:
            // A gray result is three equal channels, untagged, as in WebP.
            bytes = try HEIF.encodeAVIF(image, quality: options.quality, iccProfile: plane == nil ? profile : nil, cancellation: cancel)
        }
        let full = EncodedImage(bytes: bytes, size: Size(width: image.width, height: image.height))
        return (plane.map { .gray($0) } ?? .color(image), full)
    }

    /// The chain for a source whose transparency an output keeps: decoded
    /// whole with its alpha, then `transparentSteps`.
    func transparentOperation(for header: SourceHeader) -> CompoundOperation<[UInt8], JobOutput> {
        let decodeOptions = DecodeOptions(limits: options.limits, keepAlpha: true)
        let decode = ChainableOperation<[UInt8], Carrier<AlphaImage>>(.decode) {
            (bytes: [UInt8], cancel: CancellationFlag) throws(ImageError) -> Carrier<AlphaImage> in
            Carrier(AlphaImage(rgba: try Source.decode(bytes, header: header, options: decodeOptions, cancellation: cancel)))
        }
        return transparentSteps(CompoundOperation(decode), from: 0, header: header, decodeShrink: 1)
    }

    /// The pipeline's steps from `first` on, each run by
    /// `Operation.apply(to:sourceProfile:)`, then the result written with
    /// its alpha in PNG, WebP and AVIF and laid over white in JPEG. A result
    /// left wholly opaque is written as an opaque one is.
    func transparentSteps(
        _ start: CompoundOperation<[UInt8], Carrier<AlphaImage>>, from first: Int, header: SourceHeader, decodeShrink: Int
    ) -> CompoundOperation<[UInt8], JobOutput> {
        var chain = start
        let sourceProfile = header.rgbProfile
        for (offset, step) in pipeline.steps.enumerated() where offset >= first {
            chain = chain.then(ChainableOperation(.step(index: offset + 1, text: step.canonical)) {
                (carrier: Carrier<AlphaImage>, cancel: CancellationFlag) throws(ImageError) -> Carrier<AlphaImage> in
                Carrier(try step.apply(to: carrier.take(), sourceProfile: sourceProfile, cancellation: cancel))
            })
        }
        let options = self.options
        let profile = outputProfile(header)
        let checkGray = checksGray
        let encodeFull = ChainableOperation<Carrier<AlphaImage>, (JobResult, EncodedImage)>(.encode("full")) {
            (carrier: Carrier<AlphaImage>, cancel: CancellationFlag) throws(ImageError) -> (JobResult, EncodedImage) in
            let image = carrier.take()
            // Nothing transparent left: written as an opaque result is.
            if image.isOpaque {
                return try ImageJob.encodedOpaque(image.rgba, checkGray: checkGray, options: options, profile: profile, cancellation: cancel)
            }
            // After a grayscale step, a gray result is written gray +
            // alpha where the format has it, untagged, as a gray opaque one
            // is written gray.
            let result = JobResult.transparent(image, gray: checkGray && image.isGray)
            let bytes = try result.encoded(as: options.format, quality: options.quality, options: options, profile: profile,
                                           cancellation: cancel)
            return (result, EncodedImage(bytes: bytes, size: Size(width: image.width, height: image.height)))
        }
        return chain.then(encodeFull).then(encodeThumbnail(profile: profile, sourceSize: header.uprightSize, decodeShrink: decodeShrink))
    }

    /// The last link: the thumbnail of the result, if one was asked for, in
    /// the same kind as the result (gray, colour or transparent).
    private func encodeThumbnail(
        profile: [UInt8]?, sourceSize: Size, decodeShrink: Int
    ) -> ChainableOperation<(JobResult, EncodedImage), JobOutput> {
        let options = self.options
        return ChainableOperation(.encode("thumbnail")) {
            (result: (JobResult, EncodedImage), cancel: CancellationFlag) throws(ImageError) -> JobOutput in
            let (image, full) = result
            var thumbnail: EncodedImage?
            if let size = options.thumbnail {
                let gravity = options.thumbnailGravity
                let small: JobResult = switch image {
                case let .gray(plane): .gray(try plane.thumbnail(size, gravity: gravity, cancellation: cancel))
                case let .color(image): .color(try image.thumbnail(size, gravity: gravity, cancellation: cancel))
                case let .transparent(image, gray):
                    // The window cut may hold no transparent pixel.
                    try image.thumbnail(size, gravity: gravity, cancellation: cancel).opaqueIfWhole(gray: gray)
                }
                let bytes = try small.encoded(as: options.thumbnailFormat, quality: options.thumbnailQuality, options: options,
                                              profile: profile, cancellation: cancel)
                thumbnail = EncodedImage(bytes: bytes, size: size)
            }
            return JobOutput(full: full, thumbnail: thumbnail, sourceSize: sourceSize, decodeShrink: decodeShrink)
        }
    }
}

/// A job's result between its two encoding links: the RGBX pixels, the
/// luma plane of a result whose pixels are all gray, or the colour and
/// alpha of a result with transparency, `gray` when its colour is all gray
/// and is written so.
enum JobResult: Sendable {
    case color(Image)
    case gray(GrayImage)
    case transparent(AlphaImage, gray: Bool)
}

extension AlphaImage {
    /// The image as a job result: its colour alone when every pixel is
    /// opaque, which then is written as any opaque result is (with `gray`,
    /// as a gray one).
    func opaqueIfWhole(gray: Bool) -> JobResult {
        guard isOpaque else { return .transparent(self, gray: gray) }
        if gray, let plane = GrayImage(exactly: rgba) { return .gray(plane) }
        return .color(rgba)
    }
}

extension JobResult {
    /// The file of a thumbnail in `format` at `quality`, with the output
    /// flags of `options`: a colour image carries `profile`; a gray one is
    /// written gray where the format has a gray mode (WebP and AVIF get
    /// three equal channels), untagged; a transparent one keeps its alpha
    /// where the format has alpha (a gray one as gray + alpha in PNG,
    /// untagged) and is laid over `Source.background` in JPEG.
    func encoded(as format: ImageFormat, quality: Int, options: JobOptions, profile: [UInt8]?,
                 cancellation cancel: CancellationFlag) throws(ImageError) -> [UInt8] {
        switch (self, format) {
        case let (.gray(plane), .jpeg):
            try JPEG.encode(plane, options: EncodeOptions(quality: quality, progressive: options.progressive), cancellation: cancel)
        case let (.gray(plane), .webp): try WebP.encode(plane, quality: quality, cancellation: cancel)
        case let (.gray(plane), .png): try PNG.encode(plane, cancellation: cancel)
        case let (.gray(plane), .avif): try HEIF.encodeAVIF(Image(plane), quality: quality, cancellation: cancel)
        case let (.color(image), .jpeg):
            try JPEG.encode(image, options: EncodeOptions(quality: quality, subsampling: options.subsampling, progressive: options.progressive,
                                                          iccProfile: profile),
                            cancellation: cancel)
        case let (.color(image), .webp): try WebP.encode(image, quality: quality, iccProfile: profile, cancellation: cancel)
        case let (.color(image), .png): try PNG.encode(image, iccProfile: profile, cancellation: cancel)
        case let (.color(image), .avif): try HEIF.encodeAVIF(image, quality: quality, iccProfile: profile, cancellation: cancel)
        case let (.transparent(image, gray), .jpeg):
            try AlphaImage(opaque: try image.flattened(onto: Source.background, cancellation: cancel)).opaqueIfWhole(gray: gray)
                .encoded(as: .jpeg, quality: quality, options: options, profile: profile, cancellation: cancel)
        case let (.transparent(image, gray), .webp):
            try WebP.encode(image, quality: quality, iccProfile: gray ? nil : profile, cancellation: cancel)
        case let (.transparent(image, gray), .png):
            try PNG.encode(image, gray: gray, iccProfile: gray ? nil : profile, cancellation: cancel)
        case let (.transparent(image, gray), .avif):
            try HEIF.encodeAVIF(image, quality: quality, iccProfile: gray ? nil : profile, cancellation: cancel)
        }
    }
}

/// Hands the image from one link of a job's chain to the next.
///
/// A link receives its input borrowed, so an image passed directly is always
/// still referenced by the chain while the link runs, and any in-place edit
/// would first copy all its pixels. Each link instead takes the image out of
/// the carrier (leaving a 1x1 placeholder), which makes it the only owner.
/// A carrier is created and consumed within one job on one thread.
final class Carrier<Content: Carried> {
    private var content: Content

    init(_ content: Content) { self.content = content }

    /// The image, which the carrier no longer references.
    func take() -> Content {
        let taken = content
        content = Content.placeholder
        return taken
    }
}

typealias ImageCarrier = Carrier<Image>

/// What a `Carrier` holds: an image with a 1x1 stand-in.
protocol Carried {
    static var placeholder: Self { get }
}

extension Image: Carried {
    static let placeholder = Image(width: 1, height: 1)
}

extension AlphaImage: Carried {
    static let placeholder = AlphaImage(rgba: Image(width: 1, height: 1))
}
