import DarkroomFixtures
import Testing

@testable import DarkroomImage

/// The HEIF decoder (HEIC and AVIF through libheif): the primary image's
/// size and pixels, alpha over the background, an embedded profile, odd
/// sizes, the limits, damaged files, cancellation and a seeded mutation
/// fuzz. Fixtures come from HEIFFixtures (libheif's x265 and libaom
/// encoders); HEIF is lossy, so pixels are compared within a tolerance.
@Suite("HEIF codec")
struct HEIFCodecTests {
    /// The mean and the largest difference per channel between `image` and
    /// RGB(A) `pixels` laid over white.
    static func difference(_ image: Image, _ pixels: [UInt8], alpha: Bool = false) -> (mean: Double, max: Int) {
        let channels = alpha ? 4 : 3
        var total = 0, largest = 0
        for index in 0..<image.width * image.height {
            let a = alpha ? Int(pixels[index * channels + 3]) : 255
            for c in 0..<3 {
                let want = (Int(pixels[index * channels + c]) * a + 255 * (255 - a) + 127) / 255
                let diff = abs(Int(image.pixels[index * 4 + c]) - want)
                total += diff
                largest = max(largest, diff)
            }
        }
        return (Double(total) / Double(image.width * image.height * 3), largest)
    }

    @Test("a HEIC and an AVIF decode to their pixels within lossy coding's error, their headers say their size and codec",
          arguments: [HEIFFixtures.Codec.hevc, .av1])
    func stillImage(codec: HEIFFixtures.Codec) throws {
        let pixels = HEIFFixtures.pattern(width: 64, height: 48)
        let bytes = HEIFFixtures.heif(width: 64, height: 48, pixels: pixels, codec: codec, quality: 95)
        #expect(SourceFormat(signatureOf: bytes) == .heif)
        let header = try HEIF.readHeader(bytes)
        #expect(header.size == Size(width: 64, height: 48))
        #expect(!header.hasAlpha && header.isAVIF == (codec == .av1) && header.bitDepth == 8 && header.iccProfile == nil)
        let image = try HEIF.decode(bytes)
        #expect(image.width == 64 && image.height == 48)
        let diff = Self.difference(image, pixels)
        print("HEIF \(codec) \(bytes.count) bytes: mean difference \(diff.mean), largest \(diff.max)")
        #expect(diff.mean < 3 && diff.max < 48, "\(codec): mean \(diff.mean), largest \(diff.max)")
        #expect(TestImages.paddingIsOpaque(image))
        // Through the source layer, as a job reads it.
        let source = try Source.readHeader(bytes)
        #expect(source.format == .heif && source.uprightSize == Size(width: 64, height: 48) && source.orientation == .up && !source.hasAlpha)
        #expect(try Source.decode(bytes, header: source) == image)
    }

    @Test("a grid image, as phones save photos, decodes whole: its tiles laid out and cut to the grid's size",
          arguments: [HEIFFixtures.Codec.hevc, .av1])
    func grid(codec: HEIFFixtures.Codec) throws {
        // 3 × 2 tiles of 128 pixels, cut to 320 × 200 (the bright block's
        // edges fall on even pixels, where 4:2:0 chroma does not blur them).
        let pixels = HEIFFixtures.pattern(width: 320, height: 200)
        let bytes = HEIFFixtures.grid(width: 320, height: 200, tile: 128, pixels: pixels, codec: codec, quality: 95)
        #expect(SourceFormat(signatureOf: bytes) == .heif)
        let header = try HEIF.readHeader(bytes)
        #expect(header.size == Size(width: 320, height: 200) && header.isAVIF == (codec == .av1))
        let image = try HEIF.decode(bytes)
        #expect(image.width == 320 && image.height == 200)
        let diff = Self.difference(image, pixels)
        print("HEIF \(codec) grid of 6 tiles: mean difference \(diff.mean), largest \(diff.max)")
        #expect(diff.mean < 3 && diff.max < 48, "\(codec): mean \(diff.mean), largest \(diff.max)")
        // The bright block spans the first tile only; the last tile's
        // corner is the gradient's far end.
        #expect(image.pixels[(10 * 320 + 10) * 4] > 230)
        #expect(image.pixels[(199 * 320 + 319) * 4] > 200)
    }

    @Test("a small image in one larger tile, as a phone writes a cropped photo, is not refused for its tile's size",
          arguments: [HEIFFixtures.Codec.hevc, .av1])
    func gridOfOneLargerTile(codec: HEIFFixtures.Codec) throws {
        let pixels = HEIFFixtures.pattern(width: 300, height: 200)
        let bytes = HEIFFixtures.grid(width: 300, height: 200, tile: 512, pixels: pixels, codec: codec, quality: 95)
        #expect(try HEIF.readHeader(bytes).size == Size(width: 300, height: 200))
        let image = try HEIF.decode(bytes)
        let diff = Self.difference(image, pixels)
        #expect(image.width == 300 && image.height == 200 && diff.mean < 3, "\(codec): mean \(diff.mean)")
    }

