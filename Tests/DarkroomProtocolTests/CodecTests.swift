import Foundation
import Testing
@testable import DarkroomProtocol

@Suite("Codec")
struct CodecTests {
    let job = ULID(milliseconds: 1_730_000_000_000, randomHigh: 1, randomLow: 2)
    let record = ULID(milliseconds: 1_730_000_000_001, randomHigh: 3, randomLow: 4)

    @Test func oneLineTextRefusesC0ControlsAndDeleteOnly() throws {
        for (text, scalar) in [("a\tb", "0009"), ("line\n", "000A"), ("\u{1}x", "0001"), ("del\u{7F}", "007F")] {
            let frames = ErrorReply(requestID: 1, code: .malformed, reason: text).frames()
            #expect(throws: ProtocolError(.malformed, "ERROR: frame 4 (reason) contains control character U+\(scalar)")) {
                _ = try ErrorReply.decode(frames)
            }
        }
        // Every other scalar passes, among them C1's NEL (U+0085), whose
        // UTF-8 bytes are 0xC2 0x85.
        let fine = "café – 東京 ☃ \u{85} 🎞"
        #expect(try ErrorReply.decode(ErrorReply(requestID: 1, code: .malformed, reason: fine).frames()).reason == fine)
    }

    @Test func aMessageOfAnotherCommandIsNamedInTheRefusal() throws {
        let frames = ErrorReply(requestID: 1, code: .malformed, reason: "x").frames()
        #expect(throws: ProtocolError(.unexpectedCommand, "ERROR is not valid here (expected PING)")) {
            _ = try Ping.decode(frames)
        }
    }

    @Test func frontendMessagesRoundTrip() throws {
        let messages: [FrontendMessage] = [
            .submit(Submit(requestID: 1, priority: 0, options: .default, pipeline: "invert", sourceName: "", image: [0xFF, 0xD8])),
            .submit(Submit(requestID: 8, priority: 9, options: .default, pipeline: "invert", sourceName: "b.jpg", image: [0xFF, 0xD8],
                           submitKey: job.description)),
            .accepted(Accepted(requestID: 1, jobID: job, eventSeq: 9)),
            .rejected(Rejected(requestID: 2, code: .queueFull, reason: "queue is full")),
            .replay(ReplayRequest(requestID: 3, fromSeq: 1, limit: 100)),
            .deadRetry(DeadRetry(requestID: 4, target: .all)),
            .deadDiscard(DeadDiscard(requestID: 5, target: .job(job))),
            .deadList(DeadListRequest(requestID: 6, limit: 10, after: job)),
            .event(Event(seq: 1, time: 2, kind: .stored, jobID: job, attempt: 1, sourceName: "a.jpg", workerID: "w1", recordID: record)),
            .error(ErrorReply(requestID: 7, code: .internal, reason: "disk full")),
        ]
        for message in messages {
            #expect(try FrontendMessage.decode(message.frames()) == message)
            let command = message.command
            #expect((command.frameCount - command.optionalFrames...command.frameCount).contains(message.frames().count))
        }
    }

    @Test func backendAndStoreMessagesRoundTrip() throws {
        let failure = FailureDetail(stepIndex: 2, step: "crop:600x600+0+0", code: "image.invalid-argument", reason: "rectangle exceeds image 500x400")
        let backend: [BackendMessage] = [
            .ready(Ready(workerID: job.description, host: "h", pid: 1, slots: 4)),
            .credit(Credit(count: 4)),
            .job(JobDispatch(jobID: job, attempt: 3, options: .default, pipeline: "sepia", sourceName: "s", image: [1])),
            .done(Done(jobID: job, attempt: 3, recordID: record)),
            .fail(Fail(jobID: job, attempt: 3, retryable: false, failure: failure)),
            .heartbeat, .disconnect,
            .holding(Holding(jobs: [])),
            .holding(Holding(jobs: [Holding.Entry(jobID: job, attempt: 3), Holding.Entry(jobID: record, attempt: .max)])),
        ]
        for message in backend { #expect(try BackendMessage.decode(message.frames()) == message) }
        let info = ImageInfo(width: 1, height: 1, bytes: 1, sha256: String(repeating: "0", count: 64))
        let recordInfo = RecordInfo(id: record, jobID: job, source: "s", pipeline: "p", created: 5, full: info, thumb: info)
        let store: [StoreMessage] = [
            .store(StoreRequest(requestID: 1, jobID: job, sourceName: "s", pipeline: "p", fullSize: ImageSize(width: 10, height: 20),
                                thumbnailSize: ImageSize(width: 5, height: 5), full: [1, 2], thumbnail: [3])),
            .stored(Stored(requestID: 1, jobID: job, recordID: record, created: true)),
            .getReply(GetReply(requestID: 2, variant: .thumbnail, record: recordInfo, image: [9])),
            .listReply(ListReply(requestID: 3, records: [recordInfo, recordInfo])),
            .ok(OKReply(requestID: 4, count: 1)),
        ]
        for message in store { #expect(try StoreMessage.decode(message.frames()) == message) }
    }

    @Test func holdingTakesExactlyAWholeListOfDistinctJobs() throws {
        // The most a worker can hold: one entry per slot.
        let full = Holding(jobs: (0..<Holding.maxEntries).map {
            Holding.Entry(jobID: ULID(milliseconds: 1_730_000_000_000, randomHigh: 0, randomLow: UInt64($0)), attempt: 1)
        })
        let frames = full.frames()
        #expect(frames.count == Command.holding.frameCount)
        #expect(frames[2].count == Holding.maxEntries * Holding.entryBytes)
        #expect(try Holding.decode(frames) == full)

        var tooMany = full
        tooMany.jobs.append(Holding.Entry(jobID: record, attempt: 1))
        #expect(throws: ProtocolError(.malformed, "HOLDING: frame 2 (held jobs) holds 4097 jobs, must be at most 4096")) {
            try BackendMessage.decode(tooMany.frames())
        }
        // The count is checked from the length alone, before any entry is read.
        let garbage: [[UInt8]] = [Wire.protocolID, [Command.holding.rawValue], [UInt8](repeating: 0xFF, count: 4097 * 30)]
        #expect(throws: ProtocolError(.malformed, "HOLDING: frame 2 (held jobs) holds 4097 jobs, must be at most 4096")) {
            try BackendMessage.decode(garbage)
        }
        // The same job at two attempts is still one job listed twice.
        let twice = Holding(jobs: [Holding.Entry(jobID: job, attempt: 1), Holding.Entry(jobID: record, attempt: 1), Holding.Entry(jobID: job, attempt: 2)])
        #expect(throws: ProtocolError(.malformed, "HOLDING: frame 2 (held jobs) job 3 of 3: job \(job) is listed twice")) {
            try BackendMessage.decode(twice.frames())
        }
        #expect(Command.backend.contains(.holding))
        #expect(!Command.holding.carriesRequestID)
    }

    @Test func singleMessageDecodeChecksTheCommand() throws {
        let frames = Ping(requestID: 5).frames()
        #expect(try Ping.decode(frames) == Ping(requestID: 5))
        #expect(throws: ProtocolError(.unexpectedCommand, "PING is not valid here (expected PONG)")) { try Pong.decode(frames) }
    }

    @Test func errorReplyKeepsTheRequestIDOfABadRequest() {
        var frames = Submit(requestID: 99, priority: 3, options: .default, pipeline: "invert", sourceName: "a", image: [1]).frames()
        frames[5] = [0xC3, 0x28]  // invalid UTF-8
        do {
            _ = try FrontendMessage.decode(frames)
            Issue.record("decoded a SUBMIT with a bad pipeline")
        } catch {
            #expect(error.reason == "SUBMIT: frame 5 (pipeline) is not valid UTF-8")
            let reply = Wire.errorReply(to: frames, for: error)
            #expect(reply.requestID == 99)
            #expect(reply.code == .malformed)
        }
        // A bad version never echoes frame 2: the layout is not DRK1's.
        let foreign: [[UInt8]] = [Array("DRK2".utf8), [0x10], [0, 0, 0, 0, 0, 0, 0, 7]]
        let error = ProtocolError(.badVersion, "expected protocol DRK1, got 'DRK2'")
        #expect(Wire.errorReply(to: foreign, for: error).requestID == 0)
        // Backend commands carry no request id.
        #expect(Wire.errorReply(to: Credit(count: 1).frames(), for: ProtocolError(.malformed, "x")).requestID == 0)
    }

    @Test func frameReaderNeverReadsPastTheEnd() {
        var reader = FrameReader([1, 2, 3])
        #expect(throws: FrameReader.OutOfBytes(needed: 4, available: 3)) { try reader.u32() }
        #expect(reader.position == 0)
        #expect((try? reader.u16()) == 0x0102)
        #expect(throws: FrameReader.OutOfBytes(needed: 8, available: 1)) { try reader.u64() }
        #expect((try? reader.i8()) == 3)
        #expect(reader.isAtEnd)
    }

    @Test func errorCodesHaveClasses() {
        #expect(ErrorCode.queueFull.isRetryable)
        #expect(ErrorCode.internal.isRetryable)
        #expect(!ErrorCode.malformed.isRetryable)
        #expect(!ErrorCode.invalidPipeline.isRetryable)
        #expect(ErrorCode(rawValue: 299).isRetryable)
        #expect(ErrorCode(rawValue: 399).name == "error-399")
        let error = ProtocolError(.queueFull, "full")
        #expect(ErrorCode.queueFull ~= error)
    }

    /// drk1.md section 9.1's table and `ErrorCode` name the same codes.
    @Test func errorCodeTableMatchesTheSpecification() throws {
        let spec = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("protocol/drk1.md")
        let text = try String(contentsOf: spec, encoding: .utf8)
        let section = try #require(text.components(separatedBy: "### 9.1 Error codes").last?.components(separatedBy: "### 9.2").first)
        var rows: [UInt16: String] = [:]
        for line in section.split(separator: "\n") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            if cells.count >= 2, let code = UInt16(cells[0]) { rows[code] = cells[1] }
        }
        #expect(rows.count >= 13, "\(rows)")
        for (code, name) in rows { #expect(ErrorCode(rawValue: code).name == name, "\(code)") }
        #expect(rows[305] == "conflict")
    }

    @Test func commandTableIsConsistent() {
        #expect(Set(Command.allCases.map(\.name)).count == Command.allCases.count)
        let sockets = Command.frontend.union(Command.backend).union(Command.storage).union(Command.eventsSocket)
        #expect(sockets == Set(Command.allCases))
        // ERROR is on both, and PING/PONG: a worker's health probe pings
        // the backend, the socket a worker reaches.
        #expect(Command.frontend.intersection(Command.backend) == [.error, .ping, .pong])
    }
}

