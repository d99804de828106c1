import DarkroomImage
import Foundation
import Testing

/// `darkroom process` and the command line, run as a user runs them: the real
/// executable, real files.
@Suite("darkroom process")
struct ProcessCommandTests {
    /// A small good JPEG made in code.
    static func goodJPEG(width: Int = 320, height: Int = 200, seed: UInt64 = 1) throws -> [UInt8] {
        try JPEG.encode(SamplePhoto.render(Size(width: width, height: height), seed: seed), options: EncodeOptions(quality: 90))
    }

    @Test("--help prints the overview and exits 0")
    func help() throws {
        let top = try DarkroomProcess.run(["--help"])
        #expect(top.status == 0)
        #expect(top.stdout.contains("OVERVIEW:"))
        #expect(top.stdout.contains("SUBCOMMANDS:"))
        #expect(top.stdout.contains("process"))
        let sub = try DarkroomProcess.run(["process", "--help"])
        #expect(sub.status == 0)
        for heading in ["OVERVIEW:", "USAGE: darkroom process", "ARGUMENTS:", "OPTIONS:", "--ops <PIPELINE>", "--thumb", "glitch"] {
            #expect(sub.stdout.contains(heading), "missing \(heading)")
        }
        let helpSub = try DarkroomProcess.run(["help", "process"])
        #expect(helpSub.status == 0)
        #expect(helpSub.stdout == sub.stdout)
    }

    @Test("usage errors go to stderr with the usage line and exit 64", arguments: [
        (["process", "--bogus"], "unknown option '--bogus'"),
        (["process", "a.jpg", "--qualty", "3"], "did you mean '--quality'"),
        (["process", "a.jpg"], "missing expected option '--ops <PIPELINE>'"),
        (["process", "--ops", "invert"], "missing expected argument '<inputs> ...'"),
        (["process", "a.jpg", "--ops", "invert", "--quality", "101"], "--quality must be a whole number from 1 to 100"),
        (["process", "a.jpg", "--ops", "scale:10x10 | crpo:square"], "did you mean \"crop\""),
        (["process", "a.jpg", "--ops", "invert", "--thumb", "big"], "--thumb must be WxH"),
        (["proccess"], "did you mean 'process'"),
        (["help", "nosuch"], "unknown subcommand 'nosuch'"),
        (["help", "proces"], "unknown subcommand 'proces' (did you mean 'process'?)"),
        // Refused before the broker is asked: none listens on port 1.
        (["dead", "list", "extra", "--broker", "tcp://127.0.0.1:1", "--timeout", "1"], "unexpected argument 'extra' (dead list takes no arguments)"),
        (["dead", "retry", "all", "all", "--broker", "tcp://127.0.0.1:1", "--timeout", "1"], "unexpected argument 'all' (dead retry takes one job id or 'all')"),
        (["dead", "discard", "all", "a", "b", "--broker", "tcp://127.0.0.1:1", "--timeout", "1"], "unexpected arguments 'a' 'b'"),
        (["status", "--only", "broker", "--broker", "tcp://127.0.0.1:1", "--timeout", "1"], "--only goes with --check"),
        // An endpoint's shape is checked before ZeroMQ sees it (it said EINVAL).
        (["status", "--broker", "localhost:7700"], "--broker localhost:7700: not an endpoint: write TRANSPORT://ADDRESS, for example tcp://HOST:PORT (tcp://localhost:7700?)"),
        (["submit", "a.jpg", "--ops", "invert", "--events", "http://h:7702"], "--events http://h:7702: unknown transport 'http'"),
        (["up", "--frontend", "tcp://127.0.0.1:77000"], "'77000' is not a port"),
        (["worker", "--store", "tcp://:7703"], "--store tcp://:7703: no host and port"),
        // Before a subcommand, options are --help and --version.
        (["-v"], "unknown option '-v' (did you mean '--version'?)"),
        (["--verison"], "unknown option '--verison' (did you mean '--version'?)"),
        (["foo"], "unknown subcommand 'foo'\n"),
        (["store", "--keep-records", "90x"], "--keep-records takes a duration of at least 1s, like 7d, 12h or 1h30m, or forever; got '90x'"),
        (["broker", "--retention", "500ms"], "--retention takes a duration of at least 1s"),
    ])
    func usageErrors(arguments: [String], message: String) throws {
        let result = try DarkroomProcess.run(arguments)
        #expect(result.status == 64)
        #expect(result.stderr.contains("Error: "))
        #expect(result.stderr.contains(message), "stderr was: \(result.stderr)")
        #expect(result.stderr.contains("Usage"))
        #expect(result.stdout.isEmpty)
    }

