/// An 8-bit one-channel image: one luma byte per pixel.
///
/// A gray result as its luma plane (`init?(exactly:)`): a quarter of the
/// bytes of the same picture as RGBX, so scaling it filters one channel
/// instead of three equal ones. Its resize and thumbnail
/// (Operations/ResampleGray.swift) give channel 0 of what the same operations
/// give on the RGBX picture, byte for byte: same geometry, same filters, same
/// rounding. `JPEG.encode(_:options:)` writes it as a one-component JPEG.
public struct GrayImage: Sendable, Equatable {
    public let width: Int
    public let height: Int
    /// `width * height` bytes, row-major.
    public var pixels: [UInt8]

    /// Wraps existing luma bytes. `pixels.count` must equal `width * height`.
    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(width > 0 && height > 0, "image dimensions must be positive")
        precondition(pixels.count == width * height, "pixel buffer size does not match dimensions")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// An image filled with one gray level.
    public init(width: Int, height: Int, value: UInt8 = 0) {
        precondition(width > 0 && height > 0, "image dimensions must be positive")
        self.init(width: width, height: height, pixels: [UInt8](repeating: value, count: width * height))
    }

    /// The luma plane of `image` if every pixel of it is gray (R = G = B):
    /// channel 0 of each pixel, which for gray pixels is their luma exactly.
    /// Nil if any pixel is not gray, the way `Int(exactly:)` is nil for a
    /// value that does not fit.
    ///
    /// One pass: 16 pixels per step are read as 32-bit words (R in the low
    /// byte), checked with two byte comparisons per word (R = G, G = B: bytes
    /// 0 and 1 of w ^ (w >> 8) are zero) and their low bytes stored; the pass
    /// stops at the first block that is not gray.
    public init?(exactly image: Image) {
        guard let plane = GrayImage.lumaPlane(of: image, .never) else { return nil }
        self.init(width: image.width, height: image.height, pixels: plane)
    }

    /// `init?(exactly:)`, stopped with `ImageError.cancelled` once
    /// `cancellation` is set.
    public init?(exactly image: Image, cancellation: CancellationFlag) throws(ImageError) {
        let plane = GrayImage.lumaPlane(of: image, cancellation)
        try cancellation.check()
        guard let plane else { return nil }
        self.init(width: image.width, height: image.height, pixels: plane)
    }

    /// The plane of `init?(exactly:)`; also nil if `cancel` is set while it
    /// is made.
    private static func lumaPlane(of image: Image, _ cancel: CancellationFlag) -> [UInt8]? {
        let count = image.width * image.height
        var plane = [UInt8](repeating: 0, count: count, cancel)
        if cancel.isCancelled { return nil }
        let src = image.pixels.span.bytes
        do {
            var planeView = plane.mutableSpan
            var dst = planeView.mutableBytes
            let pairs = SIMD16<UInt32>(repeating: 0xFFFF)
            // Pixels between two looks at the flag: a multiple of 16.
            let chunk = max(16, CancellationFlag.workPerPoll / 4)
            var i = 0
            while i &+ 16 <= count {
                if cancel.poll() { return nil }
                let end = min(count, i &+ chunk)
                while i &+ 16 <= end {
                    let words = src.unsafeLoadUnaligned(fromByteOffset: i &* 4, as: SIMD16<UInt32>.self)
                    // Bytes 0 and 1 of w ^ (w >> 8) are R ^ G and G ^ B.
                    if any((words ^ words &>> 8) & pairs .!= .zero) { return nil }
                    dst.storeBytes(of: SIMD16<UInt8>(truncatingIfNeeded: words), toByteOffset: i, as: SIMD16<UInt8>.self)
                    i &+= 16
                }
            }
            while i < count {
                let r = src.unsafeLoadUnaligned(fromByteOffset: i &* 4, as: UInt8.self)
                if r != src.unsafeLoadUnaligned(fromByteOffset: i &* 4 &+ 1, as: UInt8.self)
                    || r != src.unsafeLoadUnaligned(fromByteOffset: i &* 4 &+ 2, as: UInt8.self) { return nil }
                dst.storeBytes(of: r, toByteOffset: i, as: UInt8.self)
                i &+= 1
            }
        }
        return plane
    }

