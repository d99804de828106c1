import CHEIF

/// HEIF files for tests, written by libheif's encoders (through CHEIF):
/// HEIC with x265, AVIF with libaom. HEIF is lossy here, so the decoder is
/// checked against the pixels the test chose within a tolerance.
public enum HEIFFixtures {
    public enum Codec: Sendable { case hevc, av1 }

    /// A HEIF of one image, `width` × `height`, from `pixels` (RGB rows, or
    /// RGBA with `alpha`), at `quality` (0-100) or lossless, coded at
    /// `bitDepth` bits a sample (8, 10 or 12), with `icc` embedded when given.
    /// With `premultiplied` the RGB samples given are premultiplied by their
    /// alpha, and the file says so. With `nclx` (colour primaries and
    /// transfer characteristics, ISO/IEC 23091-2 codes) an nclx colour box
    /// says what the samples mean; libheif 1.15 writes one for AV1 only.
    public static func heif(width: Int, height: Int, pixels: [UInt8], alpha: Bool = false, premultiplied: Bool = false,
                            codec: Codec = .hevc, quality: Int = 90, lossless: Bool = false, bitDepth: Int = 8,
                            icc: [UInt8]? = nil, nclx: (primaries: Int, transfer: Int)? = nil) -> [UInt8] {
        let primaries = Int32(nclx?.primaries ?? 0), transfer = Int32(nclx?.transfer ?? 0)
        precondition(pixels.count == width * height * (alpha ? 4 : 3), "pixels hold width × height RGB or RGBA samples")
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: Int(DR_HEIF_MESSAGE_MAX))
        let status = message.withUnsafeMutableBufferPointer { text in
            pixels.withUnsafeBufferPointer { source in
                if let icc {
                    return icc.withUnsafeBufferPointer { profile in
                        dr_heif_encode(source.baseAddress, Int32(width), Int32(height), alpha ? (premultiplied ? 2 : 1) : 0, codec == .av1 ? 1 : 0, Int32(quality),
                                       lossless ? 1 : 0, Int32(bitDepth), profile.baseAddress, profile.count, primaries, transfer,
                                       &out, &length, text.baseAddress)
                    }
                }
                return dr_heif_encode(source.baseAddress, Int32(width), Int32(height), alpha ? (premultiplied ? 2 : 1) : 0, codec == .av1 ? 1 : 0, Int32(quality),
                                      lossless ? 1 : 0, Int32(bitDepth), nil, 0, primaries, transfer, &out, &length, text.baseAddress)
            }
        }
        precondition(status == 0 && out != nil, "libheif could not write the fixture: \(String(cString: message))")
        defer { dr_heif_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }

