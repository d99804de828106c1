// Events: the broker publishes every job lifecycle event on its events
// socket at `Wire.Endpoint.events`, in one or both of two forms, each under
// its own topic: "ev" followed by an EVENT message (one event per message),
// and "eb" followed by an EVENTS message (the events of one commit, many per
// message). Sequence numbers are gapless per broker, starting at 1, and every
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
    /// CANCEL stopped the job for good: it was queued, or its worker
    /// stopped it (attempt and worker then say which). Never retried.
    case cancelled = 9

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
        case .cancelled: "cancelled"
        }
    }
}

/// A set of event kinds as bits (a kind's raw value is its bit), for the
/// questions asked of every event a follower decodes or delivers, where a
/// `Set` hashed the kind each time (a tenth of a follower's decoding).
public struct EventKindMask: Sendable, Equatable {
    private let bits: UInt32

    public init(_ kinds: Set<EventKind>) {
        bits = kinds.reduce(0) { $0 | 1 << $1.rawValue }
    }

    public var isEmpty: Bool { bits == 0 }
    public func contains(_ kind: EventKind) -> Bool { bits & 1 << kind.rawValue != 0 }
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
    /// nil when there is no failure: frame 10 (step index) is 0 and
    /// frames 11–13 are empty.
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
        workerID = try r.workerID(allowEmpty: true)
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
        var r = try MessageReader(frames, offset: 1, expecting: .event, context: "under the topic 'ev'")
        let event = try Event(from: &r)
        try r.finish()
        return event
    }
}

/// EVENTS (broker → subscribers on the events socket, after the topic frame
/// "eb"): the events of one broker commit in one message, which costs the
/// broker, the network and the subscriber far less than one EVENT each.
///
///      2 count   u32, 1…`maxEvents`: events in frame 3
///      3 events  bytes: `count` records, in increasing seq order with no seq
///                skipped; each record is EVENT's frames 2–13 (seq first),
///                each written as its length (u16) followed by its bytes,
///                exactly as the EVENT frame would be
public struct EventBatch: WireMessage {
    public static let command = Command.events
    /// The most events one EVENTS carries.
    public static let maxEvents = 1_000

    public var events: [Event]

    public init(events: [Event]) {
        self.events = events
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        try self.init(from: &r, skipping: [])
    }

    /// Decodes as `init(from:)` does, except that events of the kinds in
    /// `skipping` and `brief` are read only as far as `readInPart` says.
    init(from r: inout MessageReader, skipping: Set<EventKind>, brief: Set<EventKind> = []) throws(ProtocolError) {
        let count = try r.u32("count", 1...UInt32(EventBatch.maxEvents))
        let recordsFrame = r.index
        let records = try r.blob("events", minimum: 1)
        events = try EventBatch.decodeRecords(records, count: Int(count), skipping: skipping, brief: brief) { problem in
            r.error(frame: recordsFrame, "events", problem)
        }
    }

    public func write(to w: inout MessageWriter) {
        w.u32(UInt32(clamping: events.count))
        var records: [UInt8] = []
        records.reserveCapacity(events.count * 128)
        for event in events { event.appendRecord(to: &records) }
        w.blob(records)
    }

    /// The frames as published: the topic "eb", then the EVENTS message.
    public func publishedFrames() -> [[UInt8]] {
        [Wire.eventBatchTopic] + frames()
    }

