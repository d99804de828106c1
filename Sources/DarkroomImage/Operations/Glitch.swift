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
    public func glitched(seed: UInt64, amount: Double = 0.5) throws(ImageError) -> Image {
        guard amount.isFinite, amount >= 0, amount <= 1 else {
            throw ImageError(.invalidArgument, "glitch amount \(amount) must be between 0 and 1")
        }
        if amount == 0 { return self }
        let w = width, h = height
        var rng = SplitMix64(seed: seed)

        // 1. Channel shift distance.
        let shift = Int((Double(w) * amount * 0.02 * (0.5 + 0.5 * rng.unit())).rounded())

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

        // 3. Per-row channel permutation: 0 = none, 1...5 as documented.
        var permutations = [UInt8](repeating: 0, count: h)
        let swapCount = rng.below(1 + Int((4 * amount).rounded()))
        for _ in 0..<swapCount {
            let rows = band()
            let permutation = UInt8(1 + rng.below(5))
            for y in rows { permutations[y] = permutation }
        }

        var out = [UInt8](repeating: 255, count: pixels.count)
        let src = pixels.span
        // Whole-vector loads and stores go through the byte views: they are
        // bounds-checked, and any bit pattern is a valid SIMD of bytes.
        let srcBytes = src.bytes
        var outSpan = out.mutableSpan
        var dst = outSpan.mutableBytes
        let rowLen = w * 4
        let maskR = SIMD16<UInt8>(255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0)
        let maskG = SIMD16<UInt8>(0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0)
        let maskB = SIMD16<UInt8>(0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0)
        let maskX = SIMD16<UInt8>(0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255)
        for y in 0..<h {
            let rowBase = y * rowLen
            let offset = offsets[y]
            let permutation = permutations[y]
            // Output x reads source column x' = (x - offset) mod W: two runs of
            // consecutive columns, [0, offset) from W - offset and the rest from 0.
            for (outStart, srcStart, count) in [(0, w - offset, offset), (offset, 0, w - offset)] where count > 0 {
                var k = 0
                while k < count {
                    let sx = srcStart + k
                    let o = rowBase + (outStart + k) * 4
                    if permutation == 0 && k + 4 <= count && sx - shift >= 0 && sx + 3 + shift < w {
                        // Four pixels at once, none clamped at an edge.
                        let g = srcBytes.unsafeLoadUnaligned(fromByteOffset: rowBase + sx * 4, as: SIMD16<UInt8>.self)
                        let r = srcBytes.unsafeLoadUnaligned(fromByteOffset: rowBase + (sx + shift) * 4, as: SIMD16<UInt8>.self)
                        let b = srcBytes.unsafeLoadUnaligned(fromByteOffset: rowBase + (sx - shift) * 4, as: SIMD16<UInt8>.self)
                        let v = (r & maskR) | (g & maskG) | (b & maskB) | maskX
                        dst.storeBytes(of: v, toByteOffset: o, as: SIMD16<UInt8>.self)
                        k += 4
                        continue
                    }
                    let r = src[rowBase + min(sx + shift, w - 1) * 4]
                    let g = src[rowBase + sx * 4 + 1]
                    let b = src[rowBase + max(sx - shift, 0) * 4 + 2]
                    let px: SIMD4<UInt8>
                    switch permutation {
                    case 0: px = SIMD4(r, g, b, 255)
                    case 1: px = SIMD4(g, b, r, 255)
                    case 2: px = SIMD4(b, r, g, 255)
                    case 3: px = SIMD4(b, g, r, 255)
                    case 4: px = SIMD4(r, b, g, 255)
                    default: px = SIMD4(g, r, b, 255)
                    }
                    dst.storeBytes(of: px, toByteOffset: o, as: SIMD4<UInt8>.self)
                    k += 1
                }
            }
        }
        return Image(width: w, height: h, pixels: out)
    }
}
