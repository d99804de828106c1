import CHEIF

/// HEIF files for tests, written by libheif's encoders (through CHEIF):
/// HEIC with x265, AVIF with libaom. HEIF is lossy here, so the decoder is
/// checked against the pixels the test chose within a tolerance.
public enum HEIFFixtures {
    public enum Codec: Sendable { case hevc, av1 }

    /// A HEIF of one image, `width` × `height`, from `pixels` (RGB rows, or
    /// RGBA with `alpha`), at `quality` (0-100) or lossless, coded at
    /// `bitDepth` bits a sample (8, 10 or 12), with `icc` embedded when given.
    public static func heif(width: Int, height: Int, pixels: [UInt8], alpha: Bool = false, codec: Codec = .hevc,
                            quality: Int = 90, lossless: Bool = false, bitDepth: Int = 8, icc: [UInt8]? = nil) -> [UInt8] {
        precondition(pixels.count == width * height * (alpha ? 4 : 3), "pixels hold width × height RGB or RGBA samples")
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: Int(DR_HEIF_MESSAGE_MAX))
        let status = message.withUnsafeMutableBufferPointer { text in
            pixels.withUnsafeBufferPointer { source in
                if let icc {
                    return icc.withUnsafeBufferPointer { profile in
                        dr_heif_encode(source.baseAddress, Int32(width), Int32(height), alpha ? 1 : 0, codec == .av1 ? 1 : 0, Int32(quality),
                                       lossless ? 1 : 0, Int32(bitDepth), profile.baseAddress, profile.count, &out, &length, text.baseAddress)
                    }
                }
                return dr_heif_encode(source.baseAddress, Int32(width), Int32(height), alpha ? 1 : 0, codec == .av1 ? 1 : 0, Int32(quality),
                                      lossless ? 1 : 0, Int32(bitDepth), nil, 0, &out, &length, text.baseAddress)
            }
        }
        precondition(status == 0 && out != nil, "libheif could not write the fixture: \(String(cString: message))")
        defer { dr_heif_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }

    /// Smooth RGB gradients with a bright block in the top-left quarter,
    /// so that a picture turned or shifted shows it, and lossy coding keeps
    /// it within a few levels.
    public static func pattern(width: Int, height: Int, alpha: Bool = false) -> [UInt8] {
        var pixels: [UInt8] = []
        pixels.reserveCapacity(width * height * (alpha ? 4 : 3))
        for y in 0..<height {
            for x in 0..<width {
                let block = x < width / 4 && y < height / 4
                pixels.append(block ? 250 : UInt8(x * 200 / max(1, width - 1) + 20))
                pixels.append(block ? 240 : UInt8(y * 200 / max(1, height - 1) + 20))
                pixels.append(block ? 30 : UInt8((x + y) * 100 / max(1, width + height - 2) + 60))
                // Opaque on the left half, clear on the right.
                if alpha { pixels.append(x < width / 2 ? 255 : 0) }
            }
        }
        return pixels
    }
}