    @Test("a 10-bit HEIC and a 12-bit AVIF are decoded to 8 bits", arguments: [(HEIFFixtures.Codec.hevc, 10), (.av1, 12)])
    func deeperThan8Bits(codec: HEIFFixtures.Codec, bits: Int) throws {
        let pixels = HEIFFixtures.pattern(width: 64, height: 48)
        let bytes = HEIFFixtures.heif(width: 64, height: 48, pixels: pixels, codec: codec, quality: 95, bitDepth: bits)
        let header = try HEIF.readHeader(bytes)
        #expect(header.bitDepth == bits)
        let image = try HEIF.decode(bytes)
        let diff = Self.difference(image, pixels)
        print("HEIF \(codec) \(bits)-bit: mean difference \(diff.mean), largest \(diff.max)")
        #expect(diff.mean < 3 && diff.max < 48, "mean \(diff.mean), largest \(diff.max)")
    }

    @Test("an odd size decodes to that size")
    func oddSize() throws {
        let pixels = HEIFFixtures.pattern(width: 37, height: 23)
        let bytes = HEIFFixtures.heif(width: 37, height: 23, pixels: pixels, codec: .av1, quality: 95)
        let image = try HEIF.decode(bytes)
        #expect(image.width == 37 && image.height == 23)
        let diff = Self.difference(image, pixels)
        #expect(diff.mean < 4, "mean \(diff.mean)")
    }

    @Test("alpha is laid over the background: the clear half is white")
    func alphaOverWhite() throws {
        let pixels = HEIFFixtures.pattern(width: 64, height: 48, alpha: true)
        let bytes = HEIFFixtures.heif(width: 64, height: 48, pixels: pixels, alpha: true, quality: 95)
        let header = try HEIF.readHeader(bytes)
        #expect(header.hasAlpha)
        #expect(try Source.readHeader(bytes).hasAlpha)
        let image = try HEIF.decode(bytes)
        let diff = Self.difference(image, pixels, alpha: true)
        #expect(diff.mean < 4, "mean \(diff.mean), largest \(diff.max)")
        // Well inside the clear half, white (alpha coding blurs the edge only).
        for (x, y) in [(50, 10), (60, 40), (45, 30)] {
            let at = (y * 64 + x) * 4
            #expect(image.pixels[at..<at + 3].allSatisfy { $0 >= 245 }, "(\(x), \(y)): \(Array(image.pixels[at..<at + 4]))")
        }
        // Over another background, that colour.
        let black = try HEIF.decode(bytes, background: (0, 0, 0))
        #expect(black.pixels[(10 * 64 + 60) * 4] <= 10)
    }

    @Test("an embedded RGB profile is read and carried as the source's profile")
    func iccProfile() throws {
        let profile = PNGFixtures.iccProfile()
        let bytes = HEIFFixtures.heif(width: 32, height: 32, pixels: HEIFFixtures.pattern(width: 32, height: 32), icc: profile)
        #expect(try HEIF.readHeader(bytes).iccProfile == profile)
        #expect(try Source.readHeader(bytes).rgbProfile == profile)
        let gray = PNGFixtures.iccProfile(colorSpace: "GRAY")
        let grayBytes = HEIFFixtures.heif(width: 32, height: 32, pixels: HEIFFixtures.pattern(width: 32, height: 32), icc: gray)
        #expect(try Source.readHeader(grayBytes).rgbProfile == nil, "a gray profile does not describe RGB pixels")
    }

