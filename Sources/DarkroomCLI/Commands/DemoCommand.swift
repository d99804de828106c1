import DarkroomImage
import DarkroomPipeline
import Foundation

/// `darkroom demo`: makes sample photos and runs the main pipeline on them, so a
/// newcomer sees Darkroom work with one command and nothing to download.
enum DemoCommand {
    static let pipeline = "scale:2048x2048,mode=fill | crop:square | glitch:seed=7"

    static let spec = CommandSpec(
        name: "demo",
        abstract: "Generate sample photos and process them with the main pipeline.",
        discussion: """
        Writes a few generated sample JPEGs (landscape, portrait, EXIF-rotated) to
        DIR/input, runs '\(pipeline)' on them with a 256x256
        thumbnail each, and prints where the results are.
        """,
        options: [
            .value("dir", "DIR", help: "Where to put the samples and results.", default: "darkroom-demo"),
            .value("jobs", short: "j", "N", help: "Images processed at the same time.", default: String(ProcessInfo.processInfo.activeProcessorCount)),
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let dir = URL(fileURLWithPath: args.value("dir") ?? "darkroom-demo")
        let inputDir = dir.appendingPathComponent("input")
        let outDir = dir.appendingPathComponent("output")
        try FileManager.default.createDirectory(at: inputDir, withIntermediateDirectories: true)
        Console.err("Generating sample photos in \(inputDir.path)/ ...")
        for sample in SamplePhoto.demoSet {
            let bytes = try SamplePhoto.jpeg(sample)
            try Data(bytes).write(to: inputDir.appendingPathComponent(sample.name + ".jpg"), options: .atomic)
        }
        Console.err("Processing with '\(pipeline)' ...")
        var processArgs = ParsedArguments()
        processArgs.values["ops"] = [pipeline]
        processArgs.values["out"] = [outDir.path]
        processArgs.values["jobs"] = [args.value("jobs") ?? String(ProcessInfo.processInfo.activeProcessorCount)]
        processArgs.positionals = [inputDir.path]
        let status = try ProcessCommand.run(processArgs)
        Console.out("""

        Inputs:      \(inputDir.path)/
        Results:     \(outDir.path)/  (NAME.jpg full resolution, NAME.thumb.jpg thumbnail)
        Try your own: darkroom process PHOTO.jpg --ops '\(pipeline)' --out \(outDir.path)
        """)
        return status
    }
}
