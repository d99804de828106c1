// The storage node (ROUTER) at `Wire.Endpoint.store`. Workers (DEALER) send
// STORE; clients (DEALER) send LIST, GET, DELETE, STATS and PING. Every
// request carries a request id that the reply echoes.

/// STORE (worker → store): save a job's full-resolution and thumbnail JPEGs
/// as one linked record. Idempotent per job id: a second STORE for the same
/// job returns the existing record with created = 0 and changes nothing.
///
///     2 request id   u64
///     3 job id       ULID
///     4 source name  text, 0…1024 bytes
///     5 pipeline     text, 1…4096 bytes
///     6 full size    8 bytes: width u32, height u32
///     7 thumb size   8 bytes: width u32, height u32
///     8 full image   bytes, at least 1 (a JPEG, WebP, PNG or AVIF file)
///     9 thumb image  bytes, at least 1 (a JPEG, WebP, PNG or AVIF file)
public struct StoreRequest: WireMessage {
    public static let command = Command.store
    public var requestID: UInt64
    public var jobID: ULID
    public var sourceName: String
    public var pipeline: String
    public var fullSize: ImageSize
    public var thumbnailSize: ImageSize
    public var full: [UInt8]
    public var thumbnail: [UInt8]

    public init(requestID: UInt64, jobID: ULID, sourceName: String, pipeline: String, fullSize: ImageSize, thumbnailSize: ImageSize, full: [UInt8], thumbnail: [UInt8]) {
        self.requestID = requestID
        self.jobID = jobID
        self.sourceName = sourceName
        self.pipeline = pipeline
        self.fullSize = fullSize
        self.thumbnailSize = thumbnailSize
        self.full = full
        self.thumbnail = thumbnail
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        jobID = try r.ulid("job id")
        sourceName = try r.sourceName()
        pipeline = try r.pipeline()
        fullSize = try r.size("full size")
        thumbnailSize = try r.size("thumb size")
        full = try r.blob("full image", minimum: 1)
        thumbnail = try r.blob("thumb image", minimum: 1)
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.ulid(jobID)
        w.text(sourceName)
        w.text(pipeline)
        w.size(fullSize)
        w.size(thumbnailSize)
        w.blob(full)
        w.blob(thumbnail)
    }
}

/// STORED (store → worker): the record is committed.
///
///     2 request id  u64
///     3 job id      ULID
///     4 record id   ULID
///     5 created     u8: 1 = new record, 0 = the job already had this record
public struct Stored: WireMessage {
    public static let command = Command.stored
    public var requestID: UInt64
    public var jobID: ULID
    public var recordID: ULID
    public var created: Bool

    public init(requestID: UInt64, jobID: ULID, recordID: ULID, created: Bool) {
        self.requestID = requestID
        self.jobID = jobID
        self.recordID = recordID
        self.created = created
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        jobID = try r.ulid("job id")
        recordID = try r.ulid("record id")
        created = try r.bool("created")
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.ulid(jobID)
        w.ulid(recordID)
        w.bool(created)
    }
}

/// LIST (client → store): records, newest first.
///
///     2 request id  u64
///     3 limit       u32, 1…1000
///     4 before      empty, or a record id: list records older than it
public struct ListRequest: WireMessage {
    public static let command = Command.list
    public var requestID: UInt64
    public var limit: UInt32
    public var before: ULID?

    public init(requestID: UInt64, limit: UInt32, before: ULID? = nil) {
        self.requestID = requestID
        self.limit = limit
        self.before = before
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        limit = try r.u32("limit", 1...Wire.Limit.maxListLimit)
        before = try r.optionalULID("before")
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.u32(limit)
        w.optionalULID(before)
    }
}

/// LIST-REPLY (store → client).
///
///     2 request id  u64
///     3 records     JSON array of `RecordInfo`, newest first
public struct ListReply: WireMessage {
    public static let command = Command.listReply
    public var requestID: UInt64
    public var records: [RecordInfo]

    public init(requestID: UInt64, records: [RecordInfo]) {
        self.requestID = requestID
        self.records = records
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        records = try r.json("records", as: [RecordInfo].self)
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.json(records)
    }
}

/// Which image of a record: the full-resolution output or the thumbnail.
public enum Variant: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case full = 0
    case thumbnail = 1

    public var description: String { self == .full ? "full" : "thumb" }
}

extension MessageReader {
    mutating func variant() throws(ProtocolError) -> Variant {
        Variant(rawValue: try u8("variant", 0...1)) ?? .full
    }
}

/// GET (client → store): one image's bytes and its record.
///
///     2 request id  u64
///     3 id          ULID: a record id or a job id
///     4 variant     u8: 0 = full, 1 = thumbnail
public struct GetRequest: WireMessage {
    public static let command = Command.get
    public var requestID: UInt64
    public var id: ULID
    public var variant: Variant

    public init(requestID: UInt64, id: ULID, variant: Variant) {
        self.requestID = requestID
        self.id = id
        self.variant = variant
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        id = try r.ulid("id")
        variant = try r.variant()
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.ulid(id)
        w.u8(variant.rawValue)
    }
}

