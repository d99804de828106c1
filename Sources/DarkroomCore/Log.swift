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
        let line = "\(Logger.timestamp()) \(label) \(level) \(message())\n"
        let bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withContiguousStorageIfAvailable { buffer in
                Foundation.write(STDERR_FILENO, buffer.baseAddress, buffer.count)
            } ?? -1
            if n <= 0 { break }
            offset += n
        }
    }

    /// UTC time with milliseconds, ISO 8601.
    public static func timestamp(_ date: Date = Date()) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        let ms = Int((date.timeIntervalSince1970 - Double(t)) * 1000)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, ms)
    }
}
