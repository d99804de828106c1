// Events: the broker publishes every job lifecycle event on its PUB socket at
// `Wire.Endpoint.events`, as the topic frame "ev" followed by an EVENT
// message. Sequence numbers are gapless per broker, starting at 1, and every
// event is persisted before it is published, so a subscriber that sees a gap
// (or reconnects) sends REPLAY on the frontend and misses nothing.

/// What happened to a job.
public enum EventKind: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The job is committed to the queue (attempt 0).
    case accepted = 1
    /// A worker took the job (attempt n, worker id).
    case started = 2
    /// The storage node holds the result (record id). The job is finished.
    case stored = 3
    /// The job will run again (attempt = the next attempt; reason says when).
    case retrying = 4
    /// An attempt failed (attempt n, worker id, failure). Always followed by
    /// retrying or dead.
    case failed = 5
    /// The job is in the dead-letter set (failure = the last failure).
    case dead = 6
    /// DEAD-RETRY took the job out of the dead-letter set; it is queued again.
    case revived = 7
    /// DEAD-DISCARD removed the job for good.
    case discarded = 8

    public var description: String {
        switch self {
        case .accepted: "accepted"
        case .started: "started"
        case .stored: "stored"
        case .retrying: "retrying"
        case .failed: "failed"
        case .dead: "dead"
        case .revived: "revived"
        case .discarded: "discarded"
        }
    }
}

/// EVENT (broker → subscribers on the events socket, after the topic frame
/// "ev"; broker → client on the frontend in answer to REPLAY, without topic).
///
///      2 seq          u64, from 1, gapless
///      3 time         u64, Unix time in milliseconds
///      4 kind         u8, see `EventKind`
///      5 job id       ULID
///      6 attempt      u32 (0 for accepted)
///      7 source name  text, 0…1024 bytes
///      8 worker id    text, empty unless the event concerns a worker
///      9 record id    empty, or ULID (stored)
///     10 step index   i32, the failing step from 1; 0 when there is no failure or it is not in a step
///     11 step         text, 0…1024 bytes
///     12 error code   text, empty when there is no failure
///     13 reason       text, one line, 0…4096 bytes
public struct Event: WireMessage {
    public static let command = Command.event
    public var seq: UInt64
    public var time: UInt64
    public var kind: EventKind
    public var jobID: ULID
    public var attempt: UInt32
    public var sourceName: String
    public var workerID: String
    public var recordID: ULID?
    /// nil when frames 10–13 are -1 and empty.
    public var failure: FailureDetail?

    public init(seq: UInt64, time: UInt64, kind: EventKind, jobID: ULID, attempt: UInt32, sourceName: String,
                workerID: String = "", recordID: ULID? = nil, failure: FailureDetail? = nil) {
        self.seq = seq
        self.time = time
        self.kind = kind
        self.jobID = jobID
        self.attempt = attempt
        self.sourceName = sourceName
        self.workerID = workerID
        self.recordID = recordID
        self.failure = failure
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        seq = try r.u64("seq")
        time = try r.u64("time")
        let kindFrame = r.index
        let kindByte = try r.u8("kind")
        guard let kind = EventKind(rawValue: kindByte) else {
            throw r.error(frame: kindFrame, "kind", "is \(kindByte), must be 1…\(EventKind.allCases.count)")
        }
        self.kind = kind
        jobID = try r.ulid("job id")
        attempt = try r.u32("attempt")
        sourceName = try r.sourceName()
        workerID = try r.text("worker id", bytes: 0...Wire.Limit.workerIDBytes)
        recordID = try r.optionalULID("record id")
        let detail = try r.failure(requireCode: false)
        failure = detail == .none ? nil : detail
    }

    public func write(to w: inout MessageWriter) {
        w.u64(seq)
        w.u64(time)
        w.u8(kind.rawValue)
        w.ulid(jobID)
        w.u32(attempt)
        w.text(sourceName)
        w.text(workerID)
        w.optionalULID(recordID)
        w.failure(failure ?? .none)
    }

    /// The frames as published: the topic "ev", then the EVENT message.
    public func publishedFrames() -> [[UInt8]] {
        [Wire.eventTopic] + frames()
    }

    /// Decodes a message received on the events SUB socket (topic first).
    public static func decodePublished(_ frames: [[UInt8]]) throws(ProtocolError) -> Event {
        guard let topic = frames.first else { throw ProtocolError(.malformed, "event message has no frames") }
        guard topic == Wire.eventTopic else {
            throw ProtocolError(.malformed, "frame 0 (topic) must be 'ev', got \(Wire.quoted(topic))")
        }
        var r = try MessageReader(frames, offset: 1, expecting: [.event], context: "on the events socket")
        let event = try Event(from: &r)
        try r.finish()
        return event
    }
}

/// Any message on the events socket (topic frame included).
public enum EventMessage: Sendable, Equatable {
    case event(Event)

    public var command: Command { .event }

    public func frames() -> [[UInt8]] {
        switch self {
        case .event(let e): e.publishedFrames()
        }
    }

    public static func decode(_ frames: [[UInt8]]) throws(ProtocolError) -> EventMessage {
        .event(try Event.decodePublished(frames))
    }
}
