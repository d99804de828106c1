import DarkroomImage
import Foundation
import Testing

/// A client command running in the background, its stdout and stderr in
/// files of their own, so a test can watch its output while it runs and
/// break things under it.
final class BackgroundClient {
    let process: Process
    let stdoutURL: URL
    let stderrURL: URL

    init(_ arguments: [String], name: String, in dir: TemporaryDirectory) throws {
        stdoutURL = dir.url.appendingPathComponent("\(name).stdout")
        stderrURL = dir.url.appendingPathComponent("\(name).stderr")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process = Process()
        process.executableURL = DarkroomProcess.executable
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    var stdout: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// Polls (every 5 ms, so a fast batch is caught mid-way) until
    /// `condition` holds for the output so far.
    func waitForOutput(_ what: String, timeout: Duration = .seconds(60), _ condition: (String) -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(stdout) { return }
            if !process.isRunning { throw HarnessError("the client exited (\(process.terminationStatus)) before \(what)\n\(stderr.suffix(2000))") }
            Thread.sleep(forTimeInterval: 0.005)
        }
        throw HarnessError("timed out waiting until \(what)\n\(stderr.suffix(2000))")
    }

    /// Waits for the command to exit and returns what it printed.
    func finish(timeout: Duration = .seconds(120)) throws -> DarkroomProcess.Output {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now >= deadline {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                throw HarnessError("the client did not exit within \(timeout)\n\(stderr.suffix(2000))")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return DarkroomProcess.Output(status: process.terminationStatus, stdout: stdout, stderr: stderr)
    }
}

extension FaultTests {
    /// The statuses an input ends with in `submit --json`; `accepted` is
    /// final only without --wait.
    static let finalStatuses: Set<String> = ["stored", "dead", "refused", "unanswered", "unfinished", "invalid"]

    /// How many queued jobs each start of the broker recovered, from its
    /// log ("recovered 27 queued job(s) and 0 leased job(s), …").
    static func recoveredCounts(_ h: SystemHarness) -> [Int] {
        h.logLines("broker", containing: "recovered ").compactMap { line in
            guard let range = line.range(of: "recovered ") else { return nil }
            return Int(line[range.upperBound...].split(separator: " ").first ?? "")
        }
    }

