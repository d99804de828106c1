import Testing
@testable import DarkroomImage

@Suite struct OperationResampleTests {
    // Thresholds for a smooth image shrunk 2x and enlarged back. Everything in
    // the test image lies below the half-resolution Nyquist rate, so an ideal
    // filter would lose nothing but the two 8-bit roundings (about 51 dB alone).
    // Lanczos3 has a nearly flat passband up to the fine wave (period 9-11 px) and
    // measures about 45.8 dB; 40 dB leaves margin and still catches a broken
    // weight table or a precision bug, which fall below 30 dB. Bilinear
    // attenuates the fine wave twice (about 29.5 dB measured, threshold 27);
    // nearest aliases it and repeats pixels (about 25.4 dB, threshold 23).
    @Test(arguments: [(ResampleKernel.lanczos3, 40.0), (.bilinear, 27.0), (.nearest, 23.0)])
    func roundTripQuality(kernel: ResampleKernel, minimum: Double) throws {
        let original = TestImages.smooth(width: 256, height: 192)
        let small = try original.resized(to: Size(width: 128, height: 96), kernel: kernel)
        let back = try small.resized(to: Size(width: 256, height: 192), kernel: kernel)
        let quality = TestImages.psnr(original, back)
        #expect(quality > minimum, "\(kernel) round trip \(quality) dB")
    }

    @Test func lanczosBeatsBilinearBeatsNearest() throws {
        let original = TestImages.smooth(width: 200, height: 200)
        func score(_ k: ResampleKernel) throws -> Double {
            let back = try original.resized(to: Size(width: 100, height: 100), kernel: k)
                .resized(to: Size(width: 200, height: 200), kernel: k)
            return TestImages.psnr(original, back)
        }
        let l = try score(.lanczos3), b = try score(.bilinear), n = try score(.nearest)
        #expect(l > b && b > n, "lanczos \(l), bilinear \(b), nearest \(n)")
    }

    @Test(arguments: ResampleKernel.allCases)
    func constantImageStaysConstant(kernel: ResampleKernel) throws {
        let grey = Image(width: 97, height: 61, red: 200, green: 17, blue: 128)
        for size in [Size(width: 40, height: 30), Size(width: 211, height: 7), Size(width: 13, height: 150), Size(width: 1, height: 1)] {
            let out = try grey.resized(to: size, kernel: kernel)
            #expect(out.width == size.width && out.height == size.height)
            #expect(out == Image(width: size.width, height: size.height, red: 200, green: 17, blue: 128), "\(kernel) \(size)")
        }
    }

    @Test func bigShrinkOfConstantStaysConstant() throws {
        let grey = Image(width: 2051, height: 1030, red: 3, green: 250, blue: 99)
        let out = try grey.thumbnail(Size(width: 256, height: 256))
        #expect(out == Image(width: 256, height: 256, red: 3, green: 250, blue: 99))
    }

    @Test func paddingStaysOpaque() throws {
        let img = TestImages.noise(width: 123, height: 77)
        for k in ResampleKernel.allCases {
            #expect(TestImages.paddingIsOpaque(try img.resized(to: Size(width: 50, height: 200), kernel: k)))
            #expect(TestImages.paddingIsOpaque(try img.resized(to: Size(width: 300, height: 31), kernel: k)))
        }
        #expect(TestImages.paddingIsOpaque(try img.thumbnail(Size(width: 10, height: 10))))
    }

    @Test func scaledSizes() {
        func s(_ w: Int, _ h: Int) -> Size { Size(width: w, height: h) }
        let box = s(2048, 2048)
        // Landscape 16:10.
        #expect(Image.scaledSize(of: s(3840, 2400), to: box, mode: .fit) == s(2048, 1280))
        #expect(Image.scaledSize(of: s(3840, 2400), to: box, mode: .fill) == s(3277, 2048))
        #expect(Image.scaledSize(of: s(3840, 2400), to: box, mode: .force) == box)
        // Portrait 3:4.
        #expect(Image.scaledSize(of: s(3000, 4000), to: box, mode: .fit) == s(1536, 2048))
        #expect(Image.scaledSize(of: s(3000, 4000), to: box, mode: .fill) == s(2048, 2731))
        // Square into a wide box.
        #expect(Image.scaledSize(of: s(500, 500), to: s(300, 100), mode: .fit) == s(100, 100))
        #expect(Image.scaledSize(of: s(500, 500), to: s(300, 100), mode: .fill) == s(300, 300))
        // Extreme aspect: never below one pixel.
        #expect(Image.scaledSize(of: s(10000, 1), to: s(100, 100), mode: .fit) == s(100, 1))
        #expect(Image.scaledSize(of: s(1, 10000), to: s(100, 100), mode: .fill) == s(100, 1_000_000))
        // Enlarging works the same way.
        #expect(Image.scaledSize(of: s(40, 30), to: s(400, 400), mode: .fit) == s(400, 300))
    }