/// Hostile input: truncated, shuffled, bit-flipped and random frames must be
/// rejected with a ProtocolError or decode to a message that re-encodes
/// stably. Nothing may trap.
@Suite("Hostile input")
struct HostileInputTests {
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let seeds: [[[UInt8]]] = VectorFile.loaded.vectors.map { hexFrames($0.frames) }
    static let sockets = ["frontend", "backend", "store", "events"]

    func check(_ frames: [[UInt8]]) {
        for socket in Self.sockets {
            if let message = try? AnyMessage.decode(frames, socket: socket) {
                let again = message.frames()
                #expect((try? AnyMessage.decode(again, socket: socket))?.frames() == again)
            }
        }
    }

    @Test func truncatedAndDroppedFrames() {
        #expect(!Self.seeds.isEmpty)
        for frames in Self.seeds {
            for cut in 0..<frames.count { check(Array(frames.prefix(cut))) }
            for drop in frames.indices {
                var shorter = frames
                shorter.remove(at: drop)
                check(shorter)
                for length in 0..<frames[drop].count {
                    var truncated = frames
                    truncated[drop] = Array(frames[drop].prefix(length))
                    check(truncated)
                }
            }
        }
    }

    @Test func flippedBytes() {
        var rng = SplitMix(state: 1)
        for frames in Self.seeds {
            for _ in 0..<50 {
                var mutated = frames
                let f = Int.random(in: 0..<mutated.count, using: &rng)
                if mutated[f].isEmpty { mutated[f] = [UInt8.random(in: 0...255, using: &rng)]; check(mutated); continue }
                let i = Int.random(in: 0..<mutated[f].count, using: &rng)
                mutated[f][i] ^= UInt8.random(in: 1...255, using: &rng)
                check(mutated)
            }
        }
    }