    /// A broker killed twice while `submit --wait` is still getting its
    /// inputs accepted, and started again on the same data each time. The
    /// submit resends what went unanswered with the same submit keys until
    /// the broker is back, says so once per outage, and then follows every
    /// job to the end: each input accepted once, stored once, printed once.
    @Test("submit --wait through two SIGKILLs of the broker while it accepts: every input accepted once, stored once, every result printed")
    func submitThroughBrokerKills() throws {
        let h = try SystemHarness()
        try h.startSystem()
        // Inputs of about 0.4 MB, each written to a file of its own by the
        // broker, two in flight at a time: an accept phase of a few seconds.
        let photo = try Fixtures.noisyJPEG(width: 800, height: 600, noise: 40, quality: 90)
        let total = 120
        let folder = try h.writeCopies(of: photo, total, name: "kill")
        let inputs = Set((0..<total).map { folder.appendingPathComponent(String(format: "kill-%03d.jpg", $0)).path })

        let started = ContinuousClock.now
        let submit = try BackgroundClient(["submit", folder.path, "--ops", "scale:64x64,mode=fill | crop:square", "--thumb", "32x32",
                                           "--wait", "--json", "--window", "2", "--timeout", "1"] + h.clientFlags, name: "submit", in: h.dir)
        func acceptedSoFar(_ out: String) -> Int { out.components(separatedBy: "\"status\":\"accepted\"").count - 1 }
        // No worker yet: each restart recovers exactly the jobs committed so far.
        var answeredAtKill: [Int] = []
        for (kill, threshold) in [(1, 25), (2, 65)] {
            try submit.waitForOutput("\(threshold) inputs are accepted before kill \(kill)") { acceptedSoFar($0) >= threshold }
            let answered = acceptedSoFar(submit.stdout)
            try #require(answered < total, "the accept phase ended before kill \(kill)")
            answeredAtKill.append(answered)
            #expect(h.signal("broker", SIGKILL) == SIGKILL)
            try h.startBroker()
        }
        try h.startWorker("kill-w1")
        try h.startWorker("kill-w2")
        let output = try submit.finish()
        let elapsed = ContinuousClock.now - started

        #expect(output.status == 0, "submit exited \(output.status): \(output.stderr.suffix(3000))")
        // The kills hit the accept phase: each restart found more jobs than
        // the last and fewer than all, and at least as many as had been answered.
        let recovered = Self.recoveredCounts(h)
        #expect(recovered.count == 2, "\(h.logLines("broker", containing: "recovered "))")
        if recovered.count == 2 {
            #expect(0 < recovered[0] && recovered[0] < recovered[1] && recovered[1] < total, "recovered \(recovered)")
            #expect(recovered[0] >= answeredAtKill[0] && recovered[1] >= answeredAtKill[1], "recovered \(recovered), answered \(answeredAtKill)")
        }
        // One line when the broker went, one when it came back, per outage.
        let stderrLines = output.stderr.split(separator: "\n")
        #expect(stderrLines.filter { $0.contains("not answering; resending") }.count == 2, "\(output.stderr)")
        #expect(stderrLines.filter { $0.hasPrefix("submit: broker back after ") }.count == 2, "\(output.stderr)")
        #expect(output.stderr.contains("\(total) input(s): \(total) stored, 0 dead, 0 refused, 0 never answered, 0 invalid"), "\(output.stderr)")

        // Every input: accepted once, then exactly one final object, stored.
        let lines = SystemHarness.jsonLines(output.stdout)
        let accepted = lines.filter { $0["status"] as? String == "accepted" }
        let finals = lines.filter { Self.finalStatuses.contains($0["status"] as? String ?? "") }
        #expect(accepted.count == total && Set(accepted.compactMap { $0["input"] as? String }) == inputs)
        #expect(finals.count == total && Set(finals.compactMap { $0["input"] as? String }) == inputs)
        #expect(finals.allSatisfy { $0["status"] as? String == "stored" && $0["record"] is String }, "\(finals.filter { $0["status"] as? String != "stored" })")
        let jobs = Set(accepted.compactMap { $0["job"] as? String })
        #expect(jobs.count == total)
        for final in finals {
            let input = final["input"] as? String
            #expect(accepted.first { $0["input"] as? String == input }?["job"] as? String == final["job"] as? String)
        }

        // The broker queued one job per input, and each was stored once.
        let events = EventLog(try h.allEvents())
        #expect(events.of("accepted").count == total, "\(events.of("accepted").count) accepted events for \(total) inputs")
        try Self.expectStoredOnce(jobs, h, events)
        let lost = zip(recovered, answeredAtKill).map { $0 - $1 }
        print("submit through 2 broker kills: \(total) inputs of \(photo.count) bytes in \(elapsed); killed at \(answeredAtKill) answered, "
              + "\(recovered) committed (\(lost) accepted but unanswered, answered on resend); \(output.stderr.split(separator: "\n").filter { $0.hasPrefix("submit:") })")
    }

