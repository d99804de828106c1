import DarkroomClient
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// `darkroom job`: one job's story, from the broker's event log and queue.
enum JobCommand {
    static let spec = CommandSpec(
        name: "job",
        abstract: "Show one job's story: its state, source, pipeline, every attempt and its record.",
        discussion: """
        The broker answers from its event log, indexed by job, and from its queue,
        so this is one quick read however long the log is. States: queued, delayed
        (waiting out a retry backoff, or scheduled with submit --at or --in),
        running, cancelling, stored, dead, discarded, cancelled. Each
        attempt shows its worker, when it started and ended, and how it ended
        (stored, failed with the step and reason, or requeued). --json prints the
        broker's answer as it is (protocol/drk1.md, section 10.5).
        Exits 1 when the broker does not know the job.

        --wait first waits until every job given has ended (stored, dead,
        cancelled or discarded), following the broker's events, then shows
        them: for a script that submitted without --wait. A broker that stops
        answering meanwhile is waited for, as submit --wait does; --for ends
        the wait sooner. With --wait the exit status is 0 when every job was
        stored, 2 when --for passed with some still unfinished (those are
        shown as they stand), and 1 otherwise.
        """,
        arguments: [ArgumentSpec(name: "job-id", help: "The job id that submit printed.", variadic: true)],
        options: [.flag("wait", help: "Wait until every job has ended, then show them."),
                  .value("for", "SECONDS", help: "With --wait, the most time to wait. (default: no limit)"),
                  ClientOptions.json, ClientOptions.broker, ClientOptions.events, ClientOptions.timeout,
                  ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey]
    )

