import Testing
@testable import DarkroomImage

/// Gray builders and the comparison with the RGBX path.
enum GrayFixtures {
    /// `TestImages.smooth` as gray: its red channel in all three.
    static func smooth(width: Int, height: Int) -> Image {
        spread(TestImages.smooth(width: width, height: height))
    }

    /// `TestImages.noise` as gray: every byte value, no two neighbours alike.
    static func noise(width: Int, height: Int, seed: UInt64 = 1) -> Image {
        spread(TestImages.noise(width: width, height: height, seed: seed))
    }

    /// R copied to G and B.
    static func spread(_ image: Image) -> Image {
        var px = image.pixels
        for i in Swift.stride(from: 0, to: px.count, by: 4) { px[i + 1] = px[i]; px[i + 2] = px[i] }
        return Image(width: image.width, height: image.height, pixels: px)
    }

    /// The plane of a gray image; a test failure if it is not gray.
    static func plane(_ image: Image) throws -> GrayImage {
        try #require(GrayImage(exactly: image), "\(image.width)x\(image.height) image is not gray")
    }

    /// The largest and the mean absolute difference between a plane and the
    /// red channel of an RGBX image of the same size.
    static func difference(_ plane: GrayImage, _ image: Image) -> (max: Int, mean: Double) {
        precondition(plane.width == image.width && plane.height == image.height)
        var worst = 0, sum = 0
        for i in 0..<plane.pixels.count {
            let d = abs(Int(plane.pixels[i]) - Int(image.pixels[i * 4]))
            worst = max(worst, d)
            sum += d
        }
        return (worst, Double(sum) / Double(plane.pixels.count))
    }
}

