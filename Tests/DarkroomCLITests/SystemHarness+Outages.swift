import DarkroomCore
import Dispatch
import Foundation
import Testing

/// What the outage tests need on top of the fault tests: a process paused
/// and resumed, a client's stderr, a producer that keeps submitting, and a
/// check of a watch's output against the broker's full event log.
extension SystemHarness {
    /// What a client started with `separateStderr` wrote on stderr.
    func errors(_ name: String) -> String {
        (try? String(contentsOf: dir.url.appendingPathComponent("\(name).err"), encoding: .utf8)) ?? ""
    }

    /// Stops a role with SIGSTOP: its sockets stay open and its peers stay
    /// connected, but it answers nothing, as a host whose link went down.
    func pause(_ name: String) {
        guard let process = processes[name], process.isRunning else { return }
        kill(process.processIdentifier, SIGSTOP)
    }

    /// Lets a role paused with `pause` go on (SIGCONT).
    func resume(_ name: String) {
        guard let process = processes[name], process.isRunning else { return }
        kill(process.processIdentifier, SIGCONT)
    }

    /// Runs a client command to its end while `role` is paused (SIGSTOP),
    /// then lets the role go on; its exit status and what it wrote on stderr.
    func runWhilePaused(_ role: String, _ name: String, _ arguments: [String]) throws -> (status: Int32, errors: String) {
        pause(role)
        let client = try start(name, arguments, separateStderr: true)
        client.waitUntilExit()
        resume(role)
        return (client.terminationStatus, errors(name))
    }

    /// Waits until `role` ("broker" or "store") answers `status --check`.
    func waitUntilAnswering(_ role: String) throws {
        let flags = role == "store" ? storeFlags : brokerFlags
        try waitUntil("the \(role) answers") { try run(["status", "--check", "--only", role] + flags + ["--timeout", "1"]).status == 0 }
    }

    /// The broker's newest event seq.
    func headSeq() throws -> Int {
        try status()["eventSeq"] as? Int ?? 0
    }

    /// Every event the broker has assigned, from seq 1, as the lines
    /// `darkroom watch --from 1 --json` prints (a fresh replay).
    func replayLines() throws -> [String] {
        let head = try headSeq()
        guard head > 0 else { return [] }
        let watch = try run(["watch", "--from", "1", "--count", String(head), "--duration", "120", "--json"] + clientFlags)
        guard watch.status == 0 else { throw HarnessError("watch failed (\(watch.status)): \(watch.stderr)") }
        return watch.stdoutLines
    }

    /// The port of a `tcp://host:port` endpoint.
    static func port(of endpoint: String) -> Int {
        Int(endpoint.split(separator: ":").last ?? "") ?? 0
    }
}

/// A producer that submits the JPEGs of a folder again and again, one
/// `darkroom submit` process after another, on a thread of its own, until
/// stopped: jobs (and events) keep flowing before, during and after a
/// fault. A submit that fails (the broker is away) is counted, and the
/// next one tries again.
final class SubmitStream: Sendable {
    private struct State: Sendable {
        var stopping = false
        var submits = 0
        var failed = 0
    }

    private let state = Locked(State())
    private let finished = DispatchSemaphore(value: 0)

    init(_ arguments: [String], pause: Double = 0.2) {
        let thread = Thread { [state, finished] in
            defer { finished.signal() }
            while !state.withLock({ $0.stopping }) {
                let ok = (try? DarkroomProcess.run(arguments))?.status == 0
                state.withLock {
                    $0.submits += 1
                    if !ok { $0.failed += 1 }
                }
                Thread.sleep(forTimeInterval: pause)
            }
        }
        thread.name = "submit-stream"
        thread.start()
    }

    /// Stops after the submit under way; returns how many ran and failed.
    /// Stopping again returns the same.
    func stop() -> (submits: Int, failed: Int) {
        state.withLock { $0.stopping = true }
        finished.wait()
        finished.signal()
        return state.withLock { ($0.submits, $0.failed) }
    }
}

/// A `darkroom watch --json` output held against the broker's full event
/// log (`allEvents`, a replay from seq 1).
struct WatchCheck: CustomStringConvertible {
    /// The seqs printed, in the order printed.
    let seqs: [Int]
    /// Seqs between the first and the last printed that were not printed.
    let missed: [Int]
    /// Seqs printed more than once.
    let duplicates: [Int]
    /// Places where a seq was not one more than the one before.
    let outOfOrder: Int
    /// Lines that are not exactly the replay's line for their seq.
    let different: [Int]

    /// - Parameters:
    ///   - output: the watch's stdout.
    ///   - replay: the lines of `watch --from 1 --json` up to the head.
    init(_ output: String, replay: [String]) {
        let lines = output.split(separator: "\n").map(String.init)
        var seqs: [Int] = []
        var different: [Int] = []
        for line in lines {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            let seq = object?["seq"] as? Int ?? 0
            seqs.append(seq)
            if seq < 1 || seq > replay.count || replay[seq - 1] != line { different.append(seq) }
        }
        self.seqs = seqs
        let printed = Set(seqs)
        if let first = seqs.first, let last = seqs.max() {
            missed = (first...last).filter { !printed.contains($0) }
        } else {
            missed = []
        }
        var counts: [Int: Int] = [:]
        for seq in seqs { counts[seq, default: 0] += 1 }
        duplicates = counts.filter { $0.value > 1 }.keys.sorted()
        outOfOrder = zip(seqs, seqs.dropFirst()).filter { $1 != $0 + 1 }.count
        self.different = different
    }

    var first: Int? { seqs.first }
    var last: Int? { seqs.last }

    /// Every seq from the first printed to the last, once each, in order,
    /// each line exactly as the replay has it.
    var isExact: Bool { !seqs.isEmpty && missed.isEmpty && duplicates.isEmpty && outOfOrder == 0 && different.isEmpty }

    var description: String {
        "\(seqs.count) events, seqs \(first ?? 0)...\(last ?? 0): \(missed.count) missed, \(duplicates.count) printed twice, \(outOfOrder) out of order, \(different.count) different from the replay"
            + (missed.isEmpty ? "" : "; missed \(missed.prefix(20))")
            + (duplicates.isEmpty ? "" : "; twice \(duplicates.prefix(20))")
    }
}

/// The outage lines a `watch` wrote on stderr.
struct WatchNotices {
    let lost: [String]
    let back: [String]
    let other: [String]

    init(_ stderr: String) {
        let lines = stderr.split(separator: "\n").map(String.init)
        lost = lines.filter { $0.contains("still trying") }
        back = lines.filter { $0.contains("broker back after") }
        other = lines.filter { !$0.contains("still trying") && !$0.contains("broker back after") }
    }

    /// The seq named at the end of each "back" line ("replaying from seq N").
    var resumeSeqs: [Int] {
        back.compactMap { line in line.split(separator: " ").last.flatMap { Int($0) } }
    }

    /// The silences the "back" lines report, in seconds.
    var silences: [Double] {
        back.compactMap { line in
            guard let range = line.range(of: "back after ") else { return nil }
            return Double(line[range.upperBound...].split(separator: " ").first ?? "")
        }
    }
}
