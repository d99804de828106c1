import DarkroomCore
import DarkroomImage
import DarkroomPipeline
import Foundation
import Synchronization

/// `darkroom process`: runs a pipeline on local files, no queue involved. The
/// same compound operation a worker runs, so it is also how to try a pipeline
/// before submitting it.
enum ProcessCommand {
    static let spec = CommandSpec(
        name: "process",
        abstract: "Run a pipeline on local images (JPEG, PNG, WebP, GIF, HEIC/AVIF, TIFF) and write the results.",
        discussion: """
        Writes NAME.jpg (the pipeline's result) and NAME.thumb.jpg (an aspect-fill
        thumbnail of it), or NAME.webp and NAME.thumb.webp with --format webp
        (NAME.png and NAME.thumb.png with --format png, NAME.avif and
        NAME.thumb.avif with --format avif), into the output directory for
        each input. NAME is the
        input's name without its extension, with -2, -3... added where another
        input's file would have the same name. A bad file is reported with the
        step and the reason and never stops the batch. Exits 0 when every input
        succeeded, 1 when any failed.

        PIPELINE is one line of steps separated by '|', for example:
          'scale:2048x2048,mode=fill | crop:square | glitch:seed=7'
        Operations:
        \(Pipeline.reference)
        """,
        arguments: [
            ArgumentSpec(name: "inputs", help: "JPEG, PNG, WebP, GIF, HEIF (HEIC, AVIF) or TIFF files, or directories whose *.jpg, *.jpeg, *.png, *.webp, *.gif, *.heic, *.heif, *.avif, *.tif and *.tiff files are processed.", variadic: true),
        ],
        options: ImageOptions.specs(pipelineRequired: true) + [
            .value("out", short: "o", "DIR", help: "Directory for the results (created if missing).", default: "darkroom-out"),
            .value("jobs", short: "j", "N", help: "Images processed at the same time.", default: "1"),
            InputFiles.recursiveOption,
            .flag("json", help: "Print one JSON object per input instead of a line of text."),
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let settings = try ImageOptions(args)
        guard let pipeline = settings.pipeline else { throw UsageError("missing expected option '--ops <PIPELINE>'") }
        let jobs = try args.int("jobs", default: 1, range: 1...256)
        let json = args.flag("json")
        let outDir = URL(fileURLWithPath: args.value("out") ?? "darkroom-out")
        try OutputFile.makeDirectory(outDir.path, what: "the output directory")
        for note in ImageOptions.unusedOptionNotes(args, format: settings.jobOptions.format,
                                                   thumbnailFormat: settings.jobOptions.thumbnail == nil ? nil : settings.jobOptions.thumbnailFormat) {
            Console.err(note)
        }

        var inputs = InputFiles.expand(args.positionals, recursive: args.flag("recursive"))
        let extensions = (full: settings.jobOptions.format.fileExtension, thumbnail: settings.jobOptions.thumbnailFormat.fileExtension)
        let thumbnails = settings.jobOptions.thumbnail != nil
        let names = InputFiles.outputNames(for: inputs.map(\.path), thumbnails: thumbnails, extensions: extensions)
        for (index, problem) in replacedInputs(inputs, names: names, outDir: outDir.path, extensions: extensions, thumbnails: thumbnails) {
            inputs[index].problem = problem
        }
        let batch = inputs
        let job = ImageJob(pipeline: pipeline, options: settings.jobOptions)
        let failures = Atomic<Int>(0)
        let next = Atomic<Int>(0)
        let printLock = Mutex(())
        let clock = ContinuousClock()
        let batchStart = clock.now

        let report: @Sendable (String, Bool) -> Void = { line, isError in
            printLock.withLock { _ in
                if isError && !json { Console.err(line) } else { Console.out(line) }
            }
        }

        DispatchQueue.concurrentPerform(iterations: min(jobs, max(1, inputs.count))) { _ in
            while true {
                let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
                guard index < batch.count else { return }
                let input = batch[index]
                let result = processOne(input, name: names[index], job: job, outDir: outDir)
                if !result.ok { failures.wrappingAdd(1, ordering: .relaxed) }
                report(json ? result.json.text : result.text, !result.ok)
            }
        }

        let failed = failures.load(ordering: .relaxed)
        if !json {
            let seconds = (clock.now - batchStart).fractionalSeconds
            Console.err("\(inputs.count - failed) processed, \(failed) failed, results in \(outDir.path)/ (\(String(format: "%.2f", seconds)) s)")
        }
        return failed == 0 ? 0 : 1
    }

    /// The inputs whose results would be written over an input of the
    /// batch (itself or another), with why: `--out` is where the inputs
    /// are, or a result's name is another input's. A result is written by a
    /// rename over whatever file has its name, so such an input is refused
    /// before anything is written, as sharp and vips refuse to write over
    /// their input. Files are told apart by device and inode, so `./a.jpg`,
    /// `a.jpg` and a link to it are one file.
    static func replacedInputs(_ inputs: [InputFiles.Input], names: [String], outDir: String,
                               extensions: (full: String, thumbnail: String), thumbnails: Bool) -> [(Int, String)] {
        var inputOf: [Posix.FileIdentity: String] = [:]
        for input in inputs where input.problem == nil && !input.isURL {
            if let info = try? Posix.info(input.path), info.isRegularFile {
                inputOf[info.identity] = inputOf[info.identity] ?? input.path
            }
        }
        guard !inputOf.isEmpty else { return [] }
        var replaced: [(Int, String)] = []
        for (index, input) in inputs.enumerated() where input.problem == nil && !input.isURL {
            var outputs = ["\(names[index]).\(extensions.full)"]
            if thumbnails { outputs.append("\(names[index]).thumb.\(extensions.thumbnail)") }
            for output in outputs.map({ (outDir as NSString).appendingPathComponent($0) }) {
                guard let info = try? Posix.info(output), let other = inputOf[info.identity] else { continue }
                let whose = other == input.path ? "this input itself" : "the input \(other)"
                replaced.append((index, "its result \(output) would be written over \(whose); choose another --out"))
                break
            }
        }
        return replaced
    }

    struct Result {
        var ok: Bool
        var text: String
        var json: JSONObject
    }

    static func processOne(_ input: InputFiles.Input, name: String, job: ImageJob, outDir: URL) -> Result {
        var json = JSONObject()
        json.set("input", input.path)
        let failure: (String, PipelineFailure?) -> Result = { reason, pipelineFailure in
            json.set("ok", false)
            var error = JSONObject()
            error.set("stage", pipelineFailure.map { stageName($0.stage) } ?? "input")
            error.set("step", pipelineFailure?.stage.index)
            error.set("step_text", pipelineFailure.flatMap { stepText($0.stage) })
            // The code a worker's FAIL carries for the same failure
            // (image.truncated), so scripts read one set of codes.
            error.set("code", pipelineFailure?.error.code.failureCode ?? "input")
            error.set("reason", pipelineFailure?.error.message ?? reason)
            json.set("error", object: error)
            return Result(ok: false, text: "\(input.path): \(reason)", json: json)
        }
        if let problem = input.problem {
            return failure(problem, nil)
        }
        let clock = ContinuousClock()
        let start = clock.now
        let bytes: [UInt8]
        do {
            bytes = try InputFiles.read(input.path, limit: job.options.limits.maxInputBytes)
        } catch {
            return failure(error.message, nil)
        }
        let output: JobOutput
        let stageTimes = Mutex<[(Stage, Duration)]>([])
        do {
            output = try job.run(bytes) { stage, duration in
                stageTimes.withLock { $0.append((stage, duration)) }
            }
        } catch {
            return failure(error.description, error)
        }
        let fullURL = outDir.appendingPathComponent("\(name).\(job.options.format.fileExtension)")
        let thumbURL = outDir.appendingPathComponent("\(name).thumb.\(job.options.thumbnailFormat.fileExtension)")
        do {
            try OutputFile.write(output.full.bytes, to: fullURL.path)
            if let thumbnail = output.thumbnail {
                try OutputFile.write(thumbnail.bytes, to: thumbURL.path)
            }
        } catch {
            return failure(error.message, nil)
        }
        let elapsed = clock.now - start
        let ms = elapsed.fractionalMilliseconds
        json.set("ok", true)
        json.set("output", fullURL.path)
        json.set("width", output.full.size.width)
        json.set("height", output.full.size.height)
        json.set("bytes", output.full.bytes.count)
        json.set("thumbnail", output.thumbnail == nil ? nil : thumbURL.path)
        json.set("thumbnail_width", output.thumbnail?.size.width)
        json.set("thumbnail_height", output.thumbnail?.size.height)
        json.set("thumbnail_bytes", output.thumbnail?.bytes.count)
        json.set("source_width", output.sourceSize.width)
        json.set("source_height", output.sourceSize.height)
        json.set("milliseconds", ms)
        var stages = JSONObject()
        for (stage, duration) in stageTimes.withLock({ $0 }) {
            stages.set(stage.description, duration.fractionalMilliseconds)
        }
        json.set("stage_milliseconds", object: stages)
        var text = "\(input.path) -> \(fullURL.path) \(output.full.size) \(formatBytes(output.full.bytes.count))"
        if let thumbnail = output.thumbnail {
            text += ", thumb \(thumbnail.size) \(formatBytes(thumbnail.bytes.count))"
        }
        text += String(format: ", %.0f ms", ms)
        return Result(ok: true, text: text, json: json)
    }

    static func stageName(_ stage: Stage) -> String {
        switch stage {
        case .decode: "decode"
        case .step: "step"
        case .encode: "encode"
        }
    }

    static func stepText(_ stage: Stage) -> String? {
        switch stage {
        case let .step(_, text): text
        case let .encode(output): output
        case .decode: nil
        }
    }
}

/// The image options shared by `process` and `submit`.
struct ImageOptions {
    var pipeline: Pipeline?
    var jobOptions: JobOptions