    /// Splits the records frame into `count` events, each checked as an EVENT
    /// would be (those of a kind in `skipping` or `brief` only as far as
    /// `readInPart` reads them), and checks that their seqs follow one another.
    static func decodeRecords(_ bytes: [UInt8], count: Int, skipping: Set<EventKind> = [], brief: Set<EventKind> = [],
                              _ fail: (String) -> ProtocolError) throws(ProtocolError) -> [Event] {
        var events: [Event] = []
        events.reserveCapacity(count)
        // One frames array for every record, its fields rewritten in place
        // in turn: once a record's reader is gone, each field's buffer is
        // this function's alone again, and is reused rather than reallocated.
        var frames: [[UInt8]] = [Wire.protocolID, [Command.event.rawValue]] + Array(repeating: [], count: 12)
        let (skipped, briefed) = (EventKindMask(skipping), EventKindMask(brief))
        try splitRecords(bytes, count: count, fail) { (index, fields) throws(ProtocolError) in
            let event: Event
            if !skipped.isEmpty || !briefed.isEmpty,
               let part = try readInPart(bytes, fields, skipping: skipped, brief: briefed, { fail("event \(index + 1) of \(count): \($0)") }) {
                event = part
            } else {
                for f in 0..<fields.count {
                    frames[2 + f].removeAll(keepingCapacity: true)
                    frames[2 + f].append(contentsOf: bytes[fields[f]])
                }
                do throws(ProtocolError) {
                    var reader = try MessageReader(frames, expecting: .event, context: "in EVENTS")
                    event = try Event(from: &reader)
                    try reader.finish()
                } catch {
                    throw fail("event \(index + 1) of \(count): \(error.reason)")
                }
            }
            if let previous = events.last, event.seq != previous.seq &+ 1 {
                throw fail("event \(index + 1) of \(count) has seq \(event.seq), must be \(previous.seq &+ 1)")
            }
            events.append(event)
        }
        return events
    }

    /// A record of a kind in `skipping` or `brief`, read in part, straight
    /// from the records frame; nil for any other kind (read in full).
    /// - `skipping`: only its seq, kind and job id, for a reader that drops
    ///   such events but must see every seq;
    /// - `brief`: also its time, attempt and record id, for a reader that
    ///   acts on such events but names the job by its own means.
    /// The fields read are checked as EVENT's are; the others are left unread
    /// and unchecked, and come back empty (texts "", numbers 0, no failure).
    private static func readInPart(_ bytes: [UInt8], _ fields: InlineArray<12, Range<Int>>,
                                   skipping: EventKindMask, brief: EventKindMask, _ fail: (String) -> ProtocolError) throws(ProtocolError) -> Event? {
        guard fields[2].count == 1, let kind = EventKind(rawValue: bytes[fields[2].lowerBound]) else {
            return nil  // read in full, which says what is wrong with it
        }
        let skipped = skipping.contains(kind)
        guard skipped || brief.contains(kind) else { return nil }
        func integer(_ field: Int, _ name: String, bytes width: Int) throws(ProtocolError) -> UInt64 {
            guard fields[field].count == width else { throw fail("\(name) must be \(width) bytes, got \(fields[field].count)") }
            return FrameReader.bigEndian(bytes[fields[field]])
        }
        let seq = try integer(0, "seq", bytes: 8)
        guard let jobID = ULID.parse(bytes[fields[3]].span, values: ULID.strictValues) else {
            throw fail("job id \(ULID.notWireForm(bytes[fields[3]]))")
        }
        if skipped { return Event(seq: seq, time: 0, kind: kind, jobID: jobID, attempt: 0, sourceName: "") }
        let time = try integer(1, "time", bytes: 8)
        let attempt = UInt32(truncatingIfNeeded: try integer(4, "attempt", bytes: 4))
        var recordID: ULID?
        if !fields[7].isEmpty {
            guard let id = ULID.parse(bytes[fields[7]].span, values: ULID.strictValues) else {
                throw fail("record id \(ULID.notWireForm(bytes[fields[7]]))")
            }
            recordID = id
        }
        return Event(seq: seq, time: time, kind: kind, jobID: jobID, attempt: attempt, sourceName: "", recordID: recordID)
    }

    /// Walks the records frame: calls `body` with each of the `count`
    /// records' index and the byte ranges of its twelve fields, in order,
    /// without copying them, and checks that the records fill the frame
    /// exactly. A reader that needs only some fields (the load generator
    /// peeks at each event's kind and job id) reads them in place.
    public static func splitRecords(
        _ bytes: [UInt8], count: Int, _ fail: (String) -> ProtocolError,
        _ body: (_ index: Int, _ fields: InlineArray<12, Range<Int>>) throws(ProtocolError) -> Void
    ) throws(ProtocolError) {
        var position = 0
        var fields = InlineArray<12, Range<Int>>(repeating: 0..<0)
        for index in 0..<count {
            for f in 0..<fields.count {
                guard bytes.count - position >= 2 else {
                    throw fail("ends inside event \(index + 1) of \(count)")
                }
                let length = Int(bytes[position]) << 8 | Int(bytes[position + 1])
                position += 2
                guard bytes.count - position >= length else {
                    throw fail("ends inside event \(index + 1) of \(count)")
                }
                fields[f] = position ..< position + length
                position += length
            }
            try body(index, fields)
        }
        guard position == bytes.count else {
            throw fail("has \(bytes.count - position) byte(s) after its \(count) event(s)")
        }
    }

