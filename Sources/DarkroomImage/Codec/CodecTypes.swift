/// Public types of the JPEG codec: limits, header, decode and encode options.

/// Limits checked from the JPEG header, before any pixel buffer exists.
public struct DecodeLimits: Sendable, Equatable {
    /// Largest accepted `width * height` of the stored image (50 MP by default).
    public var maxPixels: Int
    /// Largest accepted width or height.
    public var maxSide: Int
    /// Largest accepted input, in bytes.
    public var maxInputBytes: Int
    /// Treat libjpeg warnings (premature end of data, corrupt entropy data) as
    /// errors instead of decoding a damaged picture.
    public var failOnWarning: Bool

    public init(
        maxPixels: Int = 50_000_000,
        maxSide: Int = 16_384,
        maxInputBytes: Int = 64 * 1024 * 1024,
        failOnWarning: Bool = true
    ) {
        self.maxPixels = maxPixels
        self.maxSide = maxSide
        self.maxInputBytes = maxInputBytes
        self.failOnWarning = failOnWarning
    }

    public static let `default` = DecodeLimits()

    /// The checks every reader makes before parsing anything: empty input,
    /// and input over `maxInputBytes`.
    func checkInput(_ bytes: [UInt8]) throws(ImageError) {
        if bytes.isEmpty { throw ImageError(.empty, "empty input (0 bytes)") }
        if bytes.count > maxInputBytes {
            throw ImageError(.limitExceeded, "input is \(bytes.count) bytes, over the \(maxInputBytes) byte limit")
        }
    }

    /// `maxSide` as the C shims take it.
    var shimMaxSide: UInt32 { UInt32(clamping: maxSide) }
}

/// The colour space a JPEG file declares.
public enum JPEGColorSpace: String, Sendable {
    case grayscale, ycbcr, rgb, cmyk, ycck
}

/// The file format of an encoded output.
public enum ImageFormat: String, Sendable, CaseIterable {
    case jpeg
    /// Lossy WebP (see `WebP`).
    case webp
    /// Lossless 8-bit PNG, RGB, RGBA or gray (see `PNG.encode`).
    case png
    /// Lossy AV1 in HEIF (see `HEIF.encodeAVIF`).
    case avif

    /// Whether the format keeps transparency: a job writes a transparent
    /// result with its alpha in PNG, WebP and AVIF, and lays it over
    /// `Source.background` for JPEG.
    public var hasAlpha: Bool { self != .jpeg }

    /// The extension of a file in this format: "jpg", "webp", "png" or "avif".
    public var fileExtension: String {
        switch self {
        case .jpeg: "jpg"
        case .webp: "webp"
        case .png: "png"
        case .avif: "avif"
        }
    }
}

/// Chroma subsampling of a JPEG file.
public enum ChromaSubsampling: String, Sendable, CaseIterable {
    /// 4:4:4 at quality 90 and above, else 4:2:0 (encoder only).
    case auto
    case s444 = "444"
    case s422 = "422"
    case s420 = "420"
}

/// What the header of a JPEG file says.
public struct JPEGHeader: Sendable, Equatable {
    /// The size in the SOF marker, as the pixels are stored.
    public var storedSize: Size
    /// The EXIF orientation (tag 0x0112 of APP1), `.up` when absent or invalid.
    public var orientation: Orientation
    /// `storedSize` after the orientation is applied.
    public var uprightSize: Size
    public var colorSpace: JPEGColorSpace
    public var components: Int
    public var isProgressive: Bool
    /// The chroma subsampling of a YCbCr file (`s444`, `s422`, `s420`); nil for
    /// other colour spaces and unusual layouts (4:4:0, 4:1:1).
    public var subsampling: ChromaSubsampling?
    /// The embedded ICC colour profile (its APP2 chunks put together), nil
    /// when there is none or its chunks do not make a whole one.
    public var iccProfile: [UInt8]?

    /// A CMYK or YCCK file's samples are inverted (0 is full ink): the file
    /// has an Adobe marker, as Photoshop writes them.
    public var invertedCMYK = false

    /// The embedded profile of a CMYK or YCCK file when it is a CMYK
    /// profile: the decoder converts the samples through it to sRGB.
    public var cmykProfile: [UInt8]? {
        guard let iccProfile, colorSpace == .cmyk || colorSpace == .ycck, ICCHeader.colorSpace(iccProfile) == "CMYK" else { return nil }
        return iccProfile
    }

