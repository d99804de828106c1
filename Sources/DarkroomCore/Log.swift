import Foundation

/// Logging for long-running roles: one line per event on stderr,
///
///     2026-11-29T12:34:56.789Z broker info  accepted 120 jobs (group commit 3.1 ms)
///
/// Each line is written with a single `write(2)`, so lines from several threads
/// never interleave. The level comes from `DARKROOM_LOG` (debug, info, warn,
/// error; default info).
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable, CustomStringConvertible {
        case debug, info, warn, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        public var description: String {
            switch self {
            case .debug: "debug"
            case .info: "info "
            case .warn: "warn "
            case .error: "error"
            }
        }
    }

    /// The role or component, e.g. "broker" or "worker w1".
    public let label: String
    public let minimum: Level

    public init(_ label: String, minimum: Level = Logger.levelFromEnvironment) {
        self.label = label
        self.minimum = minimum
    }

    public static var levelFromEnvironment: Level {
        switch ProcessInfo.processInfo.environment["DARKROOM_LOG"]?.lowercased() {
        case "debug": .debug
        case "warn", "warning": .warn
        case "error": .error
        default: .info
        }
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func warn(_ message: @autoclosure () -> String) { log(.warn, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }

    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard level >= minimum else { return }
        let text = message()
        write(level) { $0.append(contentsOf: text.utf8) }
    }

    /// An info line whose message `message` appends as bytes (UTF-8, one
    /// line): for a line logged many times a second, such as a worker's
    /// line per job, which would otherwise be built as several strings
    /// and copied into bytes. Nothing is built when info is not logged.
    public func info(bytes message: (inout [UInt8]) -> Void) {
        guard Level.info >= minimum else { return }
        write(.info, message)
    }

    /// Writes one line: the timestamp, the label, the level, then what
    /// `message` appends, and a newline, in a single `write(2)`.
    private func write(_ level: Level, _ message: (inout [UInt8]) -> Void) {
        var line: [UInt8] = []
        line.reserveCapacity(160)
        Logger.appendTimestamp(milliseconds: Logger.nowMilliseconds(), to: &line)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: label.utf8)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: level.description.utf8)
        line.append(UInt8(ascii: " "))
        message(&line)
        line.append(UInt8(ascii: "\n"))
        var offset = 0
        while offset < line.count {
            let n = line[offset...].withContiguousStorageIfAvailable { buffer in
                Foundation.write(STDERR_FILENO, buffer.baseAddress, buffer.count)
            } ?? -1
            if n <= 0 { break }
            offset += n
        }
    }

    private static func nowMilliseconds(_ date: Date = Date()) -> Int64 {
        // Whole milliseconds first: subtracting whole seconds from a Double
        // loses a millisecond now and then (.042 reads as .04199…).
        Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// UTC time with milliseconds, ISO 8601. Built digit by digit: a busy
    /// worker logs a line per job, and `String(format:)` costs more than the
    /// rest of the line.
    public static func timestamp(_ date: Date = Date()) -> String {
        timestamp(milliseconds: nowMilliseconds(date))
    }

    /// `timestamp` of Unix milliseconds, as events and records carry them.
    public static func timestamp(milliseconds: Int64) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(24)
        appendTimestamp(milliseconds: milliseconds, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends `timestamp(milliseconds:)`'s 24 bytes to `text`.
    static func appendTimestamp(milliseconds: Int64, to text: inout [UInt8]) {
        var t = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&t, &parts)
        let ms = Int(milliseconds % 1000)
        func digits(_ value: Int32, _ count: Int) {
            var divisor: Int32 = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = max(0, value)
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(parts.tm_year + 1900, 4); text.append(UInt8(ascii: "-"))
        digits(parts.tm_mon + 1, 2); text.append(UInt8(ascii: "-"))
        digits(parts.tm_mday, 2); text.append(UInt8(ascii: "T"))
        digits(parts.tm_hour, 2); text.append(UInt8(ascii: ":"))
        digits(parts.tm_min, 2); text.append(UInt8(ascii: ":"))
        digits(parts.tm_sec, 2); text.append(UInt8(ascii: "."))
        digits(Int32(ms), 3); text.append(UInt8(ascii: "Z"))
    }
}
