import DarkroomProtocol
import DarkroomSecurity
import DarkroomZMQ

/// `darkroom keygen`
enum KeygenCommand {
    static let spec = CommandSpec(
        name: "keygen",
        abstract: "Make a CURVE key pair for a server or a client.",
        discussion: """
        Writes DIR/NAME.key (the public key: give it to whoever must recognise
        NAME) and DIR/NAME.key_secret (the secret key, mode 0600: keep it with
        the process that uses it). Client keys name a role: producer (submit,
        watch, status, job, cancel of one job, ls, get), worker, or admin
        (everything: also pause, cancel --all-queued, dead, rm). Put client
        .key files in the directory a server reads with --allow; start the
        server with --curve-key SERVER.key_secret and give clients the
        server's .key with --server-key.
        """,
        arguments: [ArgumentSpec(name: "name", help: "Base name of the two files (letters, digits, '.', '-', '_').")],
        options: [
            .value("role", "ROLE", help: "The key's role: producer, worker or admin (store is reserved: no socket admits it yet). Omit for a server's own key."),
            .value("dir", "DIR", help: "Where to write the files (created if missing).", default: "."),
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let name = args.positionals[0]
        guard KeyFile.isValidName(name) else {
            throw UsageError("'\(name)' cannot be a key name: use letters, digits, '.', '-' and '_', not starting with '.'")
        }
        var role: Role?
        if let text = args.value("role") {
            guard let parsed = Role(name: text) else {
                throw UsageError("--role must be one of \(Role.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(text)\"")
            }
            role = parsed
        }
        let file: KeyFile
        let paths: (public: String, secret: String)
        do {
            file = try KeyFile.generate(name: name, role: role)
            paths = try file.save(directory: args.value("dir") ?? ".")
        } catch let error as SecurityError {
            throw RuntimeError(error.message)
        }
        Console.out("public key  \(paths.public)")
        Console.out("secret key  \(paths.secret)  (mode 0600, keep it private)")
        Console.out("\(file.publicKey.z85)  \(name)\(role.map { " (\($0))" } ?? "")")
        return 0
    }
}
