import DarkroomImage
import Foundation
import Testing

/// `darkroom submit --follow DIR` with real processes: a hot folder.
@Suite("Hot folder", .serialized)
struct FollowFolderTests {
    static func jpeg(seed: UInt64) throws -> Data {
        Data(try JPEG.encode(SamplePhoto.render(Size(width: 96, height: 64), seed: seed), options: EncodeOptions(quality: 85)))
    }

    static func stdout(_ h: SystemHarness, _ name: String) -> String {
        h.log(name)
    }

    /// A folder of `count` copies of one small JPEG.
    static func tinyFolder(_ h: SystemHarness, _ count: Int, seed: UInt64) throws -> URL {
        let tiny = try JPEG.encode(SamplePhoto.render(Size(width: 48, height: 32), seed: seed), options: EncodeOptions(quality: 80))
        return try h.writeCopies(of: tiny, count, name: "hot")
    }

    /// The storage node holds `count` records, one per file.
    static func expectOneRecordPerFile(_ h: SystemHarness, _ count: Int) throws {
        let records = SystemHarness.jsonLines(try h.run(["ls", "--all", "--json"] + h.storeFlags).stdout)
        #expect(records.count == count, "records: \(records.count)")
        #expect(Set(records.compactMap { $0["source"] as? String }).count == count, "one record per file")
    }

    /// How many jobs the broker accepted, from its event log.
    static func acceptedJobs(_ h: SystemHarness) throws -> Int {
        let events = SystemHarness.jsonLines(try h.run(["watch", "--from", "0", "--duration", "2", "--json"] + h.clientFlags).stdout)
        return events.filter { $0["kind"] as? String == "accepted" }.count
    }

    @Test("files copied or moved in are stored once; a half-written file waits for its close; a restart submits nothing twice")
    func hotFolder() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w", 2)])
        let hot = h.dir.url.appendingPathComponent("hot")
        try FileManager.default.createDirectory(at: hot, withIntermediateDirectories: true)
        try Self.jpeg(seed: 1).write(to: hot.appendingPathComponent("already-there.jpg"))
        let args = ["submit", "--follow", hot.path, "--ops", "invert", "--thumb", "32x32", "--json"] + h.clientFlags
        let follow = try h.start("follow", args, separateStderr: true)
        func records() throws -> [[String: Any]] {
            SystemHarness.jsonLines(try h.run(["ls", "--all", "--json"] + h.storeFlags).stdout)
        }
        try h.waitUntil("the file already there is stored") { try records().count == 1 }

        // Copied in (written in place, closed), and moved in from outside.
        for i in 2...4 { try Self.jpeg(seed: UInt64(i)).write(to: hot.appendingPathComponent("copied-\(i).jpg")) }
        let outside = h.dir.url.appendingPathComponent("moved.jpg")
        try Self.jpeg(seed: 5).write(to: outside)
        try FileManager.default.moveItem(at: outside, to: hot.appendingPathComponent("moved.jpg"))
        try "not a photo".write(to: hot.appendingPathComponent("notes.txt"), atomically: false, encoding: .utf8)

