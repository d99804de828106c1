import DarkroomFixtures
import DarkroomImage
import Testing

@testable import DarkroomPipeline

/// Jobs whose source is a PNG or a WebP: decoded whole and upright, then
/// the same steps and outputs a JPEG source gets; a source of no format
/// fails its decode stage by name.
@Suite("Jobs on PNG and WebP sources")
struct SourceFormatTests {
    static let pipeline = "scale:200x150 | crop:160x120+20+10 | glitch:seed=3"
    static let options = JobOptions(thumbnail: Size(width: 48, height: 48), quality: 100, thumbnailQuality: 100, subsampling: .s444)

    /// The job run on `source`, and on a near-lossless JPEG of the same
    /// pixels: the JPEG path (with its load plan) is the reference.
    static func againstJPEG(_ source: [UInt8], pixels: Image) throws -> (job: JobOutput, reference: JobOutput) {
        let job = ImageJob(pipeline: try Pipeline(parsing: pipeline), options: options)
        let jpeg = try JPEG.encode(pixels, options: EncodeOptions(quality: 100, subsampling: .s444))
        return (try job.run(source), try job.run(jpeg))
    }

    @Test("a WebP source gives the outputs of its pixels as a JPEG source, at the planned sizes")
    func webPSource() throws {
        let picture = SamplePhoto.render(Size(width: 320, height: 240), seed: 4)
        let source = try WebP.encode(picture, quality: 95)
        let (job, reference) = try Self.againstJPEG(source, pixels: try WebP.decode(source))
        #expect(job.sourceSize == Size(width: 320, height: 240) && job.decodeShrink == 1)
        #expect(job.full.size == Size(width: 160, height: 120))
        #expect(try #require(job.thumbnail).size == Size(width: 48, height: 48))
        let full = try JPEG.decode(job.full.bytes).image
        let expected = try JPEG.decode(reference.full.bytes).image
        #expect(WebPOutputTests.meanDifference(full, expected) < 2, "\(WebPOutputTests.meanDifference(full, expected))")
        let other = try JPEG.decode(try ImageJob(pipeline: try Pipeline(parsing: Self.pipeline), options: Self.options)
            .run(try JPEG.encode(SamplePhoto.render(Size(width: 320, height: 240), seed: 9), options: EncodeOptions(quality: 95))).full.bytes).image
        #expect(WebPOutputTests.meanDifference(full, other) > 10, "the check can tell pictures apart")
    }

    /// A PNG of `picture` with an alpha ramp across (0 on the left, 255 on
    /// the right), and eXIf orientation `orientation` when given.
    static func png(_ picture: Image, orientation: Int? = nil) -> [UInt8] {
        var samples: [UInt16] = []
        samples.reserveCapacity(picture.width * picture.height * 4)
        for y in 0..<picture.height {
            for x in 0..<picture.width {
                let p = picture.pixel(x: x, y: y)
                samples += [UInt16(p.r), UInt16(p.g), UInt16(p.b), UInt16(x * 255 / (picture.width - 1))]
            }
        }
        var spec = PNGFixtures.Spec(width: picture.width, height: picture.height, colorType: .rgba, samples: samples)
        spec.exif = orientation.map { PNGFixtures.exif(orientation: $0) }
        return PNGFixtures.png(spec)
    }

    @Test("a transparent PNG source is composited onto white, then gives the outputs of those pixels as a JPEG source")
    func pngSource() throws {
        let picture = SamplePhoto.render(Size(width: 320, height: 240), seed: 5)
        let source = Self.png(picture)
        let composited = try PNG.decode(source)
        #expect(composited.pixel(x: 0, y: 100) == (255, 255, 255))
        #expect(composited.pixel(x: 319, y: 100) == picture.pixel(x: 319, y: 100))
        let (job, reference) = try Self.againstJPEG(source, pixels: composited)
        #expect(job.sourceSize == Size(width: 320, height: 240) && job.full.size == Size(width: 160, height: 120))
        let full = try JPEG.decode(job.full.bytes).image
        let expected = try JPEG.decode(reference.full.bytes).image
        #expect(WebPOutputTests.meanDifference(full, expected) < 2, "\(WebPOutputTests.meanDifference(full, expected))")
    }

    @Test("a PNG source's eXIf orientation is applied before the steps: sizes are planned upright")
    func pngOrientation() throws {
        let source = Self.png(SamplePhoto.render(Size(width: 120, height: 80), seed: 6), orientation: 6)
        let output = try ImageJob(pipeline: try Pipeline(parsing: "scale:40x0"), options: JobOptions(thumbnail: nil)).run(source)
        #expect(output.sourceSize == Size(width: 80, height: 120))
        #expect(output.full.size == Size(width: 40, height: 60))
        // A crop planned on the stored size would not fit the upright one.
        let job = ImageJob(pipeline: try Pipeline(parsing: "crop:100x50+0+0"))
        do {
            _ = try job.run(source)
            Issue.record("a crop wider than the upright image ran")
        } catch {
            #expect(error.stage == .step(index: 1, text: "crop:100x50+0+0"))
        }
    }

    @Test("a WebP source's RGB profile goes into the outputs, and srgb converts from it")
    func webPSourceProfile() throws {
        var profile = (0..<1_500).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        profile.replaceSubrange(16..<20, with: Array("RGB ".utf8))
        let source = try WebP.encode(SamplePhoto.render(Size(width: 120, height: 80), seed: 2), quality: 90, iccProfile: profile)
        let output = try ImageJob(pipeline: try Pipeline(parsing: "scale:60x40"), options: JobOptions(thumbnail: Size(width: 20, height: 20))).run(source)
        #expect(try JPEG.readHeader(output.full.bytes).iccProfile == profile)
        #expect(try JPEG.readHeader(try #require(output.thumbnail).bytes).iccProfile == profile)
    }

    @Test("bytes of no source format fail the decode stage with unsupported-format, naming what they look like")
    func unsupportedSource() throws {
        let job = ImageJob(pipeline: try Pipeline(parsing: "scale:64x64"))
        do {
            _ = try job.run([0x42, 0x4D, 0x36, 0x00] + [UInt8](repeating: 0, count: 40))
            Issue.record("a BMP ran")
        } catch {
            #expect(error.stage == .decode)
            #expect(error.error.code == .unsupportedFormat)
            #expect(error.description == "decode: not a JPEG, PNG, WebP, GIF, HEIF or TIFF image (starts with 42 4D 36 00: looks like BMP)")
        }
    }

    @Test("a WebP source's decode stops through the job's flag, as the decode stage")
    func webPSourceCancels() throws {
        let source = try WebP.encode(SamplePhoto.render(Size(width: 120, height: 80), seed: 2), quality: 90)
        let flag = CancellationFlag(cancellingAtPoll: 1)
        let job = ImageJob(pipeline: try Pipeline(parsing: "grayscale"))
        do {
            _ = try job.run(source, cancellation: flag)
            Issue.record("the job ran to the end")
        } catch {
            #expect(error.stage == .decode)
            #expect(error.isCancellation)
        }
    }
}
