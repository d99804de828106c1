import Testing
@testable import DarkroomImage

@Suite struct OperationFilterTests {
    let img = TestImages.noise(width: 37, height: 23)

    @Test func invertTwiceIsIdentity() {
        let once = img.inverted()
        #expect(once.pixel(x: 3, y: 4).r == 255 - img.pixel(x: 3, y: 4).r)
        #expect(once.inverted() == img)
        #expect(TestImages.paddingIsOpaque(once))
    }

    @Test func grayscaleIsNeutralRec601() {
        let g = img.grayscale()
        for y in 0..<g.height { for x in 0..<g.width {
            let p = g.pixel(x: x, y: y)
            #expect(p.r == p.g && p.g == p.b)
        } }
        var known = Image(width: 3, height: 1)
        known.setPixel(x: 0, y: 0, (255, 0, 0))
        known.setPixel(x: 1, y: 0, (0, 255, 0))
        known.setPixel(x: 2, y: 0, (0, 0, 255))
        let k = known.grayscale()
        #expect(k.pixel(x: 0, y: 0).r == 76)   // 0.299 * 255
        #expect(k.pixel(x: 1, y: 0).r == 150)  // 0.587 * 255
        #expect(k.pixel(x: 2, y: 0).r == 29)   // 0.114 * 255
        #expect(Image(width: 2, height: 2, red: 255, green: 255, blue: 255).grayscale().pixel(x: 1, y: 1) == (255, 255, 255))
    }

    @Test func sepiaKnownPixels() {
        let white = Image(width: 1, height: 1, red: 255, green: 255, blue: 255).sepia()
        #expect(white.pixel(x: 0, y: 0) == (255, 255, 239))  // .272 + .534 + .131 = .937
        #expect(Image(width: 1, height: 1).sepia().pixel(x: 0, y: 0) == (0, 0, 0))
        let grey = Image(width: 1, height: 1, red: 100, green: 100, blue: 100).sepia().pixel(x: 0, y: 0)
        #expect(grey.r > grey.g && grey.g > grey.b)
    }

    @Test func brightness() throws {
        #expect(try img.adjustingBrightness(1) == img)
        #expect(try img.adjustingBrightness(0) == Image(width: 37, height: 23))
        let half = try Image(width: 1, height: 1, red: 200, green: 101, blue: 0).adjustingBrightness(0.5)
        #expect(half.pixel(x: 0, y: 0) == (100, 51, 0))
        #expect(try Image(width: 1, height: 1, red: 200).adjustingBrightness(2).pixel(x: 0, y: 0).r == 255)
        #expect(throws: ImageError.self) { try img.adjustingBrightness(-1) }
        #expect(throws: ImageError.self) { try img.adjustingBrightness(.infinity) }
    }

    @Test func contrast() throws {
        #expect(try img.adjustingContrast(1) == img)
        #expect(try img.adjustingContrast(0) == Image(width: 37, height: 23, red: 128, green: 128, blue: 128))
        let p = try Image(width: 1, height: 1, red: 138, green: 118, blue: 128).adjustingContrast(2).pixel(x: 0, y: 0)
        #expect(p == (148, 108, 128))
        #expect(throws: ImageError.self) { try img.adjustingContrast(-0.5) }
    }

    @Test func saturation() throws {
        #expect(try img.adjustingSaturation(1) == img)
        let grey = try img.adjustingSaturation(0)
        #expect(grey == img.grayscale())
        let vivid = try Image(width: 1, height: 1, red: 150, green: 100, blue: 100).adjustingSaturation(2).pixel(x: 0, y: 0)
        #expect(vivid.r > 150 && vivid.g < 100)
        #expect(TestImages.paddingIsOpaque(try img.adjustingSaturation(3)))
        #expect(throws: ImageError.self) { try img.adjustingSaturation(101) }
    }

    @Test func blurKeepsConstantAndSmooths() throws {
        let flat = Image(width: 30, height: 20, red: 90, green: 180, blue: 7)
        #expect(try flat.blurred(sigma: 2) == flat)
        #expect(try flat.blurred(sigma: 50) == flat)
        let blurred = try img.blurred(sigma: 1.5)
        // Noise variance must drop a lot.
        func variance(_ i: Image) -> Double {
            let vals = Swift.stride(from: 0, to: i.pixels.count, by: 4).map { Double(i.pixels[$0]) }
            let mean = vals.reduce(0, +) / Double(vals.count)
            return vals.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(vals.count)
        }
        #expect(variance(blurred) < variance(img) / 4)
        #expect(TestImages.paddingIsOpaque(blurred))
        #expect(throws: ImageError.self) { try img.blurred(sigma: 0) }
        #expect(throws: ImageError.self) { try img.blurred(sigma: 101) }
    }

    @Test func blurSpreadsAnImpulseSymmetrically() throws {
        var dot = Image(width: 21, height: 21)
        dot.setPixel(x: 10, y: 10, (255, 255, 255))
        let b = try dot.blurred(sigma: 2)
        #expect(b.pixel(x: 10, y: 10).r < 255)
        #expect(b.pixel(x: 8, y: 10) == b.pixel(x: 12, y: 10))
        #expect(b.pixel(x: 10, y: 7) == b.pixel(x: 10, y: 13))
        #expect(b.pixel(x: 9, y: 10).r > b.pixel(x: 7, y: 10).r)
    }

    @Test func sharpen() throws {
        let flat = Image(width: 10, height: 10, red: 50, green: 60, blue: 70)
        #expect(try flat.sharpened(sigma: 1) == flat)
        #expect(try img.sharpened(sigma: 1, amount: 0) == img)
        // An edge gets overshoot on both sides.
        var edge = Image(width: 20, height: 4, red: 100, green: 100, blue: 100)
        for y in 0..<4 { for x in 10..<20 { edge.setPixel(x: x, y: y, (160, 160, 160)) } }
        let s = try edge.sharpened(sigma: 1, amount: 1)
        #expect(s.pixel(x: 9, y: 1).r < 100)
        #expect(s.pixel(x: 10, y: 1).r > 160)
        #expect(throws: ImageError.self) { try img.sharpened(sigma: 1, amount: -1) }
    }

    @Test func pixelate() throws {
        var img = Image(width: 5, height: 3)
        img.setPixel(x: 0, y: 0, (100, 0, 0))
        img.setPixel(x: 1, y: 1, (200, 0, 0))
        img.setPixel(x: 4, y: 2, (90, 30, 0))
        let p = try img.pixelated(blockSize: 2)
        // Block (0,0)-(1,1): mean of 100, 0, 0, 200 = 75.
        for (x, y) in [(0, 0), (1, 0), (0, 1), (1, 1)] { #expect(p.pixel(x: x, y: y) == (75, 0, 0)) }
        // Edge block (4,2) is a single pixel.
        #expect(p.pixel(x: 4, y: 2) == (90, 30, 0))
        #expect(try img.pixelated(blockSize: 1) == img)
        let whole = try img.pixelated(blockSize: 100)
        #expect(whole.pixel(x: 0, y: 0) == whole.pixel(x: 4, y: 2))
        #expect(throws: ImageError.self) { try img.pixelated(blockSize: 0) }
    }
}
