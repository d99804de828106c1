import DarkroomClient
import DarkroomCore
import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Synchronization

/// `darkroom submit`: sends jobs to the broker, many in flight at once,
/// keeps resending through a broker outage until a deadline, and optionally
/// follows every accepted job to its end.
enum SubmitCommand {
    /// The default --deadline, in seconds. A broker restarted by its
    /// supervisor (systemd's RestartSec is 2 s) answers again within
    /// seconds, and one that starts on a large queue or after a host reboot
    /// within a minute or two; five minutes rides out a restart or two of
    /// either kind, and still ends a submit to a broker that is gone.
    static let defaultDeadline = 300

    /// The default --window: the most SUBMITs in flight. The window starts
    /// smaller and grows to this only while the broker answers quickly,
    /// and never holds more than 64 MiB of images.
    static let defaultWindow = 4096

    static let spec = CommandSpec(
        name: "submit",
        abstract: "Submit images (JPEG, PNG, WebP, GIF, HEIC/AVIF, TIFF) as jobs to the broker.",
        discussion: """
        Checks the pipeline and every file locally first (a bad pipeline or an
        unreadable, unsupported or over-limit file is reported and nothing is sent),
        then submits with many jobs in flight (a window that grows while the
        broker answers quickly, up to --window) and prints one job id per file.
        With --wait it follows every accepted job until it is stored or dead,
        whatever happened to the others, from the broker's event stream while
        the rest are still being submitted: a progress bar on a terminal, one
        line per finished job otherwise.

        Every job carries a submit key, so a resend never queues it twice.
        When the broker is silent for --timeout, unanswered submits are sent
        again, with growing waits between rounds; while it is unreachable or
        refuses for now (queue full, shutting down, disk full), they are
        retried the same way. This goes on until --deadline passes with no
        submit accepted (or refused for good); only then are the rest
        reported as never answered (or refused, with the broker's last
        reason). An outage is reported once on stderr when it begins and
        once when the broker is back.

        --at TIME or --in DURATION schedules the jobs: the broker keeps them
        (through restarts) as delayed, and no worker gets one before its
        time; `darkroom job ID` shows it, `darkroom cancel` takes it back.
        --in counts from each job's submit; with --follow, from each file's.
        A scheduled submit needs a broker that knows DRK1's not-before time
        (an older one refuses it as malformed).

        --expires-at TIME or --expires-in DURATION gives each job a deadline:
        a job no worker has started by then (waiting in a long queue, paused,
        scheduled or waiting to retry) is not run and ends cancelled, with
        the reason job.expired; one already running finishes. --expires-in
        counts from each job's submit. `dead retry` of such a job clears it.

        --time-limit DURATION bounds how long one attempt may run on a
        worker: past it the worker stops the job in the step it is in, and
        the job goes dead with job.timeout and that step. Workers also hold
        every job to their own --job-timeout (600 s by default); the lower
        limit applies. A time limit needs workers that know DRK1's JOB
        frame 8 (an older one refuses such a JOB as malformed).

        Exit status: 0 when every input was stored (with --wait) or
        accepted (without); 2 when some input was never answered by the
        deadline (if it was sent, its job may or may not be queued) or,
        with --wait, was accepted but not seen to finish; otherwise 1
        when some were refused by the broker, ended dead or failed the
        local checks, or when the broker refused this client's key or
        CURVE settings; 64 for a usage error. The last line on stderr
        counts the inputs by outcome, and each one not stored or
        accepted is named with why. With --json every input gets one
        final object whose "status" is stored or dead (with --wait),
        accepted (without), or refused, unanswered, unfinished or
        invalid; with --wait an "accepted" object comes first.

        --follow DIR keeps running as a hot folder: every image that appears in
        DIR, complete (closed after writing, or moved in), is submitted once with
        these options and its end is printed as it comes. A file's submit key
        comes from its path, size and modification time, and DIR/.darkroom-follow
        lists the files submitted, so a restart submits nothing twice. Files the
        broker leaves unanswered (a burst waits at most 10 s) or refuses for now
        are tried again, at growing intervals, until it answers. Ctrl-C or
        SIGTERM stops it once the burst under way has its answers or gives up
        (files not sent yet go at the next start), with exit status 0; files
        that could not be stored are named on stderr as they come, those still
        waiting for the broker counted.

        Inputs may be files, directories (their *.jpg, *.jpeg, *.png, *.webp,
        *.gif, *.heic, *.heif, *.avif, *.tif and *.tiff files) or quoted globs such as 'photos/*.jpg', and http://
        or https:// URLs; with --from-list, also the paths and URLs in a
        file, one a line ('-' reads them from stdin). URLs are downloaded
        before anything is sent, --downloads at a time, each within
        --download-timeout (10 s at most to connect), following up to 5
        redirects, and stopped as soon as it passes the byte limit files
        have; each download then gets the same checks as a file. A URL
        that fails is reported on one line with why (an HTTP status, a
        timeout, too large, not an image, no such host, no connection) and
        the others go on, whatever --skip-invalid says; the exit status is
        then 1. A job from a URL keeps the URL as its source name.
        """,
        arguments: [ArgumentSpec(name: "inputs", help: "JPEG, PNG, WebP, GIF, HEIF or TIFF files, directories, globs or http(s) URLs.", variadic: true, optional: true)],
        options: [
            .value("ops", "PIPELINE", help: "(required) The steps to run, e.g. 'scale:1024x1024,mode=fill | crop:square'."),
            .value("thumb", "WxH", help: "Thumbnail size (aspect-fill, centre crop), each side 1 to 4096.", default: "256x256"),
            .value("quality", "N", help: "Quality of the full-resolution output, 1-100.", default: "95"),
            .value("thumb-quality", "N", help: "Quality of the thumbnail, 1-100.", default: "70"),
            ImageOptions.thumbGravitySpec,
            ImageOptions.formatSpec,
            ImageOptions.thumbFormatSpec,
            ImageOptions.subsamplingSpec,
            ImageOptions.progressiveSpec,
            .value("priority", "N", help: "0 (lowest) to 9 (highest); higher runs first.", default: "5"),
            .value("at", "TIME", help: Schedule.atHelp),
            .value("in", "DURATION", help: Schedule.inHelp),
            .value("expires-at", "TIME", help: Schedule.expiresAtHelp),
            .value("expires-in", "DURATION", help: Schedule.expiresInHelp),
            .value("time-limit", "DURATION", help: "The longest an attempt may run on a worker (90s, 10m, 1h; at most 7d): past it the worker stops it and it fails job.timeout, not retried. A worker's own --job-timeout, if lower, still applies."),
            .value("retries", "N", help: "Retry a failing job at most N times (0-999) before it goes dead; default: the broker's --max-attempts (5 attempts) less one."),
            .flag("wait", help: "Follow the jobs until each is stored or dead."),
            .value("follow", "DIR", help: "Keep running: submit every image that appears in DIR, once, and print each result."),
            .value("settle", "SECONDS", help: "With --follow, how long a file must go unwritten before it is submitted (0: at its first close).", default: "1"),
            .flag("skip-invalid", help: "Submit the valid files even if some fail the local checks."),
            InputFiles.recursiveOption,
            .value("window", "N", help: "The most submits in flight at once; the window grows to it while the broker answers quickly, within 64 MiB of images.",
                   default: String(defaultWindow)),
            ClientOptions.json,
            ClientOptions.broker,
            ClientOptions.events,
            .value("timeout", "SECONDS", help: "How long the broker may be silent before unanswered submits are sent again.", default: "5"),
            .value("deadline", "SECONDS",
                   help: "How long to keep resending while no submit is accepted (an outage); then the rest are reported as never answered.",
                   default: String(defaultDeadline)),
            ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey,
        ] + WebSources.options
    )

