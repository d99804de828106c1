import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// What a fuzz run found: every message counted by socket and kind, and
/// every reply that was not the one the specification names.
final class FuzzReport {
    struct Mismatch: CustomStringConvertible {
        /// The message's index in the run, when one message is to blame.
        var index: Int?
        var socket: FuzzSocket
        var note: String
        var frames: [[UInt8]]?
        var problem: String
        /// Why this mismatch is a known product bug, when it is one.
        var known: String?

        var description: String {
            var text = "[\(socket.rawValue)] "
            if let index { text += "message #\(index): " }
            text += note + " -> " + problem
            if let frames { text += "\n      frames: " + FuzzReport.show(frames) }
            if let known { text += "\n      known: " + known }
            return text
        }
    }

    let seed: UInt64
    private(set) var counts: [FuzzSocket: [FuzzKind: Int]] = [:]
    private(set) var mismatches: [Mismatch] = []
    /// Indexes handed out so far: every message of the run has its own.
    private(set) var nextIndex = 0

    init(seed: UInt64) { self.seed = seed }

    /// Counts one message and returns its index.
    func count(_ socket: FuzzSocket, _ kind: FuzzKind, messages: Int = 1) -> Int {
        counts[socket, default: [:]][kind, default: 0] += messages
        defer { nextIndex += messages }
        return nextIndex
    }

    var total: Int { counts.values.reduce(0) { $0 + $1.values.reduce(0, +) } }

    func record(_ mismatch: Mismatch) {
        mismatches.append(mismatch)
        // The first few as they happen, for a person watching a long run.
        if mismatches.count <= 10 { print("fuzz: mismatch \(mismatch)") }
    }

    func record(index: Int?, socket: FuzzSocket, note: String, frames: [[UInt8]]? = nil, problem: String, known: String? = nil) {
        record(Mismatch(index: index, socket: socket, note: note, frames: frames, problem: problem, known: known))
    }

    var unknownMismatches: [Mismatch] { mismatches.filter { $0.known == nil } }
    var knownMismatches: [Mismatch] { mismatches.filter { $0.known != nil } }

    /// The counts per socket and kind, one line each.
    var countsTable: String {
        var lines: [String] = []
        for socket in FuzzSocket.allCases {
            guard let kinds = counts[socket] else { continue }
            let sum = kinds.values.reduce(0, +)
            lines.append("  \(socket.rawValue): \(sum)")
            for kind in FuzzKind.allCases {
                if let n = kinds[kind] { lines.append("    \(String(n).leftPad(6))  \(kind.rawValue)") }
            }
        }
        return lines.joined(separator: "\n")
    }

    /// How to run this seed again.
    var replay: String { "seed \(FuzzSeed.hex(seed)) (run again with DARKROOM_FUZZ_SEED=\(FuzzSeed.hex(seed)))" }

    /// The first few of `list`, for a failure message.
    func summary(_ list: [Mismatch], first: Int = 12) -> String {
        var text = "\(list.count) mismatch(es), \(replay):\n"
        text += list.prefix(first).map { "  - \($0)" }.joined(separator: "\n")
        if list.count > first { text += "\n  … and \(list.count - first) more" }
        return text
    }

    /// Frames as a person reads them: printable ASCII in quotes, else hex,
    /// long frames cut.
    static func show(_ frames: [[UInt8]]) -> String {
        let shown = frames.prefix(12).map { frame -> String in
            let head = frame.prefix(40)
            let body: String
            if !head.isEmpty, head.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
                body = "'" + String(decoding: head, as: UTF8.self) + "'"
            } else {
                body = head.map { String($0, radix: 16).leftPad(2, with: "0") }.joined()
            }
            return frame.count > 40 ? "\(body)…(\(frame.count) bytes)" : body
        }
        return "[" + shown.joined(separator: ", ") + (frames.count > 12 ? ", …(\(frames.count) frames)" : "") + "]"
    }
}

/// The product bugs the fuzz has found and that are not yet fixed. A
/// mismatch marked with one of these is reported as known; anything else
/// fails the test. Each entry names the rule it breaks, so that it can be
/// removed the day the rule holds.
enum KnownIssues {}

extension String {
    func leftPad(_ width: Int, with pad: Character = " ") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

/// One message of a batch and what must come back for it.
struct FuzzItem {
    var index: Int
    var message: FuzzMessage
    var expectation: Expectation
}

/// Sends batches of messages on DEALER sockets and checks every reply
/// against the expectations: replies with a request id are matched by it,
/// replies without one (request id 0, DISCONNECT) by what they are. A batch
/// is complete when every expected reply has come; then its socket is kept
/// open a while longer, and anything that still arrives on it is a reply
/// nobody asked for.
final class DealerDriver {
    let context: Context
    let endpoint: String
    let socket: FuzzSocket
    let report: FuzzReport
    /// Waits at most this long for a batch's replies.
    var patience: Double = 10
    private var lingering: [(socket: Socket, range: ClosedRange<Int>, heartbeats: Bool)] = []

    init(context: Context, endpoint: String, socket: FuzzSocket, report: FuzzReport) {
        self.context = context
        self.endpoint = endpoint
        self.socket = socket
        self.report = report
    }

    func connect() throws -> Socket {
        let dealer = try context.socket(.dealer)
        try dealer.setLinger(milliseconds: 0)
        try dealer.setReceiveTimeout(milliseconds: 20)
        try dealer.setMaxMessageSize(Wire.maxMessageSize)
        try dealer.connect(endpoint)
        return dealer
    }