    /// The profile that describes the decoded pixels, to carry into an
    /// output: the embedded one when it is an RGB profile of an RGB or
    /// YCbCr file. A CMYK file's profile does not describe the RGB it is
    /// decoded to, nor a gray profile three components.
    public var rgbProfile: [UInt8]? {
        guard let iccProfile, colorSpace == .ycbcr || colorSpace == .rgb, ICCHeader.colorSpace(iccProfile) == "RGB " else { return nil }
        return iccProfile
    }

    public init(
        storedSize: Size, orientation: Orientation, colorSpace: JPEGColorSpace, components: Int,
        isProgressive: Bool, subsampling: ChromaSubsampling? = nil
    ) {
        self.storedSize = storedSize
        self.orientation = orientation
        self.uprightSize = orientation.uprightSize(ofStored: storedSize)
        self.colorSpace = colorSpace
        self.components = components
        self.isProgressive = isProgressive
        self.subsampling = subsampling
    }
}

/// How to decode.
public struct DecodeOptions: Sendable {
    public var limits: DecodeLimits = .default
    /// DCT scaling denominator: 1, 2, 4 or 8 (libjpeg scale_num=1, scale_denom=shrink).
    public var shrink: Int = 1
    /// Region to keep, in UPRIGHT full-size coordinates (after orientation, before
    /// shrink); nil = whole image.
    public var region: Rect? = nil
    /// Decode the luma only (BT.601 weights, the JPEG's own Y plane for YCbCr
    /// files) into R, G and B alike: the picture `grayscale()` makes, without
    /// reconstructing the chroma planes. Ignored for CMYK files.
    public var lumaOnly: Bool = false
    /// Keep a source's alpha (`SourceHeader.keepsAlpha`) in the fourth byte
    /// of each pixel, its colour straight, instead of compositing it onto
    /// `Source.background`.
    public var keepAlpha: Bool = false

    public init(limits: DecodeLimits = .default, shrink: Int = 1, region: Rect? = nil, lumaOnly: Bool = false, keepAlpha: Bool = false) {
        self.limits = limits
        self.shrink = shrink
        self.region = region
        self.lumaOnly = lumaOnly
        self.keepAlpha = keepAlpha
    }
}

/// A decoded, upright image with the header it came from.
public struct DecodedImage: Sendable {
    public var image: Image
    public var header: JPEGHeader
    /// The DCT shrink that was applied (1, 2, 4 or 8).
    public var shrink: Int
    /// libjpeg warnings seen (only non-zero when `failOnWarning` is off; the
    /// picture may then be partly grey).
    public var warnings: Int

    public init(image: Image, header: JPEGHeader, shrink: Int, warnings: Int = 0) {
        self.image = image
        self.header = header
        self.shrink = shrink
        self.warnings = warnings
    }
}

/// How to encode.
public struct EncodeOptions: Sendable, Equatable {
    /// 1...100.
    public var quality: Int = 95
    /// `auto`: 4:4:4 at quality >= 90, else 4:2:0.
    public var subsampling: ChromaSubsampling = .auto
    /// Write a progressive JPEG (libjpeg's simple progression script).
    public var progressive: Bool = false
    /// Write a one-component (grayscale) file from the pixels' luma. Meant for
    /// images whose pixels are all gray, which it stores exactly, in a third
    /// of the data and the time; `subsampling` is then ignored.
    public var grayscale: Bool = false
    /// An RGB ICC profile to embed (APP2 chunks), so that colour-managed
    /// viewers show the pixels as the source's profile meant them. Not
    /// written into a one-component file.
    public var iccProfile: [UInt8]?

    public init(quality: Int = 95, subsampling: ChromaSubsampling = .auto, progressive: Bool = false, grayscale: Bool = false,
                iccProfile: [UInt8]? = nil) {
        self.quality = quality
        self.subsampling = subsampling
        self.progressive = progressive
        self.grayscale = grayscale
        self.iccProfile = iccProfile
    }

    /// The subsampling `auto` resolves to at this quality.
    public var resolvedSubsampling: ChromaSubsampling {
        switch subsampling {
        case .auto: return quality >= 90 ? .s444 : .s420
        default: return subsampling
        }
    }
}
