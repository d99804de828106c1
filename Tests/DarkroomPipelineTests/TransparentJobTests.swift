import DarkroomFixtures
import DarkroomImage
import Testing

@testable import DarkroomPipeline

/// Jobs that keep a source's transparency: every step does to the alpha
/// what it does to the picture's shape, PNG, WebP and AVIF outputs carry
/// it, a JPEG output is laid over white, and a result with nothing
/// transparent left is written as an opaque one.
@Suite("Jobs that keep transparency")
struct TransparentJobTests {
    static let size = Size(width: 120, height: 90)

    /// The RGBA PNG of `picture` with `alpha(x, y)` (stored coordinates),
    /// and eXIf orientation `orientation` when given.
    static func png(_ picture: Image, orientation: Int? = nil, alpha: (Int, Int) -> UInt16) -> [UInt8] {
        var samples: [UInt16] = []
        for y in 0..<picture.height {
            for x in 0..<picture.width {
                let p = picture.pixel(x: x, y: y)
                samples += [UInt16(p.r), UInt16(p.g), UInt16(p.b), alpha(x, y)]
            }
        }
        var spec = PNGFixtures.Spec(width: picture.width, height: picture.height, colorType: .rgba, samples: samples)
        spec.exif = orientation.map { PNGFixtures.exif(orientation: $0) }
        return PNGFixtures.png(spec)
    }

    /// An opaque PNG of `picture`, with the same orientation.
    static func opaquePNG(_ picture: Image, orientation: Int? = nil) -> [UInt8] {
        var samples: [UInt16] = []
        for y in 0..<picture.height {
            for x in 0..<picture.width {
                let p = picture.pixel(x: x, y: y)
                samples += [UInt16(p.r), UInt16(p.g), UInt16(p.b)]
            }
        }
        var spec = PNGFixtures.Spec(width: picture.width, height: picture.height, colorType: .rgb, samples: samples)
        spec.exif = orientation.map { PNGFixtures.exif(orientation: $0) }
        return PNGFixtures.png(spec)
    }

    static func decodedWithAlpha(_ bytes: [UInt8]) throws -> AlphaImage {
        let header = try Source.readHeader(bytes)
        return AlphaImage(rgba: try Source.decode(bytes, header: header, options: DecodeOptions(keepAlpha: true)))
    }

    static func pngJob(_ pipeline: String, thumbnail: Size? = Size(width: 16, height: 16), format: ImageFormat = .png,
                       thumbnailFormat: ImageFormat = .png) throws -> ImageJob {
        ImageJob(pipeline: try Pipeline(parsing: pipeline),
                 options: JobOptions(thumbnail: thumbnail, format: format, thumbnailFormat: thumbnailFormat))
    }

