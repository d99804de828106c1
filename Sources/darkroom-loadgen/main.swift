// darkroom-loadgen: the load generator of bench/system.sh.
//
// Submits N copies of one JPEG to a broker frontend with a window of jobs in
// flight (submitted but not yet stored), follows the events socket, and
// prints throughput and SUBMIT -> stored latency as one JSON line, with the
// same flags, keys and exit statuses as bench/loadgen.py. It speaks DRK1
// with the project's own sockets and message types; per job it does one
// send, a few receives and two dictionary operations, so that the client
// takes as little as possible of the CPU the system under test needs.
import DarkroomProtocol
import DarkroomZMQ
import Dispatch
import Foundation

/// The source name every job carries.
let sourceName = "bench.jpg"
/// The middle priority, as bench/loadgen.py sends.
let priority: UInt8 = 5

/// Monotonic nanoseconds.
@inline(__always) func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func printError(_ line: String) {
    FileHandle.standardError.write(Data("darkroom-loadgen: \(line)\n".utf8))
}

/// What went wrong before the measurement could start, with the exit status.
struct SetupError: Error {
    let message: String
    let status: Int32
}

/// The results of one run.
struct Report {
    var jobs: Int
    var window: Int
    var latencies: [UInt64]        // SUBMIT sent -> stored (or dead) event, ns
    var acceptLatencies: [UInt64]  // SUBMIT sent -> ACCEPTED, ns
    var dead = 0
    var rejected = 0
    var finished = 0
    var elapsed: UInt64 = 0        // ns

    var timedOut: Bool { finished < jobs }

    /// The value at percentile `p` of sorted values, as bench/loadgen.py
    /// picks it (nearest rank, ties to even), in milliseconds.
    static func percentile(_ sorted: [UInt64], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = (p / 100 * Double(sorted.count - 1)).rounded(.toNearestOrEven)
        let index = min(sorted.count - 1, max(0, Int(rank)))
        return Double(sorted[index]) / 1e6
    }

    /// One JSON line with the keys of bench/loadgen.py.
    func json() -> String {
        let done = latencies.count
        let seconds = Double(elapsed) / 1e9
        let sortedLatencies = latencies.sorted()
        let sortedAccepts = acceptLatencies.sorted()
        let fields: [(String, String)] = [
            ("jobs", "\(jobs)"),
            ("stored", "\(done - dead)"),
            ("dead", "\(dead)"),
            ("rejected", "\(rejected)"),
            ("timedOut", timedOut ? "true" : "false"),
            ("seconds", number(seconds, 3)),
            ("jobsPerSecond", seconds > 0 ? number(Double(done) / seconds, 1) : "0"),
            ("window", "\(window)"),
            ("p50ms", number(Self.percentile(sortedLatencies, 50), 2)),
            ("p99ms", number(Self.percentile(sortedLatencies, 99), 2)),
            ("acceptP50ms", number(Self.percentile(sortedAccepts, 50), 2)),
            ("acceptP99ms", number(Self.percentile(sortedAccepts, 99), 2)),
        ]
        return "{" + fields.map { "\"\($0.0)\": \($0.1)" }.joined(separator: ", ") + "}"
    }

    /// A number rounded to `places` decimals, written as Python's json does
    /// (NaN for no value).
    private func number(_ value: Double, _ places: Int) -> String {
        guard value.isFinite else { return value.isNaN ? "NaN" : (value > 0 ? "Infinity" : "-Infinity") }
        let scale = pow(10, Double(places))
        return "\((value * scale).rounded() / scale)"
    }
}

/// Reads the JPEG to submit.
func readImage(_ path: String) throws(SetupError) -> [UInt8] {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        throw SetupError(message: "--image \(path): no such file", status: 2)
    }
    guard !isDirectory.boolValue else { throw SetupError(message: "--image \(path) is a directory, not a JPEG file", status: 2) }
    guard let data = FileManager.default.contents(atPath: path) else {
        throw SetupError(message: "--image \(path): cannot read the file", status: 2)
    }
    guard !data.isEmpty else { throw SetupError(message: "--image \(path) is empty", status: 2) }
    guard data.count <= Wire.maxImageBytes else {
        throw SetupError(message: "--image \(path) is \(data.count) bytes; DRK1 carries at most \(Wire.maxImageBytes)", status: 2)
    }
    return [UInt8](data)
}

