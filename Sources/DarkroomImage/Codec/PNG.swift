import CPNG

/// What a PNG's chunks before its image data say.
public struct PNGHeader: Sendable, Equatable {
    /// The size in IHDR, as the pixels are stored.
    public var storedSize: Size
    /// The EXIF orientation of an eXIf chunk before the image data, `.up`
    /// when there is none or it has no valid orientation.
    public var orientation: Orientation
    /// `storedSize` after the orientation is applied.
    public var uprightSize: Size
    /// An alpha channel (colour types 4 and 6), or a tRNS chunk.
    public var hasAlpha: Bool
    /// Adam7 interlacing.
    public var isInterlaced: Bool
    /// Bits per sample (per palette index for colour type 3): 1, 2, 4, 8 or 16.
    public var bitDepth: Int
    /// The iCCP chunk's profile, decompressed; nil when there is none or
    /// libpng found it unusable (wrong colour space for the file, bad
    /// header, over the 8 MiB chunk limit...).
    public var iccProfile: [UInt8]?

    public init(
        storedSize: Size, orientation: Orientation, hasAlpha: Bool, isInterlaced: Bool, bitDepth: Int,
        iccProfile: [UInt8]? = nil
    ) {
        self.storedSize = storedSize
        self.orientation = orientation
        self.uprightSize = orientation.uprightSize(ofStored: storedSize)
        self.hasAlpha = hasAlpha
        self.isInterlaced = isInterlaced
        self.bitDepth = bitDepth
        self.iccProfile = iccProfile
    }
}

/// PNG over libpng (through the CPNG shim): sources decoded, outputs
/// encoded (`encode`).
///
/// Every kind of PNG decodes to the engine's RGBX: palette, gray and low bit
/// depths are expanded, 16-bit samples are scaled to 8 bits with rounding,
/// and alpha (a channel or a tRNS chunk) is composited onto a background
/// colour, or kept (`DecodeOptions.keepAlpha`). No gamma correction is made (gAMA and cHRM are ignored, as
/// browsers and libvips ignore them for the sRGB they assume).
public enum PNG {
    /// The 8-byte PNG signature.
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// True when `bytes` start with the 8-byte PNG signature.
    public static func isPNG(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 8 && bytes[0..<8].elementsEqual(signature)
    }

    /// Reads the chunks before the image data: the size, alpha, interlacing
    /// and bit depth of IHDR, the orientation of an eXIf chunk, the profile
    /// of an iCCP chunk. The input size is checked before anything is parsed,
    /// the picture's size against `limits` before any pixel buffer exists.
    /// `limits.failOnWarning` means nothing here: benign problems (a bad CRC
    /// in an ancillary chunk, a profile libpng rejects) only drop the chunk.
    public static func readHeader(_ bytes: [UInt8], limits: DecodeLimits = .default) throws(ImageError) -> PNGHeader {
        try readInfo(bytes, limits: limits, withMetadata: true)
    }

