import Foundation
import Testing
@testable import DarkroomProtocol

/// The vectors in protocol/vectors/drk1.json are written by an independent
/// encoder (generate.py) from the specification. Decoding them, checking the
/// stated fields and re-encoding to the same bytes checks this module against
/// the text of the spec.
struct VectorFile: Decodable {
    struct Vector: Decodable, CustomTestStringConvertible {
        var name: String
        var socket: String
        var description: String
        /// "server" or "peer": which end of the socket reads it (none on the events socket).
        var receiver: String?
        var frames: [String]
        var fields: [String: String]
        var testDescription: String { name }
    }

    struct Malformed: Decodable, CustomTestStringConvertible {
        var name: String
        var socket: String
        var description: String
        /// The end of the socket that reads it (none on the events socket).
        var receiver: String?
        /// Whether it is bad only because `receiver` reads it: the other end would decode it.
        var wrongDirection: Bool?
        var frames: [String]
        var code: UInt16
        var reason: String?
        /// The request id of the ERROR that answers it (not on the events socket).
        var requestID: UInt64?
        var testDescription: String { name }
    }

    var protocolVersion: String
    var vectors: [Vector]
    var malformed: [Malformed]

    enum CodingKeys: String, CodingKey {
        case protocolVersion = "protocol", vectors, malformed
    }

    static let url = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/vectors/drk1.json")

    static let loaded: VectorFile = {
        do {
            return try JSONDecoder().decode(VectorFile.self, from: Data(contentsOf: url))
        } catch {
            Issue.record("cannot read \(url.path): \(error)")
            return VectorFile(protocolVersion: "", vectors: [], malformed: [])
        }
    }()
}

func hexFrames(_ frames: [String]) -> [[UInt8]] {
    frames.map { hex in
        var bytes: [UInt8] = []
        var chars = Array(hex.utf8)[...]
        while chars.count >= 2 {
            let pair = String(decoding: chars.prefix(2), as: UTF8.self)
            bytes.append(UInt8(pair, radix: 16) ?? 0)
            chars = chars.dropFirst(2)
        }
        return bytes
    }
}

/// A decoded message of any socket, so vectors can be checked uniformly.
enum AnyMessage {
    case frontend(FrontendMessage)
    case backend(BackendMessage)
    case store(StoreMessage)
    case events(EventMessage)

    static func decode(_ frames: [[UInt8]], socket: String) throws(ProtocolError) -> AnyMessage {
        switch socket {
        case "frontend": return .frontend(try FrontendMessage.decode(frames))
        case "backend": return .backend(try BackendMessage.decode(frames))
        case "store": return .store(try StoreMessage.decode(frames))
        default: return .events(try EventMessage.decode(frames))
        }
    }

    /// Decodes as the given end of the socket reads it (section 3.2).
    static func decode(_ frames: [[UInt8]], socket: String, receiver: String?) throws(ProtocolError) -> AnyMessage {
        guard let receiver else { return try decode(frames, socket: socket) }
        let end: Receiver = receiver == "server" ? .server : .peer
        switch socket {
        case "frontend": return .frontend(try FrontendMessage.decode(frames, to: end))
        case "backend": return .backend(try BackendMessage.decode(frames, to: end))
        case "store": return .store(try StoreMessage.decode(frames, to: end))
        default: return .events(try EventMessage.decode(frames))
        }
    }

    func frames() -> [[UInt8]] {
        switch self {
        case .frontend(let m): m.frames()
        case .backend(let m): m.frames()
        case .store(let m): m.frames()
        case .events(let m): m.frames()
        }
    }

    var command: Command {
        switch self {
        case .frontend(let m): m.command
        case .backend(let m): m.command
        case .store(let m): m.command
        case .events(let m): m.command
        }
    }
}

@Suite("Test vectors")
struct VectorTests {
    static let vectors = VectorFile.loaded.vectors
    static let malformed = VectorFile.loaded.malformed

