import DarkroomCore
import Foundation

/// The `darkroom` command line: one executable, one subcommand per role.
public enum DarkroomCLI {
    static let program = "darkroom"

    struct Subcommand: Sendable {
        var spec: CommandSpec
        var run: @Sendable (ParsedArguments) throws -> Int32
    }

    static let subcommands: [Subcommand] = [
        Subcommand(spec: DemoCommand.spec, run: DemoCommand.run),
        Subcommand(spec: UpCommand.spec, run: UpCommand.run),
        Subcommand(spec: SubmitCommand.spec, run: SubmitCommand.run),
        Subcommand(spec: WatchCommand.spec, run: WatchCommand.run),
        Subcommand(spec: StatusCommand.spec, run: StatusCommand.run),
        Subcommand(spec: ListCommand.spec, run: ListCommand.run),
        Subcommand(spec: GetCommand.spec, run: GetCommand.run),
        Subcommand(spec: RemoveCommand.spec, run: RemoveCommand.run),
        Subcommand(spec: DeadCommand.spec, run: DeadCommand.run),
        Subcommand(spec: JobCommand.spec, run: JobCommand.run),
        Subcommand(spec: JobsCommand.spec, run: JobsCommand.run),
        Subcommand(spec: CancelCommand.spec, run: CancelCommand.run),
        Subcommand(spec: PauseCommand.pauseSpec, run: PauseCommand.pause),
        Subcommand(spec: PauseCommand.resumeSpec, run: PauseCommand.resume),
        Subcommand(spec: ContactSheetCommand.spec, run: ContactSheetCommand.run),
        Subcommand(spec: ProcessCommand.spec, run: ProcessCommand.run),
        Subcommand(spec: BrokerCommand.spec, run: BrokerCommand.run),
        Subcommand(spec: WorkerCommand.spec, run: WorkerCommand.run),
        Subcommand(spec: StoreCommand.spec, run: StoreCommand.run),
        Subcommand(spec: KeygenCommand.spec, run: KeygenCommand.run),
    ]

    static var overview: String {
        var out = """
        OVERVIEW: Darkroom, a distributed image-processing job queue.

        Turns images (JPEG, PNG, WebP, GIF, HEIC, AVIF and TIFF) into processed
        full-resolution images and thumbnails, through a pipeline of operations
        such as scale, crop and glitch.

        USAGE: darkroom <subcommand> [options]

        SUBCOMMANDS:

        """
        for sub in subcommands {
            out += row(sub.spec.name, sub.spec.abstract, width: 16)
        }
        out += "\n  See 'darkroom help <subcommand>' or 'darkroom <subcommand> --help' for details."
        return out
    }

    /// Runs the command line and returns the exit status: 0 success, 1 runtime
    /// failure, 64 usage error.
    public static func run(_ arguments: [String]) -> Int32 {
        // A parent may hand down a blocked signal mask (threads of Dispatch pools
        // block every signal, and children inherit the mask of the thread that
        // spawned them). Unblock everything so SIGTERM and SIGINT work.
        var none = sigset_t()
        sigemptyset(&none)
        sigprocmask(SIG_SETMASK, &none, nil)
        var args = Array(arguments.dropFirst())
        guard let first = args.first else {
            Console.out(overview)
            return 0
        }
        if first == "-h" || first == "--help" {
            Console.out(overview)
            return 0
        }
        if first == "help" {
            guard args.count > 1 else {
                Console.out(overview)
                return 0
            }
            // A name that is no subcommand is the same mistake as
            // `darkroom nosuch`, not a request for the overview.
            guard let sub = subcommands.first(where: { $0.spec.name == args[1] }) else {
                return unknownSubcommand(args[1])
            }
            Console.out(sub.spec.help(program: program))
            return 0
        }
        if first == "--version" || first == "version" {
            Console.out("darkroom \(version)")
            return 0
        }
        guard let sub = subcommands.first(where: { $0.spec.name == first }) else {
            return unknownSubcommand(first)
        }
        args.removeFirst()
        do {
            let parsed = try sub.spec.parse(args)
            if parsed.flag("help") {
                Console.out(sub.spec.help(program: program))
                return 0
            }
            return try sub.run(parsed)
        } catch let error as UsageError {
            Console.err("Error: \(error.message)")
            Console.err("Usage: \(sub.spec.usageLine(program: program))")
            Console.err("  See 'darkroom \(sub.spec.name) --help'.")
            return 64
        } catch let error as RuntimeError {
            Console.err("Error: \(error.message)")
            return 1
        } catch {
            Console.err("Error: \(error)")
            return 1
        }
    }

    /// Reports a name that is no subcommand, with the closest one if any;
    /// returns the usage error's exit status.
    static func unknownSubcommand(_ name: String) -> Int32 {
        var message: String
        let best: String?
        if name.hasPrefix("-") {
            // Before a subcommand only --help and --version mean anything;
            // -v and -V are what other tools print their version with.
            message = "Error: unknown option '\(name)'"
            best = name == "-v" || name == "-V" ? "--version" : Suggestion.closest(to: name, in: ["--help", "--version"])
        } else {
            message = "Error: unknown subcommand '\(name)'"
            // Two edits are a lot in a short name ('foo' is two from 'job').
            best = Suggestion.closest(to: name, in: subcommands.map(\.spec.name), maxDistance: max(1, min(2, name.count / 3)))
        }
        if let best { message += " (did you mean '\(best)'?)" }
        Console.err(message)
        Console.err("Usage: darkroom <subcommand> [options]   (see 'darkroom --help')")
        return 64
    }

    public static let version = "0.1.0"
}
