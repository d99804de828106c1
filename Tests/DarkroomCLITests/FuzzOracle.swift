import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol

/// One reply a server sent, with the fields a pattern looks at.
struct FuzzReply: CustomStringConvertible {
    let frames: [[UInt8]]
    let command: Command?
    /// Frame 2 when the command carries a request id.
    let requestID: UInt64?
    /// ERROR and REJECTED: the code and reason.
    let code: UInt16?
    let reason: String?

    init(_ frames: [[UInt8]]) {
        self.frames = frames
        command = frames.count > 1 && frames[1].count == 1 ? Command(rawValue: frames[1][0]) : nil
        if let command, command.carriesRequestID, frames.count > 2, frames[2].count == 8 {
            requestID = frames[2].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        } else {
            requestID = nil
        }
        if command == .error || command == .rejected, frames.count > 4, frames[3].count == 2 {
            code = UInt16(frames[3][0]) << 8 | UInt16(frames[3][1])
            reason = String(decoding: frames[4], as: UTF8.self)
        } else {
            code = nil
            reason = nil
        }
    }

    var description: String {
        guard let command else { return "a message of \(frames.count) frame(s) that is not DRK1" }
        var text = command.name
        if let requestID { text += " id \(requestID)" }
        if let code { text += " \(ErrorCode(rawValue: code).name)" }
        if let reason { text += " '\(reason.prefix(160))'" }
        return text
    }
}

/// How a reply's reason is checked: exactly (the decoder's own words, when
/// the server answers with the same decoder), by its start (section 11's
/// `full:` and `thumbnail:`), or not at all (the specification only says
/// what it SHOULD name).
enum ReasonRule {
    case exact(String)
    case prefix(String)
    case contains(String)
    case any
}

/// One reply the specification names for a message.
enum ReplyPattern: CustomStringConvertible {
    case error(ErrorCode, requestID: UInt64, reason: ReasonRule)
    case rejected([ErrorCode], requestID: UInt64)
    case reply(Command, requestID: UInt64)
    case stored(requestID: UInt64, jobID: ULID, created: Bool)
    case getReply(requestID: UInt64, variant: UInt8, image: [UInt8])
    case disconnect

    func matches(_ reply: FuzzReply) -> Bool {
        switch self {
        case .error(let code, let id, let rule):
            guard reply.command == .error, reply.code == code.rawValue, reply.requestID == id, let reason = reply.reason else { return false }
            switch rule {
            case .exact(let expected): return reason == expected
            case .prefix(let start): return reason.hasPrefix(start)
            case .contains(let part): return reason.contains(part)
            case .any: return true
            }
        case .rejected(let codes, let id):
            return reply.command == .rejected && reply.requestID == id && codes.contains { $0.rawValue == reply.code }
        case .reply(let command, let id):
            return reply.command == command && reply.requestID == id
        case .stored(let id, let jobID, let created):
            return reply.command == .stored && reply.requestID == id && reply.frames.count == 6
                && reply.frames[3] == jobID.asciiBytes && reply.frames[5] == [created ? 1 : 0]
        case .getReply(let id, let variant, let image):
            return reply.command == .getReply && reply.requestID == id && reply.frames.count == 6
                && reply.frames[3] == [variant] && reply.frames[5] == image
        case .disconnect:
            return reply.command == .disconnect
        }
    }

    /// How much of a reply the pattern pins down, to choose among the
    /// messages a reply could answer.
    var specificity: Int {
        guard case .error(_, _, let rule) = self else { return 2 }
        switch rule {
        case .exact: return 3
        case .prefix, .contains: return 1
        case .any: return 0
        }
    }

    /// Whether both are ERRORs of one code, whatever their ids and reasons.
    func sameCode(_ other: ReplyPattern) -> Bool {
        guard case .error(let code, _, _) = self, case .error(let otherCode, _, _) = other else { return false }
        return code == otherCode
    }

    /// The same kind of reply with another request id: what a server that
    /// answers with the wrong id sends.
    func matchesButForRequestID(_ reply: FuzzReply) -> Bool {
        switch self {
        case .error(let code, _, _): return reply.command == .error && reply.code == code.rawValue
        case .rejected(let codes, _): return reply.command == .rejected && codes.contains { $0.rawValue == reply.code }
        case .reply(let command, _): return reply.command == command
        default: return false
        }
    }

