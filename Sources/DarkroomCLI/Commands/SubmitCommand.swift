import DarkroomClient
import DarkroomCore
import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// `darkroom submit`: sends jobs to the broker, many in flight at once, and
/// optionally follows them to the end.
enum SubmitCommand {
    static let spec = CommandSpec(
        name: "submit",
        abstract: "Submit JPEGs as jobs to the broker.",
        discussion: """
        Checks the pipeline and every file locally first (a bad pipeline or an
        unreadable, non-JPEG or over-limit file is reported and nothing is sent),
        then submits with many jobs in flight and prints one job id per file.
        With --wait it follows events until every job is stored or dead: a
        progress bar on a terminal, one line per finished job otherwise. Exit 0
        when every job was stored, 1 when any ended dead or was refused.

        Inputs may be files, directories (their *.jpg/*.jpeg files) or quoted
        globs such as 'photos/*.jpg'.
        """,
        arguments: [ArgumentSpec(name: "inputs", help: "JPEG files, directories or globs.", variadic: true)],
        options: [
            .value("ops", "PIPELINE", help: "(required) The steps to run, e.g. 'scale:1024x1024,mode=fill | crop:square'."),
            .value("thumb", "WxH", help: "Thumbnail size (aspect-fill, centre crop).", default: "256x256"),
            .value("quality", "N", help: "JPEG quality of the full-resolution output, 1-100.", default: "95"),
            .value("thumb-quality", "N", help: "JPEG quality of the thumbnail, 1-100.", default: "70"),
            .value("priority", "N", help: "0 (lowest) to 9 (highest); higher runs first.", default: "5"),
            .flag("wait", help: "Follow the jobs until each is stored or dead."),
            .flag("skip-invalid", help: "Submit the valid files even if some fail the local checks."),
            .value("window", "N", help: "Submits in flight at once.", default: "256"),
            ClientOptions.json,
            ClientOptions.broker,
            ClientOptions.events,
            ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey,
        ]
    )

    struct Checked {
        var path: String
        var problem: String?
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        guard let opsText = args.value("ops") else { throw UsageError("missing expected option '--ops <PIPELINE>'") }
        let pipeline: Pipeline
        do {
            pipeline = try Pipeline(parsing: opsText)
        } catch {
            throw UsageError(error.description)
        }
        let thumb = try ImageOptions.thumbnailSize(args.value("thumb") ?? "256x256", maxSide: 4096, orNone: false)
        let options = JobOptions(
            thumbnailWidth: UInt16(thumb.width), thumbnailHeight: UInt16(thumb.height),
            quality: UInt8(try args.int("quality", default: 95, range: 1...100)),
            thumbnailQuality: UInt8(try args.int("thumb-quality", default: 70, range: 1...100))
        )
        let priority = UInt8(try args.int("priority", default: 5, range: 0...9))
        let window = try args.int("window", default: 256, range: 1...100_000)
        let json = args.flag("json")
        let wait = args.flag("wait")

        // Local checks: every file must exist and be a JPEG within the limits,
        // and the pipeline must fit its size, before anything is sent.
        let paths = InputFiles.expand(Globs.expand(args.positionals))
        var valid: [String] = []
        var invalid = 0
        for input in paths {
            if let problem = input.problem ?? check(input.path, pipeline: pipeline) {
                invalid += 1
                report(json: json, path: input.path, problem: problem)
            } else {
                valid.append(input.path)
            }
        }
        if invalid > 0 && !args.flag("skip-invalid") {
            throw RuntimeError("\(invalid) of \(paths.count) input(s) failed the local checks; nothing was submitted (use --skip-invalid to submit the rest)")
        }
        if valid.isEmpty { throw RuntimeError("no valid inputs to submit") }

        let context = try Context()
        let timeout = try ClientOptions.timeout(args)
        let producer: Producer
        do {
            producer = try Producer(endpoint: ClientOptions.brokerEndpoint(args), context: context, timeout: timeout, curve: try ClientOptions.brokerCurve(args))
        } catch {
            throw error.runtime
        }
        let canonical = pipeline.canonical
        let requests = valid.map { SubmitRequest.file($0, pipeline: canonical, options: options, priority: priority) }
        var accepted: [ULID: String] = [:]
        var refused = 0
        let progress = wait && !json && Console.stderrIsTerminal ? ProgressBar(total: valid.count) : nil
        let summary: SubmitSummary
        do {
            summary = try producer.submit(requests, window: window) { request, result in
                switch result {
                case let .accepted(jobID, _):
                    accepted[jobID] = request.sourceName
                    if json {
                        var o = JSONObject()
                        o.set("input", request.sourceName)
                        o.set("job", jobID.description)
                        o.set("status", "accepted")
                        Console.out(o.text)
                    } else if progress == nil {
                        Console.out("\(jobID) \(request.sourceName)")
                    }
                case let .rejected(code, reason):
                    refused += 1
                    report(json: json, path: request.sourceName, problem: "refused by the broker (\(code)): \(reason)")
                case let .failed(error), let .unanswered(_, error):
                    refused += 1
                    report(json: json, path: request.sourceName, problem: error.message)
                }
                progress?.submitted(accepted.count)
            }
        } catch {
            progress?.finish()
            throw error.runtime
        }
        if !wait {
            if !json { Console.err("\(accepted.count) job(s) submitted, \(refused) refused") }
            return refused == 0 ? 0 : 1
        }
        guard let from = summary.firstEventSeq, !accepted.isEmpty else { return 1 }

