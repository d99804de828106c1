import CGIF

/// What a GIF's header and the records before its first picture say.
public struct GIFHeader: Sendable, Equatable {
    /// The size decoded: the logical screen's (or the first picture's
    /// extent when the screen says 0).
    public var size: Size
    /// A transparent colour in the first picture, or a first picture that
    /// leaves part of the screen uncovered.
    public var hasAlpha: Bool
    public var isInterlaced: Bool
}

/// GIF decoding over giflib (through the CGIF shim). Darkroom reads GIF
/// sources but never writes GIF.
///
/// The first picture is decoded onto the logical screen: its palette
/// colours where it has pixels, the background where it is transparent or
/// does not reach (clear, with `DecodeOptions.keepAlpha`). An animated GIF gives its first frame. GIF has no EXIF
/// orientation and no ICC profile.
public enum GIF {
    /// True when `bytes` start with "GIF87a" or "GIF89a".
    public static func isGIF(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 6 && (bytes[0..<6].elementsEqual("GIF87a".utf8) || bytes[0..<6].elementsEqual("GIF89a".utf8))
    }

    /// Reads the header and the records up to the first picture. The input
    /// size is checked before anything is parsed, the picture's size
    /// against `limits` before any pixel buffer exists.
    public static func readHeader(_ bytes: [UInt8], limits: DecodeLimits = .default) throws(ImageError) -> GIFHeader {
        try limits.checkInput(bytes)
        if !isGIF(bytes) {
            if bytes.count < 6 && "GIF8".utf8.starts(with: bytes.prefix(4)) {
                throw ImageError(.truncated, "truncated: data ends before the header does (\(bytes.count) bytes)")
            }
            throw ImageError(.corrupt, "not a GIF (no GIF87a or GIF89a signature; starts with \(Sniff.firstBytes(bytes)))")
        }
        var info = dr_gif_info()
        var error = dr_gif_error()
        let status = bytes.withUnsafeBufferPointer { dr_gif_read_info($0.baseAddress, $0.count, limits.shimMaxSide, &info, &error) }
        let size = Size(width: Int(info.width), height: Int(info.height))
        guard status == DR_GIF_OK else { throw imageError(error, size: size, limits: limits) }
        try JPEG.check(size, limits: limits)
        return GIFHeader(size: size, hasAlpha: info.has_alpha != 0, isInterlaced: info.interlaced != 0)
    }

    /// Decodes the first picture to RGBX on the logical screen, after
    /// `readHeader`'s checks. Transparent and uncovered pixels are
    /// `background` (red, green, blue); the fourth byte is 255 as everywhere
    /// in the engine. `cancellation` is looked at before the decode and
    /// every 16 rows; a cancelled decode throws `ImageError.cancelled`.
    public static func decode(
        _ bytes: [UInt8], limits: DecodeLimits = .default, background: (UInt8, UInt8, UInt8) = (255, 255, 255),
        cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        let header = try readHeader(bytes, limits: limits)
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
            var error = dr_gif_error()
            let status = dr_gif_decode_rgbx(data.baseAddress, data.count, limits.shimMaxSide, out, stride, Int32(width), Int32(height),
                                            background.0, background.1, background.2, keepAlpha ? 1 : 0, ShimDecode.shouldStop, stop, &error)
            return status == DR_GIF_OK ? nil : imageError(error, size: nil, limits: limits)
        }
        return try cancellation.checked(Image(width: width, height: height, pixels: pixels))
    }

    // MARK: - Internals

    /// `size` is the header's when the shim refused it (too large, or 0
    /// wide or high): the refusal is then worded as the JPEG decoder words it.
    private static func imageError(_ failure: dr_gif_error, size: Size?, limits: DecodeLimits) -> ImageError {
        let text = Sniff.text(ofCString: failure.message)
        switch failure.status {
        case DR_GIF_TOO_LARGE, DR_GIF_INVALID_DIMENSIONS:
            return JPEG.sizeRefusal(size, limits: limits, tooLarge: failure.status == DR_GIF_TOO_LARGE, detail: text)
        case DR_GIF_TRUNCATED: return ImageError(.truncated, "truncated: data ends before the first picture does (\(text))")
        case DR_GIF_NO_IMAGE: return ImageError(.corrupt, "corrupt GIF data (\(text))")
        case DR_GIF_OUT_OF_MEMORY: return ImageError(.limitExceeded, "out of memory while decoding (\(text))")
        case DR_GIF_INVALID_ARGUMENT: return ImageError(.invalidArgument, "invalid decode request: \(text)")
        case DR_GIF_CANCELLED: return ImageError.cancelled
        default: return ImageError(.corrupt, "corrupt GIF data (\(text))")
        }
    }
}
