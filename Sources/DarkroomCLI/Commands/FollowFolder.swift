import DarkroomClient
import DarkroomCore
import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// `darkroom submit --follow DIR`: a hot folder. Every JPEG that appears in
/// DIR, complete (closed after writing, or moved in), is submitted once
/// with the command's options, and each job's end is printed as it comes.
///
/// Once means once across restarts too: a file's submit key is made from
/// its path, size and modification time, which the broker deduplicates,
/// and a state file in DIR (`.darkroom-follow`) lists the keys already
/// submitted, so a restart submits nothing twice and does not even ask.
/// A batch of files goes out many SUBMITs at once, as `submit`'s inputs
/// do; files the broker leaves unanswered (a burst waits at most
/// `burstDeadline`) or refuses for now are tried again, at growing
/// intervals, until it answers; a refused key ends it. SIGINT or SIGTERM
/// stops it once the burst under way has its answers or gives up; files
/// not sent yet are submitted at the next start.
///
/// Everything runs on the calling thread: the folder watch, the producer,
/// the event follower and the story client each own their descriptor or
/// socket, and the loop takes turns among them.
enum FollowFolder {
    static let stateName = ".darkroom-follow"

    struct Settings {
        var directory: String
        var pipeline: Pipeline
        var options: DarkroomProtocol.JobOptions
        var priority: UInt8
        /// When each file's job may run, its deadline and its attempts
        /// (`--in` and `--expires-in` count from its submit).
        var terms: JobTerms
        var json: Bool
        var timeout: Duration
        var deadline: Duration
        var broker: String
        var events: String
        var curve: CurveClientKeys?
        /// The most SUBMITs in flight at once.
        var window: Int
        /// How long a file must go unwritten before it is submitted (zero:
        /// at its first close).
        var settle: Duration = FollowFolder.defaultSettle
    }

    /// A file written less than this long ago waits: a writer that closes
    /// the file between chunks (some copy tools, network shares) would
    /// otherwise have each part submitted as an image.
    static let defaultSettle = Duration.seconds(1)

