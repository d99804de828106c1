import DarkroomFixtures
@testable import DarkroomImage
import Testing

/// Transparency kept: decodes that keep a source's alpha, `AlphaImage`'s
/// views, flattening and premultiplied filtering, and the encoders
/// that write alpha (PNG, WebP, AVIF).
@Suite("Images with alpha")
struct AlphaImageTests {
    typealias Spec = PNGFixtures.Spec

    /// A PNG whose samples differ at every pixel and whose alphas cycle
    /// through 0, 255 and values between.
    static func rgbaPNG(width: Int = 23, height: Int = 17) -> (bytes: [UInt8], samples: [UInt16]) {
        let samples = PNGFixtures.rgbaSamples(width: width, height: height)
        return (PNGFixtures.png(Spec(width: width, height: height, colorType: .rgba, samples: samples)), samples)
    }

    static func keptAlpha(_ bytes: [UInt8]) throws -> AlphaImage {
        let header = try Source.readHeader(bytes)
        #expect(header.keepsAlpha)
        return AlphaImage(rgba: try Source.decode(bytes, header: header, options: DecodeOptions(keepAlpha: true)))
    }

    /// Colour where `alpha` is opaque enough to be seen, and nothing where it is not.
    static func straight(_ image: AlphaImage, x: Int, y: Int) -> (r: UInt8, g: UInt8, b: UInt8, a: UInt8) {
        let c = image.color.pixel(x: x, y: y)
        return (c.r, c.g, c.b, image.alpha.pixel(x: x, y: y).r)
    }

    @Test("a PNG decoded with its alpha gives the file's own colour and alpha, sample for sample")
    func pngKeepsAlpha() throws {
        let (bytes, samples) = Self.rgbaPNG()
        let image = try Self.keptAlpha(bytes)
        for i in 0..<23 * 17 {
            let p = Self.straight(image, x: i % 23, y: i / 23)
            #expect([UInt16(p.r), UInt16(p.g), UInt16(p.b), UInt16(p.a)] == Array(samples[i * 4..<i * 4 + 4]), "pixel \(i)")
        }
        #expect(!image.isOpaque)
        // Gray with alpha and a palette's tRNS keep theirs too.
        let grayAlpha = Spec(width: 4, height: 1, colorType: .grayAlpha, samples: [10, 0, 20, 255, 30, 100, 40, 7])
        let gray = try Self.keptAlpha(PNGFixtures.png(grayAlpha))
        #expect((0..<4).map { Self.straight(gray, x: $0, y: 0).a } == [0, 255, 100, 7])
        #expect((0..<4).map { Self.straight(gray, x: $0, y: 0).g } == [10, 20, 30, 40])
        var palette = Spec(width: 3, height: 1, colorType: .palette, samples: [0, 1, 2])
        palette.palette = [(200, 0, 0), (0, 200, 0), (0, 0, 200)]
        palette.transparency = [0, 128]
        let indexed = try Self.keptAlpha(PNGFixtures.png(palette))
        #expect((0..<3).map { Self.straight(indexed, x: $0, y: 0).a } == [0, 128, 255])
        #expect(Self.straight(indexed, x: 1, y: 0).g == 200)
    }

    @Test("flattened onto white, a kept alpha gives exactly what the compositing decode gives", arguments: ["png", "gif", "webp", "heif"])
    func flattenedIsTheCompositedDecode(_ format: String) throws {
        let bytes: [UInt8]
        switch format {
        case "png": bytes = Self.rgbaPNG().bytes
        case "gif":
            let indices = (0..<12 * 9).map { UInt8($0 % 7) }
            bytes = GIFFixtures.gif(width: 14, height: 10, palette: GIFFixtures.palette(8),
                                    frames: [GIFFixtures.Frame(left: 1, top: 1, width: 12, height: 9, transparent: 3, indices: indices)])
        case "webp":
            let (png, _) = Self.rgbaPNG()
            bytes = try WebP.encode(try Self.keptAlpha(png), quality: 90)
        default:
            bytes = HEIFFixtures.heif(width: 64, height: 48, pixels: HEIFFixtures.pattern(width: 64, height: 48, alpha: true), alpha: true)
        }
        let header = try Source.readHeader(bytes)
        #expect(header.hasAlpha && header.keepsAlpha)
        let composited = try Source.decode(bytes, header: header)
        let kept = try Self.keptAlpha(bytes)
        #expect(!kept.isOpaque)
        #expect(try kept.flattened(onto: Source.background) == composited)
    }

