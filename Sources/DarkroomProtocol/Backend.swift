// The backend: workers (DEALER) talk to the broker (ROUTER) at
// `Wire.Endpoint.backend`. A worker sends READY, then HOLDING when it still
// has jobs from an earlier connection, then CREDIT; the broker sends at most
// as many JOBs as credit outstanding; the worker answers each JOB with DONE
// or FAIL. Both sides send HEARTBEAT when idle. No request ids here: jobs are
// named by job id and attempt.

/// READY (worker → broker): a worker joins. Grants no credit by itself.
///
///     2 worker id  text, printable ASCII, 1…64 bytes (a ULID is recommended)
///     3 host       text, 1…255 bytes
///     4 pid        u32
///     5 slots      u32, 1…4096, the most jobs the worker holds at once
public struct Ready: WireMessage {
    public static let command = Command.ready
    public var workerID: String
    public var host: String
    public var pid: UInt32
    public var slots: UInt32

    public init(workerID: String, host: String, pid: UInt32, slots: UInt32) {
        self.workerID = workerID
        self.host = host
        self.pid = pid
        self.slots = slots
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        workerID = try r.workerID(allowEmpty: false)
        host = try r.text("host", bytes: 1...Wire.Limit.hostBytes)
        pid = try r.u32("pid")
        slots = try r.u32("slots", 1...Wire.Limit.maxSlots)
    }

    public func write(to w: inout MessageWriter) {
        w.text(workerID)
        w.text(host)
        w.u32(pid)
        w.u32(slots)
    }
}

extension MessageReader {
    /// A worker id (section 8): 1–64 bytes of printable ASCII without
    /// spaces, as in READY; EVENT leaves it empty when no worker is concerned.
    mutating func workerID(allowEmpty: Bool) throws(ProtocolError) -> String {
        try token("worker id", bytes: (allowEmpty ? 0 : 1)...Wire.Limit.workerIDBytes)
    }
}

/// CREDIT (worker → broker): `count` more slots are free.
///
///     2 count  u32, at least 1
public struct Credit: WireMessage {
    public static let command = Command.credit
    public var count: UInt32
    public init(count: UInt32) { self.count = count }
    public init(from r: inout MessageReader) throws(ProtocolError) { count = try r.u32("count", 1...UInt32.max) }
    public func write(to w: inout MessageWriter) { w.u32(count) }
}

/// JOB (broker → worker): run one attempt of a job. Uses one credit.
///
///     2 job id       ULID
///     3 attempt      u32, from 1
///     4 options      8 bytes, see `JobOptions`
///     5 pipeline     text, 1…4096 bytes
///     6 source name  text, 0…1024 bytes
///     7 image        JPEG bytes, at least 1
///     8 time limit   optional: u32, seconds, 1…604800 (SUBMIT frame 12)
public struct JobDispatch: WireMessage {
    public static let command = Command.job
    /// The image's index in `frames()` (frame 7; the optional time limit
    /// follows it), for a sender that sends the image from elsewhere.
    public static let imageFrame = 7
    public var jobID: ULID
    public var attempt: UInt32
    public var options: JobOptions
    public var pipeline: String
    public var sourceName: String
    public var image: [UInt8]
    /// The longest the attempt may run, in seconds, from when the worker
    /// starts processing it; nil when the job has no limit of its own.
    public var timeLimit: UInt32?

    public init(jobID: ULID, attempt: UInt32, options: JobOptions, pipeline: String, sourceName: String, image: [UInt8],
                timeLimit: UInt32? = nil) {
        self.jobID = jobID
        self.attempt = attempt
        self.options = options
        self.pipeline = pipeline
        self.sourceName = sourceName
        self.image = image
        self.timeLimit = timeLimit
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        jobID = try r.ulid("job id")
        attempt = try r.u32("attempt", 1...UInt32.max)
        options = try r.options("options")
        pipeline = try r.pipeline()
        sourceName = try r.sourceName()
        image = try r.blob("image", minimum: 1)
        timeLimit = r.hasMoreFrames ? try r.u32("time limit", Wire.Limit.timeLimitSeconds) : nil
    }

    public func write(to w: inout MessageWriter) {
        w.ulid(jobID)
        w.u32(attempt)
        w.options(options)
        w.text(pipeline)
        w.text(sourceName)
        w.blob(image)
        if let timeLimit { w.u32(timeLimit) }
    }
}