    var description: String {
        switch self {
        case .error(let code, let id, let rule):
            switch rule {
            case .exact(let reason): return "ERROR id \(id) \(code.name) '\(reason.prefix(160))'"
            case .prefix(let start): return "ERROR id \(id) \(code.name) '\(start)…'"
            case .contains(let part): return "ERROR id \(id) \(code.name) '…\(part)…'"
            case .any: return "ERROR id \(id) \(code.name)"
            }
        case .rejected(let codes, let id): return "REJECTED id \(id) \(codes.map(\.name).joined(separator: " or "))"
        case .reply(let command, let id): return "\(command.name) id \(id)"
        case .stored(let id, let jobID, let created): return "STORED id \(id) job \(jobID) created \(created ? 1 : 0)"
        case .getReply(let id, let variant, let image): return "GET-REPLY id \(id) variant \(variant) (\(image.count) bytes)"
        case .disconnect: return "DISCONNECT"
        }
    }
}

/// What a server must answer one message: one of `replies`, or nothing
/// when `replies` is empty.
struct Expectation: CustomStringConvertible {
    var replies: [ReplyPattern]
    /// A REPLAY: the EVENTs before its REPLAY-END carry no request id.
    var replayEvents = false
    /// Where the oracle and the decoder disagree about a message's fields
    /// (section 2.4): reported as a mismatch of its own.
    var disagreement: String?

    static let silence = Expectation(replies: [])

    init(replies: [ReplyPattern], replayEvents: Bool = false) {
        self.replies = replies
        self.replayEvents = replayEvents
    }

    init(_ reply: ReplyPattern) { self.init(replies: [reply]) }

    var description: String { replies.isEmpty ? "no reply" : replies.map(\.description).joined(separator: " or ") }
}

/// Section 3.2, steps 1 to 6, and the request id rule of section 9.2,
/// written out from the specification's tables rather than taken from
/// DarkroomProtocol, so that the servers' answers are held to the text.
/// Step 7, the fields, is the decoder's; the fuzz's own verdict on the
/// fields it broke holds the decoder to section 2.4 in turn.
enum SpecChecks {
    /// Every command byte of section 3.
    static let defined: Set<UInt8> = Set([0x01, 0x02, 0x03, 0x04] + Array(0x10...0x1F) + Array(0x20...0x28) + Array(0x30...0x38) + [0x40, 0x41, 0x50, 0x51])
    /// The commands that carry a request id in frame 2 (section 3.1).
    static let carriesRequestID: Set<UInt8> = Set([0x01, 0x02, 0x03, 0x04] + Array(0x10...0x1F) + Array(0x30...0x38) + [0x50, 0x51])
    /// The commands each server reads, with their frame counts (sections
    /// 3.2, 4, 5, 6.1, 11): the requests, ERROR, and on the backend
    /// HEARTBEAT, DISCONNECT and a probe's PING, and PONG.
    static let toServer: [FuzzSocket: [UInt8: Set<Int>]] = [
        .frontend: [0x01: [5], 0x02: [3], 0x10: [8, 9, 10, 11, 12, 13], 0x13: [3], 0x15: [5], 0x17: [5], 0x19: [4], 0x1A: [4], 0x1B: [4], 0x1D: [4], 0x1E: [3], 0x1F: [3], 0x50: [6, 7]],
        .backend: [0x01: [5], 0x02: [3], 0x03: [3], 0x20: [6], 0x21: [3], 0x23: [5], 0x24: [9], 0x25: [2], 0x26: [2], 0x27: [3]],
        .store: [0x01: [5], 0x02: [3], 0x30: [10], 0x32: [5], 0x34: [5], 0x36: [4], 0x37: [3]],
    ]
    /// The replies, which travel to the peers: a server that gets one MAY
    /// answer with request id 0 (section 9.2).
    static let replies: Set<UInt8> = [0x03, 0x04, 0x11, 0x12, 0x14, 0x16, 0x18, 0x1C, 0x31, 0x33, 0x35, 0x38, 0x51]

    /// What steps 1 to 6 make of a message.
    enum Outcome {
        /// Over 65 MiB in all: dropped unanswered.
        case dropped
        /// A DRK1 ERROR: never answered.
        case error
        /// Refused: the code and the request ids the ERROR may carry.
        case refused(ErrorCode, requestIDs: [UInt64], reason: ReasonRule)
        /// It passed; its fields decide (step 7).
        case passes(command: UInt8)
    }

