// The frontend: producers and admin clients (DEALER) talk to the broker
// (ROUTER) at `Wire.Endpoint.frontend`. Every request carries a request id
// chosen by the client; the reply echoes it, so a client may have many
// requests outstanding and match replies as they come.

/// SUBMIT (client → broker): queue one job. Answered by ACCEPTED once the job
/// is committed to disk, or REJECTED.
///
///     2 request id   u64
///     3 priority     u8, 0…9, higher runs first
///     4 options      8 bytes, see `JobOptions`
///     5 pipeline     text, 1…4096 bytes: any form pipeline.md accepts; the
///                    broker parses it and keeps its canonical form
///     6 source name  text, 0…1024 bytes
///     7 image        JPEG bytes, at least 1
///     8 submit key   optional: 1…64 bytes of printable ASCII without spaces;
///                    empty for none when frame 9 follows
///     9 not before   optional: u64, Unix ms; no worker gets the job earlier
///                    (0 when frame 10 follows and the job may run at once)
///    10 attempts     optional: u16, 1…1000, the job's most counted attempts
///                    (empty for the broker's own when frame 11 follows)
///    11 expires      optional: u64, Unix ms, the job's deadline (0 for none
///                    when frame 12 follows)
///    12 time limit   optional: u32, seconds, 1…604800, the longest an
///                    attempt may run on a worker
public struct Submit: WireMessage {
    public static let command = Command.submit
    public var requestID: UInt64
    public var priority: UInt8
    public var options: JobOptions
    public var pipeline: String
    public var sourceName: String
    public var image: [UInt8]
    /// The client's name for this job (frame 8, optional): a SUBMIT whose
    /// key the broker accepted before is answered with the first job
    /// instead of queuing another, so resending after a timeout is safe.
    /// The broker looks the key up only after its other checks (image size,
    /// JPEG marker, pipeline, not shutting down): a resend those refuse is
    /// REJECTED although its job is queued (drk1.md section 5.1).
    public var submitKey: String?
    /// When the job may run (frame 9, optional; Unix ms by the broker's
    /// clock): until then it waits as `delayed`. nil, 0 or a time past: at once.
    public var notBefore: UInt64?
    /// The most counted attempts before a retryable failure makes the job
    /// dead (frame 10, optional): nil for the broker's own setting.
    public var maxAttempts: UInt16?
    /// The job's deadline (frame 11, optional; Unix ms by the broker's
    /// clock): a job no worker has started by then is not run, and ends
    /// `cancelled` as `job.expired`. nil or 0: none.
    public var expires: UInt64?
    /// The longest an attempt may run on a worker, in seconds (frame 12,
    /// optional): sent in each JOB; the worker fails an attempt that runs
    /// longer with `job.timeout`. nil: the worker's own limit alone.
    public var timeLimit: UInt32?

    public init(requestID: UInt64, priority: UInt8, options: JobOptions, pipeline: String, sourceName: String, image: [UInt8],
                submitKey: String? = nil, notBefore: UInt64? = nil, maxAttempts: UInt16? = nil, expires: UInt64? = nil,
                timeLimit: UInt32? = nil) {
        self.requestID = requestID
        self.priority = priority
        self.options = options
        self.pipeline = pipeline
        self.sourceName = sourceName
        self.image = image
        self.submitKey = submitKey
        self.notBefore = notBefore
        self.maxAttempts = maxAttempts
        self.expires = expires
        self.timeLimit = timeLimit
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        priority = try r.u8("priority", 0...Wire.maxPriority)
        options = try r.options("options")
        pipeline = try r.pipeline()
        sourceName = try r.sourceName()
        image = try r.blob("image", minimum: 1)
        submitKey = r.hasMoreFrames && !r.skipEmptyFrameFollowedByMore() ? try r.submitKey() : nil
        notBefore = r.hasMoreFrames ? try r.u64("not before") : nil
        maxAttempts = r.hasMoreFrames && !r.skipEmptyFrameFollowedByMore() ? try r.u16("attempts", Wire.Limit.maxAttempts) : nil
        expires = r.hasMoreFrames ? try r.u64("expires") : nil
        timeLimit = r.hasMoreFrames ? try r.u32("time limit", Wire.Limit.timeLimitSeconds) : nil
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.u8(priority)
        w.options(options)
        w.text(pipeline)
        w.text(sourceName)
        w.blob(image)
        // The optional frames are positional: one given needs those before it.
        if notBefore != nil || maxAttempts != nil || expires != nil || timeLimit != nil {
            w.text(submitKey ?? "")
            w.u64(notBefore ?? 0)
            if let maxAttempts {
                w.u16(maxAttempts)
            } else if expires != nil || timeLimit != nil {
                w.text("")
            }
            if expires != nil || timeLimit != nil { w.u64(expires ?? 0) }
            if let timeLimit { w.u32(timeLimit) }
        } else if let submitKey {
            w.text(submitKey)
        }
    }
}