    @Test func fileIsDRK1AndCoversEveryCommand() {
        let file = VectorFile.loaded
        #expect(file.protocolVersion == "DRK1")
        var covered = Set<Command>()
        for v in file.vectors {
            if let m = try? AnyMessage.decode(hexFrames(v.frames), socket: v.socket) { covered.insert(m.command) }
        }
        let missing = Set(Command.allCases).subtracting(covered)
        #expect(missing.isEmpty, "commands without a vector: \(missing.map(\.name).sorted())")
        #expect(file.malformed.count >= 20)
    }

    @Test(arguments: vectors)
    func decodesAndReencodesIdentically(_ vector: VectorFile.Vector) throws {
        let frames = hexFrames(vector.frames)
        let message = try AnyMessage.decode(frames, socket: vector.socket)
        if vector.socket != "events" {
            let receiver = try #require(vector.receiver, "\(vector.name) names no receiver")
            let directed = try AnyMessage.decode(frames, socket: vector.socket, receiver: receiver)
            #expect(directed.frames() == frames, "\(vector.name) decodes differently for its receiver")
            let other = receiver == "server" ? "peer" : "server"
            let twoWay: Set<Command> = [.error, .heartbeat, .disconnect]
            let twoWayOnBackend: Set<Command> = [.ping, .pong]
            if !twoWay.contains(message.command), !(vector.socket == "backend" && twoWayOnBackend.contains(message.command)) {
                #expect(throws: ProtocolError.self, "\(vector.name) is refused by the other end") {
                    try AnyMessage.decode(frames, socket: vector.socket, receiver: other)
                }
            }
        }
        let fields = describe(message)
        for (key, expected) in vector.fields {
            #expect(fields[key] == expected, "\(vector.name): field \(key)")
        }
        #expect(message.frames() == frames, "\(vector.name) re-encodes to different bytes")
    }

    @Test(arguments: malformed)
    func rejectsMalformed(_ vector: VectorFile.Malformed) {
        let frames = hexFrames(vector.frames)
        // Bad for its receiver, and (unless only the direction is wrong) for
        // a decoder that reads both ways.
        var receivers: [String?] = [vector.receiver]
        if vector.receiver != nil, vector.wrongDirection != true { receivers.append(nil) }
        for receiver in receivers {
            do {
                _ = try AnyMessage.decode(frames, socket: vector.socket, receiver: receiver)
                Issue.record("\(vector.name): decoded by \(receiver ?? "either end"), but must be rejected")
            } catch {
                #expect(error.code.rawValue == vector.code, "\(vector.name) (\(receiver ?? "either end")): \(error)")
                if let reason = vector.reason {
                    #expect(error.reason == reason, "\(vector.name) (\(receiver ?? "either end"))")
                }
                if let requestID = vector.requestID {
                    #expect(Wire.errorReply(to: frames, for: error).requestID == requestID, "\(vector.name): ERROR request id")
                }
            }
        }
        if vector.socket != "events" {
            #expect(vector.requestID != nil, "\(vector.name) gives no request id for its ERROR")
        }
    }
}