    /// The states a job does not leave by itself.
    static let endings: Set<String> = ["stored", "dead", "cancelled", "discarded"]

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let ids = try args.positionals.map { try ClientOptions.id($0, what: "job id") }
        let wait = args.flag("wait")
        if args.value("for") != nil && !wait { throw UsageError("--for goes with --wait") }
        let limit: Duration? = args.value("for") == nil ? nil : .seconds(try args.int("for", default: 0, range: 1...1_000_000))
        let context = try Context()
        let admin = try ClientOptions.admin(args, context: context)
        var timedOut = false
        // What the wait already read: ended jobs' stories and unknown ids.
        var read: [ULID: Result<JobStory, ClientError>] = [:]
        if wait {
            let timeout = try ClientOptions.timeout(args)
            let curve = try ClientOptions.brokerCurve(args)
            do {
                let follower = try EventFollower(frontend: ClientOptions.brokerEndpoint(args), events: ClientOptions.eventsEndpoint(args),
                                                 context: context, timeout: timeout, curve: curve)
                let unreachable: Bool
                (timedOut, unreachable, read) = try waitUntilEnded(ids, admin: admin, follower: follower, limit: limit)
                // No story can be read: the wait said why.
                if unreachable { return 2 }
            } catch {
                throw error.runtime
            }
        }
        var missing = 0
        var notStored = 0
        // Asked once, for the first waiting job shown: a paused broker
        // explains why it waits.
        lazy var pausedSince = (try? admin.status())?.queue.pausedSince
        for (index, id) in ids.enumerated() {
            do {
                let story = if let known = read[id] { try known.get() } else { try admin.jobStory(id) }
                if story.state != "stored" { notStored += 1 }
                if args.flag("json") {
                    Console.out(jsonLine(story))
                } else {
                    if index > 0 { Console.out("") }
                    var shown = lines(story)
                    if story.state == "queued" || story.state == "delayed" {
                        if let since = pausedSince { shown.insert("  dispatch paused \(PauseCommand.held(since: since))", at: 1) }
                    }
                    for line in shown { Console.out(line) }
                }
            } catch let error where error.serverCode == .notFound {
                missing += 1
                Console.err(error.message)
            } catch {
                throw error.runtime
            }
        }
        guard wait else { return missing == 0 ? 0 : 1 }
        if timedOut { return 2 }
        return missing + notStored == 0 ? 0 : 1
    }

    /// Waits until every job of `ids` the broker knows has ended, or
    /// `limit` passes (`timedOut` then). The broker's newest event seq is
    /// taken before the jobs' stories: a job that ended up to it shows so
    /// in its story, and one that ends after it in the events that follow
    /// it. Returns the stories read that will not change (ended jobs) and
    /// the ids the broker does not know, so they are not asked for again.
    static func waitUntilEnded(_ ids: [ULID], admin: Admin, follower: EventFollower,
                               limit: Duration?) throws(ClientError) -> (timedOut: Bool, unreachable: Bool, read: [ULID: Result<JobStory, ClientError>]) {
        let endpoint = follower.frontendEndpoint
        let started = ContinuousClock.now
        // The end of an outage, whether the first reads or the follow met it.
        func back(after silence: Duration) { Console.err("job: broker back after \(WatchCommand.seconds(silence))") }
        var status: BrokerStatus
        var open: Set<ULID> = []
        var read: [ULID: Result<JobStory, ClientError>] = [:]
        // The first reads wait out an outage already under way, as the
        // follow after them waits out one that starts later.
        var failures = 0
        var outageSince: ContinuousClock.Instant?
        while true {
            do throws(ClientError) {
                status = try admin.status()
                for id in ids where read[id] == nil && !open.contains(id) {
                    do {
                        let story = try admin.jobStory(id)
                        if endings.contains(story.state) { read[id] = .success(story) } else { open.insert(id) }
                    } catch where error.serverCode == .notFound {
                        read[id] = .failure(error)  // named when the stories are shown
                    }
                }
                if let outageSince { back(after: ContinuousClock.now - outageSince) }
                break
            } catch where error.isRetryable {
                let now = ContinuousClock.now
                if let limit, now - started >= limit {
                    Console.err("job: the broker at \(endpoint) did not answer within --for \(WatchCommand.seconds(limit)); "
                                + "\(ids.count) job(s) not known to have ended")
                    return (true, true, read)
                }
                if outageSince == nil {
                    outageSince = now
                    Console.err("job: broker at \(endpoint) not answering (\(error.message)); still waiting")
                }
                failures += 1
                var pause = RetryBackoff.standard.delay(afterFailures: failures)
                if let limit { pause = min(pause, limit - (now - started)) }
                Thread.sleep(forTimeInterval: max(0.01, pause.fractionalSeconds))
            }
        }
        guard !open.isEmpty else { return (false, false, read) }
        if let since = status.queue.pausedSince { Console.err("job: dispatch is paused \(PauseCommand.held(since: since))") }
        follower.onBrokerContact = { contact in
            switch contact {
            case .lost(let error, _):
                Console.err("job: broker at \(endpoint) \(error.kind == .timeout ? "not answering" : "failing (\(error.message))"); still waiting")
            case .regained(let silence, _): back(after: silence)
            }
        }
        do {
            _ = try follower.waitForJobs(open, from: status.eventSeq + 1, timeout: limit)
            return (false, false, read)
        } catch where error.kind == .timeout && limit != nil {
            Console.err("job: \(error.message)")
            return (true, false, read)
        }
    }

    /// The story as a person reads it.
    static func lines(_ story: JobStory) -> [String] {
        var out = ["job \(story.jobID)  \(story.state)\(stateDetail(story))"]
        func row(_ name: String, _ value: String?) {
            if let value { out.append("  \(name.padded(to: 10))\(value)") }
        }
        row("source", story.source.isEmpty ? nil : story.source)
        row("pipeline", story.pipeline.map { $0.isEmpty ? "(none)" : $0 })
        row("priority", story.priority.map { String($0) })
        row("submitted", story.submitted.map(time))
        row("expires", story.expires.map { "\(time($0)) (not run unless a worker starts it by then)" })
        row("limit", story.timeLimit.map { "\(SubmitCommand.spoken(.seconds(Int64($0)))) per attempt (submit --time-limit)" })
        if let finished = story.finished {
            let took = story.submitted.map { " (\(span(from: $0, to: finished)) after submit)" } ?? ""
            row("finished", time(finished) + took)
        }
        row("record", story.recordID?.description)
        if !story.complete {
            out.append("  (the broker's --retention pruned this job's first events: the story starts later)")
        }
        if story.attempts.isEmpty {
            out.append("  no attempt yet")
        }
        for a in story.attempts {
            var line = "  attempt \(a.attempt) on \(a.worker): \(clock(a.started))"
            if let ended = a.ended { line += " to \(clock(ended)) (\(span(from: a.started, to: ended)))" }
            line += ", \(a.outcome)"
            if let failure = a.failure { line += ": \(failure.text(withCode: true))" }
            out.append(line)
        }
        return out
    }

    /// 2nd, 3rd, 11th, 21st…
    static func ordinal(_ n: UInt64) -> String {
        let suffix = (11...13).contains(n % 100) ? "th" : [1: "st", 2: "nd", 3: "rd"][n % 10] ?? "th"
        return "\(n)\(suffix)"
    }

    static func stateDetail(_ story: JobStory) -> String {
        switch story.state {
        case "running": story.worker.map { " on \($0)" } ?? ""
        case "queued": story.position.map { $0 == 1 ? " (next to go)" : " (\(ordinal($0)) in line)" } ?? ""
        case "delayed": story.notBefore.map { " until \(time($0))" } ?? ""
        case "cancelled":
            // Its deadline passed before a worker started it (job.expired).
            story.events.last.flatMap { $0.kind == "cancelled" ? $0.failure : nil }.map { ": \($0.reason) (\($0.code))" } ?? ""
        default: ""
        }
    }

    /// Unix milliseconds as UTC date and time to the millisecond.
    static func time(_ ms: UInt64) -> String {
        // The log's timestamp, `2026-12-01T19:30:01.123Z`, for people.
        let iso = Format.time(ms)
        return String(iso.prefix(10)) + " " + clock(ms) + " UTC"
    }

    /// The time of day of Unix milliseconds, UTC: `19:30:01.123`.
    static func clock(_ ms: UInt64) -> String {
        String(Format.time(ms).dropFirst(11).prefix(12))
    }

    static func span(from start: UInt64, to end: UInt64) -> String {
        let ms = end >= start ? end - start : 0
        return ms < 1000 ? "\(ms) ms" : String(format: "%.2f s", Double(ms) / 1000)
    }
}