    static func check(_ frames: [[UInt8]], on socket: FuzzSocket) -> Outcome {
        if frames.reduce(0, { $0 + $1.count }) > Int(Wire.maxMessageSize) { return .dropped }
        guard let first = frames.first else { return .refused(.malformed, requestIDs: [0], reason: .any) }
        guard first == Array("DRK1".utf8) else { return .refused(.badVersion, requestIDs: [0], reason: .contains("DRK1")) }
        guard frames.count >= 2, frames[1].count == 1 else { return .refused(.malformed, requestIDs: [0], reason: .any) }
        let byte = frames[1][0]
        if byte == 0x01 { return .error }
        guard defined.contains(byte) else { return .refused(.unknownCommand, requestIDs: [0], reason: .any) }
        let id: UInt64 = carriesRequestID.contains(byte) && frames.count > 2 && frames[2].count == 8
            ? frames[2].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } : 0
        guard let counts = toServer[socket]?[byte] else {
            return .refused(.unexpectedCommand, requestIDs: replies.contains(byte) ? [id, 0] : [id], reason: .any)
        }
        guard counts.contains(frames.count) else { return .refused(.malformed, requestIDs: [id], reason: .any) }
        return .passes(command: byte)
    }

    /// The answer to `frames` on `socket` by steps 1 to 7, or, when it is
    /// well formed, by `semantic` (the command's own rules).
    static func expect<Message>(_ frames: [[UInt8]], on socket: FuzzSocket, fieldsMalformed: Bool?, vector: MalformedVector?,
                                decode: ([[UInt8]]) throws(ProtocolError) -> Message,
                                semantic: (Message) -> Expectation) -> Expectation {
        var expectation: Expectation
        let decoded = Result { () throws(ProtocolError) in try decode(frames) }
        switch check(frames, on: socket) {
        case .dropped, .error:
            expectation = .silence
        case .refused(let code, let ids, let reason):
            expectation = Expectation(replies: ids.map { .error(code, requestID: $0, reason: reason) })
        case .passes(let byte):
            let name = Command(rawValue: byte)?.name ?? "?"
            let id: UInt64 = carriesRequestID.contains(byte) && frames[2].count == 8 ? frames[2].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } : 0
            switch decoded {
            case .failure(let refusal):
                // Step 7: the first bad field, named in the reason.
                expectation = Expectation(.error(.malformed, requestID: id, reason: .prefix("\(name): frame ")))
                if refusal.code != .malformed || fieldsMalformed == false {
                    expectation.disagreement = "the decoder refuses it (\(refusal)), but by section 2.4 its fields are well formed"
                }
            case .success(let message):
                expectation = semantic(message)
                if fieldsMalformed == true {
                    expectation.disagreement = "the decoder reads it, but by section 2.4 a field is malformed"
                }
            }
        }
        // A malformed vector made for this server: exactly its code, request id and reason (section 14).
        if let vector, vector.toServer {
            let id = vector.requestID == 0 ? 0 : frames[2].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let vectorExpectation = Expectation(.error(ErrorCode(rawValue: vector.code), requestID: id, reason: vector.reason.map { .exact($0) } ?? .any))
            if !expectation.replies.contains(where: { pattern in vectorExpectation.replies.contains { $0.sameCode(pattern) } }) {
                expectation.disagreement = "vector '\(vector.name)' wants \(vectorExpectation), section 3.2 gives \(expectation)"
            }
            return vectorExpectation
        }
        return expectation
    }
}

/// The broker frontend's answers (sections 3.2, 4, 5 and 9.2).
enum FrontendOracle {
    static func expect(_ message: FuzzMessage) -> Expectation {
        expect(message.frames, fieldsMalformed: message.fieldsMalformed, vector: message.vector)
    }