/// Flattens a decoded message into the dotted keys the vector file uses.
func describe(_ message: AnyMessage) -> [String: String] {
    var f: [String: String] = ["command": message.command.name]
    func set(_ key: String, _ value: Any?) {
        if let value { f[key] = "\(value)" } else { f[key] = "nil" }
    }
    func options(_ o: JobOptions) {
        set("options.thumbnailWidth", o.thumbnailWidth)
        set("options.thumbnailHeight", o.thumbnailHeight)
        set("options.quality", o.quality)
        set("options.thumbnailQuality", o.thumbnailQuality)
        set("options.subsampling", o.subsampling)
        set("options.progressive", o.progressive)
        set("options.thumbnailGravity", o.thumbnailGravity)
        set("options.format", o.format)
        set("options.thumbnailFormat", o.thumbnailFormat)
    }
    func failure(_ d: FailureDetail?, _ prefix: String = "") {
        guard let d else { return set(prefix + "failure", nil) }
        set(prefix + "failure.stepIndex", d.stepIndex)
        set(prefix + "failure.step", d.step)
        set(prefix + "failure.code", d.code)
        set(prefix + "failure.reason", d.reason)
    }
    func record(_ prefix: String, _ r: RecordInfo) {
        set("\(prefix).id", r.id)
        set("\(prefix).jobID", r.jobID)
        set("\(prefix).full.width", r.full.width)
        set("\(prefix).thumb.width", r.thumb.width)
        set("\(prefix).full.format", r.full.format)
        set("\(prefix).thumb.format", r.thumb.format)
    }
    func event(_ e: Event, _ p: String = "") {
        set(p + "seq", e.seq); set(p + "time", e.time); set(p + "kind", e.kind); set(p + "jobID", e.jobID)
        set(p + "attempt", e.attempt); set(p + "sourceName", e.sourceName); set(p + "workerID", e.workerID)
        set(p + "recordID", e.recordID); failure(e.failure, p)
    }
    switch message {
    case .frontend(let m):
        switch m {
        case .submit(let s):
            set("requestID", s.requestID); set("priority", s.priority); options(s.options)
            set("pipeline", s.pipeline); set("sourceName", s.sourceName); set("image.count", s.image.count)
            set("submitKey", s.submitKey); set("notBefore", s.notBefore); set("maxAttempts", s.maxAttempts); set("expires", s.expires)
            set("timeLimit", s.timeLimit)
        case .accepted(let a): set("requestID", a.requestID); set("jobID", a.jobID); set("eventSeq", a.eventSeq)
        case .rejected(let r): set("requestID", r.requestID); set("code", r.code.rawValue); set("reason", r.reason)
        case .status(let s): set("requestID", s.requestID)
        case .statusReply(let s):
            set("requestID", s.requestID); set("status.eventSeq", s.status.eventSeq)
            set("status.queue.inFlight", s.status.queue.inFlight); set("status.queue.depth", s.status.queue.depth)
            set("status.workers.count", s.status.workers.count); set("status.workers.0.host", s.status.workers.first?.host)
            set("status.rates.accepted", s.status.rates.accepted)
            if let since = s.status.queue.pausedSince { set("status.queue.pausedSince", since) }
        case .replay(let r): set("requestID", r.requestID); set("fromSeq", r.fromSeq); set("limit", r.limit)
        case .replayEnd(let r): set("requestID", r.requestID); set("lastSeq", r.lastSeq); set("headSeq", r.headSeq)
        case .event(let e): event(e)
        case .deadList(let d): set("requestID", d.requestID); set("limit", d.limit); set("after", d.after)
        case .deadListReply(let d):
            set("requestID", d.requestID); set("list.total", d.list.total)
            set("list.jobs.0.jobID", d.list.jobs.first?.jobID); set("list.jobs.0.errorCode", d.list.jobs.first?.errorCode)
            set("list.jobs.0.stepIndex", d.list.jobs.first?.stepIndex)
        case .cancel(let c): set("requestID", c.requestID); set("target", c.target)
        case .pause(let p): set("requestID", p.requestID)
        case .jobList(let l):
            set("requestID", l.requestID); set("state", l.state.rawValue); set("offset", l.offset); set("limit", l.limit)
            set("after", l.after?.text)
        case .jobListReply(let l):
            set("requestID", l.requestID); set("list.state", l.list.state); set("list.total", l.list.total); set("list.jobs.count", l.list.jobs.count)
            set("list.jobs.0.worker", l.list.jobs.first?.worker); set("list.jobs.0.cancelling", l.list.jobs.first?.cancelling)
            if l.list.jobs.count > 1 { set("list.jobs.1.priority", l.list.jobs[1].priority); set("list.jobs.1.cursor", l.list.jobs[1].cursor) }
        case .resume(let r): set("requestID", r.requestID)
        case .jobInfo(let j): set("requestID", j.requestID); set("jobID", j.jobID)
        case .jobInfoReply(let j):
            set("requestID", j.requestID); set("story.state", j.story.state)
            set("story.attempts.count", j.story.attempts.count); set("story.events.count", j.story.events.count)
            set("story.attempts.0.outcome", j.story.attempts.first?.outcome)
            set("story.attempts.1.worker", j.story.attempts.dropFirst().first?.worker)
            set("story.recordID", j.story.recordID)
        case .deadRetry(let d): set("requestID", d.requestID); set("target", d.target)
        case .deadDiscard(let d): set("requestID", d.requestID); set("target", d.target)
        case .ping(let p): set("requestID", p.requestID)
        case .pong(let p): set("requestID", p.requestID)
        case .ok(let o): set("requestID", o.requestID); set("count", o.count)
        case .error(let e): set("requestID", e.requestID); set("code", e.code.rawValue); set("reason", e.reason)
        }
    case .backend(let m):
        switch m {
        case .ready(let r): set("workerID", r.workerID); set("host", r.host); set("pid", r.pid); set("slots", r.slots)
        case .credit(let c): set("count", c.count)
        case .job(let j):
            set("jobID", j.jobID); set("attempt", j.attempt); options(j.options)
            set("pipeline", j.pipeline); set("sourceName", j.sourceName); set("image.count", j.image.count)
            set("timeLimit", j.timeLimit)
        case .done(let d): set("jobID", d.jobID); set("attempt", d.attempt); set("recordID", d.recordID)
        case .fail(let x):
            set("jobID", x.jobID); set("attempt", x.attempt); set("retryable", x.retryable); failure(x.failure)
        case .holding(let h):
            set("count", h.jobs.count)
            for (i, entry) in h.jobs.enumerated() { set("jobs.\(i).jobID", entry.jobID); set("jobs.\(i).attempt", entry.attempt) }
        case .cancelJob(let c): set("jobID", c.jobID); set("attempt", c.attempt)
        case .heartbeat, .disconnect: break
        case .ping(let p): set("requestID", p.requestID)
        case .pong(let p): set("requestID", p.requestID)
        case .error(let e): set("requestID", e.requestID); set("code", e.code.rawValue); set("reason", e.reason)
        }
    case .store(let m):
        switch m {
        case .store(let s):
            set("requestID", s.requestID); set("jobID", s.jobID); set("sourceName", s.sourceName)
            set("pipeline", s.pipeline)
            set("fullSize", "\(s.fullSize.width)x\(s.fullSize.height)")
            set("thumbnailSize", "\(s.thumbnailSize.width)x\(s.thumbnailSize.height)")
            set("full.count", s.full.count); set("thumbnail.count", s.thumbnail.count)
        case .stored(let s):
            set("requestID", s.requestID); set("jobID", s.jobID); set("recordID", s.recordID); set("created", s.created)
        case .list(let l): set("requestID", l.requestID); set("limit", l.limit); set("before", l.before)
        case .listReply(let l):
            set("requestID", l.requestID); set("records.count", l.records.count)
            if let first = l.records.first { record("records.0", first) }
        case .get(let g): set("requestID", g.requestID); set("id", g.id); set("variant", g.variant)
        case .getReply(let g):
            set("requestID", g.requestID); set("variant", g.variant); record("record", g.record)
            set("image.count", g.image.count)
        case .delete(let d): set("requestID", d.requestID); set("id", d.id)
        case .stats(let s): set("requestID", s.requestID)
        case .statsReply(let s):
            set("requestID", s.requestID); set("stats.records", s.stats.records); set("stats.fullBytes", s.stats.fullBytes)
        case .ping(let p): set("requestID", p.requestID)
        case .pong(let p): set("requestID", p.requestID)
        case .ok(let o): set("requestID", o.requestID); set("count", o.count)
        case .error(let e): set("requestID", e.requestID); set("code", e.code.rawValue); set("reason", e.reason)
        }
    case .events(.event(let e)):
        event(e)
    case .events(.batch(let b)):
        set("count", b.events.count)
        for (i, e) in b.events.enumerated() { event(e, "events.\(i).") }
    }
    return f
}
