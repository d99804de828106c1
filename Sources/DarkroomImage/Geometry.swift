/// Sizes, rectangles, orientations and gravities shared by the codec and the
/// operations.

/// A width and a height in pixels.
public struct Size: Sendable, Hashable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }
    public var description: String { "\(width)x\(height)" }
    public var pixelCount: Int { width * height }

    /// Reads `WxH` (`x` in either case). Any two integers are accepted; callers
    /// check the range they allow. Nil when the text is not of that form.
    public init?(parsing text: String) {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]) else { return nil }
        self.init(width: w, height: h)
    }
}

/// A rectangle in pixel coordinates; (x, y) is the top-left corner.
public struct Rect: Sendable, Hashable, CustomStringConvertible {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
    public var size: Size { Size(width: width, height: height) }
    public var description: String { "\(width)x\(height)+\(x)+\(y)" }

    /// Whether this rectangle lies wholly inside an image of the given size.
    public func fits(in size: Size) -> Bool {
        x >= 0 && y >= 0 && width > 0 && height > 0 && x + width <= size.width && y + height <= size.height
    }
}

/// Where a crop window sits inside a larger image.
public enum Gravity: String, Sendable, CaseIterable {
    case center, north, south, east, west, northeast, northwest, southeast, southwest
    /// Where the picture has the most detail (`Image.detailWindow`): a crop
    /// looks at the pixels; without them (`place`) it is the centre.
    case smart

    /// The rectangle of `crop` size placed in `container` by this gravity.
    /// `crop` must not be larger than `container`.
    public func place(_ crop: Size, in container: Size) -> Rect {
        let freeX = container.width - crop.width
        let freeY = container.height - crop.height
        let x: Int
        let y: Int
        switch self {
        case .west, .northwest, .southwest: x = 0
        case .east, .northeast, .southeast: x = freeX
        case .center, .north, .south, .smart: x = freeX / 2
        }
        switch self {
        case .north, .northeast, .northwest: y = 0
        case .south, .southeast, .southwest: y = freeY
        case .center, .east, .west, .smart: y = freeY / 2
        }
        return Rect(x: x, y: y, width: crop.width, height: crop.height)
    }
}

/// The EXIF orientation tag (0x0112): how the stored pixels must be transformed to
/// show the picture upright. Raw values are the EXIF values 1 to 8.
public enum Orientation: Int, Sendable, CaseIterable {
    /// 1: stored upright.
    case up = 1
    /// 2: stored mirrored left to right.
    case upMirrored = 2
    /// 3: stored rotated 180°.
    case down = 3
    /// 4: stored mirrored top to bottom.
    case downMirrored = 4
    /// 5: stored transposed (mirrored about the top-left to bottom-right diagonal).
    case leftMirrored = 5
    /// 6: stored rotated 90° counter-clockwise; display needs 90° clockwise.
    case right = 6
    /// 7: stored transversed (mirrored about the top-right to bottom-left diagonal).
    case rightMirrored = 7
    /// 8: stored rotated 90° clockwise; display needs 90° counter-clockwise.
    case left = 8

    /// Whether the upright picture has width and height swapped relative to the
    /// stored pixels (values 5 to 8).
    public var swapsDimensions: Bool { rawValue >= 5 }

    /// The upright size of an image stored with this orientation.
    public func uprightSize(ofStored size: Size) -> Size {
        swapsDimensions ? Size(width: size.height, height: size.width) : size
    }
}
