import Testing
@testable import DarkroomImage

@Suite("JPEG codec: round trips, orientation, regions, shrink")
struct CodecTests {
    @Test func roundTripAtQuality95KeepsPSNRAbove40dB() throws {
        // q95 quantisation steps are 1-3 levels for the low frequencies this smooth
        // picture uses, so the error is about one level RMS (~48 dB); the sharp block
        // edges ring a little, so 40 dB leaves a margin while a broken colour
        // conversion or shifted rows would fall far below 30 dB.
        let source = JPEGFixtures.pattern(width: 96, height: 64)
        let bytes = try JPEG.encode(source, options: EncodeOptions(quality: 95))
        let decoded = try JPEG.decode(bytes)
        #expect(decoded.image.width == 96 && decoded.image.height == 64)
        #expect(decoded.header.orientation == .up)
        #expect(JPEGFixtures.psnr(source, decoded.image) > 40)
        #expect(decoded.image.pixels.enumerated().allSatisfy { $0.offset % 4 != 3 || $0.element == 255 })
    }

    @Test func lowerQualityGivesSmallerFiles() throws {
        let source = JPEGFixtures.noiseImage(width: 64, height: 64)
        let high = try JPEG.encode(source, options: EncodeOptions(quality: 95))
        let low = try JPEG.encode(source, options: EncodeOptions(quality: 40))
        #expect(low.count < high.count)
    }

    @Test(arguments: [
        (ChromaSubsampling.s444, 80, ChromaSubsampling.s444),
        (.s422, 95, .s422),
        (.s420, 95, .s420),
        (.auto, 95, .s444),
        (.auto, 90, .s444),
        (.auto, 89, .s420),
    ])
    func subsamplingIsVisibleInTheHeader(option: ChromaSubsampling, quality: Int, expected: ChromaSubsampling) throws {
        let bytes = try JPEG.encode(
            JPEGFixtures.pattern(width: 40, height: 24), options: EncodeOptions(quality: quality, subsampling: option))
        let header = try JPEG.readHeader(bytes)
        #expect(header.subsampling == expected)
        #expect(header.colorSpace == .ycbcr && header.components == 3 && !header.isProgressive)
    }

    @Test func progressiveEncodesAndDecodes() throws {
        let source = JPEGFixtures.pattern(width: 50, height: 30)
        let bytes = try JPEG.encode(source, options: EncodeOptions(quality: 95, progressive: true))
        let decoded = try JPEG.decode(bytes)
        #expect(decoded.header.isProgressive)
        #expect(JPEGFixtures.psnr(source, decoded.image) > 40)
    }

    @Test func encoderWritesNoMetadata() throws {
        let bytes = try JPEG.encode(JPEGFixtures.pattern(width: 16, height: 16))
        #expect(JPEGFixtures.markerOffset(0xE1, in: bytes) == nil)  // no APP1 (EXIF/XMP)
        #expect(JPEGFixtures.markerOffset(0xE2, in: bytes) == nil)  // no APP2 (ICC)
    }

    // MARK: orientation

    /// The eight EXIF orientations applied to a 3x2 image whose red channel numbers
    /// the pixels 0...5 row by row; expected rows written out by hand from the
    /// EXIF definitions.
    @Test func applyingEachOrientationMovesPixelsAsEXIFDefines() {
        var stored = Image(width: 3, height: 2)
        for i in 0..<6 { stored.setPixel(x: i % 3, y: i / 3, (UInt8(i), 0, 0)) }
        let expected: [Orientation: [[UInt8]]] = [
            .up: [[0, 1, 2], [3, 4, 5]],
            .upMirrored: [[2, 1, 0], [5, 4, 3]],
            .down: [[5, 4, 3], [2, 1, 0]],
            .downMirrored: [[3, 4, 5], [0, 1, 2]],
            .leftMirrored: [[0, 3], [1, 4], [2, 5]],
            .right: [[3, 0], [4, 1], [5, 2]],
            .rightMirrored: [[5, 2], [4, 1], [3, 0]],
            .left: [[2, 5], [1, 4], [0, 3]],
        ]
        for orientation in Orientation.allCases {
            let upright = stored.applying(orientation)
            let rows = (0..<upright.height).map { y in (0..<upright.width).map { x in upright.pixel(x: x, y: y).r } }
            #expect(rows == expected[orientation], "orientation \(orientation)")
        }
    }

