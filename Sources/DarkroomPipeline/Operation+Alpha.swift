import DarkroomImage

extension Operation {
    /// Runs this operation on an image with transparency, as `apply(to:)`
    /// runs it on an opaque one, with the same sizes and the same colour
    /// where the image is opaque:
    /// - `scale`, `blur` and `pixelate` filter the premultiplied colour and
    ///   the alpha alike;
    /// - `sharpen` sharpens the premultiplied colour and leaves the shape;
    /// - `crop` (a `smart` one judged on the picture as seen over
    ///   `Source.background`), `rotate` and `flip` move both;
    /// - `pad` fills the new margin with its colour and that colour's alpha
    ///   (opaque, translucent `RRGGBBAA`, or clear: `background=transparent`);
    /// - `glitch` moves the alpha with its bands, and shifts and swaps the
    ///   premultiplied colour's channels within them;
    /// - the colour filters and `srgb` change the colour only.
    ///
    /// `sourceProfile` is what `srgb` converts from (nil: left as it is).
    public func apply(
        to image: consuming AlphaImage, sourceProfile: [UInt8]?, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> AlphaImage {
        let cancel = cancellation
        switch self {
        case let .scale(box, mode, kernel, enlarge):
            let size = Size(width: image.width, height: image.height)
            if !enlarge, Operation.scaledSize(of: size, to: box, mode: mode, enlarge: false) == size { return image }
            return try (consume image).filtered(cancellation: cancel) { (i: Image) throws(ImageError) -> Image in
                try i.scaled(to: box, mode: mode, kernel: kernel, keepingAlpha: true, cancellation: cancel)
            }
        case let .blur(sigma):
            return try (consume image).filtered(cancellation: cancel) { (i: Image) throws(ImageError) -> Image in
                try i.blurred(sigma: sigma, keepingAlpha: true, cancellation: cancel)
            }
        case .pixelate, .sharpen:
            // Pixelating averages the alpha with the colour; sharpening
            // keeps it where it is.
            return try (consume image).filtered(cancellation: cancel) { (i: Image) throws(ImageError) -> Image in try self.apply(to: i, cancellation: cancel) }
        case let .crop(.square(gravity)):
            let side = min(image.width, image.height)
            return try cropped(image, to: try image.window(Size(width: side, height: side), gravity: gravity, cancellation: cancel), cancel)
        case let .crop(.size(size, gravity)):
            guard size.width > 0, size.height > 0, size.width <= image.width, size.height <= image.height else {
                // Worded by the opaque crop, which refuses it the same way.
                return try image.moved { (i: Image) throws(ImageError) -> Image in try self.apply(to: i, cancellation: cancel) }
            }
            return try cropped(image, to: try image.window(size, gravity: gravity, cancellation: cancel), cancel)
        case .crop(.rect), .rotate, .flip:
            return try image.moved { (i: Image) throws(ImageError) -> Image in try self.apply(to: i, cancellation: cancel) }
        case let .pad(size, background, gravity):
            // The margin takes the colour's alpha; a transparent one is
            // clear, its colour 0.
            return try image.moved { (i: Image) throws(ImageError) -> Image in
                try i.padded(to: size, background: Operation.margin(background), gravity: gravity, cancellation: cancel)
            }
        case .srgb:
            // The conversion rewrites the colour where it is and leaves the
            // fourth byte as it is.
            guard let sourceProfile else { return try cancel.checked(image) }
            return AlphaImage(rgba: try (consume image).rgba.convertedToSRGB(from: sourceProfile, cancellation: cancel).image)
        case let .glitch(seed, amount):
            // The bands move the shape; the channels shift and swap within
            // it, premultiplied, so no hidden colour is brought into view.
            return try (consume image).filtered(cancellation: cancel) { (i: Image) throws(ImageError) -> Image in
                try i.glitched(seed: seed, amount: amount, keepingAlpha: true, cancellation: cancel)
            }
        case .grayscale, .sepia, .invert, .brightness, .contrast, .saturation:
            // Colour filters keep each pixel's fourth byte, and map the
            // pixels where they are.
            return AlphaImage(rgba: try self.apply(to: (consume image).rgba, cancellation: cancel))
        }
    }

    private func cropped(_ image: AlphaImage, to rect: Rect, _ cancel: CancellationFlag) throws(ImageError) -> AlphaImage {
        try image.moved { (i: Image) throws(ImageError) -> Image in try i.cropped(to: rect, cancellation: cancel) }
    }
}
