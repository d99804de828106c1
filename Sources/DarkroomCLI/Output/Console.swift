import Foundation
import Synchronization
import DarkroomProtocol

/// Where the CLI writes: stdout for results, stderr for diagnostics. Writes are
/// whole lines, unbuffered, so the output of a long batch appears as it happens
/// and interleaves sensibly with errors.
enum Console {
    static func out(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func err(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Writes without a newline to stderr (progress bars redraw in place).
    static func errRaw(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }
    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}

/// Lines for stdout gathered and written together: a command that prints a
/// line per job as thousands of jobs a second finish writes once per batch,
/// calling `flush` whenever it is about to wait (and before each stderr
/// line, so the two streams still interleave in order on a terminal).
///
/// Written by one thread; `flushAndClose` may come from another (a stop
/// signal's), so the bytes are behind a lock.
final class OutputBuffer: Sendable {
    private struct State {
        var pending: [UInt8] = []
        /// Bytes of `pending` up to the end of its last whole line.
        var whole = 0
        var closed = false
    }

    private let state = Mutex(State())

    func line(_ text: String) {
        write(text)
        endLine()
    }

    /// Writes a line in pieces, for a line printed once a job (`submit`'s
    /// per-input lines): no String is built for it, and an id goes in as
    /// its 26 characters.
    func write(_ text: String) {
        state.withLock { $0.pending.append(contentsOf: text.utf8) }
    }

    func write(_ id: ULID) {
        state.withLock { id.appendASCII(to: &$0.pending) }
    }

    func endLine() {
        let full = state.withLock { state in
            state.pending.append(0x0A)
            state.whole = state.pending.count
            return state.pending.count >= 1 << 16
        }
        if full { flush() }
    }

    func flush() {
        state.withLock { state in
            guard !state.closed, !state.pending.isEmpty else { return }
            FileHandle.standardOutput.write(Data(state.pending))
            state.pending.removeAll(keepingCapacity: true)
            state.whole = 0
        }
    }

    /// Writes the whole lines gathered (not one cut in half) and drops
    /// everything written after: for a process about to end on a signal.
    func flushAndClose() {
        state.withLock { state in
            guard !state.closed else { return }
            if state.whole > 0 { FileHandle.standardOutput.write(Data(state.pending[..<state.whole])) }
            state.closed = true
        }
    }
}

/// A JSON object with keys in insertion order, so `--json` lines read the same
/// way every time and diff cleanly.
struct JSONObject {
    private var fields: [(String, String)] = []

    init() {}

    /// What a command that acts on ids one by one (`cancel`, `rm`) prints
    /// per id: the id under `key`, its `status`, and the `reason` when
    /// there is one.
    static func outcome(_ key: String, _ id: ULID, status: String, reason: String? = nil) -> JSONObject {
        var o = JSONObject()
        o.set(key, id.description)
        o.set("status", status)
        if let reason { o.set("reason", reason) }
        return o
    }

    mutating func set(_ key: String, _ value: String?) {
        fields.append((key, value.map(JSONObject.quote) ?? "null"))
    }

    mutating func set(_ key: String, _ value: Int?) {
        fields.append((key, value.map(String.init) ?? "null"))
    }

    mutating func set(_ key: String, _ value: Double) {
        fields.append((key, value.isFinite ? String(format: "%.3f", value) : "null"))
    }

    mutating func set(_ key: String, _ value: Bool) {
        fields.append((key, value ? "true" : "false"))
    }

    mutating func set(_ key: String, object: JSONObject?) {
        fields.append((key, object?.text ?? "null"))
    }

    var text: String {
        "{" + fields.map { "\(JSONObject.quote($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20:
                out += String(format: "\\u%04x", c.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// `812 KB`, `1.4 MB`.
func formatBytes(_ n: Int) -> String {
    if n < 1024 { return "\(n) B" }
    if n < 1024 * 1024 { return "\((n + 512) / 1024) KB" }
    return String(format: "%.1f MB", Double(n) / 1_048_576)
}
