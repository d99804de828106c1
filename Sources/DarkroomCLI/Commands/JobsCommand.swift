import DarkroomClient
import DarkroomProtocol
import DarkroomZMQ

/// `darkroom jobs`: the jobs running and waiting, as the broker holds them
/// (DRK1 JOB-LIST).
enum JobsCommand {
    static let spec = CommandSpec(
        name: "jobs",
        abstract: "List the jobs running and waiting: on which worker, in what order, until when.",
        discussion: """
        Without a state: the running jobs, then the queued ones in the order
        workers will get them (highest priority first, then oldest), then
        the delayed ones (scheduled, or waiting out a retry's backoff),
        soonest first; at most --limit of each, with how many there are.
        With a state (running, queued or delayed): that state alone, from
        --offset on, or from after --after CURSOR: each job listed has a
        cursor, its place in the order, and the last one's lists the next
        page. A page from a cursor goes on where the last one ended even
        when the jobs before it have been dispatched since (an offset would
        then skip as many). Finished jobs are not listed: `darkroom job ID`
        tells a job's whole story, `darkroom dead` lists the dead ones.

        With --json, one object per job on stdout: "state", "jobId",
        "priority", "source", "attempt" (its last dispatch, 0 if never),
        "cursor", and "position" (from 1, in its state's order), "worker" and
        "cancelling" (running), "notBefore" (delayed) and "expires" (a
        deadline) when they apply.
        """,
        arguments: [ArgumentSpec(name: "state", help: "running, queued or delayed (default: all three).", optional: true)],
        options: [
            .value("limit", short: "n", "N", help: "Jobs listed of each state, 1-1000.", default: "20"),
            .value("offset", "N", help: "Jobs of the state to skip first (with a state).", default: "0"),
            .value("after", "CURSOR", help: "List the jobs after this place in the state's order: the cursor of the last job of a page (with a state)."),
            ClientOptions.json, ClientOptions.broker, ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey,
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let states: [JobListState]
        if let name = args.positionals.first {
            guard args.positionals.count == 1, let state = JobListState(rawValue: name) else {
                throw UsageError("the state must be running, queued or delayed, not \"\(args.positionals.joined(separator: " "))\"")
            }
            states = [state]
        } else {
            if args.value("offset") != nil || args.value("after") != nil {
                throw UsageError("--offset and --after page through one state: name it (running, queued or delayed)")
            }
            states = [.running, .queued, .delayed]
        }
        let limit = try args.int("limit", default: 20, range: 1...Int(Wire.Limit.maxListLimit))
        let offset = try args.int("offset", default: 0, range: 0...Int(UInt32.max))
        var after: JobListCursor?
        if let text = args.value("after"), let state = states.first {
            guard let cursor = JobListCursor(text, state: state) else {
                throw UsageError("--after takes the cursor of a \(state.rawValue) job as a listing shows it (\(JobsCommand.cursorShape(state))), not \"\(text)\"")
            }
            after = cursor
        }
        let json = args.flag("json")
        let context = try Context()
        let admin = try ClientOptions.admin(args, context: context)
        let now = ULIDGenerator.systemMilliseconds()
        if !json, states.contains(.queued) {
            // Why the queued jobs do not move, when they do not.
            if let since = (try? admin.status())?.queue.pausedSince {
                Console.out("dispatch: PAUSED \(PauseCommand.held(since: since))\n")
            }
        }
        for (index, state) in states.enumerated() {
            let list: JobList
            do {
                list = try admin.jobList(state, offset: offset, limit: limit, after: after)
            } catch {
                throw error.runtime
            }
            if json {
                for (position, job) in list.jobs.enumerated() { Console.out(line(job, state: state, position: Int(list.offset) + position + 1)) }
                continue
            }
            if index > 0 { Console.out("") }
            Console.out(heading(list, state: state))
            for (position, job) in list.jobs.enumerated() {
                Console.out(row(job, state: state, position: Int(list.offset) + position + 1, now: now))
            }
            if states.count == 1, let last = list.jobs.last?.cursor, list.offset + UInt64(list.jobs.count) < list.total {
                Console.out("next page: darkroom jobs \(state.rawValue) --limit \(limit) --after \(last)")
            }
        }
        return 0
    }

    static func cursorShape(_ state: JobListState) -> String {
        switch state {
        case .queued: "PRIORITY-JOBID"
        case .delayed: "UNIXMS-JOBID"
        case .running: "the job id"
        }
    }

    static func heading(_ list: JobList, state: JobListState) -> String {
        let shown = list.jobs.isEmpty || list.jobs.count == Int(list.total) ? ""
            : list.offset == 0 ? ", the first \(list.jobs.count)"
            : list.jobs.count == 1 ? ", number \(list.offset + 1)"
            : ", \(list.offset + 1) to \(list.offset + UInt64(list.jobs.count))"
        let order = switch state {
        case .running: "by job id"
        case .queued: "in the order workers get them"
        case .delayed: "soonest first"
        }
        return "\(state.rawValue): \(list.total)\(list.total > 0 ? " (\(order)\(shown))" : "")"
    }

    static func row(_ job: ListedJob, state: JobListState, position: Int, now: UInt64) -> String {
        let number = String(position)
        var text = "  " + String(repeating: " ", count: max(0, 4 - number.count)) + number + ". \(job.jobID)  p\(job.priority)"
        switch state {
        case .running:
            text += "  attempt \(job.attempt) on \(job.worker ?? "?")"
            if job.cancelling == true { text += " (being cancelled)" }
        case .queued:
            if job.attempt > 0 { text += "  after \(job.attempt) attempt(s)" }
        case .delayed:
            if let at = job.notBefore { text += "  until \(JobCommand.time(at))" }
        }
        if let expires = job.expires {
            text += expires > now ? "  expires \(JobCommand.time(expires))" : "  expired"
        }
        return text + "  \(job.source)"
    }

    static func line(_ job: ListedJob, state: JobListState, position: Int) -> String {
        var o = JSONObject()
        o.set("state", state.rawValue)
        o.set("position", position)
        o.set("jobId", job.jobID.description)
        o.set("priority", Int(job.priority))
        o.set("source", job.source)
        o.set("attempt", Int(job.attempt))
        if let cursor = job.cursor { o.set("cursor", cursor) }
        if let worker = job.worker { o.set("worker", worker) }
        if job.cancelling == true { o.set("cancelling", true) }
        if let at = job.notBefore { o.set("notBefore", Int(clamping: at)) }
        if let expires = job.expires { o.set("expires", Int(clamping: expires)) }
        return o.text
    }
}
