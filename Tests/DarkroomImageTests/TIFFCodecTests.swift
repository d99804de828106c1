import DarkroomFixtures
import Testing

@testable import DarkroomImage

/// The TIFF decoder (libtiff's RGBA interface): the layouts scanners and
/// editors write (compressions, strips and tiles, planes, 8 and 16 bits,
/// gray and RGB), alpha over the background, the Orientation tag, pages,
/// profiles, the limits, damaged files, cancellation and a seeded
/// mutation fuzz. Fixtures come from TIFFFixtures (libtiff itself).
@Suite("TIFF codec")
struct TIFFCodecTests {
    /// Gradients with a bright block in the top-left quarter, in `samples`
    /// samples a pixel (the last one alpha for 2 and 4: opaque on the left
    /// third, a ramp across the middle, clear on the right).
    static func pattern(width: Int, height: Int, samples: Int) -> [UInt8] {
        var pixels: [UInt8] = []
        pixels.reserveCapacity(width * height * samples)
        for y in 0..<height {
            for x in 0..<width {
                let block = x < width / 4 && y < height / 4
                let rgb: [UInt8] = block ? [250, 240, 30]
                    : [UInt8(x * 200 / max(1, width - 1) + 20), UInt8(y * 200 / max(1, height - 1) + 20), UInt8((x * 7 + y * 3) % 200 + 30)]
                let colour = samples <= 2 ? [rgb[0]] : rgb
                pixels.append(contentsOf: colour)
                if samples == 2 || samples == 4 {
                    pixels.append(x < width / 3 ? 255 : x >= 2 * width / 3 ? 0 : UInt8((2 * width / 3 - x) * 255 / max(1, width / 3)))
                }
            }
        }
        return pixels
    }

    /// `pixels` (of `samples` samples, alpha last for 2 and 4) laid over
    /// `background` as RGBX, as the decoder should give them.
    static func expected(_ pixels: [UInt8], samples: Int, background: UInt8 = 255) -> [UInt8] {
        var out: [UInt8] = []
        for index in 0..<pixels.count / samples {
            let base = index * samples
            let alpha = samples == 2 || samples == 4 ? Int(pixels[base + samples - 1]) : 255
            for c in 0..<3 {
                let v = Int(pixels[base + (samples <= 2 ? 0 : c)])
                out.append(UInt8((v * alpha + Int(background) * (255 - alpha) + 127) / 255))
            }
            out.append(255)
        }
        return out
    }

    static func largestDifference(_ a: [UInt8], _ b: [UInt8]) -> Int {
        zip(a, b).map { abs(Int($0) - Int($1)) }.max() ?? 0
    }

