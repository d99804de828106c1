import DarkroomCore
import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Testing

/// The whole system as separate `darkroom` processes on loopback TCP: broker,
/// storage node, workers, and the client commands a user types.
@Suite("Darkroom end to end", .serialized)
struct SystemTests {
    @Test("submit --wait stores one linked full-res and thumbnail per job, and get returns the stored bytes")
    func submitWaitListGet() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 2), ("w2", 1)])
        let input = try h.writeImages(6)

        let submit = try h.run(["submit", input.path, "--ops", "scale:128x128,mode=fill | crop:square | glitch:seed=3", "--thumb", "32x32", "--wait", "--json"] + h.clientFlags)
        #expect(submit.status == 0, "submit failed: \(submit.stderr)\n\(h.log("broker").suffix(2000))")
        let lines = SystemHarness.jsonLines(submit.stdout)
        let accepted = lines.filter { $0["status"] as? String == "accepted" }
        let stored = lines.filter { $0["kind"] as? String == "stored" }
        #expect(accepted.count == 6)
        #expect(stored.count == 6)

        // Each worker logs one line per job it stored, naming the job, the
        // attempt, the source and the record its stored event names.
        for event in stored {
            let worker = try #require(event["worker"] as? String)
            let job = try #require(event["job"] as? String)
            let source = try #require(event["source"] as? String)
            let record = try #require(event["record"] as? String)
            let line = "\(worker) info  job \(job) attempt \(event["attempt"] as? Int ?? 0) source '\(source)': stored record \(record) ("
            let matches = h.log(worker).split(separator: "\n").filter { $0.contains(line) }
            #expect(matches.count == 1, "\(worker)'s log has \(matches.count) lines with \(line)")
            #expect(matches.first?.hasSuffix(" ms)") == true)
        }

        let ls = try h.run(["ls", "--json", "--limit", "100"] + h.storeFlags)
        #expect(ls.status == 0)
        let records = SystemHarness.jsonLines(ls.stdout)
        #expect(records.count == 6)
        let jobIDs = Set(accepted.compactMap { $0["job"] as? String })
        #expect(Set(records.compactMap { $0["jobId"] as? String }) == jobIDs)
        for record in records {
            let full = try #require(record["full"] as? [String: Any])
            let thumb = try #require(record["thumb"] as? [String: Any])
            #expect(full["width"] as? Int == 128 && full["height"] as? Int == 128)
            #expect(thumb["width"] as? Int == 32 && thumb["height"] as? Int == 32)
            #expect((record["pipeline"] as? String) == "scale:128x128,mode=fill,kernel=lanczos3 | crop:square,gravity=center | glitch:seed=3,amount=0.5")
        }

        // get returns exactly the stored bytes, for the full image and the thumbnail.
        let record = records[0]
        let id = try #require(record["id"] as? String)
        for (flag, key) in [([String](), "full"), (["--thumb"], "thumb")] {
            let out = h.dir.path("got-\(key).jpg")
            let get = try h.run(["get", id, "-o", out] + flag + h.storeFlags)
            #expect(get.status == 0, "get: \(get.stderr)")
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
            let info = try #require(record[key] as? [String: Any])
            #expect(SHA256.hex(bytes) == info["sha256"] as? String)
            #expect(bytes.count == info["bytes"] as? Int)
        }
        // A directory where the file goes is said to be one, by get and by
        // contact-sheet, not passed on as Foundation's "error 512".
        for command in [["get", id], ["contact-sheet"]] {
            let onDirectory = try h.run(command + ["-o", h.dir.url.path] + h.storeFlags)
            #expect(onDirectory.status == 1)
            #expect(onDirectory.stderr == "Error: cannot write \(h.dir.url.path): it is a directory\n", "\(command[0]): \(onDirectory.stderr)")
        }

        // status sees both workers; watch replays every event from the start, in order, without gaps.
        let status = try h.run(["status", "--json"] + h.brokerFlags + h.storeFlags)
        #expect(status.status == 0)
        let statusObject = try #require(SystemHarness.jsonLines(status.stdout).first)
        #expect((statusObject["workers"] as? [Any])?.count == 2)
        // It also shows what the storage node holds: the six records.
        let storeObject = try #require(statusObject["store"] as? [String: Any])
        #expect(storeObject["records"] as? Int == 6)
        let watch = try h.run(["watch", "--from", "1", "--duration", "2", "--json"] + h.clientFlags)
        #expect(watch.status == 0)
        let events = SystemHarness.jsonLines(watch.stdout)
        #expect(events.count >= 18)
        #expect(events.compactMap { $0["seq"] as? Int } == Array(1...max(1, events.count)))
        #expect(events.filter { $0["kind"] as? String == "stored" }.count == 6)

        // rm deletes the record and its thumbnail; with --json an object
        // per id, a failure named and the next id still deleted.
        let unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
        let rm = try h.run(["rm", unknown, id, "--json"] + h.storeFlags)
        #expect(rm.status == 1)
        let removals = SystemHarness.jsonLines(rm.stdout)
        #expect(removals.compactMap { $0["id"] as? String } == [unknown, id], "\(rm.stdout)")
        #expect(removals.compactMap { $0["status"] as? String } == ["failed", "deleted"], "\(rm.stdout)")
        let failure = removals.first?["reason"] as? String ?? ""
        #expect(failure.contains("not-found"), "\(rm.stdout)")
        #expect(SystemHarness.jsonLines(try h.run(["ls", "--json"] + h.storeFlags).stdout).count == 5)
    }

    /// Sources tagged with a colour profile: their stored files carry it, and
    /// so does a contact sheet of thumbnails that share it; once one without
    /// it is among them, the sheet carries none and says why.
    @Test("stored files keep their source's colour profile; a contact sheet carries the one its thumbnails share")
    func colourProfilesEndToEnd() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        var profile = (0..<900).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 1) }
        profile.replaceSubrange(16..<20, with: Array("RGB ".utf8))
        let tagged = h.dir.url.appendingPathComponent("tagged")
        try FileManager.default.createDirectory(at: tagged, withIntermediateDirectories: true)
        for seed in 1...2 {
            let bytes = try JPEG.encode(SamplePhoto.render(Size(width: 160, height: 120), seed: UInt64(seed)),
                                        options: EncodeOptions(quality: 85, iccProfile: profile))
            try Data(bytes).write(to: tagged.appendingPathComponent("p3-\(seed).jpg"))
        }
        let submit = try h.run(["submit", tagged.path, "--ops", "scale:80x60", "--thumb", "32x32", "--wait"] + h.clientFlags)
        #expect(submit.status == 0, "\(submit.stderr)")
        let sheet = h.dir.url.appendingPathComponent("sheet.jpg").path
        let made = try h.run(["contact-sheet", "-o", sheet] + h.storeFlags)
        #expect(made.status == 0 && !made.stderr.contains("colour profiles"), "\(made.stderr)")
        #expect(try JPEG.readHeader([UInt8](try Data(contentsOf: URL(fileURLWithPath: sheet)))).iccProfile == profile)
        let id = try #require(SystemHarness.jsonLines(try h.run(["ls", "--json"] + h.storeFlags).stdout).first?["id"] as? String)
        let full = h.dir.url.appendingPathComponent("full.jpg").path
        #expect(try h.run(["get", id, "-o", full] + h.storeFlags).status == 0)
        #expect(try JPEG.readHeader([UInt8](try Data(contentsOf: URL(fileURLWithPath: full)))).iccProfile == profile)

        let plain = try h.writeImages(1, name: "plain")
        #expect(try h.run(["submit", plain.path, "--ops", "scale:80x60", "--thumb", "32x32", "--wait"] + h.clientFlags).status == 0)
        let mixed = try h.run(["contact-sheet", "-o", sheet] + h.storeFlags)
        #expect(mixed.status == 0)
        #expect(mixed.stderr.contains("the thumbnails carry different colour profiles"), "\(mixed.stderr)")
        #expect(try JPEG.readHeader([UInt8](try Data(contentsOf: URL(fileURLWithPath: sheet)))).iccProfile == nil)
    }

    /// `submit --subsampling --progressive` reach the worker through the
    /// broker: both stored files are written as asked (4:2:0 even at
    /// quality 95, where auto gives 4:4:4), and a submit without them still
    /// gets auto's baseline files.
    @Test("submit --subsampling, --progressive and --thumb-gravity: both stored files are written as asked, byte for byte as process writes them; without them, auto and baseline")
    func outputFlagsEndToEnd() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        func stored(_ folder: URL, _ flags: [String]) throws -> (full: JPEGHeader, thumb: JPEGHeader, fullBytes: Data, thumbBytes: Data) {
            let submit = try h.run(["submit", folder.path, "--ops", "scale:96x72", "--thumb", "30x30", "--quality", "95", "--wait", "--json"]
                                   + flags + h.clientFlags)
            #expect(submit.status == 0, "\(submit.stderr)")
            let job = try #require(SystemHarness.jsonLines(submit.stdout).first { $0["status"] as? String == "stored" }?["job"] as? String)
            let full = h.dir.url.appendingPathComponent("\(job).jpg").path
            let thumb = h.dir.url.appendingPathComponent("\(job).thumb.jpg").path
            #expect(try h.run(["get", job, "-o", full] + h.storeFlags).status == 0)
            #expect(try h.run(["get", job, "--thumb", "-o", thumb] + h.storeFlags).status == 0)
            let (fullBytes, thumbBytes) = (try Data(contentsOf: URL(fileURLWithPath: full)), try Data(contentsOf: URL(fileURLWithPath: thumb)))
            return (try JPEG.readHeader([UInt8](fullBytes)), try JPEG.readHeader([UInt8](thumbBytes)), fullBytes, thumbBytes)
        }
        let askedFlags = ["--subsampling", "4:2:0", "--progressive", "--thumb-gravity", "smart"]
        let asked = try stored(try h.writeImages(1, name: "asked"), askedFlags)
        #expect(asked.full.isProgressive && asked.full.subsampling == .s420)
        #expect(asked.thumb.isProgressive && asked.thumb.subsampling == .s420)
        #expect(asked.full.storedSize == Size(width: 96, height: 72) && asked.thumb.storedSize == Size(width: 30, height: 30))
        // The same job run here gives the same bytes: every option reached the worker.
        let local = try h.run(["process", h.dir.url.appendingPathComponent("asked").path, "--ops", "scale:96x72", "--thumb", "30x30",
                               "--quality", "95", "-o", h.dir.path("local")] + askedFlags)
        #expect(local.status == 0, "\(local.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/photo-000.thumb.jpg")) == asked.thumbBytes)
        #expect(try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/photo-000.jpg")) == asked.fullBytes)
        let plain = try stored(try h.writeImages(1, name: "plain"), [])
        #expect(!plain.full.isProgressive && plain.full.subsampling == .s444, "auto at quality 95")
        #expect(!plain.thumb.isProgressive && plain.thumb.subsampling == .s420, "auto at the thumbnail's quality 70")

        let wrong = try h.run(["submit", h.dir.url.path, "--ops", "grayscale", "--subsampling", "411"] + h.clientFlags)
        #expect(wrong.status == 64 && wrong.stderr.contains("--subsampling must be auto, 444, 422 or 420, not \"411\""), "\(wrong.stderr)")
    }

    /// Many small inputs, one of them named twice and one not a JPEG: the
    /// jobs are followed while the rest are still being submitted, and each
    /// input still gets its own job, its `accepted` object first and exactly
    /// one final object; the bad file is named and the exit status says so.
    @Test("submit --wait of 300 inputs with a path given twice and a bad file: one job per input, accepted before its end, exit 1")
    func submitWaitManyInputs() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 4)])
        let tiny = try JPEG.encode(SamplePhoto.render(Size(width: 48, height: 32), seed: 9), options: EncodeOptions(quality: 80))
        let folder = try h.writeCopies(of: tiny, 300, name: "many")
        let twice = folder.appendingPathComponent("many-007.jpg").path
        let bad = h.dir.url.appendingPathComponent("bad.jpg")
        try Data("not a jpeg".utf8).write(to: bad)

        let submit = try h.run(["submit", folder.path, twice, bad.path, "--ops", "grayscale", "--thumb", "16x16", "--wait", "--json",
                                "--skip-invalid"] + h.clientFlags)
        #expect(submit.status == 1, "\(submit.stderr.suffix(2000))")
        #expect(submit.stderr.contains("302 input(s): 301 stored, 0 dead, 0 refused, 0 never answered, 1 invalid"), "\(submit.stderr.suffix(2000))")

        let lines = SystemHarness.jsonLines(submit.stdout)
        let invalid = lines.filter { $0["status"] as? String == "invalid" }
        #expect(invalid.count == 1 && invalid.first?["input"] as? String == bad.path)
        var jobOf: [String] = []  // in order of acceptance, one per input
        var seen: [String: Int] = [:]
        for line in lines {
            guard let job = line["job"] as? String else { continue }
            switch line["status"] as? String {
            case "accepted":
                #expect(seen[job] == nil, "job \(job) accepted twice")
                seen[job] = 1
                jobOf.append(job)
            case "stored":
                #expect(seen[job] == 1, "job \(job) ended before it was accepted, or twice")
                seen[job] = 2
            default:
                Issue.record("unexpected line \(line)")
            }
        }
        #expect(jobOf.count == 301 && Set(jobOf).count == 301, "a job per input, the path given twice included")
        #expect(seen.values.allSatisfy { $0 == 2 })
        let inputsOfTwice = lines.filter { $0["input"] as? String == twice && $0["status"] as? String == "stored" }
        #expect(inputsOfTwice.count == 2)

        let ls = try h.run(["ls", "--json", "--limit", "1000"] + h.storeFlags)
        #expect(Set(SystemHarness.jsonLines(ls.stdout).compactMap { $0["jobId"] as? String }) == Set(jobOf))
    }

    @Test("a worker killed with SIGKILL mid-batch loses nothing: its job is retried elsewhere, stored once")
    func killedWorker() throws {
        let h = try SystemHarness()
        try h.startSystem()
        // Big enough that one job takes a while in a debug build.
        let input = try h.writeImages(4, size: Size(width: 800, height: 600))
        try h.startWorker("victim")
        let submit = try h.run(["submit", input.path, "--ops", "blur:3 | scale:200x200,mode=fill | crop:square", "--json"] + h.clientFlags)
        #expect(submit.status == 0, "submit: \(submit.stderr)")
        let jobs = Set(SystemHarness.jsonLines(submit.stdout).compactMap { $0["job"] as? String })
        #expect(jobs.count == 4)

        // Wait until the victim has started a job, then kill it without warning.
        try h.waitUntilAJobStarts("the victim")
        h.signal("victim", SIGKILL)
        try h.startWorker("rescuer", concurrency: 2)

        try h.waitUntil("every job is stored", timeout: .seconds(180)) {
            SystemHarness.jsonLines(try h.run(["ls", "--json", "--limit", "100"] + h.storeFlags).stdout).count == 4
        }
        let records = SystemHarness.jsonLines(try h.run(["ls", "--json", "--limit", "100"] + h.storeFlags).stdout)
        #expect(Set(records.compactMap { $0["jobId"] as? String }) == jobs)

        let all = SystemHarness.jsonLines(try h.run(["watch", "--from", "1", "--duration", "3", "--json"] + h.clientFlags).stdout)
        let storedEvents = all.filter { $0["kind"] as? String == "stored" }
        let stored = Set(storedEvents.compactMap { $0["job"] as? String })
        #expect(stored == jobs)
        #expect(storedEvents.count == 4, "each job is stored exactly once")
        // The killed worker's job was requeued as a new attempt.
        let retried = all.filter { $0["kind"] as? String == "retrying" }
        #expect(!retried.isEmpty)
        #expect(retried.allSatisfy { ($0["attempt"] as? Int ?? 0) >= 2 })
    }

    @Test("submit --wait says why a job is retried: its worker, SIGKILLed, stopped answering")
    func retryLineSaysWhy() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let input = try h.writeImages(3, size: Size(width: 800, height: 600))
        try h.startWorker("victim")
        let submit = try h.start("submit", ["submit", input.path, "--ops", "blur:3 | scale:200x200,mode=fill", "--wait"] + h.clientFlags,
                                 separateStderr: true)
        try h.waitUntilAJobStarts("the victim")
        h.signal("victim", SIGKILL)
        try h.startWorker("rescuer")
        try h.waitUntil("submit ends", timeout: .seconds(180)) { !submit.isRunning }
        #expect(submit.terminationStatus == 0, "\(h.log("submit"))")
        let stderr = (try? String(contentsOf: h.dir.url.appendingPathComponent("submit.err"), encoding: .utf8)) ?? ""
        let retries = stderr.split(separator: "\n").filter { $0.hasPrefix("retry  ") }
        #expect(!retries.isEmpty, "\(stderr)")
        #expect(retries.allSatisfy { $0.contains(": attempt 2 now") && !$0.contains("(attempt 2)") && $0.contains("victim") }, "\(stderr)")
        #expect(h.log("submit").split(separator: "\n").filter { $0.hasPrefix("stored ") }.count == 3, "\(h.log("submit"))")
    }

    /// A host's endpoints set once, in the environment, instead of on
    /// every command; a flag still wins, and a bad value names its variable.
    @Test("client commands take --broker, --events and --store from DARKROOM_BROKER, DARKROOM_EVENTS and DARKROOM_STORE")
    func endpointsFromTheEnvironment() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        let environment = ["DARKROOM_BROKER": h.frontend, "DARKROOM_EVENTS": h.events, "DARKROOM_STORE": h.store]
        let input = try h.writeImages(2)
        let submit = try DarkroomProcess.run(["submit", input.path, "--ops", "invert", "--wait"], environment: environment)
        #expect(submit.status == 0, "\(submit.stderr)")
        let ls = try DarkroomProcess.run(["ls", "--json"], environment: environment)
        #expect(SystemHarness.jsonLines(ls.stdout).count == 2, "\(ls.stderr)")
        // The command line wins over the environment.
        let flag = try DarkroomProcess.run(["status", "--broker", "tcp://127.0.0.1:1", "--timeout", "1"], environment: environment)
        #expect(flag.status == 1 && flag.stderr.contains("tcp://127.0.0.1:1"), "\(flag.stderr)")
        let bad = try DarkroomProcess.run(["status"], environment: ["DARKROOM_BROKER": "localhost:7700"])
        #expect(bad.status == 64 && bad.stderr.contains("DARKROOM_BROKER=localhost:7700 (for --broker): not an endpoint"), "\(bad.stderr)")
    }

    @Test("two workers started with one --id: the broker says the id is used by two processes, and so does each worker's log")
    func twoWorkersOneID() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let first = try h.start("first", ["worker", "--broker", h.backend, "--store", h.store, "--concurrency", "1", "--id", "twin"])
        try h.waitUntil("the first worker is ready") { h.log("broker").contains("worker twin ready") }
        let second = try h.start("second", ["worker", "--broker", h.backend, "--store", h.store, "--concurrency", "1", "--id", "twin"])
        try h.waitUntil("the broker names the clash", timeout: .seconds(60)) { h.log("broker").contains("worker id twin is used by two processes") }
        let line = h.log("broker").split(separator: "\n").first { $0.contains("is used by two processes") } ?? ""
        #expect(line.contains("pid \(first.processIdentifier)") && line.contains("pid \(second.processIdentifier)"), "\(line)")
        #expect(line.contains("give each worker its own --id"), "\(line)")
        // Each worker is told why with ERROR conflict, not only DISCONNECT.
        for name in ["first", "second"] {
            try h.waitUntil("\(name) logs the clash", timeout: .seconds(30)) {
                h.log(name).contains("broker answered ERROR conflict: worker id twin is used by two processes")
            }
        }
        // Then the id stays with one of them, which does the work (the two
        // used to take it from each other for good, and neither got a job);
        // the other is turned away and told why.
        try h.waitUntil("one worker is turned away", timeout: .seconds(30)) {
            (h.log("first") + h.log("second")).contains("is turned away while it is: give each worker its own --id")
        }
        let input = try h.writeImages(3)
        let submit = try h.run(["submit", input.path, "--ops", "invert", "--wait", "--deadline", "60"] + h.clientFlags)
        #expect(submit.status == 0, "\(submit.stderr)")
        #expect(submit.stdout.split(separator: "\n").filter { $0.hasPrefix("stored ") }.count == 3, "\(submit.stdout)")
    }

    @Test("a corrupt image goes to the dead-letter set with its reason; bad frames get an ERROR; nothing stops")
    func badInput() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        let input = try h.writeImages(2)
        // Passes the local header check but fails while decoding the scan.
        let good = [UInt8](try Data(contentsOf: input.appendingPathComponent("photo-000.jpg")))
        try Data(good.prefix(good.count * 2 / 3)).write(to: input.appendingPathComponent("broken.jpg"))

        let submit = try h.run(["submit", input.path, "--ops", "scale:64x64", "--wait"] + h.clientFlags)
        #expect(submit.status == 1)
        #expect(submit.stderr.contains("broken.jpg: decode: truncated"), "stderr: \(submit.stderr)")
        #expect(submit.stderr.contains("2 stored, 1 dead"))

        let dead = try h.run(["dead"] + h.brokerFlags)
        #expect(dead.status == 0)
        #expect(dead.stdout.contains("broken.jpg"))
        #expect(dead.stdout.contains("truncated"))
        // watch --kind and --job show just those of the events.
        let events = try h.allEvents()
        func shown(_ filter: [String], count: Int) throws -> [Int] {
            let watch = try h.run(["watch", "--from", "1", "--count", String(count), "--duration", "60", "--json"] + filter + h.clientFlags)
            #expect(watch.status == 0, "\(watch.stderr)")
            return SystemHarness.jsonLines(watch.stdout).compactMap { $0["seq"] as? Int }
        }
        let deadEvents = events.filter { ["dead", "stored"].contains($0["kind"] as? String ?? "") }
        #expect(deadEvents.count == 3)
        #expect(try shown(["--kind", "dead,stored"], count: deadEvents.count) == deadEvents.compactMap { $0["seq"] as? Int })
        let broken = try #require(events.first { ($0["source"] as? String ?? "").hasSuffix("broken.jpg") }?["job"] as? String)
        let itsEvents = events.filter { $0["job"] as? String == broken }
        #expect(itsEvents.count >= 3)
        #expect(try shown(["--job", broken], count: itsEvents.count) == itsEvents.compactMap { $0["seq"] as? Int })
        #expect(try h.run(["watch", "--kind", "deadd"] + h.clientFlags).status == 64)

        let discard = try h.run(["dead", "discard", "all", "--json"] + h.brokerFlags)
        #expect(discard.status == 0)
        #expect(SystemHarness.jsonLines(discard.stdout).first?["discarded"] as? Int == 1, "\(discard.stdout)")
        #expect(try h.run(["dead", "--json"] + h.brokerFlags).stdout.isEmpty)

        // Garbage and a wrong protocol version on the frontend: ERROR replies, broker unharmed.
        let context = try Context()
        let dealer = try context.socket(.dealer)
        try dealer.setReceiveTimeout(milliseconds: 5000)
        try dealer.connect(h.frontend)
        try dealer.send([Array("DRK9".utf8), [0x02]])
        let reply = try #require(try dealer.receive())
        #expect(reply.first == Wire.protocolID)
        #expect(reply.count >= 2 && reply[1] == [Command.error.rawValue])
        try dealer.send([[0xFF, 0x00, 0x13], [], [1, 2, 3]])
        try dealer.send([Wire.protocolID, [0x99]])
        let unknown = try #require(try dealer.receive())
        #expect(unknown[1] == [Command.error.rawValue])
        dealer.close()
        #expect(try h.run(["status", "--check"] + h.brokerFlags + h.storeFlags).status == 0)
        // The broker is still serving and the worker still works.
        let again = try h.run(["submit", input.appendingPathComponent("photo-001.jpg").path, "--ops", "invert", "--wait"] + h.clientFlags)
        #expect(again.status == 0)
    }

    @Test("jobs accepted before a broker restart are all processed after it")
    func brokerRestart() throws {
        let h = try SystemHarness()
        try h.startSystem()
        let input = try h.writeImages(3)
        let submit = try h.run(["submit", input.path, "--ops", "grayscale"] + h.clientFlags)
        #expect(submit.status == 0)
        // SIGTERM: a clean shutdown that keeps every accepted job.
        #expect(h.signal("broker", SIGTERM) == 0)
        try h.startBroker()
        try h.startWorker("w1")
        try h.waitUntil("the three jobs are stored") {
            SystemHarness.jsonLines(try h.run(["ls", "--json"] + h.storeFlags).stdout).count == 3
        }
        #expect(h.signal("w1", SIGTERM) == 0)
        #expect(h.signal("store", SIGTERM) == 0)
        #expect(h.signal("broker", SIGTERM) == 0)
    }
}