    @Test("a GIF's transparent index and the canvas it does not cover are clear, the rest opaque")
    func gifTransparency() throws {
        let indices: [UInt8] = [0, 1, 2, 3, 0, 1]
        let bytes = GIFFixtures.gif(width: 4, height: 3, palette: GIFFixtures.palette(4),
                                    frames: [GIFFixtures.Frame(left: 1, top: 1, width: 3, height: 2, transparent: 2, indices: indices)])
        let image = try Self.keptAlpha(bytes)
        let alphas = (0..<3).map { y in (0..<4).map { x in image.alpha.pixel(x: x, y: y).r } }
        #expect(alphas == [[0, 0, 0, 0], [0, 255, 255, 0], [0, 255, 255, 255]])
    }

    @Test("a source without alpha is never kept: the decode is the opaque one")
    func onlyFormatsThatKeepAlpha() throws {
        let jpeg = try JPEG.encode(SamplePhoto.render(Size(width: 32, height: 24), seed: 1))
        #expect(!(try Source.readHeader(jpeg)).keepsAlpha)
        let rgb = PNGFixtures.png(Spec(width: 5, height: 4, colorType: .rgb, samples: PNGFixtures.rgbSamples(width: 5, height: 4)))
        let header = try Source.readHeader(rgb)
        #expect(!header.keepsAlpha)
        #expect(try Source.decode(rgb, header: header, options: DecodeOptions(keepAlpha: true)) == Source.decode(rgb, header: header))
    }