    @Test func applyingWorksAcrossBandsOnLargerImages() {
        // Taller than one band of rows, odd sizes: every orientation and its inverse
        // give back the original.
        let image = JPEGFixtures.noiseImage(width: 37, height: 23)
        let inverse: [Orientation: Orientation] = [.right: .left, .left: .right]
        for o in Orientation.allCases {
            let back = image.applying(o).applying(inverse[o] ?? o)
            #expect(back == image, "orientation \(o)")
        }
    }

    static let stored = Orientation.allCases.flatMap { o in [(o, false), (o, true)] }

    @Test(arguments: stored)
    func everyOrientationDecodesToTheSameUprightPicture(orientation: Orientation, bigEndian: Bool) throws {
        let upright = JPEGFixtures.pattern(width: 64, height: 40)
        let inverse: [Orientation: Orientation] = [.right: .left, .left: .right]
        let storedPixels = upright.applying(inverse[orientation] ?? orientation)
        let file = JPEGFixtures.splice(
            JPEGFixtures.exifSegment(orientation: orientation.rawValue, bigEndian: bigEndian),
            into: try JPEG.encode(storedPixels, options: EncodeOptions(quality: 98)))
        let header = try JPEG.readHeader(file)
        #expect(header.orientation == orientation)
        #expect(header.storedSize == Size(width: storedPixels.width, height: storedPixels.height))
        #expect(header.uprightSize == Size(width: 64, height: 40))
        let decoded = try JPEG.decode(file)
        #expect(decoded.image.width == 64 && decoded.image.height == 40)
        // A wrong transform moves the red and blue blocks: mean error in the tens.
        let diff = JPEGFixtures.difference(decoded.image, upright)
        #expect(diff.mean < 2, "mean difference \(diff.mean)")
        #expect(decoded.image.pixel(x: 2, y: 2).r > 200 && decoded.image.pixel(x: 61, y: 37).b > 200)
    }

    @Test func malformedEXIFMeansUpright() throws {
        let base = try JPEG.encode(JPEGFixtures.pattern(width: 16, height: 8))
        var cases: [[UInt8]] = []
        let good = JPEGFixtures.exifSegment(orientation: 6, bigEndian: false)
        // Value out of range, wrong byte-order mark, IFD offset beyond the end, cut short.
        cases.append(JPEGFixtures.exifSegment(orientation: 9, bigEndian: true))
        var badOrder = good; badOrder[10] = 0x58; badOrder[11] = 0x58; cases.append(badOrder)
        var farIFD = good; farIFD[14] = 0xF0; cases.append(farIFD)
        let body = Array(good[4..<16])
        cases.append([0xFF, 0xE1, 0, UInt8(body.count + 2)] + body)
        for segment in cases {
            let header = try JPEG.readHeader(JPEGFixtures.splice(segment, into: base))
            #expect(header.orientation == .up)
        }
        #expect(EXIF.orientation(tiff: []) == nil)
        #expect(EXIF.orientation(tiff: [0x4D, 0x4D, 0, 42, 0xFF, 0xFF, 0xFF, 0xFF]) == nil)
    }

    // MARK: regions and shrink

    @Test(arguments: [(1, 100, 75), (2, 50, 38), (4, 25, 19), (8, 13, 10)])
    func shrinkDividesTheSizeRoundingUp(shrink: Int, width: Int, height: Int) throws {
        let bytes = try JPEG.encode(JPEGFixtures.pattern(width: 100, height: 75))
        let decoded = try JPEG.decode(bytes, options: DecodeOptions(shrink: shrink))
        #expect(decoded.image.width == width && decoded.image.height == height)
        #expect(decoded.shrink == shrink)
        // Still the same picture: the red corner stays top-left.
        #expect(decoded.image.pixel(x: 0, y: 0).r > 200)
    }

    @Test func regionDecodeEqualsCropOfFullDecode() throws {
        let source = JPEGFixtures.pattern(width: 160, height: 120)
        for subsampling in [ChromaSubsampling.s444, .s420] {
            let bytes = try JPEG.encode(source, options: EncodeOptions(quality: 92, subsampling: subsampling))
            let full = try JPEG.decode(bytes).image
            for rect in [
                Rect(x: 0, y: 0, width: 160, height: 120), Rect(x: 0, y: 0, width: 7, height: 5),
                Rect(x: 33, y: 17, width: 50, height: 41), Rect(x: 153, y: 113, width: 7, height: 7),
                Rect(x: 16, y: 32, width: 64, height: 48), Rect(x: 1, y: 0, width: 159, height: 120),
            ] {
                let region = try JPEG.decode(bytes, options: DecodeOptions(region: rect)).image
                #expect(region.width == rect.width && region.height == rect.height)
                // libjpeg treats the edges of a cropped iMCU as image edges when
                // upsampling chroma, so 4:2:0 may differ by a level or two there.
                let diff = JPEGFixtures.difference(region, JPEGFixtures.crop(full, rect))
                #expect(diff.mean < 1.0 && diff.max <= 16, "\(rect) \(subsampling): \(diff)")
            }
        }
    }