    /// Where one input ended up.
    enum Status {
        case invalid(String)
        case accepted(ULID)
        case refused(ErrorCode, String)
        case unanswered(sends: Int, String)
        case stored(ULID)
        case dead(ULID)
        case cancelled(ULID)
        case unfinished(ULID, String)
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
        let formats = try ImageOptions.formats(args)
        let options = JobOptions(
            thumbnailWidth: UInt16(thumb.width), thumbnailHeight: UInt16(thumb.height),
            quality: UInt8(try args.int("quality", default: 95, range: 1...100)),
            thumbnailQuality: UInt8(try args.int("thumb-quality", default: 70, range: 1...100)),
            subsampling: DarkroomProtocol.JobOptions.Subsampling(try ImageOptions.subsampling(args)),
            progressive: args.flag("progressive"),
            thumbnailGravity: DarkroomProtocol.JobOptions.ThumbnailGravity(name: try ImageOptions.thumbnailGravity(args).rawValue) ?? .center,
            format: DarkroomProtocol.JobOptions.OutputFormat(name: formats.full.rawValue) ?? .jpeg,
            thumbnailFormat: DarkroomProtocol.JobOptions.OutputFormat(name: formats.thumbnail.rawValue) ?? .jpeg
        )
        if !args.flag("json") {
            for note in ImageOptions.unusedOptionNotes(args, format: formats.full, thumbnailFormat: formats.thumbnail) { Console.err(note) }
        }
        let priority = UInt8(try args.int("priority", default: 5, range: 0...9))
        let terms = JobTerms(
            schedule: try Schedule.parse(at: args.value("at"), in: args.value("in")),
            expiry: try Schedule.parse(at: args.value("expires-at"), in: args.value("expires-in"), options: ("--expires-at", "--expires-in")),
            maxAttempts: args.value("retries") == nil ? nil : UInt16(try args.int("retries", default: 0, range: 0...999) + 1),
            timeLimit: try JobTerms.timeLimit(args.value("time-limit")))
        try terms.check()
        let window = try args.int("window", default: defaultWindow, range: 1...100_000)
        let deadline = Duration.seconds(try args.int("deadline", default: defaultDeadline, range: 1...604_800))
        let json = args.flag("json")
        let wait = args.flag("wait")
        if let folder = args.value("follow") {
            guard args.positionals.isEmpty, args.value("from-list") == nil else {
                throw UsageError("--follow watches one directory; leave out the inputs and --from-list")
            }
            if args.flag("recursive") {
                throw UsageError("--follow watches the directory itself, not its subdirectories; leave out --recursive")
            }
            let settleText = args.value("settle") ?? "1"
            guard let seconds = Double(settleText), (0...3600).contains(seconds) else {
                throw UsageError("--settle must be a number of seconds from 0 to 3600, not \"\(settleText)\"")
            }
            let settle = Duration.milliseconds(Int(seconds * 1000))
            return try FollowFolder.run(FollowFolder.Settings(
                directory: folder, pipeline: pipeline, options: options, priority: priority, terms: terms, json: json,
                timeout: try ClientOptions.timeout(args), deadline: deadline, broker: ClientOptions.brokerEndpoint(args),
                events: ClientOptions.eventsEndpoint(args), curve: try ClientOptions.brokerCurve(args), window: window, settle: settle))
        }
        if args.value("settle") != nil { throw UsageError("--settle goes with --follow") }
        let out = OutputBuffer()
        /// Every stderr line goes after the stdout lines before it.
        func err(_ line: String) {
            out.flush()
            Console.err(line)
        }
        // Ctrl-C (or SIGTERM) mid-run: the lines gathered for stdout (the
        // ids of accepted jobs among them) still go out, and one line says
        // what became of the inputs, before the signal ends the process.
        let tally = Tally()
        StopSignals.onStop { signal in
            out.flushAndClose()
            Console.err(tally.stoppedText(signal: StopSignals.name(signal), wait: wait))
        }