    /// `--thumb WxH`, each side 1 to `maxSide`; the message mentions `none`
    /// where the command accepts it.
    static func thumbnailSize(_ text: String, maxSide: Int, orNone: Bool) throws(UsageError) -> Size {
        if !orNone, text.lowercased() == "none" {
            throw UsageError("--thumb none: a queued job always makes a thumbnail (its record links the two); `darkroom process --thumb none` makes none")
        }
        guard let size = Size(parsing: text), (1...maxSide).contains(size.width), (1...maxSide).contains(size.height) else {
            throw UsageError("--thumb must be WxH with sides 1 to \(maxSide) (e.g. 256x256)\(orNone ? " or none" : ""), not \"\(text)\"")
        }
        return size
    }

    /// `--subsampling`, `--progressive` and `--thumb-gravity`, the same for
    /// `process` and `submit`.
    static let subsamplingSpec = OptionSpec.value("subsampling", "MODE",
        help: "Chroma subsampling: auto (4:4:4 at quality 90 and above, else 4:2:0), 444, 422 or 420.", default: "auto")
    static let progressiveSpec = OptionSpec.flag("progressive", help: "Write progressive JPEGs.")
    static let thumbGravitySpec = OptionSpec.value("thumb-gravity", "G",
        help: "Where the thumbnail's crop sits: center, north, south, east, west, northeast, northwest, southeast, southwest, or smart (the most detail).",
        default: "center")

