import DarkroomImage
import Testing

@testable import DarkroomPipeline

@Suite("Planning from the header")
struct PlanningTests {
    let limits = DecodeLimits.default

    @Test("sizes follow each step")
    func plannedSizes() throws {
        let p = try Pipeline(parsing: "scale:2048x2048,mode=fill | crop:square | rotate:90 | crop:100x50+0+0")
        let sizes = try p.plannedSizes(from: Size(width: 3640, height: 2400), limits: limits)
        #expect(sizes == [Size(width: 3106, height: 2048), Size(width: 2048, height: 2048), Size(width: 2048, height: 2048), Size(width: 100, height: 50)])
    }

    @Test("a crop that does not fit fails at its step before decoding")
    func cropTooBig() throws {
        let p = try Pipeline(parsing: "scale:500x400,mode=force | crop:600x600+0+0")
        do {
            _ = try p.plannedSizes(from: Size(width: 1000, height: 800), limits: limits)
            Issue.record("expected failure")
        } catch {
            #expect(error.description == "step 2 crop:600x600+0+0: rectangle 600x600+0+0 exceeds image 500x400")
            #expect(error.stage.index == 2)
        }
    }

    @Test("an output over the pixel limit fails at the scale step")
    func outputLimit() throws {
        let p = try Pipeline(parsing: "scale:20000x20000,mode=force")
        #expect(throws: PipelineFailure.self) {
            try p.plannedSizes(from: Size(width: 100, height: 100), limits: limits)
        }
    }

    @Test("fill and square crop decode only the central square")
    func cropBeforeScale() throws {
        let p = try Pipeline(parsing: "scale:2048x2048,mode=fill | crop:square | glitch:seed=7")
        let plan = LoadPlan.make(for: p.steps, source: Size(width: 3640, height: 2400))
        #expect(plan.region == Rect(x: 620, y: 0, width: 2400, height: 2400))
        #expect(plan.foldedSteps == 2)
        #expect(plan.resize?.size == Size(width: 2048, height: 2048))
        #expect(plan.shrink == 1)
    }

    @Test("shrink on load leaves at least a factor of 2 for the kernel", arguments: [
        (Size(width: 4000, height: 3000), Size(width: 256, height: 256), 4),
        (Size(width: 4000, height: 3000), Size(width: 1000, height: 1000), 1),
        (Size(width: 4000, height: 3000), Size(width: 700, height: 700), 2),
        (Size(width: 8000, height: 6000), Size(width: 256, height: 256), 8),
        (Size(width: 1200, height: 800), Size(width: 2048, height: 2048), 1),
    ])
    func shrinkOnLoad(source: Size, box: Size, expected: Int) throws {
        let p = Pipeline([.scale(box, mode: .fill, kernel: .lanczos3), .crop(.square(.center))])
        let plan = LoadPlan.make(for: p.steps, source: source)
        #expect(plan.shrink == expected)
        if let region = plan.region, let target = plan.resize?.size {
            #expect(region.width / plan.shrink >= target.width || plan.shrink == 1)
        }
    }

    @Test("enlarge=no: a scale that would grow the image folds nothing and leaves it as it is; one that shrinks folds as before")
    func noEnlarge() throws {
        let p = try Pipeline(parsing: "scale:2048x2048,mode=fill,enlarge=no | crop:square")
        let small = Size(width: 1200, height: 800)
        #expect(try p.plannedSizes(from: small, limits: limits) == [small, Size(width: 800, height: 800)])
        #expect(LoadPlan.make(for: p.steps, source: small) == LoadPlan())
        let large = LoadPlan.make(for: p.steps, source: Size(width: 4000, height: 3000))
        #expect(large.foldedSteps == 2 && large.resize?.size == Size(width: 2048, height: 2048))

        // Run for real: the small source keeps its size, and the step hands
        // on the decoded pixels themselves.
        let source = try JPEG.encode(SamplePhoto.render(Size(width: 160, height: 120), seed: 3), options: EncodeOptions(quality: 90))
        let options = JobOptions(thumbnail: nil)
        let kept = try ImageJob(pipeline: try Pipeline(parsing: "scale:400x400,enlarge=no"), options: options).run(source)
        let copied = try ImageJob(pipeline: try Pipeline(parsing: "invert | invert"), options: options).run(source)
        #expect(kept.full.size == Size(width: 160, height: 120))
        #expect(kept.full.bytes == copied.full.bytes, "the pixels are the decoded ones, not resampled")
        let shrunk = try ImageJob(pipeline: try Pipeline(parsing: "scale:80x80,enlarge=no"), options: options).run(source)
        #expect(shrunk.full.size == Size(width: 80, height: 60))
        let grown = try ImageJob(pipeline: try Pipeline(parsing: "scale:400x400"), options: options).run(source)
        #expect(grown.full.size == Size(width: 400, height: 300))
    }

    @Test("a smart crop is not folded into the decode: it needs the pixels; the scale before it still is")
    func smartCropIsNotFolded() throws {
        let p = try Pipeline(parsing: "scale:1024x1024,mode=fill | crop:square,gravity=smart")
        let plan = LoadPlan.make(for: p.steps, source: Size(width: 4000, height: 3000))
        #expect(plan.foldedSteps == 1 && plan.region == nil && plan.resize?.size == Size(width: 1365, height: 1024))
        #expect(plan.shrink == 1)
    }

    @Test("a pipeline that does not start with scale decodes everything at full size")
    func noPlan() throws {
        let p = try Pipeline(parsing: "invert | scale:100x100")
        let plan = LoadPlan.make(for: p.steps, source: Size(width: 4000, height: 3000))
        #expect(plan == LoadPlan())
    }

    @Test("a grayscale step first or right after the folded steps is read as luma",
          arguments: [
              ("grayscale | scale:100x100", 0 as Int?),
              ("scale:100x100 | grayscale", 1),
              ("scale:100x100,mode=fill | crop:square | grayscale | glitch", 2),
              ("scale:100x100 | invert | grayscale", nil),
              ("sepia | grayscale", nil),
          ])
    func lumaOnLoad(text: String, expected: Int?) throws {
        let p = try Pipeline(parsing: text)
        let plan = LoadPlan.make(for: p.steps, source: Size(width: 4000, height: 3000))
        #expect(plan.lumaStep == expected)
    }
}

