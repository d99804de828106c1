import DarkroomImage
import Synchronization
import Testing

@testable import DarkroomPipeline

/// A job asked for WebP outputs writes WebP files of the sizes the pipeline
/// gives, with the pixels of the same job's JPEG outputs, the source's
/// profile, and the encode stage named when WebP cannot hold the result.
@Suite("Jobs with WebP outputs")
struct WebPOutputTests {
    /// Mean absolute difference per channel between two RGBX images of one size.
    static func meanDifference(_ a: Image, _ b: Image) -> Double {
        precondition(a.width == b.width && a.height == b.height)
        var total = 0
        for y in 0..<a.height {
            for x in 0..<a.width {
                let (p, q) = (a.pixel(x: x, y: y), b.pixel(x: x, y: y))
                total += abs(Int(p.r) - Int(q.r)) + abs(Int(p.g) - Int(q.g)) + abs(Int(p.b) - Int(q.b))
            }
        }
        return Double(total) / Double(a.width * a.height * 3)
    }

    @Test("both outputs as WebP, or one of each: each file in its format, at its size, with the picture the JPEG path gives")
    func formatsPerOutput() throws {
        let source = try JPEG.encode(SamplePhoto.render(Size(width: 320, height: 240), seed: 4), options: EncodeOptions(quality: 95))
        let pipeline = try Pipeline(parsing: "scale:200x150 | crop:160x120+20+10")
        let thumb = Size(width: 48, height: 48)
        // The reference: the same job written as near-lossless JPEGs.
        let reference = try ImageJob(pipeline: pipeline, options: JobOptions(thumbnail: thumb, quality: 100, thumbnailQuality: 100,
                                                                             subsampling: .s444)).run(source)
        let both = try ImageJob(pipeline: pipeline, options: JobOptions(thumbnail: thumb, quality: 90, thumbnailQuality: 90,
                                                                        format: .webp, thumbnailFormat: .webp)).run(source)
        let bothThumb = try #require(both.thumbnail)
        #expect(WebP.isWebP(both.full.bytes) && WebP.isWebP(bothThumb.bytes))
        #expect(try WebP.readHeader(both.full.bytes).size == Size(width: 160, height: 120))
        #expect(try WebP.readHeader(try #require(both.thumbnail).bytes).size == thumb)
        #expect(both.full.size == Size(width: 160, height: 120))
        // Lossy at quality 90 on a smooth photo-like picture: a few levels
        // from the reference on average, where another picture would be
        // tens of levels away.
        let full = try WebP.decode(both.full.bytes)
        let expected = try JPEG.decode(reference.full.bytes).image
        #expect(Self.meanDifference(full, expected) < 4, "\(Self.meanDifference(full, expected))")
        let small = try WebP.decode(try #require(both.thumbnail).bytes)
        let expectedSmall = try JPEG.decode(try #require(reference.thumbnail).bytes).image
        #expect(Self.meanDifference(small, expectedSmall) < 6, "\(Self.meanDifference(small, expectedSmall))")
        let other = try JPEG.encode(SamplePhoto.render(Size(width: 160, height: 120), seed: 9), options: EncodeOptions(quality: 95))
        #expect(Self.meanDifference(full, try JPEG.decode(other).image) > 10, "the check can tell pictures apart")

        let mixed = try ImageJob(pipeline: pipeline, options: JobOptions(thumbnail: thumb, format: .webp, thumbnailFormat: .jpeg)).run(source)
        #expect(WebP.isWebP(mixed.full.bytes))
        #expect(try JPEG.readHeader(try #require(mixed.thumbnail).bytes).storedSize == thumb)
        let other2 = try ImageJob(pipeline: pipeline, options: JobOptions(thumbnail: thumb, format: .jpeg, thumbnailFormat: .webp)).run(source)
        #expect(try JPEG.readHeader(other2.full.bytes).storedSize == Size(width: 160, height: 120))
        #expect(WebP.isWebP(try #require(other2.thumbnail).bytes))
        // The quality is the WebP quality factor.
        let rough = try ImageJob(pipeline: pipeline, options: JobOptions(thumbnail: thumb, quality: 10, format: .webp)).run(source)
        #expect(rough.full.bytes.count < both.full.bytes.count)
    }

    @Test("a gray result is a WebP of three equal channels; a tagged source's profile goes into WebP outputs unless srgb converted them")
    func grayAndProfiles() throws {
        let plain = try GrayJobTests.colorJPEG()
        let gray = try ImageJob(pipeline: try Pipeline(parsing: "grayscale"),
                                options: JobOptions(thumbnail: Size(width: 20, height: 20), format: .webp, thumbnailFormat: .webp)).run(plain)
        for bytes in [gray.full.bytes, try #require(gray.thumbnail).bytes] {
            let image = try WebP.decode(bytes)
            var spread = 0
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let p = image.pixel(x: x, y: y)
                    spread = max(spread, Int(max(p.r, p.g, p.b)) - Int(min(p.r, p.g, p.b)))
                }
            }
            // WebP keeps chroma at half resolution and rounds it: equal
            // channels come back within a level or two.
            #expect(spread <= 3, "\(spread)")
            #expect(WebP.iccProfile(bytes) == nil)
        }

        var profile = (0..<1_500).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        profile.replaceSubrange(16..<20, with: Array("RGB ".utf8))
        let tagged = try JPEG.encode(try JPEG.decode(plain).image, options: EncodeOptions(quality: 92, iccProfile: profile))
        let options = JobOptions(thumbnail: Size(width: 32, height: 32), format: .webp, thumbnailFormat: .webp)
        let kept = try ImageJob(pipeline: try Pipeline(parsing: "scale:60x40"), options: options).run(tagged)
        #expect(WebP.iccProfile(kept.full.bytes) == profile)
        #expect(WebP.iccProfile(try #require(kept.thumbnail).bytes) == profile)
        #expect(try WebP.readHeader(kept.full.bytes).size == Size(width: 60, height: 40))
        let untagged = try ImageJob(pipeline: try Pipeline(parsing: "scale:60x40"), options: options).run(plain)
        #expect(WebP.iccProfile(untagged.full.bytes) == nil)
    }

