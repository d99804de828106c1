import DarkroomFixtures
import Testing

@testable import DarkroomImage

/// The PNG decoder: every colour type and bit depth to RGBX, alpha
/// composited, Adam7, the iCCP and eXIf chunks, the limits, damaged files,
/// cancellation, and a seeded mutation fuzz. Fixtures come from PNGFixtures.
@Suite("PNG codec")
struct PNGCodecTests {
    typealias Spec = PNGFixtures.Spec

    /// `(c * a + bg * (255 - a) + 127) / 255`, the compositing the decoder promises.
    static func over(_ c: Int, _ a: Int, _ bg: UInt8) -> UInt8 {
        UInt8((c * a + Int(bg) * (255 - a) + 127) / 255)
    }

    /// What decoding `spec` must give, computed from its samples: samples
    /// scaled to 8 bits (v / 257 rounded for 16 bits, v * 255 / (2^d - 1)
    /// below 8), palette looked up, tRNS applied, alpha composited.
    static func expected(_ spec: Spec, background bg: (UInt8, UInt8, UInt8) = (255, 255, 255)) -> Image {
        let maxValue = (1 << spec.bitDepth) - 1
        func to8(_ v: UInt16) -> Int {
            spec.bitDepth == 16 ? Int((Double(v) / 257).rounded()) : Int(v) * 255 / maxValue
        }
        func key(_ at: Int) -> Int? {
            guard let t = spec.transparency, t.count >= at + 2 else { return nil }
            return Int(t[at]) << 8 | Int(t[at + 1])
        }
        let channels = spec.colorType.channels
        var pixels: [UInt8] = []
        for i in 0..<spec.width * spec.height {
            let s = Array(spec.samples[i * channels..<(i + 1) * channels])
            var (r, g, b, a) = (0, 0, 0, 255)
            switch spec.colorType {
            case .gray:
                (r, g, b) = (to8(s[0]), to8(s[0]), to8(s[0]))
                if key(0) == Int(s[0]) { a = 0 }
            case .rgb:
                (r, g, b) = (to8(s[0]), to8(s[1]), to8(s[2]))
                if key(0) == Int(s[0]) && key(2) == Int(s[1]) && key(4) == Int(s[2]) { a = 0 }
            case .palette:
                let entry = spec.palette[Int(s[0])]
                (r, g, b) = (Int(entry.0), Int(entry.1), Int(entry.2))
                if let t = spec.transparency, Int(s[0]) < t.count { a = Int(t[Int(s[0])]) }
            case .grayAlpha:
                (r, g, b, a) = (to8(s[0]), to8(s[0]), to8(s[0]), to8(s[1]))
            case .rgba:
                (r, g, b, a) = (to8(s[0]), to8(s[1]), to8(s[2]), to8(s[3]))
            }
            pixels += [over(r, a, bg.0), over(g, a, bg.1), over(b, a, bg.2), 255]
        }
        return Image(width: spec.width, height: spec.height, pixels: pixels)
    }

    static func rgbSpec(width: Int = 7, height: Int = 5) -> Spec {
        Spec(width: width, height: height, colorType: .rgb, samples: PNGFixtures.rgbSamples(width: width, height: height))
    }

    static func rgbaSpec(width: Int = 8, height: Int = 6) -> Spec {
        Spec(width: width, height: height, colorType: .rgba, samples: PNGFixtures.rgbaSamples(width: width, height: height))
    }

    static func graySpec(width: Int, height: Int, bitDepth: Int) -> Spec {
        let levels = 1 << bitDepth
        return Spec(width: width, height: height, colorType: .gray, bitDepth: bitDepth,
                    samples: (0..<width * height).map { UInt16(($0 * 7 + $0 / width) % levels) })
    }

    static func paletteSpec(width: Int, height: Int, bitDepth: Int) -> Spec {
        var spec = Spec(width: width, height: height, colorType: .palette, bitDepth: bitDepth,
                        samples: (0..<width * height).map { UInt16(($0 + $0 / width) % 4) })
        spec.palette = [(200, 10, 10), (10, 200, 10), (10, 10, 200), (90, 90, 90)]
        // Shorter than the palette: the last entry is opaque.
        spec.transparency = [0, 128, 255]
        return spec
    }

    /// A 64 x 48 RGBA picture, the file of the fuzz and the cancellation tests.
    static let rgba64 = rgbaSpec(width: 64, height: 48)

    // MARK: - Pixels

