import Foundation
import Testing

/// The command lines in deploy/ (Kubernetes args and probes, Compose commands
/// and health checks, systemd ExecStart lines) must use only subcommands and
/// options the real executable lists in its help, so renaming a flag cannot
/// silently break a deployment. Every deployment but the keyless Compose
/// trial runs with CURVE keys, each probe presents its own role's key, and
/// the Kubernetes manifests render and validate (when kubectl is here).
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

    static let commandFiles = ["kubernetes/broker.yaml", "kubernetes/store.yaml", "kubernetes/worker.yaml",
                               "compose/compose.yaml", "compose/compose.insecure.yaml",
                               "systemd/darkroom-broker.service", "systemd/darkroom-store.service", "systemd/darkroom-worker@.service"]
    /// The files whose every command runs with CURVE keys.
    static let keyedFiles = commandFiles.filter { $0 != "compose/compose.insecure.yaml" }

    static func text(_ file: String) throws -> String {
        try String(contentsOf: deployDirectory.appendingPathComponent(file), encoding: .utf8)
    }

    static func allCommands() throws -> [CommandLine] {
        var commands: [CommandLine] = []
        for file in commandFiles {
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
        for file in ["kubernetes/broker.yaml", "kubernetes/store.yaml", "kubernetes/worker.yaml", "compose/compose.yaml",
                     "compose/compose.insecure.yaml"] {
            let subcommands = Set(commands.filter { $0.file == file }.map(\.subcommand))
            #expect(subcommands.contains("status"), "\(file) has no status --check probe")
        }
        for (file, role) in [("kubernetes/broker.yaml", "broker"), ("kubernetes/store.yaml", "store"), ("kubernetes/worker.yaml", "worker"),
                             ("systemd/darkroom-broker.service", "broker"), ("systemd/darkroom-store.service", "store"),
                             ("systemd/darkroom-worker@.service", "worker")] {
            #expect(commands.contains { $0.file == file && $0.subcommand == role }, "\(file) does not run darkroom \(role)")
        }
        for file in ["compose/compose.yaml", "compose/compose.insecure.yaml"] {
            let composeRoles = Set(commands.filter { $0.file == file }.map(\.subcommand))
            #expect(composeRoles.isSuperset(of: ["broker", "store", "worker", "status"]), "\(file)")
        }
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

    /// The value after `option` in a command line.
    static func value(_ option: String, in command: CommandLine) -> String? {
        command.words.firstIndex(of: option).flatMap { $0 + 1 < command.words.count ? command.words[$0 + 1] : nil }
    }

    @Test("--insecure appears only in the keyless Compose trial, or in comments")
    func insecureOnlyInTheTrial() throws {
        let files = try FileManager.default.subpathsOfDirectory(atPath: Self.deployDirectory.path)
            .filter { !$0.hasSuffix(".md") && !$0.hasSuffix(".py") && !$0.hasPrefix("compose/keys") }
        for file in files {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: Self.deployDirectory.appendingPathComponent(file).path, isDirectory: &isDirectory),
                  !isDirectory.boolValue, let text = try? Self.text(file) else { continue }
            if file.hasPrefix("kubernetes/") {
                #expect(!text.contains("--insecure"), "\(file) mentions --insecure")
                continue
            }
            guard file != "compose/compose.insecure.yaml" else { continue }
            for line in text.split(separator: "\n") where line.contains("--insecure") {
                #expect(line.trimmingCharacters(in: .whitespaces).hasPrefix("#"), "\(file) passes --insecure: \(line)")
            }
        }
        let trial = try Self.allCommands().filter { $0.file == "compose/compose.insecure.yaml" }
        #expect(trial.filter { ["broker", "store"].contains($0.subcommand) }.allSatisfy { $0.words.contains("--insecure") })
    }

    @Test("servers run with a key and an allowlist, workers and probes with their own role's key")
    func everyCommandHasItsKeys() throws {
        for command in try Self.allCommands() where Self.keyedFiles.contains(command.file) {
            switch command.subcommand {
            case "broker", "store":
                #expect(command.words.contains("--curve-key") && command.words.contains("--allow"), "no key or allowlist: \(command)")
                #expect(Self.value("--curve-key", in: command)?.hasSuffix("server.key_secret") == true, "not the server's own key: \(command)")
            case "worker":
                for option in ["--curve-key", "--server-key", "--store-key"] {
                    #expect(command.words.contains(option), "no \(option): \(command)")
                }
            case "status":
                let only = Self.value("--only", in: command)
                let role = command.file.contains("broker") ? "broker" : command.file.contains("store") ? "store" : "worker"
                if command.file.hasPrefix("kubernetes/") { #expect(only == role, "a \(role) probe that checks \(only ?? "everything"): \(command)") }
                #expect(only != nil, "a probe without --only: \(command)")
                switch only {
                case "broker":
                    #expect(Self.value("--curve-key", in: command) == "/keys/server/server.key_secret" && Self.value("--server-key", in: command) == "/keys/server/server.key", "\(command)")
                case "store":
                    #expect(Self.value("--curve-key", in: command) == "/keys/server/server.key_secret" && Self.value("--store-key", in: command) == "/keys/server/server.key", "\(command)")
                default:
                    #expect(Self.value("--curve-key", in: command) == "/keys/worker/worker.key_secret", "\(command)")
                    #expect(Self.value("--broker", in: command)?.hasSuffix(":7701") == true, "the worker probe checks the backend: \(command)")
                    #expect(command.words.contains("--server-key") && command.words.contains("--store-key"), "\(command)")
                }
                #expect(Self.value("--timeout", in: command) == "2", "\(command)")
            default:
                Issue.record("unexpected command \(command)")
            }
        }
    }

    @Test("every key path a Kubernetes or Compose command names is mounted, read-only")
    func keyPathsAreMounted() throws {
        for file in ["kubernetes/broker.yaml", "kubernetes/store.yaml", "kubernetes/worker.yaml", "compose/compose.yaml"] {
            let text = try Self.text(file)
            let mounts = text.split(separator: "\n").compactMap { line -> String? in
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                for key in ["mountPath: ", "target: "] where trimmed.hasPrefix(key) { return String(trimmed.dropFirst(key.count)) }
                return nil
            }
            let paths = try Self.allCommands().filter { $0.file == file }.flatMap(\.words).filter { $0.hasPrefix("/keys/") }
            #expect(!paths.isEmpty, "\(file) names no key")
            for path in paths {
                #expect(mounts.contains { path == $0 || path.hasPrefix($0 + "/") }, "\(file): \(path) is under no mount")
            }
            let subPaths = text.split(separator: "\n").filter { $0.contains("subPath:") && !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") }
            #expect(subPaths.isEmpty, "\(file): a subPath mount never sees Secret updates")
        }
        for file in ["kubernetes/broker.yaml", "kubernetes/store.yaml", "kubernetes/worker.yaml"] {
            let text = try Self.text(file)
            #expect(text.contains("defaultMode: 0400"), "\(file): secret keys need defaultMode 0400")
            #expect(text.contains("fsGroup: 10001"), "\(file): the key files are read through the fsGroup")
            let timeouts = text.split(separator: "\n").compactMap { line in
                line.contains("timeoutSeconds:") ? Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) : nil
            }
            #expect(!timeouts.isEmpty && timeouts.allSatisfy { $0 > 2 + 1 }, "\(file): probe timeouts must exceed --timeout 2")
        }
    }

    // MARK: rendering and validating the Kubernetes files

    /// Runs a tool from PATH; nil when it cannot be started.
    static func tool(_ arguments: [String], in directory: URL? = nil) -> DarkroomProcess.Output? {
        guard let scratch = try? TemporaryDirectory() else { return nil }
        let outURL = scratch.url.appendingPathComponent("stdout")
        let errURL = scratch.url.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        guard let out = try? FileHandle(forWritingTo: outURL), let err = try? FileHandle(forWritingTo: errURL) else { return nil }
        defer {
            try? out.close()
            try? err.close()
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        var environment = ProcessInfo.processInfo.environment
        environment["DARKROOM"] = DarkroomProcess.executable.path
        process.environment = environment
        guard (try? process.run()) != nil else { return nil }
        process.waitUntilExit()
        return DarkroomProcess.Output(status: process.terminationStatus,
                                      stdout: String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self),
                                      stderr: String(decoding: (try? Data(contentsOf: errURL)) ?? Data(), as: UTF8.self))
    }

    static let hasKubectl = tool(["kubectl", "version", "--client"])?.status == 0

    /// kubernetes-validate, installed with pip when missing; false when it
    /// cannot be had (no network, no pip).
    static let hasValidator: Bool = {
        if tool(["kubernetes-validate", "--version"])?.status == 0 { return true }
        _ = tool(["python3", "-m", "pip", "install", "-q", "kubernetes-validate"])
        return tool(["kubernetes-validate", "--version"])?.status == 0
    }()

    static func validate(_ yaml: String, what: String) throws {
        guard hasValidator else { return }
        let scratch = try TemporaryDirectory()
        let file = scratch.url.appendingPathComponent("manifests.yaml")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        let result = try #require(tool(["kubernetes-validate", "--strict", "--quiet", file.path]))
        let problems = (result.stdout + result.stderr).split(separator: "\n")
            .filter { !$0.contains("Couldn't find schema for kind ScaledObject") && !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        #expect(result.status == 0 && problems.isEmpty, "kubernetes-validate --strict on \(what): \(problems.joined(separator: "\n"))")
    }

    @Test("the Kubernetes manifests render with kustomize and pass kubernetes-validate --strict",
          .enabled(if: DeployFilesTests.hasKubectl, "needs kubectl (kustomize)"))
    func kubernetesRendersAndValidates() throws {
        let kubernetes = Self.deployDirectory.appendingPathComponent("kubernetes")
        let plain = try #require(Self.tool(["kubectl", "kustomize", kubernetes.path]))
        #expect(plain.status == 0, "kubectl kustomize: \(plain.stderr)")
        #expect(!plain.stdout.contains("--insecure"))
        for kind in ["kind: NetworkPolicy", "clusterIP: None", "kind: HorizontalPodAutoscaler", "name: metrics"] {
            #expect(plain.stdout.contains(kind), "the rendered manifests have no \(kind)")
        }
        try Self.validate(plain.stdout, what: "deploy/kubernetes")

        // The optional components, on top of the default set.
        let scratch = try TemporaryDirectory()
        let root = scratch.url.standardizedFileURL.pathComponents.count - 1
        let relative = String(repeating: "../", count: root) + kubernetes.standardizedFileURL.path.dropFirst()
        try """
        apiVersion: kustomize.config.k8s.io/v1beta1
        kind: Kustomization
        resources: [\(relative)]
        components: [\(relative)/autoscale-backlog, \(relative)/external-workers]
        """.write(to: scratch.url.appendingPathComponent("kustomization.yaml"), atomically: true, encoding: .utf8)
        let withComponents = try #require(Self.tool(["kubectl", "kustomize", scratch.url.path]))
        #expect(withComponents.status == 0, "kubectl kustomize with components: \(withComponents.stderr)")
        #expect(withComponents.stdout.contains("kind: ScaledObject") && !withComponents.stdout.contains("kind: HorizontalPodAutoscaler"),
                "autoscale-backlog must replace the CPU autoscaler")
        #expect(withComponents.stdout.contains("type: LoadBalancer"))
        try Self.validate(withComponents.stdout, what: "deploy/kubernetes with its components")

        // The Secrets, from keys made by make-keys.sh.
        let keys = scratch.url.appendingPathComponent("keys").path
        let made = try #require(Self.tool([Self.deployDirectory.appendingPathComponent("make-keys.sh").path, keys]))
        #expect(made.status == 0, "make-keys.sh: \(made.stderr)")
        let secrets = try #require(Self.tool([kubernetes.appendingPathComponent("create-secrets.sh").path, "--print", keys]))
        #expect(secrets.status == 0, "create-secrets.sh: \(secrets.stderr)")
        for name in ["darkroom-broker-key", "darkroom-store-key", "darkroom-worker-key", "darkroom-allow"] {
            #expect(secrets.stdout.contains("name: \(name)"), "create-secrets.sh makes no \(name)")
            #expect(plain.stdout.contains(name), "the manifests do not mount \(name)")
        }
        try Self.validate(secrets.stdout, what: "the Secrets from create-secrets.sh")
    }
}
