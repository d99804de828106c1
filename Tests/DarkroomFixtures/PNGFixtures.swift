/// PNG files built in code, without a compressor: the image data is a zlib
/// stream of stored (uncompressed) deflate blocks, every scanline with filter
/// type 0. Options cover every colour type, bit depths 1 to 16, PLTE, tRNS,
/// iCCP, eXIf, Adam7 interlacing, and knobs for damaged files.
public enum PNGFixtures {
    public static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Colour types of IHDR.
    public enum ColorType: UInt8, Sendable {
        case gray = 0, rgb = 2, palette = 3, grayAlpha = 4, rgba = 6

        /// Samples per pixel.
        public var channels: Int {
            switch self {
            case .gray, .palette: return 1
            case .grayAlpha: return 2
            case .rgb: return 3
            case .rgba: return 4
            }
        }
    }

    /// Everything a fixture file is made of.
    public struct Spec: Sendable {
        public var width: Int
        public var height: Int
        public var colorType: ColorType
        public var bitDepth = 8
        /// `width * height * channels` samples, row-major, each below
        /// 2^bitDepth (palette indices for `.palette`).
        public var samples: [UInt16]
        /// PLTE entries (required for `.palette`).
        public var palette: [(UInt8, UInt8, UInt8)] = []
        /// The tRNS chunk's body, as the file holds it.
        public var transparency: [UInt8]? = nil
        /// A profile, written as an iCCP chunk (zlib stream of stored blocks).
        public var iccProfile: [UInt8]? = nil
        public var iccName = "test profile"
        /// An eXIf chunk's body (a TIFF structure), before the image data.
        public var exif: [UInt8]? = nil
        /// An eXIf chunk's body after the image data instead.
        public var exifAfterImage: [UInt8]? = nil
        public var interlaced = false
        /// Chunks put right before the first IDAT, as given.
        public var extraChunks: [(type: String, body: [UInt8])] = []
        /// The IDAT chunks hold at most this many bytes each.
        public var idatChunkSize = 1 << 20
        /// The size IHDR declares, when not `width` x `height`.
        public var declaredSize: (width: Int, height: Int)? = nil
        /// Chunk types written with a wrong CRC (every chunk of that type).
        public var badCRC: Set<String> = []

        public init(width: Int, height: Int, colorType: ColorType, bitDepth: Int = 8, samples: [UInt16]) {
            self.width = width
            self.height = height
            self.colorType = colorType
            self.bitDepth = bitDepth
            self.samples = samples
        }
    }

    // MARK: - Checksums

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// CRC-32 (ISO 3309, as PNG uses it) of `bytes`.
    public static func crc32<S: Sequence<UInt8>>(_ bytes: S) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = crcTable[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    public static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }

    public static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    public static func be32(_ v: Int) -> [UInt8] { be32(UInt32(truncatingIfNeeded: v)) }

