/// A bound on how many lines one kind of warning writes, for warnings that
/// a peer's messages cause: a malformed message, a refused request, a reply
/// dropped for a peer that does not read.
///
/// Why: such a line is written per message, so a peer sending 100,000 bad
/// messages a second would make a server write some 15 MB of log a second,
/// and fill a disk (a container runtime keeps every line) with lines that
/// say the same thing. Each kind may write `burst` lines per `interval`;
/// the rest are counted, and the next line of that kind written after the
/// interval says how many were left out and since when:
///
///     ... (4990 similar line(s) left out over the last 10 s)
///
/// A kind is a call site's name, not a peer's: a peer can make a new
/// identity per message, so counting by peer would bound nothing. `flush`
/// reports what a flood that has stopped left out, so the count is not
/// kept until the next bad message.
///
/// Threading: a value owned by the loop that logs (one thread).
public struct LogLimiter {
    public let burst: Int
    public let interval: Duration

    private struct Window {
        var start: ContinuousClock.Instant
        var written: Int
        var leftOut: Int
    }

    private var windows: [String: Window] = [:]

    public init(burst: Int = 10, interval: Duration = .seconds(10)) {
        self.burst = max(1, burst)
        self.interval = interval
    }

    /// Lines of each kind left out so far and not yet reported.
    public func leftOut(_ kind: String) -> Int { windows[kind]?.leftOut ?? 0 }

    /// Whether a line of `kind` may be written at `now`: nil when it is to
    /// be left out (and is counted), else the note to end it with, empty
    /// unless lines were left out in the interval before.
    public mutating func admit(_ kind: String, now: ContinuousClock.Instant = .now) -> String? {
        var window = windows[kind] ?? Window(start: now, written: 0, leftOut: 0)
        var note = ""
        if now - window.start >= interval {
            if window.leftOut > 0 { note = LogLimiter.note(window.leftOut, since: window.start, now: now) }
            window = Window(start: now, written: 0, leftOut: 0)
        }
        guard window.written < burst else {
            window.leftOut += 1
            windows[kind] = window
            return nil
        }
        window.written += 1
        windows[kind] = window
        return note
    }

    /// Writes `message` at `level` unless `kind` has used its lines for the
    /// current interval; then only counts it. A message left out is never built.
    public mutating func log(_ logger: Logger, _ level: Logger.Level, _ kind: String, now: ContinuousClock.Instant = .now,
                             _ message: @autoclosure () -> String) {
        guard level >= logger.minimum, let note = admit(kind, now: now) else { return }
        logger.log(level, message() + note)
    }

    public mutating func warn(_ logger: Logger, _ kind: String, now: ContinuousClock.Instant = .now, _ message: @autoclosure () -> String) {
        log(logger, .warn, kind, now: now, message())
    }

    /// One line per kind for what was left out in intervals that have
    /// ended with no line of that kind since; those kinds start afresh.
    public mutating func due(now: ContinuousClock.Instant = .now) -> [String] {
        var lines: [String] = []
        for (kind, window) in windows where now - window.start >= interval {
            if window.leftOut > 0 {
                lines.append("\(kind): \(window.leftOut) similar line(s) left out over the last \(LogLimiter.seconds(now - window.start))")
            }
            windows[kind] = nil
        }
        return lines.sorted()
    }

    /// Writes what `due` reports; for a loop's periodic housekeeping, so
    /// that a flood that has stopped is still reported.
    public mutating func flush(_ logger: Logger, _ level: Logger.Level = .warn, now: ContinuousClock.Instant = .now) {
        guard !windows.isEmpty else { return }
        for line in due(now: now) { logger.log(level, line) }
    }

    /// How long until `flush` has something to report, nil when nothing
    /// was left out: for a loop that otherwise waits without a timeout.
    public func untilFlush(now: ContinuousClock.Instant = .now) -> Duration? {
        windows.values.filter { $0.leftOut > 0 }.map { max(.zero, $0.start + interval - now) }.min()
    }

    private static func note(_ leftOut: Int, since: ContinuousClock.Instant, now: ContinuousClock.Instant) -> String {
        " (\(leftOut) similar line(s) left out over the last \(seconds(now - since)))"
    }

    private static func seconds(_ duration: Duration) -> String {
        "\(duration.components.seconds) s"
    }
}
