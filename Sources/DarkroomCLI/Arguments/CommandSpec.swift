import DarkroomCore
import Foundation

/// Declarations of a command's arguments and options. The same declarations
/// drive parsing and `--help`, so the two cannot drift apart.
struct OptionSpec: Sendable {
    /// Long name without dashes, e.g. "ops".
    var name: String
    /// Optional one-letter short name, e.g. "o".
    var short: Character?
    /// Placeholder shown in help for the value ("PIPELINE"); nil for a flag.
    var valueName: String?
    var help: String
    /// Default value shown in help.
    var defaultValue: String?
    /// May be given more than once.
    var repeatable = false
    /// The environment variable that gives the value when the option is
    /// not on the command line (DARKROOM_BROKER), if any.
    var environment: String? = nil

    var isFlag: Bool { valueName == nil }

    static func flag(_ name: String, short: Character? = nil, help: String) -> OptionSpec {
        OptionSpec(name: name, short: short, valueName: nil, help: help, defaultValue: nil)
    }

    static func value(_ name: String, short: Character? = nil, _ valueName: String, help: String, default defaultValue: String? = nil,
                      repeatable: Bool = false, environment: String? = nil) -> OptionSpec {
        OptionSpec(name: name, short: short, valueName: valueName, help: help, defaultValue: defaultValue, repeatable: repeatable,
                   environment: environment)
    }

    /// `-o, --out DIR`
    var signature: String {
        var s = short.map { "-\($0), " } ?? ""
        s += "--\(name)"
        if let valueName { s += " \(valueName)" }
        return s
    }
}

struct ArgumentSpec: Sendable {
    var name: String
    var help: String
    /// Takes one or more values.
    var variadic = false
    var optional = false

    var usage: String {
        var s = "<\(name)>"
        if variadic { s += " ..." }
        return optional ? "[\(s)]" : s
    }
}

struct CommandSpec: Sendable {
    var name: String
    var abstract: String
    var discussion: String? = nil
    var arguments: [ArgumentSpec] = []
    var options: [OptionSpec] = []

    /// Every command also accepts -h/--help.
    static let helpOption = OptionSpec.flag("help", short: "h", help: "Show help information.")

    var allOptions: [OptionSpec] { options + [CommandSpec.helpOption] }
}

/// A command-line mistake: reported as `Error: …` plus the usage line, exit 64.
struct UsageError: Error, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
}

/// A failure while running a valid command: reported as `Error: …`, exit 1.
struct RuntimeError: Error, Sendable {
    var message: String
    /// A server could not bind one of its endpoints (`ServiceRunner.start`).
    var bindFailed = false
    init(_ message: String, bindFailed: Bool = false) {
        self.message = message
        self.bindFailed = bindFailed
    }
}

/// The result of parsing: option values by name and positional arguments.
struct ParsedArguments: Sendable {
    var values: [String: [String]] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []

    func flag(_ name: String) -> Bool { flags.contains(name) }

    func value(_ name: String) -> String? { values[name]?.last }

    func int(_ name: String, default def: Int, range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let text = value(name) else { return def }
        guard let v = Int(text), range.contains(v) else {
            let bounds = range.upperBound == Int.max ? "of at least \(range.lowerBound)" : "from \(range.lowerBound) to \(range.upperBound)"
            throw UsageError("--\(name) must be a whole number \(bounds), not \"\(text)\"")
        }
        return v
    }
}