    static let formatSpec = OptionSpec.value("format", "FORMAT",
        help: "File format of the outputs: jpeg, webp (lossy WebP at the same qualities; at most 16383 pixels a side), png (lossless; the qualities do not apply) or avif (lossy AV1 at the same qualities; about 30 times the time of a JPEG). webp, png and avif keep a source's transparency; jpeg lays it over white.", default: "jpeg")
    static let thumbFormatSpec = OptionSpec.value("thumb-format", "FORMAT",
        help: "File format of the thumbnail, jpeg, webp, png or avif, when it differs from --format.")

    /// `--format` and `--thumb-format`: the full-resolution output's format
    /// and the thumbnail's, which follows the first unless given.
    static func formats(_ args: ParsedArguments) throws(UsageError) -> (full: ImageFormat, thumbnail: ImageFormat) {
        func parse(_ option: String) throws(UsageError) -> ImageFormat? {
            guard let text = args.value(option) else { return nil }
            let name = text.lowercased()
            guard let format = ImageFormat(rawValue: name == "jpg" ? "jpeg" : name) else {
                throw UsageError("--\(option) must be jpeg, webp, png or avif, not \"\(text)\"")
            }
            return format
        }
        let full = try parse("format") ?? .jpeg
        return (full, try parse("thumb-format") ?? full)
    }

    /// `--thumb-gravity G`; center when absent.
    static func thumbnailGravity(_ args: ParsedArguments) throws(UsageError) -> Gravity {
        guard let text = args.value("thumb-gravity") else { return .center }
        guard let gravity = Gravity(rawValue: text.lowercased()) else {
            throw UsageError("--thumb-gravity must be one of \(Gravity.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(text)\"")
        }
        return gravity
    }