    static func run(_ settings: Settings) throws -> Int32 {
        let directory = URL(fileURLWithPath: settings.directory).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw RuntimeError("--follow \(settings.directory): no such directory")
        }
        // Held from now on, and taken between turns: a stop never cuts a
        // submit or a state line in half.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGINT)
        sigaddset(&stopSignals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

        var state = try SubmittedFiles(path: directory + "/" + stateName)
        // Watch before listing, so a file that lands in between is seen.
        let watch: FolderWatch
        do { watch = try FolderWatch(directory) } catch { throw RuntimeError("cannot watch \(directory): \(error.reason)") }
        let context = try Context()
        let producer: Producer
        let follower: EventFollower
        let admin: Admin
        do {
            // A burst waits for answers at most `burstDeadline`: its files
            // are tried again later anyway, and a stop waits for the burst.
            producer = try Producer(endpoint: settings.broker, context: context, timeout: settings.timeout,
                                    deadline: min(settings.deadline, burstDeadline), curve: settings.curve)
            follower = try EventFollower(frontend: settings.broker, events: settings.events, context: context,
                                         timeout: settings.timeout, curve: settings.curve)
            admin = try Admin(endpoint: settings.broker, context: context, timeout: settings.timeout, curve: settings.curve)
        } catch {
            throw error.runtime
        }
        Console.err("following \(directory): every JPEG, PNG, WebP, GIF, HEIF or TIFF written or moved into it is submitted once (Ctrl-C stops)")

        var pending: [ULID: String] = [:]      // job → path, until its end is printed
        var cursor: UInt64?                    // the next event seq to read, once a job is pending
        var reported = Set<String>()           // keys of files already reported bad this run
        let checkedJob = SubmitInputs.checkedJob(settings.pipeline, options: settings.options)
        var failures = 0
        var candidates = listImages(directory)
        var stopping = false
        // Files whose SUBMIT went unanswered, and those their burst did not
        // reach: tried again once `retryAt` comes (the broker keeps a file
        // sent twice to one job, by its submit key).
        var retry: [String] = []
        var retrying = Set<String>()
        var retryAt: ContinuousClock.Instant?
        var retryPause = Duration.seconds(1)
        // Files written too lately (`settle`): looked at again at `settleAt`.
        var settling = Set<String>()
        var settleAt: ContinuousClock.Instant?
        // When each settling file was first seen as it is (size, mtime):
        // a file whose mtime is ahead of this clock (another host's) is
        // still settled once it stays the same for `settle`.
        var seenAs: [String: (identity: String, since: ContinuousClock.Instant)] = [:]
        var burstOutcome = BurstOutcome()
        // Jobs of this burst the broker had accepted before, whose end the
        // follower may have passed.
        var knownBefore: [(job: ULID, path: String, seq: UInt64)] = []

        /// Prints the end of each job accepted before that has ended, and
        /// follows the others.
        func settleKnownBefore() {
            for (job, path, seq) in knownBefore {
                if let story = try? admin.jobStory(job), ["stored", "dead", "cancelled", "discarded"].contains(story.state),
                   let last = story.events.last {
                    printEnd(Event(seq: last.seq, time: last.time, kind: EventKind(name: last.kind) ?? .stored, jobID: job,
                                   attempt: last.attempt, sourceName: path, workerID: last.worker ?? "",
                                   recordID: last.recordID, failure: last.failure), path: path)
                } else {
                    pending[job] = path
                    cursor = min(cursor ?? seq, seq)
                }
            }
            knownBefore.removeAll()
        }

        func tryAgainLater(_ name: String) {
            if retrying.insert(name).inserted { retry.append(name) }
        }

        func printEnd(_ event: Event, path: String) {
            switch event.kind {
            case .stored:
                if settings.json { Console.out(SubmitCommand.resultJSON(input: path, status: "stored", event: event)) } else {
                    Console.out("stored \(event.jobID) \(path) record \(event.recordID?.description ?? "?")")
                }
            case .dead:
                failures += 1
                if settings.json { Console.out(SubmitCommand.resultJSON(input: path, status: "dead", event: event)) } else {
                    Console.err("dead   \(event.jobID) \(path): \(event.failure.map(Format.failureText) ?? "no reason given")")
                }
            case .cancelled:
                if settings.json { Console.out(SubmitCommand.resultJSON(input: path, status: "cancelled", event: event)) } else {
                    Console.err("cancelled \(event.jobID) \(path)")
                }
            default:
                return
            }
            pending[event.jobID] = nil
        }

        /// A candidate read and checked, as its job; nil when it was
        /// submitted before, is still being written, or failed its check
        /// (reported here).
        func prepare(_ name: String) -> SubmitRequest? {
            let path = directory + "/" + name
            guard let info = regularFile(path) else { return nil }
            let key = fileKey(path, info)
            guard !state.contains(key), !reported.contains(key) else { return nil }
            // Written too lately: looked at again once it may have settled
            // (from the stat in hand, before the look at who holds it open).
            if let left = settleLeft(info, key: key, name: name) {
                settling.insert(name)
                let due = ContinuousClock.now + left
                settleAt = min(settleAt ?? due, due)
                return nil
            }
            seenAs[name] = nil
            // Open for writing again since the close that named it: its
            // next close names it again.
            if FolderWatch.isOpenForWriting(path) == true { return nil }
            // Read once: the bytes checked are the bytes sent.
            let bytes: [UInt8]
            switch SubmitInputs.readChecked(path, job: checkedJob) {
            case .bytes(let read):
                bytes = read
            case .problem(let problem):
                reported.insert(key)
                failures += 1
                SubmitCommand.report(json: settings.json, path: path, problem: problem)
                return nil
            }
            return settings.terms.request(sourceName: path, image: .bytes(bytes), pipeline: settings.pipeline.canonical,
                                          options: settings.options, priority: settings.priority, submitKey: key)
        }

        /// How much longer the file must go unwritten, or nil when it has
        /// been left alone for `settle` (by its mtime, or as seen here).
        func settleLeft(_ info: stat, key: String, name: String) -> Duration? {
            guard settings.settle > .zero else { return nil }
            let now = ContinuousClock.now
            let written = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
            let age = Date().timeIntervalSince1970 - written
            let settle = settings.settle.fractionalSeconds
            if age >= settle { return nil }
            // The submit key names the file's size and mtime: a new key, a new write.
            if seenAs[name]?.identity != key { seenAs[name] = (key, now) }
            let unchanged = (now - seenAs[name]!.since).fractionalSeconds
            if unchanged >= settle { return nil }
            return .milliseconds(max(10, Int((settle - max(age, unchanged)) * 1000)))
        }

        /// What the broker answered to a candidate's SUBMIT.
        func answered(_ request: SubmitRequest, _ result: SubmitResult) {
            let path = request.sourceName
            let name = String(path.dropFirst(directory.count + 1))
            guard let key = request.submitKey else { return }
            switch result {
            case let .accepted(job, seq):
                burstOutcome.accepted += 1
                do { try state.add(key, job: job) } catch {
                    Console.err("warning: cannot record \(path) in \(state.path): \(error); a restart asks the broker again, which still submits it once")
                }
                if settings.json {
                    var o = JSONObject()
                    o.set("input", path)
                    o.set("job", job.description)
                    o.set("status", "accepted")
                    Console.out(o.text)
                } else {
                    Console.out("\(job) \(path)")
                }
                if let next = cursor, seq < next {
                    // Accepted before (the broker knew its key): its end
                    // may be behind the follower already. Asked after the
                    // burst, not while its other answers wait.
                    knownBefore.append((job, path, seq))
                    return
                }
                pending[job] = path
                cursor = min(cursor ?? seq, seq)
            case let .rejected(code, reason) where code.isRetryable:
                // Refused for now (a full queue, a broker shutting down).
                burstOutcome.silence = ClientError(.server(code), "refused by the broker (\(code)): \(reason)")
                tryAgainLater(name)
            case let .rejected(code, reason):
                reported.insert(key)
                failures += 1
                SubmitCommand.report(json: settings.json, path: path, problem: "refused by the broker (\(code)): \(reason)")
            case .failed(let error):
                reported.insert(key)
                failures += 1
                SubmitCommand.report(json: settings.json, path: path, problem: error.message)
            case let .unanswered(_, error) where error.isRetryable:
                burstOutcome.silence = error
                tryAgainLater(name)
            case let .unanswered(_, error):
                burstOutcome.hopeless = error
                burstOutcome.hopelessCount += 1
                reported.insert(key)
                failures += 1
            }
        }

        while true {
            if let due = settleAt, ContinuousClock.now >= due {
                candidates += settling.sorted().filter { !candidates.contains($0) }
                settling = []
                settleAt = nil
            }
            if let due = retryAt, ContinuousClock.now >= due {
                var seen = Set<String>()
                candidates = (retry + candidates).filter { seen.insert($0).inserted }
                retry = []
                retrying = []
                retryAt = nil
            }
            // The files in hand go out as `submit`'s do, many in flight at
            // once: a burst of files dropped in is not a round trip each.
            if !candidates.isEmpty {
                burstOutcome = BurstOutcome()
                var burst = Burst(names: candidates, prepare: prepare) {
                    if !stopping, stopRequested(stopSignals) { stopping = true }
                    return stopping || burstOutcome.cutShort
                }
                candidates = []
                do {
                    _ = try producer.submit(from: &burst, window: SubmitWindow(maximum: settings.window), onReply: answered)
                } catch {
                    if error.isRetryable { burstOutcome.silence = burstOutcome.silence ?? error } else { burstOutcome.hopeless = error }
                }
                settleKnownBefore()
                if let hopeless = burstOutcome.hopeless {
                    // Retrying the same way cannot help.
                    if hopeless.kind == .refused { throw hopeless.runtime }
                    Console.err("\(burstOutcome.hopelessCount) file(s) not submitted: \(hopeless.message); they are tried again when they change or at the next start")
                } else if let silence = burstOutcome.silence {
                    for name in burst.remaining { tryAgainLater(name) }
                    if !stopping {
                        Console.err("\(retry.count) file(s) not accepted yet (\(silence.message)); trying again in \(retryPause.components.seconds) s")
                    }
                    retryAt = .now + retryPause
                    retryPause = min(retryPause * 2, .seconds(60))
                }
                if burstOutcome.accepted > 0 {
                    // The broker answers again: what waits goes now.
                    retryPause = .seconds(1)
                    if retryAt != nil { retryAt = .now }
                }
            }
            if stopping || stopRequested(stopSignals) { break }
            if let from = cursor, !pending.isEmpty {
                do {
                    _ = try follower.follow(from: .seq(from), for: .milliseconds(50), retry: .standard) { event in
                        if let path = pending[event.jobID] { printEnd(event, path: path) }
                        return .continue
                    }
                    cursor = follower.nextSeq
                } catch {
                    Console.err("following events: \(error.message)")
                }
                if pending.isEmpty { cursor = nil }
            }
            do {
                var wait = pending.isEmpty ? 500 : 50
                if let due = settleAt { wait = max(1, min(wait, Int(((due - ContinuousClock.now).fractionalSeconds * 1000).rounded(.up)))) }
                switch try watch.wait(milliseconds: Int32(wait)) {
                case .files(let names): candidates = names.filter(InputFiles.isImageName)
                case .rescan: candidates = listImages(directory)
                }
            } catch {
                throw RuntimeError("watching \(directory) failed: \(error.reason)")
            }
            if stopRequested(stopSignals) { stopping = true }
        }
        Console.err("stopped following \(directory); \(pending.count) job(s) still running are not followed (see `darkroom job ID`)")
        if !retry.isEmpty { Console.err("\(retry.count) file(s) not accepted yet are submitted at the next start") }
        if failures > 0 { Console.err("\(failures) file(s) were not stored (see above)") }
        return 0
    }

