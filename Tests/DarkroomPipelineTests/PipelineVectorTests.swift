import DarkroomImage
import Foundation
import Testing

@testable import DarkroomPipeline

/// The vectors in protocol/vectors/pipelines.json are written by an
/// independent implementation of protocol/pipeline.md (pipelines.py).
/// Checking each against the parser and the planner checks this module
/// against the text of the specification.
struct PipelineVectorFile: Decodable {
    struct Valid: Decodable, CustomTestStringConvertible {
        var name: String
        var text: String
        var canonical: String
        var input: String
        var sizes: [String]
        var output: String
        var thumbnail: String
        var thumbnailRegion: String
        var testDescription: String { name }
    }

    struct Failing: Decodable, CustomTestStringConvertible {
        var name: String
        var text: String
        var input: String
        var stepIndex: Int
        var step: String
        var code: String
        var reason: String
        var testDescription: String { name }
    }

    struct Invalid: Decodable, CustomTestStringConvertible {
        var name: String
        var text: String
        var column: Int
        var reason: String
        var testDescription: String { name }
    }

    struct Limits: Decodable {
        var maxPixels: Int
        var maxSide: Int
        var maxCanonicalBytes: Int
    }

    var limits: Limits
    var valid: [Valid]
    var failing: [Failing]
    var invalid: [Invalid]

    static let url = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/vectors/pipelines.json")

    static let loaded: PipelineVectorFile = {
        do {
            return try JSONDecoder().decode(PipelineVectorFile.self, from: Data(contentsOf: url))
        } catch {
            Issue.record("cannot read \(url.path): \(error)")
            return PipelineVectorFile(limits: Limits(maxPixels: 0, maxSide: 0, maxCanonicalBytes: 0), valid: [], failing: [], invalid: [])
        }
    }()

    var decodeLimits: DecodeLimits { DecodeLimits(maxPixels: limits.maxPixels, maxSide: limits.maxSide) }
}

private func size(_ text: String) -> Size {
    Size(parsing: text) ?? Size(width: 0, height: 0)
}

@Suite("Pipeline vectors")
struct PipelineVectorTests {
    static let file = PipelineVectorFile.loaded

    @Test func fileCoversEveryOperation() {
        let file = Self.file
        #expect(file.limits.maxPixels == DecodeLimits.default.maxPixels && file.limits.maxSide == DecodeLimits.default.maxSide)
        #expect(file.limits.maxCanonicalBytes == PipelineParser.maxCanonicalBytes)
        let named = Set(file.valid.flatMap { v in v.canonical.split(separator: "|").map { $0.split(separator: ":")[0].trimmingCharacters(in: .whitespaces) } })
        let missing = Set(OperationKind.allCases.map(\.rawValue)).subtracting(named)
        #expect(missing.isEmpty, "operations without a valid vector: \(missing.sorted())")
        #expect(file.invalid.count >= 20)
    }

    @Test(arguments: file.valid)
    func parsesToCanonicalAndPlansSizes(_ vector: PipelineVectorFile.Valid) throws {
        let pipeline = try Pipeline(parsing: vector.text)
        #expect(pipeline.canonical == vector.canonical)
        #expect(try Pipeline(parsing: vector.canonical) == pipeline, "the canonical text parses back to the same pipeline")
        let sizes = try pipeline.plannedSizes(from: size(vector.input), limits: Self.file.decodeLimits)
        #expect(sizes.map(\.description) == vector.sizes)
        #expect(sizes.last?.description == vector.output)
        let full = size(vector.output)
        let region = Image.fillRegion(of: full, for: size(vector.thumbnail))
        #expect(Gravity.center.place(region, in: full).description == vector.thumbnailRegion)
    }

    /// The real job on a small picture of the vector's input size: the
    /// outputs have the planned size and the thumbnail's size.
    @Test(arguments: file.valid.filter { size($0.input).pixelCount <= 1_000_000 })
    func jobOutputsHaveThePlannedSizes(_ vector: PipelineVectorFile.Valid) throws {
        let input = size(vector.input)
        let jpeg = try JPEG.encode(SamplePhoto.render(input, seed: 3), options: EncodeOptions(quality: 80))
        let thumbnail = size(vector.thumbnail)
        let job = ImageJob(pipeline: try Pipeline(parsing: vector.text), options: JobOptions(thumbnail: thumbnail))
        let output = try job.run(jpeg)
        #expect(output.full.size.description == vector.output)
        #expect(try JPEG.readHeader(output.full.bytes).storedSize.description == vector.output)
        #expect(try output.thumbnail.map { try JPEG.readHeader($0.bytes).storedSize } == thumbnail)
    }

    @Test(arguments: file.failing)
    func failsAtItsStep(_ vector: PipelineVectorFile.Failing) throws {
        let pipeline = try Pipeline(parsing: vector.text)
        do {
            let sizes = try pipeline.plannedSizes(from: size(vector.input), limits: Self.file.decodeLimits)
            Issue.record("\(vector.name): planned \(sizes), but must fail")
        } catch {
            #expect(error.stage == .step(index: vector.stepIndex, text: vector.step))
            #expect("image.\(error.error.code.name)" == vector.code)
            #expect(error.error.message == vector.reason)
        }
    }

    @Test(arguments: file.invalid)
    func rejectsInvalid(_ vector: PipelineVectorFile.Invalid) {
        do {
            let pipeline = try Pipeline(parsing: vector.text)
            Issue.record("\(vector.name): parsed as \(pipeline.canonical), but must be invalid")
        } catch {
            #expect(error.column + 1 == vector.column, "\(vector.name): \(error.summary)")
            #expect(error.message == vector.reason)
        }
    }
}
