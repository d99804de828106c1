import CJPEG

/// JPEG decoding and encoding over libjpeg-turbo (through the CJPEG shim).
///
/// Decoding writes straight into the `Image` RGBX buffer: no intermediate copy
/// unless the EXIF orientation needs a transform (one extra pass, only then).
public enum JPEG {
    /// Reads only the header; checks maxInputBytes, zero/invalid dims, maxSide,
    /// maxPixels BEFORE any pixel buffer exists.
    public static func readHeader(_ data: [UInt8], limits: DecodeLimits = .default) throws(ImageError) -> JPEGHeader {
        try precheck(data, limits: limits)
        return try data.withUnsafeBufferPointer { (buffer) throws(ImageError) -> JPEGHeader in
            let (decoder, header) = try open(buffer, limits: limits)
            dr_jpeg_decoder_close(decoder)
            return header
        }
    }

    /// Decodes, applies the EXIF orientation (the returned image is upright),
    /// optional region + DCT shrink.
    ///
    /// Output size: without a region, `ceil(uprightWidth / shrink)` x
    /// `ceil(uprightHeight / shrink)` (libjpeg's scaled size). With a region, the
    /// region is mapped to stored coordinates, then its origin is divided by
    /// `shrink` rounding down and its size divided by `shrink` rounding up, and the
    /// result is clipped to the scaled image; the decoded pixels are then turned
    /// upright. With `shrink` 1 the output is exactly the region.
    public static func decode(_ data: [UInt8], options: DecodeOptions = .init()) throws(ImageError) -> DecodedImage {
        let limits = options.limits
        try precheck(data, limits: limits)
        let shrink = options.shrink
        guard shrink == 1 || shrink == 2 || shrink == 4 || shrink == 8 else {
            throw ImageError(.invalidArgument, "shrink must be 1, 2, 4 or 8, not \(shrink)")
        }
        return try data.withUnsafeBufferPointer { (buffer) throws(ImageError) -> DecodedImage in
            let (decoder, header) = try open(buffer, limits: limits)
            defer { dr_jpeg_decoder_close(decoder) }

            let upright = header.uprightSize
            let region = options.region ?? Rect(x: 0, y: 0, width: upright.width, height: upright.height)
            guard region.fits(in: upright) else {
                throw ImageError(.invalidArgument, "region \(region) does not fit in the \(upright) image")
            }
            let stored = header.orientation.storedRect(forUpright: region, stored: header.storedSize)
            let scaledWidth = ceilDiv(header.storedSize.width, shrink)
            let scaledHeight = ceilDiv(header.storedSize.height, shrink)
            let x = stored.x / shrink, y = stored.y / shrink
            let width = min(ceilDiv(stored.width, shrink), scaledWidth - x)
            let height = min(ceilDiv(stored.height, shrink), scaledHeight - y)

            var error = dr_jpeg_error()
            var status = DR_JPEG_OK
            let stride = width * Image.bytesPerPixel
            let pixels = [UInt8](unsafeUninitializedCapacity: stride * height) { out, count in
                status = dr_jpeg_decoder_read(
                    decoder, Int32(shrink), options.lumaOnly ? 1 : 0, Int32(x), Int32(y), Int32(width), Int32(height),
                    out.baseAddress, stride, &error)
                count = stride * height
            }
            guard status == DR_JPEG_OK else { throw imageError(error, data: buffer) }
            let image = Image(width: width, height: height, pixels: pixels)
            return DecodedImage(
                image: header.orientation == .up ? image : image.applying(header.orientation),
                header: header, shrink: shrink, warnings: Int(dr_jpeg_decoder_warnings(decoder)))
        }
    }

    /// Encodes RGB pixels. No metadata is written (EXIF, ICC and comments are
    /// stripped; the pixels are already upright). Huffman tables are libjpeg's
    /// standard ones (`optimize_coding` off): encoding is faster and files are a
    /// few percent larger.
    public static func encode(_ image: Image, options: EncodeOptions = .init()) throws(ImageError) -> [UInt8] {
        try encodeRGBX(image, options: options, probe: nil)
    }

    /// How the encoder handled its output buffer, for tests of that buffer's
    /// growth and error paths (the CJPEG test hook `dr_jpeg_encode_rgbx_probed`).
    struct EncoderProbe {
        /// Size of the first output buffer; 0 for the encoder's own estimate.
        var firstCapacity = 0
        /// Once this many bytes are written, the next growth of the buffer fails
        /// as an allocation failure would; 0 for never.
        var failAfter = 0
        /// Set by the encode: successful growths of the output buffer.
        var growths = 0
        /// Set by the encode: output buffers the encoder released after an error.
        var buffersFreed = 0
    }

    /// `encode(_:options:)` through the CJPEG test hook, under the control of
    /// `probe`, which also receives what the encoder did with its buffer.
    /// For tests only.
    static func encode(
        _ image: Image, options: EncodeOptions = .init(), probe: inout EncoderProbe
    ) throws(ImageError) -> [UInt8] {
        var hook = dr_jpeg_encode_probe(
            first_capacity: probe.firstCapacity, fail_after: probe.failAfter, growths: 0, buffers_freed: 0)
        defer {
            probe.growths = Int(hook.growths)
            probe.buffersFreed = Int(hook.buffers_freed)
        }
        return try encodeRGBX(image, options: options, probe: &hook)
    }