    /// Decodes a message received on the events SUB socket (topic first);
    /// events of the kinds in `skipping` and `brief` only as far as
    /// `readInPart` reads them.
    public static func decodePublished(_ frames: [[UInt8]], skipping: Set<EventKind> = [],
                                       brief: Set<EventKind> = []) throws(ProtocolError) -> EventBatch {
        guard let topic = frames.first else { throw ProtocolError(.malformed, "event message has no frames") }
        guard topic == Wire.eventBatchTopic else {
            throw ProtocolError(.malformed, "frame 0 (topic) must be 'eb', got \(Wire.quoted(topic))")
        }
        var r = try MessageReader(frames, offset: 1, expecting: .events, context: "under the topic 'eb'")
        let batch = try EventBatch(from: &r, skipping: skipping, brief: brief)
        try r.finish()
        return batch
    }
}

extension Event {
    /// Appends this event as one EVENTS record: EVENT's frames 2–13, each
    /// as a u16 length and its bytes, written straight into `out`.
    public func appendRecord(to out: inout [UInt8]) {
        func length(_ n: Int) {
            out.append(UInt8(truncatingIfNeeded: n >> 8))
            out.append(UInt8(truncatingIfNeeded: n))
        }
        func integer<T: FixedWidthInteger>(_ value: T) {
            length(T.bitWidth / 8)
            out.appendBigEndian(value)
        }
        func text(_ value: String) {
            let utf8 = value.utf8
            length(utf8.count)
            out.append(contentsOf: utf8)
        }
        let detail = failure ?? .none
        integer(seq)
        integer(time)
        integer(kind.rawValue)
        length(26)
        jobID.appendASCII(to: &out)
        integer(attempt)
        text(sourceName)
        text(workerID)
        if let recordID {
            length(26)
            recordID.appendASCII(to: &out)
        } else {
            length(0)
        }
        integer(detail.stepIndex)
        text(detail.step)
        text(detail.code)
        text(detail.reason)
    }
}

/// Any message on the events socket (topic frame included).
public enum EventMessage: Sendable, Equatable {
    case event(Event)
    case batch(EventBatch)

    public var command: Command {
        switch self {
        case .event: .event
        case .batch: .events
        }
    }

    /// The events the message carries, in seq order.
    public var events: [Event] {
        switch self {
        case .event(let e): [e]
        case .batch(let b): b.events
        }
    }

    public func frames() -> [[UInt8]] {
        switch self {
        case .event(let e): e.publishedFrames()
        case .batch(let b): b.publishedFrames()
        }
    }

    /// Decodes either form by its topic frame. The events of a batch whose
    /// kind is in `skipping` are read only as far as their seq, kind and job
    /// id, and come back with their other fields empty: for a reader that
    /// drops them anyway. Those whose kind is in `brief` are read as far as
    /// their seq, time, kind, job id, attempt and record id, and come back
    /// with no source name, worker id or failure: for a reader that knows
    /// its jobs by id. (A single EVENT is always read in full.)
    public static func decode(_ frames: [[UInt8]], skipping: Set<EventKind> = [],
                              brief: Set<EventKind> = []) throws(ProtocolError) -> EventMessage {
        guard let topic = frames.first else { throw ProtocolError(.malformed, "event message has no frames") }
        switch topic {
        case Wire.eventTopic: return .event(try Event.decodePublished(frames))
        case Wire.eventBatchTopic: return .batch(try EventBatch.decodePublished(frames, skipping: skipping, brief: brief))
        default: throw ProtocolError(.malformed, "frame 0 (topic) must be 'ev' or 'eb', got \(Wire.quoted(topic))")
        }
    }
}