    /// Thousands of tiny SUBMITs in flight while two workers store jobs,
    /// and the broker killed without warning twice in the middle: each
    /// turn then takes the workers' messages first and only part of the
    /// SUBMITs waiting, and its savepoints' journal is in memory. Every
    /// input is still accepted once and stored once, and every result
    /// printed.
    @Test("submit --wait of 5,000 tiny inputs with workers running, the broker killed with SIGKILL twice mid-flood: each input accepted once, stored once")
    func submitFloodThroughBrokerKills() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("flood-w1", 2), ("flood-w2", 2)])
        let tiny = try JPEG.encode(SamplePhoto.render(Size(width: 48, height: 32), seed: 5), options: EncodeOptions(quality: 80))
        // Enough that the accepts after the first restart outlast the test's
        // own turns on a loaded two-core machine (3,000 were once all
        // printed before it looked again).
        let total = 5_000
        let folder = try h.writeCopies(of: tiny, total, name: "flood")
        let inputs = Set((0..<total).map { folder.appendingPathComponent(String(format: "flood-%03d.jpg", $0)).path })

        let submit = try BackgroundClient(["submit", folder.path, "--ops", "grayscale", "--thumb", "16x16", "--wait", "--json",
                                           "--timeout", "1"] + h.clientFlags, name: "submit", in: h.dir)
        func count(_ status: String, _ out: String) -> Int { out.components(separatedBy: "\"status\":\"\(status)\"").count - 1 }
        var atKill: [(accepted: Int, stored: Int)] = []
        // The first kill waits for the workers to be storing; the second
        // only for more accepts: after a restart the producer's resends and
        // the rest of the flood can all be accepted before the workers are
        // back, and this kill must land while SUBMITs are still coming: soon
        // after the restart. The client is stopped (SIGSTOP) from the moment
        // its output is seen until the broker is back, so that the count
        // taken is where it stands when the broker dies, however late this
        // test gets the CPU on a loaded machine; the SUBMITs it has sent
        // and not seen answered die with the broker.
        for nth in [1, 2] {
            let threshold = nth == 1 ? 300 : atKill[0].accepted + 1
            try submit.waitForOutput("\(threshold) inputs are accepted\(nth == 1 ? " and some stored" : "") before kill \(nth)",
                                     timeout: .seconds(120)) {
                count("accepted", $0) >= threshold && (nth > 1 || count("stored", $0) > 0)
            }
            Glibc.kill(submit.process.processIdentifier, SIGSTOP)
            let out = submit.stdout
            atKill.append((count("accepted", out), count("stored", out)))
            try #require(atKill.last!.accepted < total, "the accept phase ended before kill \(nth)")
            #expect(h.signal("broker", SIGKILL) == SIGKILL)
            try h.startBroker()
            Glibc.kill(submit.process.processIdentifier, SIGCONT)
        }
        let output = try submit.finish()

        #expect(output.status == 0, "submit exited \(output.status): \(output.stderr.suffix(3000))")
        #expect(output.stderr.contains("\(total) input(s): \(total) stored, 0 dead, 0 refused, 0 never answered, 0 invalid"), "\(output.stderr.suffix(3000))")
        let lines = SystemHarness.jsonLines(output.stdout)
        let accepted = lines.filter { $0["status"] as? String == "accepted" }
        let finals = lines.filter { Self.finalStatuses.contains($0["status"] as? String ?? "") }
        #expect(accepted.count == total && Set(accepted.compactMap { $0["input"] as? String }) == inputs)
        #expect(finals.count == total && finals.allSatisfy { $0["status"] as? String == "stored" })
        let jobs = Set(accepted.compactMap { $0["job"] as? String })
        #expect(jobs.count == total)
        // What went otherwise, said before waiting for the records.
        let early = EventLog(try h.allEvents())
        let notStored = finals.filter { $0["status"] as? String != "stored" }.prefix(5)
        #expect(notStored.isEmpty && early.of("dead").isEmpty && early.of("failed").isEmpty,
                "not stored: \(notStored); dead: \(EventLog.describe(early.of("dead"))); failed: \(EventLog.describe(early.of("failed")))")
        try Self.waitForRecords(h, atLeast: total, timeout: .seconds(120))
        let events = EventLog(try h.allEvents())
        #expect(events.of("accepted").count == total, "\(events.of("accepted").count) accepted events for \(total) inputs")
        try Self.expectStoredOnce(jobs, h, events)
        print("submit flood through 2 broker kills: killed at \(atKill.map { "\($0.accepted) accepted, \($0.stored) stored" })")
    }

    /// The text output reads `stored` events in brief from live batches
    /// (job id and record id, not the texts) and whole from REPLAY. With
    /// the broker killed in the middle, a run sees both: every input still
    /// gets exactly one `stored JOB INPUT record ID` line, and each line's
    /// job and record are the ones the storage node holds for that job.
    @Test("submit --wait in text through a broker SIGKILL: one stored line per input, naming the record the store holds for its job")
    func submitTextLinesThroughBrokerKill() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("text-w1", 2)])
        let tiny = try JPEG.encode(SamplePhoto.render(Size(width: 40, height: 24), seed: 9), options: EncodeOptions(quality: 80))
        let total = 1_500
        let folder = try h.writeCopies(of: tiny, total, name: "text")
        let inputs = Set((0..<total).map { folder.appendingPathComponent(String(format: "text-%03d.jpg", $0)).path })

        let submit = try BackgroundClient(["submit", folder.path, "--ops", "grayscale", "--thumb", "16x16", "--wait", "--timeout", "1"]
                                          + h.clientFlags, name: "submit", in: h.dir)
        try submit.waitForOutput("some inputs are stored before the kill", timeout: .seconds(120)) {
            $0.components(separatedBy: "stored ").count - 1 >= 100
        }
        let storedAtKill = submit.stdout.components(separatedBy: "stored ").count - 1
        try #require(storedAtKill < total, "the run ended before the kill")
        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        try h.startBroker()
        let output = try submit.finish()

        #expect(output.status == 0, "submit exited \(output.status): \(output.stderr.suffix(3000))")
        // "JOB INPUT" as each is accepted, then "stored JOB INPUT record RECORD".
        var jobOfInput: [String: String] = [:]
        var recordOfJob: [String: String] = [:]
        var storedInputs: [String] = []
        for line in output.stdoutLines {
            let parts = line.split(separator: " ").map(String.init)
            if parts.count == 2 {
                #expect(jobOfInput[parts[1]] == nil, "\(parts[1]) accepted twice")
                jobOfInput[parts[1]] = parts[0]
            } else if parts.count == 5, parts[0] == "stored", parts[3] == "record" {
                #expect(recordOfJob[parts[1]] == nil, "job \(parts[1]) stored twice")
                #expect(jobOfInput[parts[2]] == parts[1], "\(parts[2]) stored as job \(parts[1]), accepted as \(jobOfInput[parts[2]] ?? "none")")
                recordOfJob[parts[1]] = parts[4]
                storedInputs.append(parts[2])
            } else {
                Issue.record("neither an accepted nor a stored line: \(line)")
            }
        }
        #expect(Set(jobOfInput.keys) == inputs)
        #expect(storedInputs.count == total && Set(storedInputs) == inputs)
        try Self.waitForRecords(h, atLeast: total, timeout: .seconds(120))
        let records = try h.records()
        let storeRecordOfJob = Dictionary(records.compactMap { r in (r["jobId"] as? String).map { ($0, r["id"] as? String ?? "") } },
                                          uniquingKeysWith: { a, _ in a })
        #expect(records.count == total)
        let mismatched = recordOfJob.filter { storeRecordOfJob[$0.key] != $0.value }
        #expect(mismatched.isEmpty, "\(mismatched.count) lines name another record than the store holds, e.g. \(mismatched.prefix(3))")
        print("submit text through a broker kill: \(total) inputs, killed at \(storedAtKill) stored; \(output.stderr.split(separator: "\n").filter { $0.hasPrefix("submit:") })")
    }

    /// A broker killed mid-batch that never comes back: `submit` keeps
    /// resending until the deadline, then names every input it got no
    /// answer for and exits 2. The inputs it printed as accepted are queued,
    /// and the only others the broker holds are ones it named as sent and
    /// maybe queued.
    @Test("submit against a broker that never comes back: the deadline ends it, the never-answered inputs are named, exit 2")
    func submitDeadlineWithoutBroker() throws {
        let h = try SystemHarness()
        try h.startBroker()
        let photo = try Fixtures.noisyJPEG(width: 800, height: 600, noise: 40, quality: 90)
        let total = 60
        let folder = try h.writeCopies(of: photo, total, name: "gone")
        let inputs = (0..<total).map { folder.appendingPathComponent(String(format: "gone-%03d.jpg", $0)).path }

        let submit = try BackgroundClient(["submit", folder.path, "--ops", "grayscale", "--window", "2", "--timeout", "1", "--deadline", "4"] + h.clientFlags,
                                          name: "submit", in: h.dir)
        try submit.waitForOutput("ten inputs are accepted") { $0.split(separator: "\n").count >= 10 }
        #expect(h.signal("broker", SIGKILL) == SIGKILL)
        let killed = ContinuousClock.now
        let output = try submit.finish()
        let afterKill = ContinuousClock.now - killed

        #expect(output.status == 2, "submit exited \(output.status): \(output.stderr.suffix(3000))")
        // The deadline counts from the last answer: four seconds, plus at
        // most one send timeout and the time to start and report.
        #expect(afterKill >= .milliseconds(3_500) && afterKill < .seconds(7), "ended \(afterKill) after the kill")

        // Every input is named once: accepted on stdout, or never answered on stderr.
        var acceptedInputs: [String: String] = [:]
        for line in output.stdoutLines {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            if parts.count == 2 { acceptedInputs[parts[1]] = parts[0] }
        }
        let stderrLines = output.stderr.split(separator: "\n").map(String.init)
        let maybeQueued = inputs.filter { input in
            stderrLines.contains { $0.hasPrefix("\(input): never answered (sent ") && $0.hasSuffix("; may or may not be queued)") }
        }
        let notSent = inputs.filter { stderrLines.contains("\($0): never answered (never sent; not queued)") }
        #expect(acceptedInputs.count >= 10)
        #expect(acceptedInputs.count + maybeQueued.count + notSent.count == total,
                "\(acceptedInputs.count) accepted, \(maybeQueued.count) sent, \(notSent.count) not sent\n\(output.stderr.suffix(3000))")
        #expect(Set(acceptedInputs.keys).union(maybeQueued).union(notSent) == Set(inputs))
        #expect(maybeQueued.count <= 2, "a window of 2, yet \(maybeQueued.count) in flight")
        let unanswered = total - acceptedInputs.count
        #expect(output.stderr.contains("\(total) input(s): \(acceptedInputs.count) accepted, 0 refused, \(unanswered) never answered, 0 invalid"),
                "\(output.stderr.suffix(1000))")
        #expect(stderrLines.filter { $0.contains("not answering; resending \(unanswered) submit(s) until the deadline") }.count == 1, "\(output.stderr)")
        #expect(!output.stderr.contains("broker back"))

        // Started again, the broker holds every job printed as accepted,
        // and of the others only ones named as maybe queued.
        try h.startBroker()
        let events = EventLog(try h.allEvents())
        let queued = Dictionary(events.of("accepted").map { ($0["source"] as? String ?? "", $0["job"] as? String ?? "") }, uniquingKeysWith: { a, _ in a })
        #expect(events.of("accepted").count == queued.count, "an input queued twice")
        for (input, job) in acceptedInputs { #expect(queued[input] == job, "\(input) printed as \(job), queued as \(queued[input] ?? "nothing")") }
        let extra = Set(queued.keys).subtracting(acceptedInputs.keys)
        #expect(extra.isSubset(of: Set(maybeQueued)), "queued yet reported never sent: \(extra.subtracting(maybeQueued))")
        print("submit against a broker gone for good: \(acceptedInputs.count) accepted, \(maybeQueued.count) sent and unanswered "
              + "(\(extra.count) of them queued), \(notSent.count) never sent; ended \(afterKill) after the kill")
    }

    /// Ctrl-C in the middle of `submit --wait` used to end it with no word:
    /// the ids of accepted jobs still in its stdout buffer were lost, though
    /// the jobs stay queued. Now the gathered lines go out, and one line
    /// says what became of the inputs, before SIGINT ends it as usual.
    @Test("submit --wait stopped by SIGINT prints the accepted job ids and what became of the inputs, and the jobs stay queued")
    func interruptedSubmitSaysWhatItLeaves() throws {
        let h = try SystemHarness()
        try h.startSystem()  // no worker: every job waits
        let input = try h.writeImages(5)
        let submit = try h.start("submit", ["submit", input.path, "--ops", "invert", "--wait"] + h.clientFlags, separateStderr: true)
        try h.waitUntil("the broker has accepted the five jobs") {
            let status = try JSONSerialization.jsonObject(with: Data(try h.run(["status", "--json"] + h.brokerFlags).stdout.utf8)) as? [String: Any]
            return ((status?["queue"] as? [String: Any])?["ready"] as? [Int])?.reduce(0, +) == 5
        }
        submit.interrupt()
        submit.waitUntilExit()
        #expect(submit.terminationReason == .uncaughtSignal && submit.terminationStatus == SIGINT, "\(h.errors("submit"))")
        let ids = h.log("submit").split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(ids.count == 5 && ids.allSatisfy { $0.count == 26 }, "\(h.log("submit"))")
        #expect(h.errors("submit").contains(
            "submit: stopped by SIGINT: 5 of 5 input(s) accepted (their job ids are above), 0 stored, 0 dead; the other 5 stay queued and run"),
                "\(h.errors("submit"))")
        for id in ids {
            let story = try h.run(["job", id, "--json"] + h.brokerFlags)
            #expect(story.stdout.contains("\"state\":\"queued\""), "\(story.stdout)")
        }
    }
}
