import DarkroomClient
import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol

/// The input side of `darkroom submit`: the files to submit, checked before
/// anything is sent, and handed to the submission engine as jobs. What to
/// submit is decided here; how it travels (window, resends, events) is the
/// engine's (`SubmitEngine`).
enum SubmitInputs {
    /// One input file after the local checks.
    struct Input {
        var path: String
        /// Why it cannot be submitted; nil when it passed the checks.
        var problem: String?
        /// The file's bytes as the checks read them, kept for sending while
        /// the kept bytes stay within `keptBytes` (so a small file is read
        /// once); nil for the rest, which are read again when sent.
        var bytes: [UInt8]?
        /// Where to read it when that is not `path`: a URL's download.
        var file: String?
    }

    /// The most bytes the checks keep for sending, over all inputs.
    static let keptBytes = 64 << 20

    /// Reads every input and checks it against the limits and the pipeline.
    static func check(_ files: [InputFiles.Input], pipeline: Pipeline) -> [Input] {
        var kept = 0
        return files.map { file in
            if let problem = file.problem { return Input(path: file.path, problem: problem) }
            // A URL is checked once it is downloaded (`WebSources`).
            if file.isURL { return Input(path: file.path) }
            let bytes: [UInt8]
            switch readChecked(file.path, pipeline: pipeline) {
            case .problem(let problem): return Input(path: file.path, problem: problem)
            case .bytes(let read): bytes = read
            }
            guard kept + bytes.count <= keptBytes else { return Input(path: file.path) }
            kept += bytes.count
            return Input(path: file.path, bytes: bytes)
        }
    }

    /// A file read and checked: its bytes, or why it cannot be submitted.
    enum Checked {
        case bytes([UInt8])
        case problem(String)

        var problem: String? {
            if case .problem(let problem) = self { return problem }
            return nil
        }
    }

    /// Reads a file once and checks it as every input is checked (a
    /// listed file, a hot folder's file, a URL's download).
    static func readChecked(_ path: String, pipeline: Pipeline) -> Checked {
        do {
            let bytes = try InputFiles.read(path, limit: DecodeLimits.default.maxInputBytes)
            if let problem = check(bytes, pipeline: pipeline) { return .problem(problem) }
            return .bytes(bytes)
        } catch {
            return .problem(error.message)
        }
    }

    /// Checks a file's header against the limits and the pipeline.
    static func check(_ bytes: [UInt8], pipeline: Pipeline) -> String? {
        do {
            let header = try JPEG.readHeader(bytes)
            _ = try pipeline.plannedSizes(from: header.uprightSize, limits: .default)
        } catch let error as ImageError {
            return error.message
        } catch let error as PipelineFailure {
            return error.description
        } catch {
            return "\(error)"
        }
        return nil
    }

    /// The inputs that passed the checks, in order, as jobs: each with a
    /// submit key of its own (so an answer finds its input even when a
    /// path is given twice), its kept bytes handed over as it is taken.
    struct Jobs: SubmitSource {
        private var inputs: [Input]
        private var valid: [(index: Int, key: String)]
        private var position = 0
        private let pipeline: String
        private let options: DarkroomProtocol.JobOptions
        private let priority: UInt8
        /// The input each submit key stands for.
        let inputOfKey: [String: Int]

        init(_ inputs: [Input], pipeline: String, options: DarkroomProtocol.JobOptions, priority: UInt8) {
            self.inputs = inputs
            self.pipeline = pipeline
            self.options = options
            self.priority = priority
            valid = inputs.indices.filter { inputs[$0].problem == nil }.map { ($0, ULIDGenerator.shared.next().description) }
            var inputOfKey: [String: Int] = [:]
            inputOfKey.reserveCapacity(valid.count)
            for (index, key) in valid { inputOfKey[key] = index }
            self.inputOfKey = inputOfKey
        }

        mutating func next() -> SubmitSourceItem {
            guard position < valid.count else { return .end }
            let (index, key) = valid[position]
            position += 1
            let path = inputs[index].path
            let image: ImageSource
            if let bytes = inputs[index].bytes {
                image = .bytes(bytes)
                inputs[index].bytes = nil  // the engine holds them now, until the job is answered
            } else {
                image = .file(inputs[index].file ?? path)
            }
            return .job(SubmitRequest(sourceName: path, image: image, pipeline: pipeline, options: options, priority: priority,
                                      submitKey: key))
        }
    }
}
