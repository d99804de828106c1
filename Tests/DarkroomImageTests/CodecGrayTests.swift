import Testing
@testable import DarkroomImage

@Suite("JPEG codec: luma-only decoding and one-component encoding")
struct CodecGrayTests {
    /// Largest difference in R between two gray images, and whether every
    /// pixel of `image` has R = G = B.
    private func maxDifference(_ a: Image, _ b: Image) -> Int {
        var worst = 0
        for y in 0..<a.height {
            for x in 0..<a.width {
                worst = max(worst, abs(Int(a.pixel(x: x, y: y).r) - Int(b.pixel(x: x, y: y).r)))
            }
        }
        return worst
    }

    @Test(arguments: [ChromaSubsampling.s444, .s420])
    func lumaOnlyMatchesGrayscaleOfTheFullDecode(subsampling: ChromaSubsampling) throws {
        let bytes = try JPEG.encode(JPEGFixtures.pattern(width: 96, height: 64), options: EncodeOptions(quality: 95, subsampling: subsampling))
        let full = try JPEG.decode(bytes).image.grayscale()
        let luma = try JPEG.decode(bytes, options: DecodeOptions(lumaOnly: true)).image
        #expect(luma.width == 96 && luma.height == 64)
        #expect(luma.isGray)
        #expect(luma.pixels.enumerated().allSatisfy { $0.offset % 4 != 3 || $0.element == 255 })
        // The pattern's colours are not saturated enough to clip in RGB, so
        // only rounding separates the Y plane from the luma of the RGB.
        #expect(maxDifference(full, luma) <= 2)
    }

    @Test func lumaOnlyWithRegionAndShrinkMatchesTheSameCutOfTheFullDecode() throws {
        let bytes = try JPEG.encode(JPEGFixtures.pattern(width: 160, height: 96), options: EncodeOptions(quality: 95))
        let region = Rect(x: 24, y: 16, width: 80, height: 48)
        for shrink in [1, 2, 4] {
            let full = try JPEG.decode(bytes, options: DecodeOptions(shrink: shrink, region: region)).image.grayscale()
            let luma = try JPEG.decode(bytes, options: DecodeOptions(shrink: shrink, region: region, lumaOnly: true)).image
            #expect(luma.width == full.width && luma.height == full.height, "shrink \(shrink)")
            #expect(luma.isGray)
            #expect(maxDifference(full, luma) <= 2, "shrink \(shrink)")
        }
    }

    @Test func grayscaleEncodingWritesOneComponentAndKeepsThePicture() throws {
        let source = JPEGFixtures.pattern(width: 64, height: 48).grayscale()
        let gray = try JPEG.encode(source, options: EncodeOptions(quality: 95, grayscale: true))
        let color = try JPEG.encode(source, options: EncodeOptions(quality: 95))
        let header = try JPEG.readHeader(gray)
        #expect(header.components == 1 && header.colorSpace == .grayscale)
        #expect(gray.count < color.count)
        let decoded = try JPEG.decode(gray).image
        #expect(decoded.isGray)
        #expect(JPEGFixtures.psnr(source, decoded) > 40)
    }

    @Test func isGrayFindsASingleColouredPixel() {
        var image = Image(width: 5, height: 4)
        for y in 0..<4 { for x in 0..<5 { image.setPixel(x: x, y: y, (100, 100, 100)) } }
        #expect(image.isGray)
        image.setPixel(x: 4, y: 3, (100, 100, 101))
        #expect(!image.isGray)
    }

    /// 19x3 = 57 pixels: three blocks of 16 read as words, then 9 one by
    /// one. A single off pixel is found wherever it is, in any channel.
    @Test func isGrayFindsAnOffPixelInTheBlocksAndTheTail() {
        var gray = Image(width: 19, height: 3)
        for y in 0..<3 { for x in 0..<19 { gray.setPixel(x: x, y: y, (UInt8(x * 13 + y), UInt8(x * 13 + y), UInt8(x * 13 + y))) } }
        #expect(gray.isGray)
        for index in 0..<57 {
            let (x, y) = (index % 19, index / 19)
            let v = UInt8(x * 13 + y)
            for variant in [(v, v, v &+ 1), (v, v &+ 1, v), (v &+ 1, v, v)] {
                var image = gray
                image.setPixel(x: x, y: y, variant)
                #expect(!image.isGray, "pixel \(x),\(y) changed to \(variant)")
            }
        }
    }
}
