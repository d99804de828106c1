import DarkroomImage
import DarkroomProtocol
import Foundation

/// The server sockets the fuzz reaches.
enum FuzzSocket: String, CaseIterable, Sendable {
    case frontend, backend, store, events
}

/// What kind of hostile message one is, for the counts in the report.
enum FuzzKind: String, CaseIterable, Sendable {
    case field = "bad field (mutated valid message)"
    case frameCount = "wrong frame count"
    case protocolID = "wrong protocol id"
    case commandFrame = "bad command frame"
    case unknownCommand = "unknown command"
    case wrongSocket = "command for another socket"
    case replyAsRequest = "reply sent as a request"
    case randomFrames = "random frames"
    case vector = "malformed test vector"
    case wellFormedWrong = "well formed, wrong"
    case valid = "valid request"
    case oversized = "over 65 MiB in all frames"
    case subscription = "subscription message"
    case hugeSubscription = "huge subscription"
    case zmtp = "raw ZMTP (bad framing, greeting, oversized frame)"
}

/// One message the fuzz sends, and how it was made.
struct FuzzMessage {
    var frames: [[UInt8]]
    var kind: FuzzKind
    /// What was done to it, for a person replaying a failure.
    var note: String
    /// For a valid request with fields mutated: whether section 2.4 and the
    /// command's layout make it malformed (nil when the fuzz cannot tell).
    /// The oracle holds the decoder to it.
    var fieldsMalformed: Bool? = nil
    /// The malformed test vector it is, if it is one.
    var vector: MalformedVector? = nil
}

/// One entry of the vectors' `malformed` list: a message and the ERROR a
/// receiver must answer it with (section 14).
struct MalformedVector {
    var name: String
    var socket: FuzzSocket
    /// Made for the server of its socket (else for a peer: a server that
    /// gets it answers as section 3.2 says, usually unexpected-command).
    var toServer: Bool
    var frames: [[UInt8]]
    var code: UInt16
    var reason: String?
    var requestID: UInt64
}

/// The type of one field frame, as DRK1 section 2.4 and the command layouts
/// give it: what a mutation of that frame can break.
enum FieldType {
    case requestID
    case u8(ClosedRange<UInt8>)
    case u16
    case u16In(ClosedRange<UInt16>)
    case u32(ClosedRange<UInt32>)
    case u64
    case i32(ClosedRange<Int32>)
    case bool
    /// A line of text, `bytes` long.
    case line(ClosedRange<Int>)
    /// Printable ASCII without spaces (worker id, submit key).
    case token(ClosedRange<Int>)
    case ulid
    case optionalULID
    case blob(minimum: Int)
    /// JPEG bytes (SUBMIT, JOB, STORE).
    case image
    case options
    case size
    case json
    /// HOLDING's list of 30-byte entries.
    case held
    /// DEAD-RETRY and DEAD-DISCARD: "all" or a job id; CANCEL: "queued" or a job id.
    case target(keyword: String)
    /// One of a few words (JOB-LIST's state).
    case keyword([String])
    case pipeline
    /// EVENTS frame 3: length-prefixed event records.
    case records

    /// The field frames of `command` (frame 2 on), with their names.
    static func fields(of command: Command) -> [(String, FieldType)] {
        let line = { (bytes: ClosedRange<Int>) in FieldType.line(bytes) }
        switch command {
        case .error, .rejected: return [("request id", .requestID), ("code", .u16), ("reason", line(0...4096))]
        case .ping, .pong, .status, .stats, .pause, .resume: return [("request id", .requestID)]
        case .ok: return [("request id", .requestID), ("count", .u64)]
        case .submit:
            return [("request id", .requestID), ("priority", .u8(0...9)), ("options", .options), ("pipeline", .pipeline),
                    ("source name", line(0...1024)), ("image", .image), ("submit key", .token(1...64)), ("not before", .u64),
                    ("attempts", .u16In(1...1000)), ("expires", .u64), ("time limit", .u32(1...604_800))]
        case .accepted: return [("request id", .requestID), ("job id", .ulid), ("event seq", .u64)]
        case .statusReply, .deadListReply, .listReply, .statsReply: return [("request id", .requestID), ("json", .json)]
        case .replay: return [("request id", .requestID), ("from seq", .u64), ("limit", .u32(0...UInt32.max))]
        case .replayEnd: return [("request id", .requestID), ("last seq", .u64), ("head seq", .u64)]
        case .deadList, .list: return [("request id", .requestID), ("limit", .u32(1...1000)), ("after", .optionalULID)]
        case .deadRetry, .deadDiscard: return [("request id", .requestID), ("target", .target(keyword: "all"))]
        case .cancel: return [("request id", .requestID), ("target", .target(keyword: "queued"))]
        case .cancelJob: return [("job id", .ulid), ("attempt", .u32(1...UInt32.max))]
        case .jobInfo: return [("request id", .requestID), ("job id", .ulid)]
        case .jobList: return [("request id", .requestID), ("state", .keyword(["queued", "delayed", "running"])), ("offset", .u32(0...UInt32.max)),
                               ("limit", .u32(1...1000))]
        case .jobListReply: return [("request id", .requestID), ("jobs", .json)]
        case .jobInfoReply: return [("request id", .requestID), ("story", .json)]
        case .ready: return [("worker id", .token(1...64)), ("host", line(1...255)), ("pid", .u32(0...UInt32.max)), ("slots", .u32(1...Wire.Limit.maxSlots))]
        case .credit: return [("count", .u32(1...UInt32.max))]
        case .job:
            return [("job id", .ulid), ("attempt", .u32(1...UInt32.max)), ("options", .options), ("pipeline", .pipeline),
                    ("source name", line(0...1024)), ("image", .image), ("time limit", .u32(1...604_800))]
        case .done: return [("job id", .ulid), ("attempt", .u32(1...UInt32.max)), ("record id", .ulid)]
        case .fail:
            return [("job id", .ulid), ("attempt", .u32(1...UInt32.max)), ("retryable", .bool), ("step index", .i32(0...Int32.max)),
                    ("step", line(0...1024)), ("error code", line(1...64)), ("reason", line(0...4096))]
        case .heartbeat, .disconnect: return []
        case .holding: return [("held jobs", .held)]
        case .store:
            return [("request id", .requestID), ("job id", .ulid), ("source name", line(0...1024)), ("pipeline", .pipeline),
                    ("full size", .size), ("thumb size", .size), ("full image", .image), ("thumb image", .image)]
        case .stored: return [("request id", .requestID), ("job id", .ulid), ("record id", .ulid), ("created", .bool)]
        case .get: return [("request id", .requestID), ("id", .ulid), ("variant", .u8(0...1))]
        case .getReply: return [("request id", .requestID), ("variant", .u8(0...1)), ("record", .json), ("image", .blob(minimum: 1))]
        case .delete: return [("request id", .requestID), ("id", .ulid)]
        case .event:
            return [("seq", .u64), ("time", .u64), ("kind", .u8(1...8)), ("job id", .ulid), ("attempt", .u32(0...UInt32.max)),
                    ("source name", line(0...1024)), ("worker id", .token(0...64)), ("record id", .optionalULID),
                    ("step index", .i32(0...Int32.max)), ("step", line(0...1024)), ("error code", line(0...64)), ("reason", line(0...4096))]
        case .events: return [("count", .u32(1...1000)), ("events", .records)]
        }
    }
}