/// ACCEPTED (broker → client): the job is on disk and will run.
///
///     2 request id  u64
///     3 job id      ULID
///     4 event seq   u64, sequence number of the job's "accepted" event
public struct Accepted: WireMessage {
    public static let command = Command.accepted
    public var requestID: UInt64
    public var jobID: ULID
    public var eventSeq: UInt64

    public init(requestID: UInt64, jobID: ULID, eventSeq: UInt64) {
        self.requestID = requestID
        self.jobID = jobID
        self.eventSeq = eventSeq
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        jobID = try r.ulid("job id")
        eventSeq = try r.u64("event seq")
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.ulid(jobID)
        w.u64(eventSeq)
    }
}

/// REJECTED (broker → client): the well-formed SUBMIT was not queued.
///
///     2 request id  u64
///     3 code        u16 (queue-full, invalid-pipeline, invalid-image, too-large, shutting-down, forbidden, internal)
///     4 reason      text, one line
public struct Rejected: WireMessage {
    public static let command = Command.rejected
    public var requestID: UInt64
    public var code: ErrorCode
    public var reason: String

    public init(requestID: UInt64, code: ErrorCode, reason: String) {
        self.requestID = requestID
        self.code = code
        self.reason = reason
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        code = ErrorCode(rawValue: try r.u16("code"))
        reason = try r.text("reason", bytes: 0...Wire.Limit.reasonBytes)
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.u16(code.rawValue)
        w.text(reason)
    }
}

/// STATUS (client → broker): ask for a `BrokerStatus`.
///
///     2 request id  u64
public struct StatusRequest: WireMessage {
    public static let command = Command.status
    public var requestID: UInt64
    public init(requestID: UInt64) { self.requestID = requestID }
    public init(from r: inout MessageReader) throws(ProtocolError) { requestID = try r.u64("request id") }
    public func write(to w: inout MessageWriter) { w.u64(requestID) }
}

/// STATUS-REPLY (broker → client).
///
///     2 request id  u64
///     3 status      JSON object, see `BrokerStatus`
public struct StatusReply: WireMessage {
    public static let command = Command.statusReply
    public var requestID: UInt64
    public var status: BrokerStatus

    public init(requestID: UInt64, status: BrokerStatus) {
        self.requestID = requestID
        self.status = status
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        status = try r.json("status", as: BrokerStatus.self)
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.json(status)
    }
}

/// REPLAY (client → broker): send me the stored events from `from` on.
/// The broker answers with EVENT messages (same frames as on the events
/// socket, without the topic), in seq order, then REPLAY-END.
///
///     2 request id  u64
///     3 from seq    u64, first seq wanted (inclusive)
///     4 limit       u32, most events to send; 0 = the broker's default
public struct ReplayRequest: WireMessage {
    public static let command = Command.replay
    public var requestID: UInt64
    public var fromSeq: UInt64
    public var limit: UInt32

    public init(requestID: UInt64, fromSeq: UInt64, limit: UInt32 = 0) {
        self.requestID = requestID
        self.fromSeq = fromSeq
        self.limit = limit
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        fromSeq = try r.u64("from seq")
        limit = try r.u32("limit")
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.u64(fromSeq)
        w.u32(limit)
    }
}