    /// Whether the socket's own decoder reads `frames` (a reply must be a
    /// well-formed DRK1 message).
    func decodes(_ frames: [[UInt8]]) -> ProtocolError? {
        do {
            switch socket {
            case .frontend: _ = try FrontendMessage.decode(frames, to: .peer)
            case .backend: _ = try BackendMessage.decode(frames, to: .peer)
            case .store: _ = try StoreMessage.decode(frames, to: .peer)
            case .events: _ = try EventMessage.decode(frames)
            }
            return nil
        } catch {
            return error
        }
    }

    /// Sends `items` on `dealer` (a fresh connection when nil) and checks
    /// the replies. `heartbeats`: the broker may send HEARTBEATs on this
    /// connection (a backend session that sent READY).
    func run(_ items: [FuzzItem], on dealer: Socket? = nil, heartbeats: Bool = false) throws {
        guard let first = items.first, let last = items.last else { return }
        let dealer = try dealer ?? connect()
        let range = first.index...last.index
        var waiting = items.map { (item: $0, met: $0.expectation.replies.isEmpty) }
        var strays: [FuzzReply] = []
        for item in items {
            if let disagreement = item.expectation.disagreement {
                report.record(index: item.index, socket: socket, note: item.message.note, frames: item.message.frames,
                              problem: "oracle: \(disagreement)")
            }
        }
        for item in items {
            do {
                try dealer.send(item.message.frames)
            } catch {
                report.record(index: item.index, socket: socket, note: item.message.note, frames: item.message.frames, problem: "could not be sent: \(error)")
            }
        }
        // Done when every expected reply came, or came with another request
        // id (a mismatch, recorded below, but nothing more to wait for).
        func outstanding() -> Bool {
            var used = Set<Int>()
            for entry in waiting where !entry.met {
                guard let stray = strays.indices.first(where: { index in
                    !used.contains(index) && entry.item.expectation.replies.contains { $0.matchesButForRequestID(strays[index]) }
                }) else { return true }
                used.insert(stray)
            }
            return false
        }
        let deadline = Date().addingTimeInterval(patience)
        while outstanding(), Date() < deadline {
            guard let frames = try dealer.receive() else { continue }
            let reply = FuzzReply(frames)
            if heartbeats, reply.command == .heartbeat, frames.count == 2 { continue }
            let malformed = decodes(frames)
            if reply.command == .event, malformed == nil, waiting.contains(where: { !$0.met && $0.item.expectation.replayEvents }) { continue }
            // The item this reply answers: of those it matches, the one whose
            // pattern is the most specific (a vector's exact reason before
            // another message's "any reason" of the same code).
            let slot = waiting.indices.filter { index in
                !waiting[index].met && waiting[index].item.expectation.replies.contains { $0.matches(reply) }
            }.max { a, b in
                func specificity(_ index: Int) -> Int {
                    waiting[index].item.expectation.replies.filter { $0.matches(reply) }.map(\.specificity).max() ?? 0
                }
                // Equal specificity: the earliest item.
                return specificity(a) < specificity(b) || (specificity(a) == specificity(b) && a > b)
            }
            if let slot { waiting[slot].met = true }
            if let malformed {
                // The reply the message asked for, but not well formed: a
                // client's decoder refuses it, so it counts as no reply.
                let item = slot.map { waiting[$0].item }
                report.record(index: item?.index, socket: socket, note: item?.message.note ?? "messages #\(range.lowerBound)…#\(range.upperBound)",
                              frames: item?.message.frames ?? frames, problem: "the server sent a reply that does not decode: \(malformed); the reply: \(reply)")
            } else if slot == nil {
                strays.append(reply)
            }
        }
        // What did not come, paired where possible with what came instead.
        for entry in waiting where !entry.met {
            let item = entry.item
            if let stray = strays.firstIndex(where: { reply in item.expectation.replies.contains { $0.matchesButForRequestID(reply) } }) {
                let reply = strays.remove(at: stray)
                report.record(index: item.index, socket: socket, note: item.message.note, frames: item.message.frames,
                              problem: "answered with request id \(reply.requestID ?? 0): expected \(item.expectation), got \(reply)")
            } else {
                report.record(index: item.index, socket: socket, note: item.message.note, frames: item.message.frames,
                              problem: "expected \(item.expectation), got nothing within \(Int(patience)) s")
            }
        }
        for reply in strays {
            report.record(index: nil, socket: socket, note: "messages #\(range.lowerBound)…#\(range.upperBound)", frames: reply.frames,
                          problem: "a reply nobody asked for: \(reply)")
        }
        lingering.append((dealer, range, heartbeats))
        if lingering.count > 48 { drain(lingering.count - 24) }
    }

    /// Closes the oldest `count` lingering sockets (all by default), after
    /// reading what came on them since their batch was complete.
    func drain(_ count: Int? = nil) {
        let closing = lingering.prefix(count ?? lingering.count)
        lingering.removeFirst(closing.count)
        for entry in closing {
            while let frames = try? entry.socket.receive(dontWait: true) {
                let reply = FuzzReply(frames)
                if entry.heartbeats, reply.command == .heartbeat { continue }
                report.record(index: nil, socket: socket, note: "messages #\(entry.range.lowerBound)…#\(entry.range.upperBound)", frames: frames,
                              problem: "a late reply nobody asked for: \(reply)")
            }
            entry.socket.close()
        }
    }
}
