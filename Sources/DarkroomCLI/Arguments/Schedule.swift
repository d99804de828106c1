import DarkroomClient
import DarkroomProtocol

/// When submitted jobs may run: `submit --at TIME` or `--in DURATION`.
/// The broker holds such a job as `delayed` until then (DRK1 SUBMIT frame 9).
enum Schedule: Sendable, Equatable {
    /// At a time (Unix ms).
    case at(UInt64)
    /// This many milliseconds after each job is submitted.
    case after(UInt64)

    /// The time (Unix ms) for a job submitted at `now`: its not-before
    /// time, or its deadline when the schedule is `--expires-at/-in`'s.
    func time(now: UInt64) -> UInt64 {
        switch self {
        case .at(let time): time
        case .after(let delay): now + delay
        }
    }

    /// One line for people: when the jobs may run.
    func summary(now: UInt64) -> String {
        switch self {
        case .at(let time) where time <= now:
            "scheduled for \(JobCommand.time(time)), which has passed: the jobs run at once"
        case .at(let time):
            "scheduled: no job runs before \(JobCommand.time(time)) (in \(SubmitCommand.spoken(.milliseconds(Int64(clamping: time - now)))))"
        case .after(let delay):
            "scheduled: each job runs no earlier than \(SubmitCommand.spoken(.milliseconds(Int64(clamping: delay)))) after its submit"
        }
    }

    static let atHelp = "Run the jobs no earlier than TIME: 2026-12-24T18:00:00Z, 2026-12-24T19:00+01:00 or @UNIX_SECONDS."
    static let inHelp = "Run each job no earlier than DURATION after it is submitted: 90s, 15m, 2h, 1d or 1h30m."

    static let expiresAtHelp = "Do not run a job no worker has started by TIME (it ends cancelled, job.expired): a time as for --at."
    static let expiresInHelp = "Do not run a job no worker has started DURATION after it is submitted (it ends cancelled, job.expired): 30s, 10m, 1h."

    /// `--at` or `--in` (or the pair named `options`, such as `--expires-at`
    /// and `--expires-in`), at most one of them; nil when neither is given.
    static func parse(at atText: String?, in inText: String?,
                      options: (at: String, in: String) = ("--at", "--in")) throws(UsageError) -> Schedule? {
        switch (atText, inText) {
        case (nil, nil):
            return nil
        case (.some, .some):
            throw UsageError("\(options.at) and \(options.in) say the same thing two ways: give one of them")
        case (let text?, nil):
            guard let time = unixMilliseconds(text) else {
                throw UsageError("\(options.at) must be a time with its zone, such as 2026-12-24T18:00:00Z or 2026-12-24T19:00+01:00, or @UNIX_SECONDS, not \"\(text)\"")
            }
            return .at(time)
        case (nil, let text?):
            guard let delay = milliseconds(text) else {
                throw UsageError("\(options.in) must be a duration such as 90s, 15m, 2h, 1d or 1h30m (at most 3650d), not \"\(text)\"")
            }
            return .after(delay)
        }
    }

    /// The longest `--in`: 3650 days.
    static let longest: UInt64 = 3_650 * 86_400_000

    /// A duration of whole units `d`, `h`, `m`, `s` and `ms`, largest
    /// first, each at most once (`1h30m`, `90s`, `250ms`), up to ten years.
    static func milliseconds(_ text: String) -> UInt64? {
        // Largest first; a unit may follow only a larger one.
        let units: [(name: String, ms: UInt64)] = [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)]
        var rest = Substring(text.lowercased())
        var total: UInt64 = 0
        var lastRank = -1
        guard !rest.isEmpty else { return nil }
        while !rest.isEmpty {
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty, digits.count <= 12, let value = UInt64(digits) else { return nil }
            rest = rest.dropFirst(digits.count)
            // The longest name that matches: `ms` before `m`.
            guard let rank = units.indices.filter({ rest.hasPrefix(units[$0].name) }).max(by: { units[$0].name.count < units[$1].name.count }),
                  rank > lastRank else { return nil }
            let unit = units[rank]
            lastRank = rank
            rest = rest.dropFirst(unit.name.count)
            // Twelve digits of days overflow 64 bits: checked, not trapped.
            let (part, overflow) = value.multipliedReportingOverflow(by: unit.ms)
            guard !overflow, part <= Self.longest - total else { return nil }
            total += part
        }
        return total
    }

    /// RFC 3339 (`T` or a space between date and time, seconds and their
    /// fraction optional, `Z` or an offset), or `@` and Unix seconds.
    static func unixMilliseconds(_ text: String) -> UInt64? {
        if text.hasPrefix("@") {
            guard let seconds = UInt64(text.dropFirst()), seconds <= 253_402_300_799 else { return nil }
            return seconds * 1_000
        }
        var scanner = Scanner(Array(text.utf8))
        guard let year = scanner.number(digits: 4), scanner.skip("-"), let month = scanner.number(digits: 2), scanner.skip("-"),
              let day = scanner.number(digits: 2), scanner.skip("T") || scanner.skip("t") || scanner.skip(" "),
              let hour = scanner.number(digits: 2), scanner.skip(":"), let minute = scanner.number(digits: 2) else { return nil }
        var second = 0
        var millisecond = 0
        if scanner.skip(":") {
            guard let s = scanner.number(digits: 2) else { return nil }
            second = s
            if scanner.skip(".") {
                let fraction = scanner.digits()
                guard !fraction.isEmpty else { return nil }
                millisecond = Int(String(decoding: (fraction + [48, 48, 48]).prefix(3), as: UTF8.self)) ?? 0
            }
        }
        var offsetMinutes = 0
        if scanner.skip("Z") || scanner.skip("z") {
        } else if let sign = scanner.sign() {
            guard let h = scanner.number(digits: 2) else { return nil }
            _ = scanner.skip(":")
            guard let m = scanner.number(digits: 2), h <= 23, m <= 59 else { return nil }
            offsetMinutes = sign * (h * 60 + m)
        } else {
            return nil
        }
        guard scanner.atEnd, (1970...9999).contains(year), (1...12).contains(month), (1...daysIn(month, of: year)).contains(day),
              hour <= 23, minute <= 59, second <= 60 else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3_600 + minute * 60 + min(second, 59) - offsetMinutes * 60
        guard seconds >= 0 else { return nil }
        return UInt64(seconds) * 1_000 + UInt64(millisecond)
    }

    private static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    private static func daysIn(_ month: Int, of year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar.
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        // Years counted from March, so that February's leap day comes last.
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Reads an RFC 3339 text byte by byte.
    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }

        mutating func skip(_ character: Character) -> Bool {
            guard index < bytes.count, let ascii = character.asciiValue, bytes[index] == ascii else { return false }
            index += 1
            return true
        }

        mutating func number(digits count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            index += count
            return value
        }

        mutating func digits() -> [UInt8] {
            let start = index
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
            return Array(bytes[start..<index])
        }

        /// +1 or -1 for a `+` or `-`, nil otherwise.
        mutating func sign() -> Int? {
            if skip("+") { return 1 }
            if skip("-") { return -1 }
            return nil
        }
    }
}

