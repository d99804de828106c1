import DarkroomCore
import DarkroomImage
import Foundation
import Testing

/// The DRK1 specification is enough for another language: the Python client in
/// protocol/examples, written from protocol/drk1.md, drives a real
/// `darkroom up` and checks what the storage node returns.
@Suite("DRK1 client in Python against darkroom up")
struct PythonClientTests {
    /// Whether `python3` with pyzmq can run here; the reason is printed when not.
    static let pythonReady: Bool = {
        do {
            let probe = try Child.run("/usr/bin/env", ["python3", "-c", "import zmq"])
            if probe.status == 0 { return true }
            let why = probe.stderr.split(separator: "\n").last.map(String.init) ?? "exit status \(probe.status)"
            print("PythonClientTests skipped: python3 cannot import zmq (install pyzmq): \(why)")
        } catch {
            print("PythonClientTests skipped: cannot run python3: \(error)")
        }
        return false
    }()

    static let clientScript = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/examples/drk1_client.py")

    @Test("submit, wait for stored, GET both images and verify them; a failing step is reported from 1",
          .enabled(if: PythonClientTests.pythonReady, "needs python3 with pyzmq"))
    func pythonClientRoundTrip() throws {
        let dir = try TemporaryDirectory()
        let up = try UpProcess(data: dir.path("data"), logs: dir.url)
        defer { up.stopIfRunning() }
        let endpoints = try up.waitUntilUp()

        let input = dir.url.appendingPathComponent("photo.jpg")
        let photo = try JPEG.encode(SamplePhoto.render(Size(width: 320, height: 200), seed: 11), options: EncodeOptions(quality: 90))
        try Data(photo).write(to: input)
        let endpointFlags = ["--frontend", endpoints["frontend"] ?? "", "--events", endpoints["events"] ?? "",
                             "--store", endpoints["store"] ?? ""]
        /// The client run on `image` with `arguments` against this `up`, and the JSON summary it printed.
        func client(_ image: URL, _ arguments: [String]) throws -> (run: DarkroomProcess.Output, summary: [String: Any]) {
            let run = try Child.run("/usr/bin/env", ["python3", Self.clientScript.path, image.path] + arguments + endpointFlags)
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any],
                                       "client stdout: \(run.stdout)\nstderr: \(run.stderr)")
            return (run, summary)
        }

        // 320x200 fits 160x100, then the square crop keeps 100x100.
        let out = dir.url.appendingPathComponent("out")
        let (run, summary) = try client(input, ["--pipeline", "scale:160x100 | crop:square | glitch:seed=5", "--thumb", "64x48",
                                                "--json", "--out", out.path, "--timeout", "120"])
        #expect(run.status == 0, "client stderr: \(run.stderr)\nup stderr: \(up.stderr)")
        #expect(summary["ok"] as? Bool == true, "summary: \(summary)")
        let jobID = try #require(summary["jobId"] as? String)
        let recordID = try #require(summary["recordId"] as? String)
        #expect(jobID.utf8.count == 26 && recordID.utf8.count == 26)
        let kinds = (summary["events"] as? [[String: Any]] ?? []).compactMap { $0["kind"] as? String }
        #expect(kinds.first == "accepted" && kinds.last == "stored", "events: \(kinds)")

        for (name, key, width, height) in [("full.jpg", "full", 100, 100), ("thumb.jpg", "thumb", 64, 48)] {
            let bytes = [UInt8](try Data(contentsOf: out.appendingPathComponent(name)))
            let header = try JPEG.readHeader(bytes)
            #expect(header.storedSize == Size(width: width, height: height), "\(name) is \(header.storedSize)")
            let reported = try #require(summary[key] as? [String: Any])
            #expect(reported["sha256"] as? String == SHA256.hex(bytes), "\(name) digest")
            #expect(reported["bytes"] as? Int == bytes.count)
            #expect(reported["width"] as? Int == width && reported["height"] as? Int == height)
            #expect(reported["verified"] as? Bool == true)
        }

        // The same through EVENTS (topic "eb"), decoded by the client from
        // the spec's record layout: the job's later events come live, in
        // batches, as well as by REPLAY.
        let (batched, batchedSummary) = try client(input, ["--pipeline", "scale:160x100 | crop:square | glitch:seed=6", "--thumb",
                                                           "64x48", "--json", "--batched-events", "--timeout", "120"])
        #expect(batched.status == 0, "client stderr: \(batched.stderr)")
        #expect(batchedSummary["ok"] as? Bool == true, "summary: \(batchedSummary)")
        let batchedKinds = (batchedSummary["events"] as? [[String: Any]] ?? []).compactMap { $0["kind"] as? String }
        #expect(batchedKinds == ["accepted", "started", "stored"], "events: \(batchedKinds)")
        #expect((batchedSummary["liveMessages"] as? Int ?? 0) >= 1, "no EVENTS message arrived live: \(batchedSummary)")

        // WebP outputs (options flags bits 3–4 and 5–6): the client, from the
        // spec alone, reads each image's size from its RIFF header and its
        // format from the record, and checks both.
        let webpOut = dir.url.appendingPathComponent("webp")
        let (webp, webpSummary) = try client(input, ["--pipeline", "scale:160x100", "--thumb", "40x30", "--format", "webp",
                                                     "--thumb-format", "jpeg", "--json", "--out", webpOut.path, "--timeout", "120"])
        #expect(webp.status == 0, "client stderr: \(webp.stderr)")
        #expect((webpSummary["full"] as? [String: Any])?["format"] as? String == "webp", "\(webpSummary)")
        #expect((webpSummary["full"] as? [String: Any])?["headerWidth"] as? Int == 160, "\(webpSummary)")
        #expect((webpSummary["thumb"] as? [String: Any])?["format"] as? String == "jpeg", "\(webpSummary)")
        #expect(webpSummary["ok"] as? Bool == true, "\(webpSummary)")
        let webpFull = [UInt8](try Data(contentsOf: webpOut.appendingPathComponent("full.webp")))
        #expect(try WebP.readHeader(webpFull).size == Size(width: 160, height: 100))
        #expect(try JPEG.readHeader([UInt8](try Data(contentsOf: webpOut.appendingPathComponent("thumb.jpg")))).storedSize == Size(width: 40, height: 30))

        // A crop larger than the 100x100 image fails in the second step, and
        // the client, reading only the wire, names it as people count steps.
        let (bad, failed) = try client(input, ["--pipeline", "scale:160x100 | crop:600x600+0+0", "--json", "--timeout", "120"])
        #expect(bad.status == 1, "client stderr: \(bad.stderr)")
        #expect(failed["ok"] as? Bool == false)
        let error = failed["error"] as? String ?? ""
        #expect(error.contains("is dead: step 2 crop:600x600+0+0: image.invalid-argument"), "error: \(error)")

        // A deadline (SUBMIT frame 11, after an empty attempts frame) on a
        // paused broker: the client, from the spec alone, reads the job's
        // end, cancelled as job.expired.
        let pause = try DarkroomProcess.run(["pause", "--broker", endpoints["frontend"] ?? ""])
        #expect(pause.status == 0, "\(pause.stderr)")
        let (late, expired) = try client(input, ["--pipeline", "grayscale", "--expires-in", "1", "--json", "--timeout", "60"])
        #expect(late.status == 1, "client stderr: \(late.stderr)")
        #expect((expired["error"] as? String ?? "").contains("was cancelled: job.expired: not started by its deadline"), "\(expired)")

        // A time limit (SUBMIT frame 12) on a job that runs longer: the
        // worker stops it, and the client reads it dead as job.timeout.
        let resume = try DarkroomProcess.run(["resume", "--broker", endpoints["frontend"] ?? ""])
        #expect(resume.status == 0, "\(resume.stderr)")
        let large = dir.url.appendingPathComponent("large.jpg")
        try Data(try JPEG.encode(SamplePhoto.render(Size(width: 2000, height: 1500), seed: 12), options: EncodeOptions(quality: 85))).write(to: large)
        let (slow, stopped) = try client(large, ["--pipeline", "blur:30 | blur:30 | blur:30", "--time-limit", "1", "--json",
                                                 "--timeout", "120"])
        #expect(slow.status == 1, "client stderr: \(slow.stderr)")
        #expect((stopped["error"] as? String ?? "").contains("job.timeout: stopped: ran longer than the job's time limit of 1 s"), "\(stopped)")

        let status = try up.terminate()
        #expect(status == 0, "darkroom up stderr: \(up.stderr)")
    }
}