    /// Decodes the whole picture to RGBX, after `readHeader`'s checks, in
    /// its stored orientation: the caller applies the header's
    /// `orientation`. Every pixel with alpha is composited onto `background`
    /// (red, green, blue) as `(c * a + bg * (255 - a) + 127) / 255`; the
    /// fourth byte is 255 as everywhere in the engine. An ICC profile is not
    /// applied.
    ///
    /// `cancellation` is looked at before the decode and every 16 rows of
    /// each pass (an interlaced file has seven); a cancelled decode throws
    /// `ImageError.cancelled`.
    public static func decode(
        _ bytes: [UInt8], limits: DecodeLimits = .default, background: (UInt8, UInt8, UInt8) = (255, 255, 255),
        cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        let header = try readInfo(bytes, limits: limits, withMetadata: false)
        return try decode(bytes, size: header.storedSize, limits: limits, background: background, cancellation: cancellation)
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
            var error = dr_png_error()
            let status = dr_png_decode_rgbx(data.baseAddress, data.count, limits.shimMaxSide, out, stride, Int32(width), Int32(height),
                                            background.0, background.1, background.2, keepAlpha ? 1 : 0, ShimDecode.shouldStop, stop, &error)
            return status == DR_PNG_OK ? nil : imageError(error, size: nil, limits: limits)
        }
        return try cancellation.checked(Image(width: width, height: height, pixels: pixels))
    }

    // MARK: - Internals

    /// The header, with the iCCP and eXIf chunks only `withMetadata`.
    private static func readInfo(
        _ bytes: [UInt8], limits: DecodeLimits, withMetadata: Bool
    ) throws(ImageError) -> PNGHeader {
        try limits.checkInput(bytes)
        if !isPNG(bytes) {
            // At least "\u{89}PNG" and less than the signature, all of it as
            // in one: the start of a PNG file, cut short.
            if (4..<8).contains(bytes.count) && zip(bytes, signature).allSatisfy({ $0 == $1 }) {
                throw ImageError(.truncated, "truncated: data ends before the header does (\(bytes.count) bytes)")
            }
            throw ImageError(.corrupt, notPNGMessage(bytes))
        }
        var info = dr_png_info()
        var error = dr_png_error()
        defer { dr_png_info_clear(&info) }
        let status = bytes.withUnsafeBufferPointer {
            dr_png_read_info($0.baseAddress, $0.count, limits.shimMaxSide, withMetadata ? 1 : 0, &info, &error)
        }
        let size = Size(width: Int(info.width), height: Int(info.height))
        guard status == DR_PNG_OK else { throw imageError(error, size: size, limits: limits) }
        var orientation = Orientation.up
        if let exif = info.exif, info.exif_length > 0 {
            orientation = EXIF.orientation(tiff: Array(UnsafeBufferPointer(start: exif, count: info.exif_length))) ?? .up
        }
        var profile: [UInt8]? = nil
        if let icc = info.icc, info.icc_length > 0 {
            profile = Array(UnsafeBufferPointer(start: icc, count: info.icc_length))
        }
        let header = PNGHeader(
            storedSize: size, orientation: orientation, hasAlpha: info.has_alpha != 0,
            isInterlaced: info.interlaced != 0, bitDepth: Int(info.bit_depth), iccProfile: profile)
        try JPEG.check(size, limits: limits)
        return header
    }

    /// The side limit as the shim takes it.

    /// `size` is IHDR's when the shim refused it (too large, or 0 wide or
    /// high): the refusal is then worded as the JPEG decoder words it.
    private static func imageError(_ failure: dr_png_error, size: Size?, limits: DecodeLimits) -> ImageError {
        let text = message(of: failure)
        switch failure.status {
        case DR_PNG_TOO_LARGE, DR_PNG_INVALID_DIMENSIONS:
            return JPEG.sizeRefusal(size, limits: limits, tooLarge: failure.status == DR_PNG_TOO_LARGE, detail: text)
        case DR_PNG_TRUNCATED: return ImageError(.truncated, "truncated: data ends before the image does (\(text))")
        case DR_PNG_UNSUPPORTED: return ImageError(.unsupported, "unsupported PNG (\(text))")
        case DR_PNG_OUT_OF_MEMORY: return ImageError(.limitExceeded, "out of memory while decoding (\(text))")
        case DR_PNG_INVALID_ARGUMENT: return ImageError(.invalidArgument, "invalid decode request: \(text)")
        case DR_PNG_CANCELLED: return ImageError.cancelled
        default: return ImageError(.corrupt, "corrupt PNG data (\(text))")
        }
    }

    /// "not a PNG (no PNG signature; starts with FF D8 FF E0: looks like
    /// JPEG)", worded as the WebP decoder's not-webp message.
    private static func notPNGMessage(_ bytes: [UInt8]) -> String {
        if bytes.starts(with: signature.prefix(4)) {
            // "\u{89}PNG" and then not CR LF SUB LF: a transfer in text mode
            // turned the line ends, the damage the signature exists to show.
            return "not a PNG (damaged PNG signature: its line-ending bytes are altered)"
        }
        let digits = Array("0123456789ABCDEF")
        let hex = bytes.prefix(4).map { String([digits[Int($0 >> 4)], digits[Int($0 & 15)]]) }.joined(separator: " ")
        let kind = bytes.starts(with: [0xFF, 0xD8]) ? "JPEG" : Sniff.format(bytes)
        if let kind { return "not a PNG (no PNG signature; starts with \(hex): looks like \(kind))" }
        return "not a PNG (no PNG signature; starts with \(hex))"
    }

    // MARK: - Encoding

    /// The zlib level outputs are compressed at: libpng's and zlib's own
    /// default, and libvips' and sharp's. Higher levels make files a few
    /// percent smaller in several times the time.
    public static let compressionLevel = 6

    /// Encodes an image as an 8-bit RGB PNG (lossless; the fourth byte of
    /// each pixel is not written), with `iccProfile` in an iCCP chunk when
    /// given. `cancellation` is looked at before every 16 rows; a cancelled
    /// encode throws `ImageError.cancelled`.
    public static func encode(
        _ image: Image, iccProfile: [UInt8]? = nil, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        try encode(image.pixels, width: image.width, height: image.height, stride: image.stride, input: DR_PNG_INPUT_RGBX,
                   iccProfile: iccProfile, cancellation: cancellation)
    }

    /// The same for an image with transparency: an 8-bit RGBA PNG of the
    /// straight colour and its alpha, or with `gray`, for an image that
    /// `isGray`, a gray + alpha PNG, half the samples (an image that is not
    /// gray is written RGBA all the same).
    public static func encode(
        _ image: AlphaImage, gray: Bool = false, iccProfile: [UInt8]? = nil, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        let gray = gray && image.isGray
        return try encode(image.rgba.pixels, width: image.width, height: image.height, stride: image.width * 4,
                   input: gray ? DR_PNG_INPUT_GRAY_ALPHA : DR_PNG_INPUT_RGBA, iccProfile: iccProfile, cancellation: cancellation)
    }

    /// The same for a one-channel image: an 8-bit gray PNG, a third of the
    /// samples of the RGB file of the same picture.
    public static func encode(_ image: GrayImage, cancellation: CancellationFlag = .never) throws(ImageError) -> [UInt8] {
        try encode(image.pixels, width: image.width, height: image.height, stride: image.width, input: DR_PNG_INPUT_GRAY,
                   iccProfile: nil, cancellation: cancellation)
    }

    private static func encode(
        _ samples: [UInt8], width: Int, height: Int, stride: Int, input: dr_png_input, iccProfile: [UInt8]?,
        cancellation: CancellationFlag
    ) throws(ImageError) -> [UInt8] {
        try ShimDecode.encoded(samples, iccProfile: iccProfile, cancellation: cancellation, free: dr_png_free) { pixels, icc, stop, out, length in
            var error = dr_png_error()
            let status = dr_png_encode(
                pixels, Int32(clamping: width), Int32(clamping: height), stride, input, Int32(compressionLevel),
                icc.baseAddress, icc.count, ShimDecode.shouldStop, stop, &out, &length, &error)
            switch status {
            case DR_PNG_OK: return out == nil ? ImageError(.encodeFailed, "PNG encoding failed (no output)") : nil
            case DR_PNG_CANCELLED: return ImageError.cancelled
            case DR_PNG_INVALID_ARGUMENT: return ImageError(.invalidArgument, "invalid PNG encode request: \(message(of: error))")
            default: return ImageError(.encodeFailed, "PNG encoding failed (\(message(of: error)))")
            }
        }
    }

    private static func message(of error: dr_png_error) -> String {
        Sniff.text(ofCString: error.message)
    }
}
