import DarkroomCore
import DarkroomFetch
import DarkroomImage
import Foundation

/// The http:// and https:// inputs of `submit`: downloaded into a private
/// temporary directory, a few at a time (DarkroomFetch), then checked as
/// local files are. A URL that fails is reported on its own and the others
/// go on; the jobs keep the URL as their source name.
enum WebSources {
    static let defaultTimeout = 30
    static let defaultParallel = 4
    /// Redirects followed for one URL.
    static let maxRedirects = 5
    /// The longest wait for a connection, within --download-timeout.
    static let connectTimeout = Duration.seconds(10)

    static let options: [OptionSpec] = [
        .value("from-list", "FILE", help: "Also submit the paths and URLs in FILE, one a line ('-' for stdin; blank lines and # comments are skipped)."),
        .value("download-timeout", "SECONDS", help: "How long one URL may take to download, redirects included.", default: String(defaultTimeout)),
        .value("downloads", "N", help: "URLs downloaded at once.", default: String(defaultParallel)),
    ]

    /// The limits for `args`: the byte limit is the one files have.
    static func limits(_ args: ParsedArguments) throws(UsageError) -> FetchLimits {
        FetchLimits(
            maxBytes: DecodeLimits.default.maxInputBytes,
            connectTimeout: connectTimeout,
            timeout: .seconds(try args.int("download-timeout", default: defaultTimeout, range: 1...86_400)),
            maxRedirects: maxRedirects,
            parallel: try args.int("downloads", default: defaultParallel, range: 1...64),
            userAgent: "darkroom/\(DarkroomCLI.version)"
        )
    }

    /// The downloaded files, by input index, in a directory of their own.
    /// `remove()` deletes them once their jobs are submitted.
    final class Files {
        let directory: String?
        private(set) var byInput: [Int: String] = [:]

        init(directory: String?) { self.directory = directory }

        func file(for input: Int) -> String? { byInput[input] }

        fileprivate func keep(_ path: String, for input: Int) { byInput[input] = path }

        func remove() {
            guard let directory else { return }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Downloads every URL input and checks each download with `check`
    /// (nil when it may be submitted, else why not). `ended` hears each
    /// URL once, as it ends, with its problem or nil; `progress` hears the
    /// counts so far (done, failed, of). Calls come on this thread.
    static func download(
        _ inputs: [InputFiles.Input],
        limits: FetchLimits,
        check: (String) -> String?,
        progress: (_ done: Int, _ failed: Int, _ of: Int) -> Void,
        ended: (_ input: Int, _ problem: String?) -> Void
    ) throws(RuntimeError) -> Files {
        let all = inputs.indices.filter { inputs[$0].isURL }
        guard !all.isEmpty else { return Files(directory: nil) }
        var done = 0
        var failed = 0
        progress(0, 0, all.count)
        // A URL already known to fail (another scheme, too long) fails at once.
        for index in all where inputs[index].problem != nil {
            failed += 1
            ended(index, inputs[index].problem)
            progress(done, failed, all.count)
        }
        let urls = all.filter { inputs[$0].problem == nil }
        guard !urls.isEmpty else { return Files(directory: nil) }
        let directory = try makeDirectory()
        // Ctrl-C (or SIGTERM) during the downloads or the submit that
        // follows would leave them behind.
        StopSignals.remove(directory)
        let files = Files(directory: directory)
        let requests = urls.map { index in
            FetchRequest(url: inputs[index].path, destination: (directory as NSString).appendingPathComponent("\(index).jpg"))
        }
        Fetcher.download(requests, limits: limits) { n, result in
            let index = urls[n]
            var problem: String?
            switch result {
            case .success:
                // The same checks as a local file: a JPEG, within the limits,
                // that the pipeline can take.
                problem = check(requests[n].destination)
                if problem == nil {
                    files.keep(requests[n].destination, for: index)
                } else {
                    unlink(requests[n].destination)
                }
            case .failure(let failure):
                problem = failure.message
            }
            if problem == nil { done += 1 } else { failed += 1 }
            ended(index, problem)
            progress(done, failed, all.count)
        }
        return files
    }

    /// A new directory only this user can read, under the temporary directory.
    private static func makeDirectory() throws(RuntimeError) -> String {
        let base = FileManager.default.temporaryDirectory.path
        var template = Array((base as NSString).appendingPathComponent("darkroom-downloads-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        guard made else {
            throw RuntimeError("cannot make a directory for the downloads under \(base): \(String(cString: strerror(errno)))")
        }
        // mkdtemp wrote the directory's name over the Xs.
        return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