    /// The gray level at (x, y). For tests and diagnostics, not hot loops.
    public func pixel(x: Int, y: Int) -> UInt8 {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel (\(x), \(y)) outside \(width)x\(height)")
        return pixels[y * width + x]
    }

    /// Sets the gray level at (x, y). For tests and diagnostics, not hot loops.
    public mutating func setPixel(x: Int, y: Int, _ value: UInt8) {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel (\(x), \(y)) outside \(width)x\(height)")
        pixels[y * width + x] = value
    }

    /// The pixels inside `rect`. Throws if the rectangle is empty or does not
    /// lie wholly inside the image.
    /// Throws `ImageError.cancelled` once `cancellation` is set.
    public func cropped(to rect: Rect, cancellation: CancellationFlag = .never) throws(ImageError) -> GrayImage {
        guard let out = try Image.croppedRows(pixels, width: width, height: height, bytesPerPixel: 1, to: rect, cancellation) else {
            return self
        }
        return GrayImage(width: rect.width, height: rect.height, pixels: out)
    }

    /// An aspect-fill copy at exactly `size`, as `Image.thumbnail(_:kernel:)`
    /// makes it: the centre region `Image.fillRegion` keeps is cut out, then
    /// resampled to `size`. Throws `ImageError.cancelled` once `cancellation`
    /// is set.
    public func thumbnail(
        _ size: Size, gravity: Gravity = .center, kernel: ResampleKernel = .lanczos3, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> GrayImage {
        try Image.checkOutputSize(size, operation: "thumbnail")
        let region = Image.fillRegion(of: Size(width: width, height: height), for: size)
        let rect = gravity == .smart ? try detailWindow(region, cancellation: cancellation)
                                     : gravity.place(region, in: Size(width: width, height: height))
        return try cropped(to: rect, cancellation: cancellation).resized(to: size, kernel: kernel, cancellation: cancellation)
    }
}

extension Image {
    /// The RGBX picture of a gray plane: R, G and B each the plane's byte,
    /// the padding byte 255. `GrayImage(exactly:)` of the result gives the
    /// plane back.
    public init(_ gray: GrayImage) {
        let count = gray.width * gray.height
        var out = [UInt8](repeating: 255, count: count * Image.bytesPerPixel)
        let src = gray.pixels.span.bytes
        do {
            var outView = out.mutableSpan
            var dst = outView.mutableBytes
            let spread = SIMD16<UInt32>(repeating: 0x01_0101)
            let opaque = SIMD16<UInt32>(repeating: 0xFF00_0000)
            var i = 0
            while i &+ 16 <= count {
                let v = SIMD16<UInt32>(truncatingIfNeeded: src.unsafeLoadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self))
                dst.storeBytes(of: v &* spread | opaque, toByteOffset: i &* 4, as: SIMD16<UInt32>.self)
                i &+= 16
            }
            while i < count {
                let v = src.unsafeLoadUnaligned(fromByteOffset: i, as: UInt8.self)
                dst.storeBytes(of: SIMD4<UInt8>(v, v, v, 255), toByteOffset: i &* 4, as: SIMD4<UInt8>.self)
                i &+= 1
            }
        }
        self.init(width: gray.width, height: gray.height, pixels: out)
    }
}

// MARK: - Rows as channels

// The horizontal resampling pass takes a plane four rows at a time as the
// four channels of one RGBX row (`GrayImage.horizontalPass`). The conversions
// to and from that layout are here, beside `init?(exactly:)` and
// `Image.init(_:)`, because they are made of the same SIMD conversions:
// release builds optimise the module as a whole but generate code file by
// file, and a specialised standard-library SIMD conversion is emitted with
// one file's code; code in other files calls it instead of inlining it
// (measured: a call per 16 pixels when these lived in ResampleGray.swift).

