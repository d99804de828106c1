/// A colour as `pad` fills with it: straight red, green and blue, and an
/// alpha, 255 (opaque) unless the text gives one.
public struct RGBColor: Sendable, Equatable, CustomStringConvertible {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8
    public var alpha: UInt8

    public init(red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8 = 255) {
        self.red = red
        self.green = green
        self.blue = blue
        self.alpha = alpha
    }

    public static let black = RGBColor(red: 0, green: 0, blue: 0)

    /// Six hexadecimal digits `RRGGBB`, or eight `RRGGBBAA` with an alpha,
    /// either case; nil for anything else.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 6 || digits.count == 8, let value = UInt32(hex, radix: 16),
              digits.allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "-") }) else {
            return nil
        }
        let rgb = digits.count == 8 ? value >> 8 : value
        self.init(red: UInt8(rgb >> 16), green: UInt8((rgb >> 8) & 0xFF), blue: UInt8(rgb & 0xFF),
                  alpha: digits.count == 8 ? UInt8(value & 0xFF) : 255)
    }

    public var isOpaque: Bool { alpha == 255 }

    /// The colour laid over `background` as a transparent pixel is
    /// (`AlphaImage.flattened`): what an output without alpha shows.
    public func over(_ background: (UInt8, UInt8, UInt8)) -> RGBColor {
        RGBColor(red: AlphaImage.laid(red, alpha: alpha, over: background.0), green: AlphaImage.laid(green, alpha: alpha, over: background.1),
                 blue: AlphaImage.laid(blue, alpha: alpha, over: background.2))
    }

    /// `rrggbb`, lower case, or `rrggbbaa` when the colour is not opaque.
    public var description: String {
        (isOpaque ? [red, green, blue] : [red, green, blue, alpha]).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

extension Image {
    /// This image on a canvas of `size` filled with `background`, placed by
    /// `gravity` (libvips' `embed`, imgproxy's `extend`). The canvas must be
    /// at least as large as the image on each side. The margin's fourth
    /// byte is the colour's alpha: an opaque image's padding needs an
    /// opaque colour; an image whose fourth byte is an alpha (`AlphaImage`)
    /// takes any.
    public func padded(to size: Size, background: RGBColor, gravity: Gravity,
                       cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        guard size.width >= width, size.height >= height else {
            throw ImageError(.invalidArgument, "image \(width)x\(height) is larger than pad \(size)")
        }
        if size.width == width && size.height == height { return self }
        let place = gravity.place(Size(width: width, height: height), in: size)
        var canvas = Image(width: size.width, height: size.height, red: background.red, green: background.green, blue: background.blue)
        if !background.isOpaque {
            var i = 3
            while i < canvas.pixels.count { canvas.pixels[i] = background.alpha; i += 4 }
        }
        let rowBytes = width * Image.bytesPerPixel
        let poll = RowPoll(cancellation, workPerRow: rowBytes)
        for y in 0 ..< height {
            if poll.stop(at: y) { throw ImageError.cancelled }
            let to = ((place.y + y) * size.width + place.x) * Image.bytesPerPixel
            canvas.pixels.replaceSubrange(to ..< to + rowBytes, with: pixels[y * rowBytes ..< (y + 1) * rowBytes])
        }
        return canvas
    }
}
