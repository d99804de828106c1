import Foundation
import Testing

/// The command lines in deploy/ (Kubernetes args and probes, Compose commands
/// and health checks, systemd ExecStart lines) must use only subcommands and
/// options the real executable lists in its help, so renaming a flag cannot
/// silently break a deployment.
@Suite("deploy files")
struct DeployFilesTests {
    /// One `darkroom` invocation found in a deploy file.
    struct CommandLine: CustomStringConvertible {
        var file: String
        var words: [String]
        var subcommand: String { words.first ?? "" }
        var description: String { "\(file): darkroom \(words.joined(separator: " "))" }
    }

    static let deployDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy")

    static let imageBinary = "/usr/local/bin/darkroom"

    /// Drops a trailing YAML comment and surrounding quotes from a list item.
    static func yamlScalar(_ text: Substring) -> String {
        var value = text
        if let hash = value.range(of: " #") { value = value[..<hash.lowerBound] }
        value = value.drop { $0 == " " }
        while value.last == " " { value = value.dropLast() }
        if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
            value = value.dropFirst().dropLast()
        }
        return String(value)
    }

    /// Flow lists such as `command: ["/usr/local/bin/darkroom", "status", ...]`
    /// and `test: ["CMD", "/usr/local/bin/darkroom", ...]`.
    static func flowCommands(_ text: String, file: String) throws -> [CommandLine] {
        var found: [CommandLine] = []
        for line in text.split(separator: "\n") where line.contains("[\"") && line.contains(imageBinary) && !line.trimmingCharacters(in: .whitespaces).hasPrefix("#") {
            guard let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]") else { continue }
            let json = Data(line[open...close].utf8)
            let array = try #require(try JSONSerialization.jsonObject(with: json) as? [String], "not a list of strings: \(line)")
            guard let start = array.firstIndex(of: imageBinary) else { continue }
            found.append(CommandLine(file: file, words: Array(array[(start + 1)...])))
        }
        return found
    }

    /// Block lists under `args:` (Kubernetes) or `command:` (Compose).
    static func blockCommands(_ text: String, file: String) -> [CommandLine] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        var found: [CommandLine] = []
        var index = 0
        while index < lines.count {
            let line = lines[index]
            index += 1
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed == "args:" || trimmed == "command:" else { continue }
            var words: [String] = []
            while index < lines.count {
                let item = lines[index].drop { $0 == " " }
                if item.hasPrefix("#") { index += 1; continue }
                guard item.hasPrefix("- ") else { break }
                words.append(yamlScalar(item.dropFirst(2)))
                index += 1
            }
            if !words.isEmpty { found.append(CommandLine(file: file, words: words)) }
        }
        return found
    }

    /// `ExecStart=/usr/local/bin/darkroom ...` in systemd units.
    static func unitCommands(_ text: String, file: String) -> [CommandLine] {
        text.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("ExecStart=") else { return nil }
            let words = line.dropFirst("ExecStart=".count).split(separator: " ").map(String.init)
            guard words.first == imageBinary else { return nil }
            return CommandLine(file: file, words: Array(words.dropFirst()))
        }
    }

    static func allCommands() throws -> [CommandLine] {
        let files = ["kubernetes/broker.yaml", "kubernetes/store.yaml", "kubernetes/worker.yaml", "compose/compose.yaml",
                     "systemd/darkroom-broker.service", "systemd/darkroom-store.service", "systemd/darkroom-worker@.service"]
        var commands: [CommandLine] = []
        for file in files {
            let text = try String(contentsOf: deployDirectory.appendingPathComponent(file), encoding: .utf8)
            if file.hasSuffix(".service") {
                commands += unitCommands(text, file: file)
            } else {
                commands += try flowCommands(text, file: file)
                commands += blockCommands(text, file: file)
            }
        }
        return commands
    }

    /// Every `--name` the help text mentions.
    static func optionNames(inHelp help: String) -> Set<String> {
        var names: Set<String> = []
        for token in help.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "[" || $0 == "," }) where token.hasPrefix("--") {
            names.insert(String(token.prefix { $0 == "-" || $0.isLetter || $0.isNumber }))
        }
        return names
    }

    @Test("every role and probe command is found in the deploy files")
    func findsTheCommands() throws {
        let commands = try Self.allCommands()
        for file in ["kubernetes/broker.yaml", "kubernetes/store.yaml", "kubernetes/worker.yaml", "compose/compose.yaml"] {
            let subcommands = Set(commands.filter { $0.file == file }.map(\.subcommand))
            #expect(subcommands.contains("status"), "\(file) has no status --check probe")
        }
        for (file, role) in [("kubernetes/broker.yaml", "broker"), ("kubernetes/store.yaml", "store"), ("kubernetes/worker.yaml", "worker"),
                             ("systemd/darkroom-broker.service", "broker"), ("systemd/darkroom-store.service", "store"),
                             ("systemd/darkroom-worker@.service", "worker")] {
            #expect(commands.contains { $0.file == file && $0.subcommand == role }, "\(file) does not run darkroom \(role)")
        }
        let composeRoles = Set(commands.filter { $0.file == "compose/compose.yaml" }.map(\.subcommand))
        #expect(composeRoles.isSuperset(of: ["broker", "store", "worker", "status"]))
    }

    @Test("deploy command lines use only subcommands and options the binary lists")
    func commandsMatchHelp() throws {
        let commands = try Self.allCommands()
        let top = try DarkroomProcess.run(["--help"])
        #expect(top.status == 0)
        var helpBySubcommand: [String: Set<String>] = [:]
        for command in commands {
            let sub = command.subcommand
            #expect(top.stdout.contains("\n  \(sub) "), "unknown subcommand in \(command)")
            if helpBySubcommand[sub] == nil {
                let help = try DarkroomProcess.run([sub, "--help"])
                #expect(help.status == 0, "darkroom \(sub) --help failed")
                helpBySubcommand[sub] = Self.optionNames(inHelp: help.stdout)
            }
            let known = helpBySubcommand[sub] ?? []
            for word in command.words where word.hasPrefix("--") {
                let name = String(word.prefix { $0 != "=" })
                #expect(known.contains(name), "\(name) is not an option of darkroom \(sub), in \(command)")
            }
        }
    }

    @Test("probes are status --check, and stop timeouts exceed the worker's grace")
    func probesAndGrace() throws {
        let commands = try Self.allCommands()
        for probe in commands where probe.subcommand == "status" {
            #expect(probe.words.contains("--check"), "a status probe without --check: \(probe)")
        }
        let worker = try String(contentsOf: Self.deployDirectory.appendingPathComponent("kubernetes/worker.yaml"), encoding: .utf8)
        let unit = try String(contentsOf: Self.deployDirectory.appendingPathComponent("systemd/darkroom-worker@.service"), encoding: .utf8)
        let k8sWorker = try #require(commands.first { $0.file == "kubernetes/worker.yaml" && $0.subcommand == "worker" })
        let grace = try #require(k8sWorker.words.firstIndex(of: "--grace").flatMap { Int(k8sWorker.words[$0 + 1]) })
        let period = try #require(Self.number(after: "terminationGracePeriodSeconds:", in: worker))
        #expect(period > grace + 5, "terminationGracePeriodSeconds \(period) must exceed --grace \(grace)")
        let unitGrace = try #require(Self.number(after: "Environment=DARKROOM_WORKER_GRACE=", in: unit))
        let stopTimeout = try #require(Self.number(after: "TimeoutStopSec=", in: unit))
        #expect(stopTimeout > unitGrace + 5, "TimeoutStopSec \(stopTimeout) must exceed the grace \(unitGrace)")
    }

    static func number(after key: String, in text: String) -> Int? {
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix(key) { return Int(trimmed.dropFirst(key.count).trimmingCharacters(in: .whitespaces)) }
        }
        return nil
    }
}