extension CommandSpec {
    /// Parses `arguments` (without the command names). `--` ends options.
    func parse(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let arg = arguments[index]
            index += 1
            if onlyPositionals || arg == "-" || !arg.hasPrefix("-") {
                parsed.positionals.append(arg)
                continue
            }
            if arg == "--" {
                onlyPositionals = true
                continue
            }
            var name: String
            var inlineValue: String?
            let option: OptionSpec?
            if arg.hasPrefix("--") {
                name = String(arg.dropFirst(2))
                if let eq = name.firstIndex(of: "=") {
                    inlineValue = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                option = allOptions.first { $0.name == name }
            } else {
                let letters = Array(arg.dropFirst())
                guard letters.count == 1 else {
                    throw UsageError("unknown option '\(arg)'\(suggestion(for: String(letters)))")
                }
                option = allOptions.first { $0.short == letters[0] }
                name = String(letters[0])
            }
            guard let option else {
                throw UsageError("unknown option '\(arg)'\(suggestion(for: name))")
            }
            if option.isFlag {
                if inlineValue != nil { throw UsageError("--\(option.name) takes no value") }
                parsed.flags.insert(option.name)
                continue
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else if index < arguments.count {
                value = arguments[index]
                index += 1
            } else {
                throw UsageError("missing value for '--\(option.name) <\(option.valueName ?? "value")>'")
            }
            if option.valueName == "ENDPOINT", let problem = endpointProblem(value) {
                throw UsageError("--\(option.name) \(value): \(problem)")
            }
            if !option.repeatable, parsed.values[option.name] != nil {
                throw UsageError("--\(option.name) is given more than once")
            }
            parsed.values[option.name, default: []].append(value)
        }
        if parsed.flag("help") { return parsed }
        // Options not given take their environment variable, if set: a
        // host's endpoints and keys are set once, not on every command.
        for option in allOptions where parsed.values[option.name] == nil {
            guard let variable = option.environment, let value = environment[variable], !value.isEmpty else { continue }
            if option.valueName == "ENDPOINT", let problem = endpointProblem(value) {
                throw UsageError("\(variable)=\(value) (for --\(option.name)): \(problem)")
            }
            parsed.values[option.name] = [value]
        }
        if parsed.positionals.isEmpty, let first = self.arguments.first(where: { !$0.optional }) {
            throw UsageError("missing expected argument '\(first.usage)'")
        }
        let maxPositionals = self.arguments.contains(where: \.variadic) ? Int.max : self.arguments.count
        if parsed.positionals.count > maxPositionals {
            throw UsageError("unexpected argument '\(parsed.positionals[maxPositionals])'")
        }
        return parsed
    }

    /// Why `text` is not a ZeroMQ endpoint, nil when it may be one. Only
    /// the shape is checked (ZeroMQ says the rest when it connects or
    /// binds): its message for `localhost:7700` was a bare EINVAL.
    func endpointProblem(_ text: String) -> String? {
        let example = "write TRANSPORT://ADDRESS, for example tcp://HOST:PORT"
        guard let separator = text.range(of: "://") else {
            let guess = text.contains(":") ? " (tcp://\(text)?)" : ""
            return "not an endpoint: \(example)\(guess)"
        }
        let transport = text[..<separator.lowerBound]
        let address = text[separator.upperBound...]
        let transports = ["tcp", "ipc", "inproc", "pgm", "epgm", "vmci", "ws", "wss", "tipc", "udp"]
        guard transports.contains(String(transport)) else {
            return "unknown transport '\(transport)': \(example) (or ipc:// or inproc://)"
        }
        if address.isEmpty { return "no address after \(transport)://: \(example)" }
        if transport == "tcp" {
            guard let colon = address.lastIndex(of: ":"), colon != address.startIndex else {
                return "no host and port: \(example)"
            }
            let port = address[address.index(after: colon)...]
            guard port == "*" || (!port.isEmpty && port.allSatisfy(\.isASCII) && port.allSatisfy(\.isNumber) && (Int(port) ?? 70_000) <= 65_535) else {
                return "'\(port)' is not a port (0 to 65535, or * to bind any): \(example)"
            }
        }
        return nil
    }

    private func suggestion(for name: String) -> String {
        Suggestion.closest(to: name, in: allOptions.map(\.name)).map { " (did you mean '--\($0)'?)" } ?? ""
    }
}