/// A `darkroom up` on free loopback ports with its own data directory.
final class UpProcess {
    let process = Process()
    let errURL: URL

    init(data: String, logs: URL) throws {
        let outURL = logs.appendingPathComponent("up.stdout")
        errURL = logs.appendingPathComponent("up.stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        process.executableURL = DarkroomProcess.executable
        let free = "tcp://127.0.0.1:*"
        process.arguments = ["up", "--data", data, "--workers", "1", "--concurrency", "2", "--grace", "5",
                             "--frontend", free, "--backend", free, "--events", free, "--store", free]
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var stderr: String { (try? String(contentsOf: errURL, encoding: .utf8)) ?? "" }

    /// Waits for the "darkroom is up" log line and returns the bound endpoints
    /// it names (`frontend`, `backend`, `events`, `store`).
    func waitUntilUp() throws -> [String: String] {
        let marker = "darkroom is up: "
        for _ in 0..<2400 {
            if let line = stderr.split(separator: "\n").first(where: { $0.contains(marker) }),
               let range = line.range(of: marker) {
                var endpoints: [String: String] = [:]
                for part in line[range.upperBound...].split(separator: ",") {
                    let words = part.split(separator: " ")
                    if words.count == 2, words[1].hasPrefix("tcp://") { endpoints[String(words[0])] = String(words[1]) }
                }
                guard Set(endpoints.keys) == ["frontend", "backend", "events", "store"],
                      endpoints.values.allSatisfy({ !$0.hasSuffix(":*") }) else {
                    throw UpError("cannot read the bound endpoints from: \(line)")
                }
                return endpoints
            }
            guard process.isRunning else { throw UpError("darkroom up exited with \(process.terminationStatus): \(stderr)") }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw UpError("darkroom up did not come up: \(stderr)")
    }

    /// SIGTERM, then the exit status once the process has stopped.
    func terminate() throws -> Int32 {
        process.terminate()
        process.waitUntilExit()
        guard process.terminationReason == .exit else { throw UpError("darkroom up died of signal \(process.terminationStatus)") }
        return process.terminationStatus
    }

    func stopIfRunning() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    struct UpError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

/// Runs any program to completion, output through temporary files.
enum Child {
    static func run(_ executable: String, _ arguments: [String]) throws -> DarkroomProcess.Output {
        let scratch = try TemporaryDirectory()
        let outURL = scratch.url.appendingPathComponent("stdout")
        let errURL = scratch.url.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        defer {
            try? out.close()
            try? err.close()
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return DarkroomProcess.Output(
            status: process.terminationStatus,
            stdout: String(decoding: try Data(contentsOf: outURL), as: UTF8.self),
            stderr: String(decoding: try Data(contentsOf: errURL), as: UTF8.self)
        )
    }
}
