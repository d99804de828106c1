/// An image with transparency: its colour and its alpha, kept apart while a
/// pipeline runs.
///
/// `color` holds the straight (not premultiplied) colour, its padding byte
/// 255 as in every `Image`. `alpha` is an `Image` of the same size whose
/// red, green and blue each hold the pixel's alpha (0 transparent, 255
/// opaque): every operation that moves or filters pixels (scale, crop,
/// rotate, flip, pad, blur, pixelate) then does to the alpha exactly what
/// it does to the colour, with the same code and the same rounding.
///
/// Operations that mix neighbouring pixels run on colour premultiplied by
/// its alpha (`filtered`), as libvips and sharp do: otherwise the colour
/// under a transparent pixel, which nobody sees and which may be anything,
/// would bleed into its visible neighbours as a dark or bright fringe.
public struct AlphaImage: Sendable, Equatable {
    public let color: Image
    public let alpha: Image

    public init(color: Image, alpha: Image) {
        precondition(color.width == alpha.width && color.height == alpha.height, "colour and alpha sizes differ")
        self.color = color
        self.alpha = alpha
    }

    /// An opaque image: every alpha 255.
    public init(opaque color: Image) {
        self.init(color: color, alpha: Image(width: color.width, height: color.height, red: 255, green: 255, blue: 255))
    }

    public var width: Int { color.width }
    public var height: Int { color.height }

    /// Splits pixels whose fourth byte is a straight alpha (what a decode
    /// that keeps alpha gives, `DecodeOptions.keepAlpha`) into colour and
    /// alpha. Stops with `ImageError.cancelled` once `cancellation` is set.
    public init(splitting rgba: Image, cancellation: CancellationFlag = .never) throws(ImageError) {
        var color = Image.unfilled(count: rgba.pixels.count)
        var alpha = Image.unfilled(count: rgba.pixels.count)
        let src = rgba.pixels.span
        var c = color.mutableSpan, a = alpha.mutableSpan
        let rowBytes = rgba.width * 4
        let poll = RowPoll(cancellation, workPerRow: rowBytes)
        for y in 0..<rgba.height {
            if poll.stop(at: y) { throw ImageError.cancelled }
            var i = y * rowBytes
            let end = i + rowBytes
            while i < end {
                let value = src[i + 3]
                c[i] = src[i]; c[i + 1] = src[i + 1]; c[i + 2] = src[i + 2]; c[i + 3] = 255
                a[i] = value; a[i + 1] = value; a[i + 2] = value; a[i + 3] = 255
                i += 4
            }
        }
        self.init(color: Image(width: rgba.width, height: rgba.height, pixels: color),
                  alpha: Image(width: rgba.width, height: rgba.height, pixels: alpha))
    }

    /// Whether every pixel is opaque: such an image is written as its
    /// colour alone.
    public var isOpaque: Bool {
        let a = alpha.pixels.span
        var i = 0
        while i < a.count {
            if a[i] != 255 { return false }
            i += 4
        }
        return true
    }

    /// The colour with each pixel's alpha in its fourth byte: what the
    /// encoders of formats with alpha read.
    public func interleaved(cancellation: CancellationFlag = .never) throws(ImageError) -> [UInt8] {
        try combined(cancellation) { c, a in (c.0, c.1, c.2, a) }
    }

    /// The image laid over `background` as `(c * a + bg * (255 - a) + 127) / 255`,
    /// the formula every decoder composites with: what a format without
    /// alpha (JPEG) is written from.
    public func flattened(
        onto background: (UInt8, UInt8, UInt8), cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        let pixels = try combined(cancellation) { c, a in
            if a == 255 { return (c.0, c.1, c.2, 255) }
            let alpha = UInt32(a), rest = 255 - UInt32(a)
            func lay(_ c: UInt8, _ bg: UInt8) -> UInt8 { UInt8(truncatingIfNeeded: (UInt32(c) * alpha + UInt32(bg) * rest + 127) / 255) }
            return (lay(c.0, background.0), lay(c.1, background.1), lay(c.2, background.2), 255)
        }
        return Image(width: width, height: height, pixels: pixels)
    }

