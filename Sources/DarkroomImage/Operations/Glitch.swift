/// The seeded glitch effect.

/// SplitMix64 (Steele, Lea and Flood, 2014): a tiny, fast, well-mixed generator
/// whose output depends only on the seed, on every platform and Swift version.
struct SplitMix64: Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in [0, 1) from the top 53 bits.
    mutating func unit() -> Double {
        Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// A uniform integer in 0..<bound (bound > 0), by multiply-shift.
    mutating func below(_ bound: Int) -> Int {
        Int(truncatingIfNeeded: next().multipliedFullWidth(by: UInt64(bound)).high)
    }
}

extension Image {
    /// A deterministic "digital glitch": the same image, seed and amount always give
    /// the same bytes; a different seed gives a different picture.
    ///
    /// `amount` (0...1) scales every effect; 0 returns the image unchanged. All
    /// random draws come from `SplitMix64(seed)` in a fixed order, and every
    /// distance is a fraction of the image's width or height, so a scaled copy
    /// (a thumbnail) glitches the same way as the full-size image.
    ///
    /// Algorithm, with `W`, `H` the image size and `u` a fresh uniform draw in [0, 1):
    /// 1. **Channel shift.** `d = round(W × amount × 0.02 × (0.5 + 0.5u))` pixels:
    ///    red is sampled `d` pixels to the right (the red layer moves left) and blue
    ///    `d` pixels to the left (the blue layer moves right), clamped at the edges.
    ///    Green stays in place.
    /// 2. **Slice displacement.** `n = 2 + below(1 + round(10 × amount))` horizontal
    ///    bands. Each has top `floor(u × H)`, height `max(1, round(H × amount × 0.1 × u))`
    ///    (clipped at the bottom) and horizontal offset `round(W × amount × 0.25 × (2u − 1))`.
    ///    The rows of a band are rotated by that offset, wrapping around; where bands
    ///    overlap the offsets add up.
    /// 3. **Channel swaps.** `m = below(1 + round(4 × amount))` further bands, drawn
    ///    like those of step 2, each with one of five channel permutations
    ///    (GBR, BRG, BGR, RBG, GRB, chosen by `below(5)`). A later band replaces the
    ///    permutation of an earlier one where they overlap.
    ///
    /// Output pixel (x, y): take x' = (x − offset(y)) mod W, read R at
    /// min(x' + d, W − 1), G at x', B at max(x' − d, 0) from row y, then apply the
    /// row's permutation. One pass over the output.
    ///
    /// With `keepingAlpha` the fourth byte of each pixel is an alpha: it
    /// moves with its pixel's bands (step 2) and takes no part in the
    /// channel shift or the swaps, as `glitchDisplaced` moves it. Without,
    /// it is the padding, 255.
    ///
    /// Throws `ImageError.cancelled` once `cancellation` is set.
    public func glitched(
        seed: UInt64, amount: Double = 0.5, keepingAlpha: Bool = false, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        try glitchPass(seed: seed, amount: amount, cancellation: cancellation) { plan, y, row, dst in
            plan.composeRow(y, from: row, into: &dst)
            if keepingAlpha { plan.displaceRow(y, from: row, into: &dst, alphaOnly: true) }
        }
    }

    /// The glitch's slice displacement alone: each row rotated by its
    /// bands' offsets, whole pixels moved, with neither the channel shift
    /// nor the swaps. It is what `glitched` does to the picture's shape, and
    /// how a transparent image's alpha moves under it.
    ///
    /// Throws `ImageError.cancelled` once `cancellation` is set.
    public func glitchDisplaced(seed: UInt64, amount: Double = 0.5, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        try glitchPass(seed: seed, amount: amount, cancellation: cancellation) { plan, y, row, dst in
            plan.displaceRow(y, from: row, into: &dst, alphaOnly: false)
        }
    }

    /// A new image written a row at a time from the glitch's plan: `row`
    /// gets the plan, the row's index, the source row and the output.
    private func glitchPass(
        seed: UInt64, amount: Double, cancellation: CancellationFlag,
        _ row: (GlitchPlan, Int, Span<UInt8>, inout MutableRawSpan) -> Void
    ) throws(ImageError) -> Image {
        let plan = try GlitchPlan(width: width, height: height, seed: seed, amount: amount)
        if amount == 0 { return self }
        var out = [UInt8](repeating: 255, count: pixels.count, cancellation)
        try cancellation.check()
        let src = pixels.span
        var outSpan = out.mutableSpan
        var dst = outSpan.mutableBytes
        let rowLen = width * 4
        let poll = RowPoll(cancellation, workPerRow: rowLen)
        for y in 0..<height {
            if poll.stop(at: y) { throw ImageError.cancelled }
            row(plan, y, src.extracting(y * rowLen ..< (y + 1) * rowLen), &dst)
        }
        return Image(width: width, height: height, pixels: out)
    }