/// The SUBMIT frames every job sends; frame 2 (the request id) is rewritten
/// in place for each job. The fields are checked with the broker's own
/// decoder first, so a bad --ops is reported here and not as N rejections.
func submitTemplate(_ options: Options, image: [UInt8]) throws(SetupError) -> [[UInt8]] {
    let jobOptions = JobOptions(thumbnailWidth: options.thumbWidth, thumbnailHeight: options.thumbHeight,
                                quality: 95, thumbnailQuality: 70)
    let frames = Submit(requestID: 1, priority: priority, options: jobOptions, pipeline: options.ops,
                        sourceName: sourceName, image: image, submitKey: options.submitKeys ? SubmitKeys.template : nil).frames()
    do {
        _ = try Submit.decode(frames)
    } catch {
        // The image was checked when read and the key is made here: what
        // can be wrong is the pipeline.
        throw SetupError(message: "--ops: \(error.reason)", status: 2)
    }
    return frames
}

/// With --submit-keys, job N's key is this run's ULID, a dash and N in nine
/// digits: unique to the job, and written into the template's last frame
/// in place.
enum SubmitKeys {
    static let run = ULIDGenerator.shared.next().description
    static let digits = 9
    static let template = run + "-" + String(repeating: "0", count: digits)

    static func write(_ n: Int, into frame: inout [UInt8]) {
        var n = n
        for i in stride(from: frame.count - 1, through: frame.count - digits, by: -1) {
            frame[i] = UInt8(ascii: "0") + UInt8(n % 10)
            n /= 10
        }
    }
}

/// An EVENTS message as received on the events SUB socket: the topic "eb",
/// then "DRK1", the command, the count and the records (protocol/drk1.md,
/// section 8). Each record is EVENT's fields 2–13: seq, time, kind, job id, ….
enum EventBatchFrame {
    static let frames = 1 + Command.events.frameCount
    static let count = 3
    static let records = 4
    static let kindField = 2
    static let jobIDField = 3
}

/// Calls `body` with the kind and job id of each record of an EVENTS
/// message, read in place: only stored and dead events end a job, so the
/// rest (accepted, started) are not decoded. A malformed message is skipped.
func scanEvents(_ message: [[UInt8]], _ body: (_ kind: UInt8, _ jobID: ArraySlice<UInt8>) -> Void) {
    guard message.count == EventBatchFrame.frames, message[0] == Wire.eventBatchTopic,
          message[EventBatchFrame.count].count == 4 else { return }
    let count = message[EventBatchFrame.count].reduce(0) { $0 << 8 | Int($1) }
    let records = message[EventBatchFrame.records]
    try? EventBatch.splitRecords(records, count: count, { ProtocolError(.malformed, $0) }) { _, fields in
        let kind = fields[EventBatchFrame.kindField]
        guard kind.count == 1 else { return }
        body(records[kind.lowerBound], records[fields[EventBatchFrame.jobIDField]])
    }
}

/// Index of the request id in a frontend message (after "DRK1" and the command).
let requestIDFrame = 2

/// Runs the load and returns what it measured.
func run(_ options: Options, submitFrames template: [[UInt8]]) throws(SetupError) -> Report {
    let context: Context
    let dealer: Socket
    let subscriber: Socket
    do {
        context = try Context()
        subscriber = try context.socket(.sub)
        try subscriber.setReceiveHighWaterMark(0)
        try subscriber.setLinger(milliseconds: 0)
        try subscriber.subscribe(Wire.eventBatchTopic)
        dealer = try context.socket(.dealer)
        try dealer.setSendHighWaterMark(0)
        try dealer.setReceiveHighWaterMark(0)
        try dealer.setLinger(milliseconds: 0)
    } catch {
        throw SetupError(message: "cannot open the sockets: \(error)", status: 2)
    }
    defer {
        dealer.close()
        subscriber.close()
        context.close()
    }
    do { try subscriber.connect(options.events) } catch {
        throw SetupError(message: "--events \(options.events): \(error)", status: 2)
    }
    do { try dealer.connect(options.frontend) } catch {
        throw SetupError(message: "--frontend \(options.frontend): \(error)", status: 2)
    }

    do {
        return try measure(options, template, dealer: dealer, subscriber: subscriber)
    } catch let error as SetupError {
        throw error
    } catch {
        throw SetupError(message: "\(error)", status: 1)
    }
}

