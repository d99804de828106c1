import CTIFF

/// TIFF files for tests, written by libtiff (through CTIFF) in the layouts
/// scanners and editors write: strips or tiles, contiguous or planar
/// samples, 8 or 16 bits, gray or RGB with or without alpha, and several
/// compressions.
public enum TIFFFixtures {
    /// TIFF compression numbers.
    public enum Compression: Int32, Sendable, CaseIterable {
        case none = 1, lzw = 5, jpeg = 7, deflate = 8, packBits = 32773
    }

    /// A TIFF of `pixels` (rows of `samples` 8-bit samples: 1 gray, 2 gray
    /// and alpha, 3 RGB, 4 RGB and alpha), written at `bits` (8 or 16, where
    /// 16-bit samples are the 8-bit ones times 257), in tiles of `tile`
    /// pixels or strips of `rowsPerStrip` rows, with `orientation` (1-8) as
    /// its Orientation tag when given, `icc` as its profile, and `pages`
    /// images in all (each after the first a 16×16 gray square). With
    /// `associatedAlpha` the colour samples given must be premultiplied;
    /// with `cmyk`, 4 samples are C, M, Y and K ink (0 none).
    public static func tiff(width: Int, height: Int, pixels: [UInt8], samples: Int = 3, cmyk: Bool = false, associatedAlpha: Bool = false,
                            bits: Int = 8, compression: Compression = .lzw, tile: Int = 0, rowsPerStrip: Int = 0,
                            planar: Bool = false, orientation: Int = 0, icc: [UInt8]? = nil, pages: Int = 1) -> [UInt8] {
        precondition(pixels.count == width * height * samples, "pixels hold width × height × samples samples")
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: Int(DR_TIFF_MESSAGE_MAX))
        let profile = icc ?? []
        let status = message.withUnsafeMutableBufferPointer { text in
            pixels.withUnsafeBufferPointer { source in
                profile.withUnsafeBufferPointer { iccBytes in
                    var options = dr_tiff_encode_options(
                        samples: Int32(samples), cmyk: cmyk ? 1 : 0, associated_alpha: associatedAlpha ? 1 : 0, bits: Int32(bits),
                        compression: compression.rawValue, tile: Int32(tile), rows_per_strip: Int32(rowsPerStrip),
                        planar: planar ? 1 : 0, orientation: Int32(orientation),
                        icc: profile.isEmpty ? nil : iccBytes.baseAddress, icc_length: profile.count, pages: Int32(pages))
                    return dr_tiff_encode(source.baseAddress, Int32(width), Int32(height), &options, &out, &length, text.baseAddress)
                }
            }
        }
        precondition(status == 0 && out != nil, "libtiff could not write the fixture: \(String(cString: message))")
        defer { dr_tiff_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }
}