    @Test("every step moves and filters the alpha as it does an opaque picture of it; the colour where all is opaque is the opaque job's")
    func stepsCarryTheAlpha() throws {
        let picture = SamplePhoto.render(Self.size, seed: 7)
        let clear = { (x: Int, _: Int) -> Bool in x < 20 }
        // Turned a quarter by its orientation, so the clear part ends on top.
        let source = Self.png(picture, orientation: 6) { x, y in clear(x, y) ? 0 : 255 }
        let pipeline = "scale:60x0 | crop:40x30+5+5 | rotate:90 | flip:h | blur:1 | pad:40x50,background=ffffff | brightness:1.2"
        let output = try Self.pngJob(pipeline).run(source)
        let result = try Self.decodedWithAlpha(output.full.bytes)
        #expect(output.full.size == Size(width: 40, height: 50) && result.width == 40 && result.height == 50)
        #expect(output.full.bytes[25] == 6, "an RGBA PNG")
        #expect(output.sourceSize == Size(width: 90, height: 120))

        // The alpha is what the opaque job makes of a picture of the alpha.
        let alphaPicture = Image(width: Self.size.width, height: Self.size.height,
                                 pixels: (0..<Self.size.width * Self.size.height).flatMap { i -> [UInt8] in
                                     clear(i % Self.size.width, i / Self.size.width) ? [0, 0, 0, 255] : [255, 255, 255, 255]
                                 })
        let alphaJob = try Self.pngJob(pipeline.replacingOccurrences(of: " | brightness:1.2", with: ""))
            .run(Self.opaquePNG(alphaPicture, orientation: 6))
        let expectedAlpha = try PNG.decode(alphaJob.full.bytes)
        #expect(result.alpha == expectedAlpha, "the alpha differs at \(zip(result.alpha.pixels, expectedAlpha.pixels).filter { $0 != $1 }.count) bytes")
        #expect(!result.isOpaque && result.alpha.pixel(x: 20, y: 45).r == 255)

        // Where every pixel within reach of the filters is opaque, the colour
        // is the opaque job's to the level.
        let opaque = try PNG.decode(try Self.pngJob(pipeline).run(Self.opaquePNG(picture, orientation: 6)).full.bytes)
        var compared = 0
        for y in 4..<46 {
            for x in 4..<36 {
                let deep = (-4...4).allSatisfy { dy in (-4...4).allSatisfy { dx in result.alpha.pixel(x: x + dx, y: y + dy).r == 255 } }
                guard deep else { continue }
                compared += 1
                #expect(result.color.pixel(x: x, y: y) == opaque.pixel(x: x, y: y), "(\(x), \(y))")
            }
        }
        #expect(compared > 100, "\(compared) pixels compared")
        // The thumbnail keeps its alpha too.
        let thumb = try Self.decodedWithAlpha(try #require(output.thumbnail).bytes)
        #expect(thumb.width == 16 && !thumb.isOpaque)
    }

    @Test("a JPEG output of a transparent source is laid over white while its PNG thumbnail keeps the alpha")
    func jpegBesidePNG() throws {
        let picture = Image(width: 64, height: 48, red: 20, green: 40, blue: 200)
        let source = Self.png(picture) { x, _ in x < 32 ? 0 : 255 }
        let output = try Self.pngJob("scale:32x24", format: .jpeg, thumbnailFormat: .png).run(source)
        let full = try JPEG.decode(output.full.bytes).image
        let white = full.pixel(x: 3, y: 12), blue = full.pixel(x: 28, y: 12)
        #expect(white.r >= 250 && white.g >= 250 && white.b >= 250, "\(white)")
        #expect(blue.b > 180 && blue.r < 40, "\(blue)")
        let thumb = try Self.decodedWithAlpha(try #require(output.thumbnail).bytes)
        #expect(thumb.alpha.pixel(x: 1, y: 8).r == 0 && thumb.alpha.pixel(x: 14, y: 8).r == 255)
        // JPEG outputs alone keep the compositing decode: the source's
        // transparency is never decoded.
        let jpegOnly = try Self.pngJob("scale:32x24", format: .jpeg, thumbnailFormat: .jpeg).run(source)
        let composited = try Self.pngJob("scale:32x24", format: .jpeg, thumbnailFormat: .jpeg)
            .run(Self.opaquePNG(try PNG.decode(source)))
        #expect(jpegOnly == composited)
    }

    @Test("a result with nothing transparent left is written as an opaque one, byte for byte, a gray one gray",
          arguments: [ImageFormat.png, .webp, .avif], ["sepia", "grayscale"])
    func opaqueResult(_ format: ImageFormat, _ filter: String) throws {
        let picture = SamplePhoto.render(Size(width: 80, height: 60), seed: 2)
        // Clear in a corner the crop leaves out.
        let source = Self.png(picture) { x, y in x < 10 && y < 10 ? 0 : 255 }
        let job = try Self.pngJob("crop:50x40+20+15 | \(filter)", format: format, thumbnailFormat: format)
        if format == .png, filter == "grayscale" { #expect(try job.run(source).full.bytes[25] == 0, "a gray PNG") }
        let kept = try job.run(source)
        let reference = try job.run(Self.opaquePNG(picture))
        #expect(kept.full == reference.full && kept.thumbnail == reference.thumbnail)
    }

    @Test("after grayscale, a gray transparent result is gray + alpha in PNG, untagged, and a one-component JPEG beside it")
    func grayTransparentResult() throws {
        let picture = SamplePhoto.render(Size(width: 80, height: 60), seed: 4)
        let source = Self.png(picture) { x, _ in UInt16(min(255, x * 4)) }
        let job = try Self.pngJob("scale:40x30 | grayscale", thumbnail: Size(width: 16, height: 16), format: .png, thumbnailFormat: .jpeg)
        let output = try job.run(source)
        #expect(output.full.bytes[25] == 4, "colour type \(output.full.bytes[25]), gray + alpha")
        // The picture the steps make, nothing lost.
        var expected = try Self.decodedWithAlpha(source)
        for step in try Pipeline(parsing: "scale:40x30 | grayscale").steps {
            expected = try step.apply(to: expected, sourceProfile: nil)
        }
        #expect(try Self.decodedWithAlpha(output.full.bytes) == expected)
        // The JPEG thumbnail is the gray picture laid over white, one component.
        let thumbnail = try #require(output.thumbnail).bytes
        #expect(try JPEG.readHeader(thumbnail).components == 1)
        // A colour step after grayscale leaves colour: RGBA again.
        let sepia = try Self.pngJob("scale:40x30 | grayscale | sepia", thumbnail: nil).run(source)
        #expect(sepia.full.bytes[25] == 6)
        // A thumbnail window with nothing clear left is a gray opaque file.
        let opaqueWindow = Self.png(picture) { x, _ in x < 5 ? 0 : 255 }
        let cut = try Self.pngJob("grayscale | crop:60x60+20+0", thumbnail: Size(width: 16, height: 16)).run(opaqueWindow)
        #expect(try #require(cut.thumbnail).bytes[25] == 0, "a gray PNG")
    }

    @Test("WebP and AVIF outputs carry the alpha", arguments: [ImageFormat.webp, .avif])
    func lossyFormatsCarryAlpha(_ format: ImageFormat) throws {
        let picture = SamplePhoto.render(Size(width: 64, height: 64), seed: 3)
        let source = Self.png(picture) { x, _ in x < 32 ? 0 : 255 }
        let output = try Self.pngJob("scale:48x48", format: format, thumbnailFormat: format).run(source)
        for bytes in [output.full.bytes, try #require(output.thumbnail).bytes] {
            #expect(try Source.readHeader(bytes).hasAlpha)
            let image = try Self.decodedWithAlpha(bytes)
            #expect(image.alpha.pixel(x: 1, y: image.height / 2).r <= 8)
            #expect(image.alpha.pixel(x: image.width - 2, y: image.height / 2).r >= 247)
        }
    }

    @Test("a step that cannot run fails by name as it does on an opaque source; a set flag stops the run")
    func failuresAndCancellation() throws {
        let source = Self.png(SamplePhoto.render(Size(width: 40, height: 30), seed: 1)) { x, _ in UInt16(x * 6) }
        let job = try Self.pngJob("scale:20x15 | crop:30x30")
        #expect(throws: PipelineFailure(stage: .step(index: 2, text: "crop:30x30,gravity=center"),
                                        error: ImageError(.invalidArgument, "crop 30x30 is larger than image 20x15"))) {
            try job.run(source)
        }
        #expect(throws: PipelineFailure(stage: .step(index: 2, text: "crop:30x30,gravity=center"),
                                        error: ImageError(.invalidArgument, "crop 30x30 is larger than image 20x15"))) {
            try job.run(Self.opaquePNG(SamplePhoto.render(Size(width: 40, height: 30), seed: 1)))
        }
        let flag = CancellationFlag()
        flag.cancel()
        #expect(throws: PipelineFailure.cancelled(in: .decode)) { try job.run(source, cancellation: flag) }
        let midway = CancellationFlag()
        #expect(throws: PipelineFailure.cancelled(in: .step(index: 1, text: "scale:20x15,mode=fit,kernel=lanczos3"))) {
            try Self.pngJob("scale:20x15 | blur:2").run(source, cancellation: midway) { stage, _ in if stage == .decode { midway.cancel() } }
        }
    }

    @Test("a transparent pad gives an opaque JPEG source a clear margin, after the steps before it ran with shrink on load")
    func transparentPadOnJPEG() throws {
        let photo = SamplePhoto.render(Size(width: 1200, height: 800), seed: 8)
        let jpeg = try JPEG.encode(photo, options: EncodeOptions(quality: 90))
        let pipeline = "scale:200x200 | pad:200x200,background=transparent"
        let output = try Self.pngJob(pipeline, thumbnail: Size(width: 40, height: 40)).run(jpeg)
        #expect(output.decodeShrink > 1, "shrink \(output.decodeShrink)")
        let result = try Self.decodedWithAlpha(output.full.bytes)
        #expect(result.width == 200 && result.height == 200)
        // 200x133 centred: rows 33 to 166 opaque, the margins clear.
        #expect(result.alpha.pixel(x: 100, y: 10).r == 0 && result.alpha.pixel(x: 100, y: 190).r == 0)
        #expect(result.alpha.pixel(x: 100, y: 100).r == 255 && result.alpha.pixel(x: 0, y: 40).r == 255)
        // The picture is the opaque job's, scaled the same way.
        let opaque = try PNG.decode(try Self.pngJob("scale:200x200 | pad:200x200,background=000000", thumbnail: Size(width: 40, height: 40))
            .run(jpeg).full.bytes)
        for y in stride(from: 40, to: 160, by: 7) {
            #expect(result.color.pixel(x: 77, y: y) == opaque.pixel(x: 77, y: y))
        }
        let thumb = try Self.decodedWithAlpha(try #require(output.thumbnail).bytes)
        #expect(thumb.alpha.pixel(x: 20, y: 1).r == 0 && thumb.alpha.pixel(x: 20, y: 20).r == 255)

        // With JPEG outputs only, the clear margin is white: the same bytes
        // as a white pad.
        let jpegOnly = ImageJob(pipeline: try Pipeline(parsing: pipeline), options: JobOptions())
        let white = ImageJob(pipeline: try Pipeline(parsing: "scale:200x200 | pad:200x200,background=ffffff"), options: JobOptions())
        #expect(try jpegOnly.run(jpeg) == white.run(jpeg))
        // A JPEG full output beside a PNG thumbnail: white margin there too.
        let mixed = try Self.pngJob(pipeline, thumbnail: Size(width: 40, height: 40), format: .jpeg, thumbnailFormat: .png).run(jpeg)
        let laid = try JPEG.decode(mixed.full.bytes).image.pixel(x: 100, y: 8)
        #expect(laid.r >= 250 && laid.g >= 250 && laid.b >= 250, "\(laid)")
    }

    @Test("a translucent pad colour: its alpha in the margin of an output with alpha, laid over white in a JPEG")
    func translucentPad() throws {
        let photo = SamplePhoto.render(Size(width: 120, height: 80), seed: 10)
        let jpeg = try JPEG.encode(photo, options: EncodeOptions(quality: 90))
        let pipeline = "pad:160x80,background=FF000080,gravity=east"
        let output = try Self.pngJob(pipeline, thumbnail: nil).run(jpeg)
        let result = try Self.decodedWithAlpha(output.full.bytes)
        // Straight red at alpha 128 in the 40 columns on the left, the photo opaque.
        #expect(result.rgba.pixels[(20 * 160 + 10) * 4 ..< (20 * 160 + 10) * 4 + 4] == [255, 0, 0, 128])
        #expect(result.alpha.pixel(x: 39, y: 79).r == 128 && result.alpha.pixel(x: 40, y: 0).r == 255)
        // The picture is the opaque pad's.
        let opaque = try PNG.decode(try Self.pngJob("pad:160x80,background=ff0000,gravity=east", thumbnail: nil).run(jpeg).full.bytes)
        #expect(result.color.pixel(x: 100, y: 40) == opaque.pixel(x: 100, y: 40))
        // With JPEG outputs only: the colour over white, (255, 127, 127), the
        // same bytes as that opaque pad.
        let jpegOnly = ImageJob(pipeline: try Pipeline(parsing: pipeline), options: JobOptions())
        let laid = ImageJob(pipeline: try Pipeline(parsing: "pad:160x80,background=ff7f7f,gravity=east"), options: JobOptions())
        #expect(try jpegOnly.run(jpeg) == laid.run(jpeg))
        // A colour of alpha 0 made in code is the clear margin the parser
        // reads from its text: one canonical text, colour 0 under it.
        let clearRed = Operation.pad(Size(width: 160, height: 80), background: RGBColor(red: 255, green: 0, blue: 0, alpha: 0), gravity: .east)
        #expect(clearRed.canonical == "pad:160x80,background=transparent,gravity=east")
        #expect(try Pipeline(parsing: clearRed.canonical).steps == [.pad(Size(width: 160, height: 80), background: nil, gravity: .east)])
        let clear = try clearRed.apply(to: AlphaImage(opaque: try JPEG.decode(jpeg).image), sourceProfile: nil)
        #expect(clear.rgba.pixels[0 ..< 4] == [0, 0, 0, 0])
        // A transparent source keeps its own alpha beside the margin's.
        let source = Self.png(SamplePhoto.render(Size(width: 60, height: 40), seed: 9)) { x, _ in x < 30 ? 0 : 255 }
        let both = try Self.decodedWithAlpha(try Self.pngJob("pad:80x40,background=0000ff40,gravity=east", thumbnail: nil).run(source).full.bytes)
        #expect((0..<80).map { both.alpha.pixel(x: $0, y: 20).r } == Array(repeating: 64, count: 20) + Array(repeating: 0, count: 30)
            + Array(repeating: 255, count: 30))
    }

    @Test("a transparent source padded transparent keeps both its own alpha and the clear margin")
    func transparentPadOnTransparentSource() throws {
        let source = Self.png(SamplePhoto.render(Size(width: 60, height: 40), seed: 9)) { x, _ in x < 30 ? 0 : 255 }
        let output = try Self.pngJob("pad:80x40,background=transparent,gravity=west", thumbnail: nil).run(source)
        let result = try Self.decodedWithAlpha(output.full.bytes)
        #expect((0..<80).map { result.alpha.pixel(x: $0, y: 20).r } == Array(repeating: 0, count: 30) + Array(repeating: 255, count: 30)
            + Array(repeating: 0, count: 20))
    }

    @Test("glitch moves the alpha with its bands and shifts premultiplied colour: no hidden colour shows where all is opaque")
    func glitchCarriesTheAlpha() throws {
        // Gray 100 where opaque, magenta under the clear pixels: a channel
        // shift of straight colour would bring the magenta's red and blue in.
        var rgba: [UInt8] = []
        for y in 0..<60 {
            for x in 0..<90 {
                rgba += (x / 9 + y / 9) % 2 == 0 ? [100, 100, 100, 255] : [255, 0, 255, 0]
            }
        }
        let image = AlphaImage(rgba: Image(width: 90, height: 60, pixels: rgba))
        let step = Operation.glitch(seed: 11, amount: 1)
        let out = try step.apply(to: image, sourceProfile: nil)
        #expect(out.alpha == (try image.alpha.glitchDisplaced(seed: 11, amount: 1)))
        #expect(out.alpha != image.alpha, "the bands moved")
        var opaque = 0
        for i in 0..<90 * 60 where out.alpha.pixels[i * 4] == 255 {
            opaque += 1
            let c = out.color.pixels[i * 4..<i * 4 + 3]
            #expect(c.allSatisfy { $0 <= 101 }, "pixel \(i): \(Array(c))")
        }
        #expect(opaque > 1000)
    }
}
