import Foundation

/// Scaling: sizes for the fit/fill/force modes and the separable resampler behind
/// `scaled`, `resized` and `thumbnail`.

/// The filter used to compute each output pixel from the source.
public enum ResampleKernel: String, Sendable, CaseIterable {
    /// Windowed sinc with three lobes: sharp, little aliasing. The default.
    case lanczos3
    /// Triangle filter (widened when shrinking, so it averages like an area filter).
    case bilinear
    /// The source pixel under the output pixel's centre; no blending.
    case nearest
}

/// How `scaled(to:mode:)` fits the image to a box.
public enum ScaleMode: String, Sendable, CaseIterable {
    /// The largest size inside the box that keeps the aspect ratio.
    case fit
    /// The smallest size covering the box that keeps the aspect ratio (nothing is cropped).
    case fill
    /// Exactly the box; the aspect ratio may change.
    case force
}

extension Image {
    /// The largest side any operation will produce (the JPEG limit).
    public static let maxOperationSide = 65_535
    /// The largest pixel count any operation will produce (256 MP, 1 GiB of RGBX).
    public static let maxOperationPixels = 1 << 28

    /// The size `scaled(to:mode:)` would produce.
    ///
    /// - fit: the largest size inside the box keeping the aspect ratio;
    /// - fill: the smallest size covering the box keeping the aspect ratio (no crop);
    /// - force: the box itself.
    ///
    /// The side that is not pinned to the box is rounded to the nearest pixel, and
    /// every side is at least 1.
    public static func scaledSize(of source: Size, to box: Size, mode: ScaleMode) -> Size {
        let sw = max(1, source.width), sh = max(1, source.height)
        let bw = max(1, box.width), bh = max(1, box.height)
        // Compare aspect ratios exactly: sw/sh >= bw/bh  <=>  sw*bh >= sh*bw.
        let sourceIsWider = sw.multipliedReportingOverflow(by: bh).partialValue
            >= sh.multipliedReportingOverflow(by: bw).partialValue
        func rounded(_ a: Int, _ b: Int, _ c: Int) -> Int {
            // round(a * b / c) in floating point: sizes are far below 2^53.
            max(1, Int((Double(a) * Double(b) / Double(c)).rounded()))
        }
        switch mode {
        case .force:
            return Size(width: bw, height: bh)
        case .fit:
            return sourceIsWider
                ? Size(width: bw, height: rounded(sh, bw, sw))
                : Size(width: rounded(sw, bh, sh), height: bh)
        case .fill:
            return sourceIsWider
                ? Size(width: rounded(sw, bh, sh), height: bh)
                : Size(width: bw, height: rounded(sh, bw, sw))
        }
    }

    /// Scales the image into, onto or exactly to `box` (see `ScaleMode`).
    public func scaled(to box: Size, mode: ScaleMode = .fit, kernel: ResampleKernel = .lanczos3) throws(ImageError) -> Image {
        guard box.width > 0, box.height > 0 else {
            throw ImageError(.invalidArgument, "scale box \(box) must have positive sides")
        }
        let target = Image.scaledSize(of: Size(width: width, height: height), to: box, mode: mode)
        return try resized(to: target, kernel: kernel)
    }

    /// Resamples the image to exactly `size`, ignoring the aspect ratio.
    public func resized(to size: Size, kernel: ResampleKernel = .lanczos3) throws(ImageError) -> Image {
        try Image.checkOutputSize(size, operation: "resize")
        if size.width == width && size.height == height { return self }
        switch kernel {
        case .nearest:
            return resampledNearest(to: size)
        case .lanczos3, .bilinear:
            return resampledSeparable(to: size, kernel: kernel)
        }
    }

    /// Rejects output sizes that are empty or too big to allocate sensibly.
    static func checkOutputSize(_ size: Size, operation: String) throws(ImageError) {
        guard size.width > 0, size.height > 0 else {
            throw ImageError(.invalidArgument, "\(operation) size \(size) must have positive sides")
        }
        guard size.width <= maxOperationSide, size.height <= maxOperationSide else {
            throw ImageError(.invalidArgument, "\(operation) size \(size) exceeds the maximum side of \(maxOperationSide)")
        }
        guard size.width * size.height <= maxOperationPixels else {
            throw ImageError(.invalidArgument, "\(operation) size \(size) exceeds the maximum of \(maxOperationPixels) pixels")
        }
    }

