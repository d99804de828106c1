/// Pixel transforms for the eight EXIF orientations.

extension Image {
    /// The upright picture of pixels stored with `orientation`: for example,
    /// `.right` (EXIF 6) rotates 90° clockwise. `.up` returns the image unchanged.
    /// Each pixel's fourth byte moves with it (the alpha, where a decode
    /// kept it).
    ///
    /// Each output row is read from the source along a straight line (a row,
    /// backwards row, or column). For the transposing orientations the output is
    /// written in bands of rows so that source reads stay sequential.
    public func applying(_ orientation: Orientation) -> Image {
        oriented(orientation, .never)
    }

    /// `applying(_:)`, stopped with `ImageError.cancelled` once `cancellation`
    /// is set.
    public func applying(_ orientation: Orientation, cancellation: CancellationFlag) throws(ImageError) -> Image {
        try cancellation.checked(oriented(orientation, cancellation))
    }

    /// `applying(_:)`, unfinished if `cancel` is set while it runs.
    func oriented(_ orientation: Orientation, _ cancel: CancellationFlag) -> Image {
        if orientation == .up { return self }
        let w = width, h = height
        let upright = orientation.uprightSize(ofStored: Size(width: w, height: h))
        let uw = upright.width, uh = upright.height
        // For upright row v: source pixel index of column 0, and the step per column.
        func line(_ v: Int) -> (start: Int, step: Int) {
            switch orientation {
            case .up: return (v * w, 1)
            case .upMirrored: return (v * w + w - 1, -1)
            case .down: return ((h - 1 - v) * w + w - 1, -1)
            case .downMirrored: return ((h - 1 - v) * w, 1)
            case .leftMirrored: return (v, w)
            case .right: return ((h - 1) * w + v, -w)
            case .rightMirrored: return ((h - 1) * w + w - 1 - v, -w)
            case .left: return (w - 1 - v, w)
            }
        }
        var out = [UInt8](repeating: 255, count: uw * uh * Image.bytesPerPixel, cancel)
        if cancel.isCancelled { return self }
        let src = pixels.span
        var dst = out.mutableSpan
        let poll = RowPoll(cancel, workPerRow: uw * 4)
        if !orientation.swapsDimensions {
            for v in 0..<uh {
                if poll.stop(at: v) { break }
                let (start, step) = line(v)
                var s = start * 4
                var d = v * uw * 4
                let ds = step * 4
                for _ in 0..<uw {
                    dst[d] = src[s]
                    dst[d + 1] = src[s + 1]
                    dst[d + 2] = src[s + 2]
                    dst[d + 3] = src[s + 3]
                    d += 4
                    s += ds
                }
            }
        } else {
            // Bands of `band` output rows, filled column by column: within a band,
            // consecutive output rows read adjacent source pixels, so reads stay
            // sequential while `band` output rows are written in parallel.
            let band = 16
            var v0 = 0
            while v0 < uh {
                if poll.stop(at: v0) { break }
                let v1 = min(v0 + band, uh)
                let (start, step) = line(v0)
                // Moving one output row down moves one source pixel along the stored row.
                let dv = line(v0 + 1 < uh ? v0 + 1 : v0).start - start
                let rowBytes = uw * 4
                for u in 0..<uw {
                    var s = (start + u * step) * 4
                    var d = (v0 * uw + u) * 4
                    for _ in v0..<v1 {
                        dst[d] = src[s]
                        dst[d + 1] = src[s + 1]
                        dst[d + 2] = src[s + 2]
                        dst[d + 3] = src[s + 3]
                        d += rowBytes
                        s += dv * 4
                    }
                }
                v0 = v1
            }
        }
        return Image(width: uw, height: uh, pixels: out)
    }
}

extension Orientation {
    /// The rectangle of the stored image that becomes `rect` of the upright image
    /// once this orientation is applied. `stored` is the stored image size.
    func storedRect(forUpright rect: Rect, stored: Size) -> Rect {
        let w = stored.width, h = stored.height
        let u0 = rect.x, v0 = rect.y, uw = rect.width, vh = rect.height
        switch self {
        case .up: return rect
        case .upMirrored: return Rect(x: w - (u0 + uw), y: v0, width: uw, height: vh)
        case .down: return Rect(x: w - (u0 + uw), y: h - (v0 + vh), width: uw, height: vh)
        case .downMirrored: return Rect(x: u0, y: h - (v0 + vh), width: uw, height: vh)
        case .leftMirrored: return Rect(x: v0, y: u0, width: vh, height: uw)
        case .right: return Rect(x: v0, y: h - (u0 + uw), width: vh, height: uw)
        case .rightMirrored: return Rect(x: w - (v0 + vh), y: h - (u0 + uw), width: vh, height: uw)
        case .left: return Rect(x: w - (v0 + vh), y: u0, width: vh, height: uw)
        }
    }
}