    @Test func regionWithShrinkApproximatesShrunkCrop() throws {
        let bytes = try JPEG.encode(JPEGFixtures.pattern(width: 160, height: 120))
        for shrink in [2, 4, 8] {
            let full = try JPEG.decode(bytes, options: DecodeOptions(shrink: shrink)).image
            let rect = Rect(x: 40, y: 24, width: 96, height: 80)
            let region = try JPEG.decode(bytes, options: DecodeOptions(shrink: shrink, region: rect)).image
            let scaled = Rect(x: 40 / shrink, y: 24 / shrink, width: 96 / shrink, height: 80 / shrink)
            #expect(region.width == scaled.width && region.height == scaled.height)
            let diff = JPEGFixtures.difference(region, JPEGFixtures.crop(full, scaled))
            #expect(diff.mean < 3, "shrink \(shrink): \(diff)")
        }
    }

    @Test(arguments: Orientation.allCases)
    func regionIsTakenInUprightCoordinates(orientation: Orientation) throws {
        let upright = JPEGFixtures.pattern(width: 64, height: 48)
        let inverse: [Orientation: Orientation] = [.right: .left, .left: .right]
        let file = JPEGFixtures.splice(
            JPEGFixtures.exifSegment(orientation: orientation.rawValue, bigEndian: false),
            into: try JPEG.encode(upright.applying(inverse[orientation] ?? orientation), options: EncodeOptions(quality: 98)))
        let full = try JPEG.decode(file).image
        let rect = Rect(x: 5, y: 9, width: 30, height: 20)
        let region = try JPEG.decode(file, options: DecodeOptions(region: rect)).image
        #expect(region.width == 30 && region.height == 20)
        let diff = JPEGFixtures.difference(region, JPEGFixtures.crop(full, rect))
        #expect(diff.mean < 1, "\(orientation): \(diff)")
    }

    // MARK: grayscale and CMYK

    @Test func grayscaleDecodesToEqualChannels() throws {
        let width = 32, height = 16
        let samples = (0..<width * height).map { UInt8(($0 % width) * 8) }
        let bytes = try JPEG.encodeRaw(samples, width: width, height: height, components: 1)
        let decoded = try JPEG.decode(bytes)
        #expect(decoded.header.colorSpace == .grayscale && decoded.header.components == 1)
        for x in [0, 10, 31] {
            let p = decoded.image.pixel(x: x, y: 8)
            #expect(p.r == p.g && p.g == p.b)
            #expect(abs(Int(p.r) - x * 8) <= 3)
        }
    }

    /// Adobe CMYK stores inverted values (255 = no ink). Left half: magenta and
    /// yellow at full ink (red); right half: black at half ink (mid grey).
    @Test(arguments: [false, true])
    func adobeCMYKAndYCCKDecodeToRGB(storeYCCK: Bool) throws {
        let width = 32, height = 16
        var samples = [UInt8]()
        for _ in 0..<height {
            for x in 0..<width {
                samples += x < width / 2 ? [255, 0, 0, 255] : [255, 255, 255, 127]
            }
        }
        let bytes = try JPEG.encodeRaw(samples, width: width, height: height, components: 4, storeYCCK: storeYCCK)
        let decoded = try JPEG.decode(bytes)
        #expect(decoded.header.colorSpace == (storeYCCK ? .ycck : .cmyk))
        let red = decoded.image.pixel(x: 4, y: 8)
        let grey = decoded.image.pixel(x: 27, y: 8)
        #expect(red.r > 245 && red.g < 10 && red.b < 10, "\(red)")
        #expect(abs(Int(grey.r) - 127) <= 3 && abs(Int(grey.g) - 127) <= 3 && abs(Int(grey.b) - 127) <= 3, "\(grey)")
        // Region decode goes through the same conversion.
        let region = try JPEG.decode(bytes, options: DecodeOptions(region: Rect(x: 20, y: 2, width: 5, height: 5)))
        #expect(abs(Int(region.image.pixel(x: 2, y: 2).g) - 127) <= 3)
    }
}