/// REPLAY-END (broker → client): the end of one REPLAY's events.
///
///     2 request id  u64
///     3 last seq    u64, seq of the last EVENT sent; if none, min(from seq − 1,
///                   head seq), a from seq of 0 counting as 1
///     4 head seq    u64, the newest seq the broker has; more remain if last < head
public struct ReplayEnd: WireMessage {
    public static let command = Command.replayEnd
    public var requestID: UInt64
    public var lastSeq: UInt64
    public var headSeq: UInt64

    public init(requestID: UInt64, lastSeq: UInt64, headSeq: UInt64) {
        self.requestID = requestID
        self.lastSeq = lastSeq
        self.headSeq = headSeq
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        lastSeq = try r.u64("last seq")
        headSeq = try r.u64("head seq")
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.u64(lastSeq)
        w.u64(headSeq)
    }
}

/// DEAD-LIST (client → broker): list dead jobs, oldest first.
///
///     2 request id  u64
///     3 limit       u32, 1…1000
///     4 after       empty, or a job id: list jobs after this one
public struct DeadListRequest: WireMessage {
    public static let command = Command.deadList
    public var requestID: UInt64
    public var limit: UInt32
    public var after: ULID?

    public init(requestID: UInt64, limit: UInt32, after: ULID? = nil) {
        self.requestID = requestID
        self.limit = limit
        self.after = after
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        limit = try r.u32("limit", 1...Wire.Limit.maxListLimit)
        after = try r.optionalULID("after")
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.u32(limit)
        w.optionalULID(after)
    }
}

/// DEAD-LIST-REPLY (broker → client).
///
///     2 request id  u64
///     3 dead list   JSON object, see `DeadList`
public struct DeadListReply: WireMessage {
    public static let command = Command.deadListReply
    public var requestID: UInt64
    public var list: DeadList

    public init(requestID: UInt64, list: DeadList) {
        self.requestID = requestID
        self.list = list
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        list = try r.json("dead list", as: DeadList.self)
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.json(list)
    }
}

/// JOB-INFO (client → broker): one job's story.
///
///     2 request id  u64
///     3 job id      ULID
public struct JobInfoRequest: WireMessage {
    public static let command = Command.jobInfo
    public var requestID: UInt64
    public var jobID: ULID

    public init(requestID: UInt64, jobID: ULID) {
        self.requestID = requestID
        self.jobID = jobID
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        jobID = try r.ulid("job id")
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.ulid(jobID)
    }
}

/// JOB-INFO-REPLY (broker → client).
///
///     2 request id  u64
///     3 story       JSON object, see `JobStory`
public struct JobInfoReply: WireMessage {
    public static let command = Command.jobInfoReply
    public var requestID: UInt64
    public var story: JobStory

    public init(requestID: UInt64, story: JobStory) {
        self.requestID = requestID
        self.story = story
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        story = try r.json("story", as: JobStory.self)
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.json(story)
    }
}

/// Which jobs CANCEL acts on: every queued job (ready or delayed), or one job.
public enum CancelTarget: Sendable, Hashable, CustomStringConvertible {
    case queued
    case job(ULID)

    public var description: String {
        switch self {
        case .queued: "queued"
        case .job(let id): id.description
        }
    }
}

/// CANCEL (client → broker): stop jobs for good. A queued job is cancelled
/// at once; a running one is asked to stop on its worker, and its
/// `cancelled` event follows when the worker has stopped (section 5.6).
/// Answered by OK (count = jobs cancelled or being cancelled) or ERROR
/// not-found.
///
///     2 request id  u64
///     3 target      text: "queued" or a job id
public struct CancelRequest: WireMessage {
    public static let command = Command.cancel
    public var requestID: UInt64
    public var target: CancelTarget

    public init(requestID: UInt64, target: CancelTarget) {
        self.requestID = requestID
        self.target = target
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        target = try r.target(word: "queued").map(CancelTarget.job) ?? .queued
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.text(target.description)
    }
}