    @Test("a TIFF's alpha, associated or not, gray or RGB, in strips or 16-bit tiles, is kept straight; over white it is the compositing decode's",
          arguments: [(4, false), (4, true), (2, false), (2, true)])
    func tiffKeepsAlpha(samples: Int, associated: Bool) throws {
        let width = 48, height = 16
        var pixels: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                let colour: [UInt8] = [UInt8(x * 5), UInt8(200 - y * 9), UInt8((x * 7 + y) % 200 + 20)]
                let alpha = UInt8(x < 16 ? 255 : x >= 32 ? 0 : (32 - x) * 16 - 1)
                let stored = associated ? colour.map { UInt8((Int($0) * Int(alpha) + 127) / 255) } : colour
                pixels += (samples == 2 ? [stored[0]] : stored) + [alpha]
            }
        }
        for bytes in [TIFFFixtures.tiff(width: width, height: height, pixels: pixels, samples: samples, associatedAlpha: associated),
                      TIFFFixtures.tiff(width: width, height: height, pixels: pixels, samples: samples, associatedAlpha: associated, bits: 16,
                                        tile: 16)] {
            let header = try Source.readHeader(bytes)
            #expect(header.hasAlpha && header.keepsAlpha)
            let kept = try Self.keptAlpha(bytes)
            for x in 0..<width { #expect(kept.alpha.pixel(x: x, y: 5).r == pixels[(5 * width + x) * samples + samples - 1], "x \(x)") }
            // Opaque pixels keep their colour exactly; clear ones are 0 when divided out.
            let c = kept.color.pixel(x: 3, y: 5)
            #expect(c.r == UInt8(15), "\(c)")
            // Over white, within a level of rounding of the compositing decode.
            let flattened = try kept.flattened(onto: Source.background), composited = try Source.decode(bytes, header: header)
            let worst = zip(flattened.pixels, composited.pixels).map { abs(Int($0) - Int($1)) }.max() ?? 0
            #expect(worst <= (associated ? 1 : 0), "worst \(worst)")
        }
    }

    @Test("a HEIF whose colour is premultiplied ('prem') is divided out when kept and laid over white as it is when composited")
    func premultipliedHEIF() throws {
        let width = 64, height = 48
        let straight = HEIFFixtures.pattern(width: width, height: height, alpha: true)
        // Half opaque, a quarter at alpha 128, a quarter clear.
        var alphaOf = [UInt8](repeating: 0, count: width * height)
        for i in 0..<width * height { let x = i % width; alphaOf[i] = x < 32 ? 255 : x < 48 ? 128 : 0 }
        var premultiplied = straight
        for i in 0..<width * height {
            premultiplied[i * 4 + 3] = alphaOf[i]
            for k in 0..<3 { premultiplied[i * 4 + k] = UInt8((Int(straight[i * 4 + k]) * Int(alphaOf[i]) + 127) / 255) }
        }
        let bytes = HEIFFixtures.heif(width: width, height: height, pixels: premultiplied, alpha: true, premultiplied: true, quality: 100)
        let kept = try Self.keptAlpha(bytes)
        let composited = try Source.decode(bytes, header: try Source.readHeader(bytes))
        var keptOff = 0, compositedOff = 0
        for y in 8..<40 {
            for x in [10, 20, 36, 42] {
                let i = y * width + x, a = Int(alphaOf[i])
                #expect(abs(Int(kept.alpha.pixel(x: x, y: y).r) - a) <= 3)
                let c = kept.color.pixel(x: x, y: y), over = composited.pixel(x: x, y: y)
                for (k, value) in [c.r, c.g, c.b].enumerated() {
                    keptOff = max(keptOff, abs(Int(value) - Int(straight[i * 4 + k])))
                    let expected = (Int(straight[i * 4 + k]) * a + 255 * (255 - a) + 127) / 255
                    compositedOff = max(compositedOff, abs(Int([over.r, over.g, over.b][k]) - expected))
                }
            }
        }
        // Lossy coding at quality 100 is within a few levels; taking the
        // premultiplied colour for straight would put the half-clear
        // quarter some 60 levels off.
        #expect(keptOff <= 8 && compositedOff <= 8, "kept \(keptOff), composited \(compositedOff)")
    }

    @Test("the colour and alpha views give the RGBA bytes back; an image whose alphas are all 255 is opaque")
    func colorAndAlphaViews() throws {
        var rgba = (0..<7 * 5 * 4).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        let image = AlphaImage(rgba: Image(width: 7, height: 5, pixels: rgba))
        #expect(image.color.pixels.enumerated().allSatisfy { $0.offset % 4 != 3 || $0.element == 255 })
        #expect(image.alpha.pixels.enumerated().allSatisfy { $0.element == ($0.offset % 4 == 3 ? 255 : rgba[$0.offset / 4 * 4 + 3]) })
        #expect(AlphaImage(color: image.color, alpha: image.alpha) == image)
        #expect(AlphaImage(color: image.color, alpha: image.alpha).rgba.pixels == rgba)
        #expect(!image.isOpaque)
        for i in stride(from: 3, to: rgba.count, by: 4) { rgba[i] = 255 }
        let opaque = AlphaImage(rgba: Image(width: 7, height: 5, pixels: rgba))
        #expect(opaque.isOpaque)
        #expect(try opaque.flattened(onto: (0, 0, 0)) == opaque.color)
    }

    /// Red where opaque, bright green under the clear pixels: a filter
    /// that mixed straight colour would bleed the hidden green.
    static func redOnHiddenGreen(width: Int, height: Int) throws -> AlphaImage {
        var rgba: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                let inside = (x / 6 + y / 6) % 2 == 0
                rgba += inside ? [220, 10, 10, 255] : [0, 255, 0, 0]
            }
        }
        return AlphaImage(rgba: Image(width: width, height: height, pixels: rgba))
    }

    @Test("scaling, blurring and pixelating filter premultiplied colour: no hidden colour bleeds into what shows")
    func premultipliedFiltering() throws {
        let source = try Self.redOnHiddenGreen(width: 60, height: 48)
        // Each filter with the fourth byte as an alpha, and as the padding.
        // A shrink past half goes through the box pre-shrink first.
        typealias Filter = (Image, Bool) throws(ImageError) -> Image
        let scale: Filter = { i, alpha throws(ImageError) in try i.resized(to: Size(width: 23, height: 19), keepingAlpha: alpha) }
        let shrink: Filter = { i, alpha throws(ImageError) in try i.resized(to: Size(width: 11, height: 7), keepingAlpha: alpha) }
        let bilinear: Filter = { i, alpha throws(ImageError) in
            try i.resized(to: Size(width: 37, height: 29), kernel: .bilinear, keepingAlpha: alpha)
        }
        let blur: Filter = { i, alpha throws(ImageError) in try i.blurred(sigma: 2, keepingAlpha: alpha) }
        let pixelate: Filter = { i, _ throws(ImageError) in try i.pixelated(blockSize: 4) }
        for filter in [scale, shrink, bilinear, blur, pixelate] {
            let out = try source.filtered { (i: Image) throws(ImageError) -> Image in try filter(i, true) }
            // The alpha, filtered as the fourth byte, is exactly the
            // opaque filter's result on a picture of it.
            #expect(out.alpha == (try filter(source.alpha, false)))
            var partial = 0
            for y in 0..<out.height {
                for x in 0..<out.width {
                    let p = Self.straight(out, x: x, y: y)
                    if p.a == 0 { #expect(p.r == 0 && p.g == 0 && p.b == 0); continue }
                    if p.a < 255 { partial += 1 }
                    // Where little shows, a level of rounding before the
                    // division is many after it; and Lanczos rings, more
                    // on the red than on the clamped alpha. What must not
                    // appear is the hidden green.
                    guard p.a >= 32 else { continue }
                    let slack = 5 + 2 * 255 / Int(p.a)
                    #expect(p.r >= 150 && Int(p.g) <= 10 + slack && Int(p.b) <= 10 + slack, "(\(x), \(y)) \(p)")
                }
            }
            #expect(partial > 0)
            // Straight colour, filtered as is, does bleed: the test would see it.
            let bled = try filter(source.color, false)
            #expect((0..<bled.pixels.count / 4).contains { bled.pixels[$0 * 4 + 1] > 60 && out.alpha.pixels[$0 * 4] >= 96 })
        }
    }

    @Test("filtering premultiplies a shared image's pixels in a copy: the other holder's pixels stay straight")
    func filteringLeavesSharedPixels() throws {
        let source = try Self.redOnHiddenGreen(width: 30, height: 24)
        let kept = source
        let unchanged = source.rgba.pixels
        let same = try source.filtered { (i: Image) throws(ImageError) -> Image in i }
        #expect(kept.rgba.pixels == unchanged && source.rgba.pixels == unchanged)
        // Premultiplied and divided back: exact where opaque, colour 0 where clear.
        #expect(same.rgba.pixels == unchanged.enumerated().map { $0.offset % 4 != 3 && unchanged[$0.offset | 3] == 0 ? 0 : $0.element })
    }

    @Test("moving operations move colour and alpha alike; colour operations leave the alpha")
    func movedAndRecolored() throws {
        let (bytes, _) = Self.rgbaPNG(width: 9, height: 6)
        let image = try Self.keptAlpha(bytes)
        let turned = try image.moved { (i: Image) throws(ImageError) -> Image in i.rotated(quarterTurnsClockwise: 1) }
        #expect(turned.alpha == image.alpha.rotated(quarterTurnsClockwise: 1))
        #expect(turned.color == image.color.rotated(quarterTurnsClockwise: 1))
        let inverted = try image.moved { (i: Image) throws(ImageError) -> Image in i.inverted() }
        #expect(inverted.alpha == image.alpha && inverted.color == image.color.inverted())
    }

    @Test("a smart thumbnail's window is judged on the picture over white, and cut from colour and alpha alike")
    func thumbnail() throws {
        let source = try Self.redOnHiddenGreen(width: 90, height: 40)
        let thumb = try source.thumbnail(Size(width: 16, height: 16), gravity: .smart)
        #expect(thumb.width == 16 && thumb.height == 16)
        let rect = try source.flattened(onto: Source.background).detailWindow(Size(width: 40, height: 40))
        #expect(try source.window(Size(width: 40, height: 40), gravity: .smart) == rect)
        let alpha = try source.alpha.cropped(to: rect).resized(to: Size(width: 16, height: 16), kernel: .lanczos3)
        #expect(thumb.alpha == alpha)
        // A photo under a soft alpha, detail in what is clear too: the
        // window is the flattened picture's, at every size, read without
        // flattening the whole.
        var pixels = SamplePhoto.render(Size(width: 300, height: 200), seed: 12).pixels
        for i in 0..<pixels.count / 4 { pixels[i * 4 + 3] = UInt8(truncatingIfNeeded: (i % 300) * 255 / 299 ^ (i / 300) % 7 * 9) }
        let photo = AlphaImage(rgba: Image(width: 300, height: 200, pixels: pixels))
        let flat = try photo.flattened(onto: Source.background)
        for size in [Size(width: 40, height: 40), Size(width: 150, height: 199), Size(width: 299, height: 60), Size(width: 120, height: 90)] {
            #expect(try photo.detailWindow(size) == flat.detailWindow(size), "\(size)")
        }
    }

    @Test("PNG with alpha: RGBA (colour type 6) that decodes back to the same colour and alpha")
    func pngRoundTrip() throws {
        let (bytes, _) = Self.rgbaPNG()
        let image = try Self.keptAlpha(bytes)
        let written = try PNG.encode(image, iccProfile: PNGFixtures.iccProfile())
        #expect(written[25] == 6, "colour type \(written[25])")
        #expect(try PNG.readHeader(written).iccProfile == PNGFixtures.iccProfile())
        let back = try Self.keptAlpha(written)
        #expect(back.alpha == image.alpha)
        // Colour under a clear pixel is not kept by every writer; here it is.
        #expect(back.color == image.color)
    }

    @Test("PNG gray + alpha: colour type 4, the same picture as the RGBA file of a gray image")
    func pngGrayAlpha() throws {
        var rgba: [UInt8] = []
        for i in 0..<(23 * 17) { let v = UInt8(truncatingIfNeeded: i &* 7); rgba += [v, v, v, UInt8(truncatingIfNeeded: i &* 13)] }
        let image = AlphaImage(rgba: Image(width: 23, height: 17, pixels: rgba))
        #expect(image.isGray)
        let written = try PNG.encode(image, gray: true)
        #expect(written[25] == 4, "colour type \(written[25])")
        #expect(try Self.keptAlpha(written) == image)
        #expect(written.count < (try PNG.encode(image)).count)
        rgba[4 * 100 + 1] &+= 1
        let colour = AlphaImage(rgba: Image(width: 23, height: 17, pixels: rgba))
        #expect(!colour.isGray)
        // Asked for gray, a colour image is still written whole, RGBA.
        let whole = try PNG.encode(colour, gray: true)
        #expect(whole[25] == 6)
        #expect(try Self.keptAlpha(whole) == colour)
    }

    @Test("WebP with alpha: the alpha comes back exactly (lossless ALPH), the colour within lossy's levels where it shows")
    func webpRoundTrip() throws {
        let (bytes, _) = Self.rgbaPNG(width: 48, height: 32)
        let image = try Self.keptAlpha(bytes)
        let written = try WebP.encode(image, quality: 95)
        #expect(try WebP.readHeader(written).hasAlpha)
        let back = try Self.keptAlpha(written)
        #expect(back.alpha == image.alpha)
        let flattened = try back.flattened(onto: Source.background), expected = try image.flattened(onto: Source.background)
        let diff = zip(flattened.pixels, expected.pixels).map { abs(Int($0) - Int($1)) }
        #expect(Double(diff.reduce(0, +)) / Double(diff.count) < 12, "mean \(Double(diff.reduce(0, +)) / Double(diff.count))")
    }

    @Test("AVIF with alpha: an alpha image coded beside the colour, within a few levels")
    func avifRoundTrip() throws {
        let pixels = HEIFFixtures.pattern(width: 64, height: 48, alpha: true)
        let source = AlphaImage(rgba: Image(width: 64, height: 48, pixels: pixels))
        let written = try HEIF.encodeAVIF(source, quality: 90)
        let header = try HEIF.readHeader(written)
        #expect(header.isAVIF && header.hasAlpha)
        let back = try Self.keptAlpha(written)
        // Opaque on the left half, clear on the right, but for the coded edge.
        #expect(back.alpha.pixel(x: 5, y: 20).r >= 250 && back.alpha.pixel(x: 58, y: 20).r <= 5)
        let opaque = try HEIF.encodeAVIF(source.color, quality: 90)
        #expect(!(try HEIF.readHeader(opaque)).hasAlpha)
    }

    @Test("seeded mutations of transparent PNG, GIF, WebP, TIFF and HEIF files decode with their alpha to the header's size or throw, never crash",
          arguments: ["png", "gif", "webp", "tiff", "heif"])
    func mutationFuzz(_ format: String) throws {
        let original: [UInt8]
        switch format {
        case "png":
            // Chunks a mutation may land in and leave the picture whole.
            var spec = Spec(width: 40, height: 30, colorType: .rgba, samples: PNGFixtures.rgbaSamples(width: 40, height: 30))
            spec.extraChunks = [("tEXt", Array(("Title\0" + String(repeating: "fuzz", count: 40)).utf8))]
            original = PNGFixtures.png(spec)
        case "gif":
            original = GIFFixtures.gif(width: 40, height: 30, palette: GIFFixtures.palette(16),
                                       frames: [GIFFixtures.Frame(left: 2, top: 3, width: 30, height: 20, transparent: 5,
                                                                  indices: (0..<600).map { UInt8($0 % 16) })])
        case "webp": original = try WebP.encode(try Self.keptAlpha(Self.rgbaPNG(width: 40, height: 30).bytes), quality: 80)
        case "tiff":
            let rgba = (0..<40 * 30 * 4).map { UInt8(truncatingIfNeeded: $0 &* 29) }
            original = TIFFFixtures.tiff(width: 40, height: 30, pixels: rgba, samples: 4, associatedAlpha: true, compression: .none)
        default:
            original = HEIFFixtures.heif(width: 40, height: 30, pixels: HEIFFixtures.pattern(width: 40, height: 30, alpha: true), alpha: true,
                                         premultiplied: true)
        }
        let limits = DecodeLimits(maxPixels: 1 << 20, maxSide: 4096)
        let allowed: Set<ImageError.Code> = [.corrupt, .truncated, .limitExceeded, .invalidDimensions, .unsupported, .empty, .unsupportedFormat,
                                             .notWebP]
        let tally = MutationFuzz.run(original, iterations: 300, seed: 0xA1FA ^ UInt64(format.utf8.count), headerBytes: format == "png" ? 240 : 60, allowed: allowed,
                                     repair: { format == "png" && $0 % 2 == 1 ? PNGFixtures.fixingCRCs($1) : $1 }, keepsAlpha: true,
                                     header: { bytes throws(ImageError) in try Source.readHeader(bytes, limits: limits).uprightSize },
                                     decode: { bytes throws(ImageError) in
                                         let header = try Source.readHeader(bytes, limits: limits)
                                         return try Source.decode(bytes, header: header, options: DecodeOptions(limits: limits, keepAlpha: true))
                                     })
        #expect(tally.decoded > 10 && tally.refused > 20, "\(format): \(tally)")
    }
}
