import CWebP

/// What the header of a WebP file says.
public struct WebPHeader: Sendable, Equatable {
    /// The picture's size; the canvas size for an animation.
    public var size: Size
    public var hasAlpha: Bool
    public var isAnimated: Bool

    public init(size: Size, hasAlpha: Bool, isAnimated: Bool) {
        self.size = size
        self.hasAlpha = hasAlpha
        self.isAnimated = isAnimated
    }
}

/// WebP decoding and encoding over libwebp (through the CWebP shim): still
/// pictures only, lossy when written.
public enum WebP {
    /// True when `bytes` start like a WebP file: "RIFF", 4 size bytes, "WEBP".
    public static func isWebP(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 12 && bytes[0..<4].elementsEqual("RIFF".utf8) && bytes[8..<12].elementsEqual("WEBP".utf8)
    }

    /// Reads only the header (the chunks before the bitstream and its first
    /// bytes): size, alpha, animation. The input size is checked before
    /// anything is parsed, the picture's size against `limits` before any
    /// pixel buffer exists. `limits.failOnWarning` means nothing here.
    public static func readHeader(_ bytes: [UInt8], limits: DecodeLimits = .default) throws(ImageError) -> WebPHeader {
        try limits.checkInput(bytes)
        if !isWebP(bytes) {
            // "RIFF" and less than the rest of the signature, all of it as in
            // one: the start of a WebP file, cut short.
            let signature = Array("RIFF".utf8) + [nil, nil, nil, nil] + Array("WEBP".utf8)
            if (4..<12).contains(bytes.count) && zip(bytes, signature).allSatisfy({ $1 == nil || $0 == $1 }) {
                throw ImageError(.truncated, "truncated: data ends before the header does (\(bytes.count) bytes)")
            }
            throw ImageError(.notWebP, notWebPMessage(bytes))
        }
        var info = dr_webp_info()
        var error = dr_webp_error()
        let status = bytes.withUnsafeBufferPointer { dr_webp_read_info($0.baseAddress, $0.count, &info, &error) }
        guard status == DR_WEBP_OK else { throw decodeError(error) }
        let header = WebPHeader(
            size: Size(width: Int(info.width), height: Int(info.height)), hasAlpha: info.has_alpha != 0,
            isAnimated: info.is_animated != 0)
        try JPEG.check(header.size, limits: limits)
        return header
    }

    /// The ICC profile of a WebP file: its ICCP chunk, when the VP8X header
    /// announces one (readers ignore the chunk otherwise). Nil when there is
    /// none, the bytes are not WebP, or a chunk runs past the end. Only the
    /// chunk headers before the profile are read.
    public static func iccProfile(_ bytes: [UInt8]) -> [UInt8]? {
        chunk("ICCP", flag: 0x20, in: bytes)
    }

    /// The body of the first chunk named `fourcc` in an extended file whose
    /// VP8X header sets `flag`; nil when there is none or a chunk runs past
    /// the end. Only the chunk headers before it are read.
    private static func chunk(_ fourcc: String, flag: UInt8, in bytes: [UInt8]) -> [UInt8]? {
        guard isWebP(bytes), bytes.count >= 21, bytes[12..<16].elementsEqual("VP8X".utf8),
              bytes[20] & flag != 0 else { return nil }
        var chunk = 12
        while chunk + 8 <= bytes.count {
            let size = (0..<4).reduce(0) { $0 | Int(bytes[chunk + 4 + $1]) << (8 * $1) }
            let body = chunk + 8
            guard size <= bytes.count - body else { return nil }
            if bytes[chunk..<chunk + 4].elementsEqual(fourcc.utf8) { return Array(bytes[body..<body + size]) }
            chunk = body + size + (size & 1)
        }
        return nil
    }