    /// `--subsampling MODE` (`4:2:0` is read as `420`); auto when absent.
    static func subsampling(_ args: ParsedArguments) throws(UsageError) -> ChromaSubsampling {
        guard let text = args.value("subsampling") else { return .auto }
        guard let mode = ChromaSubsampling(rawValue: text.lowercased().replacingOccurrences(of: ":", with: "")) else {
            throw UsageError("--subsampling must be auto, 444, 422 or 420, not \"\(text)\"")
        }
        return mode
    }

    /// A line for each output option given that nothing written will use:
    /// a quality for a PNG, JPEG-only options with no JPEG output, thumbnail
    /// options with no thumbnail. Said, not refused: the same options may
    /// serve several runs of a script.
    static func unusedOptionNotes(_ args: ParsedArguments, format: ImageFormat, thumbnailFormat: ImageFormat?) -> [String] {
        var notes: [String] = []
        func given(_ option: String) -> Bool { args.value(option) != nil || args.flag(option) }
        if given("quality"), format == .png { notes.append("--quality does not apply to a PNG result (PNG is lossless)") }
        if let thumbnailFormat {
            if given("thumb-quality"), thumbnailFormat == .png { notes.append("--thumb-quality does not apply to a PNG thumbnail (PNG is lossless)") }
        } else {
            for option in ["thumb-format", "thumb-quality", "thumb-gravity"] where given(option) {
                notes.append("--\(option) has no thumbnail to apply to (--thumb none)")
            }
        }
        if format != .jpeg, thumbnailFormat != .jpeg {
            for option in ["progressive", "subsampling"] where given(option) {
                notes.append("--\(option) applies to JPEG outputs only, and none is written")
            }
        }
        return notes.map { "note: " + $0 }
    }

    static func specs(pipelineRequired: Bool) -> [OptionSpec] {
        [
            .value("ops", "PIPELINE", help: "(required) The steps to run, e.g. 'scale:1024x1024,mode=fill | crop:square'."),
            .value("thumb", "WxH|none", help: "Thumbnail size (aspect-fill, centre crop), or none.", default: "256x256"),
            .value("quality", "N", help: "Quality of the full-resolution output, 1-100.", default: "95"),
            .value("thumb-quality", "N", help: "Quality of the thumbnail, 1-100.", default: "70"),
            thumbGravitySpec,
            formatSpec,
            thumbFormatSpec,
            subsamplingSpec,
            progressiveSpec,
            .value("max-pixels", "N", help: "Refuse inputs with more pixels than this.", default: String(DecodeLimits.default.maxPixels)),
            .value("max-side", "N", help: "Refuse inputs wider or taller than this.", default: String(DecodeLimits.default.maxSide)),
            .value("max-bytes", "N", help: "Refuse input files larger than this many bytes.", default: String(DecodeLimits.default.maxInputBytes)),
        ]
    }

    init(_ args: ParsedArguments) throws {
        if let text = args.value("ops") {
            do {
                pipeline = try Pipeline(parsing: text)
            } catch {
                throw UsageError(error.description)
            }
        }
        var options = JobOptions()
        if let thumb = args.value("thumb") {
            if thumb.lowercased() == "none" {
                options.thumbnail = nil
            } else {
                options.thumbnail = try ImageOptions.thumbnailSize(thumb, maxSide: 16384, orNone: true)
            }
        }
        options.quality = try args.int("quality", default: 95, range: 1...100)
        options.thumbnailQuality = try args.int("thumb-quality", default: 70, range: 1...100)
        options.subsampling = try ImageOptions.subsampling(args)
        options.thumbnailGravity = try ImageOptions.thumbnailGravity(args)
        options.progressive = args.flag("progressive")
        (options.format, options.thumbnailFormat) = try ImageOptions.formats(args)
        options.limits.maxPixels = try args.int("max-pixels", default: DecodeLimits.default.maxPixels, range: 1...Int(Int32.max))
        options.limits.maxSide = try args.int("max-side", default: DecodeLimits.default.maxSide, range: 1...65500)
        options.limits.maxInputBytes = try args.int("max-bytes", default: DecodeLimits.default.maxInputBytes, range: 1...Int(Int32.max))
        jobOptions = options
    }
}