    /// How one burst went, as its answers came.
    struct BurstOutcome {
        /// Why a SUBMIT went unanswered or was refused for now, if one was:
        /// its files are tried again later.
        var silence: ClientError?
        /// An answer no retry can change (a refused key, a broken answer):
        /// the files it came for are reported, not tried again.
        var hopeless: ClientError?
        var hopelessCount = 0
        var accepted = 0

        /// Whether the burst reads no more files.
        var cutShort: Bool { silence != nil || hopeless != nil }
    }

    /// The candidates of one turn as jobs, each read and checked only when
    /// the window has room for it (a burst of large files is held a
    /// window's bytes at a time), until a stop is asked for.
    struct Burst: SubmitSource {
        private let names: [String]
        private var position = 0
        private let prepare: (String) -> SubmitRequest?
        private let stop: () -> Bool

        init(names: [String], prepare: @escaping (String) -> SubmitRequest?, stop: @escaping () -> Bool) {
            self.names = names
            self.prepare = prepare
            self.stop = stop
        }

        /// The names not reached (the burst was stopped).
        var remaining: ArraySlice<String> { names[position...] }

        mutating func next() -> SubmitSourceItem {
            while !stop(), position < names.count {
                position += 1
                if let request = prepare(names[position - 1]) { return .job(request) }
            }
            return .end
        }
    }