        // Local checks: every file must exist and be a JPEG within the limits,
        // and the pipeline must fit its size, before anything is sent.
        let limits = try WebSources.limits(args)
        let files = try InputFiles.submitInputs(args)
        let checkedJob = SubmitInputs.checkedJob(pipeline, options: options)
        var inputs = SubmitInputs.check(files, job: checkedJob)
        var statuses: [Status?] = Array(repeating: nil, count: inputs.count)
        var connectionRefused = false
        var valid = 0
        for (index, input) in inputs.enumerated() where !files[index].isURL {
            if let problem = input.problem {
                statuses[index] = .invalid(problem)
                report(json: json, path: input.path, problem: problem, out: out, err: err)
            } else {
                valid += 1
            }
        }
        let invalid = files.filter { !$0.isURL }.count - valid
        if invalid > 0 && !args.flag("skip-invalid") {
            out.flush()
            let rest = invalid < inputs.count ? " (use --skip-invalid to submit the rest)" : ""
            throw RuntimeError("\(invalid) of \(inputs.count) input(s) failed the local checks; nothing was submitted\(rest)")
        }
        // URLs: downloaded and checked now; one that fails is reported and
        // the rest go on. The files are removed when submit ends.
        let progress = wait && !json && Console.stderrIsTerminal ? ProgressBar(total: valid) : nil
        var downloadChecks = SubmitInputs.DownloadChecks(job: checkedJob, after: inputs)
        let downloads = try WebSources.download(files, limits: limits, check: { downloadChecks.check($0) },
                                                progress: { progress?.downloaded($0, failed: $1, of: $2) }) { index, problem in
            if let problem {
                inputs[index].problem = problem
                statuses[index] = .invalid(problem)
                progress?.clearLine()
                report(json: json, path: files[index].path, problem: problem, out: out, err: err)
            } else {
                valid += 1
            }
        }
        defer { downloads.remove() }
        for index in inputs.indices where files[index].isURL && inputs[index].problem == nil {
            inputs[index].file = downloads.file(for: index)
            inputs[index].bytes = inputs[index].file.flatMap { downloadChecks.takeBytes(of: $0) }
        }
        progress?.total = valid
        tally.inputs.store(valid, ordering: .relaxed)
        if valid == 0 {
            out.flush()
            throw RuntimeError("no valid inputs to submit")
        }