extension GrayImage {
    /// The rows of a `width` x `height` plane four at a time as the channels
    /// of `(height + 3) / 4` rows of `width` four-byte pixels: byte k of pixel
    /// x of row q is byte x of row 4q + k (the last row again past the end).
    ///
    /// Sixteen pixels per step: each row's 16 bytes are widened to 32-bit
    /// lanes, shifted to their byte of the word and the four ORed (words are
    /// stored little-endian, as `init?(exactly:)` reads them).
    static func interleavedRows(_ source: [UInt8], width: Int, height: Int) -> [UInt8] {
        precondition(width > 0 && height > 0 && source.count >= width * height, "plane smaller than \(width)x\(height)")
        let quads = (height + 3) / 4
        var out = [UInt8](repeating: 0, count: quads * width * 4)
        let src = source.span.bytes
        var outView = out.mutableSpan
        var dst = outView.mutableBytes
        for q in 0..<quads {
            let r0 = 4 * q * width
            let r1 = min(4 * q + 1, height - 1) * width
            let r2 = min(4 * q + 2, height - 1) * width
            let r3 = min(4 * q + 3, height - 1) * width
            let o = q * width * 4
            // The last few pixels: one more step ending at the row's end (the
            // pixels it repeats come out the same), or one by one.
            let steps = width / 16 + (width % 16 != 0 && width >= 16 ? 1 : 0)
            for step in 0..<steps {
                let x = min(step &* 16, width &- 16)
                var words = SIMD16<UInt32>.zero
                for (k, r) in [r0, r1, r2, r3].enumerated() {
                    let v = SIMD16<UInt32>(truncatingIfNeeded: src.unsafeLoadUnaligned(fromByteOffset: r &+ x, as: SIMD16<UInt8>.self))
                    words |= v &<< UInt32(truncatingIfNeeded: 8 &* k)
                }
                dst.storeBytes(of: words, toByteOffset: o &+ x &* 4, as: SIMD16<UInt32>.self)
            }
            var x = steps > 0 ? width : 0
            while x < width {
                let pixel = SIMD4<UInt8>(
                    src.unsafeLoadUnaligned(fromByteOffset: r0 &+ x, as: UInt8.self),
                    src.unsafeLoadUnaligned(fromByteOffset: r1 &+ x, as: UInt8.self),
                    src.unsafeLoadUnaligned(fromByteOffset: r2 &+ x, as: UInt8.self),
                    src.unsafeLoadUnaligned(fromByteOffset: r3 &+ x, as: UInt8.self))
                dst.storeBytes(of: pixel, toByteOffset: o &+ x &* 4, as: SIMD4<UInt8>.self)
                x &+= 1
            }
        }
        return out
    }