    /// Decodes a still picture to RGBX, after `readHeader`'s checks. Animated
    /// files are refused (`.unsupported`). Without a `background` a file's
    /// alpha is ignored: the colour channels are the file's own, also where
    /// a pixel is transparent. With one, each pixel is composited onto it,
    /// as a source with transparency is before a pipeline runs. The fourth
    /// byte is 255 as everywhere in the engine. An embedded ICC profile is
    /// not applied, nor an EXIF orientation (see `orientation`). Once
    /// `cancellation` is set the decode stops at its next slice of 64 KB.
    public static func decode(
        _ bytes: [UInt8], limits: DecodeLimits = .default, background: (UInt8, UInt8, UInt8)? = nil,
        cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        if cancellation.isCancelled { throw .cancelled }
        let header = try readHeader(bytes, limits: limits)
        if header.isAnimated {
            throw ImageError(.unsupported, "animated WebP is not supported (only still pictures are decoded)")
        }
        return try decode(bytes, size: header.size, background: background, cancellation: cancellation)
    }

    /// `decode` of a still file whose header was read as `size`
    /// (`Source.decode`); the shim checks the file against it. With
    /// `keepAlpha` the fourth byte holds each pixel's straight alpha and
    /// `background` is not used.
    static func decode(
        _ bytes: [UInt8], size: Size, background: (UInt8, UInt8, UInt8)?, keepAlpha: Bool = false, cancellation: CancellationFlag
    ) throws(ImageError) -> Image {
        if cancellation.isCancelled { throw .cancelled }
        let width = size.width, height = size.height
        let colour = background.map { [$0.0, $0.1, $0.2] }
        let pixels = try ShimDecode.rgbx(bytes, width: width, height: height, cancellation: cancellation) { data, out, stride, stop in
            var error = dr_webp_error()
            func decode(_ background: UnsafePointer<UInt8>?) -> dr_webp_status {
                dr_webp_decode_rgbx(data.baseAddress, data.count, out, stride, Int32(width), Int32(height), background,
                                    keepAlpha ? 1 : 0, ShimDecode.shouldStop, stop, &error)
            }
            let status = colour.map { colour in colour.withUnsafeBufferPointer { decode($0.baseAddress) } } ?? decode(nil)
            return status == DR_WEBP_OK ? nil : status == DR_WEBP_CANCELLED ? .cancelled : decodeError(error)
        }
        return Image(width: width, height: height, pixels: pixels)
    }

    /// The EXIF orientation of a WebP file: its EXIF chunk, when the VP8X
    /// header announces one, read as a JPEG's APP1 is. Nil when there is
    /// none or it says nothing usable.
    public static func orientation(_ bytes: [UInt8]) -> Orientation? {
        guard let exif = chunk("EXIF", flag: 0x08, in: bytes) else { return nil }
        // Some writers keep the APP1 segment's "Exif\0\0" before the TIFF header.
        let prefix: [UInt8] = Array("Exif".utf8) + [0, 0]
        return EXIF.orientation(tiff: exif.starts(with: prefix) ? Array(exif.dropFirst(6)) : exif)
    }

    /// Lossy WebP of an RGBX image, written without alpha (the fourth byte
    /// is ignored), at `quality` 1 to 100 (libwebp's quality factor, with
    /// its default settings otherwise). A non-empty `iccProfile` goes into
    /// an ICCP chunk (the file then has a VP8X header).
    ///
    /// libwebp reports its progress about once a percent of the encode;
    /// `cancellation` is looked at then, and before the encode starts. A
    /// cancelled encode throws `ImageError.cancelled`.
    ///
    /// WebP allows at most 16383 pixels a side: a larger image fails with
    /// `.encodeFailed`.
    public static func encode(
        _ image: Image, quality: Int, iccProfile: [UInt8]? = nil, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        try encode(
            image.pixels, width: image.width, height: image.height, stride: image.stride, input: DR_WEBP_INPUT_RGBX,
            quality: quality, iccProfile: iccProfile, cancellation: cancellation)
    }

    /// The same for an image with transparency: lossy colour with its alpha
    /// coded losslessly in an ALPH chunk (libwebp's default).
    public static func encode(
        _ image: AlphaImage, quality: Int, iccProfile: [UInt8]? = nil, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        try encode(
            image.rgba.pixels, width: image.width, height: image.height, stride: image.width * 4,
            input: DR_WEBP_INPUT_RGBA, quality: quality, iccProfile: iccProfile, cancellation: cancellation)
    }