    @Test func randomFramesAfterAValidHeader() {
        var rng = SplitMix(state: 2)
        for command in Command.allCases {
            for _ in 0..<40 {
                var frames: [[UInt8]] = [Wire.protocolID, [command.rawValue]]
                for _ in 0..<(command.frameCount - 2) {
                    let length = [0, 1, 2, 4, 8, 26, Int.random(in: 0...64, using: &rng)].randomElement(using: &rng) ?? 0
                    frames.append((0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) })
                }
                check(frames)
                check([Wire.eventTopic] + frames)
            }
        }
    }
}

/// A batch read by a follower that passes over some kinds of event.
@Suite("Events read in part")
struct SkimmedEventTests {
    let job = ULID(milliseconds: 1_730_000_000_000, randomHigh: 1, randomLow: 2)
    let record = ULID(milliseconds: 1_730_000_000_001, randomHigh: 3, randomLow: 4)

    var batch: EventBatch {
        EventBatch(events: [
            Event(seq: 7, time: 10, kind: .accepted, jobID: job, attempt: 0, sourceName: "a.jpg"),
            Event(seq: 8, time: 11, kind: .started, jobID: job, attempt: 1, sourceName: "a.jpg", workerID: "w1"),
            Event(seq: 9, time: 12, kind: .stored, jobID: job, attempt: 1, sourceName: "a.jpg", workerID: "w1", recordID: record),
        ])
    }

