import CHEIF
import CLCMS

/// What a HEIF file's boxes say about its primary image.
public struct HEIFHeader: Sendable, Equatable {
    /// The primary image's size, upright (its rotation, mirroring and
    /// clean-aperture crop applied).
    public var size: Size
    public var hasAlpha: Bool
    /// Coded with AV1 (AVIF); otherwise with HEVC (HEIC).
    public var isAVIF: Bool
    /// Bits per luma sample as coded (8, 10, 12), nil when not said.
    public var bitDepth: Int?
    /// The embedded ICC profile, if any.
    public var iccProfile: [UInt8]?
}

/// HEIF decoding over libheif (through the CHEIF shim): HEIC, the format
/// phones save photos in, and AVIF. Darkroom reads HEIF sources but never
/// writes HEIF.
///
/// The primary image is decoded upright: libheif applies the file's own
/// rotation, mirroring and crop (irot, imir, clap), which supersede any
/// EXIF orientation, so none is applied again. Images deeper than 8 bits
/// are decoded to 8. Alpha is composited onto the background, or kept
/// (`DecodeOptions.keepAlpha`). Other
/// images in the file (thumbnails, depth maps, a burst's other frames) are
/// not read.
public enum HEIF {
    /// The brands that say a file is a HEIF image (ISO/IEC 23008-12, and
    /// AV1's in MIAF): as its major brand, or among its compatible ones.
    static let brands: Set<String> = ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1", "avif", "avis"]

    /// True when `bytes` start with an ISO media "ftyp" box that names a
    /// HEIF brand (an MP4 or QuickTime file names none).
    public static func isHEIF(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 12, bytes[4..<8].elementsEqual("ftyp".utf8) else { return false }
        func brand(at offset: Int) -> String { String(decoding: bytes[offset..<offset + 4], as: UTF8.self) }
        if brands.contains(brand(at: 8)) { return true }
        // The compatible brands follow the major brand and its version.
        let boxSize = Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
        let end = min(bytes.count, max(16, min(boxSize, 4096)))
        var offset = 16
        while offset + 4 <= end {
            if brands.contains(brand(at: offset)) { return true }
            offset += 4
        }
        return false
    }

    /// Reads the boxes up to the primary image's properties. The input size
    /// is checked before anything is parsed, the image's size against
    /// `limits` before anything is decoded.
    public static func readHeader(_ bytes: [UInt8], limits: DecodeLimits = .default) throws(ImageError) -> HEIFHeader {
        try readHeader(bytes, limits: limits, profile: true)
    }

    /// `readHeader`, with the profile copied out only when asked for (a
    /// decode does not need it).
    private static func readHeader(_ bytes: [UInt8], limits: DecodeLimits, profile wanted: Bool) throws(ImageError) -> HEIFHeader {
        try limits.checkInput(bytes)
        if !isHEIF(bytes) {
            throw ImageError(.corrupt, "not a HEIF image (no ftyp box naming a HEIF brand; starts with \(Sniff.firstBytes(bytes)))")
        }
        var info = dr_heif_info()
        var error = dr_heif_error()
        let status = bytes.withUnsafeBufferPointer {
            dr_heif_read_info($0.baseAddress, $0.count, limits.shimMaxSide, wanted ? 1 : 0, &info, &error)
        }
        defer { dr_heif_free(info.icc) }
        let size = Size(width: Int(info.width), height: Int(info.height))
        guard status == DR_HEIF_OK else {
            let known = status == DR_HEIF_TOO_LARGE && size.width > 0 || status == DR_HEIF_INVALID_DIMENSIONS
            throw imageError(error, size: known ? size : nil, limits: limits)
        }
        try JPEG.check(size, limits: limits)
        // A profile that cannot be read was left out: the pixels as coded.
        // Without one, an nclx box may say the colour is not sRGB's.
        let profile = info.icc.map { Array(UnsafeBufferPointer(start: $0, count: Int(info.icc_length))) }
            ?? (wanted ? nclxProfile(info) : nil)
        return HEIFHeader(size: size, hasAlpha: info.has_alpha != 0, isAVIF: info.is_av1 != 0,
                          bitDepth: info.bit_depth > 0 ? Int(info.bit_depth) : nil, iccProfile: profile)
    }