        let context = try Context()
        let timeout = try ClientOptions.timeout(args)
        let endpoint = ClientOptions.brokerEndpoint(args)
        let curve = try ClientOptions.brokerCurve(args)
        let engine: SubmitEngine
        do {
            engine = try SubmitEngine(frontend: endpoint, events: ClientOptions.eventsEndpoint(args), context: context,
                                      timeout: timeout, deadline: deadline, curve: curve)
        } catch {
            throw error.runtime
        }
        // Whether a pause holds the jobs is asked only when following has
        // seen none of them end for `PausedProbe.after`: a run whose jobs
        // flow never pays for the question (a thread, a connection and a
        // STATUS, a few milliseconds of a short run).
        var paused: PausedProbe?
        var pausedTold = false
        let started = ContinuousClock.now
        // A stored job's line names its input from this side; only --json
        // prints what the event itself says (its source and worker).
        engine.briefStoredEvents = !json
        // The CLI names each job's submit key itself, to find the input an
        // answer belongs to even when a path is given twice.
        var source = SubmitInputs.Jobs(inputs, pipeline: pipeline.canonical, options: options, priority: priority, terms: terms)
        // Said once, so that a wait with nothing happening reads as meant.
        if !json { for line in terms.summaries(now: ULIDGenerator.systemMilliseconds()) { err("submit: " + line) } }
        let inputOfKey = source.inputOfKey
        var accepted: [ULID: Int] = [:]
        var unanswered = valid

