/// Colour filters. Each is one pass over the pixels; the padding byte stays 255.
/// Each takes a `CancellationFlag` too (given, or `.never`), and throws
/// `ImageError.cancelled` once it is set.

extension Image {
    /// Grey from Rec. 601 luma: Y = 0.299 R + 0.587 G + 0.114 B (the weights
    /// JPEG's own YCbCr uses), written to all three channels.
    public func grayscale() -> Image {
        grayscaled(.never)
    }

    /// `grayscale()`, stopped once `cancellation` is set.
    public func grayscale(cancellation: CancellationFlag) throws(ImageError) -> Image {
        try cancellation.checked(grayscaled(cancellation))
    }

    private func grayscaled(_ cancel: CancellationFlag) -> Image {
        mapPixels(cancel) { r, g, b in
            let y = UInt8(truncatingIfNeeded: Image.luma601(r, g, b))
            return (y, y, y)
        }
    }

    /// Whether every pixel is gray (R = G = B): the check `GrayImage(exactly:)`
    /// makes as it copies the luma plane out.
    public var isGray: Bool { GrayImage(exactly: self) != nil }

    /// The classic sepia tone matrix (rows for R, G, B; saturating at 255):
    /// R' = .393R + .769G + .189B, G' = .349R + .686G + .168B, B' = .272R + .534G + .131B.
    public func sepia() -> Image {
        sepiaToned(.never)
    }

    /// `sepia()`, stopped once `cancellation` is set.
    public func sepia(cancellation: CancellationFlag) throws(ImageError) -> Image {
        try cancellation.checked(sepiaToned(cancellation))
    }

    private func sepiaToned(_ cancel: CancellationFlag) -> Image {
        mapPixels(cancel) { r, g, b in
            // 16-bit fixed point coefficients (x 65536), rounded.
            let nr = (25756 * r + 50397 * g + 12386 * b + 32768) >> 16
            let ng = (22872 * r + 44958 * g + 11010 * b + 32768) >> 16
            let nb = (17826 * r + 34996 * g + 8585 * b + 32768) >> 16
            return (UInt8(min(nr, 255)), UInt8(min(ng, 255)), UInt8(min(nb, 255)))
        }
    }

    /// Every channel replaced by 255 minus itself.
    public func inverted() -> Image {
        mapChannels(table: Image.inversion, .never)
    }

    /// `inverted()`, stopped once `cancellation` is set.
    public func inverted(cancellation: CancellationFlag) throws(ImageError) -> Image {
        try cancellation.checked(mapChannels(table: Image.inversion, cancellation))
    }

    private static var inversion: [UInt8] { (0...255).map { UInt8(255 - $0) } }

    /// Multiplies every channel by `factor` (1 leaves the image unchanged, 0 makes it
    /// black). `factor` must be finite and in 0...100.
    public func adjustingBrightness(_ factor: Double, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        try Image.checkFactor(factor, "brightness")
        return try cancellation.checked(mapChannels(table: (0...255).map { Image.clampToByte(Double($0) * factor) }, cancellation))
    }

    /// Scales every channel's distance from mid-grey 128 by `factor` (1 leaves the
    /// image unchanged, 0 makes it flat grey). `factor` must be finite and in 0...100.
    public func adjustingContrast(_ factor: Double, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        try Image.checkFactor(factor, "contrast")
        return try cancellation.checked(
            mapChannels(table: (0...255).map { Image.clampToByte((Double($0) - 128) * factor + 128) }, cancellation))
    }

    /// Scales each pixel's distance from its Rec. 601 grey by `factor` (1 leaves the
    /// image unchanged, 0 makes it grey, above 1 more vivid). `factor` must be
    /// finite and in 0...100.
    public func adjustingSaturation(_ factor: Double, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        try Image.checkFactor(factor, "saturation")
        if factor == 1 { return self }
        let f = Int((factor * 4096).rounded())  // 12-bit fixed point
        return try cancellation.checked(mapPixels(cancellation) { r, g, b in
            let y = Image.luma601(r, g, b)
            func channel(_ c: Int) -> UInt8 {
                let v = y + (((c - y) * f + 2048) >> 12)
                return UInt8(min(max(v, 0), 255))
            }
            return (channel(r), channel(g), channel(b))
        })
    }

    // MARK: - Helpers

    static func checkFactor(_ factor: Double, _ name: String) throws(ImageError) {
        guard factor.isFinite, factor >= 0, factor <= 100 else {
            throw ImageError(.invalidArgument, "\(name) factor \(factor) must be between 0 and 100")
        }
    }

    @inline(__always)
    static func luma601(_ r: Int, _ g: Int, _ b: Int) -> Int {
        (19595 * r + 38470 * g + 7471 * b + 32768) >> 16
    }

    static func clampToByte(_ v: Double) -> UInt8 {
        UInt8(min(max(v.rounded(), 0), 255))
    }

    /// Bytes between two looks at a cancellation flag in the passes below:
    /// whole pixels.
    static let bytesPerPoll = CancellationFlag.workPerPoll

    /// Applies a 256-entry table to R, G and B. Unfinished if `cancel` is set
    /// while it runs.
    func mapChannels(table: [UInt8], _ cancel: CancellationFlag) -> Image {
        mapChunks(cancel) { dst, from in
            let lut = table.span
            var i = 0
            while i + 3 < min(dst.count, from.count) {
                dst[i] = lut[Int(from[i])]
                dst[i + 1] = lut[Int(from[i + 1])]
                dst[i + 2] = lut[Int(from[i + 2])]
                dst[i + 3] = from[i + 3]
                i += 4
            }
        }
    }

    /// Applies `transform` to every pixel's (R, G, B). Unfinished if `cancel`
    /// is set while it runs.
    @inline(__always)
    func mapPixels(_ cancel: CancellationFlag, _ transform: (Int, Int, Int) -> (UInt8, UInt8, UInt8)) -> Image {
        mapChunks(cancel) { dst, from in
            var i = 0
            while i + 3 < min(dst.count, from.count) {
                let (r, g, b) = transform(Int(from[i]), Int(from[i + 1]), Int(from[i + 2]))
                dst[i] = r
                dst[i + 1] = g
                dst[i + 2] = b
                dst[i + 3] = from[i + 3]
                i += 4
            }
        }
    }

    /// The pass both maps make: each pixel is read from the source and
    /// written to a new, unfilled buffer (one trip through memory; copying
    /// the source first and mapping the copy in place took two), a megabyte
    /// between two looks at the flag. `body` maps one megabyte, given as
    /// spans of just that: bounded by their own lengths, its loop compiles
    /// as tightly as a loop over the whole buffer.
    @inline(__always)
    private func mapChunks(_ cancel: CancellationFlag, _ body: (inout MutableSpan<UInt8>, Span<UInt8>) -> Void) -> Image {
        var out = Image.unfilled(count: pixels.count)
        let src = pixels.span
        var whole = out.mutableSpan
        var start = 0
        while start < whole.count {
            if cancel.poll() { break }
            let end = min(whole.count, start + Image.bytesPerPoll)
            var dst = whole.extracting(start ..< end)
            body(&dst, src.extracting(start ..< end))
            start = end
        }
        return Image(width: width, height: height, pixels: out)
    }

    /// A buffer of `count` bytes for a pass that writes every one of them
    /// before anything reads it (or stops, cancelled, and is thrown away):
    /// no pass of its own to fill it, and no page touched before the pass
    /// gets there.
    static func unfilled(count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
    }
}