/// The valid material mutations start from: real JPEGs made in code, the
/// test vectors of `protocol/vectors/drk1.json`, and pipelines that do and
/// do not parse.
struct FuzzCorpus {
    /// A real JPEG the worker runs quickly (48×32).
    let photo: [UInt8]
    /// A second real JPEG, 16×12, the thumbnail of STOREs.
    let thumbnail: [UInt8]
    let photoSize = ImageSize(width: 48, height: 32)
    let thumbnailSize = ImageSize(width: 16, height: 12)
    /// The photo with its header patched to claim 20000×1: over the storage
    /// node's 16,384 pixel side limit (`too-large`).
    let wide: [UInt8]
    /// The photo's picture as a WebP, which a storage node also takes.
    let webp: [UInt8]
    /// Every valid vector, by the socket it belongs to.
    let vectors: [FuzzSocket: [[[UInt8]]]]
    /// The malformed vectors, each with the ERROR it must get.
    let malformed: [MalformedVector]

    /// Pipelines that parse and run in a few milliseconds on a small photo.
    static let pipelines = [
        "grayscale", "scale:32x32,mode=fill", "crop:square", "glitch:seed=7", "scale:24x24,mode=fit | grayscale",
        "crop:square | scale:16x16", "scale:40x40,mode=fill | crop:square | glitch:seed=3",
    ]
    /// Pipelines that are valid lines but do not parse (REJECTED invalid-pipeline).
    static let badPipelines = [
        "frobnicate:3", "scale:", "scale:0x0", "crop:square |", "| grayscale", "scale:64x64 || crop:square",
        "glitch:seed=abc", "scale:64x64,mode=sideways", "grayscale:now", "SCALE:64x64", "scale:-1x5", "crop:600x600+-1+0",
        "scale:64x64,,mode=fill", "%%%", " ", "grayscale |  | grayscale", "scale:99999999999999999999x1",
    ]

    init() throws {
        photo = try JPEG.encode(SamplePhoto.render(Size(width: 48, height: 32), seed: 5), options: EncodeOptions(quality: 80))
        thumbnail = try JPEG.encode(SamplePhoto.render(Size(width: 16, height: 12), seed: 6), options: EncodeOptions(quality: 70))
        wide = FuzzCorpus.patchingSize(of: photo, width: 20_000, height: 1)
        webp = try WebP.encode(SamplePhoto.render(Size(width: 48, height: 32), seed: 5), quality: 80)
        (vectors, malformed) = try FuzzCorpus.loadVectors()
    }

    /// `jpeg` with the width and height of its frame header (SOF0…SOF15,
    /// not DHT, JPG or DAC) replaced.
    static func patchingSize(of jpeg: [UInt8], width: UInt16, height: UInt16) -> [UInt8] {
        var bytes = jpeg
        var i = 2
        while i + 9 < bytes.count, bytes[i] == 0xFF {
            let marker = bytes[i + 1]
            let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                bytes[i + 5] = UInt8(height >> 8)
                bytes[i + 6] = UInt8(height & 0xFF)
                bytes[i + 7] = UInt8(width >> 8)
                bytes[i + 8] = UInt8(width & 0xFF)
                return bytes
            }
            i += 2 + length
        }
        return bytes
    }

    static let vectorsURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/vectors/drk1.json")

    static func loadVectors() throws -> ([FuzzSocket: [[[UInt8]]]], [MalformedVector]) {
        let data = try Data(contentsOf: vectorsURL)
        guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let valid = root["vectors"] as? [[String: Any]], let bad = root["malformed"] as? [[String: Any]] else {
            throw HarnessError("cannot read the vectors in \(vectorsURL.path)")
        }
        func frames(_ entry: [String: Any]) -> [[UInt8]] { (entry["frames"] as? [String] ?? []).map(hexBytes) }
        var vectors: [FuzzSocket: [[[UInt8]]]] = [:]
        for entry in valid {
            guard let socket = FuzzSocket(rawValue: entry["socket"] as? String ?? "") else { continue }
            vectors[socket, default: []].append(frames(entry))
        }
        let malformed = bad.compactMap { entry -> MalformedVector? in
            guard let socket = FuzzSocket(rawValue: entry["socket"] as? String ?? ""), let code = entry["code"] as? Int else { return nil }
            return MalformedVector(name: entry["name"] as? String ?? "?", socket: socket, toServer: entry["receiver"] as? String == "server",
                                   frames: frames(entry), code: UInt16(code), reason: entry["reason"] as? String,
                                   requestID: UInt64(entry["requestID"] as? Int ?? 0))
        }
        return (vectors, malformed)
    }

    static func hexBytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var chars = Array(hex.utf8)[...]
        while chars.count >= 2 {
            bytes.append(UInt8(String(decoding: chars.prefix(2), as: UTF8.self), radix: 16) ?? 0)
            chars = chars.dropFirst(2)
        }
        return bytes
    }
}

