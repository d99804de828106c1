import Foundation

/// Neighbourhood filters: gaussian blur, unsharp mask, pixelate. Each throws
/// `ImageError.cancelled` once its `CancellationFlag` is set.

extension Image {
    /// The largest blur radius accepted, in pixels of standard deviation.
    public static let maxBlurSigma = 100.0

    /// A separable gaussian blur with standard deviation `sigma` pixels (0 < sigma
    /// <= 100). The kernel spans ±3 sigma; near the edges the part of the kernel
    /// outside the image is dropped and the rest renormalised. With
    /// `keepingAlpha` the fourth byte is an alpha and is blurred like the
    /// colour (see `Image.scaled`).
    public func blurred(sigma: Double, keepingAlpha: Bool = false, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        guard sigma.isFinite, sigma > 0, sigma <= Image.maxBlurSigma else {
            throw ImageError(.invalidArgument, "blur sigma \(sigma) must be greater than 0 and at most \(Image.maxBlurSigma)")
        }
        let radius = max(1, 3 * sigma)
        let twoSigmaSquared = 2 * sigma * sigma
        func gaussian(_ d: Double) -> Double { exp(-d * d / twoSigmaSquared) }
        let h = FilterWeights(convolving: width, radius: radius, cancel: cancellation, weight: gaussian)
        try cancellation.check()
        // A square image (after `crop:square`, say) blurs both ways alike.
        let v = height == width ? h : FilterWeights(convolving: height, radius: radius, cancel: cancellation, weight: gaussian)
        try cancellation.check()
        return try cancellation.checked(convolved(horizontal: h, vertical: v, keepingAlpha: keepingAlpha, cancellation))
    }

    /// Unsharp mask: `self + amount × (self − blurred(sigma))`, per channel,
    /// saturating. `sigma` as for `blurred`; `amount` finite in 0...10. The
    /// fourth byte is kept as it is: the padding, or an alpha, whose shape
    /// sharpening leaves alone.
    public func sharpened(sigma: Double, amount: Double = 1.0, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        guard amount.isFinite, amount >= 0, amount <= 10 else {
            throw ImageError(.invalidArgument, "sharpen amount \(amount) must be between 0 and 10")
        }
        let blur = try blurred(sigma: sigma, cancellation: cancellation)
        let a = Int32((amount * 256).rounded())  // 8-bit fixed point
        // Written from the source as it is read, a megabyte between two looks
        // at the flag: no copy of the source made first.
        var out = Image.unfilled(count: pixels.count)
        let src = pixels.span
        let b = blur.pixels.span
        var dst = out.mutableSpan
        let count = min(dst.count, b.count, src.count)
        var start = 0
        while start < count {
            if cancellation.poll() { throw ImageError.cancelled }
            let end = min(count, start + CancellationFlag.workPerPoll)
            for i in start..<end {
                let o = Int32(src[i])
                let v = o &+ (((o &- Int32(b[i])) &* a &+ 128) &>> 8)
                dst[i] = UInt8(truncatingIfNeeded: min(max(v, 0), 255))
            }
            start = end
        }
        var i = 3
        while i < count { dst[i] = src[i]; i += 4 }
        return Image(width: width, height: height, pixels: out)
    }

    /// Replaces each `blockSize` × `blockSize` block (aligned to the top-left
    /// corner; partial at the right and bottom edges) by its mean colour.
    /// `blockSize` must be at least 1; blocks larger than the image cover it whole.
    /// All four bytes are averaged, so an alpha in the fourth is pixelated with
    /// the colour.
    public func pixelated(blockSize: Int, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        guard blockSize >= 1 else {
            throw ImageError(.invalidArgument, "pixelate block size \(blockSize) must be at least 1")
        }
        if blockSize == 1 { return self }
        let fx = min(blockSize, width), fy = min(blockSize, height)
        let means = try cancellation.checked(boxReduced(factorX: fx, factorY: fy, cancellation))
        var out = [UInt8](repeating: 255, count: pixels.count, cancellation)
        try cancellation.check()
        let m = means.pixels.span
        var dst = out.mutableSpan
        let poll = RowPoll(cancellation, workPerRow: width * 4)
        for y in 0..<height {
            if poll.stop(at: y) { throw ImageError.cancelled }
            let mrow = (y / fy) * means.width
            var o = y * width * 4
            for x in 0..<width {
                let s = (mrow + x / fx) * 4
                dst[o] = m[s]
                dst[o + 1] = m[s + 1]
                dst[o + 2] = m[s + 2]
                dst[o + 3] = m[s + 3]
                o += 4
            }
        }
        return Image(width: width, height: height, pixels: out)
    }
}