/// GET-REPLY (store → client): exactly the bytes that were stored.
///
///     2 request id  u64
///     3 variant     u8: 0 = full, 1 = thumbnail
///     4 record      JSON object, see `RecordInfo`
///     5 image       JPEG bytes
public struct GetReply: WireMessage {
    public static let command = Command.getReply
    /// The image's index in `frames()` (frame 5, the last), for a sender
    /// that sends the image from elsewhere.
    public static let imageFrame = 5
    public var requestID: UInt64
    public var variant: Variant
    public var record: RecordInfo
    public var image: [UInt8]

    public init(requestID: UInt64, variant: Variant, record: RecordInfo, image: [UInt8]) {
        self.requestID = requestID
        self.variant = variant
        self.record = record
        self.image = image
    }

    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        variant = try r.variant()
        record = try r.json("record", as: RecordInfo.self)
        image = try r.blob("image", minimum: 1)
    }

    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.u8(variant.rawValue)
        w.json(record)
        w.blob(image)
    }
}

/// DELETE (client → store): remove a record (both images). Answered by OK
/// (count = 1) or ERROR not-found.
///
///     2 request id  u64
///     3 id          ULID: a record id or a job id
public struct DeleteRequest: WireMessage {
    public static let command = Command.delete
    public var requestID: UInt64
    public var id: ULID
    public init(requestID: UInt64, id: ULID) {
        self.requestID = requestID
        self.id = id
    }
    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        id = try r.ulid("id")
    }
    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.ulid(id)
    }
}

/// STATS (client → store): ask for `StoreStats`.
///
///     2 request id  u64
public struct StatsRequest: WireMessage {
    public static let command = Command.stats
    public var requestID: UInt64
    public init(requestID: UInt64) { self.requestID = requestID }
    public init(from r: inout MessageReader) throws(ProtocolError) { requestID = try r.u64("request id") }
    public func write(to w: inout MessageWriter) { w.u64(requestID) }
}

/// STATS-REPLY (store → client).
///
///     2 request id  u64
///     3 stats       JSON object, see `StoreStats`
public struct StatsReply: WireMessage {
    public static let command = Command.statsReply
    public var requestID: UInt64
    public var stats: StoreStats
    public init(requestID: UInt64, stats: StoreStats) {
        self.requestID = requestID
        self.stats = stats
    }
    public init(from r: inout MessageReader) throws(ProtocolError) {
        requestID = try r.u64("request id")
        stats = try r.json("stats", as: StoreStats.self)
    }
    public func write(to w: inout MessageWriter) {
        w.u64(requestID)
        w.json(stats)
    }
}

/// Any message on the storage node socket, in either direction.
public enum StoreMessage: Sendable, Equatable {
    case store(StoreRequest)
    case stored(Stored)
    case list(ListRequest)
    case listReply(ListReply)
    case get(GetRequest)
    case getReply(GetReply)
    case delete(DeleteRequest)
    case stats(StatsRequest)
    case statsReply(StatsReply)
    case ping(Ping)
    case pong(Pong)
    case ok(OKReply)
    case error(ErrorReply)

    var body: any WireMessage {
        switch self {
        case .store(let m): m
        case .stored(let m): m
        case .list(let m): m
        case .listReply(let m): m
        case .get(let m): m
        case .getReply(let m): m
        case .delete(let m): m
        case .stats(let m): m
        case .statsReply(let m): m
        case .ping(let m): m
        case .pong(let m): m
        case .ok(let m): m
        case .error(let m): m
        }
    }

    public var command: Command { type(of: body).command }

    public func frames() -> [[UInt8]] { body.frames() }

    /// Decodes a message of this socket, in either direction.
    public static func decode(_ frames: [[UInt8]]) throws(ProtocolError) -> StoreMessage {
        try decode(frames, receiving: nil)
    }

    /// Decodes a message read by `receiver`: a command that travels the
    /// other way is `unexpected-command`, whatever its fields (section 3.2).
    public static func decode(_ frames: [[UInt8]], to receiver: Receiver) throws(ProtocolError) -> StoreMessage {
        try decode(frames, receiving: (Command.sent(to: receiver, on: .store), WireSocket.store.name(of: receiver)))
    }

    static func decode(_ frames: [[UInt8]], receiving: (commands: Set<Command>, receiver: String)?) throws(ProtocolError) -> StoreMessage {
        var r = try MessageReader(frames, expecting: Command.storage, context: "on the store socket", receiving: receiving)
        let message: StoreMessage
        switch r.command {
        case .store: message = .store(try StoreRequest(from: &r))
        case .stored: message = .stored(try Stored(from: &r))
        case .list: message = .list(try ListRequest(from: &r))
        case .listReply: message = .listReply(try ListReply(from: &r))
        case .get: message = .get(try GetRequest(from: &r))
        case .getReply: message = .getReply(try GetReply(from: &r))
        case .delete: message = .delete(try DeleteRequest(from: &r))
        case .stats: message = .stats(try StatsRequest(from: &r))
        case .statsReply: message = .statsReply(try StatsReply(from: &r))
        case .ping: message = .ping(try Ping(from: &r))
        case .pong: message = .pong(try Pong(from: &r))
        case .ok: message = .ok(try OKReply(from: &r))
        case .error: message = .error(try ErrorReply(from: &r))
        default: throw ProtocolError(.unexpectedCommand, "\(r.command.name) is not valid on the store socket")
        }
        try r.finish()
        return message
    }
}