    /// `glitched(seed:amount:)` in place: the same bytes, without a second
    /// image-sized buffer (each row is read from a one-row copy).
    ///
    /// Throws `ImageError.cancelled` once `cancellation` is set, leaving the
    /// image partly glitched.
    public mutating func glitch(seed: UInt64, amount: Double = 0.5, cancellation: CancellationFlag = .never) throws(ImageError) {
        let plan = try GlitchPlan(width: width, height: height, seed: seed, amount: amount)
        if amount == 0 { return }
        let rowLen = width * 4, h = height
        var row = [UInt8](repeating: 0, count: rowLen)
        var span = pixels.mutableSpan
        var dst = span.mutableBytes
        let poll = RowPoll(cancellation, workPerRow: rowLen)
        for y in 0..<h {
            if poll.stop(at: y) { throw ImageError.cancelled }
            do {
                var copyView = row.mutableSpan
                var copy = copyView.mutableBytes
                let base = y * rowLen
                // The row is cut out once; the copy loop is bounded by both
                // lengths, so its loads and stores carry no checks.
                let from = dst.bytes.extracting(base ..< base + rowLen)
                let count = min(from.byteCount, copy.byteCount)
                var i = 0
                while i + 16 <= count {
                    copy.storeBytes(of: from.unsafeLoadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self),
                                    toByteOffset: i, as: SIMD16<UInt8>.self)
                    i += 16
                }
                while i + 4 <= count {
                    copy.storeBytes(of: from.unsafeLoadUnaligned(fromByteOffset: i, as: SIMD4<UInt8>.self),
                                    toByteOffset: i, as: SIMD4<UInt8>.self)
                    i += 4
                }
            }
            plan.composeRow(y, from: row.span, into: &dst)
        }
    }
}

/// The random draws of one glitch, resolved per row.
private struct GlitchPlan {
    let width: Int
    /// Channel shift distance in pixels.
    let shift: Int
    /// Per row: the rotation in 0..<width.
    var offsets: [Int]
    /// Per row: 0 = no permutation, 1...5 as documented on `glitched`.
    var permutations: [UInt8]

    /// Draws everything in the documented order. Throws on a bad amount.
    init(width w: Int, height h: Int, seed: UInt64, amount: Double) throws(ImageError) {
        guard amount.isFinite, amount >= 0, amount <= 1 else {
            throw ImageError(.invalidArgument, "glitch amount \(amount) must be between 0 and 1")
        }
        width = w
        var rng = SplitMix64(seed: seed)

        // 1. Channel shift distance.
        shift = Int((Double(w) * amount * 0.02 * (0.5 + 0.5 * rng.unit())).rounded())

        // 2. Per-row displacement, accumulated over bands.
        var offsets = [Int](repeating: 0, count: h)
        func band() -> Range<Int> {
            let top = min(h - 1, Int(rng.unit() * Double(h)))
            let height = max(1, Int((Double(h) * amount * 0.1 * rng.unit()).rounded()))
            return top ..< min(h, top + height)
        }
        let bandCount = 2 + rng.below(1 + Int((10 * amount).rounded()))
        for _ in 0..<bandCount {
            let rows = band()
            let offset = Int((Double(w) * amount * 0.25 * (2 * rng.unit() - 1)).rounded())
            for y in rows { offsets[y] += offset }
        }
        for y in 0..<h {
            offsets[y] = ((offsets[y] % w) + w) % w
        }

        // 3. Per-row channel permutation.
        var permutations = [UInt8](repeating: 0, count: h)
        let swapCount = rng.below(1 + Int((4 * amount).rounded()))
        for _ in 0..<swapCount {
            let rows = band()
            let permutation = UInt8(1 + rng.below(5))
            for y in rows { permutations[y] = permutation }
        }
        self.offsets = offsets
        self.permutations = permutations
    }

    /// Source channel (0 = R, 1 = G, 2 = B) of each output channel, per permutation.
    private static let sources: [(Int, Int, Int)] = [(0, 1, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0), (0, 2, 1), (1, 0, 2)]

    /// Writes output row `y` into `dst` from `row`, the source row's bytes,
    /// moved by the row's slice displacement alone: output x reads
    /// x' = (x - offset) mod W. Whole pixels, or with `alphaOnly` each
    /// pixel's fourth byte (the rest of the row left as it is).
    func displaceRow(_ y: Int, from row: Span<UInt8>, into dst: inout MutableRawSpan, alphaOnly: Bool) {
        let w = width, offset = offsets[y], base = y * w * 4, bytes = row.bytes
        for x in 0..<w {
            let from = (x >= offset ? x - offset : x - offset + w) * 4
            if alphaOnly {
                dst.storeBytes(of: row[from + 3], toByteOffset: base + x * 4 + 3, as: UInt8.self)
            } else {
                dst.storeBytes(of: bytes.unsafeLoadUnaligned(fromByteOffset: from, as: UInt32.self), toByteOffset: base + x * 4, as: UInt32.self)
            }
        }
    }

