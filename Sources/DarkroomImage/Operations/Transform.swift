/// Rotation by quarter turns and mirroring.

extension Image {
    /// The image turned clockwise by `quarterTurnsClockwise` × 90°. Any integer is
    /// accepted and taken modulo 4 (so -1 is a quarter turn counter-clockwise).
    public func rotated(quarterTurnsClockwise: Int) -> Image {
        let turns = ((quarterTurnsClockwise % 4) + 4) % 4
        if turns == 0 { return self }
        let w = width, h = height
        let outW = turns == 2 ? w : h
        let outH = turns == 2 ? h : w
        var out = [UInt8](repeating: 255, count: w * h * 4)
        let src = pixels.span
        var dst = out.mutableSpan
        // Walk the output row by row (sequential writes) and gather the source.
        for oy in 0..<outH {
            var o = oy * outW * 4
            for ox in 0..<outW {
                let sx: Int, sy: Int
                switch turns {
                case 1: sx = oy; sy = h - 1 - ox           // 90° clockwise
                case 2: sx = w - 1 - ox; sy = h - 1 - oy   // 180°
                default: sx = w - 1 - oy; sy = ox          // 270° clockwise
                }
                let s = (sy * w + sx) * 4
                dst[o] = src[s]
                dst[o + 1] = src[s + 1]
                dst[o + 2] = src[s + 2]
                o += 4
            }
        }
        return Image(width: outW, height: outH, pixels: out)
    }

    /// The mirror image: `horizontally` true mirrors left to right, false top to bottom.
    public func flipped(horizontally: Bool) -> Image {
        let rowLen = width * 4
        var out = [UInt8]()
        out.reserveCapacity(pixels.count)
        if horizontally {
            out = [UInt8](repeating: 255, count: pixels.count)
            let src = pixels.span
            var dst = out.mutableSpan
            for y in 0..<height {
                let base = y * rowLen
                for x in 0..<width {
                    let s = base + x * 4
                    let d = base + (width - 1 - x) * 4
                    dst[d] = src[s]
                    dst[d + 1] = src[s + 1]
                    dst[d + 2] = src[s + 2]
                }
            }
        } else {
            for y in Swift.stride(from: height - 1, through: 0, by: -1) {
                out.append(contentsOf: pixels[y * rowLen ..< (y + 1) * rowLen])
            }
        }
        return Image(width: width, height: height, pixels: out)
    }
}