/// DONE (worker → broker): the attempt succeeded and the storage node holds
/// the result (STORED was received).
///
///     2 job id     ULID
///     3 attempt    u32, as in the JOB
///     4 record id  ULID, from STORED
/// CANCEL-JOB (broker → worker): stop running this attempt of a job,
/// store nothing for it, and answer FAIL with `job.cancelled` (or DONE if
/// it was already stored). A worker that no longer runs it ignores it.
///
///     2 job id   ULID
///     3 attempt  u32
public struct CancelJob: WireMessage {
    public static let command = Command.cancelJob
    public var jobID: ULID
    public var attempt: UInt32

    public init(jobID: ULID, attempt: UInt32) {
        self.jobID = jobID
        self.attempt = attempt
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        jobID = try r.ulid("job id")
        attempt = try r.u32("attempt", 1...UInt32.max)
    }

    public func write(to w: inout MessageWriter) {
        w.ulid(jobID)
        w.u32(attempt)
    }
}

public struct Done: WireMessage {
    public static let command = Command.done
    public var jobID: ULID
    public var attempt: UInt32
    public var recordID: ULID

    public init(jobID: ULID, attempt: UInt32, recordID: ULID) {
        self.jobID = jobID
        self.attempt = attempt
        self.recordID = recordID
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        jobID = try r.ulid("job id")
        attempt = try r.u32("attempt", 1...UInt32.max)
        recordID = try r.ulid("record id")
    }

    public func write(to w: inout MessageWriter) {
        w.ulid(jobID)
        w.u32(attempt)
        w.ulid(recordID)
    }
}

/// FAIL (worker → broker): the attempt failed.
///
///     2 job id      ULID
///     3 attempt     u32, as in the JOB
///     4 retryable   u8, 0 or 1
///     5 step index  i32, the failing step from 1, or 0 when not in a pipeline step
///     6 step        text, the step's canonical text, 0…1024 bytes
///     7 error code  text, 1…64 bytes (`image.corrupt`, `store.unreachable`…)
///     8 reason      text, one line, 0…4096 bytes
public struct Fail: WireMessage {
    public static let command = Command.fail
    public var jobID: ULID
    public var attempt: UInt32
    public var retryable: Bool
    public var failure: FailureDetail

    public init(jobID: ULID, attempt: UInt32, retryable: Bool, failure: FailureDetail) {
        self.jobID = jobID
        self.attempt = attempt
        self.retryable = retryable
        self.failure = failure
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        jobID = try r.ulid("job id")
        attempt = try r.u32("attempt", 1...UInt32.max)
        retryable = try r.bool("retryable")
        failure = try r.failure(requireCode: true)
    }

    public func write(to w: inout MessageWriter) {
        w.ulid(jobID)
        w.u32(attempt)
        w.bool(retryable)
        w.failure(failure)
    }
}

/// HEARTBEAT (both ways): I am alive. No fields.
public struct Heartbeat: WireMessage {
    public static let command = Command.heartbeat
    public init() {}
    public init(from r: inout MessageReader) throws(ProtocolError) {}
    public func write(to w: inout MessageWriter) {}
}

/// DISCONNECT (both ways): I am leaving / I do not know you. No fields.
/// A worker that receives it opens a new connection and sends READY again,
/// then HOLDING for the jobs it still has.
public struct Disconnect: WireMessage {
    public static let command = Command.disconnect
    public init() {}
    public init(from r: inout MessageReader) throws(ProtocolError) {}
    public func write(to w: inout MessageWriter) {}
}

/// HOLDING (worker → broker): the jobs a worker still has when it opens a new
/// connection, sent directly after READY and at most once per connection.
/// After a broker restart, or when a worker reconnects, the broker holds
/// the jobs that were leased for a short reclaim window; the jobs listed
/// here stay leased to the worker, with no new attempt, instead of being
/// run a second time and charged an attempt.
///
///     2 held jobs  bytes: 0…4096 entries of 30 bytes each, back to back:
///                  job id (ULID, 26 ASCII bytes), attempt (u32, at least 1)
///
/// A frame whose length is not a multiple of 30, that holds more than 4096
/// entries, names a job twice, or holds a bad job id or an attempt of 0 is
/// malformed as a whole: the broker must not settle half a list.
public struct Holding: WireMessage {
    public static let command = Command.holding
    /// Bytes per entry: a 26-byte ULID and a u32 attempt.
    public static let entryBytes = 30
    /// The most entries one HOLDING carries: a worker runs at most
    /// `Wire.Limit.maxSlots` jobs, and lists only jobs that held a slot.
    public static let maxEntries = Int(Wire.Limit.maxSlots)

    /// One job the worker holds, with the attempt of the JOB that carried it.
    public struct Entry: Sendable, Hashable {
        public var jobID: ULID
        public var attempt: UInt32
        public init(jobID: ULID, attempt: UInt32) {
            self.jobID = jobID
            self.attempt = attempt
        }
    }