    /// A zlib stream of `data` in stored deflate blocks of at most 65535
    /// bytes: header 78 01 (32K window, no dictionary, check bits right),
    /// the blocks, the Adler-32 of `data`, big-endian.
    public static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var start = 0
        repeat {
            let end = min(data.count, start + 65535)
            let n = end - start
            out.append(end == data.count ? 1 : 0)  // BFINAL, BTYPE 00
            out += [UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8((~n >> 8) & 0xFF)]
            out += data[start..<end]
            start = end
        } while start < data.count
        return out + be32(adler32(data))
    }

    /// A chunk: length, type, body, CRC over type and body (or that CRC
    /// with its low bit flipped when `badCRC`).
    public static func chunk(_ type: String, _ body: [UInt8], badCRC: Bool = false) -> [UInt8] {
        let typeBytes = Array(type.utf8)
        precondition(typeBytes.count == 4, "a chunk type is 4 bytes")
        let crc = crc32(typeBytes + body) ^ (badCRC ? 1 : 0)
        return be32(body.count) + typeBytes + body + be32(crc)
    }

    // MARK: - Files

    /// The Adam7 passes: first column, first row, column step, row step.
    public static let adam7: [(x: Int, y: Int, dx: Int, dy: Int)] = [
        (0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2),
    ]

    /// The scanline (filter byte 0, then the packed samples) of the pixels
    /// at `columns` of row `y`.
    public static func scanline(_ spec: Spec, y: Int, columns: StrideTo<Int>) -> [UInt8] {
        let channels = spec.colorType.channels
        var line: [UInt8] = [0]
        var bits = 0, accumulator = 0
        for x in columns {
            for c in 0..<channels {
                let v = Int(spec.samples[(y * spec.width + x) * channels + c])
                switch spec.bitDepth {
                case 16: line += [UInt8(v >> 8), UInt8(v & 0xFF)]
                case 8: line.append(UInt8(v))
                default:
                    accumulator = accumulator << spec.bitDepth | v
                    bits += spec.bitDepth
                    if bits == 8 {
                        line.append(UInt8(accumulator))
                        bits = 0
                        accumulator = 0
                    }
                }
            }
        }
        if bits > 0 { line.append(UInt8(accumulator << (8 - bits) & 0xFF)) }
        return line
    }

    /// The filtered image data, before compression: the rows, or for an
    /// interlaced file the rows of each pass that has pixels.
    public static func rawImageData(_ spec: Spec) -> [UInt8] {
        var raw: [UInt8] = []
        if !spec.interlaced {
            for y in 0..<spec.height { raw += scanline(spec, y: y, columns: stride(from: 0, to: spec.width, by: 1)) }
            return raw
        }
        for pass in adam7 where pass.x < spec.width && pass.y < spec.height {
            for y in stride(from: pass.y, to: spec.height, by: pass.dy) {
                raw += scanline(spec, y: y, columns: stride(from: pass.x, to: spec.width, by: pass.dx))
            }
        }
        return raw
    }

    /// The whole file.
    public static func png(_ spec: Spec) -> [UInt8] {
        precondition(spec.samples.count == spec.width * spec.height * spec.colorType.channels, "sample count")
        func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
            Self.chunk(type, body, badCRC: spec.badCRC.contains(type))
        }
        let size = spec.declaredSize ?? (spec.width, spec.height)
        var file = signature
        file += chunk("IHDR", be32(size.width) + be32(size.height) + [
            UInt8(spec.bitDepth), spec.colorType.rawValue, 0, 0, spec.interlaced ? 1 : 0,
        ])
        if let profile = spec.iccProfile {
            file += chunk("iCCP", Array(spec.iccName.utf8) + [0, 0] + zlibStored(profile))
        }
        if let exif = spec.exif { file += chunk("eXIf", exif) }
        if !spec.palette.isEmpty { file += chunk("PLTE", spec.palette.flatMap { [$0.0, $0.1, $0.2] }) }
        if let transparency = spec.transparency { file += chunk("tRNS", transparency) }
        for extra in spec.extraChunks { file += chunk(extra.type, extra.body) }
        let stream = zlibStored(rawImageData(spec))
        var start = 0
        repeat {
            let end = min(stream.count, start + spec.idatChunkSize)
            file += chunk("IDAT", Array(stream[start..<end]))
            start = end
        } while start < stream.count
        if let exif = spec.exifAfterImage { file += chunk("eXIf", exif) }
        file += chunk("IEND", [])
        return file
    }

    /// The chunks of a file: type, offset of the chunk's length field, body length.
    public static func chunks(_ file: [UInt8]) -> [(type: String, offset: Int, length: Int)] {
        var result: [(String, Int, Int)] = []
        var i = 8
        while i + 8 <= file.count {
            let length = Int(file[i]) << 24 | Int(file[i + 1]) << 16 | Int(file[i + 2]) << 8 | Int(file[i + 3])
            result.append((String(decoding: file[i + 4..<i + 8], as: UTF8.self), i, length))
            i += 12 + length
        }
        return result
    }

    /// `file` with the CRC of every whole chunk recomputed, so that damage
    /// inside a chunk reaches the code that parses it.
    public static func fixingCRCs(_ file: [UInt8]) -> [UInt8] {
        var out = file
        for c in chunks(file) where c.offset + 12 + c.length <= file.count {
            let crc = be32(crc32(file[c.offset + 4..<c.offset + 8 + c.length]))
            out.replaceSubrange(c.offset + 8 + c.length..<c.offset + 12 + c.length, with: crc)
        }
        return out
    }

    // MARK: - Pictures and metadata

    /// RGB samples that differ at every pixel: R = x * 13, G = y * 17, B = (x ^ y) * 7 (mod 256).
    public static func rgbSamples(width: Int, height: Int) -> [UInt16] {
        (0..<width * height).flatMap { i -> [UInt16] in
            let x = i % width, y = i / width
            return [UInt16(x * 13 & 255), UInt16(y * 17 & 255), UInt16((x ^ y) * 7 & 255)]
        }
    }

    /// RGBA samples: the RGB ones, alpha cycling through 0, 255 and values between.
    public static func rgbaSamples(width: Int, height: Int) -> [UInt16] {
        let alphas: [UInt16] = [0, 255, 128, 1, 254, 64, 200, 17]
        let rgb = rgbSamples(width: width, height: height)
        var samples: [UInt16] = []
        for i in 0..<width * height {
            samples += rgb[i * 3..<i * 3 + 3]
            samples.append(alphas[(i * 5 + i / width) % alphas.count])
        }
        return samples
    }

    /// An eXIf body: a TIFF structure whose IFD0 holds one Orientation entry.
    public static func exif(orientation: Int, bigEndian: Bool = true) -> [UInt8] {
        func u16(_ v: Int) -> [UInt8] {
            bigEndian ? [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] : [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)]
        }
        func u32(_ v: Int) -> [UInt8] { bigEndian ? u16(v >> 16) + u16(v & 0xFFFF) : u16(v & 0xFFFF) + u16(v >> 16) }
        var tiff: [UInt8] = bigEndian ? [0x4D, 0x4D] : [0x49, 0x49]
        tiff += u16(42) + u32(8) + u16(1)
        tiff += u16(0x0112) + u16(3) + u32(1) + u16(orientation) + u16(0)
        return tiff + u32(0)
    }

    /// An ICC profile that passes libpng's checks (png_icc_check_length,
    /// png_icc_check_header, png_icc_check_tag_table): its length in its
    /// first four bytes and a multiple of 4, a display ('mntr') profile of
    /// `colorSpace` ("RGB " or "GRAY") with an XYZ connection space, the
    /// 'acsp' signature at 36, a perceptual intent, the D50 illuminant, and
    /// a tag table whose tags lie inside it. The tag data is filler.
    public static func iccProfile(colorSpace: String = "RGB ", tags: Int = 2, dataLength: Int = 200) -> [UInt8] {
        let length = 128 + 4 + 12 * tags + dataLength
        precondition(length % 4 == 0, "a profile's length is a multiple of 4")
        var p = [UInt8](repeating: 0, count: length)
        func put(_ bytes: [UInt8], at offset: Int) { p.replaceSubrange(offset..<offset + bytes.count, with: bytes) }
        put(be32(length), at: 0)
        put(Array("none".utf8), at: 4)                 // preferred CMM
        put([4, 0x30, 0, 0], at: 8)                     // version 4.3
        put(Array("mntr".utf8), at: 12)
        put(Array(colorSpace.utf8), at: 16)
        put(Array("XYZ ".utf8), at: 20)
        put([0x07, 0xE8, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0], at: 24)  // 2024-01-01
        put(Array("acsp".utf8), at: 36)
        put(be32(0), at: 64)                            // perceptual
        put([0x00, 0x00, 0xF6, 0xD6, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0xD3, 0x2D], at: 68)  // D50
        put(be32(tags), at: 128)
        let dataStart = 132 + 12 * tags
        let tagSize = dataLength / max(tags, 1) / 4 * 4
        for t in 0..<tags {
            put(Array("tg\(t)x".utf8.prefix(4)) + be32(dataStart + t * tagSize) + be32(tagSize), at: 132 + 12 * t)
        }
        for i in dataStart..<length { p[i] = UInt8(truncatingIfNeeded: i &* 31 &+ 7) }
        return p
    }

    /// Seeded pseudo-random numbers (SplitMix64), the same on every run.
    public struct SplitMix64 {
        public var state: UInt64
        public init(state: UInt64) { self.state = state }
        public mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        public mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    }
}