        // Said once the probe has its answer: at the next update, or at the
        // next of the engine's waits (at least once a second), since jobs
        // held by a pause bring no updates at all. The probe itself starts
        // at one of these calls.
        func tellPaused() {
            if wait, paused == nil, tally.endedCount == 0, ContinuousClock.now - started >= PausedProbe.after {
                paused = PausedProbe(endpoint: endpoint, context: context, curve: curve, timeout: timeout)
            }
            if !pausedTold, let since = paused?.pausedSince {
                pausedTold = true
                progress?.clearLine()
                err("submit: the broker's dispatch is paused \(PauseCommand.held(since: since))")
            }
        }
        var brokerAnswered = false
        let outcome = engine.run(&source, window: SubmitWindow(maximum: window), follow: wait,
                                 beforeWait: { tellPaused(); out.flush() }) { update in
            tellPaused()
            switch update {
            case let .replied(request, result):
                brokerAnswered = true
                guard let index = request.submitKey.flatMap({ inputOfKey[$0] }) else { return }
                unanswered -= 1
                let path = inputs[index].path
                switch result {
                case let .accepted(jobID, _):
                    accepted[jobID] = index
                    tally.accepted.add(1, ordering: .relaxed)
                    statuses[index] = .accepted(jobID)
                    if json {
                        var o = JSONObject()
                        o.set("input", path)
                        o.set("job", jobID.description)
                        o.set("status", "accepted")
                        out.line(o.text)
                    } else if progress == nil {
                        out.write(jobID)
                        out.write(" ")
                        out.write(path)
                        out.endLine()
                    }
                case let .rejected(code, reason):
                    statuses[index] = .refused(code, reason)
                    progress?.clearLine()
                    if json {
                        var o = JSONObject()
                        o.set("input", path)
                        o.set("status", "refused")
                        o.set("code", code.name)
                        o.set("reason", "refused by the broker (\(code)): \(reason)")
                        out.line(o.text)
                    } else {
                        err("\(path): refused by the broker (\(code)): \(reason)")
                    }
                case let .failed(error):
                    statuses[index] = .invalid(error.message)
                    progress?.clearLine()
                    report(json: json, path: path, problem: error.message, out: out, err: err)
                case let .unanswered(sends, error):
                    statuses[index] = .unanswered(sends: sends, error.message)
                    progress?.clearLine()
                    if json {
                        var o = JSONObject()
                        o.set("input", path)
                        o.set("status", "unanswered")
                        o.set("sent", sends)
                        o.set("reason", error.message)
                        out.line(o.text)
                    } else {
                        let fate = sends == 0 ? "never sent; not queued" : "sent \(sends) time(s); may or may not be queued"
                        err("\(path): never answered (\(fate))")
                    }
                }
                progress?.submitted(accepted.count)
            case let .event(event):
                guard let index = accepted[event.jobID] else { return }
                let path = inputs[index].path
                switch event.kind {
                case .stored:
                    tally.stored.add(1, ordering: .relaxed)
                    statuses[index] = .stored(event.jobID)
                    if json { out.line(resultJSON(input: path, status: "stored", event: event)) } else if progress == nil {
                        out.write("stored ")
                        out.write(event.jobID)
                        out.write(" ")
                        out.write(path)
                        out.write(" record ")
                        if let record = event.recordID { out.write(record) } else { out.write("?") }
                        out.endLine()
                    }
                case .dead:
                    tally.dead.add(1, ordering: .relaxed)
                    statuses[index] = .dead(event.jobID)
                    if json { out.line(resultJSON(input: path, status: "dead", event: event)) } else {
                        let reason = event.failure.map(Format.failureText) ?? "no reason given"
                        progress?.clearLine()
                        err("dead   \(event.jobID) \(path): \(reason)")
                    }
                case .cancelled:
                    tally.cancelled.add(1, ordering: .relaxed)
                    statuses[index] = .cancelled(event.jobID)
                    if json { out.line(resultJSON(input: path, status: "cancelled", event: event)) } else {
                        progress?.clearLine()
                        // A reason when its deadline passed unstarted (job.expired).
                        err("cancelled \(event.jobID) \(path)" + (event.failure.map { ": " + Format.failureText($0) } ?? ""))
                    }
                case .retrying where !json:
                    progress?.clearLine()
                    // The event's reason says when and why (a worker that
                    // stopped answering, a failed step).
                    if progress == nil {
                        // The broker's reason starts with the attempt and
                        // when ("attempt 2 in 1.5 s: ..."); said once.
                        err("retry  \(event.jobID) \(path)" + (event.failure.map { ": " + Format.failureText($0) } ?? " (attempt \(event.attempt))"))
                    }
                default:
                    break
                }
                progress?.update(done: tally.storedCount, failed: tally.deadCount)
            case let .notice(notice):
                // The engine counts the jobs it holds; the inputs not yet
                // taken wait as well.
                progress?.clearLine()
                err(noticeText(notice, endpoint: endpoint, waiting: unanswered, everAnswered: brokerAnswered))
            case let .submitFailed(error):
                // Every input not answered was reported with this error; the
                // accepted ones are still followed.
                progress?.clearLine()
                err("Error: \(error.message)")
                if error.kind == .refused { connectionRefused = true }
            case let .contact(contact):
                // A broker silent for the whole deadline while its jobs run
                // ends the wait as it ends the resending: the jobs not seen
                // to finish are reported, and the exit status says so.
                progress?.clearLine()
                switch contact {
                case .lost:
                    err("submit: broker at \(endpoint) not answering; still following \(accepted.count - tally.endedCount) job(s) for up to \(spoken(deadline))")
                case .regained(let silence, _):
                    err("submit: broker back after \(spoken(silence))")
                }
            }
        }

        if let error = outcome.followError {
            // Following stopped: the jobs not seen to end are reported so.
            progress?.clearLine()
            err("Error: following the accepted jobs stopped: \(error.message)")
            for job in outcome.unfinished {
                guard let index = accepted[job], case .accepted? = statuses[index] else { continue }
                statuses[index] = .unfinished(job, error.message)
                if json {
                    var o = JSONObject()
                    o.set("input", inputs[index].path)
                    o.set("status", "unfinished")
                    o.set("job", job.description)
                    o.set("reason", error.message)
                    out.line(o.text)
                } else {
                    err("\(inputs[index].path): accepted as \(job), not seen to finish")
                }
            }
        }
        if wait {
            // Accepted but never seen to end (following ended early): unknown.
            for index in statuses.indices {
                if case .accepted(let job)? = statuses[index] { statuses[index] = .unfinished(job, "not seen to finish") }
            }
        }
        progress?.finish()
        out.flush()

