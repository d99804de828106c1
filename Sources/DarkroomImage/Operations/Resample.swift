import Foundation
import Synchronization

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
    /// every side is at least 1. A box with one side 0 pins the other side
    /// and lets the 0 side follow the aspect ratio, in every mode.
    public static func scaledSize(of source: Size, to box: Size, mode: ScaleMode) -> Size {
        let sw = max(1, source.width), sh = max(1, source.height)
        func rounded(_ a: Int, _ b: Int, _ c: Int) -> Int {
            // round(a * b / c) in floating point: sizes are far below 2^53.
            max(1, Int((Double(a) * Double(b) / Double(c)).rounded()))
        }
        if box.width == 0, box.height > 0 { return Size(width: rounded(sw, box.height, sh), height: box.height) }
        if box.height == 0, box.width > 0 { return Size(width: box.width, height: rounded(sh, box.width, sw)) }
        let bw = max(1, box.width), bh = max(1, box.height)
        // Compare aspect ratios exactly: sw/sh >= bw/bh  <=>  sw*bh >= sh*bw.
        let sourceIsWider = sw.multipliedReportingOverflow(by: bh).partialValue
            >= sh.multipliedReportingOverflow(by: bw).partialValue
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
    /// With `keepingAlpha` the fourth byte of each pixel is an alpha, filtered
    /// like the three colours (see `AlphaImage`); without, it is the padding
    /// and comes out 255. Throws `ImageError.cancelled` once `cancellation` is set.
    public func scaled(
        to box: Size, mode: ScaleMode = .fit, kernel: ResampleKernel = .lanczos3, keepingAlpha: Bool = false,
        cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        guard box.width >= 0, box.height >= 0, box.width > 0 || box.height > 0 else {
            throw ImageError(.invalidArgument, "scale box \(box) must have positive sides (or one side 0, to follow the aspect ratio)")
        }
        let target = Image.scaledSize(of: Size(width: width, height: height), to: box, mode: mode)
        return try resized(to: target, kernel: kernel, keepingAlpha: keepingAlpha, cancellation: cancellation)
    }

    /// Resamples the image to exactly `size`, ignoring the aspect ratio;
    /// `keepingAlpha` as for `scaled`. Throws `ImageError.cancelled` once
    /// `cancellation` is set.
    public func resized(
        to size: Size, kernel: ResampleKernel = .lanczos3, keepingAlpha: Bool = false, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        try Image.checkOutputSize(size, operation: "resize")
        if size.width == width && size.height == height { return self }
        switch kernel {
        case .nearest:
            return try cancellation.checked(resampledNearest(to: size, cancellation))
        case .lanczos3, .bilinear:
            return try cancellation.checked(resampledSeparable(to: size, kernel: kernel, keepingAlpha: keepingAlpha, cancellation))
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

    // Below, a function that takes a `CancellationFlag` polls it from its
    // loops and stops early once it is set: its result is then unfinished,
    // and callers check the flag before using it (`CancellationFlag.checked`).

    func resampledNearest(to size: Size, _ cancel: CancellationFlag = .never) -> Image {
        let outW = size.width, outH = size.height
        // Source column of each output column: the pixel under the output centre.
        var columns = [Int](repeating: 0, count: outW)
        for x in 0..<outW {
            columns[x] = Image.nearestSource(x, of: outW, in: width) * 4
        }
        var out = [UInt8](repeating: 255, count: outW * outH * 4, cancel)
        if cancel.isCancelled { return self }
        let src = pixels.span
        let cols = columns.span
        var dst = out.mutableSpan
        let rowLen = width * 4
        let poll = RowPoll(cancel, workPerRow: outW * 4)
        for y in 0..<outH {
            if poll.stop(at: y) { break }
            let sy = Image.nearestSource(y, of: outH, in: height)
            let row = src.extracting(sy * rowLen ..< (sy + 1) * rowLen)
            var o = y * outW * 4
            // All four bytes: the padding (255 in, 255 out) or an alpha.
            for x in 0..<cols.count {
                let s = cols[x]
                dst[o] = row[s]
                dst[o + 1] = row[s + 1]
                dst[o + 2] = row[s + 2]
                dst[o + 3] = row[s + 3]
                o += 4
            }
        }
        return Image(width: outW, height: outH, pixels: out)
    }

    /// The source sample under the centre of output sample `i` of `outCount`
    /// resampled from `inCount`.
    @inline(__always)
    static func nearestSource(_ i: Int, of outCount: Int, in inCount: Int) -> Int {
        min(max(Int((Double(i) + 0.5) * Double(inCount) / Double(outCount)), 0), inCount - 1)
    }

    // MARK: - Separable convolution

    /// The box pre-shrink for resampling `source` to `target`, per axis (1:
    /// none). Big shrinks average whole blocks first, leaving at least a
    /// factor of 2 for the real kernel (the same rule libvips follows). Box
    /// averaging is an order of magnitude cheaper per source pixel than a
    /// 6-tap-per-axis lanczos widened by the shrink factor.
    static func preShrink(_ source: Size, to target: Size) -> (x: Int, y: Int)? {
        let x = max(1, source.width / (2 * target.width))
        let y = max(1, source.height / (2 * target.height))
        return x >= 2 || y >= 2 ? (x, y) : nil
    }

    func resampledSeparable(to size: Size, kernel: ResampleKernel, keepingAlpha: Bool = false, _ cancel: CancellationFlag = .never) -> Image {
        var source = self
        if let factor = Image.preShrink(Size(width: width, height: height), to: size) {
            source = boxReduced(factorX: factor.x, factorY: factor.y, cancel)
            if cancel.isCancelled { return source }
        }
        let hWeights = FilterWeights.cached(resampling: source.width, to: size.width, kernel: kernel)
        let vWeights = FilterWeights.cached(resampling: source.height, to: size.height, kernel: kernel)
        return source.convolved(horizontal: hWeights, vertical: vWeights, keepingAlpha: keepingAlpha, cancel)
    }

    /// Applies a horizontal then a vertical filter (or the reverse, whichever
    /// needs fewer multiply-adds). Either may be nil to skip that axis.
    /// `keepingAlpha` as for `scaled`: the vertical pass treats every byte
    /// alike, so only the horizontal one needs telling.
    func convolved(
        horizontal: FilterWeights?, vertical: FilterWeights?, keepingAlpha: Bool = false, _ cancel: CancellationFlag = .never
    ) -> Image {
        let opaque = !keepingAlpha
        let outW = horizontal?.outCount ?? width
        let outH = vertical?.outCount ?? height
        guard let h = horizontal else {
            guard let v = vertical else { return self }
            return Image(width: width, height: outH, pixels: Image.verticalPass(pixels, rowLength: stride, weights: v, cancel))
        }
        guard let v = vertical else {
            return Image(width: outW, height: height, pixels: Image.horizontalPass(pixels, width: width, height: height, weights: h,
                                                                                    opaquePadding: opaque, cancel: cancel))
        }
        if Image.horizontalFirst(width: width, height: height, horizontal: h, vertical: v) {
            let mid = Image.horizontalPass(pixels, width: width, height: height, weights: h, opaquePadding: opaque, cancel: cancel)
            if cancel.isCancelled { return self }
            return Image(width: outW, height: outH, pixels: Image.verticalPass(mid, rowLength: outW * 4, weights: v, cancel))
        } else if v.taps > FilterWeights.maxFastTaps {
            let mid = Image.verticalPass(pixels, rowLength: stride, weights: v, cancel)
            if cancel.isCancelled { return self }
            return Image(width: outW, height: outH, pixels: Image.horizontalPass(mid, width: width, height: outH, weights: h,
                                                                                  opaquePadding: opaque, cancel: cancel))
        } else {
            // A strip of output rows at a time: the vertical pass's rows stay in
            // cache for the horizontal pass, and neither an image-sized
            // intermediate nor a zero-filled output is ever allocated.
            let stripRows = 16
            var out = [UInt8]()
            out.reserveCapacity(outW * outH * 4)
            var y = 0
            if h.taps % 4 == 0 && h.taps <= FilterWeights.maxFastTaps {
                // The strip between the passes holds 16-bit lanes, so the
                // horizontal pass does not widen each sample for every output
                // pixel that reads it; both strip buffers are reused.
                var mid = [Int16](repeating: 0, count: width * 4 * stripRows)
                var strip = [UInt8](repeating: 255, count: outW * 4 * stripRows)
                while y < outH {
                    if cancel.poll() { return self }
                    let rows = y ..< min(outH, y + stripRows)
                    Image.verticalPassWide(pixels, rowLength: stride, weights: v, rows: rows, into: &mid)
                    Image.horizontalPassWide(mid, width: width, height: rows.count, weights: h, opaquePadding: opaque, into: &strip)
                    out.append(contentsOf: strip[0 ..< outW * 4 * rows.count])
                    y = rows.upperBound
                }
                return Image(width: outW, height: outH, pixels: out)
            }
            while y < outH {
                if cancel.poll() { return self }
                let rows = y ..< min(outH, y + stripRows)
                let mid = Image.verticalPass(pixels, rowLength: stride, weights: v, rows: rows)
                out.append(contentsOf: Image.horizontalPass(mid, width: width, height: rows.count, weights: h, opaquePadding: opaque))
                y = rows.upperBound
            }
            return Image(width: outW, height: outH, pixels: out)
        }
    }

    /// Whether `convolved` runs the horizontal pass first on a `width` x
    /// `height` source. Per output sample the horizontal pass costs roughly
    /// twice the vertical one (it gathers whole pixels instead of streaming
    /// whole rows). `GrayImage` follows the same choice, so a gray plane is
    /// filtered in the same order, with the same rounding, as an RGBX image.
    static func horizontalFirst(width: Int, height: Int, horizontal h: FilterWeights, vertical v: FilterWeights) -> Bool {
        let outW = h.outCount, outH = v.outCount
        let horizontalFirst = 2 * outW * height * h.taps + outW * outH * v.taps
        let verticalFirst = width * outH * v.taps + 2 * outW * outH * h.taps
        return horizontalFirst <= verticalFirst
    }

    /// Filters every row: output pixel i of a row is the weighted sum of `taps`
    /// whole RGBX pixels starting at `starts[i]`.
    ///
    /// Two neighbouring source pixels (8 bytes) are handled per step, as eight
    /// 16-bit lanes multiplied by (w0 w0 w0 w0 w1 w1 w1 w1); the two halves of the
    /// accumulator are added at the end (see `FilterWeights.mulHigh`).
    ///
    /// With `opaquePadding` the fourth byte of each output pixel is the RGBX
    /// padding, 255; without, it is filtered like the other three, so four
    /// gray rows held as the channels of one row are filtered at once
    /// (`GrayImage.horizontalPass`).
    static func horizontalPass(
        _ source: [UInt8], width: Int, height: Int, weights fw: FilterWeights, opaquePadding: Bool = true,
        cancel: CancellationFlag = .never
    ) -> [UInt8] {
        guard fw.taps <= FilterWeights.maxFastTaps else {
            return horizontalPassPrecise(source, width: width, height: height, weights: fw, opaquePadding: opaquePadding, cancel: cancel)
        }
        let outW = fw.outCount
        let taps = fw.taps
        let pairs = taps / 2
        let quads = pairs / 2
        let lastPair = pairs % 2 == 1
        let oddTap = taps % 2 == 1
        var out = [UInt8](repeating: 255, count: outW * height * 4, cancel)
        if cancel.isCancelled { return out }
        // Whole vectors are loaded and stored through the byte views; those
        // accesses are bounds-checked, and any bit pattern is a valid SIMD of
        // bytes, so they are memory-safe.
        let src = source.span.bytes
        let starts = fw.starts.span
        let blockWeights = fw.blockWeights.span
        let weights = fw.weights.span
        var outSpan = out.mutableSpan
        var dst = outSpan.mutableBytes
        let rowLen = width * 4
        let hide = fw.opaqueZero
        let rounding = SIMD8<Int16>(repeating: fw.fastRounding)
        let opaque = opaquePadding ? SIMD8<UInt8>(0, 0, 0, 255, 0, 0, 0, 255) : .zero
        let poll = RowPoll(cancel, workPerRow: outW * 4 * taps)
        // One output pixel's sum, rounded, in lanes 0-3 (lanes 4-7 unused).
        @inline(__always)
        func filtered(_ i: Int, _ rowBase: Int) -> SIMD8<Int16> {
            var p = rowBase &+ starts[i] &* 4
            var acc = SIMD8<Int16>.zero
            var wi = i &* pairs
            // Four taps (16 bytes) per step, then a last pair and a last tap.
            for _ in 0..<quads {
                let v = src.unsafeLoadUnaligned(fromByteOffset: p, as: SIMD16<UInt8>.self)
                acc &+= FilterWeights.mulHigh(FilterWeights.widen(v.lowHalf, hide), blockWeights[wi])
                acc &+= FilterWeights.mulHigh(FilterWeights.widen(v.highHalf, hide), blockWeights[wi &+ 1])
                p &+= 16
                wi &+= 2
            }
            if lastPair {
                let v = src.unsafeLoadUnaligned(fromByteOffset: p, as: SIMD8<UInt8>.self)
                acc &+= FilterWeights.mulHigh(FilterWeights.widen(v, hide), blockWeights[wi])
                p &+= 8
            }
            if oddTap {
                let v = src.unsafeLoadUnaligned(fromByteOffset: p, as: SIMD4<UInt8>.self)
                let w = SIMD8<Int16>(lowHalf: SIMD4(repeating: weights[i &* taps &+ taps &- 1]), highHalf: .zero)
                acc &+= FilterWeights.mulHigh(FilterWeights.widen(SIMD8(lowHalf: v, highHalf: .zero), hide), w)
            }
            // Lanes 0-3 and 4-7 hold the even and odd taps: add the halves.
            return acc &+ SIMD8(lowHalf: acc.highHalf, highHalf: acc.lowHalf) &+ rounding
        }
        if taps % 4 == 0 && quads <= 4 {
            // The common case: whole 16-byte steps only. Each step count gets its
            // own copy of the loop so the compiler can unroll it completely, and
            // two rows go through together: each pixel's start, weights and
            // bounds checks are then paid once for both.
            @inline(__always)
            func run(quads: Int, dst: inout MutableRawSpan) {
                var y = 0
                while y < height {
                    if poll.stop(at: y) { break }
                    let pair = y &+ 1 < height
                    let rowBase = y &* rowLen
                    // The second row of a pair; a lone last row filters itself twice.
                    let nextRow = pair ? rowLen : 0
                    var o = y &* outW &* 4
                    let outNext = pair ? outW &* 4 : 0
                    var wi = 0
                    for i in 0..<starts.count {
                        let p = rowBase &+ starts[i] &* 4
                        var acc0 = SIMD8<Int16>.zero, acc1 = SIMD8<Int16>.zero
                        // Written out rather than looped: `quads` is a constant
                        // in each copy, so the tests fold away and no per-pixel
                        // trip-count bookkeeping is left.
                        @inline(__always)
                        func quad(_ q: Int) {
                            let w0 = blockWeights[wi &+ 2 &* q], w1 = blockWeights[wi &+ 2 &* q &+ 1]
                            let v0 = src.unsafeLoadUnaligned(fromByteOffset: p &+ 16 &* q, as: SIMD16<UInt8>.self)
                            let v1 = src.unsafeLoadUnaligned(fromByteOffset: p &+ nextRow &+ 16 &* q, as: SIMD16<UInt8>.self)
                            acc0 &+= FilterWeights.mulHigh(FilterWeights.widen(v0.lowHalf, hide), w0)
                            acc0 &+= FilterWeights.mulHigh(FilterWeights.widen(v0.highHalf, hide), w1)
                            acc1 &+= FilterWeights.mulHigh(FilterWeights.widen(v1.lowHalf, hide), w0)
                            acc1 &+= FilterWeights.mulHigh(FilterWeights.widen(v1.highHalf, hide), w1)
                        }
                        // Two steps from one 32-byte load per row where possible
                        // (one bounds check instead of two).
                        @inline(__always)
                        func quads2(_ q: Int) {
                            let w0 = blockWeights[wi &+ 2 &* q], w1 = blockWeights[wi &+ 2 &* q &+ 1]
                            let w2 = blockWeights[wi &+ 2 &* q &+ 2], w3 = blockWeights[wi &+ 2 &* q &+ 3]
                            let v0 = src.unsafeLoadUnaligned(fromByteOffset: p &+ 16 &* q, as: SIMD32<UInt8>.self)
                            let v1 = src.unsafeLoadUnaligned(fromByteOffset: p &+ nextRow &+ 16 &* q, as: SIMD32<UInt8>.self)
                            acc0 &+= FilterWeights.mulHigh(FilterWeights.widen(v0.lowHalf.lowHalf, hide), w0)
                            acc0 &+= FilterWeights.mulHigh(FilterWeights.widen(v0.lowHalf.highHalf, hide), w1)
                            acc0 &+= FilterWeights.mulHigh(FilterWeights.widen(v0.highHalf.lowHalf, hide), w2)
                            acc0 &+= FilterWeights.mulHigh(FilterWeights.widen(v0.highHalf.highHalf, hide), w3)
                            acc1 &+= FilterWeights.mulHigh(FilterWeights.widen(v1.lowHalf.lowHalf, hide), w0)
                            acc1 &+= FilterWeights.mulHigh(FilterWeights.widen(v1.lowHalf.highHalf, hide), w1)
                            acc1 &+= FilterWeights.mulHigh(FilterWeights.widen(v1.highHalf.lowHalf, hide), w2)
                            acc1 &+= FilterWeights.mulHigh(FilterWeights.widen(v1.highHalf.highHalf, hide), w3)
                        }
                        switch quads {
                        case 1: quad(0)
                        case 2: quads2(0)
                        case 3: quads2(0); quad(2)
                        default: quads2(0); quads2(2)
                        }
                        wi &+= 2 &* quads
                        // Lanes 0-3 and 4-7 hold the even and odd taps: add the
                        // halves, then narrow both rows' pixels at once.
                        let sum0 = acc0 &+ SIMD8(lowHalf: acc0.highHalf, highHalf: acc0.lowHalf)
                        let sum1 = acc1 &+ SIMD8(lowHalf: acc1.highHalf, highHalf: acc1.lowHalf)
                        let bytes = FilterWeights.narrow(SIMD8(lowHalf: sum0.lowHalf, highHalf: sum1.lowHalf) &+ rounding) | opaque
                        dst.storeBytes(of: bytes.lowHalf, toByteOffset: o, as: SIMD4<UInt8>.self)
                        dst.storeBytes(of: bytes.highHalf, toByteOffset: o &+ outNext, as: SIMD4<UInt8>.self)
                        o &+= 4
                    }
                    y &+= pair ? 2 : 1
                }
            }
            switch quads {
            case 1: run(quads: 1, dst: &dst)
            case 2: run(quads: 2, dst: &dst)
            case 3: run(quads: 3, dst: &dst)
            default: run(quads: 4, dst: &dst)
            }
            return out
        }
        for y in 0..<height {
            if poll.stop(at: y) { break }
            let rowBase = y * rowLen
            var o = y * outW * 4
            // Two output pixels at a time share the rounding and the store.
            var i = 0
            while i &+ 1 < outW {
                let first = filtered(i, rowBase), second = filtered(i &+ 1, rowBase)
                let both = SIMD8(lowHalf: first.lowHalf, highHalf: second.lowHalf)
                dst.storeBytes(of: FilterWeights.narrow(both) | opaque, toByteOffset: o, as: SIMD8<UInt8>.self)
                o &+= 8
                i &+= 2
            }
            if i < outW {
                let px = (FilterWeights.narrow(filtered(i, rowBase)) | opaque).lowHalf
                dst.storeBytes(of: px, toByteOffset: o, as: SIMD4<UInt8>.self)
            }
        }
        return out
    }

    /// `horizontalPass` on rows already widened to 16-bit lanes by
    /// `verticalPassWide` (the first `height` rows of `source`), written to the
    /// start of `out`. Needs a tap count that is a multiple of four, at most
    /// `FilterWeights.maxFastTaps`. The bytes are those `horizontalPass` gives
    /// on the same rows as bytes.
    ///
    /// Each output pixel's window is read straight from a row span whose length
    /// the loop knows, with its start clamped to the last full window (starts
    /// never exceed it), so the loads carry no per-pixel bounds checks.
    ///
    /// `opaquePadding` as for `horizontalPass`.
    static func horizontalPassWide(
        _ source: [Int16], width: Int, height: Int, weights fw: FilterWeights, opaquePadding: Bool = true,
        into out: inout [UInt8], cancel: CancellationFlag = .never
    ) {
        let taps = fw.taps
        let outW = fw.outCount
        precondition(taps % 4 == 0 && taps <= FilterWeights.maxFastTaps && taps <= width, "unsupported tap count")
        precondition(source.count >= width * 4 * height && out.count >= outW * 4 * height, "buffers too small for the strip")
        let src = source.span.bytes
        let starts = fw.starts.span
        let weightBytes = fw.blockWeights.span.bytes
        var outSpan = out.mutableSpan
        var dst = outSpan.mutableBytes
        let rowBytes = width * 8
        // The padding lane gets a bias that saturates it to 255 whatever the
        // sum (at most 255·32·1.3 either way, so no 16-bit overflow): the
        // padding comes out opaque without a mask.
        let r = fw.fastRounding
        let p = opaquePadding ? r &+ 16384 : r
        let rounding = SIMD8<Int16>(r, r, r, p, r, r, r, p)
        let poll = RowPoll(cancel, workPerRow: outW * 4 * taps)
        // `quads` groups of four taps: 32 bytes of lanes and 32 of weights each.
        // Four rows go through together, sharing each pixel's start and weights.
        @inline(__always)
        func run(quads: Int, dst: inout MutableRawSpan) {
            let lastStart = UInt(rowBytes - quads * 32)
            let outRow = outW &* 4
            var y = 0
            while y < height {
                if poll.stop(at: y) { break }
                // Rows past the end repeat the last one (and its output).
                let y1 = min(y + 1, height - 1), y2 = min(y + 2, height - 1), y3 = min(y + 3, height - 1)
                let b0 = y * rowBytes, b1 = y1 * rowBytes, b2 = y2 * rowBytes, b3 = y3 * rowBytes
                let row0 = src.extracting(b0 ..< b0 + rowBytes)
                let row1 = src.extracting(b1 ..< b1 + rowBytes)
                let row2 = src.extracting(b2 ..< b2 + rowBytes)
                let row3 = src.extracting(b3 ..< b3 + rowBytes)
                let o0 = y &* outRow, o1 = y1 &* outRow, o2 = y2 &* outRow, o3 = y3 &* outRow
                for i in 0..<starts.count {
                    let p = Int(min(UInt(bitPattern: starts[i]) &* 8, lastStart))
                    // One range check for the pixel's weights, none per load.
                    let wAt = i &* quads &* 32
                    let pixelWeights = weightBytes.extracting(wAt ..< wAt &+ quads &* 32)
                    var acc0 = SIMD8<Int16>.zero, acc1 = SIMD8<Int16>.zero
                    var acc2 = SIMD8<Int16>.zero, acc3 = SIMD8<Int16>.zero
                    @inline(__always)
                    func four(_ q: Int) {
                        let w = pixelWeights.unsafeLoadUnaligned(fromByteOffset: q &* 32, as: SIMD16<Int16>.self)
                        let at = p &+ q &* 32
                        let a = row0.unsafeLoadUnaligned(fromByteOffset: at, as: SIMD16<Int16>.self)
                        let b = row1.unsafeLoadUnaligned(fromByteOffset: at, as: SIMD16<Int16>.self)
                        let c = row2.unsafeLoadUnaligned(fromByteOffset: at, as: SIMD16<Int16>.self)
                        let d = row3.unsafeLoadUnaligned(fromByteOffset: at, as: SIMD16<Int16>.self)
                        acc0 &+= FilterWeights.mulHigh(a.lowHalf, w.lowHalf) &+ FilterWeights.mulHigh(a.highHalf, w.highHalf)
                        acc1 &+= FilterWeights.mulHigh(b.lowHalf, w.lowHalf) &+ FilterWeights.mulHigh(b.highHalf, w.highHalf)
                        acc2 &+= FilterWeights.mulHigh(c.lowHalf, w.lowHalf) &+ FilterWeights.mulHigh(c.highHalf, w.highHalf)
                        acc3 &+= FilterWeights.mulHigh(d.lowHalf, w.lowHalf) &+ FilterWeights.mulHigh(d.highHalf, w.highHalf)
                    }
                    four(0)
                    if quads > 1 { four(1) }
                    if quads > 2 { four(2) }
                    if quads > 3 { four(3) }
                    // Lanes 0-3 and 4-7 hold the even and odd taps: add the
                    // halves of two rows at once, then narrow all four rows.
                    let s01 = SIMD8(lowHalf: acc0.lowHalf, highHalf: acc1.lowHalf) &+ SIMD8(lowHalf: acc0.highHalf, highHalf: acc1.highHalf)
                    let s23 = SIMD8(lowHalf: acc2.lowHalf, highHalf: acc3.lowHalf) &+ SIMD8(lowHalf: acc2.highHalf, highHalf: acc3.highHalf)
                    let bytes01 = FilterWeights.narrow(s01 &+ rounding), bytes23 = FilterWeights.narrow(s23 &+ rounding)
                    let o = i &* 4
                    dst.storeBytes(of: bytes01.lowHalf, toByteOffset: o0 &+ o, as: SIMD4<UInt8>.self)
                    dst.storeBytes(of: bytes01.highHalf, toByteOffset: o1 &+ o, as: SIMD4<UInt8>.self)
                    dst.storeBytes(of: bytes23.lowHalf, toByteOffset: o2 &+ o, as: SIMD4<UInt8>.self)
                    dst.storeBytes(of: bytes23.highHalf, toByteOffset: o3 &+ o, as: SIMD4<UInt8>.self)
                }
                y &+= 4
            }
        }
        switch taps / 4 {
        case 1: run(quads: 1, dst: &dst)
        case 2: run(quads: 2, dst: &dst)
        case 3: run(quads: 3, dst: &dst)
        default: run(quads: 4, dst: &dst)
        }
    }

    /// The horizontal pass with 32-bit accumulators, for filters with more than
    /// `FilterWeights.maxFastTaps` taps.
    ///
    /// Taps are taken two at a time: the 8 bytes of two neighbouring pixels are
    /// interleaved channel by channel (r0 r1 g0 g1 ...) and multiplied by
    /// (w0 w1 w0 w1 ...) with adjacent products summed, the shape that lowers to
    /// one `pmaddwd` (16-bit multiply, 32-bit pairwise add) even on baseline SSE2,
    /// where a plain 32-bit vector multiply has no single instruction.
    static func horizontalPassPrecise(
        _ source: [UInt8], width: Int, height: Int, weights fw: FilterWeights, opaquePadding: Bool = true,
        cancel: CancellationFlag = .never
    ) -> [UInt8] {
        let outW = fw.outCount
        let taps = fw.taps
        let pairs = taps / 2
        let oddTap = taps % 2 == 1
        var out = [UInt8](repeating: 255, count: outW * height * 4, cancel)
        if cancel.isCancelled { return out }
        let src = source.span
        let starts = fw.starts.span
        let pairWeights = fw.pairWeights.span
        let weights = fw.weights.span
        var dst = out.mutableSpan
        let rowLen = width * 4
        let rounding = SIMD4<Int32>(repeating: 1 << (FilterWeights.fractionBits - 1))
        let poll = RowPoll(cancel, workPerRow: outW * 4 * taps)
        for y in 0..<height {
            if poll.stop(at: y) { break }
            let row = src.extracting(y * rowLen ..< (y + 1) * rowLen)
            var o = y * outW * 4
            for i in 0..<starts.count {
                var p = starts[i] &* 4
                var acc = rounding
                var wi = i &* pairs
                for _ in 0..<pairs {
                    let two = row.extracting(p ..< p &+ 8)
                    let v = SIMD8<UInt8>(two[0], two[4], two[1], two[5], two[2], two[6], two[3], two[7])
                    acc &+= multiplyAddPairs(SIMD8<Int16>(truncatingIfNeeded: v), pairWeights[wi])
                    p &+= 8
                    wi &+= 1
                }
                if oddTap {
                    let w = Int32(weights[i &* taps &+ taps &- 1])
                    let one = row.extracting(p ..< p &+ 4)
                    acc &+= SIMD4<Int32>(Int32(one[0]), Int32(one[1]), Int32(one[2]), Int32(one[3])) &* w
                }
                let v = (acc &>> Int32(FilterWeights.fractionBits)).clamped(lowerBound: .zero, upperBound: SIMD4(repeating: 255))
                dst[o] = UInt8(truncatingIfNeeded: v[0])
                dst[o + 1] = UInt8(truncatingIfNeeded: v[1])
                dst[o + 2] = UInt8(truncatingIfNeeded: v[2])
                if !opaquePadding { dst[o + 3] = UInt8(truncatingIfNeeded: v[3]) }
                o &+= 4
            }
        }
        return out
    }

    /// (a0*b0 + a1*b1, a2*b2 + a3*b3, ...) with 32-bit products: `pmaddwd`.
    @inline(__always)
    static func multiplyAddPairs(_ a: SIMD8<Int16>, _ b: SIMD8<Int16>) -> SIMD4<Int32> {
        let products = SIMD8<Int32>(truncatingIfNeeded: a) &* SIMD8<Int32>(truncatingIfNeeded: b)
        return products.evenHalf &+ products.oddHalf
    }

    /// Writes four clamped lanes as bytes at `d[at ..< at + 4]`.
    @inline(__always)
    static func storeClamped(_ v: SIMD4<Int32>, _ d: inout MutableSpan<UInt8>, _ at: Int) {
        let c = v.clamped(lowerBound: .zero, upperBound: SIMD4(repeating: 255))
        d[at] = UInt8(truncatingIfNeeded: c[0])
        d[at + 1] = UInt8(truncatingIfNeeded: c[1])
        d[at + 2] = UInt8(truncatingIfNeeded: c[2])
        d[at + 3] = UInt8(truncatingIfNeeded: c[3])
    }

    /// Filters every column: output row i is the weighted sum of `taps` whole
    /// source rows starting at row `starts[i]`.
    ///
    /// Each 16-byte column strip is accumulated over all taps in two registers of
    /// eight 16-bit lanes and written once (see `FilterWeights.mulHigh` for the
    /// arithmetic), so the intermediate sums never touch memory.
    ///
    /// The vertical passes only stream the bytes of whole rows, `rowLength`
    /// bytes each, whatever the pixels hold: RGBX rows (`width * 4`, the
    /// padding byte stays 255 since a constant stays constant) and gray planes
    /// (`width`) go through the same code.
    static func verticalPass(_ source: [UInt8], rowLength: Int, weights fw: FilterWeights, _ cancel: CancellationFlag = .never) -> [UInt8] {
        guard fw.taps <= FilterWeights.maxFastTaps else {
            return verticalPassPrecise(source, rowLength: rowLength, weights: fw, cancel)
        }
        return verticalPass(source, rowLength: rowLength, weights: fw, rows: 0..<fw.outCount, cancel)
    }

    /// Output rows `rows` of the fast vertical pass (which needs
    /// `fw.taps <= FilterWeights.maxFastTaps`), as their own buffer.
    static func verticalPass(
        _ source: [UInt8], rowLength: Int, weights fw: FilterWeights, rows outRows: Range<Int>, _ cancel: CancellationFlag = .never
    ) -> [UInt8] {
        var out = [UInt8](repeating: 255, count: rowLength * outRows.count, cancel)
        if cancel.isCancelled { return out }
        var outSpan = out.mutableSpan
        var dst = outSpan.mutableBytes
        verticalRows(source, rowLength: rowLength, weights: fw, rows: outRows, wide: false, into: &dst, cancel)
        return out
    }

    /// Output rows `rows` of the fast vertical pass as the 16-bit lanes the
    /// fast horizontal pass multiplies (each byte v as v << 7, see
    /// `FilterWeights.widen`), written to the start of `out`. Feeding these to
    /// `horizontalPassWide` gives the same bytes as the byte-valued passes,
    /// without widening every sample again for each output pixel it reaches.
    static func verticalPassWide(_ source: [UInt8], rowLength: Int, weights fw: FilterWeights, rows outRows: Range<Int>, into out: inout [Int16]) {
        precondition(out.count >= rowLength * outRows.count, "buffer too small for the strip")
        var outSpan = out.mutableSpan
        var dst = outSpan.mutableBytes
        verticalRows(source, rowLength: rowLength, weights: fw, rows: outRows, wide: true, into: &dst)
    }

    /// Each 16-byte column strip is accumulated over all taps in registers and
    /// written once: as clamped bytes, or with `wide` as bytes widened to
    /// 16-bit lanes (`FilterWeights.widen`).
    @inline(__always)
    private static func verticalRows(
        _ source: [UInt8], rowLength rowLen: Int, weights fw: FilterWeights, rows outRows: Range<Int>, wide: Bool,
        into dst: inout MutableRawSpan, _ cancel: CancellationFlag = .never
    ) {
        let taps = fw.taps
        let vectorEnd = rowLen - rowLen % 16
        let laneBytes = wide ? 2 : 1
        // Vector loads and stores through the byte views: bounds-checked, and
        // every bit pattern is a valid SIMD of bytes.
        let src = source.span
        let srcBytes = src.bytes
        // Bytes enter centred, as (v - 128) << 8: the multiply keeps
        // (v - 128)·w / 256, six fraction bits, and since nothing tells the
        // optimiser the lanes' sign it keeps the one-instruction `pmulhw`. The
        // 128·64 taken off every output is put back through the rounding.
        @inline(__always)
        func centred(_ v: SIMD8<UInt8>) -> SIMD8<Int16> { (SIMD8<Int16>(truncatingIfNeeded: v) &<< 8) ^ SIMD8(repeating: Int16.min) }
        let shift = Int16(FilterWeights.verticalFractionBits)
        @inline(__always)
        func clamped(_ a: SIMD8<Int16>) -> SIMD8<Int16> { pointwiseMin(pointwiseMax(a &>> shift, .zero), SIMD8(repeating: 255)) }
        @inline(__always)
        func narrow(_ a: SIMD8<Int16>) -> SIMD8<UInt8> { SIMD8<UInt8>(truncatingIfNeeded: clamped(a)) }
        var rowStarts = [Int](repeating: 0, count: taps)
        var tapWeights = [SIMD8<Int16>](repeating: .zero, count: taps)
        // Eight accumulators to the output: 64 clamped bytes, or 64 widened lanes.
        @inline(__always)
        func store8(
            _ a0: SIMD8<Int16>, _ a1: SIMD8<Int16>, _ a2: SIMD8<Int16>, _ a3: SIMD8<Int16>,
            _ a4: SIMD8<Int16>, _ a5: SIMD8<Int16>, _ a6: SIMD8<Int16>, _ a7: SIMD8<Int16>,
            at o: Int, _ dst: inout MutableRawSpan
        ) {
            if wide {
                @inline(__always)
                func lanes(_ a: SIMD8<Int16>) -> SIMD8<Int16> {
                    clamped(a) &<< 7
                }
                let lo = SIMD32<Int16>(
                    lowHalf: SIMD16(lowHalf: lanes(a0), highHalf: lanes(a1)),
                    highHalf: SIMD16(lowHalf: lanes(a2), highHalf: lanes(a3)))
                let hi = SIMD32<Int16>(
                    lowHalf: SIMD16(lowHalf: lanes(a4), highHalf: lanes(a5)),
                    highHalf: SIMD16(lowHalf: lanes(a6), highHalf: lanes(a7)))
                dst.storeBytes(of: lo, toByteOffset: o &* 2, as: SIMD32<Int16>.self)
                dst.storeBytes(of: hi, toByteOffset: o &* 2 &+ 64, as: SIMD32<Int16>.self)
            } else {
                let lo = SIMD32<UInt8>(
                    lowHalf: SIMD16(lowHalf: narrow(a0), highHalf: narrow(a1)),
                    highHalf: SIMD16(lowHalf: narrow(a2), highHalf: narrow(a3)))
                let hi = SIMD32<UInt8>(
                    lowHalf: SIMD16(lowHalf: narrow(a4), highHalf: narrow(a5)),
                    highHalf: SIMD16(lowHalf: narrow(a6), highHalf: narrow(a7)))
                dst.storeBytes(of: lo, toByteOffset: o, as: SIMD32<UInt8>.self)
                dst.storeBytes(of: hi, toByteOffset: o &+ 32, as: SIMD32<UInt8>.self)
            }
        }
        @inline(__always)
        func store2(_ lo: SIMD8<Int16>, _ hi: SIMD8<Int16>, at o: Int, _ dst: inout MutableRawSpan) {
            if wide {
                let a = clamped(lo) &<< 7
                let b = clamped(hi) &<< 7
                dst.storeBytes(of: SIMD16(lowHalf: a, highHalf: b), toByteOffset: o &* 2, as: SIMD16<Int16>.self)
            } else {
                dst.storeBytes(of: SIMD16<UInt8>(lowHalf: narrow(lo), highHalf: narrow(hi)), toByteOffset: o, as: SIMD16<UInt8>.self)
            }
        }
        let poll = RowPoll(cancel, workPerRow: rowLen * taps)
        for i in outRows {
            if poll.stop(at: i &- outRows.lowerBound) { break }
            let start = fw.starts[i]
            // Only the taps with non-zero weights (padding adds zeros at the ends).
            // Written through spans: no uniqueness check per tap, which counts
            // in short rows (a gray plane's).
            var n = 0
            do {
                let weights = fw.weights.span.extracting(i * taps ..< (i + 1) * taps)
                var starts = rowStarts.mutableSpan
                var splats = tapWeights.mutableSpan
                for k in 0..<weights.count where weights[k] != 0 {
                    starts[n] = (start + k) * rowLen
                    splats[n] = SIMD8(repeating: weights[k])
                    n += 1
                }
            }
            let rows = rowStarts.span.extracting(0..<n)
            let ws = tapWeights.span.extracting(0..<n)
            let rounding = SIMD8<Int16>(repeating: FilterWeights.verticalRounding(taps: n))
            let outBase = (i - outRows.lowerBound) * rowLen
            var x = 0
            // 64 bytes per step while they last (fewer loads and checks of the
            // tap tables per byte), then 16.
            while x &+ 64 <= vectorEnd {
                var a0 = rounding, a1 = rounding, a2 = rounding, a3 = rounding
                var a4 = rounding, a5 = rounding, a6 = rounding, a7 = rounding
                for k in 0..<min(rows.count, ws.count) {
                    let w = ws[k]
                    // One range check for the 64 bytes, none for the two loads.
                    let at = rows[k] &+ x
                    let chunk = srcBytes.extracting(at ..< at &+ 64)
                    let v = chunk.unsafeLoadUnaligned(fromByteOffset: 0, as: SIMD32<UInt8>.self)
                    let u = chunk.unsafeLoadUnaligned(fromByteOffset: 32, as: SIMD32<UInt8>.self)
                    let v0 = v.lowHalf, v1 = v.highHalf
                    let u0 = u.lowHalf, u1 = u.highHalf
                    a0 &+= FilterWeights.mulHigh(centred(v0.lowHalf), w)
                    a1 &+= FilterWeights.mulHigh(centred(v0.highHalf), w)
                    a2 &+= FilterWeights.mulHigh(centred(v1.lowHalf), w)
                    a3 &+= FilterWeights.mulHigh(centred(v1.highHalf), w)
                    a4 &+= FilterWeights.mulHigh(centred(u0.lowHalf), w)
                    a5 &+= FilterWeights.mulHigh(centred(u0.highHalf), w)
                    a6 &+= FilterWeights.mulHigh(centred(u1.lowHalf), w)
                    a7 &+= FilterWeights.mulHigh(centred(u1.highHalf), w)
                }
                store8(a0, a1, a2, a3, a4, a5, a6, a7, at: outBase &+ x, &dst)
                x &+= 64
            }
            // Then 16 bytes per step; when the row does not end on one, the
            // last step covers the row's last 16 bytes (the bytes it repeats
            // come out the same). Rows under 16 bytes go one by one below,
            // same arithmetic.
            while x < rowLen && rowLen >= 16 {
                let at = min(x, rowLen &- 16)
                var lo = rounding, hi = rounding
                for k in 0..<min(rows.count, ws.count) {
                    let v = srcBytes.unsafeLoadUnaligned(fromByteOffset: rows[k] &+ at, as: SIMD16<UInt8>.self)
                    lo &+= FilterWeights.mulHigh(centred(v.lowHalf), ws[k])
                    hi &+= FilterWeights.mulHigh(centred(v.highHalf), ws[k])
                }
                store2(lo, hi, at: outBase &+ at, &dst)
                x = at &+ 16
            }
            while x < rowLen {
                var acc = Int(FilterWeights.verticalRounding(taps: n))
                for k in 0..<taps {
                    acc += ((Int(src[(start + k) * rowLen + x]) - 128) << 8 * Int(fw.weights[i * taps + k])) >> 16
                }
                let byte = min(max(acc >> FilterWeights.verticalFractionBits, 0), 255)
                if wide {
                    dst.storeBytes(of: Int16(byte << 7), toByteOffset: (outBase + x) * laneBytes, as: Int16.self)
                } else {
                    dst.storeBytes(of: UInt8(byte), toByteOffset: outBase + x, as: UInt8.self)
                }
                x += 1
            }
        }
    }

    /// The vertical pass with 32-bit accumulators, for filters with more than
    /// `FilterWeights.maxFastTaps` taps. Computed a row at a time so the inner
    /// loop streams contiguous bytes (the compiler vectorises it).
    static func verticalPassPrecise(_ source: [UInt8], rowLength rowLen: Int, weights fw: FilterWeights, _ cancel: CancellationFlag = .never) -> [UInt8] {
        let outH = fw.outCount
        let taps = fw.taps
        var out = [UInt8](repeating: 255, count: rowLen * outH, cancel)
        if cancel.isCancelled { return out }
        var acc = [Int32](repeating: 0, count: rowLen)
        let src = source.span
        let rounding = Int32(1 << (FilterWeights.fractionBits - 1))
        let poll = RowPoll(cancel, workPerRow: rowLen * taps)
        for i in 0..<outH {
            if poll.stop(at: i) { break }
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
                var dst = out.mutableSpan
                let base = i * rowLen
                for x in 0..<a.count {
                    let v = a[x] &>> Int32(FilterWeights.fractionBits)
                    dst[base + x] = UInt8(truncatingIfNeeded: min(max(v, 0), 255))
                }
            }
        }
        return out
    }

    // MARK: - Box reduce

    /// Averages blocks of `factorX` x `factorY` pixels into one. Blocks at the
    /// right and bottom edges may be smaller and are averaged over what they hold.
    /// All four bytes are averaged: the padding's 255s average to 255, and an
    /// alpha (`AlphaImage`) to its mean.
    func boxReduced(factorX: Int, factorY: Int, _ cancel: CancellationFlag = .never) -> Image {
        let outW = (width + factorX - 1) / factorX
        let outH = (height + factorY - 1) / factorY
        let rowLen = width * 4
        // Column sums of one band of rows, in 16-bit lanes: a block of up to 257
        // pixels sums to at most 65535.
        guard factorX * factorY <= 257 else {
            return boxReducedWide(factorX: factorX, factorY: factorY, cancel)
        }
        let poll = RowPoll(cancel, workPerRow: rowLen * factorY)
        var out = [UInt8](repeating: 255, count: outW * outH * 4, cancel)
        if cancel.isCancelled { return self }
        var sums = [UInt16](repeating: 0, count: rowLen)
        // A power-of-two block count divides by a shift, four lanes at a time.
        let fullCount = factorX * factorY
        let shiftBits = fullCount & (fullCount - 1) == 0 ? fullCount.trailingZeroBitCount : -1
        for oy in 0..<outH {
            if poll.stop(at: oy) { break }
            let y0 = oy * factorY
            let y1 = min(y0 + factorY, height)
            Image.columnSums(pixels, rowLength: rowLen, rows: y0..<y1, into: &sums)
            let sumBytes = sums.span.bytes
            var dstView = out.mutableSpan
            var dst = dstView.mutableBytes
            let rows = y1 - y0
            let full = Image.boxDivider(rows * factorX)
            let shifted = rows == factorY && shiftBits >= 0
            let half = SIMD4<UInt16>(repeating: UInt16(truncatingIfNeeded: fullCount / 2))
            for ox in 0..<outW {
                let x0 = ox * factorX
                let x1 = min(x0 + factorX, width)
                var acc = SIMD4<UInt16>.zero
                if x1 - x0 == 4 {
                    // Four pixels' sums in one load.
                    let v = sumBytes.unsafeLoadUnaligned(fromByteOffset: x0 &* 8, as: SIMD16<UInt16>.self)
                    let two = v.lowHalf &+ v.highHalf
                    acc = two.lowHalf &+ two.highHalf
                } else {
                    for x in x0..<x1 {
                        acc &+= sumBytes.unsafeLoadUnaligned(fromByteOffset: x &* 8, as: SIMD4<UInt16>.self)
                    }
                }
                let o = (oy * outW + ox) * 4
                if shifted && x1 - x0 == factorX {
                    // Sums of at most 256 bytes plus half the count stay in 16 bits.
                    let v = (acc &+ half) &>> UInt16(truncatingIfNeeded: shiftBits)
                    dst.storeBytes(of: SIMD4<UInt8>(truncatingIfNeeded: v), toByteOffset: o, as: SIMD4<UInt8>.self)
                    continue
                }
                let (half, magic) = x1 - x0 == factorX ? full : Image.boxDivider(rows * (x1 - x0))
                let r = UInt8(truncatingIfNeeded: ((UInt64(acc[0]) &+ half) &* magic) &>> 32)
                let g = UInt8(truncatingIfNeeded: ((UInt64(acc[1]) &+ half) &* magic) &>> 32)
                let b = UInt8(truncatingIfNeeded: ((UInt64(acc[2]) &+ half) &* magic) &>> 32)
                let a = UInt8(truncatingIfNeeded: ((UInt64(acc[3]) &+ half) &* magic) &>> 32)
                dst.storeBytes(of: SIMD4<UInt8>(r, g, b, a), toByteOffset: o, as: SIMD4<UInt8>.self)
            }
        }
        return Image(width: outW, height: outH, pixels: out)
    }

    /// (n + count / 2) / count for n < 2^16 as (n' * m) >> 32 with
    /// m = floor(2^32 / count) + 1, exact in that range (Granlund-Montgomery).
    @inline(__always)
    static func boxDivider(_ count: Int) -> (half: UInt64, magic: UInt64) {
        (UInt64(count / 2), (1 << 32) / UInt64(count) + 1)
    }

    /// The sums of rows `rows` of `source` (rows of `rowLength` bytes), byte
    /// column by byte column, written to the first `rowLength` entries of
    /// `sums`: the first half of a box reduce, whatever the bytes hold (RGBX
    /// rows and gray planes alike). A 16-bit sum holds up to 257 rows.
    ///
    /// A column strip of 16 bytes is summed over the rows in registers and
    /// stored once; the last few bytes as one more strip ending at the row's
    /// end (the columns it repeats get the same sums), or one by one in rows
    /// shorter than 16 bytes.
    static func columnSums(_ source: [UInt8], rowLength rowLen: Int, rows: Range<Int>, into sums: inout [UInt16]) {
        precondition(sums.count >= rowLen && rows.count <= 257, "sums too small for the rows")
        let src = source.span
        let srcBytes = src.bytes
        var sumView = sums.mutableSpan
        var s = sumView.mutableBytes
        @inline(__always)
        func strip(_ x: Int, _ s: inout MutableRawSpan) {
            var acc = SIMD16<UInt16>.zero
            for y in rows {
                acc &+= SIMD16<UInt16>(truncatingIfNeeded: srcBytes.unsafeLoadUnaligned(fromByteOffset: y &* rowLen &+ x, as: SIMD16<UInt8>.self))
            }
            s.storeBytes(of: acc, toByteOffset: x &* 2, as: SIMD16<UInt16>.self)
        }
        var x = 0
        while x &+ 16 <= rowLen {
            strip(x, &s)
            x &+= 16
        }
        if x < rowLen && rowLen >= 16 {
            strip(rowLen &- 16, &s)
            x = rowLen
        }
        while x < rowLen {
            var acc: UInt16 = 0
            for y in rows { acc &+= UInt16(src[y * rowLen + x]) }
            s.storeBytes(of: acc, toByteOffset: x &* 2, as: UInt16.self)
            x &+= 1
        }
    }

    /// `boxReduced` for blocks of more than 257 pixels, with 32-bit sums.
    func boxReducedWide(factorX: Int, factorY: Int, _ cancel: CancellationFlag = .never) -> Image {
        let outW = (width + factorX - 1) / factorX
        let outH = (height + factorY - 1) / factorY
        let rowLen = width * 4
        var out = [UInt8](repeating: 255, count: outW * outH * 4, cancel)
        if cancel.isCancelled { return self }
        var sums = [UInt32](repeating: 0, count: rowLen)
        let src = pixels.span
        let poll = RowPoll(cancel, workPerRow: rowLen * factorY)
        for oy in 0..<outH {
            if poll.stop(at: oy) { break }
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
                var r: UInt32 = 0, g: UInt32 = 0, b: UInt32 = 0, a: UInt32 = 0
                for x in x0..<x1 {
                    r &+= s[x * 4]
                    g &+= s[x * 4 + 1]
                    b &+= s[x * 4 + 2]
                    a &+= s[x * 4 + 3]
                }
                let count = UInt32(rows * (x1 - x0))
                let half = count / 2
                let o = (oy * outW + ox) * 4
                dst[o] = UInt8(truncatingIfNeeded: (r + half) / count)
                dst[o + 1] = UInt8(truncatingIfNeeded: (g + half) / count)
                dst[o + 2] = UInt8(truncatingIfNeeded: (b + half) / count)
                dst[o + 3] = UInt8(truncatingIfNeeded: (a + half) / count)
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

    // The fast passes work in 16-bit lanes. A source byte v enters as v << 7 and
    // is multiplied by its 14-bit weight keeping the high half of the 32-bit
    // product (`pmulhw`, one instruction for eight lanes even on baseline SSE2):
    // (v·128·w) >> 16 = v·w / 512, i.e. v with 5 fraction bits. Each product is
    // floored, so a sum of n taps is low by less than n units of 1/32; adding
    // n/2 units besides the usual half removes the bias, and as long as
    // n <= 32 a constant input still comes out exactly (its error stays under
    // the half unit on either side). 16 taps is lanczos3 down to a 2.67x shrink;
    // longer filters use 32-bit lanes. Sums stay far inside Int16: 255·32 times
    // the sum of the positive weights (under 1.3 for lanczos3).
    static let maxFastTaps = 16
    static let fastFractionBits = 5
    var fastRounding: Int16 { FilterWeights.fastRounding(taps: taps) }
    static func fastRounding(taps: Int) -> Int16 { Int16(1 << (fastFractionBits - 1) + taps / 2) }

    // The fast vertical pass multiplies centred lanes, (v - 128) << 8, keeping
    // (v - 128)·w / 256: six fraction bits. Its rounding removes the same
    // flooring bias (n/2 units for n taps; a constant input stays exact for
    // n < 64) and adds back the 128·64 the centring took off. Sums stay inside
    // Int16: 8192 + 96 plus at most 128·64 times 1.3 either way.
    static let verticalFractionBits = 6
    static func verticalRounding(taps: Int) -> Int16 { Int16(128 << verticalFractionBits + 1 << (verticalFractionBits - 1) + taps / 2) }

    /// A zero vector the optimiser cannot see is zero. OR-ing it into `v << 7`
    /// hides that the lanes are small non-negative numbers; when the optimiser
    /// knows that, it picks a slower widening multiply instead of `pmulhw`.
    var opaqueZero: SIMD8<Int16> { SIMD8(repeating: Int16(truncatingIfNeeded: taps >> 40)) }

    /// Bytes to 16-bit lanes holding v << 7.
    @inline(__always)
    static func widen(_ v: SIMD8<UInt8>, _ opaqueZero: SIMD8<Int16>) -> SIMD8<Int16> {
        (SIMD8<Int16>(truncatingIfNeeded: v) &<< 7) | opaqueZero
    }

    /// The high 16 bits of each 32-bit product: `pmulhw`.
    @inline(__always)
    static func mulHigh(_ a: SIMD8<Int16>, _ b: SIMD8<Int16>) -> SIMD8<Int16> {
        SIMD8<Int16>(truncatingIfNeeded: (SIMD8<Int32>(truncatingIfNeeded: a) &* SIMD8<Int32>(truncatingIfNeeded: b)) &>> 16)
    }

    /// Accumulated lanes (already rounded) back to clamped bytes.
    @inline(__always)
    static func narrow(_ acc: SIMD8<Int16>) -> SIMD8<UInt8> {
        let v = pointwiseMin(pointwiseMax(acc &>> Int16(fastFractionBits), .zero), SIMD8(repeating: 255))
        return SIMD8<UInt8>(truncatingIfNeeded: v)
    }

    let outCount: Int
    let taps: Int
    var starts: [Int]
    var weights: [Int16]
    /// `weights` regrouped for the precise horizontal pass, `taps / 2` vectors per
    /// output: (w0 w1 w0 w1 w0 w1 w0 w1).
    var pairWeights: [SIMD8<Int16>]
    /// `weights` regrouped for the fast horizontal pass, `taps / 2` vectors per
    /// output: (w0 w0 w0 w0 w1 w1 w1 w1).
    var blockWeights: [SIMD8<Int16>]

    private struct CacheKey: Hashable {
        var inCount: Int
        var outCount: Int
        var kernel: ResampleKernel
    }

    /// Weights built recently, by size and kernel. A queue of similar jobs
    /// (every upload scaled to the same thumbnail, say) asks for the same few
    /// filters over and over, and for small images building them costs more
    /// than applying them. Bounded: when full it starts again from empty.
    private static let cache = Mutex<[CacheKey: FilterWeights]>([:])
    private static let cacheLimit = 64

    /// `init(resampling:to:kernel:)`, from the cache when it was built before.
    static func cached(resampling inCount: Int, to outCount: Int, kernel: ResampleKernel) -> FilterWeights {
        let key = CacheKey(inCount: inCount, outCount: outCount, kernel: kernel)
        if let found = cache.withLock({ $0[key] }) { return found }
        let weights = FilterWeights(resampling: inCount, to: outCount, kernel: kernel)
        cache.withLock { entries in
            if entries.count >= cacheLimit { entries.removeAll(keepingCapacity: true) }
            entries[key] = weights
        }
        return weights
    }

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
        // Both kernels are exactly zero at and beyond their radius, so the window
        // can hold only the samples strictly inside it.
        self.init(inCount: inCount, outCount: outCount, radius: radius * scale, openWindow: true) { i in
            (Double(i) + 0.5) * ratio
        } weight: { distance in
            function(distance / scale)
        }
    }

    /// Weights for a same-size convolution with a symmetric kernel of the given
    /// radius (in samples); `weight` receives the distance from the centre.
    /// Wide kernels take a while to build (a blur of sigma 100 across 8000
    /// pixels evaluates `weight` about five million times), so this looks at
    /// `cancel` as it goes; weights built under a flag that is set are unfinished.
    init(convolving count: Int, radius: Double, cancel: CancellationFlag = .never, weight: (Double) -> Double) {
        self.init(inCount: count, outCount: count, radius: radius, center: { Double($0) + 0.5 }, cancel: cancel, weight: weight)
    }

    /// With `openWindow`, a window holds only the samples whose centres lie
    /// strictly within `radius` of the output's centre (for kernels that vanish
    /// at the radius); otherwise it is widened to whole samples on both sides.
    /// For a 1.17x lanczos3 shrink that is 8 taps instead of 9, which the
    /// padding below would have made 12.
    init(
        inCount: Int, outCount: Int, radius: Double, openWindow: Bool = false,
        center: (Int) -> Double, cancel: CancellationFlag = .never, weight: (Double) -> Double
    ) {
        self.outCount = outCount
        var windows = [(lo: Int, hi: Int, center: Double)]()
        windows.reserveCapacity(outCount)
        var maxTaps = 1
        for i in 0..<outCount {
            let c = center(i)
            // Sample j is centred at j + 0.5.
            let lo = openWindow
                ? max(0, Int((c - radius - 0.5).rounded(.down)) + 1)
                : max(0, Int((c - radius).rounded(.down)))
            let hi = openWindow
                ? min(inCount, Int((c + radius - 0.5).rounded(.up)))
                : min(inCount, Int((c + radius).rounded(.up)))
            let clampedLo = min(lo, inCount - 1)
            let clampedHi = max(hi, clampedLo + 1)
            windows.append((clampedLo, clampedHi, c))
            maxTaps = max(maxTaps, clampedHi - clampedLo)
        }
        // An even tap count lets both passes take taps in pairs.
        // Pad short filters to a multiple of four taps (the fast horizontal pass
        // takes 16 bytes a step), longer ones to an even count (taps in pairs).
        let padded = maxTaps <= FilterWeights.maxFastTaps - 3 ? (maxTaps + 3) / 4 * 4 : maxTaps + maxTaps % 2
        let taps = min(padded, inCount)
        self.taps = taps
        var starts = [Int](repeating: 0, count: outCount)
        var weights = [Int16](repeating: 0, count: outCount * taps)
        var real = [Double](repeating: 0, count: taps)
        // A weight costs some tens of multiply-adds.
        let poll = RowPoll(cancel, workPerRow: taps * 32)
        for i in 0..<outCount {
            if poll.stop(at: i) { break }
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
        // Horizontal-pass weights, two taps per vector: (w0 w1 w0 w1 w0 w1 w0 w1).
        let pairs = taps / 2
        var pairWeights = [SIMD8<Int16>](repeating: .zero, count: outCount * pairs)
        var blockWeights = pairWeights
        for i in 0..<outCount {
            for j in 0..<pairs {
                let w0 = weights[i * taps + 2 * j], w1 = weights[i * taps + 2 * j + 1]
                pairWeights[i * pairs + j] = SIMD8(w0, w1, w0, w1, w0, w1, w0, w1)
                blockWeights[i * pairs + j] = SIMD8(lowHalf: SIMD4(repeating: w0), highHalf: SIMD4(repeating: w1))
            }
        }
        self.pairWeights = pairWeights
        self.blockWeights = blockWeights
    }

    static func lanczos3(_ x: Double) -> Double {
        let ax = abs(x)
        if ax < 1e-12 { return 1 }
        if ax >= 3 { return 0 }
        let px = Double.pi * ax
        return 3 * sin(px) * sin(px / 3) / (px * px)
    }
}