    // MARK: - Nearest

    func resampledNearest(to size: Size) -> Image {
        let outW = size.width, outH = size.height
        // Source column of each output column: the pixel under the output centre.
        var columns = [Int](repeating: 0, count: outW)
        for x in 0..<outW {
            let sx = Int((Double(x) + 0.5) * Double(width) / Double(outW))
            columns[x] = min(max(sx, 0), width - 1) * 4
        }
        var out = [UInt8](repeating: 255, count: outW * outH * 4)
        let src = pixels.span
        let cols = columns.span
        var dst = out.mutableSpan
        let rowLen = width * 4
        for y in 0..<outH {
            let sy = min(max(Int((Double(y) + 0.5) * Double(height) / Double(outH)), 0), height - 1)
            let row = src.extracting(sy * rowLen ..< (sy + 1) * rowLen)
            var o = y * outW * 4
            for x in 0..<cols.count {
                let s = cols[x]
                dst[o] = row[s]
                dst[o + 1] = row[s + 1]
                dst[o + 2] = row[s + 2]
                o += 4
            }
        }
        return Image(width: outW, height: outH, pixels: out)
    }

    // MARK: - Separable convolution

    func resampledSeparable(to size: Size, kernel: ResampleKernel) -> Image {
        var source = self
        // Big shrinks: average whole blocks first, leaving at least a factor of 2
        // for the real kernel (the same rule libvips follows). Box averaging is
        // an order of magnitude cheaper per source pixel than a 6-tap-per-axis
        // lanczos widened by the shrink factor.
        let factorX = max(1, width / (2 * size.width))
        let factorY = max(1, height / (2 * size.height))
        if factorX >= 2 || factorY >= 2 {
            source = boxReduced(factorX: factorX, factorY: factorY)
        }
        let hWeights = FilterWeights(resampling: source.width, to: size.width, kernel: kernel)
        let vWeights = FilterWeights(resampling: source.height, to: size.height, kernel: kernel)
        return source.convolved(horizontal: hWeights, vertical: vWeights)
    }

    /// Applies a horizontal then a vertical filter (or the reverse, whichever
    /// needs fewer multiply-adds). Either may be nil to skip that axis.
    func convolved(horizontal: FilterWeights?, vertical: FilterWeights?) -> Image {
        let outW = horizontal?.outCount ?? width
        let outH = vertical?.outCount ?? height
        guard let h = horizontal else {
            guard let v = vertical else { return self }
            return Image(width: width, height: outH, pixels: Image.verticalPass(pixels, width: width, weights: v))
        }
        guard let v = vertical else {
            return Image(width: outW, height: height, pixels: Image.horizontalPass(pixels, width: width, height: height, weights: h))
        }
        // Per output sample the horizontal pass costs roughly twice the vertical
        // one (it gathers whole pixels instead of streaming whole rows).
        let horizontalFirst = 2 * outW * height * h.taps + outW * outH * v.taps
        let verticalFirst = width * outH * v.taps + 2 * outW * outH * h.taps
        if horizontalFirst <= verticalFirst {
            let mid = Image.horizontalPass(pixels, width: width, height: height, weights: h)
            return Image(width: outW, height: outH, pixels: Image.verticalPass(mid, width: outW, weights: v))
        } else {
            let mid = Image.verticalPass(pixels, width: width, weights: v)
            return Image(width: outW, height: outH, pixels: Image.horizontalPass(mid, width: width, height: outH, weights: h))
        }
    }

