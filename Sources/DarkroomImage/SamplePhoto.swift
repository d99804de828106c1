/// Generated sample photos: a deterministic landscape (sky gradient, sun, layered
/// hills, fine grain) that compresses like a camera photo. Used by `darkroom demo`
/// and by tests that need realistic input without shipping files.
public enum SamplePhoto {
    public struct Spec: Sendable, Hashable {
        public var name: String
        /// Upright size of the picture.
        public var size: Size
        public var seed: UInt64
        /// EXIF orientation to store it with (the pixels are stored transformed
        /// so that applying the orientation shows the upright picture).
        public var orientation: Orientation

        public init(name: String, size: Size, seed: UInt64, orientation: Orientation = .up) {
            self.name = name
            self.size = size
            self.seed = seed
            self.orientation = orientation
        }
    }

    /// The set `darkroom demo` processes: several sizes and aspect ratios, one
    /// stored sideways with an EXIF orientation.
    public static let demoSet: [Spec] = [
        Spec(name: "valley-12mp", size: Size(width: 4000, height: 3000), seed: 1),
        Spec(name: "ridge-16x10", size: Size(width: 3640, height: 2400), seed: 2),
        Spec(name: "tower-portrait-exif6", size: Size(width: 2400, height: 3200), seed: 3, orientation: .right),
        Spec(name: "dunes-wide", size: Size(width: 4800, height: 2000), seed: 4),
        Spec(name: "pond-small", size: Size(width: 1200, height: 800), seed: 5),
        Spec(name: "meadow-24mp", size: Size(width: 6000, height: 4000), seed: 6),
        Spec(name: "cliff-portrait-exif8", size: Size(width: 3000, height: 4000), seed: 7, orientation: .left),
        Spec(name: "harbor-square", size: Size(width: 3000, height: 3000), seed: 8),
        Spec(name: "lake-mirrored-exif2", size: Size(width: 3200, height: 2400), seed: 9, orientation: .upMirrored),
        Spec(name: "canyon-panorama", size: Size(width: 6000, height: 2000), seed: 10),
    ]

    /// Renders the upright picture.
    public static func render(_ size: Size, seed: UInt64) -> Image {
        var rng = SplitMix64(seed: seed)
        let w = size.width
        let h = size.height
        let sunX = 0.2 + 0.6 * rng.unit()
        let sunY = 0.15 + 0.2 * rng.unit()
        let sunR = 0.06 + 0.05 * rng.unit()
        let hue = rng.unit()
        let layers = (0..<3).map { _ in (phase: rng.unit() * 6.28, freq: 2 + rng.unit() * 5, level: rng.unit()) }
        var pixels = [UInt8](repeating: 255, count: w * h * 4)
        var noise = SplitMix64(seed: seed &+ 0x9E37)
        for y in 0..<h {
            let fy = Double(y) / Double(h)
            for x in 0..<w {
                let fx = Double(x) / Double(w)
                // Sky: a vertical gradient tinted by the seed's hue.
                var r = 90 + 120 * fy + 40 * hue
                var g = 140 + 80 * fy
                var b = 230 - 60 * fy * hue
                // Sun.
                let dx = (fx - sunX) * Double(w) / Double(h)
                let dy = fy - sunY
                let d = (dx * dx + dy * dy).squareRoot()
                if d < sunR {
                    r = 255; g = 230; b = 160
                } else if d < sunR * 2.5 {
                    let t = (d - sunR) / (sunR * 1.5)
                    r += (255 - r) * (1 - t) * 0.6
                    g += (220 - g) * (1 - t) * 0.6
                }
                // Hills, back to front, darker and greener in front.
                for (i, layer) in layers.enumerated() {
                    let base = 0.5 + 0.13 * Double(i) + 0.05 * layer.level
                    let ridge = base + 0.06 * sin(fx * layer.freq * 3.1416 + layer.phase) + 0.02 * sin(fx * 37 + layer.phase)
                    if fy > ridge {
                        let depth = Double(i) / 3
                        r = 40 + 60 * (1 - depth) * (0.5 + hue / 2) + 30 * (fy - ridge)
                        g = 70 + 80 * (1 - depth) + 40 * sin(fx * 80 + fy * 40) * 0.3
                        b = 40 + 50 * (1 - depth)
                    }
                }
                // Grain, so the picture compresses like a photo rather than a drawing.
                let grain = Double(Int(noise.next() & 31) - 16)
                let i = (y * w + x) * 4
                pixels[i] = clampByte(r + grain)
                pixels[i + 1] = clampByte(g + grain)
                pixels[i + 2] = clampByte(b + grain)
            }
        }
        return Image(width: w, height: h, pixels: pixels)
    }

    /// The sample as a JPEG file, with its EXIF orientation if it has one.
    public static func jpeg(_ spec: Spec, quality: Int = 90) throws(ImageError) -> [UInt8] {
        let upright = render(spec.size, seed: spec.seed)
        guard spec.orientation != .up else {
            return try JPEG.encode(upright, options: EncodeOptions(quality: quality, subsampling: .s420))
        }
        let stored = upright.applying(inverse(of: spec.orientation))
        let bytes = try JPEG.encode(stored, options: EncodeOptions(quality: quality, subsampling: .s420))
        return insertingOrientation(spec.orientation, into: bytes)
    }

    /// The orientation that undoes `orientation`: each is its own inverse except
    /// the two quarter turns, which undo each other.
    public static func inverse(of orientation: Orientation) -> Orientation {
        switch orientation {
        case .right: .left
        case .left: .right
        default: orientation
        }
    }

    /// Inserts an EXIF APP1 segment holding only the Orientation tag right after
    /// the SOI marker (big-endian TIFF header, one IFD entry).
    public static func insertingOrientation(_ orientation: Orientation, into jpeg: [UInt8]) -> [UInt8] {
        var tiff: [UInt8] = [0x4D, 0x4D, 0x00, 0x2A, 0x00, 0x00, 0x00, 0x08] // "MM", 42, IFD at 8
        tiff += [0x00, 0x01] // one entry
        tiff += [0x01, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01] // tag 0x0112, SHORT, count 1
        tiff += [0x00, UInt8(orientation.rawValue), 0x00, 0x00] // value, padded
        tiff += [0x00, 0x00, 0x00, 0x00] // no next IFD
        let payload: [UInt8] = Array("Exif".utf8) + [0, 0] + tiff
        let length = payload.count + 2
        let segment: [UInt8] = [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
        guard jpeg.count >= 2 else { return jpeg }
        return Array(jpeg[0..<2]) + segment + Array(jpeg[2...])
    }

    private static func clampByte(_ v: Double) -> UInt8 {
        v <= 0 ? 0 : v >= 255 ? 255 : UInt8(v)
    }

    private static func sin(_ x: Double) -> Double {
        // A cheap, accurate-enough sine (Bhaskara-free: Taylor on a reduced range)
        // so this file needs no Foundation.
        var t = x.truncatingRemainder(dividingBy: 2 * Double.pi)
        if t > Double.pi { t -= 2 * Double.pi }
        if t < -Double.pi { t += 2 * Double.pi }
        let t2 = t * t
        return t * (1 - t2 / 6 * (1 - t2 / 20 * (1 - t2 / 42 * (1 - t2 / 72))))
    }
}
