import DarkroomImage

/// One step of a pipeline: what the user typed between two `|`, parsed and typed.
///
/// Every operation is deterministic: the same input image and the same operation
/// give the same bytes, which is what lets a retried job produce the same result.
public enum Operation: Sendable, Equatable {
    /// `enlarge: false` (`enlarge=no`) leaves an image the scale would make
    /// larger on either side as it is.
    case scale(Size, mode: ScaleMode, kernel: ResampleKernel, enlarge: Bool = true)
    case crop(Crop)
    case glitch(seed: UInt64, amount: Double)
    case grayscale
    case sepia
    case invert
    case blur(sigma: Double)
    case sharpen(sigma: Double, amount: Double)
    case brightness(Double)
    case contrast(Double)
    case saturation(Double)
    case pixelate(Int)
    case rotate(Int)
    case flip(horizontal: Bool)
    /// The image on a canvas of this size, filled with the colour, placed
    /// by gravity. A nil colour (`background=transparent`) leaves the margin
    /// clear in an output with alpha (pipeline.md section 4.3.1) and white
    /// in one without; a colour with an alpha below 255 is translucent in
    /// an output with alpha and laid over white in one without.
    case pad(Size, background: RGBColor?, gravity: Gravity)
    /// The pixels converted from the source's embedded RGB ICC profile to
    /// sRGB; the outputs then carry no profile. Only a job knows the
    /// source's profile (`ImageJob`): `apply` alone leaves the image as it is.
    case srgb

    /// The three ways to name a crop window.
    public enum Crop: Sendable, Equatable {
        /// The largest square, placed by gravity.
        case square(Gravity)
        /// A window of this size, placed by gravity.
        case size(Size, Gravity)
        /// An exact rectangle, `WxH+X+Y`.
        case rect(Rect)
    }

    /// The operation's name as written in a pipeline.
    public var name: String {
        switch self {
        case .scale: "scale"
        case .crop: "crop"
        case .glitch: "glitch"
        case .grayscale: "grayscale"
        case .sepia: "sepia"
        case .invert: "invert"
        case .blur: "blur"
        case .sharpen: "sharpen"
        case .brightness: "brightness"
        case .contrast: "contrast"
        case .saturation: "saturation"
        case .pixelate: "pixelate"
        case .rotate: "rotate"
        case .flip: "flip"
        case .pad: "pad"
        case .srgb: "srgb"
        }
    }

    /// The colour of a `pad`'s margin: nil (`transparent`), and any colour
    /// whose alpha is 0, is clear, colour 0, as the parser reads them.
    static func margin(_ background: RGBColor?) -> RGBColor {
        guard let background, background.alpha != 0 else { return RGBColor(red: 0, green: 0, blue: 0, alpha: 0) }
        return background
    }

    /// The margin's canonical text: `transparent`, `rrggbb` or `rrggbbaa`.
    static func marginText(_ background: RGBColor?) -> String {
        let margin = margin(background)
        return margin.alpha == 0 ? "transparent" : margin.description
    }

    /// Whether the step makes clear or translucent pixels of opaque ones:
    /// a `pad` whose margin is transparent or has an alpha below 255.
    public var makesTransparency: Bool {
        if case let .pad(_, background, _) = self { background?.isOpaque != true } else { false }
    }

    /// The canonical text of this step: the primary argument first (if the
    /// operation has one), then every other parameter as `key=value` in a fixed
    /// order, defaults included, so that two equal pipelines always print the same
    /// bytes and a later change of default cannot change what a stored job meant.
    /// A key added after the language's first revision (`enlarge`) is written
    /// only when it is not its default, which is what a step without it
    /// always meant: canonical texts from before it read the same, and a
    /// peer that does not know the key still reads every text that does not use it.
    public var canonical: String {
        switch self {
        case let .scale(size, mode, kernel, enlarge):
            "scale:\(size),mode=\(mode.rawValue),kernel=\(kernel.rawValue)" + (enlarge ? "" : ",enlarge=no")
        case let .crop(.square(gravity)):
            "crop:square,gravity=\(gravity.rawValue)"
        case let .crop(.size(size, gravity)):
            "crop:\(size),gravity=\(gravity.rawValue)"
        case let .crop(.rect(rect)):
            "crop:\(rect)"
        case let .glitch(seed, amount):
            "glitch:seed=\(seed),amount=\(formatNumber(amount))"
        case .grayscale, .sepia, .invert, .srgb:
            name
        case let .blur(sigma):
            "blur:\(formatNumber(sigma))"
        case let .sharpen(sigma, amount):
            "sharpen:\(formatNumber(sigma)),amount=\(formatNumber(amount))"
        case let .brightness(v):
            "brightness:\(formatNumber(v))"
        case let .contrast(v):
            "contrast:\(formatNumber(v))"
        case let .saturation(v):
            "saturation:\(formatNumber(v))"
        case let .pixelate(n):
            "pixelate:\(n)"
        case let .rotate(degrees):
            "rotate:\(degrees)"
        case let .flip(horizontal):
            horizontal ? "flip:h" : "flip:v"
        case let .pad(size, background, gravity):
            "pad:\(size),background=\(Operation.marginText(background)),gravity=\(gravity.rawValue)"
        }
    }