@Suite("Gray planes: extraction and conversion")
struct GrayImageTests {
    @Test func exactlyTakesChannelZeroOfAGrayImage() throws {
        // 19x3 = 57 pixels: three blocks of 16, then 9 one by one.
        let image = GrayFixtures.noise(width: 19, height: 3, seed: 2)
        let plane = try GrayFixtures.plane(image)
        #expect(plane.width == 19 && plane.height == 3)
        for y in 0..<3 { for x in 0..<19 { #expect(plane.pixel(x: x, y: y) == image.pixel(x: x, y: y).r) } }
        #expect(Image(plane) == image)
    }

    @Test func exactlyIsNilWhenAnyPixelIsNotGray() {
        let gray = GrayFixtures.noise(width: 19, height: 3, seed: 3)
        #expect(GrayImage(exactly: gray) != nil)
        // In the first block, the last block and the tail, in G and in B.
        for index in [0, 15, 47, 48, 56] {
            for channel in [1, 2] {
                var px = gray.pixels
                px[index * 4 + channel] &+= 1
                #expect(GrayImage(exactly: Image(width: 19, height: 3, pixels: px)) == nil, "pixel \(index) channel \(channel)")
            }
        }
        // The padding byte is not part of the picture.
        var px = gray.pixels
        px[3] = 0
        #expect(GrayImage(exactly: Image(width: 19, height: 3, pixels: px)) != nil)
    }

    @Test func rgbxOfAPlaneIsGrayAndOpaque() throws {
        var plane = GrayImage(width: 21, height: 2, value: 9)
        plane.setPixel(x: 20, y: 1, 200)
        plane.setPixel(x: 3, y: 0, 0)
        let image = Image(plane)
        #expect(image.isGray && TestImages.paddingIsOpaque(image))
        #expect(image.pixel(x: 20, y: 1) == (200, 200, 200) && image.pixel(x: 3, y: 0) == (0, 0, 0) && image.pixel(x: 4, y: 0) == (9, 9, 9))
        #expect(GrayImage(exactly: image) == plane)
    }

    @Test func croppingMatchesTheRGBXCrop() throws {
        let image = GrayFixtures.noise(width: 31, height: 17, seed: 4)
        let plane = try GrayFixtures.plane(image)
        for rect in [Rect(x: 0, y: 0, width: 31, height: 17), Rect(x: 5, y: 3, width: 7, height: 11), Rect(x: 30, y: 16, width: 1, height: 1)] {
            #expect(try plane.cropped(to: rect) == GrayFixtures.plane(try image.cropped(to: rect)), "\(rect)")
        }
        #expect(throws: ImageError.self) { try plane.cropped(to: Rect(x: 25, y: 0, width: 7, height: 3)) }
        #expect(throws: ImageError.self) { try plane.cropped(to: Rect(x: 0, y: 0, width: 0, height: 3)) }
    }
}

@Suite("Gray planes: resampling against the RGBX path")
struct GrayResampleTests {
    /// Resizes a gray picture both ways and expects the plane to be the RGBX
    /// result's channel 0, byte for byte: the same weights, pass order and
    /// fixed-point passes are applied to one channel instead of three equal
    /// ones.
    private func expectSameResize(_ image: Image, _ size: Size, _ kernel: ResampleKernel, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let expected = try image.resized(to: size, kernel: kernel)
        let got = try GrayFixtures.plane(image).resized(to: size, kernel: kernel)
        #expect(got.width == size.width && got.height == size.height, sourceLocation: sourceLocation)
        let (worst, mean) = GrayFixtures.difference(got, expected)
        #expect(worst == 0, "\(kernel) \(image.width)x\(image.height) -> \(size): max \(worst), mean \(mean)", sourceLocation: sourceLocation)
    }

    @Test(arguments: ResampleKernel.allCases)
    func resizeMatchesRGBX(kernel: ResampleKernel) throws {
        let noise = GrayFixtures.noise(width: 97, height: 61, seed: 5)
        let cases: [Size] = [
            Size(width: 48, height: 30),    // 2x shrink: 16 and 12 taps, vertical pass first
            Size(width: 40, height: 29),    // odd sizes
            Size(width: 33, height: 61),    // horizontal only
            Size(width: 97, height: 20),    // vertical only
            Size(width: 211, height: 130),  // upscale: 8 taps
            Size(width: 250, height: 17),   // up on one axis, down on the other
            Size(width: 13, height: 150),   // and the other way round
            Size(width: 26, height: 17),    // 3.7x: more than 16 taps, the 32-bit passes
            Size(width: 1, height: 1),
        ]
        for size in cases { try expectSameResize(noise, size, kernel) }
        // 83 -> 36 takes 14 lanczos taps: the RGBX pass on bytes.
        let narrow = GrayFixtures.noise(width: 83, height: 45, seed: 11)
        try expectSameResize(narrow, Size(width: 36, height: 45), kernel)
        try expectSameResize(narrow, Size(width: 36, height: 20), kernel)
        // Tiny sources: fewer pixels than one vector step, filters as wide as the image.
        try expectSameResize(GrayFixtures.noise(width: 3, height: 2, seed: 6), Size(width: 17, height: 5), kernel)
        try expectSameResize(GrayFixtures.noise(width: 5, height: 9, seed: 7), Size(width: 2, height: 4), kernel)
    }

    @Test(arguments: ResampleKernel.allCases)
    func bigShrinksUseTheSameBoxPreShrink(kernel: ResampleKernel) throws {
        let smooth = GrayFixtures.smooth(width: 1030, height: 777)
        // 1030 / (2 x 128) = 4: a 4 x 3 box, then the kernel.
        #expect(1030 / (2 * 128) == 4 && 777 / (2 * 128) == 3)
        try expectSameResize(smooth, Size(width: 128, height: 128), kernel)
        // 4 x 4 blocks (a power-of-two count, divided by a shift) and edge blocks.
        #expect(1030 / (2 * 120) == 4 && 777 / (2 * 90) == 4)
        try expectSameResize(smooth, Size(width: 120, height: 90), kernel)
        // 9 x 6: columns beyond eight lanes summed one by one.
        #expect(1030 / (2 * 57) == 9 && 777 / (2 * 61) == 6)
        try expectSameResize(smooth, Size(width: 57, height: 61), kernel)
        // Blocks of more than 257 pixels: 32-bit sums.
        try expectSameResize(GrayFixtures.noise(width: 4000, height: 60, seed: 8), Size(width: 10, height: 1), kernel)
    }

    @Test func boxReduceMatchesRGBX() throws {
        let image = GrayFixtures.noise(width: 203, height: 41, seed: 9)
        let plane = try GrayFixtures.plane(image)
        for (fx, fy) in [(2, 2), (3, 4), (4, 4), (5, 3), (8, 2), (7, 7), (9, 1), (16, 16), (1, 5), (30, 20)] {
            let got = plane.boxReduced(factorX: fx, factorY: fy)
            let expected = image.boxReduced(factorX: fx, factorY: fy)
            #expect(got.width == expected.width && got.height == expected.height)
            #expect(GrayFixtures.difference(got, expected).max == 0, "\(fx)x\(fy)")
        }
        let white = GrayImage(width: 40, height: 40, value: 255)
        #expect(white.boxReduced(factorX: 16, factorY: 16) == GrayImage(width: 3, height: 3, value: 255))
    }

    @Test(arguments: [Size(width: 256, height: 256), Size(width: 32, height: 32), Size(width: 37, height: 23), Size(width: 90, height: 300), Size(width: 700, height: 400)])
    func thumbnailMatchesRGBX(size: Size) throws {
        let image = GrayFixtures.smooth(width: 611, height: 389)
        let expected = try image.thumbnail(size)
        let got = try GrayFixtures.plane(image).thumbnail(size)
        #expect(got.width == size.width && got.height == size.height)
        let (worst, mean) = GrayFixtures.difference(got, expected)
        #expect(worst == 0, "thumbnail \(size): max \(worst), mean \(mean)")
    }

    @Test func constantStaysConstant() throws {
        let plane = GrayImage(width: 2051, height: 1030, value: 201)
        #expect(try plane.thumbnail(Size(width: 256, height: 256)) == GrayImage(width: 256, height: 256, value: 201))
        for kernel in ResampleKernel.allCases {
            #expect(try plane.resized(to: Size(width: 3000, height: 7), kernel: kernel) == GrayImage(width: 3000, height: 7, value: 201))
        }
    }

    @Test func sameSizeIsUnchangedAndBadSizesThrow() throws {
        let plane = try GrayFixtures.plane(GrayFixtures.noise(width: 9, height: 4))
        #expect(try plane.resized(to: Size(width: 9, height: 4)) == plane)
        #expect(throws: ImageError.self) { try plane.resized(to: Size(width: 0, height: 4)) }
        #expect(throws: ImageError.self) { try plane.thumbnail(Size(width: 70_000, height: 5)) }
    }

    @Test func rowsFilterTheSameInAnyGroupOfFour() throws {
        // Rows go through the RGBX passes four at a time, as the channels of
        // one row; 67 rows leave a last group of three. Each row must come out
        // as it does alone, through each of the three RGBX passes.
        let plane = try GrayFixtures.plane(GrayFixtures.noise(width: 83, height: 67, seed: 10))
        for (outW, path) in [(48, "16-bit lanes, 12 taps"), (200, "16-bit lanes, 8 taps"), (36, "bytes, 14 taps"), (20, "32-bit sums, 26 taps")] {
            let fw = FilterWeights(resampling: 83, to: outW, kernel: .lanczos3)
            switch path {
            case "bytes, 14 taps": #expect(fw.taps % 4 != 0 && fw.taps <= FilterWeights.maxFastTaps)
            case "32-bit sums, 26 taps": #expect(fw.taps > FilterWeights.maxFastTaps)
            default: #expect(fw.taps % 4 == 0 && fw.taps <= FilterWeights.maxFastTaps)
            }
            let all = GrayImage.horizontalPass(plane.pixels, width: 83, height: 67, weights: fw)
            #expect(all.count == outW * 67)
            for y in [0, 1, 3, 4, 63, 64, 66] {
                let row = Array(plane.pixels[y * 83 ..< (y + 1) * 83])
                #expect(GrayImage.horizontalPass(row, width: 83, height: 1, weights: fw) == Array(all[y * outW ..< (y + 1) * outW]), "row \(y), \(path)")
            }
            // And as the RGBX pass gives channel 0 of the same rows as RGBX.
            let rgbx = Image(GrayImage(width: 83, height: 67, pixels: plane.pixels))
            let expected = Image.horizontalPass(rgbx.pixels, width: 83, height: 67, weights: fw)
            #expect(all == Swift.stride(from: 0, to: expected.count, by: 4).map { expected[$0] }, "\(path)")
        }
    }

    @Test func rowsBecomeChannelsAndBack() throws {
        // Widths below, at and above one 16-pixel step; heights that leave
        // 0 to 3 rows in the last group.
        for (width, height) in [(1, 1), (5, 3), (16, 4), (17, 5), (40, 7), (33, 2)] {
            let plane = try GrayFixtures.plane(GrayFixtures.noise(width: width, height: height, seed: UInt64(width * 100 + height)))
            let quads = GrayImage.interleavedRows(plane.pixels, width: width, height: height)
            #expect(quads.count == (height + 3) / 4 * width * 4)
            for y in 0 ..< (height + 3) / 4 * 4 {
                for x in 0..<width {
                    // Rows past the end repeat the last one.
                    let expected = plane.pixel(x: x, y: min(y, height - 1))
                    #expect(quads[((y / 4) * width + x) * 4 + y % 4] == expected, "\(width)x\(height) at \(x),\(y)")
                }
            }
            #expect(GrayImage.deinterleavedRows(quads, width: width, height: height) == plane.pixels, "\(width)x\(height)")
            let lanes = GrayImage.interleavedLanes(plane.pixels, width: width, height: height)
            #expect(lanes == quads.map { Int16($0) << 7 }, "\(width)x\(height)")
        }
    }
}

@Suite("Gray planes: JPEG")
struct GrayJPEGTests {
    @Test(arguments: [false, true])
    func encodesOneComponentFilesAsTheRGBXEncoderDoes(progressive: Bool) throws {
        let image = GrayFixtures.smooth(width: 67, height: 45)
        let plane = try GrayFixtures.plane(image)
        let options = EncodeOptions(quality: 90, progressive: progressive)
        let bytes = try JPEG.encode(plane, options: options)
        let header = try JPEG.readHeader(bytes)
        #expect(header.components == 1 && header.colorSpace == .grayscale)
        #expect(header.storedSize == Size(width: 67, height: 45) && header.isProgressive == progressive)
        // The very file the RGBX encoder writes from the same picture.
        var gray = options
        gray.grayscale = true
        #expect(bytes == (try JPEG.encode(image, options: gray)))
        // And it decodes back to the picture.
        let decoded = try JPEG.decode(bytes).image
        #expect(decoded.isGray && decoded.width == 67 && decoded.height == 45)
        #expect(TestImages.psnr(image, decoded) > 40)
    }

    @Test func rejectsABadQuality() throws {
        let plane = GrayImage(width: 8, height: 8, value: 7)
        #expect(throws: ImageError.self) { try JPEG.encode(plane, options: EncodeOptions(quality: 0)) }
        #expect(throws: ImageError.self) { try JPEG.encode(plane, options: EncodeOptions(quality: 101, progressive: true)) }
    }
}
