import DarkroomImage
import Synchronization
import Testing

@testable import DarkroomPipeline

/// AVIF outputs through a job: the format reaches the encoder, and a result
/// too large to encode within a bounded memory fails before anything is decoded.
@Suite("AVIF outputs")
struct AVIFOutputTests {
    @Test("a job writes AVIF files of the planned sizes, with the source's profile")
    func writesAVIF() throws {
        let source = try JPEG.encode(SamplePhoto.render(Size(width: 120, height: 90), seed: 2), options: EncodeOptions(quality: 90))
        let job = ImageJob(pipeline: try Pipeline(parsing: "scale:60x45"),
                           options: JobOptions(thumbnail: Size(width: 20, height: 20), format: .avif, thumbnailFormat: .avif))
        let output = try job.run(source)
        #expect(try HEIF.readHeader(output.full.bytes).size == Size(width: 60, height: 45))
        #expect(try HEIF.readHeader(try #require(output.thumbnail?.bytes)).size == Size(width: 20, height: 20))
        #expect(try HEIF.readHeader(output.full.bytes).isAVIF)
    }

    @Test("a result over 4096x4096 pixels fails in its encode stage before anything is decoded, naming the limit")
    func tooLargeForAVIF() throws {
        let source = try JPEG.encode(Image(width: 40, height: 40, red: 90, green: 120, blue: 30), options: EncodeOptions(quality: 90))
        let job = ImageJob(pipeline: try Pipeline(parsing: "scale:4097x4096,mode=force"),
                           options: JobOptions(thumbnail: Size(width: 8, height: 8), format: .avif))
        let stages = Mutex<[Stage]>([])
        let message = "cannot encode a 4097x4096 image as AVIF: AVIF outputs may have at most 16777216 pixels (4096x4096), as encoding takes some 25 bytes a pixel"
        do {
            _ = try job.run(source) { stage, _ in stages.withLock { $0.append(stage) } }
            Issue.record("a 4097x4096 AVIF was written")
        } catch {
            #expect(error.stage == .encode("full"))
            #expect(error.error == ImageError(.encodeFailed, message))
        }
        #expect(stages.withLock { $0 }.isEmpty, "no stage ran")
        #expect(HEIF.avifSizeRefusal(Size(width: 4096, height: 4096)) == nil)
        #expect(HEIF.avifSizeRefusal(Size(width: 4097, height: 4096)) == ImageError(.encodeFailed, message))
        // A thumbnail that large fails in its own stage.
        let bigThumb = ImageJob(pipeline: try Pipeline(parsing: "invert"),
                                options: JobOptions(thumbnail: Size(width: 4097, height: 4096), thumbnailFormat: .avif))
        #expect(throws: PipelineFailure(stage: .encode("thumbnail"), error: ImageError(.encodeFailed, message))) {
            try bigThumb.run(source)
        }
    }
}