    /// The longest a burst waits for answers (less with a shorter
    /// --deadline) before its files wait for a later try.
    static let burstDeadline = Duration.seconds(10)

    /// Takes a held SIGINT or SIGTERM, if one came.
    static func stopRequested(_ signals: sigset_t) -> Bool {
        var set = signals
        var zero = timespec(tv_sec: 0, tv_nsec: 0)
        return sigtimedwait(&set, nil, &zero) > 0
    }

    static func listImages(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter(InputFiles.isImageName).sorted()
    }

    /// What stat says of `path`, or nil when it is not a regular file.
    static func regularFile(_ path: String) -> stat? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return info
    }

    /// The submit key of a file as `info` shows it now: its path, size and
    /// modification time, hashed (a key is at most 64 printable bytes). A
    /// file rewritten later is a new file; the same file seen again is not.
    static func fileKey(_ path: String, _ info: stat) -> String {
        let identity = "\(path)\n\(info.st_size)\n\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
        return "file-" + SHA256.hex(SHA256.hash(Array(identity.utf8))).prefix(40)
    }
}

/// The state file of a hot folder: one line per file submitted, its key
/// and its job id. Appended as each file is accepted.
struct SubmittedFiles {
    let path: String
    private var keys = Set<String>()

    init(path: String) throws {
        self.path = path
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            for line in text.split(separator: "\n") {
                if let key = line.split(separator: " ").first { keys.insert(String(key)) }
            }
        }
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw RuntimeError("cannot create the state file \(path)")
            }
        }
    }

    func contains(_ key: String) -> Bool { keys.contains(key) }

    mutating func add(_ key: String, job: ULID) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("\(key) \(job)\n".utf8))
        keys.insert(key)
    }
}
