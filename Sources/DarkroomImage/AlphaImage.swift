/// An image with transparency: each pixel's straight (not premultiplied)
/// colour in its first three bytes and its alpha (0 transparent, 255
/// opaque) in the fourth, where an opaque `Image` keeps its padding.
///
/// One buffer, as decoders that keep alpha give it (`DecodeOptions.keepAlpha`)
/// and as the PNG, WebP and AVIF encoders read it. The operations work on
/// it as they do on an opaque image, told to treat the fourth byte as an
/// alpha (`keepingAlpha`): it is resampled, blurred and pixelated like the
/// colour, with the same code and the same rounding, and moved with its
/// pixel by crops, rotations, flips and the glitch's bands.
///
/// Operations that mix neighbouring pixels run on colour premultiplied by
/// its alpha (`filtered`), as libvips and sharp do: otherwise the colour
/// under a transparent pixel, which nobody sees and which may be anything,
/// would bleed into its visible neighbours as a dark or bright fringe.
public struct AlphaImage: Sendable, Equatable {
    /// The pixels: straight colour, alpha in the fourth byte.
    public let rgba: Image

    public init(rgba: Image) {
        self.rgba = rgba
    }

    /// An opaque image: every alpha 255, which is its padding already.
    public init(opaque color: Image) {
        self.init(rgba: color)
    }

    /// The colour of `color` with the alpha `alpha` holds in its red
    /// channel (`alpha` as the `alpha` property gives it).
    public init(color: Image, alpha: Image) {
        precondition(color.width == alpha.width && color.height == alpha.height, "colour and alpha sizes differ")
        var pixels = color.pixels
        let a = alpha.pixels.span
        var i = 3
        while i < pixels.count { pixels[i] = a[i - 3]; i += 4 }
        self.init(rgba: Image(width: color.width, height: color.height, pixels: pixels))
    }

    public var width: Int { rgba.width }
    public var height: Int { rgba.height }

    /// The colour alone, every pixel opaque: for an image that `isOpaque`,
    /// its own pixels, not a copy.
    public var color: Image {
        if isOpaque { return rgba }
        var pixels = rgba.pixels
        var i = 3
        while i < pixels.count { pixels[i] = 255; i += 4 }
        return Image(width: width, height: height, pixels: pixels)
    }

    /// A picture of the alpha: an opaque image whose red, green and blue
    /// each hold it.
    public var alpha: Image {
        var pixels = Image.unfilled(count: rgba.pixels.count)
        let src = rgba.pixels.span
        var i = 0
        while i < pixels.count {
            let value = src[i + 3]
            pixels[i] = value; pixels[i + 1] = value; pixels[i + 2] = value; pixels[i + 3] = 255
            i += 4
        }
        return Image(width: width, height: height, pixels: pixels)
    }

    /// Whether every pixel is opaque: such an image is written as its
    /// colour alone.
    public var isOpaque: Bool {
        let a = rgba.pixels.span
        var i = 3
        while i < a.count {
            if a[i] != 255 { return false }
            i += 4
        }
        return true
    }

    /// Whether every pixel's colour is gray (its three bytes equal), clear
    /// pixels' too: such an image is written as gray + alpha where the
    /// format has it. Stops at the first pixel that is not.
    public var isGray: Bool {
        let p = rgba.pixels.span
        var i = 0
        while i < p.count {
            if p[i] != p[i + 1] || p[i] != p[i + 2] { return false }
            i += 4
        }
        return true
    }

    /// The image laid over `background` as `(c * a + bg * (255 - a) + 127) / 255`,
    /// the formula every decoder composites with: what a format without
    /// alpha (JPEG) is written from.
    public func flattened(
        onto background: (UInt8, UInt8, UInt8), cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        try mapped(rgba, cancellation) { c, a in
            (AlphaImage.laid(c.0, alpha: a, over: background.0), AlphaImage.laid(c.1, alpha: a, over: background.1),
             AlphaImage.laid(c.2, alpha: a, over: background.2), 255)
        }
    }

    /// One colour byte `c` at opacity `alpha` laid over `background`:
    /// `(c * a + bg * (255 - a) + 127) / 255`, the formula every decoder
    /// composites with (`c` itself when opaque).
    @inline(__always)
    static func laid(_ c: UInt8, alpha: UInt8, over background: UInt8) -> UInt8 {
        if alpha == 255 { return c }
        let a = UInt32(alpha)
        return UInt8(truncatingIfNeeded: (UInt32(c) * a + UInt32(background) * (255 - a) + 127) / 255)
    }

    /// Runs an operation that mixes neighbouring pixels (a resample, a
    /// blur) on the colour premultiplied by its alpha, then divides the
    /// colour by the new alpha again. `operation` gets the premultiplied
    /// pixels with the alpha in their fourth byte, and treats that byte as
    /// an alpha (`keepingAlpha`): filtered with the colour, or kept where it
    /// is for an operation that leaves the shape alone (a sharpen). A pixel
    /// left fully transparent gets colour 0.
    ///
    /// Consuming: an image nothing else holds is premultiplied in place,
    /// so a filter costs what it costs on an opaque image, its source and
    /// its result.
    public consuming func filtered(
        cancellation: CancellationFlag = .never, _ operation: (Image) throws(ImageError) -> Image
    ) throws(ImageError) -> AlphaImage {
        var premultiplied = (consume self).rgba
        try AlphaImage.premultiply(&premultiplied.pixels, width: premultiplied.width, cancellation)
        // Consumed, so that an operation that hands its input back (a
        // resize to the same size) leaves the result's pixels unshared.
        var result = try operation(consume premultiplied)
        try AlphaImage.divide(&result.pixels, width: result.width, cancellation)
        return AlphaImage(rgba: result)
    }

