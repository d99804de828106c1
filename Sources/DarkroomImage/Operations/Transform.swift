/// Rotation by quarter turns and mirroring.

extension Image {
    /// The image turned clockwise by `quarterTurnsClockwise` × 90°. Any integer is
    /// accepted and taken modulo 4 (so -1 is a quarter turn counter-clockwise).
    public func rotated(quarterTurnsClockwise: Int) -> Image {
        turned(quarterTurnsClockwise, .never)
    }

    /// `rotated(quarterTurnsClockwise:)`, stopped with `ImageError.cancelled`
    /// once `cancellation` is set.
    public func rotated(quarterTurnsClockwise: Int, cancellation: CancellationFlag) throws(ImageError) -> Image {
        try cancellation.checked(turned(quarterTurnsClockwise, cancellation))
    }

    /// `rotated(quarterTurnsClockwise:)`, unfinished if `cancel` is set while
    /// it runs.
    func turned(_ quarterTurnsClockwise: Int, _ cancel: CancellationFlag) -> Image {
        let turns = ((quarterTurnsClockwise % 4) + 4) % 4
        if turns == 0 { return self }
        let w = width, h = height
        let outW = turns == 2 ? w : h
        let outH = turns == 2 ? h : w
        var out = [UInt8](repeating: 255, count: w * h * 4, cancel)
        if cancel.isCancelled { return self }
        // Whole pixels move as 4-byte loads and stores through the byte views
        // (bounds-checked; any bit pattern is a valid SIMD of bytes).
        let src = pixels.span.bytes
        var outSpan = out.mutableSpan
        var dst = outSpan.mutableBytes
        // Source pixel index of output (ox, oy) is base(oy) + ox * step.
        let step: Int
        switch turns {
        case 1: step = -w   // 90° clockwise: (ox, oy) <- (oy, h - 1 - ox)
        case 2: step = -1   // 180°: (ox, oy) <- (w - 1 - ox, h - 1 - oy)
        default: step = w   // 270° clockwise: (ox, oy) <- (w - 1 - oy, ox)
        }
        // Square tiles keep both the reads and the writes within a few pages;
        // a band of them at a time, with a look at the flag before each.
        let tile = 32
        let poll = RowPoll(cancel, workPerRow: outW * 4)
        for ty in Swift.stride(from: 0, to: outH, by: tile) {
            if poll.stop(at: ty) { break }
            Image.turnBand(ty ..< min(ty + tile, outH), tile: tile, turns: turns, step: step, width: w, height: h, outWidth: outW, from: src, into: &dst)
        }
        return Image(width: outW, height: outH, pixels: out)
    }

    /// Output rows `rows` of a turn by `turns` quarter turns of a `width` x
    /// `height` image, tile by tile: output pixel (ox, oy) is source pixel
    /// base(oy) + ox * step. Kept out of line: on its own the loop nest
    /// compiles to about one instruction per pixel fewer (measured).
    @inline(never)
    private static func turnBand(
        _ rows: Range<Int>, tile: Int, turns: Int, step: Int, width w: Int, height h: Int, outWidth outW: Int,
        from src: RawSpan, into dst: inout MutableRawSpan
    ) {
        func base(_ oy: Int) -> Int {
            switch turns {
            case 1: return (h - 1) * w + oy
            case 2: return (h - 1 - oy) * w + (w - 1)
            default: return w - 1 - oy
            }
        }
        for tx in Swift.stride(from: 0, to: outW, by: tile) {
            for oy in rows {
                var s = base(oy) + tx * step
                var o = (oy * outW + tx) * 4
                for _ in tx..<min(tx + tile, outW) {
                    let px = src.unsafeLoadUnaligned(fromByteOffset: s * 4, as: SIMD4<UInt8>.self)
                    dst.storeBytes(of: px, toByteOffset: o, as: SIMD4<UInt8>.self)
                    s += step
                    o += 4
                }
            }
        }
    }

    /// The mirror image: `horizontally` true mirrors left to right, false top to bottom.
    public func flipped(horizontally: Bool) -> Image {
        mirrored(horizontally, .never)
    }

    /// `flipped(horizontally:)`, stopped with `ImageError.cancelled` once
    /// `cancellation` is set.
    public func flipped(horizontally: Bool, cancellation: CancellationFlag) throws(ImageError) -> Image {
        try cancellation.checked(mirrored(horizontally, cancellation))
    }

    /// `flipped(horizontally:)`, unfinished if `cancel` is set while it runs.
    func mirrored(_ horizontally: Bool, _ cancel: CancellationFlag) -> Image {
        let rowLen = width * 4
        let poll = RowPoll(cancel, workPerRow: rowLen)
        guard horizontally else {
            var out = [UInt8]()
            out.reserveCapacity(pixels.count)
            for y in Swift.stride(from: height - 1, through: 0, by: -1) {
                if poll.stop(at: height - 1 - y) { return self }
                out.append(contentsOf: pixels[y * rowLen ..< (y + 1) * rowLen])
            }
            return Image(width: width, height: height, pixels: out)
        }
        // Every pixel is written, so the buffer needs no fill of its own.
        var out = Image.unfilled(count: pixels.count)
        let src = pixels.span.bytes
        var outSpan = out.mutableSpan
        var dst = outSpan.mutableBytes
        for y in 0..<height {
            if poll.stop(at: y) { return self }
            let base = y * rowLen
            for x in 0..<width {
                let px = src.unsafeLoadUnaligned(fromByteOffset: base + x * 4, as: SIMD4<UInt8>.self)
                dst.storeBytes(of: px, toByteOffset: base + (width - 1 - x) * 4, as: SIMD4<UInt8>.self)
            }
        }
        return Image(width: width, height: height, pixels: out)
    }
}