    static func expect(_ frames: [[UInt8]], fieldsMalformed: Bool? = nil, vector: MalformedVector? = nil) -> Expectation {
        SpecChecks.expect(frames, on: .frontend, fieldsMalformed: fieldsMalformed, vector: vector,
                          decode: { frames throws(ProtocolError) in try FrontendMessage.decode(frames, to: .server) }) { message in
            switch message {
            case .submit(let submit): return expect(submit)
            case .ping(let ping): return Expectation(.reply(.pong, requestID: ping.requestID))
            case .status(let status): return Expectation(.reply(.statusReply, requestID: status.requestID))
            case .replay(let replay): return Expectation(replies: [.reply(.replayEnd, requestID: replay.requestID)], replayEvents: true)
            case .deadList(let list): return Expectation(.reply(.deadListReply, requestID: list.requestID))
            case .deadRetry(let request): return dead(request.requestID, request.target)
            case .deadDiscard(let request): return dead(request.requestID, request.target)
            // A job id the fuzz made up: no job has it.
            case .jobInfo(let request): return Expectation(.error(.notFound, requestID: request.requestID, reason: .any))
            // Every waiting job: OK with their number. A made-up job id: not-found (section 5.6).
            case .cancel(let request):
                switch request.target {
                case .queued: return Expectation(.reply(.ok, requestID: request.requestID))
                case .job: return Expectation(.error(.notFound, requestID: request.requestID, reason: .any))
                }
            // OK whether or not dispatch changed (section 5.7).
            case .pause(let request): return Expectation(.reply(.ok, requestID: request.requestID))
            case .jobList(let request): return Expectation(.reply(.jobListReply, requestID: request.requestID))
            case .resume(let request): return Expectation(.reply(.ok, requestID: request.requestID))
            default: return .silence
            }
        }
    }

    /// A SUBMIT that decodes: REJECTED for an image over the limit, one that
    /// starts like no JPEG, PNG or WebP, or a pipeline that does not parse (section 5.1; the
    /// specification does not order the last two), else ACCEPTED.
    static func expect(_ submit: Submit) -> Expectation {
        if submit.image.count > Wire.maxImageBytes { return Expectation(.rejected([.tooLarge], requestID: submit.requestID)) }
        var codes: [ErrorCode] = []
        let image = submit.image
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        let webp = image.count >= 12 && image.prefix(4).elementsEqual("RIFF".utf8) && image[8..<12].elementsEqual("WEBP".utf8)
        let gif = image.starts(with: "GIF87a".utf8) || image.starts(with: "GIF89a".utf8)
        if !(image.starts(with: [0xFF, 0xD8]) || image.starts(with: png) || webp || gif) { codes.append(.invalidImage) }
        if (try? Pipeline(parsing: submit.pipeline)) == nil { codes.append(.invalidPipeline) }
        if codes.isEmpty { return Expectation(.reply(.accepted, requestID: submit.requestID)) }
        return Expectation(.rejected(codes, requestID: submit.requestID))
    }

    /// DEAD-RETRY and DEAD-DISCARD: OK for `all`; a job id the fuzz made up
    /// is never dead, so ERROR not-found (section 5.4).
    static func dead(_ requestID: UInt64, _ target: DeadTarget) -> Expectation {
        switch target {
        case .all: Expectation(.reply(.ok, requestID: requestID))
        case .job: Expectation(.error(.notFound, requestID: requestID, reason: .any))
        }
    }
}

/// The storage node's answers (sections 3.2, 4, 9.2 and 11), with the
/// records the fuzz has stored so far for job ids it made up.
struct StoreOracle {
    struct Record {
        var full: [UInt8]
        var thumbnail: [UInt8]
    }

    /// Made-up job ids that have a record, in the order they got it.
    private(set) var records: [ULID: Record] = [:]
    private(set) var order: [ULID] = []

    mutating func expect(_ message: FuzzMessage) -> Expectation {
        expect(message.frames, fieldsMalformed: message.fieldsMalformed, vector: message.vector)
    }

    mutating func expect(_ frames: [[UInt8]], fieldsMalformed: Bool? = nil, vector: MalformedVector? = nil) -> Expectation {
        SpecChecks.expect(frames, on: .store, fieldsMalformed: fieldsMalformed, vector: vector,
                          decode: { frames throws(ProtocolError) in try StoreMessage.decode(frames, to: .server) }) { message in
            semantic(message)
        }
    }

    private mutating func semantic(_ message: StoreMessage) -> Expectation {
        switch message {
        case .store(let request):
            if let (code, name) = StoreOracle.refusal(of: request) {
                return Expectation(.error(code, requestID: request.requestID, reason: .prefix(name + ": ")))
            }
            let created = records[request.jobID] == nil
            if created {
                records[request.jobID] = Record(full: request.full, thumbnail: request.thumbnail)
                order.append(request.jobID)
            }
            return Expectation(.stored(requestID: request.requestID, jobID: request.jobID, created: created))
        case .list(let list): return Expectation(.reply(.listReply, requestID: list.requestID))
        case .get(let get):
            guard let record = records[get.id] else { return Expectation(.error(.notFound, requestID: get.requestID, reason: .any)) }
            let image = get.variant == .full ? record.full : record.thumbnail
            return Expectation(.getReply(requestID: get.requestID, variant: get.variant.rawValue, image: image))
        case .delete(let delete):
            guard records.removeValue(forKey: delete.id) != nil else {
                return Expectation(.error(.notFound, requestID: delete.requestID, reason: .any))
            }
            order.removeAll { $0 == delete.id }
            return Expectation(.reply(.ok, requestID: delete.requestID))
        case .stats(let stats): return Expectation(.reply(.statsReply, requestID: stats.requestID))
        case .ping(let ping): return Expectation(.reply(.pong, requestID: ping.requestID))
        default: return .silence
        }
    }