/// PAUSE (admin → broker): stop sending JOBs to workers until RESUME
/// (section 5.7). SUBMITs are still accepted and queued, running jobs
/// finish, and the pause outlives a restart. Answered by OK (count 1 when
/// dispatch was running, 0 when it was already paused).
///
///     2 request id  u64
public struct PauseRequest: WireMessage {
    public static let command = Command.pause
    public var requestID: UInt64
    public init(requestID: UInt64) { self.requestID = requestID }
    public init(from r: inout MessageReader) throws(ProtocolError) { requestID = try r.u64("request id") }
    public func write(to w: inout MessageWriter) { w.u64(requestID) }
}

/// RESUME (admin → broker): send JOBs again after PAUSE (section 5.7).
/// Answered by OK (count 1 when dispatch was paused, 0 when it was not).
///
///     2 request id  u64
public struct ResumeRequest: WireMessage {
    public static let command = Command.resume
    public var requestID: UInt64
    public init(requestID: UInt64) { self.requestID = requestID }
    public init(from r: inout MessageReader) throws(ProtocolError) { requestID = try r.u64("request id") }
    public func write(to w: inout MessageWriter) { w.u64(requestID) }
}

/// Which jobs JOB-LIST lists.
public enum JobListState: String, Sendable, Hashable, CaseIterable {
    /// Ready to run, in the order they will be dispatched.
    case queued
    /// Waiting for their time (scheduled, or a retry's backoff), soonest first.
    case delayed
    /// On a worker (or held for one reconnecting), by job id.
    case running
}

/// Where a page of JOB-LIST starts: after a job's place in its state's
/// order, given by the job's sort key, so that a page goes on from where
/// the last one ended although the jobs before it have moved on (section
/// 5.8). As text: `PRIORITY-JOBID` for queued jobs, `NOTBEFORE-JOBID` (Unix
/// ms) for delayed ones, the job id alone for running ones; each listed job
/// carries its own (`ListedJob.cursor`).
public enum JobListCursor: Sendable, Hashable {
    case queued(priority: UInt8, jobID: ULID)
    case delayed(notBefore: UInt64, jobID: ULID)
    case running(jobID: ULID)

    /// Reads a cursor of `state`'s jobs; nil when `text` is not one.
    public init?(_ text: String, state: JobListState) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        switch (state, parts.count) {
        case (.running, 1):
            guard let id = ULID(String(parts[0])) else { return nil }
            self = .running(jobID: id)
        case (.queued, 2):
            guard parts[0].allSatisfy(\.isASCII), let priority = UInt8(parts[0]), priority <= Wire.maxPriority,
                  let id = ULID(String(parts[1])) else { return nil }
            self = .queued(priority: priority, jobID: id)
        case (.delayed, 2):
            guard parts[0].allSatisfy(\.isASCII), let time = UInt64(parts[0]), let id = ULID(String(parts[1])) else { return nil }
            self = .delayed(notBefore: time, jobID: id)
        default:
            return nil
        }
    }

    public var text: String {
        switch self {
        case let .queued(priority, id): "\(priority)-\(id)"
        case let .delayed(time, id): "\(time)-\(id)"
        case let .running(id): id.description
        }
    }
}

/// JOB-LIST (client → broker): a page of the jobs in one state, from the
/// broker's memory (section 5.8). Answered by JOB-LIST-REPLY.
///
///     2 request id  u64
///     3 state       text: queued, delayed or running
///     4 offset      u32, jobs to skip (after the cursor, when there is one)
///     5 limit       u32, 1...1000
///     6 after       optional: text, a cursor of the state (`JobListCursor`)
public struct JobListRequest: WireMessage {
    public static let command = Command.jobList
    public var requestID: UInt64
    public var state: JobListState
    public var offset: UInt32
    public var limit: UInt32
    /// List the jobs that come after this place in the state's order.
    public var after: JobListCursor?