    /// `interleavedRows` as the 16-bit lanes the fast horizontal pass
    /// multiplies, each byte v as v << 7 (`FilterWeights.widen`): the input
    /// of `Image.horizontalPassWide`.
    ///
    /// Sixteen pixels per step: rows 4q and 4q + 1 make the low 32 bits of
    /// each pixel's lanes, rows 4q + 2 and 4q + 3 the high 32 bits (a byte
    /// shifted by 7 stays inside its 16-bit lane), and the two are
    /// interleaved word by word.
    static func interleavedLanes(_ source: [UInt8], width: Int, height: Int) -> [Int16] {
        precondition(width > 0 && height > 0 && source.count >= width * height, "plane smaller than \(width)x\(height)")
        let quads = (height + 3) / 4
        var lanes = [Int16](repeating: 0, count: quads * width * 4)
        let src = source.span.bytes
        var laneView = lanes.mutableSpan
        var dst = laneView.mutableBytes
        let steps = width >= 16 ? (width + 15) / 16 : 0
        for q in 0..<quads {
            let rows = SIMD4<Int>(4 * q, 4 * q + 1, 4 * q + 2, 4 * q + 3)
            let starts = pointwiseMin(rows, SIMD4(repeating: height - 1)) &* width
            let o = q * width * 8
            for step in 0..<steps {
                // The last step ends at the row's end; the pixels it repeats
                // come out the same.
                let x = min(step &* 16, width &- 16)
                var low = SIMD16<UInt32>.zero, high = SIMD16<UInt32>.zero
                for k in 0..<4 {
                    let v = SIMD16<UInt32>(truncatingIfNeeded: src.unsafeLoadUnaligned(fromByteOffset: starts[k] &+ x, as: SIMD16<UInt8>.self))
                    if k < 2 { low |= v &<< UInt32(truncatingIfNeeded: 16 &* k &+ 7) } else { high |= v &<< UInt32(truncatingIfNeeded: 16 &* (k &- 2) &+ 7) }
                }
                for m in 0..<4 {
                    let j = 4 &* m
                    let words = SIMD8<UInt32>(low[j], high[j], low[j &+ 1], high[j &+ 1], low[j &+ 2], high[j &+ 2], low[j &+ 3], high[j &+ 3])
                    dst.storeBytes(of: words, toByteOffset: o &+ (x &+ j) &* 8, as: SIMD8<UInt32>.self)
                }
            }
            if steps == 0 {
                for x in 0..<width {
                    for k in 0..<4 {
                        let v = Int16(src.unsafeLoadUnaligned(fromByteOffset: starts[k] &+ x, as: UInt8.self)) &<< 7
                        dst.storeBytes(of: v, toByteOffset: o &+ x &* 8 &+ k &* 2, as: Int16.self)
                    }
                }
            }
        }
        return lanes
    }

    /// The inverse of `interleavedRows`: the `width` x `height` plane whose
    /// rows 4q to 4q + 3 are the four channels of row q of `source`.
    static func deinterleavedRows(_ source: [UInt8], width: Int, height: Int) -> [UInt8] {
        let quads = (height + 3) / 4
        precondition(width > 0 && height > 0 && source.count >= quads * width * 4, "buffer smaller than \(quads) rows of \(width) pixels")
        var out = [UInt8](repeating: 0, count: width * height)
        let src = source.span.bytes
        var outView = out.mutableSpan
        var dst = outView.mutableBytes
        let steps = width >= 16 ? (width + 15) / 16 : 0
        for q in 0..<quads {
            let rows = min(4, height - 4 * q)
            let i = q * width * 4
            let o = 4 * q * width
            for step in 0..<steps {
                let x = min(step &* 16, width &- 16)
                let words = src.unsafeLoadUnaligned(fromByteOffset: i &+ x &* 4, as: SIMD16<UInt32>.self)
                @inline(__always)
                func row(_ k: Int, _ dst: inout MutableRawSpan) {
                    let bytes = SIMD16<UInt8>(truncatingIfNeeded: words &>> UInt32(truncatingIfNeeded: 8 &* k))
                    dst.storeBytes(of: bytes, toByteOffset: o &+ k &* width &+ x, as: SIMD16<UInt8>.self)
                }
                row(0, &dst)
                if rows == 4 {
                    row(1, &dst); row(2, &dst); row(3, &dst)
                } else {
                    for k in 1..<rows { row(k, &dst) }
                }
            }
            if steps == 0 {
                for x in 0..<width {
                    let pixel = src.unsafeLoadUnaligned(fromByteOffset: i &+ x &* 4, as: SIMD4<UInt8>.self)
                    for k in 0..<rows { dst.storeBytes(of: pixel[k], toByteOffset: o &+ k &* width &+ x, as: UInt8.self) }
                }
            }
        }
        return out
    }
}