        let counts = Counts(statuses)
        Console.err(counts.line(wait: wait, inputs: inputs.count, resent: outcome.summary.resent))
        // A broker that turns this client away (its key, its CURVE
        // settings) refused every input it did not answer: that is no outage.
        if connectionRefused && counts.unfinished == 0 { return 1 }
        if counts.unanswered + counts.unfinished > 0 { return 2 }
        if counts.refused + counts.dead + counts.cancelled + counts.invalid > 0 { return 1 }
        return 0
    }

    /// How many inputs ended in each status.
    struct Counts {
        var accepted = 0, stored = 0, dead = 0, cancelled = 0, refused = 0, unanswered = 0, unfinished = 0, invalid = 0

        init(_ statuses: [Status?]) {
            for status in statuses {
                switch status {
                case .accepted: accepted += 1
                case .stored: stored += 1
                case .dead: dead += 1
                case .cancelled: cancelled += 1
                case .refused: refused += 1
                case .unanswered, nil: unanswered += 1
                case .unfinished: unfinished += 1
                case .invalid: invalid += 1
                }
            }
        }

        /// `200 input(s): 149 stored, 0 dead, 0 refused, 51 never answered, 0 invalid; 62 resent`
        func line(wait: Bool, inputs: Int, resent: Int) -> String {
            var parts = wait ? ["\(stored) stored", "\(dead) dead"] : ["\(accepted) accepted"]
            if cancelled > 0 { parts.append("\(cancelled) cancelled") }
            if unfinished > 0 { parts.append("\(unfinished) not seen to finish") }
            parts += ["\(refused) refused", "\(unanswered) never answered", "\(invalid) invalid"]
            return "\(inputs) input(s): " + parts.joined(separator: ", ") + (resent > 0 ? "; \(resent) submit(s) resent" : "")
        }
    }

    /// What a run has heard so far: counted on its thread, read there and
    /// by the stop signal's (`StopSignals`).
    final class Tally: Sendable {
        /// The inputs that passed the checks.
        let inputs = Atomic<Int>(0)
        let accepted = Atomic<Int>(0)
        let stored = Atomic<Int>(0)
        let dead = Atomic<Int>(0)
        let cancelled = Atomic<Int>(0)

        var storedCount: Int { stored.load(ordering: .relaxed) }
        var deadCount: Int { dead.load(ordering: .relaxed) }
        /// The accepted jobs seen to end: stored, dead or cancelled.
        var endedCount: Int { storedCount + deadCount + cancelled.load(ordering: .relaxed) }

        /// The line said when a signal stops the run.
        func stoppedText(signal: String, wait: Bool) -> String {
            let accepted = accepted.load(ordering: .relaxed), inputs = inputs.load(ordering: .relaxed)
            if accepted == 0 {
                return "submit: stopped by \(signal) before any job was accepted (a submit in flight at the stop may be queued all the same)"
            }
            var text = "submit: stopped by \(signal): \(accepted) of \(inputs) input(s) accepted (their job ids are above)"
            if wait {
                let cancelled = cancelled.load(ordering: .relaxed)
                let open = accepted - endedCount
                text += ", \(storedCount) stored, \(deadCount) dead\(cancelled > 0 ? ", \(cancelled) cancelled" : "")"
                if open > 0 { text += "; the other \(open) stay queued and run: `darkroom job ID --wait` or `darkroom watch` follows them" }
            } else {
                text += "; they stay queued and run"
            }
            if accepted < inputs {
                text += "; \(inputs - accepted) not accepted (any sent just before the stop may be queued all the same)"
            }
            return text
        }
    }