    private static func encodeRGBX(
        _ image: Image, options: EncodeOptions, probe: UnsafeMutablePointer<dr_jpeg_encode_probe>?
    ) throws(ImageError) -> [UInt8] {
        guard (1...100).contains(options.quality) else {
            throw ImageError(.invalidArgument, "quality must be 1 to 100, not \(options.quality)")
        }
        let (lumaH, lumaV): (Int32, Int32)
        switch options.resolvedSubsampling {
        case .s422: (lumaH, lumaV) = (2, 1)
        case .s420: (lumaH, lumaV) = (2, 2)
        default: (lumaH, lumaV) = (1, 1)
        }
        var error = dr_jpeg_error()
        var out: UnsafeMutablePointer<UInt8>? = nil
        var length = 0
        let (width, height, gray) = (Int32(image.width), Int32(image.height), Int32(options.grayscale ? 1 : 0))
        let (quality, progressive) = (Int32(options.quality), Int32(options.progressive ? 1 : 0))
        let status = image.pixels.withUnsafeBufferPointer { pixels in
            guard let probe else {
                return dr_jpeg_encode_rgbx(
                    pixels.baseAddress, width, height, image.stride, gray, quality, lumaH, lumaV, progressive, 0,
                    &out, &length, &error)
            }
            return dr_jpeg_encode_rgbx_probed(
                pixels.baseAddress, width, height, image.stride, gray, quality, lumaH, lumaV, progressive, 0,
                &out, &length, probe, &error)
        }
        return try collect(status: status, out: out, length: length, error: error)
    }

    /// Encodes a gray plane as a one-component (grayscale) JPEG: the file
    /// `encode(Image(image), options:)` writes with `grayscale` set, byte for
    /// byte, without building RGBX pixels. `quality` and `progressive` apply;
    /// `subsampling` and `grayscale` mean nothing here. Progressive files go
    /// through the RGBX encoder, the only one with a progressive mode.
    ///
    /// libjpeg-turbo copies one-component input sample by sample but turns
    /// RGBX into gray with SIMD code: when the RGBX picture exists anyway,
    /// encoding it with `grayscale` set gives the same file for fewer
    /// instructions (about 1.8 fewer per pixel).
    public static func encode(_ image: GrayImage, options: EncodeOptions = .init()) throws(ImageError) -> [UInt8] {
        guard (1...100).contains(options.quality) else {
            throw ImageError(.invalidArgument, "quality must be 1 to 100, not \(options.quality)")
        }
        if options.progressive {
            var rgbx = options
            rgbx.grayscale = true
            return try encode(Image(image), options: rgbx)
        }
        return try encodeRaw(image.pixels, width: image.width, height: image.height, components: 1, quality: options.quality)
    }

    /// Encodes raw samples: 1 component (grayscale) or 4 (CMYK, written as given
    /// with an Adobe marker; `storeYCCK` stores them as YCCK). Builds the
    /// grayscale and CMYK inputs the decoder must handle.
    static func encodeRaw(
        _ samples: [UInt8], width: Int, height: Int, components: Int, storeYCCK: Bool = false, quality: Int = 95
    ) throws(ImageError) -> [UInt8] {
        guard width > 0, height > 0, samples.count == width * height * components else {
            throw ImageError(.invalidArgument, "sample buffer does not match \(width)x\(height)x\(components)")
        }
        var error = dr_jpeg_error()
        var out: UnsafeMutablePointer<UInt8>? = nil
        var length = 0
        let status = samples.withUnsafeBufferPointer { s in
            dr_jpeg_encode_raw(
                s.baseAddress, Int32(width), Int32(height), Int32(components), storeYCCK ? 1 : 0,
                Int32(quality), &out, &length, &error)
        }
        return try collect(status: status, out: out, length: length, error: error)
    }

    // MARK: - Internals

    private static func collect(
        status: dr_jpeg_status, out: UnsafeMutablePointer<UInt8>?, length: Int, error: dr_jpeg_error
    ) throws(ImageError) -> [UInt8] {
        defer { dr_jpeg_free(out) }
        guard status == DR_JPEG_OK, let out else {
            let code: ImageError.Code = status == DR_JPEG_INVALID_ARGUMENT ? .invalidArgument : .encodeFailed
            throw ImageError(code, "JPEG encoding failed (libjpeg: \(message(of: error)))")
        }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }

    /// Checks that need no parsing: empty input, input size, the SOI marker.
    static func precheck(_ data: [UInt8], limits: DecodeLimits) throws(ImageError) {
        if data.isEmpty { throw ImageError(.empty, "empty input (0 bytes)") }
        if data.count > limits.maxInputBytes {
            throw ImageError(
                .limitExceeded, "input is \(data.count) bytes, over the \(limits.maxInputBytes) byte limit")
        }
        if data.count < 2 || data[0] != 0xFF || data[1] != 0xD8 {
            throw ImageError(.notJPEG, Sniff.notJPEGMessage(data))
        }
    }