    @Test("every lossless compression, in strips and tiles, contiguous and planar, 8 and 16 bits, gray and RGB, decodes to its samples",
          arguments: TIFFFixtures.Compression.allCases.filter { $0 != .jpeg })
    func layouts(compression: TIFFFixtures.Compression) throws {
        let width = 45, height = 37
        for samples in [1, 3] {
            let pixels = Self.pattern(width: width, height: height, samples: samples)
            for (bits, tile, planar, rows) in [(8, 0, false, 0), (8, 16, false, 0), (16, 0, true, 5), (8, 32, true, 0), (16, 16, false, 0)] {
                let what = "\(compression), \(samples) samples, \(bits) bits, tile \(tile), planar \(planar)"
                let bytes = TIFFFixtures.tiff(width: width, height: height, pixels: pixels, samples: samples, bits: bits,
                                              compression: compression, tile: tile, rowsPerStrip: rows, planar: planar)
                #expect(SourceFormat(signatureOf: bytes) == .tiff, "\(what)")
                let header = try TIFF.readHeader(bytes)
                #expect(header.size == Size(width: width, height: height) && header.bitsPerSample == bits
                        && header.samplesPerPixel == samples && !header.hasAlpha && header.orientation == .up && !header.hasMorePages, "\(what)")
                let image = try TIFF.decode(bytes)
                #expect(image.width == width && image.height == height)
                let largest = Self.largestDifference(image.pixels, Self.expected(pixels, samples: samples))
                #expect(largest == 0, "\(what): largest difference \(largest)")
            }
        }
    }

    @Test("a JPEG-compressed TIFF decodes within lossy coding's error")
    func jpegCompressed() throws {
        let pixels = Self.pattern(width: 64, height: 48, samples: 3)
        let bytes = TIFFFixtures.tiff(width: 64, height: 48, pixels: pixels, compression: .jpeg, rowsPerStrip: 16)
        let image = try TIFF.decode(bytes)
        let want = Self.expected(pixels, samples: 3)
        let mean = Double(zip(image.pixels, want).map { abs(Int($0) - Int($1)) }.reduce(0, +)) / Double(want.count * 3 / 4)
        #expect(mean < 3, "mean difference \(mean)")
    }

    @Test("alpha, associated or not, gray or RGB, is laid over the background",
          arguments: [(4, false), (4, true), (2, false), (2, true)])
    func alpha(samples: Int, associated: Bool) throws {
        let width = 60, height = 20
        var pixels = Self.pattern(width: width, height: height, samples: samples)
        if associated {
            // Associated alpha: the colour samples are stored premultiplied.
            for index in 0..<width * height {
                let alpha = Int(pixels[index * samples + samples - 1])
                for c in 0..<samples - 1 { pixels[index * samples + c] = UInt8((Int(pixels[index * samples + c]) * alpha + 127) / 255) }
            }
        }
        // In strips at 8 bits, and in tiles at 16 (which 16-bit gray is read
        // through apart from libtiff's RGBA interface).
        let files = [TIFFFixtures.tiff(width: width, height: height, pixels: pixels, samples: samples, associatedAlpha: associated, compression: .deflate),
                     TIFFFixtures.tiff(width: width, height: height, pixels: pixels, samples: samples, associatedAlpha: associated, bits: 16,
                                       compression: .lzw, tile: 16)]
        // The straight colour, for the expectation.
        var straight = Self.pattern(width: width, height: height, samples: samples)
        if associated {
            // What premultiplying kept of each colour, as straight colour.
            for index in 0..<width * height {
                let alpha = Int(straight[index * samples + samples - 1])
                for c in 0..<samples - 1 where alpha > 0 {
                    straight[index * samples + c] = UInt8(min(255, (Int(pixels[index * samples + c]) * 255 + alpha / 2) / alpha))
                }
            }
        }
        for (index, bytes) in files.enumerated() {
            #expect(try TIFF.readHeader(bytes).hasAlpha)
            #expect(try Source.readHeader(bytes).hasAlpha)
            for background: UInt8 in [255, 0] {
                let image = try TIFF.decode(bytes, background: (background, background, background))
                let largest = Self.largestDifference(image.pixels, Self.expected(straight, samples: samples, background: background))
                #expect(largest <= 2, "\(samples) samples, associated \(associated), file \(index), background \(background): largest difference \(largest)")
                // The clear right edge is the background.
                #expect(image.pixels[(10 * width + width - 1) * 4] == background)
            }
        }
    }

    @Test("the Orientation tag turns the picture upright, as EXIF turns a JPEG", arguments: Orientation.allCases)
    func orientation(_ orientation: Orientation) throws {
        // The upright picture, and what a file of this orientation stores.
        let uprightPixels = Self.pattern(width: 40, height: 24, samples: 3)
        let upright = Image(width: 40, height: 24, pixels: Self.expected(uprightPixels, samples: 3))
        let inverse: Orientation = orientation == .right ? .left : orientation == .left ? .right : orientation
        let stored = upright.applying(inverse)
        let storedRGB = stride(from: 0, to: stored.pixels.count, by: 4).flatMap { Array(stored.pixels[$0..<$0 + 3]) }
        let bytes = TIFFFixtures.tiff(width: stored.width, height: stored.height, pixels: storedRGB, orientation: orientation.rawValue)
        let header = try Source.readHeader(bytes)
        #expect(header.orientation == orientation && header.storedSize == Size(width: stored.width, height: stored.height))
        #expect(header.uprightSize == Size(width: 40, height: 24))
        // TIFF.decode gives the pixels as stored; Source.decode, upright.
        #expect(try TIFF.decode(bytes) == stored, "\(orientation): not the stored pixels")
        let decoded = try Source.decode(bytes, header: header)
        #expect(decoded == upright, "\(orientation): not upright")
        // The bright block is top left.
        #expect(decoded.pixels[0] == 250 && decoded.pixels[1] == 240)
    }

    @Test("a multi-page TIFF gives its first page and says more follow")
    func pages() throws {
        let pixels = Self.pattern(width: 30, height: 20, samples: 3)
        let bytes = TIFFFixtures.tiff(width: 30, height: 20, pixels: pixels, pages: 3)
        let header = try TIFF.readHeader(bytes)
        #expect(header.hasMorePages && header.size == Size(width: 30, height: 20))
        #expect(try TIFF.decode(bytes).pixels == Self.expected(pixels, samples: 3), "not the first page's pixels")
    }

    @Test("an embedded RGB profile is carried as the source's profile; a gray one is dropped")
    func iccProfile() throws {
        let pixels = Self.pattern(width: 16, height: 16, samples: 3)
        let profile = PNGFixtures.iccProfile()
        let bytes = TIFFFixtures.tiff(width: 16, height: 16, pixels: pixels, icc: profile)
        #expect(try TIFF.readHeader(bytes).iccProfile == profile)
        #expect(try Source.readHeader(bytes).rgbProfile == profile)
        let gray = TIFFFixtures.tiff(width: 16, height: 16, pixels: pixels, icc: PNGFixtures.iccProfile(colorSpace: "GRAY"))
        #expect(try Source.readHeader(gray).rgbProfile == nil, "a gray profile does not describe RGB pixels")
    }

    @Test("the limits refuse an image before it is decoded, worded as for JPEG")
    func limits() throws {
        let bytes = TIFFFixtures.tiff(width: 64, height: 48, pixels: Self.pattern(width: 64, height: 48, samples: 3))
        #expect {
            try TIFF.readHeader(bytes, limits: DecodeLimits(maxPixels: 1000, maxSide: 4096))
        } throws: { error in
            let error = error as? ImageError
            return error?.code == .limitExceeded && error?.message.contains("megapixel limit") == true
        }
        #expect {
            try TIFF.decode(bytes, limits: DecodeLimits(maxPixels: 1 << 20, maxSide: 50))
        } throws: { error in
            (error as? ImageError)?.code == .limitExceeded
        }
        #expect {
            try TIFF.readHeader(bytes, limits: DecodeLimits(maxPixels: 1 << 20, maxSide: 4096, maxInputBytes: 100))
        } throws: { error in
            (error as? ImageError)?.code == .limitExceeded
        }
    }

    @Test("a file cut short, or damaged, is refused with a reason, and nothing reaches stderr")
    func damaged() throws {
        let bytes = TIFFFixtures.tiff(width: 64, height: 48, pixels: Self.pattern(width: 64, height: 48, samples: 3), compression: .none)
        for cut in [3, 6, 40, bytes.count / 3, bytes.count / 2] {
            #expect(throws: ImageError.self, "cut at \(cut)") {
                let cutBytes = Array(bytes.prefix(cut))
                _ = try Source.decode(cutBytes, header: try Source.readHeader(cutBytes))
            }
        }
        // Data that ends inside the strips: truncated, named so.
        let short = Array(bytes.prefix(bytes.count / 2))
        #expect {
            _ = try Source.decode(short, header: try Source.readHeader(short))
        } throws: { error in
            (error as? ImageError)?.code == .truncated || (error as? ImageError)?.code == .corrupt
        }
        // A BMP is named as such, not tried as a TIFF.
        #expect {
            try Source.readHeader(Array("BM".utf8) + [0x36, 0, 0, 0, 0, 0, 0, 0])
        } throws: { error in
            let error = error as? ImageError
            return error?.code == .unsupportedFormat && error?.message.contains("looks like BMP") == true
        }
    }

    @Test("a cancelled decode stops with cancelled, between bands of rows")
    func cancellation() throws {
        let pixels = Self.pattern(width: 32, height: 400, samples: 3)
        let bytes = TIFFFixtures.tiff(width: 32, height: 400, pixels: pixels, rowsPerStrip: 16)
        let flag = CancellationFlag()
        flag.cancel()
        #expect(throws: ImageError.cancelled) { try TIFF.decode(bytes, cancellation: flag) }
        // Asked between bands of 64 rows (four strips each): stopped at the
        // third question, the decode went no further.
        let counting = CancellationFlag(cancellingAtPoll: 3)
        #expect(throws: ImageError.cancelled) { try TIFF.decode(bytes, cancellation: counting) }
        #expect(counting.pollCount == 3)
        let whole = CancellationFlag()
        _ = try TIFF.decode(bytes, cancellation: whole)
        #expect(whole.pollCount >= 7, "400 rows in bands of 64: \(whole.pollCount) questions")
    }

    @Test("seeded mutations of a valid file decode to the header's size or throw, never crash",
          arguments: [TIFFFixtures.Compression.lzw, .deflate, .jpeg, .packBits])
    func mutationFuzz(compression: TIFFFixtures.Compression) throws {
        // RGB and alpha, but JPEG codes RGB only; deflate in tiles.
        let samples = compression == .jpeg ? 3 : 4
        let original = TIFFFixtures.tiff(width: 40, height: 30, pixels: Self.pattern(width: 40, height: 30, samples: samples), samples: samples,
                                         compression: compression, tile: compression == .deflate ? 16 : 0, rowsPerStrip: 8)
        let limits = DecodeLimits(maxPixels: 1 << 20, maxSide: 4096)
        let allowed: Set<ImageError.Code> = [.corrupt, .truncated, .limitExceeded, .invalidDimensions, .empty, .unsupported]
        let tally = MutationFuzz.run(original, iterations: 300, seed: 0x71FF_0000 ^ UInt64(compression.rawValue),
                                     headerBytes: min(300, original.count / 2), allowed: allowed,
                                     header: { bytes throws(ImageError) in try TIFF.readHeader(bytes, limits: limits).size },
                                     decode: { bytes throws(ImageError) in try TIFF.decode(bytes, limits: limits) })
        print("TIFF \(compression) mutations: \(tally.decoded) decoded, \(tally.refused) refused")
        // Deflate's checksum refuses most edits of the coded data.
        #expect(tally.decoded > (compression == .deflate ? 2 : 10) && tally.refused > 30, "\(tally)")
    }
}