func measure(_ options: Options, _ template: [[UInt8]], dealer: Socket, subscriber: Socket) throws -> Report {
    // Make sure both connections are up before timing (PUB drops to unjoined SUBs).
    let replies = Poller()
    replies.add(dealer)
    try dealer.send(Ping(requestID: 0).frames())
    guard try replies.poll(timeoutMilliseconds: 10_000).isReadable(0) else {
        print("{\"error\": \"broker did not answer PING\"}")
        throw SetupError(message: "the broker at \(options.frontend) did not answer PING within 10 s", status: 2)
    }
    _ = try dealer.receive()
    Thread.sleep(forTimeInterval: 0.3)

    let n = options.jobs
    let window = options.window
    var frames = template
    var sentAt = [UInt64](repeating: 0, count: n + 1)  // by request id; 0: answered
    var jobSent: [ULID: UInt64] = [:]                  // accepted, not yet stored: job id -> send time
    jobSent.reserveCapacity(2 * window)
    var earlyStored: [ULID: UInt64] = [:]              // stored event before ACCEPTED: job id -> event time
    earlyStored.reserveCapacity(window)
    var report = Report(jobs: n, window: window, latencies: [], acceptLatencies: [])
    report.latencies.reserveCapacity(n)
    report.acceptLatencies.reserveCapacity(n)

    let poller = Poller()
    let dealerItem = poller.add(dealer)
    let subscriberItem = poller.add(subscriber)
    var nextID = 1
    var inFlight = 0
    let start = now()
    let deadline = start + UInt64(options.timeoutSeconds * 1e9)

    while report.finished < n {
        while nextID <= n && inFlight < window {
            // The id frame is not shared once the previous send returned, so
            // this writes it in place.
            let id = UInt64(nextID)
            for byte in 0..<8 { frames[requestIDFrame][byte] = UInt8(truncatingIfNeeded: id >> (56 - 8 * byte)) }
            if options.submitKeys { SubmitKeys.write(nextID, into: &frames[frames.count - 1]) }
            sentAt[nextID] = now()
            try dealer.send(frames)
            nextID += 1
            inFlight += 1
        }
        if now() > deadline { break }
        let ready = try poller.poll(timeoutMilliseconds: 100)
        if ready.isReadable(dealerItem) {
            while let reply = try dealer.receive(dontWait: true) {
                let t = now()
                switch try? Wire.command(of: reply) {
                case .accepted?:
                    guard let accepted = try? Accepted.decode(reply),
                          let index = Int(exactly: accepted.requestID), index >= 1, index <= n else { continue }
                    let t0 = sentAt[index]
                    guard t0 != 0 else { continue }
                    sentAt[index] = 0
                    report.acceptLatencies.append(t &- t0)
                    if let t1 = earlyStored.removeValue(forKey: accepted.jobID) {
                        report.latencies.append(t1 > t0 ? t1 - t0 : 0)
                        report.finished += 1
                        inFlight -= 1
                    } else {
                        jobSent[accepted.jobID] = t0
                    }
                case .rejected?, .error?:
                    // Any refusal ends one job, matched or not, as in bench/loadgen.py.
                    let id = (try? Rejected.decode(reply).requestID) ?? (try? ErrorReply.decode(reply).requestID) ?? 0
                    if let index = Int(exactly: id), index >= 1, index <= n { sentAt[index] = 0 }
                    report.rejected += 1
                    report.finished += 1
                    inFlight -= 1
                default:
                    continue
                }
            }
        }
        if ready.isReadable(subscriberItem) {
            while let message = try subscriber.receive(dontWait: true) {
                let t1 = now()
                scanEvents(message) { kind, jobBytes in
                    guard kind == EventKind.stored.rawValue || kind == EventKind.dead.rawValue,
                          let jobID = ULID(bytes: Array(jobBytes)) else { return }
                    if kind == EventKind.dead.rawValue { report.dead += 1 }
                    if let t0 = jobSent.removeValue(forKey: jobID) {
                        report.latencies.append(t1 &- t0)
                        report.finished += 1
                        inFlight -= 1
                    } else {
                        earlyStored[jobID] = t1
                    }
                }
            }
        }
    }
    report.elapsed = now() - start
    return report
}

func main() -> Int32 {
    let options: Options
    do {
        switch try Options.parse(Array(CommandLine.arguments.dropFirst())) {
        case .help:
            print(Options.usage)
            return 0
        case .run(let parsed):
            options = parsed
        }
    } catch {
        printError("\(error.message) (see --help)")
        return 2
    }
    do {
        let image = try readImage(options.image)
        let template = try submitTemplate(options, image: image)
        let report = try run(options, submitFrames: template)
        print(report.json())
        return !report.timedOut && report.rejected == 0 && report.dead == 0 ? 0 : 1
    } catch {
        printError(error.message)
        return error.status
    }
}

exit(main())