    @Test func skippedKindsKeepTheirSeqKindAndJobAndNothingElse() throws {
        let full = try EventMessage.decode(batch.publishedFrames())
        #expect(full == .batch(batch))
        let skimmed = try EventMessage.decode(batch.publishedFrames(), skipping: [.accepted, .started]).events
        #expect(skimmed.map(\.seq) == [7, 8, 9])
        #expect(skimmed.map(\.kind) == [.accepted, .started, .stored])
        #expect(skimmed.allSatisfy { $0.jobID == job })
        #expect(skimmed[0] == Event(seq: 7, time: 0, kind: .accepted, jobID: job, attempt: 0, sourceName: ""))
        #expect(skimmed[1].workerID.isEmpty && skimmed[1].attempt == 0, "the rest of a skipped event is not read")
        #expect(skimmed[2] == batch.events[2], "the others are read in full")
    }

    @Test func briefKindsKeepTheirNumbersAndIdsAndNoTexts() throws {
        var events = batch.events
        events.append(Event(seq: 10, time: 13, kind: .dead, jobID: job, attempt: 2, sourceName: "a.jpg", workerID: "w1",
                            failure: FailureDetail(stepIndex: 1, step: "scale", code: "bad-input", reason: "bad")))
        let frames = EventBatch(events: events).publishedFrames()
        let read = try EventMessage.decode(frames, skipping: [.accepted], brief: [.stored]).events
        #expect(read.map(\.seq) == [7, 8, 9, 10])
        #expect(read[1] == events[1], "a kind in neither set is read in full")
        #expect(read[2] == Event(seq: 9, time: 12, kind: .stored, jobID: job, attempt: 1, sourceName: "", recordID: record))
        #expect(read[3] == events[3])
        // Skipping wins over brief for a kind in both.
        #expect(try EventMessage.decode(frames, skipping: [.stored], brief: [.stored]).events[2].time == 0)
    }

