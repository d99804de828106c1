import DarkroomClient
import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// `darkroom cancel`: stops jobs for good.
enum CancelCommand {
    static let spec = CommandSpec(
        name: "cancel",
        abstract: "Cancel jobs: queued ones at once, running ones on their worker.",
        discussion: """
        A queued job is cancelled at once. A running job's worker is asked to stop
        it: it stops at the next step of the job's pipeline (or inside a long
        step), stores nothing and takes its next job; this command waits until it
        has. A cancelled job ends with a 'cancelled' event, is never retried and
        is not in the dead-letter set. A job already stored cannot be cancelled:
        that is said, and the exit status is 1 (also for a dead or unknown job).
        --all-queued cancels every job waiting to run, running ones untouched.
        When the broker stops answering, cancel stops there: the job whose
        CANCEL went unanswered may or may not be cancelled, and the ids after
        it are named as not sent.

        With --json, one object per job id on stdout, in the order given:
        "job", and "status": cancelled (with "worker", null when it was
        queued); refused (the broker cannot cancel it: already stored,
        cancelled or dead, or unknown); stored (with "record": it was stored
        before its worker could stop it); stopping (its worker has not
        stopped it yet); unconfirmed (the broker took the cancel, then no
        longer knew the job); unanswered (no answer in time: it may or may
        not be cancelled); not_sent; or the state it ended in otherwise. Every
        status but cancelled comes with a "reason". --all-queued prints
        {"cancelled": N}. The exit status is the same as without --json.
        """,
        arguments: [ArgumentSpec(name: "job-id", help: "Jobs to cancel.", variadic: true, optional: true)],
        options: [
            .flag("all-queued", help: "Cancel every queued job (ready, waiting to retry or scheduled)."),
            ClientOptions.json, ClientOptions.broker, ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey,
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let all = args.flag("all-queued")
        let json = args.flag("json")
        if all == !args.positionals.isEmpty {
            throw UsageError(all ? "--all-queued cancels every queued job; leave out the job ids" : "missing expected argument '<job-id> ...' (or --all-queued)")
        }
        let ids = try args.positionals.map { try ClientOptions.id($0, what: "job id") }
        let timeout = try ClientOptions.timeout(args)
        let context = try Context()
        let admin = try ClientOptions.admin(args, context: context, timeout: timeout)
        if all {
            do {
                let n = try admin.cancel(.queued)
                if json {
                    var o = JSONObject()
                    o.set("cancelled", Int(clamping: n))
                    Console.out(o.text)
                } else {
                    Console.err("cancelled \(n) queued job(s)")
                }
                return 0
            } catch {
                throw error.runtime
            }
        }
        /// One job's outcome: a line (stdout when it was cancelled, stderr
        /// otherwise) or, with --json, an object on stdout.
        func report(_ id: ULID, _ status: String, worker: String? = nil, record: ULID? = nil, reason: String? = nil, line: String) {
            guard json else {
                if status == "cancelled" { Console.out(line) } else { Console.err(line) }
                return
            }
            var o = JSONObject.outcome("job", id, status: status)
            if status == "cancelled" { o.set("worker", worker) }
            if let record { o.set("record", record.description) }
            if let reason { o.set("reason", reason) }
            Console.out(o.text)
        }
        var failed = 0
        for (position, id) in ids.enumerated() {
            do {
                try admin.cancel(.job(id))
            } catch let error where error.serverCode == .notFound {
                failed += 1
                report(id, "refused", reason: error.message, line: error.message)
                continue
            } catch where error.kind == .timeout {
                Unanswered.report(error, ids: ids, at: position, done: "cancelled", server: "the broker", check: "darkroom job \(id)",
                                  json: json ? "job" : nil)
                return 1
            } catch {
                throw error.runtime
            }
            do {
                switch try waitUntilEnded(id, admin: admin, for: timeout) {
                case .cancelled(let worker):
                    report(id, "cancelled", worker: worker, line: "cancelled \(id)" + (worker.map { " on worker \($0)" } ?? " (it was queued)"))
                case .stored(let record):
                    failed += 1
                    let reason = "stored before its worker could stop it; a stored job cannot be cancelled"
                    report(id, "stored", record: record, reason: reason,
                           line: "\(id): stored before its worker could stop it\(record.map { " (record \($0))" } ?? ""); a stored job cannot be cancelled")
                case .other(let state):
                    failed += 1
                    report(id, state, reason: "ended \(state), not cancelled", line: "\(id): ended \(state), not cancelled")
                case .stillStopping(let worker):
                    failed += 1
                    let reason = "worker \(worker ?? "?") has not stopped it within \(SubmitCommand.spoken(timeout)); it ends cancelled once it does"
                    report(id, "stopping", reason: reason, line: "\(id): \(reason) (see `darkroom job \(id)`)")
                }
            } catch let error where error.serverCode == .notFound || error.kind == .timeout {
                // The broker took the cancel; then the job was gone from its
                // story (its log trimmed meanwhile), or it stopped answering.
                failed += 1
                let stoppedAnswering = error.kind == .timeout
                let reason = "cancel taken by the broker, its end not seen: \(error.message)"
                report(id, stoppedAnswering ? "unanswered" : "unconfirmed", reason: reason,
                       line: "\(id): \(reason)" + (stoppedAnswering ? " (`darkroom job \(id)` shows it)" : ""))
                if stoppedAnswering {
                    Unanswered.notSent(ids[(position + 1)...], server: "the broker", json: json ? "job" : nil)
                    return 1
                }
            } catch {
                throw error.runtime
            }
        }
        return failed == 0 ? 0 : 1
    }

    enum Ending {
        case cancelled(worker: String?)
        case stored(ULID?)
        case other(String)
        case stillStopping(worker: String?)
    }

    /// Follows the job's story until it has ended (a running job ends when its
    /// worker answers the cancel), or `limit` passes.
    static func waitUntilEnded(_ id: ULID, admin: Admin, for limit: Duration) throws(ClientError) -> Ending {
        let deadline = ContinuousClock.now + limit
        var pause = Duration.milliseconds(10)
        while true {
            let story = try admin.jobStory(id)
            switch story.state {
            case "cancelled":
                return .cancelled(worker: story.attempts.last.flatMap { $0.outcome == "cancelled" ? $0.worker : nil })
            case "stored":
                return .stored(story.recordID)
            case "cancelling", "running":
                if ContinuousClock.now >= deadline { return .stillStopping(worker: story.worker) }
            default:
                return .other(story.state)
            }
            Thread.sleep(forTimeInterval: pause.fractionalSeconds)
            pause = min(pause * 2, .milliseconds(200))
        }
    }
}