    /// Filters every row: output pixel i of a row is the weighted sum of `taps`
    /// whole RGBX pixels starting at `starts[i]`.
    static func horizontalPass(_ source: [UInt8], width: Int, height: Int, weights fw: FilterWeights) -> [UInt8] {
        let outW = fw.outCount
        let taps = fw.taps
        var out = [UInt8](repeating: 255, count: outW * height * 4)
        let src = source.span
        let starts = fw.starts.span
        let weights = fw.weights.span
        var dst = out.mutableSpan
        let rowLen = width * 4
        let rounding = SIMD4<Int32>(repeating: 1 << (FilterWeights.fractionBits - 1))
        let lower = SIMD4<Int32>(repeating: 0)
        let upper = SIMD4<Int32>(repeating: 255)
        for y in 0..<height {
            let row = src.extracting(y * rowLen ..< (y + 1) * rowLen)
            var o = y * outW * 4
            var wi = 0
            for i in 0..<starts.count {
                var p = starts[i] &* 4
                var acc = rounding
                for _ in 0..<taps {
                    let w = Int32(weights[wi])
                    let px = SIMD4<Int32>(Int32(row[p]), Int32(row[p + 1]), Int32(row[p + 2]), Int32(row[p + 3]))
                    acc &+= px &* w
                    p &+= 4
                    wi &+= 1
                }
                acc = (acc &>> Int32(FilterWeights.fractionBits)).clamped(lowerBound: lower, upperBound: upper)
                dst[o] = UInt8(truncatingIfNeeded: acc[0])
                dst[o + 1] = UInt8(truncatingIfNeeded: acc[1])
                dst[o + 2] = UInt8(truncatingIfNeeded: acc[2])
                o &+= 4
            }
        }
        return out
    }

    /// Filters every column: output row i is the weighted sum of `taps` whole
    /// source rows starting at row `starts[i]`, computed a row at a time so the
    /// inner loop streams contiguous bytes.
    static func verticalPass(_ source: [UInt8], width: Int, weights fw: FilterWeights) -> [UInt8] {
        let outH = fw.outCount
        let taps = fw.taps
        let rowLen = width * 4
        var out = [UInt8](repeating: 255, count: rowLen * outH)
        var acc = [Int32](repeating: 0, count: rowLen)
        let src = source.span
        let rounding = Int32(1 << (FilterWeights.fractionBits - 1))
        for i in 0..<outH {
            let start = fw.starts[i]
            do {
                var a = acc.mutableSpan
                for x in 0..<a.count { a[x] = rounding }
                for k in 0..<taps {
                    let w = Int32(fw.weights[i * taps + k])
                    let row = src.extracting((start + k) * rowLen ..< (start + k + 1) * rowLen)
                    for x in 0..<min(a.count, row.count) {
                        a[x] &+= Int32(row[x]) &* w
                    }
                }
            }
            do {
                let a = acc.span
                var all = out.mutableSpan
                var dst = all.extracting(i * rowLen ..< (i + 1) * rowLen)
                for x in 0..<min(a.count, dst.count) {
                    let v = a[x] &>> Int32(FilterWeights.fractionBits)
                    dst[x] = UInt8(truncatingIfNeeded: min(max(v, 0), 255))
                }
            }
        }
        return out
    }

    // MARK: - Box reduce

    /// Averages blocks of `factorX` x `factorY` pixels into one. Blocks at the
    /// right and bottom edges may be smaller and are averaged over what they hold.
    func boxReduced(factorX: Int, factorY: Int) -> Image {
        let outW = (width + factorX - 1) / factorX
        let outH = (height + factorY - 1) / factorY
        let rowLen = width * 4
        var out = [UInt8](repeating: 255, count: outW * outH * 4)
        var sums = [UInt32](repeating: 0, count: rowLen)
        let src = pixels.span
        for oy in 0..<outH {
            let y0 = oy * factorY
            let y1 = min(y0 + factorY, height)
            do {
                var s = sums.mutableSpan
                for x in 0..<s.count { s[x] = 0 }
                for y in y0..<y1 {
                    let row = src.extracting(y * rowLen ..< (y + 1) * rowLen)
                    for x in 0..<min(s.count, row.count) { s[x] &+= UInt32(row[x]) }
                }
            }
            let s = sums.span
            var dst = out.mutableSpan
            let rows = y1 - y0
            for ox in 0..<outW {
                let x0 = ox * factorX
                let x1 = min(x0 + factorX, width)
                var r: UInt32 = 0, g: UInt32 = 0, b: UInt32 = 0
                for x in x0..<x1 {
                    r &+= s[x * 4]
                    g &+= s[x * 4 + 1]
                    b &+= s[x * 4 + 2]
                }
                let count = UInt32(rows * (x1 - x0))
                let half = count / 2
                let o = (oy * outW + ox) * 4
                dst[o] = UInt8(truncatingIfNeeded: (r + half) / count)
                dst[o + 1] = UInt8(truncatingIfNeeded: (g + half) / count)
                dst[o + 2] = UInt8(truncatingIfNeeded: (b + half) / count)
            }
        }
        return Image(width: outW, height: outH, pixels: out)
    }
}