    /// The same for a one-channel image. WebP has no gray mode: the file is
    /// RGB with equal channels, the one `encode(Image(image), quality:)`
    /// writes, made without the RGBX copy. Decoded, its channels are equal
    /// but for libwebp's YUV-to-RGB rounding, which leaves green one below
    /// red and blue at three gray levels out of 256.
    public static func encode(
        _ image: GrayImage, quality: Int, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        try encode(
            image.pixels, width: image.width, height: image.height, stride: image.width, input: DR_WEBP_INPUT_GRAY,
            quality: quality, iccProfile: nil, cancellation: cancellation)
    }

    /// The most pixels a WebP file has on a side.
    public static let maxSide = Int(DR_WEBP_MAX_SIDE)

    /// Why an image of `size` cannot be written as WebP, nil when it can:
    /// for a job to fail before it decodes what it could not write.
    public static func sizeRefusal(_ size: Size) -> ImageError? {
        guard size.width > maxSide || size.height > maxSide else { return nil }
        return ImageError(.encodeFailed, "cannot encode a \(size.width)x\(size.height) image as WebP: WebP allows at most \(maxSide) pixels a side")
    }

    // MARK: - Internals

    private static func encode(
        _ samples: [UInt8], width: Int, height: Int, stride: Int, input: dr_webp_input, quality: Int,
        iccProfile: [UInt8]?, cancellation: CancellationFlag
    ) throws(ImageError) -> [UInt8] {
        guard (1...100).contains(quality) else {
            throw ImageError(.invalidArgument, "quality must be 1 to 100, not \(quality)")
        }
        if let refusal = sizeRefusal(Size(width: width, height: height)) { throw refusal }
        return try ShimDecode.encoded(samples, iccProfile: iccProfile, cancellation: cancellation, free: dr_webp_free) { pixels, icc, stop, out, length in
            var error = dr_webp_error()
            let status = dr_webp_encode(
                pixels, Int32(clamping: width), Int32(clamping: height), stride, input,
                Int32(quality), icc.baseAddress, icc.count, ShimDecode.shouldStop, stop, &out, &length, &error)
            switch status {
            case DR_WEBP_OK: return out == nil ? ImageError(.encodeFailed, "WebP encoding failed (no output)") : nil
            case DR_WEBP_CANCELLED: return ImageError.cancelled
            case DR_WEBP_INVALID_ARGUMENT: return ImageError(.invalidArgument, "invalid WebP encode request: \(message(of: error))")
            case DR_WEBP_TOO_LARGE: return ImageError(.encodeFailed, "cannot encode a \(width)x\(height) image as WebP: \(message(of: error))")
            default: return ImageError(.encodeFailed, "WebP encoding failed (\(message(of: error)))")
            }
        }
    }

    private static func decodeError(_ error: dr_webp_error) -> ImageError {
        let text = message(of: error)
        switch error.status {
        case DR_WEBP_TRUNCATED: return ImageError(.truncated, "truncated: data ends before the image does (\(text))")
        case DR_WEBP_UNSUPPORTED: return ImageError(.unsupported, "unsupported WebP (\(text))")
        case DR_WEBP_OUT_OF_MEMORY: return ImageError(.limitExceeded, "out of memory while decoding (\(text))")
        case DR_WEBP_INVALID_ARGUMENT: return ImageError(.invalidArgument, "invalid decode request: \(text)")
        default: return ImageError(.corrupt, "corrupt WebP data (\(text))")
        }
    }

    /// "not a WebP (starts with FF D8 FF E0: looks like JPEG)", worded as
    /// the JPEG decoder's not-jpeg message.
    private static func notWebPMessage(_ bytes: [UInt8]) -> String {
        let hex = Sniff.firstBytes(bytes)
        let kind = bytes.starts(with: [0xFF, 0xD8]) ? "JPEG" : Sniff.format(bytes)
        if let kind { return "not a WebP (starts with \(hex): looks like \(kind))" }
        return "not a WebP (starts with \(hex))"
    }

    private static func message(of error: dr_webp_error) -> String {
        Sniff.text(ofCString: error.message)
    }
}