    @Test func scaledProducesScaledSize() throws {
        let img = TestImages.smooth(width: 160, height: 90)
        for mode in ScaleMode.allCases {
            let out = try img.scaled(to: Size(width: 64, height: 64), mode: mode)
            #expect(Size(width: out.width, height: out.height)
                == Image.scaledSize(of: Size(width: 160, height: 90), to: Size(width: 64, height: 64), mode: mode))
        }
    }

    @Test func badSizesThrow() {
        let img = Image(width: 4, height: 4)
        #expect(throws: ImageError.self) { try img.resized(to: Size(width: 0, height: 5)) }
        #expect(throws: ImageError.self) { try img.scaled(to: Size(width: -1, height: 5)) }
        #expect(throws: ImageError.self) { try img.thumbnail(Size(width: 70_000, height: 5)) }
        do {
            _ = try img.resized(to: Size(width: 5, height: 0))
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message == "resize size 5x0 must have positive sides")
        }
    }

    @Test func nearestPicksSourcePixels() throws {
        let img = TestImages.coordinates(width: 8, height: 8)
        let out = try img.resized(to: Size(width: 4, height: 4), kernel: .nearest)
        // Output centre (x + 0.5) * 2 lands on source column 2x + 1.
        #expect(out.pixel(x: 1, y: 2) == (3, 5, 3 ^ 5))
        let up = try img.resized(to: Size(width: 16, height: 16), kernel: .nearest)
        #expect(up.pixel(x: 5, y: 9) == (2, 4, 2 ^ 4))
    }

    @Test func thumbnailIsExactSizeAndCentred() throws {
        // Left third red, middle third green, right third blue: a square thumbnail
        // of a 3:1 image must be the green middle only.
        var img = Image(width: 300, height: 100)
        for y in 0..<100 {
            for x in 0..<300 {
                img.setPixel(x: x, y: y, x < 100 ? (255, 0, 0) : x < 200 ? (0, 255, 0) : (0, 0, 255))
            }
        }
        let thumb = try img.thumbnail(Size(width: 20, height: 20))
        #expect(thumb.width == 20 && thumb.height == 20)
        #expect(thumb.pixel(x: 10, y: 10) == (0, 255, 0))
        #expect(thumb.pixel(x: 0, y: 0).g > 200)
        #expect(thumb.pixel(x: 19, y: 19).g > 200)
    }
}

@Suite struct OperationResampleInternalsTests {
    @Test func weightsSumToOneAndStayInRange() {
        for (n, m) in [(2400, 2048), (3000, 2048), (100, 7), (7, 100), (1, 5), (5, 1), (513, 256)] {
            for kernel in [ResampleKernel.lanczos3, .bilinear] {
                let fw = FilterWeights(resampling: n, to: m, kernel: kernel)
                #expect(fw.starts.count == m)
                for i in 0..<m {
                    let sum = (0..<fw.taps).reduce(0) { $0 + Int(fw.weights[i * fw.taps + $1]) }
                    #expect(sum == FilterWeights.one)
                    #expect(fw.starts[i] >= 0 && fw.starts[i] + fw.taps <= n)
                }
            }
        }
    }

    @Test func cachedWeightsEqualFreshOnes() {
        // Asked twice and for more sizes than the cache holds: every answer
        // matches weights built from scratch.
        for round in 0..<2 {
            for m in stride(from: 10, through: 400, by: 5) {
                let kernel: ResampleKernel = m % 2 == 0 ? .lanczos3 : .bilinear
                let cached = FilterWeights.cached(resampling: 333 + round, to: m, kernel: kernel)
                let fresh = FilterWeights(resampling: 333 + round, to: m, kernel: kernel)
                #expect(cached.taps == fresh.taps && cached.starts == fresh.starts && cached.weights == fresh.weights)
            }
        }
    }