        let follower: EventFollower
        do {
            follower = try EventFollower(frontend: ClientOptions.brokerEndpoint(args), events: ClientOptions.eventsEndpoint(args), context: context, timeout: timeout, curve: try ClientOptions.brokerCurve(args))
        } catch {
            throw error.runtime
        }
        var stored = 0
        var dead = 0
        let outcomes: [ULID: JobOutcome]
        do {
            outcomes = try follower.waitForJobs(Set(accepted.keys), from: from) { event in
                switch event.kind {
                case .stored:
                    stored += 1
                    if json { Console.out(Format.eventJSON(event)) } else if progress == nil {
                        Console.out("stored \(event.jobID) \(event.sourceName) record \(event.recordID?.description ?? "?")")
                    }
                case .dead:
                    dead += 1
                    if json { Console.out(Format.eventJSON(event)) } else {
                        let reason = event.failure.map(Format.failureText) ?? "no reason given"
                        progress?.clearLine()
                        Console.err("dead   \(event.jobID) \(event.sourceName): \(reason)")
                    }
                case .retrying where !json:
                    progress?.clearLine()
                    if progress == nil { Console.err("retry  \(event.jobID) \(event.sourceName) (attempt \(event.attempt))") }
                default:
                    break
                }
                progress?.update(done: stored, failed: dead)
            }
        } catch {
            progress?.finish()
            throw error.runtime
        }
        progress?.finish()
        let storedCount = outcomes.values.filter { if case .stored = $0 { true } else { false } }.count
        if !json {
            Console.err("\(storedCount) stored, \(outcomes.count - storedCount) dead, \(refused) refused, of \(valid.count + invalid) input(s)")
        }
        return storedCount == valid.count + invalid ? 0 : 1
    }

    /// Reads the file's header and checks it against the limits and the pipeline.
    static func check(_ path: String, pipeline: Pipeline) -> String? {
        let bytes: [UInt8]
        do {
            bytes = try InputFiles.read(path, limit: DecodeLimits.default.maxInputBytes)
        } catch {
            return error.message
        }
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

    static func report(json: Bool, path: String, problem: String) {
        if json {
            var o = JSONObject()
            o.set("input", path)
            o.set("status", "invalid")
            o.set("reason", problem)
            Console.out(o.text)
        } else {
            Console.err("\(path): \(problem)")
        }
    }
}

/// Expands quoted glob patterns (`'photos/*.jpg'`) that the shell left alone.
enum Globs {
    static func expand(_ arguments: [String]) -> [String] {
        arguments.flatMap { argument -> [String] in
            guard argument.contains(where: { "*?[".contains($0) }), !FileManager.default.fileExists(atPath: argument) else {
                return [argument]
            }
            let directory = (argument as NSString).deletingLastPathComponent
            let pattern = (argument as NSString).lastPathComponent
            let base = directory.isEmpty ? "." : directory
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []).sorted()
            let matches = names.filter { fnmatch(pattern, $0, 0) == 0 && !$0.hasPrefix(".") }
            return matches.isEmpty ? [argument] : matches.map { directory.isEmpty ? $0 : (directory as NSString).appendingPathComponent($0) }
        }
    }
}

/// A one-line progress bar on stderr for terminals:
/// `[#########-----------]  45/100 done, 1 failed, 12.3/s, ETA 4s`.
final class ProgressBar {
    let total: Int
    private let start = ContinuousClock.now
    private var done = 0
    private var failed = 0
    private var submittedCount = 0
    private var lastDraw = ContinuousClock.now - .seconds(1)

    init(total: Int) { self.total = total }

    func submitted(_ n: Int) {
        submittedCount = n
        draw()
    }

    func update(done: Int, failed: Int) {
        self.done = done
        self.failed = failed
        draw()
    }

    func clearLine() { Console.errRaw("\r\u{1B}[K") }

    func finish() {
        draw(force: true)
        Console.errRaw("\n")
    }

    private func draw(force: Bool = false) {
        let now = ContinuousClock.now
        guard force || now - lastDraw >= .milliseconds(100) else { return }
        lastDraw = now
        let finished = done + failed
        let width = 30
        let filled = total == 0 ? width : width * finished / total
        let elapsed = (now - start).fractionalSeconds
        let rate = elapsed > 0 ? Double(finished) / elapsed : 0
        let eta = rate > 0 ? String(format: "ETA %.0fs", Double(total - finished) / rate) : "ETA --"
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let line = "[\(bar)] \(done)/\(total) done, \(failed) failed, \(submittedCount) submitted, " + String(format: "%.1f/s, ", rate) + eta
        Console.errRaw("\r\u{1B}[K" + line)
    }
}
