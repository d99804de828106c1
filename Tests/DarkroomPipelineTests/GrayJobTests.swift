import DarkroomImage
import Testing

@testable import DarkroomPipeline

@Suite("Jobs with gray results")
struct GrayJobTests {
    /// A 120x80 picture whose three channels vary differently, as a q92 JPEG.
    static func colorJPEG() throws -> [UInt8] {
        var source = Image(width: 120, height: 80)
        for y in 0..<80 {
            for x in 0..<120 {
                source.setPixel(x: x, y: y, (UInt8(x * 2), UInt8((y * 3) % 256), UInt8((x * y) % 251)))
            }
        }
        return try JPEG.encode(source, options: EncodeOptions(quality: 92))
    }

    @Test("a gray pipeline writes one-component files of the asked sizes",
          arguments: [Size(width: 32, height: 32), Size(width: 37, height: 23), Size(width: 300, height: 100)])
    func oneComponentOutputsOfTheRightSizes(thumbnail: Size) throws {
        let jpeg = try Self.colorJPEG()
        for (text, full) in [("grayscale", Size(width: 120, height: 80)),
                             ("scale:64x64,mode=fill | crop:square | grayscale", Size(width: 64, height: 64)),
                             ("invert | grayscale | blur:sigma=1", Size(width: 120, height: 80))] {
            let output = try ImageJob(pipeline: try Pipeline(parsing: text), options: JobOptions(thumbnail: thumbnail)).run(jpeg)
            let fullHeader = try JPEG.readHeader(output.full.bytes)
            #expect(fullHeader.components == 1 && fullHeader.colorSpace == .grayscale, "\(text)")
            #expect(fullHeader.storedSize == full && output.full.size == full, "\(text)")
            let small = try #require(output.thumbnail)
            let smallHeader = try JPEG.readHeader(small.bytes)
            #expect(smallHeader.components == 1 && smallHeader.colorSpace == .grayscale, "\(text) \(thumbnail)")
            #expect(smallHeader.storedSize == thumbnail && small.size == thumbnail, "\(text) \(thumbnail)")
        }
    }

    @Test("the files are those the RGBX path writes, byte for byte", arguments: [false, true])
    func sameFilesAsTheRGBXPath(progressive: Bool) throws {
        let jpeg = try Self.colorJPEG()
        let thumbnail = Size(width: 40, height: 40)
        let options = JobOptions(thumbnail: thumbnail, progressive: progressive)
        // `grayscale` alone is read as luma on load; after an inversion it is a step.
        let luma = try JPEG.decode(jpeg, options: DecodeOptions(lumaOnly: true)).image
        let stepped = try JPEG.decode(jpeg).image.inverted().grayscale()
        for (text, result) in [("grayscale", luma), ("invert | grayscale", stepped)] {
            #expect(result.isGray)
            let output = try ImageJob(pipeline: try Pipeline(parsing: text), options: options).run(jpeg)
            let full = try JPEG.encode(result, options: EncodeOptions(quality: 95, progressive: progressive, grayscale: true))
            let small = try JPEG.encode(try result.thumbnail(thumbnail), options: EncodeOptions(quality: 70, progressive: progressive, grayscale: true))
            #expect(output.full.bytes == full, "\(text)")
            #expect(output.thumbnail?.bytes == small, "\(text)")
        }
    }

    @Test("a result that is not gray keeps three components")
    func colorAfterGrayStaysColor() throws {
        let jpeg = try Self.colorJPEG()
        let output = try ImageJob(pipeline: try Pipeline(parsing: "grayscale | sepia"), options: JobOptions(thumbnail: Size(width: 20, height: 20))).run(jpeg)
        #expect(try JPEG.readHeader(output.full.bytes).components == 3)
        let expected = try JPEG.decode(jpeg, options: DecodeOptions(lumaOnly: true)).image.sepia()
        #expect(output.thumbnail?.bytes == (try JPEG.encode(try expected.thumbnail(Size(width: 20, height: 20)), options: EncodeOptions(quality: 70))))
    }
}