    @Test("a result wider than WebP allows fails in its encode stage before anything is decoded, naming the limit")
    func tooWideForWebP() throws {
        let source = try JPEG.encode(Image(width: 40, height: 2, red: 90, green: 120, blue: 30), options: EncodeOptions(quality: 90))
        let job = ImageJob(pipeline: try Pipeline(parsing: "scale:16384x1,mode=force"),
                           options: JobOptions(thumbnail: Size(width: 8, height: 8), format: .webp))
        let stages = Mutex<[Stage]>([])
        do {
            _ = try job.run(source) { stage, _ in stages.withLock { $0.append(stage) } }
            Issue.record("a 16384-pixel-wide WebP was written")
        } catch {
            #expect(error.stage == .encode("full"))
            #expect(error.error.code == .encodeFailed)
            #expect(error.error.message == "cannot encode a 16384x1 image as WebP: WebP allows at most 16383 pixels a side")
        }
        #expect(stages.withLock { $0 }.isEmpty, "no stage ran")
        // The engine refuses it the same way when asked directly.
        #expect(throws: ImageError(.encodeFailed, "cannot encode a 16384x1 image as WebP: WebP allows at most 16383 pixels a side")) {
            try WebP.encode(Image(width: 16384, height: 1), quality: 80)
        }
        // A thumbnail too wide for WebP (process allows thumbnails up to 16384) fails in its own stage.
        let wideThumb = ImageJob(pipeline: try Pipeline(parsing: "invert"),
                                 options: JobOptions(thumbnail: Size(width: 16384, height: 2), thumbnailFormat: .webp))
        #expect(throws: PipelineFailure(stage: .encode("thumbnail"),
                                        error: ImageError(.encodeFailed, "cannot encode a 16384x2 image as WebP: WebP allows at most 16383 pixels a side"))) {
            try wideThumb.run(source)
        }
        // The same result as a JPEG is fine.
        let jpeg = ImageJob(pipeline: try Pipeline(parsing: "scale:16384x1,mode=force"), options: JobOptions(thumbnail: Size(width: 8, height: 8)))
        #expect(try jpeg.run(source).full.size == Size(width: 16384, height: 1))
    }
}
