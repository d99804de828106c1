/// Colour filters. Each is one pass over the pixels; the fourth byte (the
/// padding, or an `AlphaImage`'s alpha) stays as it is. Each takes a
/// `CancellationFlag` too (given, or `.never`), and throws
/// `ImageError.cancelled` once it is set.
///
/// Each consumes its image and maps the pixels where they are: a job's
/// image, which nothing else holds, is filtered without a second buffer;
/// one that is shared is copied first, as any mutation of it is.

extension Image {
    /// Grey from Rec. 601 luma: Y = 0.299 R + 0.587 G + 0.114 B (the weights
    /// JPEG's own YCbCr uses), written to all three channels.
    public consuming func grayscale() -> Image {
        (consume self).grayscaled(.never)
    }

    /// `grayscale()`, stopped once `cancellation` is set.
    public consuming func grayscale(cancellation: CancellationFlag) throws(ImageError) -> Image {
        try cancellation.checked((consume self).grayscaled(cancellation))
    }

    private consuming func grayscaled(_ cancel: CancellationFlag) -> Image {
        (consume self).mapPixels(cancel) { r, g, b in
            let y = UInt8(truncatingIfNeeded: Image.luma601(r, g, b))
            return (y, y, y)
        }
    }

    /// Whether every pixel is gray (R = G = B): the check `GrayImage(exactly:)`
    /// makes as it copies the luma plane out.
    public var isGray: Bool { GrayImage(exactly: self) != nil }

    /// The classic sepia tone matrix (rows for R, G, B; saturating at 255):
    /// R' = .393R + .769G + .189B, G' = .349R + .686G + .168B, B' = .272R + .534G + .131B.
    public consuming func sepia() -> Image {
        (consume self).sepiaToned(.never)
    }

    /// `sepia()`, stopped once `cancellation` is set.
    public consuming func sepia(cancellation: CancellationFlag) throws(ImageError) -> Image {
        try cancellation.checked((consume self).sepiaToned(cancellation))
    }

    private consuming func sepiaToned(_ cancel: CancellationFlag) -> Image {
        (consume self).mapPixels(cancel) { r, g, b in
            // 16-bit fixed point coefficients (x 65536), rounded.
            let nr = (25756 * r + 50397 * g + 12386 * b + 32768) >> 16
            let ng = (22872 * r + 44958 * g + 11010 * b + 32768) >> 16
            let nb = (17826 * r + 34996 * g + 8585 * b + 32768) >> 16
            return (UInt8(min(nr, 255)), UInt8(min(ng, 255)), UInt8(min(nb, 255)))
        }
    }

    /// Every channel replaced by 255 minus itself.
    public consuming func inverted() -> Image {
        (consume self).mapChannels(table: Image.inversion, .never)
    }

    /// `inverted()`, stopped once `cancellation` is set.
    public consuming func inverted(cancellation: CancellationFlag) throws(ImageError) -> Image {
        try cancellation.checked((consume self).mapChannels(table: Image.inversion, cancellation))
    }

    private static var inversion: [UInt8] { (0...255).map { UInt8(255 - $0) } }

    /// Multiplies every channel by `factor` (1 leaves the image unchanged, 0 makes it
    /// black). `factor` must be finite and in 0...100.
    public consuming func adjustingBrightness(_ factor: Double, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        try Image.checkFactor(factor, "brightness")
        return try cancellation.checked((consume self).mapChannels(table: (0...255).map { Image.clampToByte(Double($0) * factor) }, cancellation))
    }

    /// Scales every channel's distance from mid-grey 128 by `factor` (1 leaves the
    /// image unchanged, 0 makes it flat grey). `factor` must be finite and in 0...100.
    public consuming func adjustingContrast(_ factor: Double, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        try Image.checkFactor(factor, "contrast")
        return try cancellation.checked(
            (consume self).mapChannels(table: (0...255).map { Image.clampToByte((Double($0) - 128) * factor + 128) }, cancellation))
    }

    /// Scales each pixel's distance from its Rec. 601 grey by `factor` (1 leaves the
    /// image unchanged, 0 makes it grey, above 1 more vivid). `factor` must be
    /// finite and in 0...100.
    public consuming func adjustingSaturation(_ factor: Double, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        try Image.checkFactor(factor, "saturation")
        if factor == 1 { return self }
        let f = Int((factor * 4096).rounded())  // 12-bit fixed point
        return try cancellation.checked((consume self).mapPixels(cancellation) { r, g, b in
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
    consuming func mapChannels(table: [UInt8], _ cancel: CancellationFlag) -> Image {
        (consume self).mapChunks(cancel) { p in
            let lut = table.span
            var i = 0
            while i + 3 < p.count {
                p[i] = lut[Int(p[i])]
                p[i + 1] = lut[Int(p[i + 1])]
                p[i + 2] = lut[Int(p[i + 2])]
                i += 4
            }
        }
    }

    /// Applies `transform` to every pixel's (R, G, B). Unfinished if `cancel`
    /// is set while it runs.
    @inline(__always)
    consuming func mapPixels(_ cancel: CancellationFlag, _ transform: (Int, Int, Int) -> (UInt8, UInt8, UInt8)) -> Image {
        (consume self).mapChunks(cancel) { p in
            var i = 0
            while i + 3 < p.count {
                let (r, g, b) = transform(Int(p[i]), Int(p[i + 1]), Int(p[i + 2]))
                p[i] = r
                p[i + 1] = g
                p[i + 2] = b
                i += 4
            }
        }
    }

    /// The pass both maps make: each pixel is rewritten where it is, a
    /// megabyte between two looks at the flag (one trip through memory, no
    /// fresh pages). `body` maps one megabyte, given as a span of just that:
    /// bounded by its own length, its loop compiles as tightly as a loop
    /// over the whole buffer.
    @inline(__always)
    private consuming func mapChunks(_ cancel: CancellationFlag, _ body: (inout MutableSpan<UInt8>) -> Void) -> Image {
        var image = consume self
        do {
            var whole = image.pixels.mutableSpan
            var start = 0
            while start < whole.count {
                if cancel.poll() { break }
                let end = min(whole.count, start + Image.bytesPerPoll)
                var chunk = whole.extracting(start ..< end)
                body(&chunk)
                start = end
            }
        }
        return image
    }

    /// A buffer of `count` bytes for a pass that writes every one of them
    /// before anything reads it (or stops, cancelled, and is thrown away):
    /// no pass of its own to fill it, and no page touched before the pass
    /// gets there.
    static func unfilled(count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
    }
}
