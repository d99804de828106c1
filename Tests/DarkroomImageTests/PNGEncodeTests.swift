import DarkroomFixtures
import Testing

@testable import DarkroomImage

/// PNG outputs: lossless, so every encode is checked by decoding it again
/// and comparing every sample.
@Suite("PNG encoding")
struct PNGEncodeTests {
    /// The byte of IHDR that holds the colour type (8 signature bytes, the
    /// chunk's length and name, width, height, bit depth).
    static func colorType(_ png: [UInt8]) -> UInt8 { png[25] }

    @Test func anRGBImageComesBackSampleForSample() throws {
        for (width, height) in [(1, 1), (97, 61), (300, 17)] {
            let image = SamplePhoto.render(Size(width: width, height: height), seed: UInt64(width))
            let png = try PNG.encode(image)
            #expect(PNG.isPNG(png))
            let header = try PNG.readHeader(png)
            #expect(header.storedSize == Size(width: width, height: height))
            #expect(header.bitDepth == 8 && !header.hasAlpha && !header.isInterlaced && header.iccProfile == nil)
            #expect(Self.colorType(png) == 2, "RGB")
            #expect(try PNG.decode(png).pixels == image.pixels, "\(width)x\(height)")
        }
    }

    @Test func theFourthByteIsNotWritten() throws {
        // Pixels whose fourth byte is not 255 (an engine image's always is,
        // but the encoder must not depend on it) encode the same.
        var pixels = SamplePhoto.render(Size(width: 40, height: 30), seed: 9).pixels
        let opaque = try PNG.encode(Image(width: 40, height: 30, pixels: pixels))
        for i in stride(from: 3, to: pixels.count, by: 4) { pixels[i] = UInt8(truncatingIfNeeded: i) }
        #expect(try PNG.encode(Image(width: 40, height: 30, pixels: pixels)) == opaque)
    }

    @Test func aGrayImageIsAGrayFile() throws {
        let samples = (0..<(50 * 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let gray = GrayImage(width: 50, height: 20, pixels: samples)
        let png = try PNG.encode(gray)
        #expect(Self.colorType(png) == 0, "gray")
        let decoded = try PNG.decode(png)
        for (i, value) in samples.enumerated() {
            #expect(decoded.pixels[i * 4 ..< i * 4 + 3].allSatisfy { $0 == value }, "sample \(i)")
        }
        // A third of the samples of the same picture as RGB.
        #expect(png.count < (try PNG.encode(Image(gray))).count)
    }

    @Test func aProfileGoesIntoIccp() throws {
        let profile = PNGFixtures.iccProfile()
        let image = SamplePhoto.render(Size(width: 64, height: 48), seed: 2)
        let png = try PNG.encode(image, iccProfile: profile)
        #expect(try PNG.readHeader(png).iccProfile == profile)
        #expect(try PNG.decode(png).pixels == image.pixels)
        // One libpng finds unusable (a gray profile for an RGB file) is left
        // out, and the file is written all the same.
        let wrong = try PNG.encode(image, iccProfile: PNGFixtures.iccProfile(colorSpace: "GRAY"))
        #expect(try PNG.readHeader(wrong).iccProfile == nil)
        #expect(try PNG.decode(wrong).pixels == image.pixels)
    }

    @Test func aCancelledEncodeStops() throws {
        let image = SamplePhoto.render(Size(width: 64, height: 200), seed: 4)
        let flag = CancellationFlag()
        flag.cancel()
        #expect(throws: ImageError.cancelled) { try PNG.encode(image, cancellation: flag) }
        // Tripped at the third question, with 16 rows a question: mid-image.
        #expect(throws: ImageError.cancelled) { try PNG.encode(image, cancellation: CancellationFlag(cancellingAtPoll: 3)) }
    }
}
