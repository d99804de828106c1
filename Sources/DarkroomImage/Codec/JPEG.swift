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
    ///
    /// The pixels are decoded a band of scanlines at a time (`bandLines`), with
    /// a look at `cancellation` before each band; a cancelled decode throws
    /// `ImageError.cancelled`. A progressive file's scans are all decoded
    /// before the first band, in one piece.
    public static func decode(
        _ data: [UInt8], options: DecodeOptions = .init(), cancellation: CancellationFlag = .never
    ) throws(ImageError) -> DecodedImage {
        let limits = options.limits
        try precheck(data, limits: limits)
        let shrink = options.shrink
        guard shrink == 1 || shrink == 2 || shrink == 4 || shrink == 8 else {
            throw ImageError(.invalidArgument, "shrink must be 1, 2, 4 or 8, not \(shrink)")
        }
        try cancellation.check()
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

            // A CMYK file's own profile says what its inks look like: the
            // samples go through it (Little CMS), not through the plain
            // formula, which is only right for no profile at all. A profile
            // that cannot be used leaves the formula.
            let cmykTransform: SRGBTransform? = header.cmykProfile.flatMap {
                try? SRGBTransforms.shared.transform(for: $0, input: .cmyk(inverted: header.invertedCMYK)).get()
            }
            var error = dr_jpeg_error()
            var status = DR_JPEG_OK
            let stride = width * Image.bytesPerPixel
            let band = Int32(bandLines(sourcePixelsPerLine: width * shrink * shrink))
            var pixels = [UInt8](unsafeUninitializedCapacity: stride * height) { out, count in
                count = 0
                status = dr_jpeg_decoder_start(
                    decoder, Int32(shrink), options.lumaOnly ? 1 : 0, cmykTransform == nil ? 0 : 1, Int32(x), Int32(y),
                    Int32(width), Int32(height), stride, &error)
                var finished: Int32 = 0
                while status == DR_JPEG_OK && finished == 0 {
                    if cancellation.poll() { return }
                    status = dr_jpeg_decoder_step(decoder, out.baseAddress, band, &finished, &error)
                }
                if finished != 0 { count = stride * height }
            }
            guard status == DR_JPEG_OK else { throw imageError(error, data: buffer) }
            try cancellation.check()
            try cmykTransform?.apply(to: &pixels, cancellation: cancellation)
            let image = Image(width: width, height: height, pixels: pixels)
            return DecodedImage(
                image: header.orientation == .up ? image : try image.applying(header.orientation, cancellation: cancellation),
                header: header, shrink: shrink, warnings: Int(dr_jpeg_decoder_warnings(decoder)))
        }
    }

    /// Scanlines per band of a decode or an encode, each scanline standing
    /// for `sourcePixelsPerLine` pixels of the full-size picture (a decode
    /// shrunk by s has s x s of them per output pixel): whole groups of 16
    /// lines, about `bandPixels` source pixels, at least 16 lines. The codec's
    /// own batches are 16 lines, so a band boundary never changes how it is
    /// driven.
    static func bandLines(sourcePixelsPerLine: Int) -> Int {
        let lines = bandPixels / max(1, sourcePixelsPerLine)
        return max(16, min(lines, 1 << 20) / 16 * 16)
    }

    /// Source pixels per band of the codec: a few milliseconds of libjpeg's
    /// work at most, between two looks at the cancellation flag.
    static let bandPixels = 1 << 17

    /// Encodes RGB pixels. No metadata is written but `options.iccProfile`
    /// (EXIF and comments are stripped; the pixels are already upright). Huffman tables are libjpeg's
    /// standard ones (`optimize_coding` off): encoding is faster and files are a
    /// few percent larger.
    ///
    /// The rows go to the encoder a band at a time (`bandLines`), with a look
    /// at `cancellation` before each band; a cancelled encode throws
    /// `ImageError.cancelled`. A progressive file's entropy coding happens
    /// after the last band, in one piece.
    public static func encode(
        _ image: Image, options: EncodeOptions = .init(), cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        try encodeRGBX(image, options: options, probe: nil, cancellation: cancellation)
    }

    /// How the encoder handled its output buffer, for tests of that buffer's
    /// growth and error paths (the CJPEG test hook `dr_jpeg_encode_probe`).
    struct EncoderProbe {
        /// Size of the first output buffer; 0 for the encoder's own estimate.
        var firstCapacity = 0
        /// Once this many bytes are written, the next growth of the buffer
        /// fails as an allocation failure would; 0 for never.
        var failAfter = 0
        /// Set by the encode: successful growths of the output buffer.
        var growths = 0
        /// Set by the encode: output buffers the encoder released instead of
        /// handing them over (after an error, or when cancelled).
        var buffersFreed = 0
    }

    /// `encode(_:options:cancellation:)` through the CJPEG test hook, under
    /// the control of `probe`, which also receives what the encoder did with
    /// its buffer. For tests only.
    static func encode(
        _ image: Image, options: EncodeOptions = .init(), probe: inout EncoderProbe,
        cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        var hook = dr_jpeg_encode_probe(
            first_capacity: probe.firstCapacity, fail_after: probe.failAfter, growths: 0, buffers_freed: 0)
        defer {
            probe.growths = Int(hook.growths)
            probe.buffersFreed = Int(hook.buffers_freed)
        }
        return try encodeRGBX(image, options: options, probe: &hook, cancellation: cancellation)
    }

    private static func encodeRGBX(
        _ image: Image, options: EncodeOptions, probe: UnsafeMutablePointer<dr_jpeg_encode_probe>?,
        cancellation: CancellationFlag
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
        // An RGB profile describes three components: a one-component file gets none.
        return try encodeRows(
            image.pixels, width: image.width, height: image.height, stride: image.stride,
            input: options.grayscale ? DR_JPEG_INPUT_RGBX_AS_GRAY : DR_JPEG_INPUT_RGBX,
            quality: options.quality, luma: (lumaH, lumaV), progressive: options.progressive,
            iccProfile: options.grayscale ? nil : options.iccProfile, probe: probe, cancellation: cancellation)
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
    public static func encode(
        _ image: GrayImage, options: EncodeOptions = .init(), cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        guard (1...100).contains(options.quality) else {
            throw ImageError(.invalidArgument, "quality must be 1 to 100, not \(options.quality)")
        }
        if options.progressive {
            var rgbx = options
            rgbx.grayscale = true
            return try encode(Image(image), options: rgbx, cancellation: cancellation)
        }
        return try encodeRows(
            image.pixels, width: image.width, height: image.height, stride: image.width, input: DR_JPEG_INPUT_GRAY,
            quality: options.quality, cancellation: cancellation)
    }

    /// Encodes raw samples: 1 component (grayscale) or 4 (CMYK, written as given
    /// with an Adobe marker; `storeYCCK` stores them as YCCK). Builds the
    /// grayscale and CMYK inputs the decoder must handle.
    static func encodeRaw(
        _ samples: [UInt8], width: Int, height: Int, components: Int, storeYCCK: Bool = false, quality: Int = 95,
        iccProfile: [UInt8]? = nil
    ) throws(ImageError) -> [UInt8] {
        guard width > 0, height > 0, components == 1 || components == 4, samples.count == width * height * components else {
            throw ImageError(.invalidArgument, "sample buffer does not match \(width)x\(height)x\(components)")
        }
        let input = components == 1 ? DR_JPEG_INPUT_GRAY : storeYCCK ? DR_JPEG_INPUT_CMYK_AS_YCCK : DR_JPEG_INPUT_CMYK
        return try encodeRows(samples, width: width, height: height, stride: width * components, input: input, quality: quality,
                              iccProfile: iccProfile)
    }

    /// Runs one encoder over `samples`, rows of `stride` bytes, a band of rows
    /// per call with a look at `cancellation` before each.
    private static func encodeRows(
        _ samples: [UInt8], width: Int, height: Int, stride: Int, input: dr_jpeg_input, quality: Int,
        luma: (h: Int32, v: Int32) = (1, 1), progressive: Bool = false, iccProfile: [UInt8]? = nil,
        probe: UnsafeMutablePointer<dr_jpeg_encode_probe>? = nil, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8] {
        try cancellation.check()
        var error = dr_jpeg_error()
        guard let encoder = dr_jpeg_encoder_start(
            Int32(clamping: width), Int32(clamping: height), input, Int32(clamping: quality), luma.h, luma.v,
            progressive ? 1 : 0, 0, probe, &error)
        else {
            throw encodeError(error.status, error)
        }
        defer { dr_jpeg_encoder_close(encoder) }
        if let iccProfile, !iccProfile.isEmpty {
            let written = iccProfile.withUnsafeBufferPointer { dr_jpeg_encoder_write_icc(encoder, $0.baseAddress, $0.count, &error) }
            guard written == DR_JPEG_OK else { throw encodeError(written, error) }
        }
        let band = bandLines(sourcePixelsPerLine: width)
        var status = samples.withUnsafeBufferPointer { rows in
            var row = 0
            while row < height {
                if cancellation.poll() { break }
                let count = min(band, height - row)
                let written = dr_jpeg_encoder_write(encoder, rows.baseAddress! + row * stride, stride, Int32(count), &error)
                guard written == DR_JPEG_OK else { return written }
                row += count
            }
            return DR_JPEG_OK
        }
        try cancellation.check()
        var out: UnsafeMutablePointer<UInt8>? = nil
        var length = 0
        if status == DR_JPEG_OK {
            status = dr_jpeg_encoder_finish(encoder, &out, &length, &error)
        }
        return try collect(status: status, out: out, length: length, error: error)
    }

    // MARK: - Internals

    private static func collect(
        status: dr_jpeg_status, out: UnsafeMutablePointer<UInt8>?, length: Int, error: dr_jpeg_error
    ) throws(ImageError) -> [UInt8] {
        defer { dr_jpeg_free(out) }
        guard status == DR_JPEG_OK, let out else { throw encodeError(status, error) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }

    private static func encodeError(_ status: dr_jpeg_status, _ error: dr_jpeg_error) -> ImageError {
        let code: ImageError.Code = status == DR_JPEG_INVALID_ARGUMENT ? .invalidArgument : .encodeFailed
        return ImageError(code, "JPEG encoding failed (libjpeg: \(message(of: error)))")
    }

    /// Checks that need no parsing: empty input, input size, the SOI marker.
    static func precheck(_ data: [UInt8], limits: DecodeLimits) throws(ImageError) {
        try limits.checkInput(data)
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
        var header = JPEGHeader(
            storedSize: Size(width: Int(info.width), height: Int(info.height)), orientation: orientation,
            colorSpace: colorSpace, components: Int(info.components), isProgressive: info.progressive != 0,
            subsampling: subsampling)
        if let icc = info.icc, info.icc_length > 0 {
            header.iccProfile = Array(UnsafeBufferPointer(start: icc, count: info.icc_length))
        }
        header.invertedCMYK = (colorSpace == .cmyk || colorSpace == .ycck) && info.saw_adobe != 0
        do {
            try check(header.storedSize, limits: limits)
        } catch {
            dr_jpeg_decoder_close(decoder)
            throw error
        }
        return (decoder, header)
    }

    /// Another decoder's refusal of its header's size (over a side limit,
    /// or 0 wide or high): worded by `check` when the size is known, as
    /// every decoder words it, else with the decoder's own `detail`.
    static func sizeRefusal(_ size: Size?, limits: DecodeLimits, tooLarge: Bool, detail: String) -> ImageError {
        if let size {
            do {
                try check(size, limits: limits)
            } catch {
                return error
            }
        }
        return ImageError(tooLarge ? .limitExceeded : .invalidDimensions, "invalid image dimensions (\(detail))")
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
        Sniff.text(ofCString: error.message)
    }
}

private func ceilDiv(_ a: Int, _ b: Int) -> Int { (a + b - 1) / b }
