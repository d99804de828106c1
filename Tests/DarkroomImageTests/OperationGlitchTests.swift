import Testing
@testable import DarkroomImage

@Suite struct OperationGlitchTests {
    @Test func sameSeedSameBytes() throws {
        let img = TestImages.smooth(width: 320, height: 200)
        let a = try img.glitched(seed: 42)
        let b = try img.glitched(seed: 42)
        #expect(a == b)
        #expect(a != img)
        #expect(TestImages.paddingIsOpaque(a))
    }

    @Test func differentSeedsDiffer() throws {
        let img = TestImages.smooth(width: 320, height: 200)
        let outputs = try (0..<8).map { try img.glitched(seed: UInt64($0)).pixels }
        #expect(Set(outputs).count == outputs.count)
    }

    @Test func amountZeroIsIdentityAndRangeIsChecked() throws {
        let img = TestImages.noise(width: 40, height: 30)
        #expect(try img.glitched(seed: 9, amount: 0) == img)
        #expect(throws: ImageError.self) { try img.glitched(seed: 1, amount: 1.5) }
        #expect(throws: ImageError.self) { try img.glitched(seed: 1, amount: -0.1) }
        #expect(throws: ImageError.self) { try img.glitched(seed: 1, amount: .nan) }
    }

    @Test func keepsColourContent() throws {
        // The glitch moves pixels around but does not invent values: every output
        // channel value of a two-colour image is one of the input channel values.
        let img = Image(width: 64, height: 64, red: 10, green: 20, blue: 30)
        let out = try img.glitched(seed: 3, amount: 1)
        let allowed: Set<UInt8> = [10, 20, 30, 255]
        #expect(out.pixels.allSatisfy { allowed.contains($0) })
    }

    @Test func tinyImagesWork() throws {
        for (w, h) in [(1, 1), (1, 9), (9, 1), (2, 3)] {
            let img = TestImages.noise(width: w, height: h)
            let out = try img.glitched(seed: 77, amount: 1)
            #expect(out.width == w && out.height == h)
        }
    }

    @Test func scaleInvariantLayout() throws {
        // Distances are fractions of the size: glitching a half-size copy moves the
        // same parts of the picture as glitching the original, so the half-size
        // glitch resembles the glitched original shrunk.
        let big = TestImages.smooth(width: 400, height: 400)
        let small = try big.resized(to: Size(width: 200, height: 200))
        let glitchThenShrink = try big.glitched(seed: 5, amount: 0.8).resized(to: Size(width: 200, height: 200))
        let shrinkThenGlitch = try small.glitched(seed: 5, amount: 0.8)
        let otherSeed = try small.glitched(seed: 6, amount: 0.8)
        let same = TestImages.psnr(glitchThenShrink, shrinkThenGlitch)
        let different = TestImages.psnr(glitchThenShrink, otherSeed)
        #expect(same > different + 3, "same seed \(same) dB, other seed \(different) dB")
    }
}

extension OperationGlitchTests {
    /// The documented algorithm, written out plainly pixel by pixel.
    static func referenceGlitch(_ img: Image, seed: UInt64, amount: Double) -> Image {
        let w = img.width, h = img.height
        var rng = SplitMix64(seed: seed)
        let d = Int((Double(w) * amount * 0.02 * (0.5 + 0.5 * rng.unit())).rounded())
        func band() -> Range<Int> {
            let top = min(h - 1, Int(rng.unit() * Double(h)))
            let height = max(1, Int((Double(h) * amount * 0.1 * rng.unit()).rounded()))
            return top ..< min(h, top + height)
        }
        var offset = [Int](repeating: 0, count: h)
        for _ in 0..<(2 + rng.below(1 + Int((10 * amount).rounded()))) {
            let rows = band()
            let o = Int((Double(w) * amount * 0.25 * (2 * rng.unit() - 1)).rounded())
            for y in rows { offset[y] += o }
        }
        var perm = [Int](repeating: 0, count: h)
        for _ in 0..<rng.below(1 + Int((4 * amount).rounded())) {
            let rows = band()
            let p = 1 + rng.below(5)
            for y in rows { perm[y] = p }
        }
        var out = img
        for y in 0..<h {
            for x in 0..<w {
                let sx = (((x - offset[y]) % w) + w) % w
                let r = img.pixel(x: min(sx + d, w - 1), y: y).r
                let g = img.pixel(x: sx, y: y).g
                let b = img.pixel(x: max(sx - d, 0), y: y).b
                let orders: [(UInt8, UInt8, UInt8)] = [(r, g, b), (g, b, r), (b, r, g), (b, g, r), (r, b, g), (g, r, b)]
                out.setPixel(x: x, y: y, orders[perm[y]])
            }
        }
        return out
    }

    @Test func matchesTheDocumentedAlgorithm() throws {
        let img = TestImages.noise(width: 123, height: 77, seed: 3)
        for (seed, amount) in [(UInt64(1), 0.5), (2, 1.0), (99, 0.1), (12345, 0.8)] {
            #expect(try img.glitched(seed: seed, amount: amount) == Self.referenceGlitch(img, seed: seed, amount: amount))
        }
    }
}

extension OperationGlitchTests {
    @Test func inPlaceMatchesCopyAndReference() throws {
        // Wide enough for the four-pixel path with a shift of several pixels, and
        // amount 1 for many displaced and permuted bands.
        let img = TestImages.noise(width: 517, height: 161, seed: 8)
        for seed in [UInt64(0), 7, 31, 2024] {
            let copy = try img.glitched(seed: seed, amount: 1)
            #expect(copy == Self.referenceGlitch(img, seed: seed, amount: 1))
            var inPlace = img
            try inPlace.glitch(seed: seed, amount: 1)
            #expect(inPlace == copy)
        }
        var unchanged = img
        try unchanged.glitch(seed: 3, amount: 0)
        #expect(unchanged == img)
        #expect(throws: ImageError.self) { try unchanged.glitch(seed: 3, amount: 2) }
    }

    @Test("glitchDisplaced rotates each row as the glitch's bands do, moving whole pixels")
    func displacedRows() throws {
        let width = 64, height = 48
        // Every pixel a distinct value in each row, R, G and B alike, alpha-like.
        var pixels: [UInt8] = []
        for y in 0..<height { for x in 0..<width { let v = UInt8((x * 4 + y) & 255); pixels += [v, v, v, UInt8(x)] } }
        let image = Image(width: width, height: height, pixels: pixels)
        let moved = try image.glitchDisplaced(seed: 5, amount: 1)
        let glitched = try image.glitched(seed: 5, amount: 1)
        var rotated = 0, matchingGreen = 0
        for y in 0..<height {
            let row = Array(moved.pixels[y * width * 4..<(y + 1) * width * 4])
            let source = Array(image.pixels[y * width * 4..<(y + 1) * width * 4])
            let offset = (0..<width).first { k in (0..<width).allSatisfy { x in row[x * 4..<x * 4 + 4] == source[((x - k + width) % width) * 4..<((x - k + width) % width) * 4 + 4] } }
            #expect(offset != nil, "row \(y) is a rotation of its source row, the fourth byte too")
            if offset != 0 { rotated += 1 }
            // Where no swap band lies, the glitch's green is the displaced row's.
            if (0..<width).allSatisfy({ glitched.pixels[(y * width + $0) * 4 + 1] == row[$0 * 4 + 1] }) { matchingGreen += 1 }
        }
        #expect(rotated > 0)
        #expect(matchingGreen >= height * 6 / 10, "\(matchingGreen) rows")
        #expect(try image.glitchDisplaced(seed: 5, amount: 0) == image)
    }
}