    public init(requestID: UInt64, state: JobListState, offset: UInt32 = 0, limit: UInt32, after: JobListCursor? = nil) {
        self.requestID = requestID
        self.state = state
        self.offset = offset
        self.limit = limit
        self.after = after
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        let i = r.index
        let text = try r.text("state", bytes: 1...16)
        guard let state = JobListState(rawValue: text) else {
            throw r.error(frame: i, "state", "must be queued, delayed or running, got '\(text)'")
        }
        self.state = state
        offset = try r.u32("offset", 0...UInt32.max)
        limit = try r.u32("limit", 1...Wire.Limit.maxListLimit)
        if r.hasMoreFrames {
            let frame = r.index
            let text = try r.text("after", bytes: 1...64)
            guard let cursor = JobListCursor(text, state: state) else {
                throw r.error(frame: frame, "after", "is not a place among the \(state.rawValue) jobs: '\(text)'")
            }
            after = cursor
        } else {
            after = nil
        }
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.text(state.rawValue)
        w.u32(offset)
        w.u32(limit)
        if let after { w.text(after.text) }
    }
}

/// JOB-LIST-REPLY (broker → client).
///
///     2 request id  u64
///     3 jobs        JSON object, see `JobList`
public struct JobListReply: WireMessage {
    public static let command = Command.jobListReply
    public var requestID: UInt64
    public var list: JobList

    public init(requestID: UInt64, list: JobList) {
        self.requestID = requestID
        self.list = list
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        list = try r.json("jobs", as: JobList.self)
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.json(list)
    }
}

/// Which dead jobs DEAD-RETRY or DEAD-DISCARD acts on: the text "all" or a job id.
public enum DeadTarget: Sendable, Hashable, CustomStringConvertible {
    case all
    case job(ULID)

    public var description: String {
        switch self {
        case .all: "all"
        case .job(let id): id.description
        }
    }
}

extension MessageReader {
    mutating func deadTarget() throws(ProtocolError) -> DeadTarget {
        try target(word: "all").map(DeadTarget.job) ?? .all
    }

    /// A target frame: the one `word`, read as nil, or a job id.
    mutating func target(word: String) throws(ProtocolError) -> ULID? {
        let i = index
        let text = try self.text("target", bytes: 1...26)
        if text == word { return nil }
        guard let id = ULID(text) else { throw error(frame: i, "target", "must be \"\(word)\" or a job id, got '\(text)'") }
        return id
    }
}

/// DEAD-RETRY (client → broker): queue dead jobs again, with fresh attempts.
/// Answered by OK (count = jobs requeued) or ERROR not-found.
///
///     2 request id  u64
///     3 target      text: "all" or a job id
public struct DeadRetry: WireMessage {
    public static let command = Command.deadRetry
    public var requestID: UInt64
    public var target: DeadTarget
    public init(requestID: UInt64, target: DeadTarget) {
        self.requestID = requestID
        self.target = target
    }
    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        target = try r.deadTarget()
    }
    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.text(target.description)
    }
}

/// DEAD-DISCARD (client → broker): forget dead jobs for good.
/// Answered by OK (count = jobs discarded) or ERROR not-found.
///
///     2 request id  u64
///     3 target      text: "all" or a job id
public struct DeadDiscard: WireMessage {
    public static let command = Command.deadDiscard
    public var requestID: UInt64
    public var target: DeadTarget
    public init(requestID: UInt64, target: DeadTarget) {
        self.requestID = requestID
        self.target = target
    }
    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        target = try r.deadTarget()
    }
    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.text(target.description)
    }
}

/// Any message on the broker frontend, in either direction.
public enum FrontendMessage: Sendable, Equatable {
    case submit(Submit)
    case accepted(Accepted)
    case rejected(Rejected)
    case status(StatusRequest)
    case statusReply(StatusReply)
    case replay(ReplayRequest)
    case replayEnd(ReplayEnd)
    case event(Event)
    case deadList(DeadListRequest)
    case deadListReply(DeadListReply)
    case deadRetry(DeadRetry)
    case deadDiscard(DeadDiscard)
    case jobInfo(JobInfoRequest)
    case jobInfoReply(JobInfoReply)
    case cancel(CancelRequest)
    case pause(PauseRequest)
    case jobList(JobListRequest)
    case jobListReply(JobListReply)
    case resume(ResumeRequest)
    case ping(Ping)
    case pong(Pong)
    case ok(OKReply)
    case error(ErrorReply)