    /// Runs an operation that only moves pixels (a crop, a rotation, a
    /// flip), or one that changes the colour alone (a colour filter, a
    /// profile conversion): each keeps every pixel's fourth byte with it.
    public func moved(_ operation: (Image) throws(ImageError) -> Image) throws(ImageError) -> AlphaImage {
        AlphaImage(rgba: try operation(rgba))
    }

    /// The window `Image.detailWindow` picks, judged on the picture as it
    /// is seen over `Source.background`: the same window as on
    /// `flattened(onto: Source.background)`, each sampled pixel laid over
    /// it as it is read, without the flattened copy.
    public func detailWindow(_ size: Size, cancellation: CancellationFlag = .never) throws(ImageError) -> Rect {
        let pixels = rgba.pixels, background = Source.background
        return try Image.detailWindow(size, in: Size(width: width, height: height), cancellation: cancellation) { i in
            let p = i * Image.bytesPerPixel, a = pixels[p + 3]
            func lay(_ c: UInt8, _ bg: UInt8) -> Int32 { Int32(AlphaImage.laid(c, alpha: a, over: bg)) }
            return (77 * lay(pixels[p], background.0) + 150 * lay(pixels[p + 1], background.1) + 29 * lay(pixels[p + 2], background.2)) >> 8
        }
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
        return try moved { (image: Image) throws(ImageError) -> Image in try image.cropped(to: rect, cancellation: cancellation) }
            .filtered(cancellation: cancellation) { (image: Image) throws(ImageError) -> Image in
                try image.resized(to: size, kernel: kernel, keepingAlpha: true, cancellation: cancellation)
            }
    }

    /// Straight colour to premultiplied, in place: each colour byte times
    /// its pixel's alpha, rounded.
    private static func premultiply(_ pixels: inout [UInt8], width: Int, _ cancellation: CancellationFlag) throws(ImageError) {
        try inPlace(&pixels, width: width, cancellation) { p, i in
            let a = p[i + 3]
            guard a != 255 else { return }
            let alpha = UInt32(a)
            func times(_ c: UInt8) -> UInt8 { UInt8(truncatingIfNeeded: (UInt32(c) * alpha + 127) / 255) }
            p[i] = times(p[i]); p[i + 1] = times(p[i + 1]); p[i + 2] = times(p[i + 2])
        }
    }

    /// Premultiplied colour back to straight, in place: each colour byte
    /// divided by its pixel's alpha (rounded, at most 255); colour 0 where
    /// the alpha is 0.
    private static func divide(_ pixels: inout [UInt8], width: Int, _ cancellation: CancellationFlag) throws(ImageError) {
        try inPlace(&pixels, width: width, cancellation) { p, i in
            let a = p[i + 3]
            if a == 0 {
                p[i] = 0; p[i + 1] = 0; p[i + 2] = 0
            } else if a != 255 {
                let alpha = UInt32(a)
                func divided(_ c: UInt8) -> UInt8 { UInt8(truncatingIfNeeded: min(255, (UInt32(c) * 255 + alpha / 2) / alpha)) }
                p[i] = divided(p[i]); p[i + 1] = divided(p[i + 1]); p[i + 2] = divided(p[i + 2])
            }
        }
    }

    /// One pass over the pixels of rows `width` pixels long, in place:
    /// `pixel` gets the buffer and the offset of each pixel's first byte.
    @inline(__always)
    private static func inPlace(
        _ pixels: inout [UInt8], width: Int, _ cancellation: CancellationFlag, _ pixel: (inout MutableSpan<UInt8>, Int) -> Void
    ) throws(ImageError) {
        let rowBytes = width * 4
        guard rowBytes > 0 else { return }
        var p = pixels.mutableSpan
        let poll = RowPoll(cancellation, workPerRow: rowBytes)
        for y in 0..<(p.count / rowBytes) {
            if poll.stop(at: y) { throw ImageError.cancelled }
            var i = y * rowBytes
            let end = i + rowBytes
            while i < end {
                pixel(&p, i)
                i += 4
            }
        }
    }

    /// One pass over `image`'s pixels, writing four bytes a pixel from its
    /// colour and its fourth byte.
    private func mapped(
        _ image: Image, _ cancellation: CancellationFlag,
        _ pixel: ((UInt8, UInt8, UInt8), UInt8) -> (UInt8, UInt8, UInt8, UInt8)
    ) throws(ImageError) -> Image {
        var out = Image.unfilled(count: image.pixels.count)
        let src = image.pixels.span
        var dst = out.mutableSpan
        let rowBytes = image.width * 4
        let poll = RowPoll(cancellation, workPerRow: rowBytes)
        for y in 0..<image.height {
            if poll.stop(at: y) { throw ImageError.cancelled }
            var i = y * rowBytes
            let end = i + rowBytes
            while i < end {
                let p = pixel((src[i], src[i + 1], src[i + 2]), src[i + 3])
                dst[i] = p.0; dst[i + 1] = p.1; dst[i + 2] = p.2; dst[i + 3] = p.3
                i += 4
            }
        }
        return Image(width: image.width, height: image.height, pixels: out)
    }
}
