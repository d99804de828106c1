import DarkroomFixtures
import Testing

@testable import DarkroomImage

/// AVIF outputs: lossy, so each encode is decoded again and compared with
/// its source within a tolerance.
@Suite("AVIF encoding")
struct AVIFEncodeTests {
    /// The mean absolute difference of the colour channels of two images of one size.
    static func meanDifference(_ a: Image, _ b: Image) -> Double {
        var total = 0, count = 0
        for i in stride(from: 0, to: a.pixels.count, by: 4) {
            for c in 0..<3 { total += abs(Int(a.pixels[i + c]) - Int(b.pixels[i + c])) }
            count += 3
        }
        return Double(total) / Double(count)
    }

    @Test func anImageComesBackClose() throws {
        for (width, height) in [(96, 72), (33, 17), (1, 1)] {
            let image = SamplePhoto.render(Size(width: width, height: height), seed: UInt64(width))
            let avif = try HEIF.encodeAVIF(image, quality: 80)
            #expect(HEIF.isHEIF(avif))
            let header = try HEIF.readHeader(avif)
            #expect(header.isAVIF && header.size == Size(width: width, height: height) && !header.hasAlpha && header.iccProfile == nil)
            let back = try HEIF.decode(avif)
            #expect(back.width == width && back.height == height)
            let difference = Self.meanDifference(image, back)
            #expect(difference < 8, "\(width)x\(height): \(difference) levels off on average")
        }
    }

    @Test func qualityTradesBytesForLevels() throws {
        let image = SamplePhoto.render(Size(width: 128, height: 96), seed: 5)
        let low = try HEIF.encodeAVIF(image, quality: 20), high = try HEIF.encodeAVIF(image, quality: 90)
        #expect(low.count < high.count)
        #expect(Self.meanDifference(image, try HEIF.decode(high)) < Self.meanDifference(image, try HEIF.decode(low)))
        #expect(throws: ImageError.self) { try HEIF.encodeAVIF(image, quality: 0) }
    }

    @Test func aProfileGoesIntoTheColourBox() throws {
        let profile = PNGFixtures.iccProfile()
        let avif = try HEIF.encodeAVIF(SamplePhoto.render(Size(width: 40, height: 30), seed: 1), quality: 70, iccProfile: profile)
        #expect(try HEIF.readHeader(avif).iccProfile == profile)
    }

    @Test func aCancelledEncodeDoesNotStart() {
        let flag = CancellationFlag()
        flag.cancel()
        #expect(throws: ImageError.cancelled) { try HEIF.encodeAVIF(SamplePhoto.render(Size(width: 40, height: 30), seed: 1), quality: 70, cancellation: flag) }
    }
}