    var body: any WireMessage {
        switch self {
        case .submit(let m): m
        case .accepted(let m): m
        case .rejected(let m): m
        case .status(let m): m
        case .statusReply(let m): m
        case .replay(let m): m
        case .replayEnd(let m): m
        case .event(let m): m
        case .deadList(let m): m
        case .deadListReply(let m): m
        case .deadRetry(let m): m
        case .deadDiscard(let m): m
        case .jobInfo(let m): m
        case .jobInfoReply(let m): m
        case .cancel(let m): m
        case .pause(let m): m
        case .jobList(let m): m
        case .jobListReply(let m): m
        case .resume(let m): m
        case .ping(let m): m
        case .pong(let m): m
        case .ok(let m): m
        case .error(let m): m
        }
    }

    public var command: Command { type(of: body).command }

    public func frames() -> [[UInt8]] { body.frames() }

    /// Decodes a message of this socket, in either direction.
    public static func decode(_ frames: [[UInt8]]) throws(ProtocolError) -> FrontendMessage {
        try decode(frames, receiving: nil)
    }

    /// Decodes a message read by `receiver`: a command that travels the
    /// other way is `unexpected-command`, whatever its fields (section 3.2).
    public static func decode(_ frames: [[UInt8]], to receiver: Receiver) throws(ProtocolError) -> FrontendMessage {
        try decode(frames, receiving: (Command.sent(to: receiver, on: .frontend), WireSocket.frontend.name(of: receiver)))
    }

    static func decode(_ frames: [[UInt8]], receiving: (commands: Set<Command>, receiver: String)?) throws(ProtocolError) -> FrontendMessage {
        var r = try MessageReader(frames, expecting: Command.frontend, context: "on the frontend", receiving: receiving)
        let message: FrontendMessage
        switch r.command {
        case .submit: message = .submit(try Submit(from: &r))
        case .accepted: message = .accepted(try Accepted(from: &r))
        case .rejected: message = .rejected(try Rejected(from: &r))
        case .status: message = .status(try StatusRequest(from: &r))
        case .statusReply: message = .statusReply(try StatusReply(from: &r))
        case .replay: message = .replay(try ReplayRequest(from: &r))
        case .replayEnd: message = .replayEnd(try ReplayEnd(from: &r))
        case .event: message = .event(try Event(from: &r))
        case .deadList: message = .deadList(try DeadListRequest(from: &r))
        case .deadListReply: message = .deadListReply(try DeadListReply(from: &r))
        case .deadRetry: message = .deadRetry(try DeadRetry(from: &r))
        case .deadDiscard: message = .deadDiscard(try DeadDiscard(from: &r))
        case .jobInfo: message = .jobInfo(try JobInfoRequest(from: &r))
        case .jobInfoReply: message = .jobInfoReply(try JobInfoReply(from: &r))
        case .cancel: message = .cancel(try CancelRequest(from: &r))
        case .pause: message = .pause(try PauseRequest(from: &r))
        case .jobList: message = .jobList(try JobListRequest(from: &r))
        case .jobListReply: message = .jobListReply(try JobListReply(from: &r))
        case .resume: message = .resume(try ResumeRequest(from: &r))
        case .ping: message = .ping(try Ping(from: &r))
        case .pong: message = .pong(try Pong(from: &r))
        case .ok: message = .ok(try OKReply(from: &r))
        case .error: message = .error(try ErrorReply(from: &r))
        default: throw ProtocolError(.unexpectedCommand, "\(r.command.name) is not valid on the frontend")
        }
        try r.finish()
        return message
    }
}