/// Makes the fuzz's messages: valid ones built with DarkroomProtocol's
/// types, then broken one field, one frame or one header at a time, so that
/// most of them pass the first checks and reach the field checks.
struct FuzzMaker {
    var random: FuzzRandom
    let corpus: FuzzCorpus
    /// Tags the request ids this maker hands out, so each is unique in the run.
    let idTag: UInt64
    private var nextID: UInt64 = 1

    init(random: FuzzRandom, corpus: FuzzCorpus, idTag: UInt64) {
        self.random = random
        self.corpus = corpus
        self.idTag = idTag
    }

    /// A request id no other message of the run carries.
    mutating func requestID() -> UInt64 {
        defer { nextID += 1 }
        return idTag << 40 | nextID
    }

    /// A ULID from this run's random numbers: a job id nobody made.
    mutating func ulid() -> ULID {
        ULID(milliseconds: 1_700_000_000_000 + UInt64(random.below(100_000_000)), randomHigh: UInt16(truncatingIfNeeded: random.next()),
             randomLow: random.next())
    }

    // MARK: Valid messages

    mutating func jobOptions() -> JobOptions {
        JobOptions(thumbnailWidth: UInt16(random.int(in: 8...48)), thumbnailHeight: UInt16(random.int(in: 8...48)),
                   quality: UInt8(random.int(in: 50...95)), thumbnailQuality: UInt8(random.int(in: 50...90)))
    }

    mutating func sourceName() -> String {
        random.pick(["photo.jpg", "IMG_0001.JPG", "photos/2024/été/plage.jpg", "写真.jpg", "a b c.jpg", "", "x", "🦩.jpg",
                     "cafe\u{301}.jpg", "right-to-left \u{202E}gpj.exe", "zero\u{200B}width.jpg", "mid\u{FEFF}bom.jpg"])
    }

