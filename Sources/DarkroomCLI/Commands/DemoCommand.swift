import DarkroomCore
import DarkroomImage
import DarkroomPipeline
import DarkroomWorker
import DarkroomZMQ
import Foundation

/// `darkroom demo`: the whole system in one command. Starts a private broker,
/// storage node and workers, submits generated sample photos, follows them to
/// the end with a progress bar, writes a contact sheet of the thumbnails, and
/// prints where everything is.
enum DemoCommand {
    static let pipeline = "scale:2048x2048,mode=fill | crop:square | glitch:seed=7"

    static let spec = CommandSpec(
        name: "demo",
        abstract: "Run the whole system once: sample photos through broker, workers and storage node.",
        discussion: """
        Starts a broker, a storage node and workers inside this process (on free
        loopback ports, so it never clashes with a running 'darkroom up'), writes
        generated sample photos to DIR/input, submits them with
        '\(pipeline)', waits for every job, writes DIR/contact-sheet.jpg from
        the stored thumbnails, and exits. The records stay in DIR/data.
        """,
        options: [
            .value("dir", "DIR", help: "Where to put the samples, data and contact sheet.", default: "darkroom-demo"),
            .value("workers", short: "w", "N", help: "Worker services.", default: "2"),
            .value("concurrency", short: "c", "N", help: "Jobs each worker runs at once.", default: "1"),
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let dir = URL(fileURLWithPath: args.value("dir") ?? "darkroom-demo")
        let inputDir = dir.appendingPathComponent("input")
        let dataDir = dir.appendingPathComponent("data")
        let sheet = dir.appendingPathComponent("contact-sheet.jpg")
        let workers = try args.int("workers", default: 2, range: 1...64)
        let concurrency = try args.int("concurrency", default: 1, range: 1...64)
        try FileManager.default.createDirectory(at: inputDir, withIntermediateDirectories: true)

        Console.err("1/4 generating \(SamplePhoto.demoSet.count) sample photos in \(inputDir.path)/")
        for sample in SamplePhoto.demoSet {
            let path = inputDir.appendingPathComponent(sample.name + ".jpg")
            if FileManager.default.fileExists(atPath: path.path) { continue }
            try Data(try SamplePhoto.jpeg(sample)).write(to: path, options: .atomic)
        }

        Console.err("2/4 starting a broker, a storage node and \(workers) worker(s) (data in \(dataDir.path)/)")
        let context = try Context(ioThreads: UpCommand.ioThreads)
        let (services, endpoints) = try UpCommand.startAll(
            data: dataDir.path, workers: workers, concurrency: concurrency, context: context,
            grace: .seconds(10), endpoints: .ephemeral,
            // The demo's own lines tell the story; service logs show warnings
            // only, unless DARKROOM_LOG asks for more.
            logLevel: ProcessInfo.processInfo.environment["DARKROOM_LOG"] == nil ? .warn : Logger.levelFromEnvironment
        )
        defer {
            for entry in services.reversed() { entry.service.stop(grace: .seconds(10)) }
        }

        Console.err("3/4 submitting with '\(pipeline)' and waiting for every job")
        var submit = ParsedArguments()
        submit.values = ["ops": [pipeline], "broker": [endpoints.frontend], "events": [endpoints.events], "timeout": ["30"]]
        submit.flags = ["wait"]
        submit.positionals = [inputDir.path]
        let status = try SubmitCommand.run(submit)

        Console.err("4/4 writing the contact sheet")
        var contact = ParsedArguments()
        contact.values = ["output": [sheet.path], "store": [endpoints.store], "limit": [String(SamplePhoto.demoSet.count)], "columns": ["5"]]
        _ = try ContactSheetCommand.run(contact)

        // Name the executable as it was invoked, so the hint works before
        // darkroom is on PATH (script/demo runs .build/release/darkroom).
        let exe = CommandLine.arguments.first.map { $0.contains("/") ? $0 : "darkroom" } ?? "darkroom"
        Console.out("""

        Contact sheet: \(sheet.path)
        Inputs:        \(inputDir.path)/
        Database:      \(dataDir.path)/store/store.db (records), \(dataDir.path)/broker/queue.sqlite (queue and events)
        Serve it again: \(exe) up --data \(dataDir.path)   then   \(exe) ls
        """)
        return status
    }
}
