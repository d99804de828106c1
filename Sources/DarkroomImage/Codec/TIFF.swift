import CTIFF

/// What a TIFF's first image's tags say.
public struct TIFFHeader: Sendable, Equatable {
    /// The size as stored.
    public var size: Size
    /// The Orientation tag (EXIF's meaning; `.up` when absent).
    public var orientation: Orientation
    /// An alpha channel among the extra samples.
    public var hasAlpha: Bool
    public var bitsPerSample: Int
    public var samplesPerPixel: Int
    /// Whether pages follow the first (only the first is decoded).
    public var hasMorePages: Bool
    /// 8-bit CMYK ink samples and nothing else: with a CMYK profile, they
    /// are converted through it.
    public var isPlainCMYK: Bool
    /// The embedded ICC profile, if any.
    public var iccProfile: [UInt8]?

    /// The profile a plain CMYK file's inks are converted through: its
    /// embedded profile, when that is a CMYK one.
    public var cmykProfile: [UInt8]? {
        guard isPlainCMYK, let iccProfile, ICCHeader.colorSpace(iccProfile) == "CMYK" else { return nil }
        return iccProfile
    }
}

/// TIFF decoding over libtiff (through the CTIFF shim): scans, prints and
/// camera exports, as libvips and sharp read them. Darkroom reads TIFF
/// sources but never writes TIFF.
///
/// The first image (page) is decoded through libtiff's RGBA interface,
/// which reads every layout libtiff knows: strips or tiles, contiguous or
/// planar samples, 1 to 16 bits (16-bit samples are taken to 8), gray,
/// palette, RGB, YCbCr and CMYK, and each compression Debian's libtiff is
/// built with (none, PackBits, LZW, deflate, JPEG, ZSTD, WebP, ...).
/// Floating-point samples are refused as unsupported. Alpha is composited
/// onto the background, or kept straight (`Source.decode` with
/// `DecodeOptions.keepAlpha`). The pixels are decoded as stored, and the
/// Orientation tag is applied as a JPEG's EXIF orientation is. A CMYK file
/// with its own CMYK profile is converted through that profile (Little
/// CMS), as a CMYK JPEG is, not by the RGBA interface's plain formula.
public enum TIFF {
    /// True when `bytes` start with a TIFF or BigTIFF byte order mark and
    /// version: "II*\0", "MM\0*", "II+\0" or "MM\0+".
    public static func isTIFF(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 4 else { return false }
        let head = Array(bytes[0..<4])
        return head == [0x49, 0x49, 0x2A, 0x00] || head == [0x4D, 0x4D, 0x00, 0x2A]
            || head == [0x49, 0x49, 0x2B, 0x00] || head == [0x4D, 0x4D, 0x00, 0x2B]
    }

    /// Reads the first image's tags. The input size is checked before
    /// anything is parsed, the image's size against `limits` before any
    /// pixel buffer exists.
    public static func readHeader(_ bytes: [UInt8], limits: DecodeLimits = .default) throws(ImageError) -> TIFFHeader {
        try limits.checkInput(bytes)
        if !isTIFF(bytes) {
            throw ImageError(.corrupt, "not a TIFF (no II*, MM*, II+ or MM+ byte order mark; starts with \(Sniff.firstBytes(bytes)))")
        }
        var info = dr_tiff_info()
        var error = dr_tiff_error()
        let status = bytes.withUnsafeBufferPointer {
            dr_tiff_read_info($0.baseAddress, $0.count, limits.shimMaxSide, maxAlloc(limits), &info, &error)
        }
        defer { dr_tiff_free(info.icc) }
        let size = Size(width: Int(info.width), height: Int(info.height))
        guard status == DR_TIFF_OK else {
            let known = status == DR_TIFF_TOO_LARGE || status == DR_TIFF_INVALID_DIMENSIONS
            throw imageError(error, size: known ? size : nil, limits: limits)
        }
        try JPEG.check(size, limits: limits)
        let profile = info.icc.map { Array(UnsafeBufferPointer(start: $0, count: Int(info.icc_length))) }
        return TIFFHeader(size: size, orientation: Orientation(rawValue: Int(info.orientation)) ?? .up, hasAlpha: info.has_alpha != 0,
                          bitsPerSample: Int(info.bits_per_sample), samplesPerPixel: Int(info.samples_per_pixel),
                          hasMorePages: info.more_pages != 0, isPlainCMYK: info.plain_cmyk != 0, iccProfile: profile)
    }

