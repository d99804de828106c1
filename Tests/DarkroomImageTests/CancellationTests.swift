import Testing

@testable import DarkroomImage

/// Every long loop of the engine looks at its `CancellationFlag`: a flag set
/// before the work stops it at once, a flag set halfway stops it at the next
/// look, and a flag never set changes nothing. A flag made with
/// `init(cancellingAtPoll:)` sets itself at a chosen look, so where the work
/// stops is exact, not a matter of timing.
@Suite("Cancellation in the engine")
struct EngineCancellationTests {
    /// One cancellable operation and the bytes it produces.
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var run: @Sendable (CancellationFlag) throws(ImageError) -> [UInt8]
        var testDescription: String { name }

        init(_ name: String, _ run: @escaping @Sendable (CancellationFlag) throws(ImageError) -> [UInt8]) {
            self.name = name
            self.run = run
        }
    }

    /// 3 MB of RGBX: the streaming passes look at the flag once a megabyte.
    static let large = TestImages.coordinates(width: 1024, height: 768)
    /// For the filters, which look far more often per byte.
    static let small = TestImages.smooth(width: 256, height: 192)
    static let largeGray = large.grayscale()
    static let plane = GrayImage(exactly: largeGray)!
    static let largeJPEG = try! JPEG.encode(large, options: EncodeOptions(quality: 90, subsampling: .s420))

    static let cases: [Case] = [
        Case("resize lanczos3") { c throws(ImageError) in try small.resized(to: Size(width: 180, height: 130), cancellation: c).pixels },
        Case("resize bilinear, box pre-shrink") { c throws(ImageError) in
            try large.resized(to: Size(width: 100, height: 75), kernel: .bilinear, cancellation: c).pixels
        },
        Case("resize nearest") { c throws(ImageError) in
            try large.resized(to: Size(width: 1500, height: 1200), kernel: .nearest, cancellation: c).pixels
        },
        Case("scale fit") { c throws(ImageError) in try small.scaled(to: Size(width: 300, height: 300), cancellation: c).pixels },
        Case("blur, 16-bit passes") { c throws(ImageError) in try small.blurred(sigma: 2, cancellation: c).pixels },
        Case("blur, 32-bit passes") { c throws(ImageError) in try small.blurred(sigma: 8, cancellation: c).pixels },
        Case("sharpen") { c throws(ImageError) in try large.sharpened(sigma: 0.5, amount: 2, cancellation: c).pixels },
        Case("pixelate") { c throws(ImageError) in try large.pixelated(blockSize: 8, cancellation: c).pixels },
        Case("glitch") { c throws(ImageError) in try large.glitched(seed: 7, amount: 0.6, cancellation: c).pixels },
        Case("glitch in place") { c throws(ImageError) in
            var image = large
            try image.glitch(seed: 7, amount: 0.6, cancellation: c)
            return image.pixels
        },
        Case("grayscale") { c throws(ImageError) in try large.grayscale(cancellation: c).pixels },
        Case("sepia") { c throws(ImageError) in try large.sepia(cancellation: c).pixels },
        Case("invert") { c throws(ImageError) in try large.inverted(cancellation: c).pixels },
        Case("brightness") { c throws(ImageError) in try large.adjustingBrightness(1.3, cancellation: c).pixels },
        Case("contrast") { c throws(ImageError) in try large.adjustingContrast(0.7, cancellation: c).pixels },
        Case("saturation") { c throws(ImageError) in try large.adjustingSaturation(1.5, cancellation: c).pixels },
        Case("rotate 90") { c throws(ImageError) in try large.rotated(quarterTurnsClockwise: 1, cancellation: c).pixels },
        Case("rotate 180") { c throws(ImageError) in try large.rotated(quarterTurnsClockwise: 2, cancellation: c).pixels },
        Case("flip horizontally") { c throws(ImageError) in try large.flipped(horizontally: true, cancellation: c).pixels },
        Case("flip vertically") { c throws(ImageError) in try large.flipped(horizontally: false, cancellation: c).pixels },
        Case("crop") { c throws(ImageError) in try large.cropped(to: Rect(x: 10, y: 20, width: 1000, height: 700), cancellation: c).pixels },
        Case("crop square") { c throws(ImageError) in try large.croppedSquare(gravity: .east, cancellation: c).pixels },
        Case("thumbnail") { c throws(ImageError) in try large.thumbnail(Size(width: 64, height: 64), cancellation: c).pixels },
        Case("orientation, transposing") { c throws(ImageError) in try large.applying(.right, cancellation: c).pixels },
        Case("orientation, row by row") { c throws(ImageError) in try large.applying(.down, cancellation: c).pixels },
        Case("gray plane of a gray image") { c throws(ImageError) in try GrayImage(exactly: largeGray, cancellation: c)?.pixels ?? [] },
        Case("gray resize") { c throws(ImageError) in try plane.resized(to: Size(width: 700, height: 500), cancellation: c).pixels },
        Case("gray thumbnail") { c throws(ImageError) in try plane.thumbnail(Size(width: 48, height: 48), cancellation: c).pixels },
        Case("JPEG decode") { c throws(ImageError) in try JPEG.decode(largeJPEG, cancellation: c).image.pixels },
        Case("JPEG decode, region and shrink") { c throws(ImageError) in
            let options = DecodeOptions(shrink: 2, region: Rect(x: 100, y: 0, width: 600, height: 300))
            return try JPEG.decode(largeJPEG, options: options, cancellation: c).image.pixels
        },
        Case("JPEG encode") { c throws(ImageError) in try JPEG.encode(large, cancellation: c) },
        Case("JPEG encode, progressive 4:2:0") { c throws(ImageError) in
            try JPEG.encode(large, options: EncodeOptions(quality: 80, subsampling: .s420, progressive: true), cancellation: c)
        },
        Case("JPEG encode, gray plane") { c throws(ImageError) in try JPEG.encode(plane, cancellation: c) },
    ]

    @Test("a flag set before the work starts stops it at its first look", arguments: cases)
    func cancelledBeforeStart(_ operation: Case) {
        let flag = CancellationFlag()
        flag.cancel()
        #expect(throws: ImageError.cancelled) { _ = try operation.run(flag) }
        #expect(flag.pollCount <= 1)
    }

    @Test("a flag never set changes nothing; one set halfway stops the work at the next look", arguments: cases)
    func stopsAtTheLookThatSeesTheFlag(_ operation: Case) throws {
        let expected = try operation.run(.never)
        let counting = CancellationFlag()
        #expect(try operation.run(counting) == expected)
        let looks = counting.pollCount
        // The work looks at the flag throughout, not just once at the start.
        #expect(looks >= 3, "\(looks) looks")

        let flag = CancellationFlag(cancellingAtPoll: 2)
        #expect(throws: ImageError.cancelled) { _ = try operation.run(flag) }
        // Stopped at the second look, with the rest of the work (and of the
        // looks) left undone.
        #expect(flag.pollCount == 2)
    }

    @Test("the never flag cannot be set")
    func neverStaysClear() {
        CancellationFlag.never.cancel()
        #expect(!CancellationFlag.never.isCancelled)
        #expect(!CancellationFlag.never.poll())
        #expect(CancellationFlag.never.pollCount == 0)
    }

    @Test("a flag set from another thread is seen")
    func setFromAnotherThread() async {
        let flag = CancellationFlag()
        await Task.detached { flag.cancel() }.value
        #expect(flag.isCancelled)
        #expect(flag.poll())
    }

    @Test("looks come every few hundred kilobytes of work, however wide the rows")
    func pollSpacing() {
        let flag = CancellationFlag()
        // Narrow rows: many rows per look, a power of two.
        let narrow = RowPoll(flag, workPerRow: 100)
        #expect(narrow.mask + 1 == 8192)
        #expect((narrow.mask + 1) * 100 <= CancellationFlag.workPerPoll)
        // Rows of more work than a look's worth: a look per row.
        #expect(RowPoll(flag, workPerRow: 5 << 20).mask == 0)
        #expect(RowPoll(flag, workPerRow: 0).mask + 1 == CancellationFlag.workPerPoll)
        // The codec's bands: whole 16-line groups of about 128K source pixels.
        #expect(JPEG.bandLines(sourcePixelsPerLine: 8000) == 16)
        #expect(JPEG.bandLines(sourcePixelsPerLine: 1024) == 128)
        #expect(JPEG.bandLines(sourcePixelsPerLine: 1000 * 8 * 8) == 16)
        #expect(JPEG.bandLines(sourcePixelsPerLine: 64) == 2048)
    }

    @Test("a cancelled encode releases its output buffer once")
    func cancelledEncodeFreesItsBuffer() throws {
        let noisy = TestImages.noise(width: 1024, height: 512)
        var probe = JPEG.EncoderProbe(firstCapacity: 4 << 10)
        let flag = CancellationFlag(cancellingAtPoll: 3)
        #expect(throws: ImageError.cancelled) { _ = try JPEG.encode(noisy, probe: &probe, cancellation: flag) }
        #expect(probe.growths > 0)
        #expect(probe.buffersFreed == 1)
        // Nothing is left behind: the next encode writes the same file as ever.
        var again = JPEG.EncoderProbe(firstCapacity: 4 << 10)
        #expect(try JPEG.encode(noisy, probe: &again) == (try JPEG.encode(noisy)))
        #expect(again.buffersFreed == 0)
    }

    @Test("a decode stopped between bands does not disturb the next one")
    func cancelledDecodeThenDecodeAgain() throws {
        let flag = CancellationFlag(cancellingAtPoll: 2)
        #expect(throws: ImageError.cancelled) { _ = try JPEG.decode(Self.largeJPEG, cancellation: flag) }
        #expect(try JPEG.decode(Self.largeJPEG).image == (try JPEG.decode(Self.largeJPEG, cancellation: CancellationFlag()).image))
    }
}