    @Test("a batch with bad files processes the good ones and exits 1")
    func mixedBatch() throws {
        let dir = try TemporaryDirectory()
        let good = try Self.goodJPEG()
        try Data(good).write(to: dir.url.appendingPathComponent("good.jpg"))
        try Data(try Self.goodJPEG(width: 150, height: 300, seed: 2)).write(to: dir.url.appendingPathComponent("tall.jpg"))
        try Data(good.prefix(good.count / 2)).write(to: dir.url.appendingPathComponent("truncated.jpg"))
        try Data().write(to: dir.url.appendingPathComponent("empty.jpg"))
        try Data([0x42, 0x4D, 0x36, 0x00] + [UInt8](repeating: 0, count: 64)).write(to: dir.url.appendingPathComponent("bmp-named.jpg"))
        let out = dir.url.appendingPathComponent("out")

        let result = try DarkroomProcess.run([
            "process", dir.url.path, dir.path("missing.jpg"),
            "--ops", "scale:128x128,mode=fill | crop:square | glitch:seed=3",
            "--thumb", "32x32", "--out", out.path, "--json",
        ])
        #expect(result.status == 1)
        let lines = result.stdoutLines
        #expect(lines.count == 6)
        var byName: [String: [String: Any]] = [:]
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let input = try #require(object["input"] as? String)
            byName[(input as NSString).lastPathComponent] = object
        }
        for name in ["good.jpg", "tall.jpg"] {
            let object = try #require(byName[name])
            #expect(object["ok"] as? Bool == true)
            #expect(object["width"] as? Int == 128)
            #expect(object["height"] as? Int == 128)
            #expect(object["thumbnail_width"] as? Int == 32)
            let output = try #require(object["output"] as? String)
            let header = try JPEG.readHeader([UInt8](try Data(contentsOf: URL(fileURLWithPath: output))))
            #expect(header.storedSize == Size(width: 128, height: 128))
            let thumb = try #require(object["thumbnail"] as? String)
            #expect(thumb.hasSuffix(".thumb.jpg"))
            let thumbHeader = try JPEG.readHeader([UInt8](try Data(contentsOf: URL(fileURLWithPath: thumb))))
            #expect(thumbHeader.storedSize == Size(width: 32, height: 32))
        }
        let expectedCodes = ["truncated.jpg": "image.truncated", "empty.jpg": "image.empty", "bmp-named.jpg": "image.unsupported-format", "missing.jpg": "input"]
        for (name, code) in expectedCodes {
            let object = try #require(byName[name], "no line for \(name)")
            #expect(object["ok"] as? Bool == false)
            let error = try #require(object["error"] as? [String: Any])
            #expect(error["code"] as? String == code, "\(name): \(error)")
            #expect((error["reason"] as? String)?.isEmpty == false)
        }
        #expect(!FileManager.default.fileExists(atPath: out.appendingPathComponent("truncated.jpg").path))
    }

    @Test("text output names the file, the step and the reason on one line")
    func textErrors() throws {
        let dir = try TemporaryDirectory()
        try Data(try Self.goodJPEG(width: 100, height: 80)).write(to: dir.url.appendingPathComponent("small.jpg"))
        let result = try DarkroomProcess.run(["process", dir.path("small.jpg"), "--ops", "invert | crop:600x600+0+0", "--out", dir.path("out")])
        #expect(result.status == 1)
        #expect(result.stderr.contains("small.jpg: step 2 crop:600x600+0+0: rectangle 600x600+0+0 exceeds image 100x80"), "stderr: \(result.stderr)")
        #expect(result.stderr.contains("0 processed, 1 failed"))
    }

    /// "x.thumb.jpg" would be written where the thumbnail of "x.jpg" goes,
    /// and the second "x.jpg" where the input "x-2.jpg" goes: every file of
    /// the run gets a name of its own, and holds its own input's image.
    @Test("no output overwrites another: a result where a thumbnail goes, or where a renamed one goes")
    func outputNamesAreUnique() throws {
        let dir = try TemporaryDirectory()
        let a = dir.url.appendingPathComponent("a")
        let b = dir.url.appendingPathComponent("b")
        try FileManager.default.createDirectory(at: a, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: b, withIntermediateDirectories: true)
        // A different size each, so a file holding another input's result shows.
        try Data(try Self.goodJPEG(width: 320, height: 200, seed: 1)).write(to: a.appendingPathComponent("x.jpg"))
        try Data(try Self.goodJPEG(width: 150, height: 300, seed: 2)).write(to: a.appendingPathComponent("x.thumb.jpg"))
        try Data(try Self.goodJPEG(width: 200, height: 120, seed: 3)).write(to: b.appendingPathComponent("x.jpg"))
        try Data(try Self.goodJPEG(width: 100, height: 90, seed: 4)).write(to: dir.url.appendingPathComponent("x-2.jpg"))
        let out = dir.url.appendingPathComponent("out")

        let result = try DarkroomProcess.run([
            "process", a.path, b.path, dir.path("x-2.jpg"), "--ops", "invert", "--thumb", "32x32", "--out", out.path, "--json",
        ])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        var outputs: [String: String] = [:]
        var written: [String] = []
        for line in result.stdoutLines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let input = try #require(object["input"] as? String)
            let output = try #require(object["output"] as? String)
            let thumb = try #require(object["thumbnail"] as? String)
            outputs[input] = (output as NSString).lastPathComponent
            written += [output, thumb]
            let header = try JPEG.readHeader([UInt8](try Data(contentsOf: URL(fileURLWithPath: output))))
            let source = Size(width: try #require(object["source_width"] as? Int), height: try #require(object["source_height"] as? Int))
            #expect(header.storedSize == source, "\(output) holds another input's result")
            let thumbHeader = try JPEG.readHeader([UInt8](try Data(contentsOf: URL(fileURLWithPath: thumb))))
            #expect(thumbHeader.storedSize == Size(width: 32, height: 32), "\(thumb) is not a thumbnail")
        }
        #expect(outputs == [
            a.path + "/x.jpg": "x.jpg",
            a.path + "/x.thumb.jpg": "x.thumb-2.jpg",
            b.path + "/x.jpg": "x-2.jpg",
            dir.path("x-2.jpg"): "x-2-2.jpg",
        ])
        #expect(Set(written).count == 8, "\(written.sorted())")
        let files = try FileManager.default.contentsOfDirectory(atPath: out.path)
        #expect(files.count == 8, "\(files.sorted())")
    }

    /// `--out` where the inputs are used to replace a photo with its own
    /// 64-pixel result (and a read-only one too: the result is renamed
    /// over it). An input whose result would land on any input of the
    /// batch, itself or another, under any path to it, is refused before
    /// anything is written; the rest of the batch goes on.
    @Test("a result that would be written over an input (itself, another, by another path) is refused; the input is untouched")
    func resultsNeverReplaceAnInput() throws {
        let dir = try TemporaryDirectory()
        let photo = try Self.goodJPEG(width: 320, height: 200, seed: 1)
        let other = try Self.goodJPEG(width: 200, height: 120, seed: 2)
        try Data(photo).write(to: dir.url.appendingPathComponent("photo.jpg"))
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: dir.path("photo.jpg"))

        let inPlace = try DarkroomProcess.run(["process", dir.path("photo.jpg"), "--ops", "scale:64x64", "--out", dir.url.path])
        #expect(inPlace.status == 1, "\(inPlace.stderr)")
        #expect(inPlace.stderr.contains("\(dir.path("photo.jpg")): its result \(dir.url.path)/photo.jpg would be written over this input itself; choose another --out"), "\(inPlace.stderr)")
        #expect([UInt8](try Data(contentsOf: dir.url.appendingPathComponent("photo.jpg"))) == photo)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path) == ["photo.jpg"])

        // a.png's result is named a.jpg, another input of the batch: it is
        // refused, and a.jpg, whose result is renamed a-2.jpg, goes on.
        let pair = dir.url.appendingPathComponent("pair")
        try FileManager.default.createDirectory(at: pair, withIntermediateDirectories: true)
        try Data(other).write(to: pair.appendingPathComponent("a.jpg"))
        var pixels = [UInt8](repeating: 200, count: 20 * 10 * 4)
        for i in stride(from: 3, to: pixels.count, by: 4) { pixels[i] = 255 }
        try Data(try PNG.encode(Image(width: 20, height: 10, pixels: pixels))).write(to: pair.appendingPathComponent("a.png"))
        let both = try DarkroomProcess.run(["process", pair.path + "/a.png", pair.path + "/a.jpg", "--ops", "invert", "--out", pair.path])
        #expect(both.status == 1, "\(both.stderr)")
        #expect(both.stderr.contains("\(pair.path)/a.png: its result \(pair.path)/a.jpg would be written over the input \(pair.path)/a.jpg; choose another --out"), "\(both.stderr)")
        #expect([UInt8](try Data(contentsOf: pair.appendingPathComponent("a.jpg"))) == other)
        #expect(try JPEG.readHeader([UInt8](try Data(contentsOf: pair.appendingPathComponent("a-2.jpg")))).storedSize == Size(width: 200, height: 120))
        #expect(both.stderr.contains("1 processed, 1 failed"), "\(both.stderr)")

        // The folder by a relative path, --out by its absolute one: the same files.
        let again = try DarkroomProcess.run(["process", ".", "--ops", "scale:64x64", "--out", dir.url.path, "--json"], in: dir.url)
        #expect(again.status == 1, "\(again.stderr)")
        #expect(again.stdout.contains("would be written over this input itself"), "\(again.stdout)")
        #expect([UInt8](try Data(contentsOf: dir.url.appendingPathComponent("photo.jpg"))) == photo)

        // Elsewhere, the photo is processed.
        let elsewhere = try DarkroomProcess.run(["process", dir.path("photo.jpg"), "--ops", "scale:64x64", "--out", dir.path("out")])
        #expect(elsewhere.status == 0, "\(elsewhere.stderr)")
    }

    /// A folder of folders (uploads/2026/12/…): without --recursive the
    /// message says the subdirectories were not searched; with it every
    /// image at any depth is taken once, in path order, hidden folders
    /// left out and a link back up followed once.
    @Test("--recursive takes the images of subdirectories at any depth, once each; without it the message says why none were found")
    func recursiveInputs() throws {
        let dir = try TemporaryDirectory()
        let root = dir.url.appendingPathComponent("uploads")
        let deep = root.appendingPathComponent("2026/12")
        let hidden = root.appendingPathComponent(".cache")
        for folder in [deep, hidden, root.appendingPathComponent("2025")] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        let jpeg = Data(try Self.goodJPEG(width: 40, height: 30))
        try jpeg.write(to: deep.appendingPathComponent("b.jpg"))
        try jpeg.write(to: deep.appendingPathComponent("a.jpg"))
        try jpeg.write(to: root.appendingPathComponent("2025/z.jpg"))
        try jpeg.write(to: hidden.appendingPathComponent("skip.jpg"))
        try Data("notes".utf8).write(to: deep.appendingPathComponent("notes.txt"))
        // A link back to the top: followed once, not forever.
        try FileManager.default.createSymbolicLink(atPath: deep.appendingPathComponent("up").path, withDestinationPath: root.path)

        let flat = try DarkroomProcess.run(["process", root.path, "--ops", "invert", "--out", dir.path("flat")])
        #expect(flat.status == 1)
        #expect(flat.stderr.contains("\(root.path): directory has no .jpg"), "\(flat.stderr)")
        #expect(flat.stderr.contains("(its 2 subdirectories are not searched without --recursive)"), "\(flat.stderr)")

        let all = try DarkroomProcess.run(["process", "-r", root.path, "--ops", "invert", "--thumb", "none", "--out", dir.path("all"), "--json"])
        #expect(all.status == 0, "\(all.stderr)")
        let inputs = all.stdoutLines.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["input"] as? String
        }
        #expect(inputs.sorted() == [root.path + "/2025/z.jpg", root.path + "/2026/12/a.jpg", root.path + "/2026/12/b.jpg"], "\(all.stdout)")
    }

    /// `--keep-records` and `--retention` take what `submit --in` takes.
    @Test("--keep-records and --retention take compound durations such as 1h30m")
    func retentionTakesCompoundDurations() throws {
        // Past the option parsing, the start fails on a data directory that cannot exist.
        for args in [["store", "--keep-records", "1h30m", "--bind", "tcp://127.0.0.1:*"], ["broker", "--retention", "2d12h",
                     "--frontend", "tcp://127.0.0.1:*", "--backend", "tcp://127.0.0.1:*", "--events", "tcp://127.0.0.1:*"]] {
            let run = try DarkroomProcess.run(args + ["--data", "/dev/null/darkroom"])
            #expect(run.status == 1, "\(args): \(run.stderr)")
            #expect(!run.stderr.contains("takes a duration"), "\(run.stderr)")
        }
    }

    /// Options nothing written will use used to pass without a word.
    @Test("an option no output uses is named in a note, and the run goes on")
    func unusedOptionsAreNoted() throws {
        let dir = try TemporaryDirectory()
        try Data(try Self.goodJPEG()).write(to: dir.url.appendingPathComponent("a.jpg"))
        let png = try DarkroomProcess.run(["process", dir.path("a.jpg"), "--ops", "invert", "--format", "png", "--quality", "50",
                                           "--progressive", "--out", dir.path("o1")])
        #expect(png.status == 0, "\(png.stderr)")
        #expect(png.stderr.contains("note: --quality does not apply to a PNG result (PNG is lossless)"), "\(png.stderr)")
        #expect(png.stderr.contains("note: --progressive applies to JPEG outputs only, and none is written"), "\(png.stderr)")
        let none = try DarkroomProcess.run(["process", dir.path("a.jpg"), "--ops", "invert", "--thumb", "none", "--thumb-format", "png",
                                            "--out", dir.path("o2")])
        #expect(none.stderr.contains("note: --thumb-format has no thumbnail to apply to (--thumb none)"), "\(none.stderr)")
        // Used: no note (the thumbnail is a JPEG, so --progressive applies).
        let used = try DarkroomProcess.run(["process", dir.path("a.jpg"), "--ops", "invert", "--format", "png", "--thumb-format", "jpeg",
                                            "--progressive", "--thumb-quality", "50", "--out", dir.path("o3")])
        #expect(!used.stderr.contains("note:"), "\(used.stderr)")
    }

    /// Foundation's text ("The operation could not be completed.") said
    /// neither what was wrong nor where.
    @Test("an output directory that cannot be made, or a directory where a result goes, is said in plain words")
    func outputFailures() throws {
        let dir = try TemporaryDirectory()
        try Data(try Self.goodJPEG()).write(to: dir.url.appendingPathComponent("a.jpg"))
        let underFile = dir.path("a.jpg") + "/out"
        let noDirectory = try DarkroomProcess.run(["process", dir.path("a.jpg"), "--ops", "invert", "--out", underFile])
        #expect(noDirectory.status == 1)
        #expect(noDirectory.stderr == "Error: cannot create the output directory \(underFile): Not a directory\n", "stderr: \(noDirectory.stderr)")

        let out = dir.url.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out.appendingPathComponent("a.jpg"), withIntermediateDirectories: true)
        let taken = try DarkroomProcess.run(["process", dir.path("a.jpg"), "--ops", "invert", "--out", out.path])
        #expect(taken.status == 1)
        #expect(taken.stderr.hasPrefix("\(dir.path("a.jpg")): cannot write \(out.path)/a.jpg: it is a directory\n"), "stderr: \(taken.stderr)")
        // The temporary file the result was written to is gone.
        #expect(try FileManager.default.contentsOfDirectory(atPath: out.path) == ["a.jpg"])
    }

    @Test("outputs are deterministic for the same input and pipeline")
    func deterministic() throws {
        let dir = try TemporaryDirectory()
        try Data(try Self.goodJPEG()).write(to: dir.url.appendingPathComponent("a.jpg"))
        let ops = "scale:96x96,mode=fill | crop:square | glitch:seed=11 | sepia"
        let first = try DarkroomProcess.run(["process", dir.path("a.jpg"), "--ops", ops, "--out", dir.path("one")])
        let second = try DarkroomProcess.run(["process", dir.path("a.jpg"), "--ops", ops, "--out", dir.path("two"), "--jobs", "2"])
        #expect(first.status == 0 && second.status == 0)
        let a = try Data(contentsOf: URL(fileURLWithPath: dir.path("one/a.jpg")))
        let b = try Data(contentsOf: URL(fileURLWithPath: dir.path("two/a.jpg")))
        #expect(a == b)
        #expect(a.count > 100)
    }
}