    /// Decodes the first image to RGBX as stored (the Orientation tag not
    /// applied: `Source.decode` does that), after `readHeader`'s checks.
    /// Where it has alpha it is laid over `background`; the fourth byte is
    /// 255 as everywhere in the engine. `cancellation` is looked at before
    /// the decode and between bands of at least 64 rows; a cancelled decode
    /// throws `ImageError.cancelled`.
    public static func decode(
        _ bytes: [UInt8], limits: DecodeLimits = .default, background: (UInt8, UInt8, UInt8) = (255, 255, 255),
        cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        let header = try readHeader(bytes, limits: limits)
        return try decode(bytes, size: header.size, cmykProfile: header.cmykProfile, limits: limits, background: background,
                          cancellation: cancellation)
    }

    /// `decode` of a file whose header was read, with these limits, as
    /// `size`, its inks to convert through `cmykProfile` (`Source.decode`);
    /// the shim checks the file against it. With `keepAlpha` (not for a
    /// file converted through its CMYK profile) the fourth byte holds each
    /// pixel's straight alpha and `background` is not used.
    static func decode(
        _ bytes: [UInt8], size: Size, cmykProfile: [UInt8]?, limits: DecodeLimits, background: (UInt8, UInt8, UInt8),
        keepAlpha: Bool = false, cancellation: CancellationFlag
    ) throws(ImageError) -> Image {
        try cancellation.check()
        let width = size.width, height = size.height
        // A plain CMYK file's inks go through its CMYK profile (Little CMS),
        // as a CMYK JPEG's do, not inverted (TIFF's 0 is no ink); anything
        // else goes through the RGBA interface, whose plain formula also
        // serves a profile Little CMS cannot use.
        let transform = cmykProfile.flatMap { try? SRGBTransforms.shared.transform(for: $0, input: .cmyk(inverted: false)).get() }
        var pixels = try ShimDecode.rgbx(bytes, width: width, height: height, cancellation: cancellation) { data, out, stride, stop in
            var error = dr_tiff_error()
            let status = transform == nil
                ? dr_tiff_decode_rgbx(data.baseAddress, data.count, limits.shimMaxSide, maxAlloc(limits), out, stride, Int32(width),
                                      Int32(height), background.0, background.1, background.2, keepAlpha ? 1 : 0, ShimDecode.shouldStop,
                                      stop, &error)
                : dr_tiff_decode_cmyk(data.baseAddress, data.count, limits.shimMaxSide, maxAlloc(limits), out, stride, Int32(width),
                                      Int32(height), ShimDecode.shouldStop, stop, &error)
            return status == DR_TIFF_OK ? nil : imageError(error, size: nil, limits: limits)
        }
        try transform?.apply(to: &pixels, cancellation: cancellation)
        return try cancellation.checked(Image(width: width, height: height, pixels: pixels))
    }

    // MARK: - Internals

    /// The most libtiff may allocate at once: a strip or tile as large as
    /// the whole image at the limit, at 16 bytes a pixel (four 16-bit
    /// samples, planes and padding), and a margin for its tables. A strip
    /// that claims more is refused before it costs anything.
    static func maxAlloc(_ limits: DecodeLimits) -> Int {
        let pixels = min(limits.maxPixels, limits.maxSide * limits.maxSide)
        return pixels.multipliedReportingOverflow(by: 16).overflow ? Int.max : pixels * 16 + (16 << 20)
    }

    /// `size` is the header's when the shim refused it (too large, or 0
    /// wide or high): the refusal is then worded as the JPEG decoder words it.
    private static func imageError(_ failure: dr_tiff_error, size: Size?, limits: DecodeLimits) -> ImageError {
        let text = Sniff.text(ofCString: failure.message)
        switch failure.status {
        case DR_TIFF_TOO_LARGE, DR_TIFF_INVALID_DIMENSIONS:
            return JPEG.sizeRefusal(size, limits: limits, tooLarge: failure.status == DR_TIFF_TOO_LARGE, detail: text)
        case DR_TIFF_TRUNCATED: return ImageError(.truncated, "truncated: data ends before the image does (\(text))")
        case DR_TIFF_UNSUPPORTED: return ImageError(.unsupported, "unsupported TIFF image (\(text))")
        case DR_TIFF_OUT_OF_MEMORY: return ImageError(.limitExceeded, "out of memory while decoding (\(text))")
        case DR_TIFF_INVALID_ARGUMENT: return ImageError(.invalidArgument, "invalid decode request: \(text)")
        case DR_TIFF_CANCELLED: return ImageError.cancelled
        default: return ImageError(.corrupt, "corrupt TIFF data (\(text))")
        }
    }
}