    @Test func windowsHoldOnlyTheKernelsSupport() {
        // 2400 -> 2048 with lanczos3: the support is 2 x 3 x 1.17 = 7.03 samples
        // wide, so at most 8 sample centres fall strictly inside it.
        #expect(FilterWeights(resampling: 2400, to: 2048, kernel: .lanczos3).taps == 8)
        // A 2x bilinear shrink: four taps, and away from the edges both end taps
        // carry weight (no sample outside the support was taken in).
        let fw = FilterWeights(resampling: 1000, to: 500, kernel: .bilinear)
        #expect(fw.taps == 4)
        for i in 1..<fw.outCount - 1 {
            let row = Array(fw.weights[i * fw.taps ..< (i + 1) * fw.taps])
            #expect(row.reduce(0) { $0 + Int($1) } == FilterWeights.one)
            #expect(row[0] > 0 && row[3] > 0)
        }
    }

    @Test func fastPassesMatchPrecisePasses() {
        // The 16-bit passes may differ from the 32-bit ones by rounding only.
        // 135 and 90 give 14 taps, which takes the pass for tap counts that are
        // not a multiple of four.
        let img = TestImages.noise(width: 301, height: 203, seed: 11)
        for (w, h) in [(256, 170), (250, 251), (150, 101), (400, 300), (135, 90)] {
            let hw = FilterWeights(resampling: img.width, to: w, kernel: .lanczos3)
            let vw = FilterWeights(resampling: img.height, to: h, kernel: .lanczos3)
            #expect(hw.taps <= FilterWeights.maxFastTaps && vw.taps <= FilterWeights.maxFastTaps)
            let fastH = Image.horizontalPass(img.pixels, width: img.width, height: img.height, weights: hw)
            let preciseH = Image.horizontalPassPrecise(img.pixels, width: img.width, height: img.height, weights: hw)
            let fastV = Image.verticalPass(img.pixels, rowLength: img.stride, weights: vw)
            let preciseV = Image.verticalPassPrecise(img.pixels, rowLength: img.stride, weights: vw)
            #expect(zip(fastH, preciseH).allSatisfy { abs(Int($0) - Int($1)) <= 1 })
            #expect(zip(fastV, preciseV).allSatisfy { abs(Int($0) - Int($1)) <= 1 })
        }
    }

    @Test func shrinkBeyondFastTapsUsesPrecisePath() throws {
        // A 3x shrink needs more than 16 lanczos taps: the 32-bit path must give
        // the same kind of result (constant stays constant, sizes exact).
        let fw = FilterWeights(resampling: 300, to: 100, kernel: .lanczos3)
        #expect(fw.taps > FilterWeights.maxFastTaps)
        let grey = Image(width: 300, height: 300, red: 77, green: 1, blue: 254)
        #expect(try grey.resized(to: Size(width: 100, height: 100)) == Image(width: 100, height: 100, red: 77, green: 1, blue: 254))
        let smooth = TestImages.smooth(width: 300, height: 300)
        let small = try smooth.resized(to: Size(width: 100, height: 100))
        #expect(TestImages.paddingIsOpaque(small))
    }

    @Test func boxReduceAveragesBlocks() {
        var img = Image(width: 5, height: 3)
        img.setPixel(x: 0, y: 0, (4, 8, 12))
        img.setPixel(x: 4, y: 2, (9, 9, 9))
        let r = img.boxReduced(factorX: 2, factorY: 2)
        #expect(r.width == 3 && r.height == 2)
        #expect(r.pixel(x: 0, y: 0) == (1, 2, 3))
        #expect(r.pixel(x: 2, y: 1) == (9, 9, 9))
    }
}

extension OperationResampleInternalsTests {
    @Test func tapCountsCoverBothHorizontalPaths() {
        #expect(FilterWeights(resampling: 301, to: 256, kernel: .lanczos3).taps % 4 == 0)
        let odd = FilterWeights(resampling: 301, to: 135, kernel: .lanczos3).taps
        #expect(odd % 4 != 0 && odd <= FilterWeights.maxFastTaps)
    }
}