    /// Writes output row `y` into `dst` from `row`, the source row's bytes.
    ///
    /// Output x reads source column x' = (x - offset) mod W: two runs of
    /// consecutive columns, [0, offset) from W - offset and the rest from 0.
    /// Within a run, columns whose shifted reads stay inside the row go four at a
    /// time: each pixel is one 32-bit lane (R in the low byte), and an output
    /// channel is its source channel's lane shifted into place and masked.
    func composeRow(_ y: Int, from row: Span<UInt8>, into dst: inout MutableRawSpan) {
        let w = width, d = shift
        let offset = offsets[y]
        let (sr, sg, sb) = GlitchPlan.sources[Int(permutations[y])]
        let bytes = row.bytes
        let rowBase = y * w * 4
        // Per output channel: the left and right lane shifts (one of them zero)
        // that move the source channel's byte into place.
        func shifts(_ from: Int, _ to: Int) -> (UInt32, UInt32) {
            to >= from ? (UInt32((to - from) * 8), 0) : (0, UInt32((from - to) * 8))
        }
        let (lR, rR) = shifts(sr, 0), (lG, rG) = shifts(sg, 1), (lB, rB) = shifts(sb, 2)
        let maskR = SIMD4<UInt32>(repeating: 0xFF), maskG = SIMD4<UInt32>(repeating: 0xFF00)
        let maskB = SIMD4<UInt32>(repeating: 0xFF_0000), opaque = SIMD4<UInt32>(repeating: 0xFF00_0000)
        // Column of each output channel's read relative to x': R at +d, G in
        // place, B at -d, following the channel it comes from.
        func delta(_ c: Int) -> Int { c == 0 ? d : c == 1 ? 0 : -d }
        let dR = delta(sr) * 4, dG = delta(sg) * 4, dB = delta(sb) * 4
        for (outStart, srcStart, count) in [(0, w - offset, offset), (offset, 0, w - offset)] where count > 0 {
            // Columns sx with sx - d >= 0 and sx + 3 + d < w take the vector path.
            let vectorFrom = min(count, max(0, d - srcStart))
            let vectorTo = max(vectorFrom, min(count, w - 3 - d - srcStart))
            var k = 0
            @inline(__always)
            func scalar(_ k: Int) {
                let sx = srcStart + k
                let channels = (row[min(sx + d, w - 1) * 4], row[sx * 4 + 1], row[max(sx - d, 0) * 4 + 2])
                func pick(_ c: Int) -> UInt8 { c == 0 ? channels.0 : c == 1 ? channels.1 : channels.2 }
                dst.storeBytes(of: SIMD4<UInt8>(pick(sr), pick(sg), pick(sb), 255),
                               toByteOffset: rowBase + (outStart + k) * 4, as: SIMD4<UInt8>.self)
            }
            while k < vectorFrom { scalar(k); k += 1 }
            // Whole vectors through the byte views: bounds-checked, and every bit
            // pattern is a valid SIMD of integers.
            // The run's three source ranges and its output are each cut out
            // once, with the run's length, so the loop's loads and stores need
            // no checks of their own.
            @inline(__always)
            func vectors(_ combine: (SIMD4<UInt32>, SIMD4<UInt32>, SIMD4<UInt32>) -> SIMD4<UInt32>) {
                guard k < vectorTo else { return }
                let n = (vectorTo - k) / 4 * 16
                let p = (srcStart + k) * 4
                let o = rowBase + (outStart + k) * 4
                let rs = bytes.extracting(p + dR ..< p + dR + n)
                let gs = bytes.extracting(p + dG ..< p + dG + n)
                let bs = bytes.extracting(p + dB ..< p + dB + n)
                var out = dst.extracting(o ..< o + n)
                var j = 0
                while j + 16 <= n {
                    let vR = rs.unsafeLoadUnaligned(fromByteOffset: j, as: SIMD4<UInt32>.self)
                    let vG = gs.unsafeLoadUnaligned(fromByteOffset: j, as: SIMD4<UInt32>.self)
                    let vB = bs.unsafeLoadUnaligned(fromByteOffset: j, as: SIMD4<UInt32>.self)
                    out.storeBytes(of: combine(vR, vG, vB) | opaque, toByteOffset: j, as: SIMD4<UInt32>.self)
                    j += 16
                }
                k += n / 4
            }
            if lR | rR | lG | rG | lB | rB == 0 {
                // No permutation (most rows): masks only.
                vectors { r, g, b in (r & maskR) | (g & maskG) | (b & maskB) }
            } else {
                vectors { r, g, b in
                    (((r &<< lR) &>> rR) & maskR) | (((g &<< lG) &>> rG) & maskG) | (((b &<< lB) &>> rB) & maskB)
                }
            }
            while k < count { scalar(k); k += 1 }
        }
    }
}