    /// The ICC profile an nclx colour box stands for, when it describes
    /// colour other than sRGB's (other primaries, such as Display P3's or
    /// BT.2020's, or a gamma or linear transfer): the file's colour is
    /// then treated as if it carried that profile, kept in the outputs or
    /// converted by `srgb`. nil for BT.709 primaries (sRGB's) or
    /// unspecified ones with an SDR transfer, the pixels then being sRGB as
    /// coded, and for PQ, HLG, the log curves and SMPTE 428, which are left
    /// as coded (`dr_lcms_nclx_profile`).
    static func nclxProfile(_ info: dr_heif_info) -> [UInt8]? {
        guard info.nclx_primaries != 0 else { return nil }
        var xy = info.nclx_xy
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        let made = withUnsafePointer(to: &xy) {
            $0.withMemoryRebound(to: Float.self, capacity: 8) {
                dr_lcms_nclx_profile(info.nclx_primaries, info.nclx_transfer, $0, &out, &length)
            }
        }
        guard made == 0, let out else { return nil }
        defer { dr_lcms_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }

    /// Decodes the primary image to RGBX, upright, after `readHeader`'s
    /// checks. Where it has alpha it is laid over `background`; the fourth
    /// byte is 255 as everywhere in the engine. `cancellation` is looked at
    /// before and after the decode (libheif cannot be stopped inside one);
    /// a cancelled decode throws `ImageError.cancelled`.
    public static func decode(
        _ bytes: [UInt8], limits: DecodeLimits = .default, background: (UInt8, UInt8, UInt8) = (255, 255, 255),
        cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        let header = try readHeader(bytes, limits: limits, profile: false)
        return try decode(bytes, size: header.size, limits: limits, background: background, cancellation: cancellation)
    }

    /// `decode` of a file whose header was read, with these limits, as
    /// `size` (`Source.decode`); the shim checks the file against it. With
    /// `keepAlpha` the fourth byte holds each pixel's straight alpha and
    /// `background` is not used.
    static func decode(
        _ bytes: [UInt8], size: Size, limits: DecodeLimits, background: (UInt8, UInt8, UInt8), keepAlpha: Bool = false,
        cancellation: CancellationFlag
    ) throws(ImageError) -> Image {
        try cancellation.check()
        let width = size.width, height = size.height
        let pixels = try ShimDecode.rgbx(bytes, width: width, height: height, cancellation: cancellation) { data, out, stride, stop in
            var error = dr_heif_error()
            let status = dr_heif_decode_rgbx(data.baseAddress, data.count, limits.shimMaxSide, out, stride, Int32(width), Int32(height),
                                             background.0, background.1, background.2, keepAlpha ? 1 : 0, ShimDecode.shouldStop, stop, &error)
            return status == DR_HEIF_OK ? nil : imageError(error, size: nil, limits: limits)
        }
        return try cancellation.checked(Image(width: width, height: height, pixels: pixels))
    }

    // MARK: - AVIF outputs

    /// The most pixels an AVIF output may have: 4096 × 4096. libaom needs
    /// some 25 bytes a pixel to encode (100 MB for 4 MP, measured), so a
    /// 50 MP result would cost a worker over a gigabyte for one job.
    public static let maxAVIFPixels = 4096 * 4096

    /// Why an image of `size` is not written as AVIF, nil when it is: for a
    /// job to fail before it decodes what it would not write.
    public static func avifSizeRefusal(_ size: Size) -> ImageError? {
        guard size.width * size.height > maxAVIFPixels else { return nil }
        return ImageError(.encodeFailed, "cannot encode a \(size.width)x\(size.height) image as AVIF: AVIF outputs may have at most \(maxAVIFPixels) pixels (4096x4096), as encoding takes some 25 bytes a pixel")
    }

    /// Encodes an image as an AVIF (AV1 in HEIF) through libheif's AV1
    /// encoder: lossy at `quality` 1 to 100 (libheif's quality), 8-bit
    /// YCbCr 4:2:0, on the calling thread, with `iccProfile` in a colour
    /// box when given. libheif's encode cannot be stopped part way:
    /// `cancellation` is looked at before and after it.
    public static func encodeAVIF(
        _ image: Image, quality: Int, iccProfile: [UInt8]? = nil, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        try encodeAVIF(image.pixels, size: Size(width: image.width, height: image.height), hasAlpha: false, quality: quality,
                       iccProfile: iccProfile, cancellation: cancellation)
    }

    /// The same for an image with transparency: the alpha is coded as an
    /// auxiliary AV1 image at the same quality.
    public static func encodeAVIF(
        _ image: AlphaImage, quality: Int, iccProfile: [UInt8]? = nil, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        try encodeAVIF(image.rgba.pixels, size: Size(width: image.width, height: image.height),
                       hasAlpha: true, quality: quality, iccProfile: iccProfile, cancellation: cancellation)
    }

    private static func encodeAVIF(
        _ samples: [UInt8], size: Size, hasAlpha: Bool, quality: Int, iccProfile: [UInt8]?, cancellation: CancellationFlag
    ) throws(ImageError) -> [UInt8] {
        guard (1...100).contains(quality) else {
            throw ImageError(.invalidArgument, "quality must be 1 to 100, not \(quality)")
        }
        if let refusal = avifSizeRefusal(size) { throw refusal }
        return try ShimDecode.encoded(samples, iccProfile: iccProfile, cancellation: cancellation, free: { dr_heif_free($0) }) {
            pixels, icc, stop, out, length in
            var error = dr_heif_error()
            let status = dr_heif_encode_avif(
                pixels, Int32(clamping: size.width), Int32(clamping: size.height), size.width * 4, hasAlpha ? 1 : 0, Int32(quality),
                icc.baseAddress, icc.count, ShimDecode.shouldStop, stop, &out, &length, &error)
            let text = Sniff.text(ofCString: error.message)
            switch status {
            case DR_HEIF_OK: return out == nil ? ImageError(.encodeFailed, "AVIF encoding failed (no output)") : nil
            case DR_HEIF_CANCELLED: return ImageError.cancelled
            case DR_HEIF_INVALID_ARGUMENT: return ImageError(.invalidArgument, "invalid AVIF encode request: \(text)")
            case DR_HEIF_UNSUPPORTED: return ImageError(.encodeFailed, "cannot write AVIF: \(text)")
            default: return ImageError(.encodeFailed, "AVIF encoding failed (\(text))")
            }
        }
    }

    // MARK: - Internals

    /// `size` is the header's when the shim refused it (too large, or 0
    /// wide or high): the refusal is then worded as the JPEG decoder words it.
    private static func imageError(_ failure: dr_heif_error, size: Size?, limits: DecodeLimits) -> ImageError {
        let text = Sniff.text(ofCString: failure.message)
        switch failure.status {
        case DR_HEIF_TOO_LARGE, DR_HEIF_INVALID_DIMENSIONS:
            return JPEG.sizeRefusal(size, limits: limits, tooLarge: failure.status == DR_HEIF_TOO_LARGE, detail: text)
        case DR_HEIF_TRUNCATED: return ImageError(.truncated, "truncated: data ends before the image does (\(text))")
        case DR_HEIF_UNSUPPORTED: return ImageError(.unsupported, "unsupported HEIF image (\(text))")
        case DR_HEIF_OUT_OF_MEMORY: return ImageError(.limitExceeded, "out of memory while decoding (\(text))")
        case DR_HEIF_INVALID_ARGUMENT: return ImageError(.invalidArgument, "invalid decode request: \(text)")
        case DR_HEIF_CANCELLED: return ImageError.cancelled
        default: return ImageError(.corrupt, "corrupt HEIF data (\(text))")
        }
    }
}