    /// Section 11's checks of a STORE's images, full then thumbnail, each
    /// by its header: a JPEG, or a still WebP, whose header parses (else
    /// invalid-image), within the limits (else too-large), of exactly the
    /// declared size (else invalid-image). Returns the code and the image's
    /// name.
    static func refusal(of request: StoreRequest) -> (ErrorCode, String)? {
        for (bytes, declared, name) in [(request.full, request.fullSize, "full"), (request.thumbnail, request.thumbnailSize, "thumbnail")] {
            do {
                let size: Size
                if WebP.isWebP(bytes) {
                    let header = try WebP.readHeader(bytes, limits: .default)
                    if header.isAnimated { return (.invalidImage, name) }
                    size = header.size
                } else {
                    size = try JPEG.readHeader(bytes, limits: .default).storedSize
                }
                if size.width != Int(declared.width) || size.height != Int(declared.height) {
                    return (.invalidImage, name)
                }
            } catch {
                return (error.code == .limitExceeded ? .tooLarge : .invalidImage, name)
            }
        }
        return nil
    }
}

/// One connection to the broker backend, as the broker must see it
/// (sections 3.2, 6.2 and 9.2). The backend has no request ids but PING's:
/// a session's replies are told apart by what they are.
struct BackendSession {
    /// The broker knows the connection: it sent a READY that decoded and
    /// has not disconnected.
    private(set) var known = false
    /// Nothing that settles held jobs came since READY, so a HOLDING now
    /// is the one allowed directly after READY. HEARTBEAT, PING and PONG do
    /// not settle: the broker's socket thread answers them or takes them
    /// as a sign of life, and keeps them from the queue.
    private(set) var justReady = false
    /// Known at some time: the broker may send HEARTBEATs to it.
    private(set) var everKnown = false

    /// Whether `frames` would grant credit on a known connection. The fuzz
    /// never sends one: the broker would send it real jobs.
    func grantsCredit(_ frames: [[UInt8]]) -> Bool {
        guard known, case .credit? = try? BackendMessage.decode(frames, to: .server) else { return false }
        return true
    }

    mutating func expect(_ message: FuzzMessage) -> Expectation {
        expect(message.frames, fieldsMalformed: message.fieldsMalformed, vector: message.vector)
    }

    mutating func expect(_ frames: [[UInt8]], fieldsMalformed: Bool? = nil, vector: MalformedVector? = nil) -> Expectation {
        SpecChecks.expect(frames, on: .backend, fieldsMalformed: fieldsMalformed, vector: vector,
                          decode: { frames throws(ProtocolError) in try BackendMessage.decode(frames, to: .server) }) { message in
            semantic(message)
        }
    }

    private mutating func semantic(_ message: BackendMessage) -> Expectation {
        switch message {
        case .ready:
            known = true
            justReady = true
            everKnown = true
            return .silence
        case .disconnect:
            known = false
            justReady = false
            return .silence
        case .ping(let ping):
            // A probe's PING: PONG, and nothing registered (section 4).
            return Expectation(.reply(.pong, requestID: ping.requestID))
        case .heartbeat:
            return known ? .silence : Expectation(.disconnect)
        case .credit, .done, .fail:
            // From a connection the broker does not know (it never sent
            // READY): DISCONNECT, after applying a DONE or FAIL (section 6.2).
            guard known else { return Expectation(.disconnect) }
            justReady = false
            return .silence
        case .holding:
            guard known else { return Expectation(.disconnect) }
            if justReady {
                justReady = false
                return .silence
            }
            return Expectation(.error(.unexpectedCommand, requestID: 0, reason: .any))
        default:
            // ERROR and PONG: nothing to answer.
            return .silence
        }
    }
}