        // Half of a file, its writer still holding it open.
        let half = try Self.jpeg(seed: 6)
        let partPath = hot.appendingPathComponent("half.jpg").path
        #expect(FileManager.default.createFile(atPath: partPath, contents: nil))
        let writer = try FileHandle(forWritingTo: URL(fileURLWithPath: partPath))
        try writer.write(contentsOf: half.prefix(half.count / 2))
        try h.waitUntil("the copied and moved files are stored") { try records().count == 5 }
        #expect(!(try records()).contains { ($0["source"] as? String)?.hasSuffix("half.jpg") == true },
                "a file still being written is not submitted")
        try writer.write(contentsOf: half.suffix(from: half.count / 2))
        try writer.close()
        try h.waitUntil("the finished file is stored") { try records().count == 6 }

        // Each file once, each printed stored.
        let sources = try records().compactMap { $0["source"] as? String }
        #expect(Set(sources).count == 6, "\(sources)")
        #expect(Set(sources.map { URL(fileURLWithPath: $0).lastPathComponent })
                == ["already-there.jpg", "copied-2.jpg", "copied-3.jpg", "copied-4.jpg", "moved.jpg", "half.jpg"])
        try h.waitUntil("every result is printed") {
            SystemHarness.jsonLines(Self.stdout(h, "follow")).filter { $0["status"] as? String == "stored" }.count == 6
        }

        // SIGTERM stops it cleanly.
        kill(follow.processIdentifier, SIGTERM)
        follow.waitUntilExit()
        #expect(follow.terminationStatus == 0, "\(h.errors("follow"))")
        #expect(h.errors("follow").contains("stopped following"))

        // A restart submits nothing twice, and a new file once.
        let again = try h.start("follow-again", args, separateStderr: true)
        try Self.jpeg(seed: 7).write(to: hot.appendingPathComponent("new.jpg"))
        try h.waitUntil("the new file is stored") { try records().count == 7 }
        Thread.sleep(forTimeInterval: 1)
        kill(again.processIdentifier, SIGINT)
        again.waitUntilExit()
        #expect(again.terminationStatus == 0, "\(h.errors("follow-again"))")
        let accepted = SystemHarness.jsonLines(Self.stdout(h, "follow-again")).filter { $0["status"] as? String == "accepted" }
        #expect(accepted.compactMap { $0["input"] as? String }.map { URL(fileURLWithPath: $0).lastPathComponent } == ["new.jpg"])
        #expect(try records().count == 7)
        let events = SystemHarness.jsonLines(try h.run(["watch", "--from", "0", "--duration", "2", "--json"] + h.clientFlags).stdout)
        #expect(events.filter { $0["kind"] as? String == "accepted" }.count == 7,
                "one job per file: \(events.filter { $0["kind"] as? String == "accepted" }.compactMap { $0["source"] as? String })\n\(h.log("follow"))\n\(h.errors("follow"))")

        // Without its state file, the broker's submit keys still keep each file to one job.
        try FileManager.default.removeItem(at: hot.appendingPathComponent(".darkroom-follow"))
        let lost = try h.start("follow-lost", args, separateStderr: true)
        try h.waitUntil("every file is accounted for again") {
            SystemHarness.jsonLines(Self.stdout(h, "follow-lost")).filter { $0["status"] as? String == "stored" }.count == 7
        }
        kill(lost.processIdentifier, SIGTERM)
        lost.waitUntilExit()
        let after = SystemHarness.jsonLines(try h.run(["watch", "--from", "0", "--duration", "2", "--json"] + h.clientFlags).stdout)
        #expect(after.filter { $0["kind"] as? String == "accepted" }.count == 7, "still one job per file")
        #expect(try records().count == 7)
    }

    /// A writer that closes the file between chunks (a copy tool or a
    /// network share writing a part at a time) made each part a job, the
    /// first ones dead as truncated. A file now waits until it has gone
    /// unwritten for --settle; one already there (written long ago) goes
    /// at once, and --settle 0 is the old behaviour, part by part.
    @Test("a file written in chunks, closed between them, is one job once it settles; --settle 0 submits each part")
    func chunkedWriterSettles() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w", 1)])
        let photo = try Self.jpeg(seed: 9)
        func writeInChunks(_ url: URL) throws {
            #expect(FileManager.default.createFile(atPath: url.path, contents: nil))
            for part in 0..<4 {
                let handle = try FileHandle(forWritingTo: url)
                try handle.seekToEnd()
                try handle.write(contentsOf: photo[(photo.count * part / 4)..<(photo.count * (part + 1) / 4)])
                try handle.close()
                Thread.sleep(forTimeInterval: 0.15)
            }
        }
        func accepted(_ name: String) -> [String] {
            SystemHarness.jsonLines(Self.stdout(h, name)).filter { $0["status"] as? String == "accepted" }.compactMap { $0["input"] as? String }
        }

        let hot = h.dir.url.appendingPathComponent("hot")
        try FileManager.default.createDirectory(at: hot, withIntermediateDirectories: true)
        let old = hot.appendingPathComponent("old.jpg")
        try photo.write(to: old)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: old.path)
        let follow = try h.start("follow", ["submit", "--follow", hot.path, "--ops", "invert", "--json"] + h.clientFlags, separateStderr: true)
        try h.waitUntil("the file written long ago is accepted") { accepted("follow").count == 1 }
        try writeInChunks(hot.appendingPathComponent("chunked.jpg"))
        try h.waitUntil("the chunked file is stored") {
            SystemHarness.jsonLines(Self.stdout(h, "follow")).filter { $0["status"] as? String == "stored" }.count == 2
        }
        Thread.sleep(forTimeInterval: 1.5)
        kill(follow.processIdentifier, SIGTERM)
        follow.waitUntilExit()
        #expect(accepted("follow").map { URL(fileURLWithPath: $0).lastPathComponent } == ["old.jpg", "chunked.jpg"], "\(Self.stdout(h, "follow"))")
        #expect(!Self.stdout(h, "follow").contains("\"dead\""), "\(Self.stdout(h, "follow"))")

        // Without the wait, each close of a part is a new file to submit.
        let eager = h.dir.url.appendingPathComponent("eager")
        try FileManager.default.createDirectory(at: eager, withIntermediateDirectories: true)
        let zero = try h.start("zero", ["submit", "--follow", eager.path, "--settle", "0", "--ops", "invert", "--json"] + h.clientFlags,
                               separateStderr: true)
        Thread.sleep(forTimeInterval: 0.5)
        try writeInChunks(eager.appendingPathComponent("chunked.jpg"))
        try h.waitUntil("more than one part is accepted") { accepted("zero").count > 1 }
        kill(zero.processIdentifier, SIGTERM)
        zero.waitUntilExit()
    }

    /// A batch copied in goes out many SUBMITs at a time; the hot folder
    /// is SIGKILLed with some accepted, some sent and not yet answered, and
    /// the rest not read yet.
    @Test("a burst of 400 files, the hot folder SIGKILLed mid-burst and restarted: every file stored once, one job each")
    func burstThroughKill() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w", 2)])
        let hot = try Self.tinyFolder(h, 400, seed: 4)
        // The broker 100 ms a round trip away and 25 SUBMITs in flight at
        // most: the burst takes some 16 round trips, and the kill comes in
        // the middle of it.
        let link = try TCPProxy(to: SystemHarness.port(of: h.frontend), delay: .milliseconds(50))
        defer { link.stop() }
        let args = ["submit", "--follow", hot.path, "--ops", "grayscale", "--thumb", "16x16", "--json", "--window", "25",
                    "--broker", link.endpoint, "--events", h.events]
        func lines(_ name: String, _ status: String) -> [[String: Any]] {
            SystemHarness.jsonLines(Self.stdout(h, name)).filter { $0["status"] as? String == status }
        }
        let first = try h.start("burst", args, separateStderr: true)
        let deadline = ContinuousClock.now + .seconds(60)
        while lines("burst", "accepted").count < 20, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.02) }
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let acceptedBefore = lines("burst", "accepted").count
        #expect(acceptedBefore < 400, "the kill came after the burst")
        print("hot folder burst: \(acceptedBefore) of 400 accepted at the SIGKILL")

        let again = try h.start("burst-again", args, separateStderr: true)
        func records() throws -> [[String: Any]] {
            SystemHarness.jsonLines(try h.run(["ls", "--all", "--json"] + h.storeFlags).stdout)
        }
        try h.waitUntil("every file is stored", timeout: .seconds(120)) { try records().count >= 400 }
        Thread.sleep(forTimeInterval: 1)
        kill(again.processIdentifier, SIGTERM)
        again.waitUntilExit()
        #expect(again.terminationStatus == 0, "\(h.errors("burst-again"))")

        try Self.expectOneRecordPerFile(h, 400)
        #expect(try Self.acceptedJobs(h) == 400, "one job per file (\(acceptedBefore) accepted before the kill)")
        // The restart named the files the first run had not finished with;
        // none of those the first run recorded as accepted is taken again.
        let recorded = try String(contentsOf: hot.appendingPathComponent(".darkroom-follow"), encoding: .utf8)
            .split(separator: "\n").map { $0.split(separator: " ")[0] }
        #expect(recorded.count == Set(recorded).count, "the state file lists a file twice")
        #expect(Set(recorded).count == 400)
    }

    /// The broker is not there when the files land: the hot folder gives
    /// each burst up after --deadline and tries the files again, at
    /// growing intervals, until the broker answers.
    @Test("files that land while the broker is down are tried again until it answers, then stored once")
    func brokerDownThenUp() throws {
        let h = try SystemHarness()
        try h.startStore()
        try h.startWorker("w", concurrency: 2)
        let hot = try Self.tinyFolder(h, 30, seed: 5)
        let follow = try h.start("follow", ["submit", "--follow", hot.path, "--ops", "grayscale", "--thumb", "16x16", "--json",
                                            "--deadline", "1"] + h.clientFlags, separateStderr: true)
        try h.waitUntil("the first burst is given up", timeout: .seconds(30)) { h.errors("follow").contains("30 file(s) not accepted yet") }
        try h.waitUntil("a second try is given up", timeout: .seconds(30)) {
            h.errors("follow").components(separatedBy: "30 file(s) not accepted yet").count >= 3
        }
        #expect(h.errors("follow").contains("trying again in 2 s"), "\(h.errors("follow"))")
        #expect(!h.errors("follow").contains("not submitted"), "\(h.errors("follow"))")

        try h.startBroker()
        try h.waitUntil("every file is stored", timeout: .seconds(60)) {
            SystemHarness.jsonLines(Self.stdout(h, "follow")).filter { $0["status"] as? String == "stored" }.count == 30
        }
        kill(follow.processIdentifier, SIGTERM)
        follow.waitUntilExit()
        #expect(follow.terminationStatus == 0, "\(h.errors("follow"))")
        try Self.expectOneRecordPerFile(h, 30)
        #expect(try Self.acceptedJobs(h) == 30, "one job per file")
    }

    /// With the default --deadline (5 min), a stop during an outage waits
    /// only for the burst under way, which gives up after 10 s.
    @Test("a stop while the broker is down ends the hot folder; the files go at the next start, once")
    func stopDuringOutage() throws {
        let h = try SystemHarness()
        try h.startStore()
        try h.startWorker("w", concurrency: 2)
        let hot = try Self.tinyFolder(h, 5, seed: 6)
        let args = ["submit", "--follow", hot.path, "--ops", "grayscale", "--thumb", "16x16", "--json"] + h.clientFlags
        let follow = try h.start("follow", args, separateStderr: true)
        try h.waitUntil("the hot folder runs") { h.errors("follow").contains("following ") }
        Thread.sleep(forTimeInterval: 1)
        kill(follow.processIdentifier, SIGTERM)
        try h.waitUntil("the hot folder stops", timeout: .seconds(60)) { !follow.isRunning }
        #expect(follow.terminationStatus == 0, "\(h.errors("follow"))")
        #expect(h.errors("follow").contains("5 file(s) not accepted yet are submitted at the next start"), "\(h.errors("follow"))")
        #expect(!h.errors("follow").contains("were not stored"), "\(h.errors("follow"))")

        try h.startBroker()
        let again = try h.start("follow-again", args, separateStderr: true)
        try h.waitUntil("every file is stored") {
            SystemHarness.jsonLines(Self.stdout(h, "follow-again")).filter { $0["status"] as? String == "stored" }.count == 5
        }
        kill(again.processIdentifier, SIGTERM)
        again.waitUntilExit()
        try Self.expectOneRecordPerFile(h, 5)
    }

    @Test("--follow needs a directory and no inputs")
    func usage() throws {
        let h = try SystemHarness()
        #expect(try h.run(["submit", "--follow", h.dir.path("nowhere"), "--ops", "invert"]).status == 1)
        #expect(try h.run(["submit", "--follow", h.dir.url.path, "a.jpg", "--ops", "invert"]).status == 64)
        #expect(try h.run(["submit", "--ops", "invert"]).status == 64)
    }
}
