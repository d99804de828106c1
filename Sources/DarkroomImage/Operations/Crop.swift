/// Cropping by rectangle, by gravity and to a square, and thumbnails.

extension Image {
    /// The pixels inside `rect`. Throws if the rectangle is empty or does not lie
    /// wholly inside the image, and `ImageError.cancelled` once `cancellation`
    /// is set.
    public func cropped(to rect: Rect, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        guard let out = try Image.croppedRows(pixels, width: width, height: height, bytesPerPixel: Image.bytesPerPixel, to: rect, cancellation) else {
            return self
        }
        return Image(width: rect.width, height: rect.height, pixels: out)
    }

    /// The rows of `rect` cut from a row-major buffer of `width` x `height`
    /// pixels of `bytesPerPixel` bytes (RGBX or one-channel), or nil when
    /// `rect` is the whole image. Throws if it is empty or does not fit, and
    /// `ImageError.cancelled` once `cancel` is set.
    static func croppedRows(
        _ pixels: [UInt8], width: Int, height: Int, bytesPerPixel: Int, to rect: Rect, _ cancel: CancellationFlag = .never
    ) throws(ImageError) -> [UInt8]? {
        guard rect.width > 0, rect.height > 0 else {
            throw ImageError(.invalidArgument, "rectangle \(rect) must have positive sides")
        }
        guard rect.fits(in: Size(width: width, height: height)) else {
            throw ImageError(.invalidArgument, "rectangle \(rect) exceeds image \(width)x\(height)")
        }
        if rect.x == 0 && rect.y == 0 && rect.width == width && rect.height == height { return nil }
        var out = [UInt8]()
        out.reserveCapacity(rect.width * rect.height * bytesPerPixel)
        let poll = RowPoll(cancel, workPerRow: rect.width * bytesPerPixel)
        for y in rect.y ..< rect.y + rect.height {
            if poll.stop(at: y &- rect.y) { throw ImageError.cancelled }
            let start = (y * width + rect.x) * bytesPerPixel
            out.append(contentsOf: pixels[start ..< start + rect.width * bytesPerPixel])
        }
        return out
    }

    /// The largest square (side `min(width, height)`) placed by `gravity`.
    public func croppedSquare(gravity: Gravity = .center) -> Image {
        // The square always fits, so this cannot fail.
        (try? croppedSquare(gravity: gravity, cancellation: .never)) ?? self
    }

    /// `croppedSquare(gravity:)`, stopped with `ImageError.cancelled` once
    /// `cancellation` is set.
    public func croppedSquare(gravity: Gravity = .center, cancellation: CancellationFlag) throws(ImageError) -> Image {
        let side = min(width, height)
        return try cropped(to: Size(width: side, height: side), gravity: gravity, cancellation: cancellation)
    }

    /// A window of `size` placed by `gravity`. Throws if `size` is empty or larger
    /// than the image on either side, and `ImageError.cancelled` once
    /// `cancellation` is set.
    public func cropped(to size: Size, gravity: Gravity, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        guard size.width > 0, size.height > 0 else {
            throw ImageError(.invalidArgument, "crop size \(size) must have positive sides")
        }
        guard size.width <= width, size.height <= height else {
            throw ImageError(.invalidArgument, "crop size \(size) exceeds image \(width)x\(height)")
        }
        let rect = gravity == .smart ? try detailWindow(size, cancellation: cancellation)
                                     : gravity.place(size, in: Size(width: width, height: height))
        return try cropped(to: rect, cancellation: cancellation)
    }

    /// An aspect-fill copy at exactly `size`: scaled so it covers `size`, then
    /// cropped where `gravity` says (the centre by default).
    ///
    /// The centre region that survives the crop is cut from the source first and
    /// only that region is resampled, which saves the work of scaling pixels that
    /// would be thrown away. The region is rounded to whole source pixels, so its
    /// aspect ratio can differ from `size` by under one source pixel.
    ///
    /// Throws `ImageError.cancelled` once `cancellation` is set.
    public func thumbnail(
        _ size: Size, gravity: Gravity = .center, kernel: ResampleKernel = .lanczos3, cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        try Image.checkOutputSize(size, operation: "thumbnail")
        let region = Image.fillRegion(of: Size(width: width, height: height), for: size)
        let rect = gravity == .smart ? try detailWindow(region, cancellation: cancellation)
                                     : gravity.place(region, in: Size(width: width, height: height))
        return try cropped(to: rect, cancellation: cancellation).resized(to: size, kernel: kernel, cancellation: cancellation)
    }

    /// The largest region of `source` with the aspect ratio of `target` (rounded
    /// to whole pixels): what an aspect-fill scale to `target` keeps after the crop.
    public static func fillRegion(of source: Size, for target: Size) -> Size {
        let sw = source.width, sh = source.height
        let tw = max(1, target.width), th = max(1, target.height)
        if sw * th >= sh * tw {
            // Source is wider: keep the full height.
            let w = Int((Double(sh) * Double(tw) / Double(th)).rounded())
            return Size(width: min(sw, max(1, w)), height: sh)
        } else {
            let h = Int((Double(sw) * Double(th) / Double(tw)).rounded())
            return Size(width: sw, height: min(sh, max(1, h)))
        }
    }
}