    /// Runs this operation on an image. Once `cancellation` is set the
    /// operation stops within a few milliseconds and throws
    /// `ImageError.cancelled`.
    public func apply(to image: consuming Image, cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        let cancel = cancellation
        switch self {
        case let .scale(box, mode, kernel, enlarge):
            let size = Size(width: image.width, height: image.height)
            if !enlarge, Operation.scaledSize(of: size, to: box, mode: mode, enlarge: false) == size { return image }
            return try image.scaled(to: box, mode: mode, kernel: kernel, cancellation: cancel)
        case let .crop(.square(gravity)):
            return try image.croppedSquare(gravity: gravity, cancellation: cancel)
        case let .crop(.size(size, gravity)):
            return try image.cropped(to: size, gravity: gravity, cancellation: cancel)
        case let .crop(.rect(rect)):
            return try image.cropped(to: rect, cancellation: cancel)
        case let .glitch(seed, amount):
            return try image.glitched(seed: seed, amount: amount, cancellation: cancel)
        case .grayscale:
            return try (consume image).grayscale(cancellation: cancel)
        case .sepia:
            return try (consume image).sepia(cancellation: cancel)
        case .invert:
            return try (consume image).inverted(cancellation: cancel)
        case let .blur(sigma):
            return try image.blurred(sigma: sigma, cancellation: cancel)
        case let .sharpen(sigma, amount):
            return try image.sharpened(sigma: sigma, amount: amount, cancellation: cancel)
        case let .brightness(v):
            return try (consume image).adjustingBrightness(v, cancellation: cancel)
        case let .contrast(v):
            return try (consume image).adjustingContrast(v, cancellation: cancel)
        case let .saturation(v):
            return try (consume image).adjustingSaturation(v, cancellation: cancel)
        case let .pixelate(n):
            return try image.pixelated(blockSize: n, cancellation: cancel)
        case let .rotate(degrees):
            return try image.rotated(quarterTurnsClockwise: degrees / 90, cancellation: cancel)
        case let .flip(horizontal):
            return try image.flipped(horizontally: horizontal, cancellation: cancel)
        case .srgb:
            return try cancel.checked(image)
        case let .pad(size, background, gravity):
            // A clear or translucent margin in an output without alpha is
            // laid over white, as every transparent pixel is.
            return try image.padded(to: size, background: Operation.margin(background).over(Source.background), gravity: gravity,
                                    cancellation: cancel)
        }
    }

    /// The size this operation produces from an input of `size`, or the reason it
    /// cannot run on it. Used to check a pipeline against an image's header before
    /// any pixels are decoded, and to plan shrink-on-load.
    public func outputSize(for size: Size) throws(ImageError) -> Size {
        switch self {
        case let .scale(box, mode, _, enlarge):
            return Operation.scaledSize(of: size, to: box, mode: mode, enlarge: enlarge)
        case .crop(.square):
            let side = min(size.width, size.height)
            return Size(width: side, height: side)
        case let .crop(.size(crop, _)):
            guard crop.width <= size.width, crop.height <= size.height else {
                throw ImageError(.invalidArgument, "crop \(crop) is larger than image \(size)")
            }
            return crop
        case let .crop(.rect(rect)):
            guard rect.fits(in: size) else {
                throw ImageError(.invalidArgument, "rectangle \(rect) exceeds image \(size)")
            }
            return rect.size
        case let .rotate(degrees) where degrees == 90 || degrees == 270:
            return Size(width: size.height, height: size.width)
        case let .pad(canvas, _, _):
            guard size.width <= canvas.width, size.height <= canvas.height else {
                throw ImageError(.invalidArgument, "image \(size) is larger than pad \(canvas)")
            }
            return canvas
        default:
            return size
        }
    }
}

extension Operation {
    /// The size `scale` makes of `size`: pipeline.md section 4.1, and with
    /// `enlarge: false` the size itself when either side would grow.
    static func scaledSize(of size: Size, to box: Size, mode: ScaleMode, enlarge: Bool) -> Size {
        let scaled = Image.scaledSize(of: size, to: box, mode: mode)
        if !enlarge, scaled.width > size.width || scaled.height > size.height { return size }
        return scaled
    }
}

/// Formats a number the shortest way that reads back to the same value: `2`,
/// `0.5`, `1.25`.
func formatNumber(_ value: Double) -> String {
    if value == value.rounded(), abs(value) < 1e15 {
        return String(Int64(value))
    }
    return "\(value)"
}