    @Test("8-bit RGB: the header says what IHDR says, and every pixel comes back exactly")
    func rgb8() throws {
        let spec = Self.rgbSpec()
        let bytes = PNGFixtures.png(spec)
        #expect(PNG.isPNG(bytes))
        let header = try PNG.readHeader(bytes)
        #expect(header == PNGHeader(
            storedSize: Size(width: 7, height: 5), orientation: .up, hasAlpha: false, isInterlaced: false, bitDepth: 8))
        #expect(header.uprightSize == Size(width: 7, height: 5))
        let image = try PNG.decode(bytes)
        #expect(image.width == 7 && image.height == 5)
        for y in 0..<5 {
            for x in 0..<7 {
                let p = image.pixel(x: x, y: y)
                #expect(p.r == UInt8(x * 13) && p.g == UInt8(y * 17) && p.b == UInt8((x ^ y) * 7), "pixel (\(x), \(y))")
            }
        }
        #expect(TestImages.paddingIsOpaque(image))
        #expect(image == Self.expected(spec))
        // The background only matters where there is alpha.
        #expect(try PNG.decode(bytes, background: (1, 2, 3)) == image)
    }

    @Test("RGBA is composited onto white by default, and onto the background given")
    func rgbaComposited() throws {
        let spec = Self.rgbaSpec()
        let bytes = PNGFixtures.png(spec)
        #expect(try PNG.readHeader(bytes).hasAlpha)
        let white = try PNG.decode(bytes)
        #expect(white == Self.expected(spec))
        let background: (UInt8, UInt8, UInt8) = (10, 200, 30)
        let onColour = try PNG.decode(bytes, background: background)
        #expect(onColour == Self.expected(spec, background: background))
        #expect(TestImages.paddingIsOpaque(white) && TestImages.paddingIsOpaque(onColour))
        var opaque = 0, transparent = 0, between = 0
        for i in 0..<spec.width * spec.height {
            let (x, y) = (i % spec.width, i / spec.width)
            let s = spec.samples[i * 4..<i * 4 + 4].map { Int($0) }
            let p = onColour.pixel(x: x, y: y)
            switch s[3] {
            case 255:
                #expect(p == (UInt8(s[0]), UInt8(s[1]), UInt8(s[2])), "opaque pixel \(i) unchanged")
                opaque += 1
            case 0:
                #expect(p == background, "transparent pixel \(i) is the background")
                #expect(white.pixel(x: x, y: y) == (255, 255, 255))
                transparent += 1
            default:
                let w = white.pixel(x: x, y: y)
                #expect(w.r == UInt8((s[0] * s[3] + 255 * (255 - s[3]) + 127) / 255))
                #expect(p.g == UInt8((s[1] * s[3] + 200 * (255 - s[3]) + 127) / 255))
                between += 1
            }
        }
        #expect(opaque > 0 && transparent > 0 && between > 0)
    }

    @Test("gray and gray + alpha become equal R, G and B")
    func gray() throws {
        let gray = Spec(width: 5, height: 4, colorType: .gray, samples: (0..<20).map { UInt16($0 * 13) })
        let image = try PNG.decode(PNGFixtures.png(gray))
        #expect(image == Self.expected(gray))
        #expect(image.pixel(x: 3, y: 2) == (169, 169, 169))  // sample 13 * 13
        #expect(try PNG.readHeader(PNGFixtures.png(gray)).hasAlpha == false)

        let alphas: [UInt16] = [0, 255, 100, 30]
        let samples = (0..<20).flatMap { i -> [UInt16] in [UInt16(i * 13), alphas[i % 4]] }
        let grayAlpha = Spec(width: 5, height: 4, colorType: .grayAlpha, samples: samples)
        let bytes = PNGFixtures.png(grayAlpha)
        #expect(try PNG.readHeader(bytes).hasAlpha)
        let composited = try PNG.decode(bytes, background: (0, 50, 250))
        #expect(composited == Self.expected(grayAlpha, background: (0, 50, 250)))
        #expect(composited.pixel(x: 0, y: 0) == (0, 50, 250))  // alpha 0
        #expect(composited.pixel(x: 1, y: 0) == (13, 13, 13))  // alpha 255
        let g = Int(2 * 13)  // pixel 2, alpha 100
        #expect(composited.pixel(x: 2, y: 0) == (Self.over(g, 100, 0), Self.over(g, 100, 50), Self.over(g, 100, 250)))
    }

    @Test("a palette with a tRNS chunk: entries looked up, their alphas composited", arguments: [2, 8])
    func paletteWithTransparency(bitDepth: Int) throws {
        let spec = Self.paletteSpec(width: 5, height: 3, bitDepth: bitDepth)
        let bytes = PNGFixtures.png(spec)
        let header = try PNG.readHeader(bytes)
        #expect(header.hasAlpha && header.bitDepth == bitDepth)
        let image = try PNG.decode(bytes, background: (0, 0, 0))
        #expect(image == Self.expected(spec, background: (0, 0, 0)))
        #expect(image.pixel(x: 0, y: 0) == (0, 0, 0))        // index 0, alpha 0
        #expect(image.pixel(x: 1, y: 0) == (5, 100, 5))      // index 1, alpha 128 over black
        #expect(image.pixel(x: 2, y: 0) == (10, 10, 200))    // index 2, alpha 255
        #expect(image.pixel(x: 3, y: 0) == (90, 90, 90))     // index 3, past tRNS: opaque
        // Without tRNS the same file has no alpha.
        var opaque = spec
        opaque.transparency = nil
        #expect(try PNG.readHeader(PNGFixtures.png(opaque)).hasAlpha == false)
        #expect(try PNG.decode(PNGFixtures.png(opaque)).pixel(x: 0, y: 0) == (200, 10, 10))
    }

    @Test("an RGB tRNS colour key makes exactly the pixels of that colour transparent")
    func rgbColorKey() throws {
        var spec = Self.rgbSpec(width: 6, height: 4)
        // The colour of pixel (0, 0): 0, 0, 0. Pixel (1, 1) is 13, 17, 0.
        spec.transparency = [0, 0, 0, 0, 0, 0]
        let bytes = PNGFixtures.png(spec)
        #expect(try PNG.readHeader(bytes).hasAlpha)
        let image = try PNG.decode(bytes, background: (7, 8, 9))
        #expect(image == Self.expected(spec, background: (7, 8, 9)))
        #expect(image.pixel(x: 0, y: 0) == (7, 8, 9))
        #expect(image.pixel(x: 1, y: 1) == (13, 17, 0))
    }

    @Test("16-bit samples are scaled to 8 bits with rounding, not cut to their high byte")
    func sixteenBit() throws {
        let values: [UInt16] = [0x1234, 0xFFFF, 0x12FF, 0x0080, 0x0081, 0x0000, 0x8080, 0x7F7F, 0xFF7F]
        let spec = Spec(width: 3, height: 3, colorType: .rgb, bitDepth: 16,
                        samples: values.flatMap { [$0, 0xFFFF - $0, $0] })
        let bytes = PNGFixtures.png(spec)
        #expect(try PNG.readHeader(bytes).bitDepth == 16)
        let image = try PNG.decode(bytes)
        #expect(image == Self.expected(spec))
        let reds = (0..<9).map { image.pixel(x: $0 % 3, y: $0 / 3).r }
        #expect(reds == [0x12, 0xFF, 0x13, 0x00, 0x01, 0x00, 0x80, 0x7F, 0xFF])
        // 0x12FF: its high byte is 0x12, v / 257 = 18.92 rounds to 0x13.
        #expect(image.pixel(x: 2, y: 0).g == UInt8((Double(0xFFFF - 0x12FF) / 257).rounded()))

        // 16-bit RGBA: alpha is scaled the same way before compositing.
        let rgba = Spec(width: 2, height: 1, colorType: .rgba, bitDepth: 16,
                        samples: [0xFFFF, 0x1234, 0x0000, 0x8000, 0x1234, 0x12FF, 0xFFFF, 0xFFFF])
        let decoded = try PNG.decode(PNGFixtures.png(rgba), background: (0, 0, 0))
        #expect(decoded == Self.expected(rgba, background: (0, 0, 0)))
        #expect(decoded.pixel(x: 1, y: 0) == (0x12, 0x13, 0xFF))
    }

    @Test("1-, 2- and 4-bit gray is expanded to full-range 8-bit", arguments: [1, 2, 4])
    func lowBitGray(bitDepth: Int) throws {
        // 11 wide: rows end inside a byte at every depth.
        let spec = Self.graySpec(width: 11, height: 3, bitDepth: bitDepth)
        let bytes = PNGFixtures.png(spec)
        #expect(try PNG.readHeader(bytes).bitDepth == bitDepth)
        let image = try PNG.decode(bytes)
        #expect(image == Self.expected(spec))
        let top = (1 << bitDepth) - 1
        let samples = spec.samples.map(Int.init)
        let brightest = try #require(samples.firstIndex(of: top))
        let darkest = try #require(samples.firstIndex(of: 0))
        #expect(image.pixel(x: brightest % 11, y: brightest / 11) == (255, 255, 255))
        #expect(image.pixel(x: darkest % 11, y: darkest / 11) == (0, 0, 0))
    }

    @Test("an Adam7 file gives the pixels of the same picture not interlaced")
    func adam7() throws {
        var specs: [Spec] = []
        for (w, h) in [(1, 1), (3, 2), (8, 8), (9, 9), (17, 13)] {
            specs.append(Self.rgbSpec(width: w, height: h))
            specs.append(Self.rgbaSpec(width: w, height: h))
            specs.append(Self.graySpec(width: w, height: h, bitDepth: 1))
            specs.append(Self.paletteSpec(width: w, height: h, bitDepth: 4))
        }
        specs.append(Spec(width: 10, height: 7, colorType: .grayAlpha, bitDepth: 16,
                          samples: (0..<140).map { UInt16($0 * 467 & 0xFFFF) }))
        for spec in specs {
            var interlaced = spec
            interlaced.interlaced = true
            let plain = PNGFixtures.png(spec), adam7 = PNGFixtures.png(interlaced)
            #expect(plain != adam7)
            let header = try PNG.readHeader(adam7)
            #expect(header.isInterlaced)
            #expect(try PNG.readHeader(plain).isInterlaced == false)
            let a = try PNG.decode(adam7, background: (30, 60, 90))
            #expect(a == (try PNG.decode(plain, background: (30, 60, 90))), "\(spec.colorType) \(spec.width)x\(spec.height)")
            #expect(a == Self.expected(spec, background: (30, 60, 90)))
        }
    }

    @Test("image data split over many IDAT chunks decodes the same")
    func manyIDATChunks() throws {
        var spec = Self.rgbaSpec(width: 20, height: 10)
        let one = PNGFixtures.png(spec)
        spec.idatChunkSize = 7
        let many = PNGFixtures.png(spec)
        #expect(PNGFixtures.chunks(many).filter { $0.type == "IDAT" }.count > 50)
        #expect(try PNG.decode(many) == (try PNG.decode(one)))
    }

    // MARK: - Metadata

    @Test("the iCCP profile comes back byte for byte; an unusable one is nil")
    func iccProfile() throws {
        var spec = Self.rgbSpec()
        let plain = try PNG.decode(PNGFixtures.png(spec))
        let profile = PNGFixtures.iccProfile()
        spec.iccProfile = profile
        let bytes = PNGFixtures.png(spec)
        let header = try PNG.readHeader(bytes)
        #expect(header.iccProfile == profile)
        #expect(header.iccProfile?.count == 128 + 4 + 24 + 200)
        #expect(try PNG.decode(bytes) == plain)

        // A gray profile on a gray file is kept; on an RGB file it is not
        // (libpng: "Gray color space not permitted on RGB PNG").
        var gray = Self.graySpec(width: 4, height: 4, bitDepth: 8)
        let grayProfile = PNGFixtures.iccProfile(colorSpace: "GRAY", tags: 1, dataLength: 64)
        gray.iccProfile = grayProfile
        #expect(try PNG.readHeader(PNGFixtures.png(gray)).iccProfile == grayProfile)
        spec.iccProfile = grayProfile
        #expect(try PNG.readHeader(PNGFixtures.png(spec)).iccProfile == nil)
        #expect(try PNG.decode(PNGFixtures.png(spec)) == plain)

        // No 'acsp' signature, a length field that disagrees, a tag outside
        // the profile, a profile shorter than a header: all unusable, all
        // decoding the same pixels.
        var noSignature = profile
        noSignature.replaceSubrange(36..<40, with: Array("abcd".utf8))
        var wrongLength = profile
        wrongLength[3] &+= 4
        var tagOutside = profile
        tagOutside.replaceSubrange(136..<140, with: PNGFixtures.be32(profile.count))
        for bad in [noSignature, wrongLength, tagOutside, Array(profile.prefix(100))] {
            spec.iccProfile = bad
            let file = PNGFixtures.png(spec)
            #expect(try PNG.readHeader(file).iccProfile == nil)
            #expect(try PNG.decode(file) == plain)
        }
    }

    @Test("eXIf before the image data gives the orientation; the pixels stay as stored")
    func exifOrientation() throws {
        var spec = Self.rgbSpec()
        let stored = try PNG.decode(PNGFixtures.png(spec))
        spec.exif = PNGFixtures.exif(orientation: 6)
        let bytes = PNGFixtures.png(spec)
        let header = try PNG.readHeader(bytes)
        #expect(header.orientation == .right)
        #expect(header.storedSize == Size(width: 7, height: 5))
        #expect(header.uprightSize == Size(width: 5, height: 7))
        #expect(try PNG.decode(bytes) == stored)

        spec.exif = PNGFixtures.exif(orientation: 8, bigEndian: false)
        #expect(try PNG.readHeader(PNGFixtures.png(spec)).orientation == .left)
        spec.exif = PNGFixtures.exif(orientation: 3)
        let down = try PNG.readHeader(PNGFixtures.png(spec))
        #expect(down.orientation == .down && down.uprightSize == Size(width: 7, height: 5))
        // Out of range, or not a TIFF structure: up.
        spec.exif = PNGFixtures.exif(orientation: 9)
        #expect(try PNG.readHeader(PNGFixtures.png(spec)).orientation == .up)
        spec.exif = Array("MM not a tiff".utf8)
        #expect(try PNG.readHeader(PNGFixtures.png(spec)).orientation == .up)
        // After the image data: not read.
        spec.exif = nil
        spec.exifAfterImage = PNGFixtures.exif(orientation: 6)
        #expect(try PNG.readHeader(PNGFixtures.png(spec)).orientation == .up)
    }

    // MARK: - Limits

    @Test("an IHDR of 100000 x 100000 is refused from the header, before any allocation")
    func decompressionBomb() {
        var spec = Self.rgbSpec(width: 4, height: 4)
        spec.declaredSize = (100_000, 100_000)
        let bytes = PNGFixtures.png(spec)
        let clock = ContinuousClock()
        let start = clock.now
        let message = "image 100000x100000 is 10000.0 megapixels, over the 50.0 megapixel limit"
        #expect(error { () throws(ImageError) in _ = try PNG.readHeader(bytes) } == ImageError(.limitExceeded, message))
        #expect(error { () throws(ImageError) in _ = try PNG.decode(bytes) } == ImageError(.limitExceeded, message))
        // 40 GB of pixels were never asked for: both answers came at once.
        #expect(clock.now - start < .seconds(1))

        // Within the side limit, over the pixel limit: refused from the
        // header too (a 1 GB buffer would take far longer to fill).
        spec.declaredSize = (16_000, 16_000)
        let pixels = PNGFixtures.png(spec)
        let again = clock.now
        #expect(error { () throws(ImageError) in _ = try PNG.decode(pixels) }
            == ImageError(.limitExceeded, "image 16000x16000 is 256.0 megapixels, over the 50.0 megapixel limit"))
        #expect(clock.now - again < .seconds(1))

        // Over the side limit only (100000 pixels in all).
        spec.declaredSize = (100_000, 1)
        #expect(error { () throws(ImageError) in _ = try PNG.decode(PNGFixtures.png(spec)) }
            == ImageError(.limitExceeded, "image 100000x1 has a side of 100000 pixels, over the 16384 pixel limit"))
    }

    @Test("maxPixels, maxSide and maxInputBytes are worded as the JPEG decoder words them")
    func limits() {
        let bytes = PNGFixtures.png(Self.rgba64)
        let pixels = error { () throws(ImageError) in _ = try PNG.decode(bytes, limits: DecodeLimits(maxPixels: 3000)) }
        #expect(pixels == ImageError(.limitExceeded, "image 64x48 is 0.0 megapixels, over the 0.0 megapixel limit"))
        #expect(error { () throws(ImageError) in _ = try PNG.readHeader(bytes, limits: DecodeLimits(maxPixels: 3000)) } == pixels)
        #expect(error { () throws(ImageError) in _ = try PNG.decode(bytes, limits: DecodeLimits(maxPixels: 3072)) } == nil)

        let side = error { () throws(ImageError) in _ = try PNG.readHeader(bytes, limits: DecodeLimits(maxSide: 63)) }
        #expect(side == ImageError(.limitExceeded, "image 64x48 has a side of 64 pixels, over the 63 pixel limit"))
        #expect(error { () throws(ImageError) in _ = try PNG.decode(bytes, limits: DecodeLimits(maxSide: 63)) } == side)
        #expect(error { () throws(ImageError) in _ = try PNG.decode(bytes, limits: DecodeLimits(maxSide: 64)) } == nil)

        let input = error { () throws(ImageError) in
            _ = try PNG.decode(bytes, limits: DecodeLimits(maxInputBytes: bytes.count - 1))
        }
        #expect(input == ImageError(.limitExceeded, "input is \(bytes.count) bytes, over the \(bytes.count - 1) byte limit"))
    }

    @Test("an IHDR with a width or height of 0 is refused as invalid dimensions")
    func zeroSize() {
        var spec = Self.rgbSpec(width: 2, height: 2)
        spec.declaredSize = (0, 5)
        #expect(error { () throws(ImageError) in _ = try PNG.readHeader(PNGFixtures.png(spec)) }
            == ImageError(.invalidDimensions, "header declares width 0"))
        spec.declaredSize = (5, 0)
        #expect(error { () throws(ImageError) in _ = try PNG.decode(PNGFixtures.png(spec)) }
            == ImageError(.invalidDimensions, "header declares height 0"))
    }

    // MARK: - Damaged and foreign input

    @Test("data cut short is truncated, wherever it ends")
    func truncated() throws {
        let bytes = PNGFixtures.png(Self.rgba64)
        let idat = try #require(PNGFixtures.chunks(bytes).first { $0.type == "IDAT" })
        let cut = Array(bytes.prefix(idat.offset + 8 + idat.length / 2))
        // The chunks before the image data are whole: the header reads.
        #expect(try PNG.readHeader(cut).storedSize == Size(width: 64, height: 48))
        let e = error { () throws(ImageError) in _ = try PNG.decode(cut) }
        #expect(e?.code == .truncated)
        #expect(e?.message.hasPrefix("truncated: data ends before the image does (libpng: ") == true)
        // Only the Adler-32 and the CRC missing: the rows are whole but the stream is not.
        let tail = error { () throws(ImageError) in _ = try PNG.decode(Array(bytes.prefix(idat.offset + 8 + idat.length - 2))) }
        #expect(tail?.code == .truncated)

        // The signature only, or less of it.
        let signature = error { () throws(ImageError) in _ = try PNG.readHeader(PNGFixtures.signature) }
        #expect(signature?.code == .truncated)
        let partial = error { () throws(ImageError) in _ = try PNG.decode(Array(PNGFixtures.signature.prefix(5))) }
        #expect(partial == ImageError(.truncated, "truncated: data ends before the header does (5 bytes)"))
        // Inside IHDR.
        #expect(error { () throws(ImageError) in _ = try PNG.readHeader(Array(bytes.prefix(20))) }?.code == .truncated)
        #expect(error { () throws(ImageError) in _ = try PNG.readHeader(Array(bytes.prefix(30))) }?.code == .truncated)
    }

    @Test("a bad CRC in a critical chunk, a broken zlib stream, a bad filter, too little data: corrupt")
    func corrupt() throws {
        var spec = Self.rgbaSpec()
        spec.badCRC = ["IHDR"]
        let ihdr = error { () throws(ImageError) in _ = try PNG.readHeader(PNGFixtures.png(spec)) }
        #expect(ihdr == ImageError(.corrupt, "corrupt PNG data (libpng: IHDR: CRC error)"))
        #expect(error { () throws(ImageError) in _ = try PNG.decode(PNGFixtures.png(spec)) } == ihdr)

        spec.badCRC = ["IDAT"]
        let idat = error { () throws(ImageError) in _ = try PNG.decode(PNGFixtures.png(spec)) }
        #expect(idat == ImageError(.corrupt, "corrupt PNG data (libpng: IDAT: CRC error)"))

        spec.badCRC = []
        let good = PNGFixtures.png(spec)
        let start = try #require(PNGFixtures.chunks(good).first { $0.type == "IDAT" }).offset + 8
        // The zlib header's compression method (8, deflate) made 7; CRC made right again.
        var zlib = good
        zlib[start] = 0x77
        let broken = error { () throws(ImageError) in _ = try PNG.decode(PNGFixtures.fixingCRCs(zlib)) }
        #expect(broken?.code == .corrupt)
        #expect(broken?.message.hasPrefix("corrupt PNG data (libpng: IDAT: ") == true)
        // The first row's filter byte (after the zlib header and the stored
        // block's 5 bytes) made 5, not a filter type.
        var filter = good
        filter[start + 7] = 5
        let badFilter = error { () throws(ImageError) in _ = try PNG.decode(PNGFixtures.fixingCRCs(filter)) }
        #expect(badFilter == ImageError(.corrupt, "corrupt PNG data (libpng: bad adaptive filter value)"))
        // IHDR says 6 rows, the stream holds 3 (a whole, valid zlib stream).
        var short = spec
        short.declaredSize = (8, 12)
        let few = error { () throws(ImageError) in _ = try PNG.decode(PNGFixtures.png(short)) }
        #expect(few?.code == .corrupt)
        // A palette file without PLTE.
        var noPalette = Self.paletteSpec(width: 3, height: 3, bitDepth: 8)
        noPalette.palette = []
        #expect(error { () throws(ImageError) in _ = try PNG.decode(PNGFixtures.png(noPalette)) }?.code == .corrupt)
        // A bit depth colour type 2 does not allow.
        var file = PNGFixtures.png(Self.rgbSpec(width: 2, height: 2))
        file[24] = 4
        let ihdrDepth = error { () throws(ImageError) in _ = try PNG.readHeader(PNGFixtures.fixingCRCs(file)) }
        #expect(ihdrDepth?.code == .corrupt)
        #expect(ihdrDepth?.message.contains("Invalid IHDR data") == true)
    }

    @Test("benign damage drops a chunk but not the picture")
    func benignProblems() throws {
        var spec = Self.rgbaSpec()
        let clean = try PNG.decode(PNGFixtures.png(spec))
        spec.extraChunks = [("tEXt", Array("Comment\0hello".utf8)), ("vpAg", [1, 2, 3]), ("zzZz", [])]
        // Bad CRCs in ancillary chunks, known and unknown.
        spec.badCRC = ["tEXt", "vpAg"]
        let file = PNGFixtures.png(spec)
        #expect(try PNG.decode(file) == clean)
        #expect(try PNG.readHeader(file).storedSize == Size(width: 8, height: 6))

        // An eXIf chunk with a bad CRC is dropped: no orientation.
        spec.exif = PNGFixtures.exif(orientation: 6)
        spec.badCRC = ["eXIf"]
        let dropped = PNGFixtures.png(spec)
        #expect(try PNG.readHeader(dropped).orientation == .up)
        #expect(try PNG.decode(dropped) == clean)

        // Extra bytes after the zlib stream in IDAT: a warning.
        spec.exif = nil
        spec.badCRC = []
        var extra = PNGFixtures.png(spec)
        let idat = try #require(PNGFixtures.chunks(extra).first { $0.type == "IDAT" })
        let body = Array(extra[idat.offset + 8..<idat.offset + 8 + idat.length]) + [1, 2, 3]
        extra.replaceSubrange(idat.offset..<idat.offset + 12 + idat.length, with: PNGFixtures.chunk("IDAT", body))
        #expect(try PNG.decode(extra) == clean)
    }

    @Test("a critical chunk libpng does not know is unsupported")
    func unknownCriticalChunk() {
        var spec = Self.rgbSpec()
        spec.extraChunks = [("ABCD", [1, 2, 3, 4])]
        let e = error { () throws(ImageError) in _ = try PNG.decode(PNGFixtures.png(spec)) }
        #expect(e == ImageError(.unsupported, "unsupported PNG (libpng: ABCD: unhandled critical chunk)"))
    }

    @Test("zero bytes are empty; anything without the signature is not a PNG")
    func foreignInput() throws {
        #expect(error { () throws(ImageError) in _ = try PNG.readHeader([]) } == ImageError(.empty, "empty input (0 bytes)"))
        #expect(error { () throws(ImageError) in _ = try PNG.decode([]) } == ImageError(.empty, "empty input (0 bytes)"))
        #expect(!PNG.isPNG([]))

        var noise = JPEGFixtures.noise(count: 4096)
        noise[0] = 0x12
        let random = error { () throws(ImageError) in _ = try PNG.decode(noise) }
        let hex = noise.prefix(4).map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }.joined(separator: " ")
        #expect(random == ImageError(.corrupt, "not a PNG (no PNG signature; starts with \(hex))"))

        let jpeg = JPEGFixtures.jpeg(JPEGFixtures.pattern(width: 16, height: 16))
        #expect(error { () throws(ImageError) in _ = try PNG.readHeader(jpeg) }
            == ImageError(.corrupt, "not a PNG (no PNG signature; starts with FF D8 FF E0: looks like JPEG)"))

        // The signature as a text-mode transfer leaves it: CR LF made LF.
        let text = [0x89, 0x50, 0x4E, 0x47, 0x0A, 0x1A, 0x0A] + PNGFixtures.png(Self.rgbSpec()).dropFirst(8)
        #expect(error { () throws(ImageError) in _ = try PNG.readHeader(Array(text)) }?.code == .corrupt)

        // Random bytes after a good signature: an error, never a crash.
        var state = PNGFixtures.SplitMix64(state: 42)
        for length in [1, 4, 13, 25, 100, 1000] {
            let bytes = PNGFixtures.signature + (0..<length).map { _ in UInt8(truncatingIfNeeded: state.next()) }
            let e = error { () throws(ImageError) in _ = try PNG.decode(bytes) }
            let code = try #require(e, "\(length) random bytes decoded").code
            #expect([.corrupt, .truncated, .unsupported].contains(code), "\(length) random bytes: \(String(describing: e))")
        }
    }

    // MARK: - Cancellation

    @Test("a flag set before the decode stops it before libpng runs")
    func cancelledBeforeStart() {
        let flag = CancellationFlag()
        flag.cancel()
        #expect(throws: ImageError.cancelled) { _ = try PNG.decode(PNGFixtures.png(Self.rgba64), cancellation: flag) }
        #expect(flag.pollCount == 0)
    }

    @Test("the flag is looked at every 16 rows of each pass, and a flag set halfway stops the decode")
    func cancelledDuringDecode() throws {
        let bytes = PNGFixtures.png(Self.rgba64)
        let counting = CancellationFlag()
        #expect(try PNG.decode(bytes, cancellation: counting) == (try PNG.decode(bytes)))
        #expect(counting.pollCount == 3)  // rows 0, 16 and 32 of 48

        var interlaced = Self.rgba64
        interlaced.interlaced = true
        let adam7 = PNGFixtures.png(interlaced)
        let passes = CancellationFlag()
        #expect(try PNG.decode(adam7, cancellation: passes) == (try PNG.decode(bytes)))
        #expect(passes.pollCount == 7 * 3)

        let flag = CancellationFlag(cancellingAtPoll: 2)
        #expect(throws: ImageError.cancelled) { _ = try PNG.decode(bytes, cancellation: flag) }
        #expect(flag.pollCount == 2)
        let late = CancellationFlag(cancellingAtPoll: 20)
        #expect(throws: ImageError.cancelled) { _ = try PNG.decode(adam7, cancellation: late) }
        #expect(late.pollCount == 20)
    }

    // MARK: - Fuzz

    @Test("seeded mutations of a valid file decode to the header's size or throw, never crash")
    func mutationFuzz() throws {
        var spec = Self.rgba64
        spec.iccProfile = PNGFixtures.iccProfile()
        spec.exif = PNGFixtures.exif(orientation: 6)
        spec.extraChunks = [("tEXt", Array("Title\0fuzz".utf8))]
        spec.idatChunkSize = 4000
        let original = PNGFixtures.png(spec)
        #expect(try PNG.decode(original) == Self.expected(Self.rgba64))
        // Small enough that a mutated IHDR cannot make the decoder ask for much.
        let limits = DecodeLimits(maxPixels: 1 << 20, maxSide: 4096)
        let allowed: Set<ImageError.Code> = [.corrupt, .truncated, .limitExceeded, .invalidDimensions, .unsupported, .empty]
        // Half the edits land in the first 200 bytes: IHDR, iCCP, eXIf.
        // Every other file has its CRCs made right again, so that the
        // damage reaches IHDR, iCCP, eXIf and zlib parsing instead of
        // stopping at a CRC check.
        let tally = MutationFuzz.run(original, iterations: 600, seed: 0xD42C_0FFE, headerBytes: 200, allowed: allowed,
                                     repair: { $0 % 2 == 1 ? PNGFixtures.fixingCRCs($1) : $1 },
                                     header: { bytes throws(ImageError) in try PNG.readHeader(bytes, limits: limits).storedSize },
                                     decode: { bytes throws(ImageError) in try PNG.decode(bytes, limits: limits) })
        #expect(tally.decoded > 20 && tally.refused > 100 && tally.headersRead > tally.decoded, "\(tally)")
    }
}