    @Test func aBriefEventsFieldsAreChecked() throws {
        // The stored record (the third) with one of its fields made malformed.
        func records(_ change: (inout [UInt8], [Range<Int>]) -> Void) throws -> [[UInt8]] {
            var frames = batch.publishedFrames()
            var bytes = try #require(frames.last)
            var fields: [Range<Int>] = []
            var position = 0
            for _ in 0..<(2 * 12 + 12) {
                let length = Int(bytes[position]) << 8 | Int(bytes[position + 1])
                fields.append(position + 2 ..< position + 2 + length)
                position += 2 + length
            }
            change(&bytes, Array(fields[24...]))
            frames[frames.count - 1] = bytes
            return frames
        }
        let badRecord = try records { bytes, fields in bytes[fields[7].lowerBound] = UInt8(ascii: "!") }
        #expect(throws: ProtocolError.self) { try EventMessage.decode(badRecord, brief: [.stored]) }
        #expect(throws: ProtocolError.self) { try EventMessage.decode(badRecord) }
        // A time and an attempt one byte short (their length prefixes say so,
        // so the record still splits).
        for (field, problem) in [(1, "time must be 8 bytes, got 7"), (4, "attempt must be 4 bytes, got 3")] {
            let short = try records { bytes, fields in
                bytes.remove(at: fields[field].lowerBound)
                bytes[fields[field].lowerBound - 1] -= 1
            }
            #expect {
                try EventMessage.decode(short, brief: [.stored])
            } throws: { error in
                (error as? ProtocolError)?.reason.hasSuffix("event 3 of 3: \(problem)") == true
            }
            #expect(throws: ProtocolError.self) { try EventMessage.decode(short) }
        }
        // An unknown kind is read in full, which refuses it.
        let badKind = try records { bytes, fields in bytes[fields[2].lowerBound] = 99 }
        #expect(throws: ProtocolError.self) { try EventMessage.decode(badKind, brief: [.stored]) }
        // Unread fields are not checked: a source name that is not UTF-8.
        let badName = try records { bytes, fields in bytes[fields[5].lowerBound] = 0xFF }
        #expect(throws: ProtocolError.self) { try EventMessage.decode(badName) }
        #expect(try EventMessage.decode(badName, brief: [.stored]).events[2].recordID == record)
    }

    @Test func aSkippedEventsSeqAndJobIdAreStillChecked() throws {
        // A gap in the seqs, at a skipped event.
        var gap = batch
        gap.events[1].seq = 20
        #expect(throws: ProtocolError.self) { try EventMessage.decode(gap.publishedFrames(), skipping: [.started]) }

        // A job id that is not a ULID, in a skipped record: the 26 bytes of
        // the first record's job id (its fourth field) overwritten.
        var frames = batch.publishedFrames()
        var records = try #require(frames.last)  // topic, protocol, command, count, records
        var position = 0
        for _ in 0..<3 { position += 2 + (Int(records[position]) << 8 | Int(records[position + 1])) }
        #expect(Int(records[position]) << 8 | Int(records[position + 1]) == 26)
        for i in 0..<26 { records[position + 2 + i] = UInt8(ascii: "!") }
        frames[frames.count - 1] = records
        #expect(throws: ProtocolError.self) { try EventMessage.decode(frames, skipping: [.accepted]) }
        #expect(throws: ProtocolError.self) { try EventMessage.decode(frames) }
    }
}