/// What `submit` asks of every job besides its image, pipeline, options
/// and priority: when it may run, by when it must have started, and how
/// many attempts it gets. Times counted from a submit are counted from
/// each job's own.
struct JobTerms: Sendable, Equatable {
    /// `--at` / `--in`: no worker gets the job before then.
    var schedule: Schedule?
    /// `--expires-at` / `--expires-in`: the job's deadline.
    var expiry: Schedule?
    /// `--retries` + 1; nil for the broker's setting.
    var maxAttempts: UInt16?
    /// `--time-limit`, in seconds: the longest an attempt may run on a
    /// worker; nil for the worker's own limit alone.
    var timeLimit: UInt32?

    /// A SUBMIT request with these terms, for a job submitted now.
    func request(sourceName: String, image: ImageSource, pipeline: String, options: DarkroomProtocol.JobOptions, priority: UInt8,
                 submitKey: String) -> SubmitRequest {
        let now = schedule == nil && expiry == nil ? 0 : ULIDGenerator.systemMilliseconds()
        return SubmitRequest(sourceName: sourceName, image: image, pipeline: pipeline, options: options, priority: priority,
                             submitKey: submitKey, notBefore: schedule?.time(now: now), maxAttempts: maxAttempts,
                             expires: expiry?.time(now: now), timeLimit: timeLimit)
    }

    /// Lines for people, said once before submitting: when the jobs may
    /// run, and by when they must have started.
    func summaries(now: UInt64) -> [String] {
        var lines: [String] = []
        if let schedule { lines.append(schedule.summary(now: now)) }
        switch expiry {
        case .at(let time)?:
            lines.append("a job no worker has started by \(JobCommand.time(time)) expires: cancelled, job.expired")
        case .after(let delay)?:
            lines.append("a job no worker has started within \(SubmitCommand.spoken(.milliseconds(Int64(clamping: delay)))) of its submit expires: cancelled, job.expired")
        case nil:
            break
        }
        if let timeLimit {
            lines.append("an attempt that runs longer than \(SubmitCommand.spoken(.seconds(Int64(timeLimit)))) on a worker is stopped: dead, job.timeout")
        }
        return lines
    }

    /// `--time-limit`: a duration of whole seconds, 1 s to 7 days.
    static func timeLimit(_ text: String?) throws(UsageError) -> UInt32? {
        guard let text else { return nil }
        guard let ms = Schedule.milliseconds(text), ms % 1_000 == 0,
              Wire.Limit.timeLimitSeconds.contains(UInt32(clamping: ms / 1_000)) else {
            throw UsageError("--time-limit must be whole seconds from 1s to 7d, such as 90s, 10m or 1h30m, not \"\(text)\"")
        }
        return UInt32(ms / 1_000)
    }

    /// A deadline that comes before (or with) the scheduled time leaves the
    /// job no moment to run: refused before anything is sent.
    func check() throws(UsageError) {
        guard let schedule, let expiry else { return }
        let never: Bool = switch (schedule, expiry) {
        case let (.at(start), .at(end)): end <= start
        case let (.after(start), .after(end)): end <= start
        default: false
        }
        if never { throw UsageError("the deadline (--expires-at/--expires-in) comes before the jobs may start (--at/--in): they would never run") }
    }
}
