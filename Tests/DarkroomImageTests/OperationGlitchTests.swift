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
