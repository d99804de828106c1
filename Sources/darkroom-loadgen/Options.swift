import DarkroomProtocol

/// The command line of `darkroom-loadgen`: the same flags as
/// `bench/loadgen.py`, so bench/system.sh can run either.
struct Options {
    var frontend = ""
    var events = ""
    var image = ""
    var jobs = 10_000
    var window = 1_000
    var ops = "grayscale"
    var thumbWidth: UInt16 = 32
    var thumbHeight: UInt16 = 32
    var timeoutSeconds = 120.0
    /// Give every SUBMIT a submit key of its own, as `darkroom submit` does.
    var submitKeys = false

    static let usage = """
        usage: darkroom-loadgen --frontend ENDPOINT --events ENDPOINT --image FILE
                                [--jobs N] [--window N] [--ops PIPELINE] [--thumb WxH] [--timeout SECONDS]
                                [--submit-keys]

        Submits N copies of one JPEG to a broker frontend with a window of jobs in
        flight (submitted but not yet stored), follows the events socket, and prints
        throughput and SUBMIT -> stored latency as one JSON line.

          --frontend ENDPOINT  broker frontend, e.g. tcp://127.0.0.1:7700 (required)
          --events ENDPOINT    broker events socket, e.g. tcp://127.0.0.1:7702 (required)
          --image FILE         the JPEG to submit (required)
          --jobs N             how many jobs to submit (default 10000)
          --window N           jobs submitted but not yet stored (default 1000)
          --ops PIPELINE       the pipeline of every job (default grayscale)
          --thumb WxH          thumbnail size (default 32x32)
          --timeout SECONDS    give up after this long (default 120)
          --submit-keys        give every job a submit key of its own, as darkroom submit does
          -h, --help           show this help

        Exit status: 0 when every job was stored, 1 when some were rejected or
        dead or the run timed out, 2 for bad arguments or no broker.
        """

    /// What the arguments ask for.
    enum Parsed {
        case run(Options)
        case help
    }

    struct UsageError: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }

    static func parse(_ arguments: [String]) throws(UsageError) -> Parsed {
        var options = Options()
        var seen: Set<String> = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "-h" || argument == "--help" { return .help }
            if argument == "--submit-keys" {
                options.submitKeys = true
                continue
            }
            guard argument.hasPrefix("--") else { throw UsageError("unexpected argument '\(argument)'") }
            var name = String(argument.dropFirst(2))
            let value: String
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            } else {
                guard Self.flags.contains(name) else { throw UsageError("unknown flag --\(name)") }
                guard index < arguments.count else { throw UsageError("--\(name) needs a value") }
                value = arguments[index]
                index += 1
            }
            guard Self.flags.contains(name) else { throw UsageError("unknown flag --\(name)") }
            seen.insert(name)
            switch name {
            case "frontend": options.frontend = value
            case "events": options.events = value
            case "image": options.image = value
            case "jobs": options.jobs = try positive(value, "--jobs")
            case "window": options.window = try positive(value, "--window")
            case "ops": options.ops = value
            case "thumb": (options.thumbWidth, options.thumbHeight) = try thumbnail(value)
            case "timeout":
                guard let seconds = Double(value), seconds > 0, seconds <= 1_000_000 else {
                    throw UsageError("--timeout must be a number of seconds above 0 and at most 1000000, not '\(value)'")
                }
                options.timeoutSeconds = seconds
            default: break
            }
        }
        for required in ["frontend", "events", "image"] where !seen.contains(required) {
            throw UsageError("--\(required) is required")
        }
        for (flag, text) in [("--frontend", options.frontend), ("--events", options.events), ("--image", options.image)] where text.isEmpty {
            throw UsageError("\(flag) must not be empty")
        }
        return .run(options)
    }

    private static let flags: Set<String> = ["frontend", "events", "image", "jobs", "window", "ops", "thumb", "timeout"]

    private static func positive(_ text: String, _ flag: String) throws(UsageError) -> Int {
        guard let value = Int(text), value >= 1, value <= 100_000_000 else {
            throw UsageError("\(flag) must be a whole number from 1 to 100000000, not '\(text)'")
        }
        return value
    }

    private static func thumbnail(_ text: String) throws(UsageError) -> (UInt16, UInt16) {
        let sides = text.split(separator: "x", omittingEmptySubsequences: false)
        let limit = Wire.Limit.maxThumbnailSide
        guard sides.count == 2, let width = UInt16(sides[0]), let height = UInt16(sides[1]),
              (1...limit).contains(width), (1...limit).contains(height) else {
            throw UsageError("--thumb must be WxH with sides 1 to \(limit) (e.g. 32x32), not '\(text)'")
        }
        return (width, height)
    }
}