    /// The held jobs, in the order the worker listed them.
    public var jobs: [Entry]

    public init(jobs: [Entry]) { self.jobs = jobs }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        let i = r.index
        let frame = try r.blob("held jobs")
        func malformed(_ problem: String) -> ProtocolError { r.error(frame: i, "held jobs", problem) }
        guard frame.count % Holding.entryBytes == 0 else {
            throw malformed("is \(frame.count) bytes, must be a multiple of \(Holding.entryBytes)")
        }
        let count = frame.count / Holding.entryBytes
        guard count <= Holding.maxEntries else {
            throw malformed("holds \(count) jobs, must be at most \(Holding.maxEntries)")
        }
        var jobs: [Entry] = []
        jobs.reserveCapacity(count)
        var seen = Set<ULID>(minimumCapacity: count)
        for index in 0..<count {
            let start = index * Holding.entryBytes
            let idBytes = frame[start ..< start + 26]
            guard let jobID = ULID.parse(idBytes.span, values: ULID.strictValues) else {
                throw malformed("job \(index + 1) of \(count): job id \(ULID.notWireForm(idBytes))")
            }
            let attempt = UInt32(FrameReader.bigEndian(frame[start + 26 ..< start + Holding.entryBytes]))
            guard attempt >= 1 else {
                throw malformed("job \(index + 1) of \(count): attempt is 0, must be 1…\(UInt32.max)")
            }
            guard seen.insert(jobID).inserted else {
                throw malformed("job \(index + 1) of \(count): job \(jobID) is listed twice")
            }
            jobs.append(Entry(jobID: jobID, attempt: attempt))
        }
        self.jobs = jobs
    }

    public func write(to w: inout MessageWriter) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(jobs.count * Holding.entryBytes)
        for entry in jobs {
            entry.jobID.appendASCII(to: &bytes)
            bytes.appendBigEndian(entry.attempt)
        }
        w.blob(bytes)
    }
}

/// Any message on the broker backend, in either direction.
public enum BackendMessage: Sendable, Equatable {
    case ready(Ready)
    case credit(Credit)
    case job(JobDispatch)
    case done(Done)
    case fail(Fail)
    case heartbeat
    case disconnect
    case holding(Holding)
    case cancelJob(CancelJob)
    case error(ErrorReply)
    /// PING on the backend: a health probe with a worker key checks that
    /// the broker answers there (section 4); workers do not send it.
    case ping(Ping)
    case pong(Pong)

    var body: any WireMessage {
        switch self {
        case .ready(let m): m
        case .credit(let m): m
        case .job(let m): m
        case .done(let m): m
        case .fail(let m): m
        case .heartbeat: Heartbeat()
        case .disconnect: Disconnect()
        case .holding(let m): m
        case .cancelJob(let m): m
        case .error(let m): m
        case .ping(let m): m
        case .pong(let m): m
        }
    }

    public var command: Command { type(of: body).command }

    public func frames() -> [[UInt8]] { body.frames() }

    /// Decodes a message of this socket, in either direction.
    public static func decode(_ frames: [[UInt8]]) throws(ProtocolError) -> BackendMessage {
        try decode(frames, receiving: nil)
    }

    /// Decodes a message read by `receiver`: a command that travels the
    /// other way is `unexpected-command`, whatever its fields (section 3.2).
    public static func decode(_ frames: [[UInt8]], to receiver: Receiver) throws(ProtocolError) -> BackendMessage {
        try decode(frames, receiving: (Command.sent(to: receiver, on: .backend), WireSocket.backend.name(of: receiver)))
    }

    static func decode(_ frames: [[UInt8]], receiving: (commands: Set<Command>, receiver: String)?) throws(ProtocolError) -> BackendMessage {
        var r = try MessageReader(frames, expecting: Command.backend, context: "on the backend", receiving: receiving)
        let message: BackendMessage
        switch r.command {
        case .ready: message = .ready(try Ready(from: &r))
        case .credit: message = .credit(try Credit(from: &r))
        case .job: message = .job(try JobDispatch(from: &r))
        case .done: message = .done(try Done(from: &r))
        case .fail: message = .fail(try Fail(from: &r))
        case .heartbeat: message = .heartbeat
        case .disconnect: message = .disconnect
        case .holding: message = .holding(try Holding(from: &r))
        case .cancelJob: message = .cancelJob(try CancelJob(from: &r))
        case .error: message = .error(try ErrorReply(from: &r))
        case .ping: message = .ping(try Ping(from: &r))
        case .pong: message = .pong(try Pong(from: &r))
        default: throw ProtocolError(.unexpectedCommand, "\(r.command.name) is not valid on the backend")
        }
        try r.finish()
        return message
    }
}