@Suite("Running a job")
struct ImageJobRunTests {
    /// A 96x64 picture whose three channels vary differently, as a q90 JPEG.
    static func gradientJPEG() throws -> [UInt8] {
        var source = Image(width: 96, height: 64)
        for y in 0..<64 {
            for x in 0..<96 { source.setPixel(x: x, y: y, (UInt8(x * 2), UInt8(y * 3), UInt8((x + y) % 256))) }
        }
        return try JPEG.encode(source, options: EncodeOptions(quality: 90))
    }

    @Test("steps after the folded resize give the same bytes as the operations")
    func glitchInPlaceMatchesOperation() throws {
        let jpeg = try Self.gradientJPEG()
        let pipeline = try Pipeline(parsing: "glitch:seed=11,amount=0.9 | invert")
        let output = try ImageJob(pipeline: pipeline, options: JobOptions(thumbnail: nil)).run(jpeg)

        let decoded = try JPEG.decode(jpeg).image
        let expected = try decoded.glitched(seed: 11, amount: 0.9).inverted()
        #expect(output.full.bytes == (try JPEG.encode(expected, options: EncodeOptions(quality: 95))))
    }

    @Test("a gray result is stored as a one-component JPEG, thumbnail too; colour after gray is not")
    func grayResultsAreOneComponentFiles() throws {
        let jpeg = try Self.gradientJPEG()
        let options = JobOptions(thumbnail: Size(width: 16, height: 16))
        for (text, components) in [("grayscale", 1), ("scale:48x48,mode=fill | crop:square | grayscale", 1),
                                   ("grayscale | sepia", 3), ("invert | grayscale | blur:sigma=1", 1), ("invert", 3)] {
            let output = try ImageJob(pipeline: try Pipeline(parsing: text), options: options).run(jpeg)
            #expect(try JPEG.readHeader(output.full.bytes).components == components, "\(text)")
            let thumbnail = try #require(output.thumbnail)
            #expect(try JPEG.readHeader(thumbnail.bytes).components == components, "\(text)")
        }
        // The luma read on load is the picture grayscale() makes of the decoded RGB.
        let output = try ImageJob(pipeline: try Pipeline(parsing: "grayscale"), options: JobOptions(thumbnail: nil)).run(jpeg)
        let expected = try JPEG.decode(jpeg).image.grayscale()
        let got = try JPEG.decode(output.full.bytes).image
        var worst = 0
        for y in 0..<64 { for x in 0..<96 { worst = max(worst, abs(Int(got.pixel(x: x, y: y).r) - Int(expected.pixel(x: x, y: y).r))) } }
        #expect(worst <= 4)
    }
}
