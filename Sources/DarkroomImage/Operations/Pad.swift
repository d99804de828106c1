/// An opaque colour, as `pad` fills with it.
public struct RGBColor: Sendable, Equatable, CustomStringConvertible {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8

    public init(red: UInt8, green: UInt8, blue: UInt8) {
        self.red = red
        self.green = green
        self.blue = blue
    }

    public static let black = RGBColor(red: 0, green: 0, blue: 0)

    /// Six hexadecimal digits, `RRGGBB`, either case; nil for anything else.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 6, let value = UInt32(hex, radix: 16), digits.allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "-") }) else {
            return nil
        }
        self.init(red: UInt8(value >> 16), green: UInt8((value >> 8) & 0xFF), blue: UInt8(value & 0xFF))
    }

    /// `rrggbb`, lower case.
    public var description: String {
        [red, green, blue].map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

extension Image {
    /// This image on a canvas of `size` filled with `background`, placed by
    /// `gravity` (libvips' `embed`, imgproxy's `extend`). The canvas must be
    /// at least as large as the image on each side. The margin's fourth
    /// byte is `marginAlpha`: 255, the padding, for an opaque image; for one
    /// whose fourth byte is an alpha (`AlphaImage`), 255 for an opaque
    /// margin or 0 for a clear one.
    public func padded(to size: Size, background: RGBColor, marginAlpha: UInt8 = 255, gravity: Gravity,
                       cancellation: CancellationFlag = .never) throws(ImageError) -> Image {
        guard size.width >= width, size.height >= height else {
            throw ImageError(.invalidArgument, "image \(width)x\(height) is larger than pad \(size)")
        }
        if size.width == width && size.height == height { return self }
        let place = gravity.place(Size(width: width, height: height), in: size)
        var canvas = Image(width: size.width, height: size.height, red: background.red, green: background.green, blue: background.blue)
        if marginAlpha != 255 {
            var i = 3
            while i < canvas.pixels.count { canvas.pixels[i] = marginAlpha; i += 4 }
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
