import DarkroomImage
import Testing

@testable import DarkroomPipeline

/// A job's files keep the source's RGB colour profile, so that they look as
/// the source does in a colour-managed viewer; gray results carry none.
@Suite("Jobs and colour profiles")
struct ColorProfileJobTests {
    @Test("the full-size file and the thumbnail carry the source's profile; a gray result and a source without one carry none")
    func profilesCarryOver() throws {
        var profile = (0..<2_000).map { UInt8(truncatingIfNeeded: $0 &* 11) }
        profile.replaceSubrange(16..<20, with: Array("RGB ".utf8))
        let plain = try GrayJobTests.colorJPEG()
        let source = try JPEG.encode(try JPEG.decode(plain).image, options: EncodeOptions(quality: 92, iccProfile: profile))
        let options = JobOptions(thumbnail: Size(width: 32, height: 32))
        for text in ["scale:60x40", "invert | crop:square", "glitch:seed=2"] {
            let output = try ImageJob(pipeline: try Pipeline(parsing: text), options: options).run(source)
            #expect(try JPEG.readHeader(output.full.bytes).iccProfile == profile, "\(text)")
            #expect(try JPEG.readHeader(try #require(output.thumbnail).bytes).iccProfile == profile, "\(text)")
            let without = try ImageJob(pipeline: try Pipeline(parsing: text), options: options).run(plain)
            #expect(try JPEG.readHeader(without.full.bytes).iccProfile == nil, "\(text)")
        }
        let gray = try ImageJob(pipeline: try Pipeline(parsing: "grayscale"), options: options).run(source)
        #expect(try JPEG.readHeader(gray.full.bytes).iccProfile == nil)
        #expect(try JPEG.readHeader(try #require(gray.thumbnail).bytes).iccProfile == nil)
    }
}
