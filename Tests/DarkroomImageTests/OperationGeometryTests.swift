import Testing
@testable import DarkroomImage

@Suite struct OperationGeometryTests {
    @Test func cropRectangle() throws {
        let img = TestImages.coordinates(width: 50, height: 40)
        let out = try img.cropped(to: Rect(x: 10, y: 5, width: 20, height: 15))
        #expect(out.width == 20 && out.height == 15)
        #expect(out.pixel(x: 0, y: 0) == (10, 5, 10 ^ 5))
        #expect(out.pixel(x: 19, y: 14) == (29, 19, 29 ^ 19))
        #expect(try img.cropped(to: Rect(x: 0, y: 0, width: 50, height: 40)) == img)
    }

    @Test func cropOutOfBoundsError() {
        let img = Image(width: 500, height: 400)
        do {
            _ = try img.cropped(to: Rect(x: 0, y: 0, width: 600, height: 600))
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message == "rectangle 600x600+0+0 exceeds image 500x400")
        }
        #expect(throws: ImageError.self) { try img.cropped(to: Rect(x: -1, y: 0, width: 10, height: 10)) }
        #expect(throws: ImageError.self) { try img.cropped(to: Rect(x: 495, y: 0, width: 10, height: 10)) }
        #expect(throws: ImageError.self) { try img.cropped(to: Rect(x: 0, y: 0, width: 0, height: 10)) }
        #expect(throws: ImageError.self) { try img.cropped(to: Size(width: 501, height: 10), gravity: .center) }
    }

    @Test func padPlacesTheImageOnTheBackground() throws {
        let img = TestImages.coordinates(width: 30, height: 20)
        let white = RGBColor(red: 255, green: 255, blue: 255)
        let out = try img.padded(to: Size(width: 50, height: 26), background: white, gravity: .center)
        #expect(out.width == 50 && out.height == 26)
        // Centred: 10 columns and 3 rows of background before the image.
        #expect(out.pixel(x: 10, y: 3) == (0, 0, 0))
        #expect(out.pixel(x: 39, y: 22) == (29, 19, 29 ^ 19))
        for (x, y) in [(0, 0), (9, 3), (40, 22), (10, 2), (10, 23), (49, 25)] {
            #expect(out.pixel(x: x, y: y) == (255, 255, 255), "(\(x), \(y)) is background")
        }
        #expect(out.pixels.enumerated().allSatisfy { $0.offset % 4 != 3 || $0.element == 255 }, "padding bytes stay 255")
        let corner = try img.padded(to: Size(width: 31, height: 25), background: RGBColor(red: 1, green: 2, blue: 3), gravity: .southeast)
        #expect(corner.pixel(x: 1, y: 5) == (0, 0, 0) && corner.pixel(x: 0, y: 24) == (1, 2, 3))
        #expect(try img.padded(to: Size(width: 30, height: 20), background: white, gravity: .north) == img)
        do {
            _ = try img.padded(to: Size(width: 29, height: 40), background: white, gravity: .center)
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidArgument && error.message == "image 30x20 is larger than pad 29x40")
        }
        #expect(RGBColor(hex: "0A0b0C") == RGBColor(red: 10, green: 11, blue: 12) && RGBColor(hex: "0a0b0c")?.description == "0a0b0c")
        for bad in ["fff", "+fffff", "-fffff", "gggggg", "fffffff", "", "+fffffff", "fffffffff"] { #expect(RGBColor(hex: bad) == nil, "\(bad)") }
        // Eight digits carry an alpha; an opaque colour prints as six.
        #expect(RGBColor(hex: "FF000080") == RGBColor(red: 255, green: 0, blue: 0, alpha: 128))
        #expect(RGBColor(hex: "ff000080")?.description == "ff000080" && RGBColor(hex: "0a0b0cff")?.description == "0a0b0c")
        // Laid over white as a transparent pixel is: (c * a + 255 * (255 - a) + 127) / 255.
        #expect(RGBColor(red: 255, green: 0, blue: 100, alpha: 128).over((255, 255, 255)) == RGBColor(red: 255, green: 127, blue: 177))
        #expect(RGBColor(red: 9, green: 8, blue: 7).over((255, 255, 255)) == RGBColor(red: 9, green: 8, blue: 7))
    }

    /// A flat image with a checkerboard patch: the smart window holds the patch.
    static func patched(width: Int, height: Int, patch: Rect) -> Image {
        var img = Image(width: width, height: height, red: 120, green: 140, blue: 160)
        for y in patch.y ..< patch.y + patch.height {
            for x in patch.x ..< patch.x + patch.width where (x / 4 + y / 4) % 2 == 0 {
                let i = (y * width + x) * 4
                img.pixels[i] = 250; img.pixels[i + 1] = 250; img.pixels[i + 2] = 250
            }
        }
        return img
    }

    @Test func smartCropKeepsTheDetail() throws {
        // A wide picture with its detail near the right edge.
        let wide = Self.patched(width: 600, height: 200, patch: Rect(x: 480, y: 40, width: 100, height: 120))
        let square = try wide.croppedSquare(gravity: .smart, cancellation: .never)
        #expect(square.width == 200 && square.height == 200)
        let window = try wide.detailWindow(Size(width: 200, height: 200))
        #expect(window.x + 200 >= 580 && window.x <= 480, "the window \(window) holds the patch 480–580")
        #expect(square == (try wide.cropped(to: window)))
        // A tall one, detail at the top left, a smaller window.
        let tall = Self.patched(width: 300, height: 900, patch: Rect(x: 10, y: 30, width: 60, height: 60))
        let small = try tall.detailWindow(Size(width: 100, height: 100))
        #expect(small.x <= 10 && small.x + 100 >= 70 && small.y <= 30 && small.y + 100 >= 90, "\(small)")
        // Nothing to choose by: the centre.
        let flat = Image(width: 500, height: 300, red: 9, green: 9, blue: 9)
        #expect(try flat.detailWindow(Size(width: 300, height: 300)) == Gravity.center.place(Size(width: 300, height: 300), in: Size(width: 500, height: 300)))
        #expect(try flat.detailWindow(Size(width: 500, height: 300)) == Rect(x: 0, y: 0, width: 500, height: 300))
        #expect(throws: ImageError.self) { try flat.detailWindow(Size(width: 501, height: 10)) }
    }

    @Test func smartThumbnailsKeepTheDetail() throws {
        let wide = Self.patched(width: 600, height: 200, patch: Rect(x: 480, y: 40, width: 100, height: 120))
        func uniform(_ pixels: [UInt8], _ channels: Int) -> Bool {
            let first = Array(pixels.prefix(channels))
            return stride(from: 0, to: pixels.count, by: channels).allSatisfy { Array(pixels[$0 ..< $0 + channels]) == first }
        }
        let centred = try wide.thumbnail(Size(width: 50, height: 50))
        let smart = try wide.thumbnail(Size(width: 50, height: 50), gravity: .smart)
        #expect(uniform(centred.pixels, 4), "the centre is flat")
        #expect(!uniform(smart.pixels, 4), "the smart thumbnail holds the patch")
        let plane = GrayImage(width: 600, height: 200, pixels: stride(from: 0, to: wide.pixels.count, by: 4).map { wide.pixels[$0] })
        #expect(uniform(try plane.thumbnail(Size(width: 50, height: 50)).pixels, 1))
        #expect(!uniform(try plane.thumbnail(Size(width: 50, height: 50), gravity: .smart).pixels, 1))
        #expect(try wide.thumbnail(Size(width: 50, height: 50), gravity: .east) != centred)
    }

    @Test func squareCropGravity() {
        let wide = TestImages.coordinates(width: 60, height: 20)
        let expectations: [(Gravity, Int)] = [(.center, 20), (.west, 0), (.east, 40), (.north, 20), (.southeast, 40), (.northwest, 0)]
        for (gravity, x0) in expectations {
            let sq = wide.croppedSquare(gravity: gravity)
            #expect(sq.width == 20 && sq.height == 20)
            #expect(sq.pixel(x: 0, y: 0).r == UInt8(x0), "\(gravity)")
        }
        let tall = TestImages.coordinates(width: 10, height: 31)
        #expect(tall.croppedSquare().pixel(x: 0, y: 0).g == 10)       // (31 - 10) / 2
        #expect(tall.croppedSquare(gravity: .south).pixel(x: 0, y: 0).g == 21)
        #expect(tall.croppedSquare(gravity: .north).pixel(x: 0, y: 0).g == 0)
    }

    @Test func cropBySizeAndGravity() throws {
        let img = TestImages.coordinates(width: 100, height: 80)
        let size = Size(width: 30, height: 20)
        let cases: [(Gravity, Int, Int)] = [
            (.center, 35, 30), (.north, 35, 0), (.south, 35, 60), (.east, 70, 30), (.west, 0, 30),
            (.northeast, 70, 0), (.northwest, 0, 0), (.southeast, 70, 60), (.southwest, 0, 60),
        ]
        for (gravity, x, y) in cases {
            let out = try img.cropped(to: size, gravity: gravity)
            #expect(out.width == 30 && out.height == 20)
            #expect(out.pixel(x: 0, y: 0) == (UInt8(x), UInt8(y), UInt8(x ^ y)), "\(gravity)")
        }
    }

    @Test func rotateFourTimesIsIdentity() {
        let img = TestImages.noise(width: 13, height: 7)
        var r = img
        for _ in 0..<4 { r = r.rotated(quarterTurnsClockwise: 1) }
        #expect(r == img)
        #expect(img.rotated(quarterTurnsClockwise: 2).rotated(quarterTurnsClockwise: 2) == img)
        #expect(img.rotated(quarterTurnsClockwise: 3) == img.rotated(quarterTurnsClockwise: -1))
        #expect(img.rotated(quarterTurnsClockwise: 8) == img)
    }

    @Test func rotateKnownPattern() {
        // 3x2 image:  A B C       90° clockwise:  D A
        //             D E F                       E B
        //                                         F C
        var img = Image(width: 3, height: 2)
        let names: [(Int, Int, UInt8)] = [(0, 0, 1), (1, 0, 2), (2, 0, 3), (0, 1, 4), (1, 1, 5), (2, 1, 6)]
        for (x, y, v) in names { img.setPixel(x: x, y: y, (v, v * 10, v * 20)) }
        let cw = img.rotated(quarterTurnsClockwise: 1)
        #expect(cw.width == 2 && cw.height == 3)
        let cwOrder: [[UInt8]] = [[4, 1], [5, 2], [6, 3]]
        for y in 0..<3 { for x in 0..<2 { #expect(cw.pixel(x: x, y: y).r == cwOrder[y][x]) } }
        let half = img.rotated(quarterTurnsClockwise: 2)
        #expect(half.pixel(x: 0, y: 0).r == 6 && half.pixel(x: 2, y: 1).r == 1)
        let ccw = img.rotated(quarterTurnsClockwise: 3)
        let ccwOrder: [[UInt8]] = [[3, 6], [2, 5], [1, 4]]
        for y in 0..<3 { for x in 0..<2 { #expect(ccw.pixel(x: x, y: y).r == ccwOrder[y][x]) } }
        #expect(TestImages.paddingIsOpaque(cw))
    }

    @Test func flips() {
        let img = TestImages.coordinates(width: 9, height: 5)
        let h = img.flipped(horizontally: true)
        #expect(h.pixel(x: 0, y: 2) == img.pixel(x: 8, y: 2))
        let v = img.flipped(horizontally: false)
        #expect(v.pixel(x: 3, y: 0) == img.pixel(x: 3, y: 4))
        #expect(h.flipped(horizontally: true) == img)
        #expect(v.flipped(horizontally: false) == img)
        // Both flips together are a half turn.
        #expect(h.flipped(horizontally: false) == img.rotated(quarterTurnsClockwise: 2))
    }
}

extension OperationGeometryTests {
    @Test func rotateLargerThanOneTileMatchesCoordinates() {
        // Bigger than the 32-pixel tiles, with partial tiles on both axes.
        let img = TestImages.noise(width: 70, height: 45, seed: 5)
        let cw = img.rotated(quarterTurnsClockwise: 1)
        let half = img.rotated(quarterTurnsClockwise: 2)
        let ccw = img.rotated(quarterTurnsClockwise: 3)
        for y in 0..<45 {
            for x in 0..<70 {
                let p = img.pixel(x: x, y: y)
                #expect(cw.pixel(x: 44 - y, y: x) == p)
                #expect(half.pixel(x: 69 - x, y: 44 - y) == p)
                #expect(ccw.pixel(x: y, y: 69 - x) == p)
            }
        }
        #expect(TestImages.paddingIsOpaque(cw) && TestImages.paddingIsOpaque(ccw))
    }
}