    /// A grid image, as phones save their photos: `tile` × `tile` tiles,
    /// each coded on its own by `heif`, laid out row by row and cut to
    /// `width` × `height` (the last column and row may reach past it), from
    /// RGB `pixels`. libheif 1.15 cannot write grids, so the boxes are
    /// written here: the grid item (its layout in idat) is the primary
    /// image, and the tiles are hidden items it refers to (iref dimg), each
    /// with its own coding configuration (hvcC or av1C) and size (ispe).
    public static func grid(width: Int, height: Int, tile: Int, pixels: [UInt8], codec: Codec = .hevc, quality: Int = 90) -> [UInt8] {
        precondition(pixels.count == width * height * 3, "pixels hold width × height RGB samples")
        let columns = (width + tile - 1) / tile, rows = (height + tile - 1) / tile
        precondition(columns * rows + 4 < 128, "each item's properties are named by a 7-bit index")
        // Each tile's pixels (the image's edge repeated past it), coded, and
        // its configuration box and coded data taken from the file.
        var configs: [[UInt8]] = [], data: [[UInt8]] = []
        for row in 0..<rows {
            for column in 0..<columns {
                var cut: [UInt8] = []
                cut.reserveCapacity(tile * tile * 3)
                for y in 0..<tile {
                    for x in 0..<tile {
                        let source = (min(row * tile + y, height - 1) * width + min(column * tile + x, width - 1)) * 3
                        cut.append(contentsOf: pixels[source..<source + 3])
                    }
                }
                let file = heif(width: tile, height: tile, pixels: cut, codec: codec, quality: quality)
                let meta = topLevelBox("meta", in: file)
                let config = codec == .av1 ? "av1C" : "hvcC"
                let at = (meta.lowerBound..<meta.upperBound - 4).first { file[$0..<$0 + 4].elementsEqual(config.utf8) }!
                configs.append(Array(file[at - 4..<at - 4 + Int(be32(file, at - 4))]))
                // libheif's mdat holds the one image's data and nothing else.
                data.append(Array(file[topLevelBox("mdat", in: file).dropFirst(8)]))
            }
        }
        let tiles = columns * rows
        let itemType = codec == .av1 ? "av01" : "hvc1"
        let brands = codec == .av1 ? ["avif", "mif1", "miaf"] : ["heic", "mif1"]
        let ftyp = box("ftyp", Array(brands[0].utf8) + u32(0) + brands.flatMap { Array($0.utf8) })
        func meta(firstTileAt offset: Int) -> [UInt8] {
            let hdlr = fullBox("hdlr", version: 0, u32(0) + Array("pict".utf8) + [UInt8](repeating: 0, count: 13))
            let pitm = fullBox("pitm", version: 0, u16(1))
            var entries = fullBox("infe", version: 2, u16(1) + u16(0) + Array("grid".utf8) + [0])
            for index in 0..<tiles {
                entries += fullBox("infe", version: 2, flags: 1, u16(2 + index) + u16(0) + Array(itemType.utf8) + [0])
            }
            let iinf = fullBox("iinf", version: 0, u16(1 + tiles) + entries)
            let iref = fullBox("iref", version: 0, box("dimg", u16(1) + u16(tiles) + (0..<tiles).flatMap { u16(2 + $0) }))
            // Properties, 1-based: the tiles' configurations, the tile size,
            // the grid's size.
            let ispe = { (w: Int, h: Int) in fullBox("ispe", version: 0, u32(w) + u32(h)) }
            let ipco = box("ipco", configs.flatMap { $0 } + ispe(tile, tile) + ispe(width, height))
            var associations = u16(1) + [1, UInt8(tiles + 2)]
            for index in 0..<tiles { associations += u16(2 + index) + [2, 0x80 | UInt8(index + 1), UInt8(tiles + 1)] }
            let ipma = fullBox("ipma", version: 0, u32(1 + tiles) + associations)
            // The grid's layout: version, flags (16-bit sizes), rows and
            // columns less one, the output size.
            let layout: [UInt8] = [0, 0, UInt8(rows - 1), UInt8(columns - 1)] + u16(width) + u16(height)
            // iloc version 1: 4-byte offsets and lengths; the grid's data in
            // idat (construction method 1), each tile's in the file.
            var locations = u16(1) + u16(1) + u16(0) + u16(1) + u32(0) + u32(layout.count)
            var at = offset
            for index in 0..<tiles {
                locations += u16(2 + index) + u16(0) + u16(0) + u16(1) + u32(at) + u32(data[index].count)
                at += data[index].count
            }
            let iloc = fullBox("iloc", version: 1, [0x44, 0x00] + u16(1 + tiles) + locations)
            return fullBox("meta", version: 0, hdlr + pitm + iinf + iref + box("iprp", ipco + ipma) + box("idat", layout) + iloc)
        }
        let sized = meta(firstTileAt: 0).count
        return ftyp + meta(firstTileAt: ftyp.count + sized + 8) + box("mdat", data.flatMap { $0 })
    }

    private static func u16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    private static func u32(_ value: Int) -> [UInt8] { [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    private static func be32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }
    private static func box(_ type: String, _ body: [UInt8]) -> [UInt8] { u32(8 + body.count) + Array(type.utf8) + body }
    private static func fullBox(_ type: String, version: UInt8, flags: Int = 0, _ body: [UInt8]) -> [UInt8] {
        box(type, [version, UInt8(flags >> 16 & 0xFF), UInt8(flags >> 8 & 0xFF), UInt8(flags & 0xFF)] + body)
    }
    /// The byte range of the first top-level box of `type` in a file.
    private static func topLevelBox(_ type: String, in file: [UInt8]) -> Range<Int> {
        var at = 0
        while at + 8 <= file.count {
            let size = Int(be32(file, at))
            if file[at + 4..<at + 8].elementsEqual(type.utf8) { return at..<at + size }
            precondition(size >= 8, "a box of \(size) bytes")
            at += size
        }
        preconditionFailure("no \(type) box")
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