extension OperationResampleInternalsTests {
    @Test func horizontalPassHandlesOddAndSingleRows() {
        // Rows go through the fast horizontal pass in pairs; a lone last row must
        // come out the same as it would in a pair.
        let img = TestImages.noise(width: 97, height: 5, seed: 4)
        let fw = FilterWeights(resampling: 97, to: 60, kernel: .lanczos3)
        #expect(fw.taps % 4 == 0)
        let all = Image.horizontalPass(img.pixels, width: 97, height: 5, weights: fw)
        for y in 0..<5 {
            let row = Array(img.pixels[y * 97 * 4 ..< (y + 1) * 97 * 4])
            let one = Image.horizontalPass(row, width: 97, height: 1, weights: fw)
            #expect(one == Array(all[y * 60 * 4 ..< (y + 1) * 60 * 4]))
        }
    }
}

extension OperationResampleInternalsTests {
    @Test func boxReduceSixteenBitSumsMatchWideSums() {
        // Uneven edge blocks on both axes, rows long enough for the vector steps,
        // and the largest block the 16-bit sums take (16 x 16 of 255s = 65280).
        let img = TestImages.noise(width: 53, height: 29, seed: 6)
        for (fx, fy) in [(2, 2), (3, 4), (4, 4), (5, 3), (16, 16)] {
            #expect(img.boxReduced(factorX: fx, factorY: fy) == img.boxReducedWide(factorX: fx, factorY: fy))
        }
        let white = Image(width: 40, height: 40, red: 255, green: 255, blue: 255)
        #expect(white.boxReduced(factorX: 16, factorY: 16) == Image(width: 3, height: 3, red: 255, green: 255, blue: 255))
    }
}

extension OperationResampleInternalsTests {
    @Test func stripedConvolutionMatchesWholePasses() {
        // A shrink that runs the vertical pass first, with an output height that
        // is not a multiple of the strip height: striping must not change a byte.
        let img = TestImages.noise(width: 150, height: 140, seed: 9)
        let h = FilterWeights(resampling: 150, to: 128, kernel: .lanczos3)
        let v = FilterWeights(resampling: 140, to: 121, kernel: .lanczos3)
        let whole = Image.horizontalPass(Image.verticalPass(img.pixels, rowLength: 150 * 4, weights: v), width: 150, height: 121, weights: h)
        #expect(img.convolved(horizontal: h, vertical: v) == Image(width: 128, height: 121, pixels: whole))
    }
}

extension OperationResampleInternalsTests {
    @Test func wideStripsMatchBytePassesForEveryTapCount() {
        // The strip path keeps 16-bit lanes between the passes and filters four
        // rows at a time; for 4, 8, 12 and 16 taps and heights that leave a
        // partial group of rows it must give the bytes of the byte-valued passes.
        let img = TestImages.noise(width: 203, height: 157, seed: 21)
        let cases: [(Int, Int, ResampleKernel)] = [(190, 150, .bilinear), (170, 133, .lanczos3), (130, 101, .lanczos3), (100, 75, .lanczos3)]
        var tapCounts = Set<Int>()
        for (w, h, kernel) in cases {
            let hw = FilterWeights(resampling: img.width, to: w, kernel: kernel)
            let vw = FilterWeights(resampling: img.height, to: h, kernel: kernel)
            tapCounts.insert(hw.taps)
            let whole = Image.horizontalPass(Image.verticalPass(img.pixels, rowLength: img.stride, weights: vw), width: img.width, height: h, weights: hw)
            #expect(img.convolved(horizontal: hw, vertical: vw) == Image(width: w, height: h, pixels: whole))
            // Centred 16-bit lanes in the vertical pass: a constant stays exact.
            for value: UInt8 in [0, 1, 127, 128, 254, 255] {
                let flat = Image(width: img.width, height: img.height, red: value, green: 255 - value, blue: value / 2)
                #expect(flat.convolved(horizontal: hw, vertical: vw) == Image(width: w, height: h, red: value, green: 255 - value, blue: value / 2))
            }
        }
        #expect(tapCounts == [4, 8, 12, 16])
    }
}