    /// One line on stderr for each turn of an outage.
    /// Before the broker has answered at all, the line says what most
    /// often is the cause (nothing is listening) and how to give up sooner.
    static func noticeText(_ notice: SubmitNotice, endpoint: String, waiting: Int, everAnswered: Bool = true) -> String {
        switch notice {
        case let .brokerSilent(_, giveUpIn):
            let hint = everAnswered ? "" : " (is darkroom up or darkroom broker running? --deadline SECONDS gives up sooner)"
            if giveUpIn < .milliseconds(500) {
                return "submit: broker at \(endpoint) not answering, and the deadline has come: giving up on \(waiting) submit(s)\(hint)"
            }
            return "submit: broker at \(endpoint) not answering; resending \(waiting) submit(s) until the deadline (\(spoken(giveUpIn)) from now)\(hint)"
        case let .brokerRefusing(code, reason, _, giveUpIn):
            return "submit: broker at \(endpoint) refuses submits for now (\(code): \(reason)); retrying \(waiting) submit(s) until the deadline (\(spoken(giveUpIn)) from now)"
        case let .brokerBack(after):
            return "submit: broker back after \(spoken(after))"
        }
    }

    /// A duration as people say it, in its two largest units: "14 s",
    /// "5 min", "4 min 55 s", "2 h 30 min", "3 d 1 h".
    static func spoken(_ duration: Duration) -> String {
        let seconds = Int((duration.fractionalSeconds).rounded())
        if seconds < 60 { return "\(seconds) s" }
        let parts = [(seconds / 86_400, "d"), (seconds % 86_400 / 3_600, "h"), (seconds % 3_600 / 60, "min"), (seconds % 60, "s")]
        let first = parts.firstIndex { $0.0 > 0 } ?? 2
        return parts[first ... first + 1].filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }.joined(separator: " ")
    }

    /// The final object of an input that ended stored or dead: its status,
    /// then the event's fields as `watch --json` prints them.
    static func resultJSON(input: String, status: String, event: Event) -> String {
        var head = JSONObject()
        head.set("input", input)
        head.set("status", status)
        return Format.eventJSON(event, after: head)
    }

    /// An input that will not be submitted, on its own line (stdout with
    /// --json, else stderr), outside a run with an output buffer.
    static func report(json: Bool, path: String, problem: String) {
        let out = OutputBuffer()
        report(json: json, path: path, problem: problem, out: out, err: { out.flush(); Console.err($0) })
        out.flush()
    }

    static func report(json: Bool, path: String, problem: String, out: OutputBuffer, err: (String) -> Void) {
        if json {
            var o = JSONObject()
            o.set("input", path)
            o.set("status", "invalid")
            o.set("reason", problem)
            out.line(o.text)
        } else {
            err("\(path): \(problem)")
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
    var total: Int
    private let start = ContinuousClock.now
    private var done = 0
    private var failed = 0
    private var submittedCount = 0
    private var lastDraw = ContinuousClock.now - .seconds(1)
    /// URLs downloaded (and checked), failed, of how many; nil without URLs.
    private var downloads: (done: Int, failed: Int, of: Int)?

    init(total: Int) { self.total = total }

    func downloaded(_ done: Int, failed: Int, of total: Int) {
        downloads = (done, failed, total)
        // One call per URL, after any line about it: always drawn.
        draw(force: true)
    }

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
        let width = 30
        if let d = downloads, d.done + d.failed < d.of {
            // Before anything is submitted: `[###---] 3/10 downloaded, 1 failed`.
            let filled = width * (d.done + d.failed) / d.of
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            Console.errRaw("\r\u{1B}[K[\(bar)] \(d.done)/\(d.of) downloaded, \(d.failed) failed")
            return
        }
        let finished = done + failed
        let filled = total == 0 ? width : width * finished / total
        let elapsed = (now - start).fractionalSeconds
        let rate = elapsed > 0 ? Double(finished) / elapsed : 0
        let eta = rate > 0 ? String(format: "ETA %.0fs", Double(total - finished) / rate) : "ETA --"
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let fetched = downloads.map { "\($0.done) downloaded, " } ?? ""
        let line = "[\(bar)] \(done)/\(total) done, \(failed) failed, \(fetched)\(submittedCount) submitted, " + String(format: "%.1f/s, ", rate) + eta
        Console.errRaw("\r\u{1B}[K" + line)
    }
}

extension DarkroomProtocol.JobOptions.Subsampling {
    /// The wire's name for a subsampling mode the command line parsed.
    init(_ mode: ChromaSubsampling) {
        switch mode {
        case .auto: self = .auto
        case .s444: self = .s444
        case .s422: self = .s422
        case .s420: self = .s420
        }
    }
}