    /// Runs an operation that mixes neighbouring pixels (a resample, a
    /// blur) on the colour premultiplied by its alpha, and `alphaOperation`
    /// (the same operation, or none for one that leaves the shape as it is)
    /// on the alpha, then divides the colour by the new alpha again. A
    /// pixel left fully transparent gets colour 0.
    public func filtered(
        cancellation: CancellationFlag = .never,
        _ operation: (Image) throws(ImageError) -> Image,
        alpha alphaOperation: ((Image) throws(ImageError) -> Image)? = nil
    ) throws(ImageError) -> AlphaImage {
        let premultiplied = Image(width: width, height: height, pixels: try combined(cancellation) { c, a in
            if a == 255 { return (c.0, c.1, c.2, 255) }
            let alpha = UInt32(a)
            func times(_ c: UInt8) -> UInt8 { UInt8(truncatingIfNeeded: (UInt32(c) * alpha + 127) / 255) }
            return (times(c.0), times(c.1), times(c.2), 255)
        })
        let color = try operation(premultiplied)
        let alpha = try alphaOperation.map { (op) throws(ImageError) -> Image in try op(self.alpha) } ?? self.alpha
        guard color.width == alpha.width, color.height == alpha.height else {
            throw ImageError(.invalidArgument, "the operation made colour \(color.width)x\(color.height) and alpha \(alpha.width)x\(alpha.height)")
        }
        let straight = try AlphaImage(color: color, alpha: alpha).combined(cancellation) { c, a in
            if a == 255 { return (c.0, c.1, c.2, 255) }
            if a == 0 { return (0, 0, 0, 255) }
            let alpha = UInt32(a)
            func divided(_ c: UInt8) -> UInt8 { UInt8(truncatingIfNeeded: min(255, (UInt32(c) * 255 + alpha / 2) / alpha)) }
            return (divided(c.0), divided(c.1), divided(c.2), 255)
        }
        return AlphaImage(color: Image(width: color.width, height: color.height, pixels: straight), alpha: alpha)
    }

    /// Runs an operation that only moves pixels (a crop, a rotation, a
    /// flip) on the colour and on the alpha alike.
    public func moved(_ operation: (Image) throws(ImageError) -> Image) throws(ImageError) -> AlphaImage {
        let color = try operation(color)
        let alpha = try operation(alpha)
        guard color.width == alpha.width, color.height == alpha.height else {
            throw ImageError(.invalidArgument, "the operation made colour \(color.width)x\(color.height) and alpha \(alpha.width)x\(alpha.height)")
        }
        return AlphaImage(color: color, alpha: alpha)
    }

    /// Runs an operation on the colour only (a colour filter): the shape
    /// stays as it is.
    public func recolored(_ operation: (Image) throws(ImageError) -> Image) throws(ImageError) -> AlphaImage {
        AlphaImage(color: try operation(color), alpha: alpha)
    }

    /// The window `Image.detailWindow` picks, judged on the picture as it
    /// is seen over `Source.background`.
    public func detailWindow(_ size: Size, cancellation: CancellationFlag = .never) throws(ImageError) -> Rect {
        try flattened(onto: Source.background, cancellation: cancellation).detailWindow(size, cancellation: cancellation)
    }

    /// The window of `size` placed by `gravity` (`smart`: the most detail).
    public func window(_ size: Size, gravity: Gravity, cancellation: CancellationFlag = .never) throws(ImageError) -> Rect {
        gravity == .smart ? try detailWindow(size, cancellation: cancellation)
                          : gravity.place(size, in: Size(width: width, height: height))
    }

    /// An aspect-fill copy at exactly `size`, as `Image.thumbnail` makes
    /// it: the region `Image.fillRegion` keeps, placed by `gravity`, cut out
    /// and resampled, colour premultiplied.
    public func thumbnail(
        _ size: Size, gravity: Gravity = .center, kernel: ResampleKernel = .lanczos3, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> AlphaImage {
        try Image.checkOutputSize(size, operation: "thumbnail")
        let region = Image.fillRegion(of: Size(width: width, height: height), for: size)
        let rect = try window(region, gravity: gravity, cancellation: cancellation)
        let resize = { (image: Image) throws(ImageError) -> Image in try image.resized(to: size, kernel: kernel, cancellation: cancellation) }
        return try moved { (image: Image) throws(ImageError) -> Image in try image.cropped(to: rect, cancellation: cancellation) }
            .filtered(cancellation: cancellation, resize, alpha: resize)
    }

    /// One pass over colour and alpha together, writing four bytes a pixel.
    private func combined(
        _ cancellation: CancellationFlag,
        _ pixel: ((UInt8, UInt8, UInt8), UInt8) -> (UInt8, UInt8, UInt8, UInt8)
    ) throws(ImageError) -> [UInt8] {
        var out = Image.unfilled(count: color.pixels.count)
        let c = color.pixels.span, a = alpha.pixels.span
        var dst = out.mutableSpan
        let rowBytes = width * 4
        let poll = RowPoll(cancellation, workPerRow: rowBytes)
        for y in 0..<height {
            if poll.stop(at: y) { throw ImageError.cancelled }
            var i = y * rowBytes
            let end = i + rowBytes
            while i < end {
                let p = pixel((c[i], c[i + 1], c[i + 2]), a[i])
                dst[i] = p.0; dst[i + 1] = p.1; dst[i + 2] = p.2; dst[i + 3] = p.3
                i += 4
            }
        }
        return out
    }
}