    @Test("the limits refuse an image before it is decoded, worded as for JPEG")
    func limits() throws {
        let bytes = HEIFFixtures.heif(width: 64, height: 48, pixels: HEIFFixtures.pattern(width: 64, height: 48))
        #expect {
            try HEIF.readHeader(bytes, limits: DecodeLimits(maxPixels: 1000, maxSide: 4096))
        } throws: { error in
            let error = error as? ImageError
            return error?.code == .limitExceeded && error?.message.contains("megapixel limit") == true
        }
        #expect {
            try HEIF.decode(bytes, limits: DecodeLimits(maxPixels: 1 << 20, maxSide: 50))
        } throws: { error in
            (error as? ImageError)?.code == .limitExceeded
        }
        #expect {
            try HEIF.readHeader(bytes, limits: DecodeLimits(maxPixels: 1 << 20, maxSide: 4096, maxInputBytes: 100))
        } throws: { error in
            (error as? ImageError)?.code == .limitExceeded
        }
    }

    /// A file whose ispe claims `claimed` for a picture coded at `coded`.
    static func understated(_ claimed: (width: UInt8, height: UInt8), coded: Size = Size(width: 256, height: 192),
                            codec: HEIFFixtures.Codec) throws -> [UInt8] {
        let pixels = HEIFFixtures.pattern(width: coded.width, height: coded.height)
        var bytes = HEIFFixtures.heif(width: coded.width, height: coded.height, pixels: pixels, codec: codec)
        // The ispe property: size, "ispe", version and flags, width, height.
        let ispe = try #require((0..<bytes.count - 4).first { bytes[$0..<$0 + 4].elementsEqual("ispe".utf8) })
        bytes.replaceSubrange(ispe + 8..<ispe + 16, with: [0, 0, 0, claimed.width, 0, 0, 0, claimed.height])
        return bytes
    }

    @Test("boxes that understate the coded picture are refused before the decode, by the HEVC sequence parameter set's or the AV1 sequence header's size",
          arguments: [HEIFFixtures.Codec.hevc, .av1])
    func understatedSizeBeforeDecode(codec: HEIFFixtures.Codec) throws {
        // Past the bound: the longer side, at least 512, plus 64.
        let bytes = try Self.understated((64, 48), coded: Size(width: 640, height: 480), codec: codec)
        let refusal = "a coded picture is 640x480, its boxes say 64x48"
        #expect {
            try HEIF.readHeader(bytes)
        } throws: { error in
            let error = error as? ImageError
            return error?.code == .corrupt && error?.message.contains(refusal) == true
        }
        // Refused before the shim's first stop question: nothing was decoded.
        let counting = CancellationFlag()
        #expect(throws: ImageError.self) { try HEIF.decode(bytes, cancellation: counting) }
        #expect(counting.pollCount == 0, "\(counting.pollCount) stop questions: the picture was decoded")
    }

    @Test("a picture coded a little larger than its boxes say (within a coding block) is refused once decoded",
          arguments: [HEIFFixtures.Codec.hevc, .av1])
    func understatedSizeAfterDecode(codec: HEIFFixtures.Codec) throws {
        let bytes = try Self.understated((200, 150), codec: codec)
        #expect(try HEIF.readHeader(bytes).size == Size(width: 200, height: 150))
        #expect {
            try HEIF.decode(bytes)
        } throws: { error in
            let error = error as? ImageError
            return error?.code == .corrupt && error?.message.contains("the coded image is 256x192, its boxes say 200x150") == true
        }
    }

    @Test("a file cut short, or not HEIF, is refused with a reason")
    func damaged() throws {
        let bytes = HEIFFixtures.heif(width: 64, height: 48, pixels: HEIFFixtures.pattern(width: 64, height: 48))
        for cut in [12, 40, bytes.count / 3, bytes.count / 2, bytes.count - 20] {
            #expect(throws: ImageError.self, "cut at \(cut)") { try HEIF.decode(Array(bytes.prefix(cut))) }
        }
        let mp4: [UInt8] = [0, 0, 0, 24] + Array("ftypisom".utf8) + [0, 0, 2, 0] + Array("isommp41".utf8)
        #expect(SourceFormat(signatureOf: mp4) == nil)
        #expect {
            try Source.readHeader(mp4)
        } throws: { error in
            let error = error as? ImageError
            return error?.code == .unsupportedFormat && error?.message.contains("looks like an ISO media file") == true
        }
        #expect(throws: ImageError.self) { try HEIF.readHeader([]) }
    }

    @Test("a cancelled decode stops with cancelled")
    func cancellation() throws {
        let bytes = HEIFFixtures.heif(width: 64, height: 48, pixels: HEIFFixtures.pattern(width: 64, height: 48))
        let flag = CancellationFlag()
        flag.cancel()
        #expect(throws: ImageError.cancelled) { try HEIF.decode(bytes, cancellation: flag) }
    }

    @Test("seeded mutations of a valid file decode to the header's size or throw, never crash",
          arguments: [(HEIFFixtures.Codec.hevc, false), (.av1, false), (.hevc, true), (.av1, true)])
    func mutationFuzz(codec: HEIFFixtures.Codec, grid: Bool) throws {
        let pixels = HEIFFixtures.pattern(width: 64, height: 48)
        // A grid's boxes (iinf, iref, ipma, idat, iloc of five items) are
        // most of its file: the walk over them and libheif's grid are fuzzed.
        let original = grid ? HEIFFixtures.grid(width: 64, height: 48, tile: 32, pixels: pixels, codec: codec)
                            : HEIFFixtures.heif(width: 64, height: 48, pixels: pixels, codec: codec)
        let limits = DecodeLimits(maxPixels: 1 << 20, maxSide: 4096)
        let allowed: Set<ImageError.Code> = [.corrupt, .truncated, .limitExceeded, .invalidDimensions, .empty, .unsupported]
        // Half the edits land in the boxes before the coded data.
        let seed: UInt64 = (codec == .hevc ? 0x4E1C_5EED : 0xA71F_5EED) ^ (grid ? 0x6A1D : 0)
        let tally = MutationFuzz.run(original, iterations: 300, seed: seed,
                                     headerBytes: min(grid ? 700 : 400, original.count / 2), allowed: allowed,
                                     header: { bytes throws(ImageError) in try HEIF.readHeader(bytes, limits: limits).size },
                                     decode: { bytes throws(ImageError) in try HEIF.decode(bytes, limits: limits) })
        print("HEIF \(codec)\(grid ? " grid" : "") mutations: \(tally.decoded) decoded, \(tally.refused) refused")
        #expect(tally.decoded > 10 && tally.refused > 30, "\(tally)")
    }
}
