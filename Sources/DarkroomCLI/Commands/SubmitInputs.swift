import DarkroomClient
import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import Dispatch
import Foundation
import Synchronization

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
        /// once); nil for the rest, which the checks read only the head of
        /// and which are read whole when sent.
        var bytes: [UInt8]?
        /// Where to read it when that is not `path`: a URL's download.
        var file: String?
    }

    /// The most bytes the checks keep for sending, over all inputs.
    static let keptBytes = 64 << 20

    /// How much of a file that is not kept the checks read: its header,
    /// which ends before the scan data, with room for large metadata
    /// (EXIF is at most 64 KiB; ICC profiles and XMP add some). A header
    /// longer than this is checked on the whole file.
    static let headBytes = 256 << 10

    /// Reads every input and checks it against the limits and the pipeline,
    /// on `threads` threads at once (the checks are open, read, close and
    /// a header parse a file: on a big directory they are most of what a
    /// submit does before its first job goes out). The results keep the
    /// files' order. A file is read whole while the bytes kept for sending
    /// stay within `keptBytes`; past that only its head is read, so that
    /// the checks of a few gigabytes of photos read megabytes, and each
    /// file is read whole once, when it is sent.
    static func check(_ files: [InputFiles.Input], job: ImageJob,
                      threads: Int = min(4, ProcessInfo.processInfo.activeProcessorCount)) -> [Input] {
        // Slots written by one thread each; the budget of kept bytes is
        // shared, so which files keep their bytes (and how many bytes that
        // is) may differ from run to run, never beyond `keptBytes`.
        let results = Mutex([Input?](repeating: nil, count: files.count))
        let next = Atomic<Int>(0)
        let kept = Atomic<Int>(0)
        let lanes = files.count < 64 ? 1 : max(1, threads)
        DispatchQueue.concurrentPerform(iterations: lanes) { _ in
            var mine: [(Int, Input)] = []
            while true {
                // Files in runs of 32, so that the threads seldom meet.
                let start = next.wrappingAdd(32, ordering: .relaxed).oldValue
                guard start < files.count else { break }
                for index in start..<min(files.count, start + 32) {
                    mine.append((index, checkOne(files[index], job: job, kept: kept)))
                }
            }
            results.withLock { slots in
                for (index, input) in mine { slots[index] = input }
            }
        }
        return results.withLock { slots in slots.map { $0! } }
    }

    /// One file's check; its bytes are kept while `kept` stays within
    /// `keptBytes`, and only its head is read when they cannot be.
    private static func checkOne(_ file: InputFiles.Input, job: ImageJob, kept: borrowing Atomic<Int>) -> Input {
        if let problem = file.problem { return Input(path: file.path, problem: problem) }
        // A URL is checked once it is downloaded (`WebSources`).
        if file.isURL { return Input(path: file.path) }
        // The room a whole read takes is claimed before the read, at the
        // size fstat gives; given back if the file is not kept after all.
        var claimed = 0
        let read: InputFiles.Read
        do {
            read = try InputFiles.read(file.path, limit: DecodeLimits.default.maxInputBytes, head: headBytes) { size in
                guard kept.wrappingAdd(size, ordering: .relaxed).newValue <= keptBytes else {
                    kept.wrappingSubtract(size, ordering: .relaxed)
                    return false
                }
                claimed = size
                return true
            }
        } catch {
            kept.wrappingSubtract(claimed, ordering: .relaxed)
            return Input(path: file.path, problem: error.message)
        }
        switch read {
        case .whole(let bytes):
            if let problem = check(bytes, job: job) {
                kept.wrappingSubtract(claimed, ordering: .relaxed)
                return Input(path: file.path, problem: problem)
            }
            // A file that changed size since fstat is kept at its real size,
            // still within the budget.
            if bytes.count != claimed, kept.wrappingAdd(bytes.count - claimed, ordering: .relaxed).newValue > keptBytes {
                kept.wrappingSubtract(bytes.count, ordering: .relaxed)
                return Input(path: file.path)
            }
            return Input(path: file.path, bytes: bytes)
        case .head(let head, let size):
            guard let problem = check(head, job: job) else { return Input(path: file.path) }
            // All of the file, and it failed: that is its answer.
            if head.count == size { return Input(path: file.path, problem: problem) }
            // The header may go on past the head (or the head fail for a
            // reason the whole file would not have): the whole file decides.
            switch readChecked(file.path, job: job) {
            case .problem(let problem): return Input(path: file.path, problem: problem)
            case .bytes: return Input(path: file.path)
            }
        }
    }

    /// The checks of URL downloads, as each finishes: a download is read
    /// once, by its check, and its bytes are kept for sending within what
    /// the local files left of `keptBytes`.
    struct DownloadChecks {
        let job: ImageJob
        private var room: Int
        private var kept: [String: [UInt8]] = [:]

        init(job: ImageJob, after inputs: [Input]) {
            self.job = job
            room = keptBytes - inputs.reduce(0) { $0 + ($1.bytes?.count ?? 0) }
        }

        /// Why the download at `path` cannot be submitted; nil when it can.
        mutating func check(_ path: String) -> String? {
            switch readChecked(path, job: job) {
            case .problem(let problem):
                return problem
            case .bytes(let bytes):
                if bytes.count <= room {
                    room -= bytes.count
                    kept[path] = bytes
                }
                return nil
            }
        }

        /// The bytes kept for the download at `path` (once), if any.
        mutating func takeBytes(of path: String) -> [UInt8]? {
            kept.removeValue(forKey: path)
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
    static func readChecked(_ path: String, job: ImageJob) -> Checked {
        do {
            let bytes = try InputFiles.read(path, limit: DecodeLimits.default.maxInputBytes)
            if let problem = check(bytes, job: job) { return .problem(problem) }
            return .bytes(bytes)
        } catch {
            return .problem(error.message)
        }
    }

    /// The job a worker will run for these terms, as far as the checks
    /// need it: the pipeline, and the outputs' formats and thumbnail size
    /// (an AVIF or WebP output has a size limit of its own).
    static func checkedJob(_ pipeline: Pipeline, options: DarkroomProtocol.JobOptions) -> ImageJob {
        ImageJob(pipeline: pipeline, options: JobOptions(
            thumbnail: Size(width: Int(options.thumbnailWidth), height: Int(options.thumbnailHeight)),
            format: ImageFormat(rawValue: options.format.description) ?? .jpeg,
            thumbnailFormat: ImageFormat(rawValue: options.thumbnailFormat.description) ?? .jpeg))
    }

    /// Checks a file's header against the limits, the pipeline and the
    /// outputs, as the worker will before it decodes.
    static func check(_ bytes: [UInt8], job: ImageJob) -> String? {
        do {
            let header = try Source.readHeader(bytes)
            try job.checkPlan(for: header)
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
        private let terms: JobTerms
        /// The input each submit key stands for.
        let inputOfKey: [String: Int]

        init(_ inputs: [Input], pipeline: String, options: DarkroomProtocol.JobOptions, priority: UInt8, terms: JobTerms = JobTerms()) {
            self.inputs = inputs
            self.pipeline = pipeline
            self.options = options
            self.priority = priority
            self.terms = terms
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
            return .job(terms.request(sourceName: path, image: image, pipeline: pipeline, options: options, priority: priority, submitKey: key))
        }
    }
}
