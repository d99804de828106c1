/// An 8-bit RGB image held in memory, the buffer every operation reads and writes.
///
/// Pixels are stored row-major, four bytes per pixel: red, green, blue and a padding
/// byte that is always 255 (libjpeg-turbo's `JCS_EXT_RGBX`). The fourth byte costs a
/// third more memory than packed RGB, but it lets the resampler and the filters work
/// on whole pixels with four-lane SIMD, and libjpeg-turbo decodes into and encodes
/// from this layout directly, so no conversion pass is ever needed.
public struct Image: Sendable, Equatable {
    /// Bytes per pixel: R, G, B, X.
    public static let bytesPerPixel = 4

    public let width: Int
    public let height: Int
    /// `width * height * 4` bytes, row-major, RGBX.
    public var pixels: [UInt8]

    /// Wraps existing RGBX bytes. `pixels.count` must equal `width * height * 4`.
    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(width > 0 && height > 0, "image dimensions must be positive")
        precondition(pixels.count == width * height * Image.bytesPerPixel, "pixel buffer size does not match dimensions")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// An image filled with one colour.
    public init(width: Int, height: Int, red: UInt8 = 0, green: UInt8 = 0, blue: UInt8 = 0) {
        precondition(width > 0 && height > 0, "image dimensions must be positive")
        var bytes = [UInt8](repeating: 255, count: width * height * Image.bytesPerPixel)
        var i = 0
        while i < bytes.count {
            bytes[i] = red
            bytes[i + 1] = green
            bytes[i + 2] = blue
            i += 4
        }
        self.init(width: width, height: height, pixels: bytes)
    }

    /// Bytes per row.
    public var stride: Int { width * Image.bytesPerPixel }

    /// The size of the decoded pixels as packed RGB (3 bytes per pixel); used to
    /// express memory budgets the way users think of them.
    public var rgbByteCount: Int { width * height * 3 }

    /// The pixel at (x, y) as (r, g, b). For tests and diagnostics, not hot loops.
    public func pixel(x: Int, y: Int) -> (r: UInt8, g: UInt8, b: UInt8) {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel (\(x), \(y)) outside \(width)x\(height)")
        let i = (y * width + x) * Image.bytesPerPixel
        return (pixels[i], pixels[i + 1], pixels[i + 2])
    }

    /// Sets the pixel at (x, y). For tests and diagnostics, not hot loops.
    public mutating func setPixel(x: Int, y: Int, _ rgb: (r: UInt8, g: UInt8, b: UInt8)) {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "pixel (\(x), \(y)) outside \(width)x\(height)")
        let i = (y * width + x) * Image.bytesPerPixel
        pixels[i] = rgb.r
        pixels[i + 1] = rgb.g
        pixels[i + 2] = rgb.b
    }
}