    /// A valid request (or, with `replies`, a valid reply) for `socket`.
    mutating func valid(_ socket: FuzzSocket, replies: Bool = false) -> [[UInt8]] {
        let id = requestID()
        switch (socket, replies) {
        case (.frontend, false):
            switch random.below(10) {
            case 0, 1:
                // Each source format's signature (the broker looks no
                // further), and now and then bytes that start like none.
                let image: [UInt8] = switch random.below(10) {
                case 0, 1: corpus.photo
                case 2: corpus.webp
                case 3: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + random.bytes(random.int(in: 0...40))
                case 4: Array("GIF89a".utf8) + random.bytes(random.int(in: 0...40))
                default: [0xFF, 0xD8] + random.bytes(random.int(in: 0...40))
                }
                return Submit(requestID: id, priority: UInt8(random.int(in: 0...9)), options: jobOptions(),
                              pipeline: random.pick(FuzzCorpus.pipelines), sourceName: sourceName(), image: image,
                              submitKey: random.percent(50) ? ulid().description : nil,
                              // Now or already past: the job runs, as the fuzz's others do.
                              notBefore: random.percent(20) ? UInt64(random.below(1 << 40)) : nil,
                              maxAttempts: random.percent(20) ? UInt16(random.int(in: 1...10)) : nil,
                              // Mostly past (the job ends expired at once) or far ahead.
                              expires: random.percent(15) ? UInt64(random.below(1 << 42)) : nil,
                              timeLimit: random.percent(10) ? UInt32(random.int(in: 1...604_800)) : nil).frames()
            case 2: return StatusRequest(requestID: id).frames()
            case 3: return ReplayRequest(requestID: id, fromSeq: UInt64(random.below(50)), limit: UInt32(random.int(in: 1...20))).frames()
            case 4: return DeadListRequest(requestID: id, limit: UInt32(random.int(in: 1...1000)), after: random.percent(50) ? ulid() : nil).frames()
            case 5: return DeadRetry(requestID: id, target: .job(ulid())).frames()
            case 6: return DeadDiscard(requestID: id, target: .job(ulid())).frames()
            case 7: return JobInfoRequest(requestID: id, jobID: ulid()).frames()
            case 8: return CancelRequest(requestID: id, target: .job(ulid())).frames()
            case 9 where random.percent(50):
                let state = random.pick(JobListState.allCases)
                var after: JobListCursor?
                if random.percent(60) {
                    switch state {
                    case .queued: after = .queued(priority: UInt8(random.int(in: 0...9)), jobID: ulid())
                    case .delayed: after = .delayed(notBefore: UInt64(random.below(1 << 42)), jobID: ulid())
                    case .running: after = .running(jobID: ulid())
                    }
                }
                return JobListRequest(requestID: id, state: state, offset: UInt32(random.below(50)),
                                      limit: UInt32(random.int(in: 1...1000)), after: after).frames()
            default: return Ping(requestID: id).frames()
            }
        case (.frontend, true):
            switch random.below(8) {
            case 0: return Accepted(requestID: id, jobID: ulid(), eventSeq: random.next() >> 20).frames()
            case 1: return Rejected(requestID: id, code: .queueFull, reason: "queue is full").frames()
            case 2: return ReplayEnd(requestID: id, lastSeq: 3, headSeq: 9).frames()
            case 3: return Pong(requestID: id).frames()
            case 4: return OKReply(requestID: id, count: 2).frames()
            case 5: return ErrorReply(requestID: id, code: .internal, reason: "a reply that is an ERROR").frames()
            case 6: return uniqueRequestID(corpus.vectors[.frontend]!.filter { [0x14, 0x18, 0x1C, 0x40].contains($0[1].first ?? 0) }.randomElement(using: &random))
            default: return [Wire.protocolID, [Command.statusReply.rawValue], .bigEndian64(id), Array(#"{"protocolVersion":"DRK1"}"#.utf8)]
            }
        case (.backend, false):
            switch random.below(6) {
            case 0: return Ready(workerID: "fz-" + ulid().description, host: "fuzz-host", pid: UInt32(random.below(1 << 22)), slots: UInt32(random.int(in: 1...8))).frames()
            case 1: return Credit(count: UInt32(random.int(in: 1...4))).frames()
            case 2: return Done(jobID: ulid(), attempt: UInt32(random.int(in: 1...5)), recordID: ulid()).frames()
            case 3:
                return Fail(jobID: ulid(), attempt: UInt32(random.int(in: 1...5)), retryable: random.percent(50),
                            failure: FailureDetail(stepIndex: Int32(random.below(4)), step: "crop:square", code: "image.corrupt", reason: "made up")).frames()
            case 4: return Holding(jobs: (0..<random.below(4)).map { _ in Holding.Entry(jobID: ulid(), attempt: UInt32(random.int(in: 1...3))) }).frames()
            default: return Heartbeat().frames()
            }
        case (.backend, true):
            if random.percent(50) { return ErrorReply(requestID: 0, code: .malformed, reason: "an ERROR to the broker").frames() }
            if random.percent(30) { return CancelJob(jobID: ulid(), attempt: UInt32(random.int(in: 1...3))).frames() }
            return JobDispatch(jobID: ulid(), attempt: 1, options: .default, pipeline: "grayscale", sourceName: "a.jpg", image: corpus.photo,
                               timeLimit: random.percent(30) ? UInt32(random.int(in: 1...604_800)) : nil).frames()
        case (.store, false):
            switch random.below(6) {
            case 0, 1:
                return StoreRequest(requestID: id, jobID: ulid(), sourceName: sourceName(), pipeline: random.pick(FuzzCorpus.pipelines),
                                    fullSize: corpus.photoSize, thumbnailSize: corpus.thumbnailSize, full: corpus.photo, thumbnail: corpus.thumbnail).frames()
            case 2: return ListRequest(requestID: id, limit: UInt32(random.int(in: 1...1000)), before: random.percent(50) ? ulid() : nil).frames()
            case 3: return GetRequest(requestID: id, id: ulid(), variant: random.percent(50) ? .full : .thumbnail).frames()
            case 4: return DeleteRequest(requestID: id, id: ulid()).frames()
            default: return random.percent(50) ? StatsRequest(requestID: id).frames() : Ping(requestID: id).frames()
            }
        case (.store, true):
            switch random.below(5) {
            case 0: return Stored(requestID: id, jobID: ulid(), recordID: ulid(), created: true).frames()
            case 1: return Pong(requestID: id).frames()
            case 2: return OKReply(requestID: id, count: 1).frames()
            case 3: return ErrorReply(requestID: id, code: .notFound, reason: "an ERROR to the store").frames()
            default: return uniqueRequestID(corpus.vectors[.store]!.filter { [0x33, 0x35, 0x38].contains($0[1].first ?? 0) }.randomElement(using: &random))
            }
        case (.events, _):
            return corpus.vectors[.events]!.randomElement(using: &random)
        }
    }

    // MARK: Hostile messages

    /// One hostile message for `socket`, of a kind drawn by weight.
    mutating func hostile(_ socket: FuzzSocket) -> FuzzMessage {
        let weights = [46, 8, 6, 3, 4, 6, 5, 5, 4, 2]
        switch random.weighted(weights) {
        case 0: return mutatedField(valid(socket))
        case 1: return wrongFrameCount(valid(socket))
        case 2: return wrongProtocolID(valid(socket))
        case 3: return badCommandFrame(valid(socket))
        case 4: return unknownCommand()
        case 5:
            let others = FuzzSocket.allCases.filter { $0 != socket }
            let other = random.pick(others)
            let frames = uniqueRequestID(random.percent(30) ? valid(other, replies: true) : valid(other))
            return FuzzMessage(frames: frames, kind: .wrongSocket, note: "a valid \(commandName(frames)) of the \(other.rawValue) socket")
        case 6:
            let frames = valid(socket, replies: true)
            return FuzzMessage(frames: frames, kind: .replyAsRequest, note: "a valid \(commandName(frames)), a reply, sent to the server")
        case 7: return randomFrames()
        case 8:
            let frames = valid(socket)
            return FuzzMessage(frames: frames, kind: .valid, note: "a valid \(commandName(frames))")
        default:
            // Not the vector of no frames at all: a DEALER cannot send one.
            let candidates = corpus.malformed.filter { $0.socket == socket && !$0.frames.isEmpty }
            guard !candidates.isEmpty else { return randomFrames() }
            let vector = random.pick(candidates)
            return FuzzMessage(frames: uniqueRequestID(vector.frames), kind: .vector,
                               note: "malformed vector '\(vector.name)' (code \(vector.code))", vector: vector)
        }
    }

    /// `frames` with frame 2 replaced by a fresh request id when it holds one.
    mutating func uniqueRequestID(_ frames: [[UInt8]]) -> [[UInt8]] {
        guard frames.count > 2, frames[0] == Wire.protocolID, frames[1].count == 1, let command = Command(rawValue: frames[1][0]),
              command.carriesRequestID, frames[2].count == 8 else { return frames }
        var out = frames
        out[2] = .bigEndian64(requestID())
        return out
    }

    func commandName(_ frames: [[UInt8]]) -> String {
        if frames.count > 1, frames[1].count == 1, let command = Command(rawValue: frames[1][0]) { return command.name }
        if let first = frames.first, first == Wire.eventTopic || first == Wire.eventBatchTopic, frames.count > 2,
           frames[2].count == 1, let command = Command(rawValue: frames[2][0]) {
            return "\(command.name) with its topic frame"
        }
        return "message"
    }

    /// One to three fields of a valid message broken (or set to an edge value) by type.
    mutating func mutatedField(_ valid: [[UInt8]]) -> FuzzMessage {
        var frames = valid
        guard frames.count > 2, frames[1].count == 1, let command = Command(rawValue: frames[1][0]) else {
            return FuzzMessage(frames: frames, kind: .field, note: "\(commandName(frames)) unchanged")
        }
        let fields = FieldType.fields(of: command)
        var notes: [String] = []
        // The verdict on each mutated frame.
        var verdicts: [Int: Bool?] = [:]
        let count = random.percent(80) ? 1 : random.int(in: 2...3)
        // Each mutation to a frame of its own: a mutation's verdict is about
        // a valid frame, and a second one on the same frame (a byte cut off
        // a frame a byte too long) could make it valid again.
        var slots = Array(0..<min(fields.count, frames.count - 2))
        for _ in 0..<count where !slots.isEmpty {
            let slot = slots.remove(at: random.below(slots.count))
            let (name, type) = fields[slot]
            let mutation = mutate(frames[slot + 2], as: type)
            frames[slot + 2] = mutation.bytes
            verdicts[slot + 2] = mutation.malformed
            // Section 5.1: SUBMIT's key frame may be empty (no key) when a
            // not-before time follows it.
            if command == .submit, slot + 2 == 8, frames.count >= 10, mutation.bytes.isEmpty { verdicts[8] = false }
            // So may its attempts frame (the broker's number) when a deadline follows it.
            if command == .submit, slot + 2 == 10, frames.count >= 12, mutation.bytes.isEmpty { verdicts[10] = false }
            // JOB-LIST's cursor (frame 6) is a place among the jobs of its
            // state (section 5.8): another valid state makes it malformed.
            if command == .jobList, slot + 2 == 3, frames.count == 7, mutation.malformed == false,
               let state = JobListState(rawValue: String(decoding: frames[3], as: UTF8.self)),
               JobListCursor(String(decoding: frames[6], as: UTF8.self), state: state) == nil {
                verdicts[3] = true
            }
            notes.append("frame \(slot + 2) (\(name)) \(mutation.note)")
        }
        // Malformed if any frame surely is; well formed if every mutated frame surely is.
        let malformed: Bool? = verdicts.values.contains(true) ? true : verdicts.values.allSatisfy { $0 == false } ? false : nil
        return FuzzMessage(frames: frames, kind: .field, note: "\(command.name): " + notes.joined(separator: "; "), fieldsMalformed: malformed)
    }

    mutating func wrongFrameCount(_ valid: [[UInt8]]) -> FuzzMessage {
        var frames = valid
        let note: String
        switch random.below(7) {
        case 0 where frames.count > 2:
            let i = random.int(in: 2...(frames.count - 1))
            frames.remove(at: i)
            note = "frame \(i) removed"
        case 1:
            let extra = random.int(in: 1...3)
            for _ in 0..<extra { frames.append(random.percent(50) ? [] : random.bytes(random.int(in: 1...16))) }
            note = "\(extra) frame(s) added at the end"
        case 2:
            let i = random.below(frames.count)
            frames.insert(frames[i], at: i)
            note = "frame \(i) doubled"
        case 3 where frames.count > 3:
            frames = Array(frames.prefix(random.int(in: 2...(frames.count - 2))))
            note = "cut to \(frames.count) frames"
        case 4:
            frames = Array(frames.prefix(random.int(in: 0...2)))
            if frames.isEmpty { frames = [[]] }
            note = "cut to \(frames.count) frame(s)"
        case 5:
            let i = random.int(in: 2...frames.count)
            frames.insert([], at: i)
            note = "an empty frame inserted at \(i)"
        default:
            frames += Array(repeating: [UInt8](), count: random.int(in: 10...200))
            note = "\(frames.count - valid.count) empty frames added"
        }
        return FuzzMessage(frames: frames, kind: .frameCount, note: "\(commandName(valid)): \(note)")
    }

    mutating func wrongProtocolID(_ valid: [[UInt8]]) -> FuzzMessage {
        var frames = valid
        let ids: [[UInt8]] = [Array("DRK2".utf8), Array("DRK0".utf8), Array("drk1".utf8), Array("DRK".utf8), Array("DRK11".utf8),
                              Array("DRK1".utf8) + [0], Array("MDPC02".utf8), [], [0x00] + Array("DRK1".utf8), random.bytes(4),
                              random.bytes(random.int(in: 0...40)), Array("\u{FEFF}DRK1".utf8), Array("ev".utf8)]
        frames[0] = random.pick(ids)
        var note = "frame 0 is \(Wire.peerName(frames[0]))"
        if random.percent(35), frames.count > 1 {
            // Frame 1 the ERROR byte: still not an ERROR, it must get bad-version.
            frames[1] = [Command.error.rawValue]
            note += ", frame 1 is 0x01 (the ERROR byte)"
        }
        return FuzzMessage(frames: frames, kind: .protocolID, note: "\(commandName(valid)) with \(note)")
    }

    mutating func badCommandFrame(_ valid: [[UInt8]]) -> FuzzMessage {
        var frames = valid
        let choices: [[UInt8]] = [[], frames[1] + frames[1], [0, frames[1][0]], random.bytes(random.int(in: 2...9))]
        frames[1] = random.pick(choices)
        return FuzzMessage(frames: frames, kind: .commandFrame, note: "\(commandName(valid)) with a command frame of \(frames[1].count) bytes")
    }

    mutating func unknownCommand() -> FuzzMessage {
        let known = Set(Command.allCases.map(\.rawValue))
        var byte = random.byte()
        // 0x7E is kept for the backend's delimiter (see `BackendSession`).
        while known.contains(byte) || byte == 0x7E { byte = random.byte() }
        var frames: [[UInt8]] = [Wire.protocolID, [byte]]
        if random.percent(60) { frames.append(.bigEndian64(requestID())) }
        for _ in 0..<random.below(4) { frames.append(random.bytes(random.below(12))) }
        return FuzzMessage(frames: frames, kind: .unknownCommand, note: "command byte 0x\(String(byte, radix: 16)) (\(frames.count) frames)")
    }

    mutating func randomFrames() -> FuzzMessage {
        var frames: [[UInt8]] = []
        for _ in 0..<random.int(in: 1...9) {
            frames.append(random.bytes(random.percent(90) ? random.below(40) : random.below(3000)))
        }
        if random.percent(50) { frames[0] = Wire.protocolID }
        if random.percent(40), frames.count > 1 { frames[1] = [random.pick(Command.allCases).rawValue] }
        return FuzzMessage(frames: frames, kind: .randomFrames, note: "\(frames.count) random frame(s)")
    }

    // MARK: Field mutations

    /// One mutated field: its new bytes, what was done, and whether the
    /// field is now malformed by the rules of section 2.4 and the command's
    /// layout (true), still well formed (false), or either (nil: random
    /// bytes that may happen to be valid).
    struct Mutation {
        var bytes: [UInt8]
        var note: String
        var malformed: Bool?

        init(_ bytes: [UInt8], _ note: String, malformed: Bool?) {
            self.bytes = bytes
            self.note = note
            self.malformed = malformed
        }
    }

    /// `frame` broken (usually) or set to an edge value, by its type.
    mutating func mutate(_ frame: [UInt8], as type: FieldType) -> Mutation {
        switch type {
        case .requestID:
            switch random.below(4) {
            case 0: return Mutation([], "empty", malformed: true)
            case 1:
                let width = random.pick([1, 4, 7, 9, 16])
                return Mutation(random.bytes(width), "\(width) bytes", malformed: true)
            case 2: return Mutation([UInt8](repeating: 0, count: 8), "request id 0", malformed: false)
            default: return Mutation(random.bytes(8), "a random request id", malformed: false)
            }
        case .u8(let range): return integer(frame, width: 1, lower: UInt64(range.lowerBound), upper: UInt64(range.upperBound))
        case .u16: return wrongWidth(frame, width: 2)
        case .u16In(let range): return integer(frame, width: 2, lower: UInt64(range.lowerBound), upper: UInt64(range.upperBound))
        case .u32(let range): return integer(frame, width: 4, lower: UInt64(range.lowerBound), upper: UInt64(range.upperBound))
        case .u64:
            if random.percent(50) { return wrongWidth(frame, width: 8) }
            return Mutation(random.pick([[UInt8](repeating: 0xFF, count: 8), [UInt8](repeating: 0, count: 8)]), "an edge value", malformed: false)
        case .i32(let range):
            switch random.below(3) {
            case 0: return wrongWidth(frame, width: 4)
            case 1:
                let value = random.pick([Int32(-1), Int32.min, range.upperBound == Int32.max ? Int32.max : range.upperBound + 1])
                return Mutation(.bigEndian32(UInt32(bitPattern: value)), "\(value)", malformed: !range.contains(value))
            default: return Mutation(.bigEndian32(UInt32(bitPattern: range.lowerBound)), "the lowest value", malformed: false)
            }
        case .bool:
            if random.percent(30) { return wrongWidth(frame, width: 1) }
            let value = random.pick([UInt8(2), 0x80, 0xFF])
            return Mutation([value], "\(value)", malformed: true)
        case .line(let range): return text(frame, range: range)
        case .token(let range): return token(frame, range: range)
        case .ulid: return badULID(frame)
        case .optionalULID:
            if random.percent(15) { return Mutation([], "empty (absent)", malformed: false) }
            var mutation = badULID(frame)
            // Empty is allowed here: the ULID is absent.
            if mutation.bytes.isEmpty { mutation.malformed = false }
            return mutation
        case .blob(let minimum):
            if minimum > 0, random.percent(50) { return Mutation([], "empty", malformed: true) }
            let bytes = random.bytes(random.below(64))
            return Mutation(bytes, "random bytes", malformed: bytes.count < minimum)
        case .image: return image(frame)
        case .options: return options(frame)
        case .size: return size(frame)
        case .json:
            // JSON travels only in replies, which a server refuses before it reads a field.
            let choices = ["{", "[]", "null", "{\"a\":", "\u{FEFF}{}", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "{\"records\":\"many\"}", ""]
            if random.percent(15) { return Mutation([0x7B, 0xFF, 0x7D], "bad UTF-8", malformed: nil) }
            let pick = random.pick(choices)
            return Mutation(Array(pick.utf8), "JSON \(pick.prefix(12))", malformed: nil)
        case .held: return held(frame)
        case .target(let keyword):
            // The keyword ("all" for DEAD-RETRY and DEAD-DISCARD, "queued" for
            // CANCEL), or a job id: 26 characters of canonical base32 (sections 5.4, 5.6).
            let other = keyword == "all" ? "queued" : "all"
            let choices = ["everything", keyword.uppercased(), keyword + " ", "", " " + keyword, keyword + "\u{0}", other,
                           ulid().description.lowercased(), ulid().description + "0", "8" + ulid().description.dropFirst(), keyword]
            let pick = random.pick(choices)
            return Mutation(Array(pick.utf8), "target '\(pick)'", malformed: pick != keyword)
        case .keyword(let words):
            let word = random.pick(words)
            let choices = [word, word.uppercased(), word + " ", "", "stored", word + "\u{0}", String(word.dropLast())]
            let pick = random.pick(choices)
            return Mutation(Array(pick.utf8), "state '\(pick)'", malformed: !words.contains(pick))
        case .pipeline:
            if random.percent(45) {
                let pick = random.pick(FuzzCorpus.badPipelines)
                return Mutation(Array(pick.utf8), "pipeline '\(pick)' (does not parse)", malformed: false)
            }
            return text(frame, range: 1...4096)
        case .records:
            if random.percent(50) { return Mutation(Array(frame.prefix(random.below(max(1, frame.count)))), "cut short", malformed: nil) }
            return Mutation(random.bytes(random.below(200)), "random bytes", malformed: nil)
        }
    }

    mutating func wrongWidth(_ frame: [UInt8], width: Int) -> Mutation {
        let widths = [0, width - 1, width + 1, width * 2].filter { $0 >= 0 && $0 != width }
        let chosen = random.pick(widths)
        return Mutation(random.bytes(chosen), "\(chosen) bytes, must be \(width)", malformed: true)
    }

    mutating func integer(_ frame: [UInt8], width: Int, lower: UInt64, upper: UInt64) -> Mutation {
        if random.percent(35) { return wrongWidth(frame, width: width) }
        let max = width == 8 ? UInt64.max : (UInt64(1) << UInt64(width * 8)) - 1
        var values: [UInt64] = [max, 0, lower, upper]
        if lower > 0 { values.append(lower - 1) }
        if upper < max { values.append(upper + 1) }
        let value = random.pick(values)
        var bytes: [UInt8] = []
        for i in stride(from: width - 1, through: 0, by: -1) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(i * 8))) }
        return Mutation(bytes, "\(value)", malformed: !(lower...upper).contains(value))
    }

    /// A line (section 2.4): UTF-8, no byte-order mark at the start, no
    /// U+0000–U+001F or U+007F, within its byte range.
    mutating func text(_ frame: [UInt8], range: ClosedRange<Int>) -> Mutation {
        let at = frame.isEmpty ? 0 : random.below(frame.count + 1)
        func inserting(_ bytes: [UInt8]) -> [UInt8] { Array(frame[..<at]) + bytes + Array(frame[at...]) }
        switch random.below(12) {
        case 0: return Mutation(inserting([0xFF]), "with byte FF (not UTF-8)", malformed: true)
        case 1: return Mutation(inserting([0xC0, 0x80]), "with an overlong NUL (C0 80)", malformed: true)
        case 2: return Mutation(inserting([0xED, 0xA0, 0x80]), "with a UTF-16 surrogate (ED A0 80)", malformed: true)
        case 3: return Mutation(frame + [0xE2, 0x82], "ending inside a character", malformed: true)
        case 4: return Mutation(inserting([0x80]), "with a lone continuation byte", malformed: true)
        case 5: return Mutation(inserting([0xF4, 0x90, 0x80, 0x80]), "with a code point over U+10FFFF", malformed: true)
        case 6: return Mutation([0xEF, 0xBB, 0xBF] + frame, "with a leading byte-order mark", malformed: true)
        case 7:
            let control = random.pick([UInt8(0x00), 0x09, 0x0A, 0x0D, 0x1B, 0x7F])
            return Mutation(inserting([control]), "with control byte \(String(control, radix: 16))", malformed: true)
        case 8 where range.upperBound <= 4096:
            // Over the limit by a little, in multi-byte characters half the time.
            let over = range.upperBound + random.int(in: 1...3)
            let wide = random.percent(50)
            let unit: [UInt8] = wide ? [0xC3, 0xA9] : [0x78]
            var bytes: [UInt8] = []
            while bytes.count < over { bytes += unit }
            return Mutation(bytes, "\(bytes.count) bytes, limit \(range.upperBound)", malformed: true)
        case 9: return Mutation([], range.lowerBound > 0 ? "empty" : "empty (allowed)", malformed: range.lowerBound > 0)
        case 10 where range.upperBound <= 4096:
            // Exactly at the limit: valid.
            return Mutation([UInt8](repeating: 0x61, count: range.upperBound), "exactly \(range.upperBound) bytes (allowed)", malformed: false)
        default:
            let pick = random.pick(["été", "写真", "🦩🦩", "e\u{301}", "\u{202E}rtl", "a\u{FEFF}b", "\u{10FFFF}"])
            return Mutation(Array(pick.utf8), "valid Unicode '\(pick)'", malformed: false)
        }
    }

    /// Printable ASCII without spaces (0x21–0x7E), within its byte range.
    mutating func token(_ frame: [UInt8], range: ClosedRange<Int>) -> Mutation {
        switch random.below(7) {
        case 0: return Mutation(Array("fz worker".utf8), "with a space", malformed: true)
        case 1: return Mutation(Array("fz\u{7F}".utf8), "with DEL", malformed: true)
        case 2: return Mutation(Array("fz-é".utf8), "not ASCII", malformed: true)
        case 3: return Mutation([UInt8](repeating: 0x77, count: range.upperBound + 1), "\(range.upperBound + 1) bytes", malformed: true)
        case 4: return Mutation([], "empty", malformed: range.lowerBound > 0)
        case 5: return Mutation([0x66, 0x7A, 0xFF], "not UTF-8", malformed: true)
        default: return Mutation([UInt8](repeating: 0x77, count: range.upperBound), "exactly \(range.upperBound) bytes (allowed)", malformed: false)
        }
    }

    /// Section 2.5: 26 upper-case characters of Crockford's base32, the first 0–7.
    mutating func badULID(_ frame: [UInt8]) -> Mutation {
        let good = ulid().asciiBytes
        switch random.below(9) {
        case 0: return Mutation(Array(String(decoding: good, as: UTF8.self).lowercased().utf8), "lower case", malformed: true)
        case 1: return Mutation(Array(good.prefix(25)), "25 characters", malformed: true)
        case 2: return Mutation(good + [0x30], "27 characters", malformed: true)
        case 3:
            var bytes = good
            bytes[random.below(26)] = random.pick(Array("ILOU-_ ~*".utf8) + [0x00])
            return Mutation(bytes, "with a character outside Crockford's base32", malformed: true)
        case 4:
            var bytes = good
            bytes[0] = random.pick(Array("89ABZ".utf8))
            return Mutation(bytes, "over 128 bits (first character \(Character(UnicodeScalar(bytes[0]))))", malformed: true)
        case 5: return Mutation(Array("01JBX3Z7Q8M4N6P2R5T9V0W1É".utf8), "not ASCII", malformed: true)
        case 6: return Mutation([], "empty", malformed: true)
        case 7: return Mutation(random.bytes(26), "26 random bytes", malformed: nil)
        default: return Mutation(good, "a job id nobody made (valid)", malformed: false)
        }
    }

    /// An image frame is bytes, at least 1 (its content is for the broker's
    /// and the storage node's own checks, not for the decoder).
    mutating func image(_ frame: [UInt8]) -> Mutation {
        switch random.below(10) {
        case 8: return Mutation(corpus.webp, "a real WebP", malformed: false)
        case 9:
            // RIFF, a size and WEBP, then a chunk cut or garbage.
            let cut = Array(corpus.webp.prefix(random.int(in: 12...40)))
            return Mutation(random.percent(50) ? cut : Array(corpus.webp.prefix(12)) + random.bytes(random.int(in: 1...60)),
                            "a WebP cut inside its header, or its signature then garbage", malformed: false)
        case 0: return Mutation(random.bytes(random.int(in: 1...300)), "random bytes", malformed: false)
        case 1: return Mutation([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + random.bytes(30), "a PNG signature", malformed: false)
        case 2: return Mutation([0xFF, 0xD8] + random.bytes(random.int(in: 0...200)), "FF D8 then garbage", malformed: false)
        case 3: return Mutation(Array(corpus.photo.prefix(random.int(in: 2...120))), "a JPEG cut inside its header", malformed: false)
        case 4: return Mutation(corpus.wide, "a JPEG header claiming 20000×1", malformed: false)
        case 5: return Mutation([], "empty", malformed: true)
        case 6: return Mutation(random.percent(50) ? corpus.thumbnail : corpus.photo, "another real JPEG", malformed: false)
        default: return Mutation([0xFF], "one byte", malformed: false)
        }
    }

    /// Section 2.6: thumbnail sides 1–4096, qualities 1–100, output flags
    /// bits 0–6 with formats 0–1 only, thumbnail gravity 0–9.
    mutating func options(_ frame: [UInt8]) -> Mutation {
        if random.percent(20) { return wrongWidth(frame, width: 8) }
        var bytes = frame.count == 8 ? frame : JobOptions.default.bytes
        switch random.below(8) {
        case 0:
            let w = random.pick([UInt16(0), 4097, 65535])
            bytes[0] = UInt8(w >> 8); bytes[1] = UInt8(w & 0xFF)
            return Mutation(bytes, "thumbnail width \(w)", malformed: true)
        case 1:
            let h = random.pick([UInt16(0), 4097, 65535])
            bytes[2] = UInt8(h >> 8); bytes[3] = UInt8(h & 0xFF)
            return Mutation(bytes, "thumbnail height \(h)", malformed: true)
        case 2:
            bytes[4] = random.pick([UInt8(0), 101, 255])
            return Mutation(bytes, "quality \(bytes[4])", malformed: true)
        case 3:
            bytes[5] = random.pick([UInt8(0), 101, 255])
            return Mutation(bytes, "thumbnail quality \(bytes[5])", malformed: true)
        case 4:
            if random.percent(50) {
                // Bit 7, alone or beside every format value.
                bytes[6] = random.pick([UInt8(0x80), 0x98, 0xE0, 0xFF])
                return Mutation(bytes, "undefined output flags \(bytes[6])", malformed: true)
            }
            bytes[7] = random.pick([UInt8(10), 0x80, 0xFF])
            return Mutation(bytes, "thumbnail gravity \(bytes[7])", malformed: true)
        case 6:
            // Every defined flag value, a subsampling mode, progressive or
            // not, JPEG, WebP, PNG or AVIF outputs, and every thumbnail gravity (allowed).
            bytes[6] = UInt8(random.below(8)) | UInt8(random.below(4)) << 3 | UInt8(random.below(4)) << 5
            bytes[7] = UInt8(random.below(10))
            return Mutation(bytes, "output flags \(bytes[6]), thumbnail gravity \(bytes[7]) (allowed)", malformed: false)
        case 5:
            // Edge values that are allowed: a 1×1 thumbnail, qualities 1 and 100. (Not 4096 a
            // side: an aspect-fill thumbnail that large costs the worker seconds in a debug build.)
            bytes = JobOptions(thumbnailWidth: 1, thumbnailHeight: 1, quality: 1, thumbnailQuality: 100).bytes
            return Mutation(bytes, "edge values 1×1, qualities 1 and 100 (allowed)", malformed: false)
        default:
            return Mutation(random.bytes(8), "random bytes", malformed: nil)
        }
    }

    /// Section 11: width u32 and height u32, each 1–65535.
    mutating func size(_ frame: [UInt8]) -> Mutation {
        if random.percent(20) { return wrongWidth(frame, width: 8) }
        let old = frame.count == 8 ? frame : [0, 0, 0, 48, 0, 0, 0, 32]
        let width = UInt32(old[0]) << 24 | UInt32(old[1]) << 16 | UInt32(old[2]) << 8 | UInt32(old[3])
        let height = UInt32(old[4]) << 24 | UInt32(old[5]) << 16 | UInt32(old[6]) << 8 | UInt32(old[7])
        let (w, h): (UInt32, UInt32)
        switch random.below(5) {
        case 0: (w, h) = (0, height)
        case 1: (w, h) = (width, random.pick([0, 65_536, UInt32.max]))
        case 2: (w, h) = (width &+ 1, height)
        case 3: (w, h) = (width, height > 1 ? height - 1 : 2)
        default: (w, h) = (height, width)
        }
        let side: ClosedRange<UInt32> = 1...65_535
        return Mutation(.bigEndian32(w) + .bigEndian32(h), "\(w)x\(h)", malformed: !(side.contains(w) && side.contains(h)))
    }

    /// Section 6.1: entries of 30 bytes (a canonical ULID, an attempt of at
    /// least 1), at most DRK1's 4096 slots, no job twice.
    mutating func held(_ frame: [UInt8]) -> Mutation {
        func entry(_ id: [UInt8], _ attempt: UInt32) -> [UInt8] { id + .bigEndian32(attempt) }
        switch random.below(8) {
        case 0: return Mutation(frame + [0], "\(frame.count + 1) bytes, not a multiple of 30", malformed: true)
        case 1: return Mutation(entry(ulid().asciiBytes, 1) + entry(ulid().asciiBytes, 0), "a job at attempt 0", malformed: true)
        case 2:
            let one = entry(ulid().asciiBytes, 2)
            return Mutation(one + entry(ulid().asciiBytes, 1) + one, "a job listed twice", malformed: true)
        case 3: return Mutation(entry(Array(ulid().description.lowercased().utf8), 1), "a lower-case job id", malformed: true)
        case 4:
            var bytes: [UInt8] = []
            let count = Int(Wire.Limit.maxSlots) + 1
            for _ in 0..<count { bytes += entry(ulid().asciiBytes, 1) }
            return Mutation(bytes, "\(count) jobs", malformed: true)
        case 5 where !frame.isEmpty: return Mutation(Array(frame.dropLast()), "one byte short", malformed: true)
        case 6: return Mutation(entry(Array("01JBX3Z7Q8M4N6P2R5T9V0W1XU".utf8), 1), "a job id with U", malformed: true)
        default: return Mutation([], "no jobs (allowed)", malformed: false)
        }
    }
}

extension Array where Element == UInt8 {
    static func bigEndian64(_ value: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian64(value)
        return out
    }

    static func bigEndian32(_ value: UInt32) -> [UInt8] {
        var out: [UInt8] = []
        out.appendBigEndian32(value)
        return out
    }
}

extension Array {
    /// An element picked by the fuzz's generator (never empty here).
    func randomElement(using random: inout FuzzRandom) -> Element { self[random.below(count)] }
}