    /// Opens a decoder on `buffer`, reads the header and checks the limits.
    /// The caller closes the decoder.
    private static func open(
        _ buffer: UnsafeBufferPointer<UInt8>, limits: DecodeLimits
    ) throws(ImageError) -> (OpaquePointer, JPEGHeader) {
        var info = dr_jpeg_info()
        var error = dr_jpeg_error()
        guard let decoder = dr_jpeg_decoder_open(
            buffer.baseAddress, buffer.count, limits.failOnWarning ? 1 : 0, &info, &error)
        else {
            throw imageError(error, data: buffer)
        }
        var orientation = Orientation.up
        if let exif = info.exif, info.exif_length > 0 {
            let body = Array(UnsafeBufferPointer(start: exif, count: info.exif_length))
            orientation = EXIF.orientation(app1: body) ?? .up
        }
        let colorSpace: JPEGColorSpace
        switch info.color_space {
        case DR_JPEG_COLOR_GRAY: colorSpace = .grayscale
        case DR_JPEG_COLOR_RGB: colorSpace = .rgb
        case DR_JPEG_COLOR_CMYK: colorSpace = .cmyk
        case DR_JPEG_COLOR_YCCK: colorSpace = .ycck
        case DR_JPEG_COLOR_YCBCR: colorSpace = .ycbcr
        default:
            dr_jpeg_decoder_close(decoder)
            throw ImageError(.unsupported, "unsupported JPEG colour space with \(info.components) components")
        }
        var subsampling: ChromaSubsampling? = nil
        if colorSpace == .ycbcr && info.chroma_h == 1 && info.chroma_v == 1 {
            switch (info.luma_h, info.luma_v) {
            case (1, 1): subsampling = .s444
            case (2, 1): subsampling = .s422
            case (2, 2): subsampling = .s420
            default: subsampling = nil
            }
        }
        let header = JPEGHeader(
            storedSize: Size(width: Int(info.width), height: Int(info.height)), orientation: orientation,
            colorSpace: colorSpace, components: Int(info.components), isProgressive: info.progressive != 0,
            subsampling: subsampling)
        do {
            try check(header.storedSize, limits: limits)
        } catch {
            dr_jpeg_decoder_close(decoder)
            throw error
        }
        return (decoder, header)
    }

    /// The limit checks on the stored size (orientation does not change them).
    static func check(_ size: Size, limits: DecodeLimits) throws(ImageError) {
        if size.width <= 0 { throw ImageError(.invalidDimensions, "header declares width \(size.width)") }
        if size.height <= 0 { throw ImageError(.invalidDimensions, "header declares height \(size.height)") }
        if size.width > limits.maxPixels / size.height {
            throw ImageError(
                .limitExceeded,
                "image \(size) is \(megapixels(size.width * size.height)) megapixels, over the \(megapixels(limits.maxPixels)) megapixel limit"
            )
        }
        let side = max(size.width, size.height)
        if side > limits.maxSide {
            throw ImageError(
                .limitExceeded, "image \(size) has a side of \(side) pixels, over the \(limits.maxSide) pixel limit")
        }
    }

    /// One decimal place, e.g. 3600.0.
    static func megapixels(_ pixels: Int) -> String {
        let tenths = (pixels + 50_000) / 100_000
        return "\(tenths / 10).\(tenths % 10)"
    }

    private static func imageError(_ error: dr_jpeg_error, data: UnsafeBufferPointer<UInt8>) -> ImageError {
        let text = message(of: error)
        switch error.status {
        case DR_JPEG_EMPTY: return ImageError(.empty, "empty input (0 bytes)")
        case DR_JPEG_NOT_JPEG: return ImageError(.notJPEG, "not a JPEG (libjpeg: \(text))")
        case DR_JPEG_TRUNCATED:
            return ImageError(.truncated, "truncated: data ends before the image does (libjpeg: \(text))")
        case DR_JPEG_INVALID_DIMENSIONS:
            if let size = Sniff.frameSize(data), size.width == 0 || size.height == 0 {
                let which = size.width == 0 ? "width" : "height"
                return ImageError(.invalidDimensions, "header declares \(which) 0")
            }
            return ImageError(.invalidDimensions, "invalid image dimensions (libjpeg: \(text))")
        case DR_JPEG_UNSUPPORTED: return ImageError(.unsupported, "unsupported JPEG (libjpeg: \(text))")
        case DR_JPEG_OUT_OF_MEMORY: return ImageError(.limitExceeded, "out of memory while decoding (libjpeg: \(text))")
        case DR_JPEG_INVALID_ARGUMENT: return ImageError(.invalidArgument, "invalid decode request: \(text)")
        default: return ImageError(.corrupt, "corrupt JPEG data (libjpeg: \(text))")
        }
    }

    private static func message(of error: dr_jpeg_error) -> String {
        withUnsafeBytes(of: error.message) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }
}

private func ceilDiv(_ a: Int, _ b: Int) -> Int { (a + b - 1) / b }