/// Fixed-point filter weights for one axis, computed once per operation.
///
/// Every output sample reads exactly `taps` consecutive input samples starting at
/// `starts[i]` (windows near the edges are shifted inward and padded with zero
/// weights), so the inner loops have a fixed trip count. Each output's weights sum
/// to exactly `1 << fractionBits`, so a constant image stays constant.
struct FilterWeights: Sendable {
    static let fractionBits = 14
    static let one = 1 << fractionBits

    let outCount: Int
    let taps: Int
    var starts: [Int]
    var weights: [Int16]

    /// Weights for resampling `inCount` samples to `outCount` with `kernel`.
    init(resampling inCount: Int, to outCount: Int, kernel: ResampleKernel) {
        let ratio = Double(inCount) / Double(outCount)
        let scale = max(ratio, 1)  // widen the filter when shrinking
        let radius: Double
        let function: @Sendable (Double) -> Double
        switch kernel {
        case .lanczos3:
            radius = 3
            function = FilterWeights.lanczos3
        case .bilinear, .nearest:
            radius = 1
            function = { x in max(0, 1 - abs(x)) }
        }
        self.init(inCount: inCount, outCount: outCount, radius: radius * scale) { i in
            (Double(i) + 0.5) * ratio
        } weight: { distance in
            function(distance / scale)
        }
    }

    /// Weights for a same-size convolution with a symmetric kernel of the given
    /// radius (in samples); `weight` receives the distance from the centre.
    init(convolving count: Int, radius: Double, weight: (Double) -> Double) {
        self.init(inCount: count, outCount: count, radius: radius, center: { Double($0) + 0.5 }, weight: weight)
    }

    init(inCount: Int, outCount: Int, radius: Double, center: (Int) -> Double, weight: (Double) -> Double) {
        self.outCount = outCount
        var windows = [(lo: Int, hi: Int, center: Double)]()
        windows.reserveCapacity(outCount)
        var maxTaps = 1
        for i in 0..<outCount {
            let c = center(i)
            let lo = max(0, Int((c - radius).rounded(.down)))
            let hi = min(inCount, Int((c + radius).rounded(.up)))
            let clampedLo = min(lo, inCount - 1)
            let clampedHi = max(hi, clampedLo + 1)
            windows.append((clampedLo, clampedHi, c))
            maxTaps = max(maxTaps, clampedHi - clampedLo)
        }
        let taps = min(maxTaps, inCount)
        self.taps = taps
        var starts = [Int](repeating: 0, count: outCount)
        var weights = [Int16](repeating: 0, count: outCount * taps)
        var real = [Double](repeating: 0, count: taps)
        for i in 0..<outCount {
            let (lo, hi, c) = windows[i]
            let start = min(lo, inCount - taps)
            starts[i] = start
            var sum = 0.0
            for k in 0..<taps {
                let j = start + k
                let w = (j >= lo && j < hi) ? weight(Double(j) + 0.5 - c) : 0
                real[k] = w
                sum += w
            }
            let base = i * taps
            if abs(sum) < 1e-9 {
                // Degenerate window: take the nearest sample.
                let nearest = min(max(Int(c), lo), hi - 1)
                weights[base + nearest - start] = Int16(FilterWeights.one)
                continue
            }
            var total = 0
            var largest = 0
            for k in 0..<taps {
                let q = Int((real[k] / sum * Double(FilterWeights.one)).rounded())
                weights[base + k] = Int16(clamping: q)
                total += Int(weights[base + k])
                if abs(real[k]) > abs(real[largest]) { largest = k }
            }
            // Put the rounding error on the largest weight so the sum is exact.
            weights[base + largest] = Int16(clamping: Int(weights[base + largest]) + FilterWeights.one - total)
        }
        self.starts = starts
        self.weights = weights
    }

    static func lanczos3(_ x: Double) -> Double {
        let ax = abs(x)
        if ax < 1e-12 { return 1 }
        if ax >= 3 { return 0 }
        let px = Double.pi * ax
        return 3 * sin(px) * sin(px / 3) / (px * px)
    }
}
