/// Resampling of one-channel images: `GrayImage.resized(to:kernel:)`, behind
/// `GrayImage.thumbnail(_:kernel:)`.
///
/// The geometry and the arithmetic are those of the RGBX resampler in
/// Resample.swift, applied to one channel: the same box pre-shrink rule, the
/// same `FilterWeights`, the same order of the two passes and the same
/// fixed-point passes, so a plane comes out as channel 0 of the RGBX result,
/// byte for byte. The vertical pass and the column sums of the box reduce
/// only stream rows of bytes and take a plane as they are. The horizontal
/// pass takes four rows at a time as the four channels of one RGBX row (R
/// from the first, G from the second...), so every lane of the RGBX pass
/// does useful work and each byte costs what it costs in an RGBX image.

extension GrayImage {
    /// Resamples the image to exactly `size`, ignoring the aspect ratio, as
    /// `Image.resized(to:kernel:cancellation:)` does.
    public func resized(
        to size: Size, kernel: ResampleKernel = .lanczos3, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> GrayImage {
        try Image.checkOutputSize(size, operation: "resize")
        if size.width == width && size.height == height { return self }
        switch kernel {
        case .nearest:
            return try cancellation.checked(resampledNearest(to: size, cancellation))
        case .lanczos3, .bilinear:
            return try cancellation.checked(resampledSeparable(to: size, kernel: kernel, cancellation))
        }
    }

    // MARK: - Nearest

    // As in Resample.swift, a function that takes a `CancellationFlag` stops
    // early once it is set, its result then unfinished.

    func resampledNearest(to size: Size, _ cancel: CancellationFlag = .never) -> GrayImage {
        let outW = size.width, outH = size.height
        var columns = [Int](repeating: 0, count: outW)
        for x in 0..<outW { columns[x] = Image.nearestSource(x, of: outW, in: width) }
        var out = [UInt8](repeating: 0, count: outW * outH)
        let src = pixels.span
        let cols = columns.span
        var dst = out.mutableSpan
        let poll = RowPoll(cancel, workPerRow: outW)
        for y in 0..<outH {
            if poll.stop(at: y) { break }
            let sy = Image.nearestSource(y, of: outH, in: height)
            let row = src.extracting(sy * width ..< (sy + 1) * width)
            let o = y * outW
            for x in 0..<cols.count { dst[o + x] = row[cols[x]] }
        }
        return GrayImage(width: outW, height: outH, pixels: out)
    }

    // MARK: - Separable convolution

    /// `Image.resampledSeparable` on one channel: a box pre-shrink for big
    /// shrinks (same rule), then the kernel.
    func resampledSeparable(to size: Size, kernel: ResampleKernel, _ cancel: CancellationFlag = .never) -> GrayImage {
        var source = self
        if let factor = Image.preShrink(Size(width: width, height: height), to: size) {
            source = boxReduced(factorX: factor.x, factorY: factor.y, cancel)
            if cancel.isCancelled { return source }
        }
        let hWeights = FilterWeights.cached(resampling: source.width, to: size.width, kernel: kernel)
        let vWeights = FilterWeights.cached(resampling: source.height, to: size.height, kernel: kernel)
        return source.convolved(horizontal: hWeights, vertical: vWeights, cancel)
    }

    /// Applies a horizontal and a vertical filter in the order
    /// `Image.convolved` would (`Image.horizontalFirst`); either may be nil
    /// to skip that axis.
    func convolved(horizontal: FilterWeights?, vertical: FilterWeights?, _ cancel: CancellationFlag = .never) -> GrayImage {
        let outW = horizontal?.outCount ?? width
        let outH = vertical?.outCount ?? height
        guard let h = horizontal else {
            guard let v = vertical else { return self }
            return GrayImage(width: width, height: outH, pixels: Image.verticalPass(pixels, rowLength: width, weights: v, cancel))
        }
        guard let v = vertical else {
            return GrayImage(width: outW, height: height, pixels: GrayImage.horizontalPass(pixels, width: width, height: height, weights: h, cancel))
        }
        if Image.horizontalFirst(width: width, height: height, horizontal: h, vertical: v) {
            let mid = GrayImage.horizontalPass(pixels, width: width, height: height, weights: h, cancel)
            if cancel.isCancelled { return self }
            return GrayImage(width: outW, height: outH, pixels: Image.verticalPass(mid, rowLength: outW, weights: v, cancel))
        }
        let mid = Image.verticalPass(pixels, rowLength: width, weights: v, cancel)
        if cancel.isCancelled { return self }
        return GrayImage(width: outW, height: outH, pixels: GrayImage.horizontalPass(mid, width: width, height: outH, weights: h, cancel))
    }

    /// Filters every row of a `width` x `height` plane: output sample i of a
    /// row is the weighted sum of `taps` bytes from `starts[i]` on.
    ///
    /// Rows 4q to 4q + 3 become the four channels of row q of an RGBX-shaped
    /// buffer (`interleavedRows`), which the RGBX horizontal pass filters
    /// with its fourth channel filtered like the others; the result is split
    /// back into rows (`deinterleavedRows`). Each byte gets exactly the
    /// arithmetic of the RGBX pass, and where `Image.convolved` takes
    /// `horizontalPassWide` (tap counts that are multiples of four, up to
    /// `FilterWeights.maxFastTaps`), so does this: the rows are widened to
    /// its 16-bit lanes as they are interleaved.
    static func horizontalPass(
        _ source: [UInt8], width: Int, height: Int, weights fw: FilterWeights, _ cancel: CancellationFlag = .never
    ) -> [UInt8] {
        let quads = (height + 3) / 4
        if fw.taps % 4 == 0 && fw.taps <= FilterWeights.maxFastTaps {
            let lanes = interleavedLanes(source, width: width, height: height)
            var filtered = [UInt8](repeating: 0, count: fw.outCount * 4 * quads)
            Image.horizontalPassWide(lanes, width: width, height: quads, weights: fw, opaquePadding: false, into: &filtered, cancel: cancel)
            return deinterleavedRows(filtered, width: fw.outCount, height: height)
        }
        let pixels = interleavedRows(source, width: width, height: height)
        let filtered = Image.horizontalPass(pixels, width: width, height: quads, weights: fw, opaquePadding: false, cancel: cancel)
        return deinterleavedRows(filtered, width: fw.outCount, height: height)
    }

    /// The lane sums of four vectors, as one vector: lane j is the sum of
    /// the lanes of the j-th. Interleaving 32- and then 64-bit lanes of pairs
    /// and adding halves the lanes left per vector at each step (the classic
    /// transpose-and-add).
    @inline(__always)
    static func sums4<T: SIMDScalar & FixedWidthInteger>(_ a: SIMD4<T>, _ b: SIMD4<T>, _ c: SIMD4<T>, _ d: SIMD4<T>) -> SIMD4<T> {
        // (a0+a2, b0+b2, a1+a3, b1+b3) and the same of c and d.
        let ab = SIMD4(a[0], b[0], a[1], b[1]) &+ SIMD4(a[2], b[2], a[3], b[3])
        let cd = SIMD4(c[0], d[0], c[1], d[1]) &+ SIMD4(c[2], d[2], c[3], d[3])
        return SIMD4(lowHalf: ab.lowHalf, highHalf: cd.lowHalf) &+ SIMD4(lowHalf: ab.highHalf, highHalf: cd.highHalf)
    }

    // MARK: - Box reduce

    /// `Image.boxReduced` on one channel: the mean of each `factorX` x
    /// `factorY` block (smaller at the right and bottom edges), rounded the
    /// same way.
    func boxReduced(factorX: Int, factorY: Int, _ cancel: CancellationFlag = .never) -> GrayImage {
        guard factorX * factorY <= 257 else {
            return boxReducedWide(factorX: factorX, factorY: factorY, cancel)
        }
        let poll = RowPoll(cancel, workPerRow: width * factorY)
        let outW = (width + factorX - 1) / factorX
        let outH = (height + factorY - 1) / factorY
        var out = [UInt8](repeating: 0, count: outW * outH)
        // Eight zero sums past the row for the last block's window.
        var sums = [UInt16](repeating: 0, count: width + 8)
        let fullCount = factorX * factorY
        let shiftBits = fullCount & (fullCount - 1) == 0 ? fullCount.trailingZeroBitCount : -1
        // Blocks of up to 8 columns are summed as windows of 8 lanes with the
        // lanes past the block masked off, four blocks at a time.
        let mask = SIMD8<UInt16>(0, 1, 2, 3, 4, 5, 6, 7) .< SIMD8(repeating: UInt16(truncatingIfNeeded: factorX))
        let groups = factorX <= 8 ? width / (4 * factorX) : 0
        for oy in 0..<outH {
            if poll.stop(at: oy) { break }
            let y0 = oy * factorY
            let y1 = min(y0 + factorY, height)
            Image.columnSums(pixels, rowLength: width, rows: y0..<y1, into: &sums)
            let sumBytes = sums.span.bytes
            var outView = out.mutableSpan
            var dst = outView.mutableBytes
            let rows = y1 - y0
            let full = Image.boxDivider(rows * factorX)
            let shifted = rows == factorY && shiftBits >= 0
            let o = oy * outW
            for g in 0..<groups {
                let x = g &* 4 &* factorX
                let block = sumBytes.extracting(x &* 2 ..< (x &+ 3 &* factorX &+ 8) &* 2)
                // A block's sum in two 32-bit lanes' worth of pairs.
                @inline(__always)
                func window(_ j: Int) -> SIMD4<UInt32> {
                    let v = block.unsafeLoadUnaligned(fromByteOffset: j &* factorX &* 2, as: SIMD8<UInt16>.self).replacing(with: 0, where: .!mask)
                    return SIMD4<UInt32>(truncatingIfNeeded: v.lowHalf) &+ SIMD4<UInt32>(truncatingIfNeeded: v.highHalf)
                }
                let total = GrayImage.sums4(window(0), window(1), window(2), window(3))
                if shifted {
                    let v = (total &+ SIMD4(repeating: UInt32(truncatingIfNeeded: fullCount / 2))) &>> UInt32(truncatingIfNeeded: shiftBits)
                    dst.storeBytes(of: SIMD4<UInt8>(truncatingIfNeeded: v), toByteOffset: o &+ g &* 4, as: SIMD4<UInt8>.self)
                } else {
                    for j in 0..<4 {
                        let q = ((UInt64(total[j]) &+ full.half) &* full.magic) &>> 32
                        dst.storeBytes(of: UInt8(truncatingIfNeeded: q), toByteOffset: o &+ g &* 4 &+ j, as: UInt8.self)
                    }
                }
            }
            let s = sums.span
            for ox in groups * 4 ..< outW {
                let x0 = ox * factorX
                let x1 = min(x0 + factorX, width)
                var total = 0
                for x in x0..<x1 { total &+= Int(s[x]) }
                let (half, magic) = x1 - x0 == factorX ? full : Image.boxDivider(rows * (x1 - x0))
                let q = ((UInt64(total) &+ half) &* magic) &>> 32
                dst.storeBytes(of: UInt8(truncatingIfNeeded: q), toByteOffset: o &+ ox, as: UInt8.self)
            }
        }
        return GrayImage(width: outW, height: outH, pixels: out)
    }

    /// `boxReduced` for blocks of more than 257 pixels, with 32-bit sums.
    func boxReducedWide(factorX: Int, factorY: Int, _ cancel: CancellationFlag = .never) -> GrayImage {
        let outW = (width + factorX - 1) / factorX
        let outH = (height + factorY - 1) / factorY
        var out = [UInt8](repeating: 0, count: outW * outH)
        var sums = [UInt32](repeating: 0, count: width)
        let src = pixels.span
        let poll = RowPoll(cancel, workPerRow: width * factorY)
        for oy in 0..<outH {
            if poll.stop(at: oy) { break }
            let y0 = oy * factorY
            let y1 = min(y0 + factorY, height)
            do {
                var s = sums.mutableSpan
                for x in 0..<s.count { s[x] = 0 }
                for y in y0..<y1 {
                    let row = src.extracting(y * width ..< (y + 1) * width)
                    for x in 0..<min(s.count, row.count) { s[x] &+= UInt32(row[x]) }
                }
            }
            let s = sums.span
            var dst = out.mutableSpan
            let rows = y1 - y0
            for ox in 0..<outW {
                let x0 = ox * factorX
                let x1 = min(x0 + factorX, width)
                var total: UInt32 = 0
                for x in x0..<x1 { total &+= s[x] }
                let count = UInt32(rows * (x1 - x0))
                dst[oy * outW + ox] = UInt8(truncatingIfNeeded: (total + count / 2) / count)
            }
        }
        return GrayImage(width: outW, height: outH, pixels: out)
    }
}
