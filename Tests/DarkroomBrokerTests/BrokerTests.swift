import DarkroomBroker
import DarkroomPipeline
import DarkroomProtocol
import DarkroomSQLite
import DarkroomZMQ
import Foundation
import Testing

@Suite(.serialized) struct BrokerTests {
    // MARK: Accept

    @Test func acceptsOnlyAfterTheJobIsInTheDatabaseFile() throws {
        let harness = try Harness()
        let client = try harness.client()
        let accepted = try client.submitAccepted(priority: 3, source: "photo.jpg")
        #expect(accepted.eventSeq == 1)

        // A separate connection to the database file sees the committed job and its event.
        let db = try Connection(path: harness.directory + "/queue.sqlite")
        let rows = try db.query("SELECT state, priority, source, pipeline FROM jobs WHERE id = ?", accepted.jobID.description) {
            [$0.string(0) ?? "", "\($0.int64(1) ?? -1)", $0.string(2) ?? "", $0.string(3) ?? ""]
        }
        // The pipeline is kept in its canonical form.
        #expect(rows == [["queued", "3", "photo.jpg", try Pipeline(parsing: "crop:square").canonical]])
        let events = try db.query("SELECT seq, kind FROM events WHERE job_id = ?", accepted.jobID.description) {
            [$0.int64(0) ?? 0, $0.int64(1) ?? 0]
        }
        #expect(events == [[1, Int64(EventKind.accepted.rawValue)]])
        try db.close()
    }

    @Test func rejectsABadPipelineWithThePointerTextAndAnImageOfNoSourceFormat() throws {
        let harness = try Harness()
        let client = try harness.client()
        let reply = try client.submit(pipeline: "scale:2048x2048 | crpo:square")
        guard case .rejected(let rejected) = reply else { Issue.record("expected REJECTED, got \(reply)"); return }
        #expect(rejected.code == .invalidPipeline)
        #expect(rejected.reason.contains("crpo"))
        #expect(rejected.reason.contains("column"))

        let notJPEG = try client.submit(image: [0x89, 0x50, 0x4E, 0x47])
        guard case .rejected(let rejectedImage) = notJPEG else { Issue.record("expected REJECTED, got \(notJPEG)"); return }
        #expect(rejectedImage.code == .invalidImage)
        #expect(rejectedImage.reason.contains("not a JPEG, PNG, WebP, GIF, HEIF or TIFF"))
        let bmp = try client.submit(image: [0x42, 0x4D, 0x36, 0x00, 8, 0, 0, 0])
        guard case .rejected(let rejectedBMP) = bmp else { Issue.record("expected REJECTED, got \(bmp)"); return }
        #expect(rejectedBMP.code == .invalidImage)
        // An ISO media file whose brands are a video's, not HEIF's.
        let mp4 = try client.submit(image: [0, 0, 0, 24] + Array("ftypisom".utf8) + [0, 0, 2, 0] + Array("isommp41".utf8))
        guard case .rejected(let rejectedMP4) = mp4 else { Issue.record("expected REJECTED, got \(mp4)"); return }
        #expect(rejectedMP4.code == .invalidImage)
        #expect(try client.status().queue.depth == 0)

        // The broker looks at the signature only: a PNG's eight bytes,
        // RIFF, a size and WEBP, GIF89a, an ftyp box naming a HEIF brand
        // (as its major brand, or a compatible one), or a TIFF byte order
        // mark (little- or big-endian), are queued for a worker to decode.
        let png = try client.submit(image: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13])
        guard case .accepted = png else { Issue.record("expected ACCEPTED for a PNG, got \(png)"); return }
        let webp = try client.submit(image: Array("RIFF".utf8) + [4, 0, 0, 0] + Array("WEBP".utf8))
        guard case .accepted = webp else { Issue.record("expected ACCEPTED for a WebP, got \(webp)"); return }
        let gif = try client.submit(image: Array("GIF89a".utf8) + [1, 0, 1, 0])
        guard case .accepted = gif else { Issue.record("expected ACCEPTED for a GIF, got \(gif)"); return }
        let heic = try client.submit(image: [0, 0, 0, 24] + Array("ftypheic".utf8) + [0, 0, 0, 0] + Array("mif1heic".utf8))
        guard case .accepted = heic else { Issue.record("expected ACCEPTED for a HEIC, got \(heic)"); return }
        let avif = try client.submit(image: [0, 0, 0, 28] + Array("ftypMA1B".utf8) + [0, 0, 0, 0] + Array("iso8mif1avif".utf8))
        guard case .accepted = avif else { Issue.record("expected ACCEPTED for an AVIF by a compatible brand, got \(avif)"); return }
        let tiff = try client.submit(image: [0x49, 0x49, 0x2A, 0x00, 8, 0, 0, 0])
        guard case .accepted = tiff else { Issue.record("expected ACCEPTED for a TIFF, got \(tiff)"); return }
        let bigEndianTIFF = try client.submit(image: [0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8])
        guard case .accepted = bigEndianTIFF else { Issue.record("expected ACCEPTED for a big-endian TIFF, got \(bigEndianTIFF)"); return }
        #expect(try client.status().queue.depth == 7)
    }

    /// The parser's message quotes the bad token; a pipeline of 4096 bytes
    /// that is one unknown name made a reason over the 4096 bytes REJECTED
    /// may carry, and clients could not decode the reply.
    @Test func rejectsAPipelineOfTheLongestLengthWithAReasonThatFitsItsFrame() throws {
        let harness = try Harness()
        let client = try harness.client()
        let reply = try client.submit(pipeline: String(repeating: "a", count: Wire.Limit.pipelineBytes))
        guard case .rejected(let rejected) = reply else { Issue.record("expected REJECTED, got \(reply)"); return }
        #expect(rejected.code == .invalidPipeline)
        #expect(rejected.reason.utf8.count <= Wire.Limit.reasonBytes)
        #expect(rejected.reason.hasPrefix("invalid pipeline: unknown operation"))
    }

    @Test func aFullQueueRejectsWithQueueFull() throws {
        let harness = try Harness { $0.maxQueueDepth = 3 }
        let client = try harness.client()
        for _ in 0..<3 { _ = try client.submitAccepted() }
        let reply = try client.submit()
        guard case .rejected(let rejected) = reply else { Issue.record("expected REJECTED, got \(reply)"); return }
        #expect(rejected.code == .queueFull)
        #expect(rejected.reason.contains("queue is full"))
        #expect(try client.status().queue.depth == 3)
    }

    // MARK: Dispatch

    @Test func neverSendsMoreJobsThanTheCreditGiven() throws {
        let harness = try Harness()
        let client = try harness.client()
        for _ in 0..<5 { _ = try client.submitAccepted() }
        let worker = try harness.worker("w-credit")
        try worker.ready(credit: 2)
        let first = try worker.job()
        let second = try worker.job()
        #expect(first.jobID != second.jobID)
        #expect(try worker.next(within: 0.7) == nil)  // credit used up: no third JOB

        try worker.done(first)
        #expect(try worker.next(within: 0.5) == nil)  // DONE grants no credit
        try worker.send(.credit(Credit(count: 1)))
        let third = try worker.job()
        #expect(third.jobID != first.jobID && third.jobID != second.jobID)
        #expect(third.attempt == 1)
    }

    @Test func dispatchesHigherPriorityFirstAndFIFOWithinAPriority() throws {
        let harness = try Harness()
        let client = try harness.client()
        let low = try client.submitAccepted(priority: 0)
        let midFirst = try client.submitAccepted(priority: 5)
        let high = try client.submitAccepted(priority: 9)
        let midSecond = try client.submitAccepted(priority: 5)
        let worker = try harness.worker("w-priority")
        try worker.ready(credit: 0)
        var order: [ULID] = []
        for _ in 0..<4 {
            try worker.send(.credit(Credit(count: 1)))
            let job = try worker.job()
            order.append(job.jobID)
            try worker.done(job)
        }
        #expect(order == [high.jobID, midFirst.jobID, midSecond.jobID, low.jobID])
    }

    @Test func jobCarriesTheSubmittedBytesAndLargeInputsLiveInFilesUntilDone() throws {
        let harness = try Harness { $0.inputBlobThreshold = 1_024 }
        let client = try harness.client()
        let big = jpeg(size: 5_000, seed: 9)
        _ = try client.submitAccepted(image: big)
        let inputs = harness.directory + "/inputs"
        #expect(try FileManager.default.contentsOfDirectory(atPath: inputs).count == 1)

        let worker = try harness.worker("w-bytes")
        try worker.ready(credit: 1)
        let job = try worker.job()
        #expect(job.image == big)
        #expect(job.pipeline == (try Pipeline(parsing: "crop:square").canonical))
        try worker.done(job)
        _ = try client.waitForStatus("the job to finish") { $0.queue.inFlight == 0 }
        let deadline = Date().addingTimeInterval(10)
        while try !FileManager.default.contentsOfDirectory(atPath: inputs).isEmpty && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: inputs).isEmpty)
    }

    @Test func smallInputsAreKeptApartFromTheJobRowUntilDone() throws {
        let harness = try Harness()
        let client = try harness.client()
        let small = jpeg(size: 3_000, seed: 4)
        let accepted = try client.submitAccepted(image: small)
        let db = try Connection(path: harness.directory + "/queue.sqlite")
        defer { try? db.close() }
        let stored = try db.query("SELECT i.input FROM job_input i JOIN jobs j ON j.rowid = i.job WHERE j.id = ?", accepted.jobID.description) { $0.blob(0) ?? [] }
        #expect(stored == [small])
        let inRow = try db.query("SELECT input IS NULL FROM jobs WHERE id = ?", accepted.jobID.description) { $0.int64(0) ?? 0 }
        #expect(inRow == [1])

        let worker = try harness.worker("w-inline")
        try worker.ready(credit: 1)
        let job = try worker.job()
        #expect(job.image == small)
        try worker.done(job)
        _ = try client.waitForStatus("the job to finish") { $0.queue.inFlight == 0 }
        let left = try db.query("SELECT COUNT(*) FROM job_input") { $0.int64(0) ?? -1 }
        #expect(left == [0])
    }

    @Test func aJobCarriesItsOutputFlagsAndFormatsToTheWorkerFromMemoryAndAfterARestart() throws {
        let harness = try Harness()
        var client = try harness.client()
        let asked = [
            JobOptions(thumbnailWidth: 64, thumbnailHeight: 48, quality: 80, thumbnailQuality: 60, subsampling: .s420, progressive: true,
                       thumbnailGravity: .smart),
            JobOptions(thumbnailWidth: 256, thumbnailHeight: 256, quality: 95, thumbnailQuality: 70, subsampling: .s444,
                       thumbnailFormat: .webp),
            JobOptions(thumbnailWidth: 256, thumbnailHeight: 256, quality: 50, thumbnailQuality: 70, subsampling: .s422, progressive: true,
                       thumbnailGravity: .southwest, format: .webp),
        ]
        var ids = try asked.map { try client.submitAccepted(options: $0).jobID }
        // Leased at once: the payload the broker kept in memory.
        let worker = try harness.worker("w-flags")
        try worker.ready(credit: 3)
        var jobs = try [worker.job(), worker.job(), worker.job()]
        for job in jobs {
            #expect(job.options == asked[ids.firstIndex(of: job.jobID) ?? 0])
        }
        for job in jobs { try worker.done(job) }
        _ = try client.waitForStatus("all three done") { $0.queue.inFlight == 0 && $0.queue.depth == 0 }

        // Queued, then read back from the database by a restarted broker.
        ids = try asked.map { try client.submitAccepted(options: $0).jobID }
        let db = try Connection(path: harness.directory + "/queue.sqlite")
        let flags = try db.query("SELECT output_flags FROM jobs ORDER BY id") { $0.int64(0) ?? -1 }
        try db.close()
        // Byte 6 in bits 0–7 (the formats in its bits 3–6), byte 7 in bits 8–15.
        let expected: [Int64] = [7 | 9 << 8, 1 | 1 << 5, 6 | 1 << 3 | 8 << 8]
        #expect(flags == expected)
        try harness.restart()
        client = try harness.client()
        let again = try harness.worker("w-flags-2")
        try again.ready(credit: 3)
        jobs = try [again.job(), again.job(), again.job()]
        for job in jobs {
            #expect(job.options == asked[ids.firstIndex(of: job.jobID) ?? 0], "read back from the database")
        }
    }

    @Test func aScheduledJobWaitsDelayedUntilItsTimeThroughARestart() throws {
        let harness = try Harness()
        var client = try harness.client()
        let at = ULIDGenerator.systemMilliseconds() + 3_000
        let scheduled = try client.submitAccepted(priority: 9, notBefore: at).jobID
        let past = try client.submitAccepted(notBefore: 1_000).jobID
        let plain = try client.submitAccepted().jobID
        let worker = try harness.worker("w-scheduled")
        try worker.ready(credit: 3)
        // The two due jobs go at once, although the scheduled one has the highest priority.
        let first = try [worker.job(), worker.job()]
        #expect(Set(first.map(\.jobID)) == [past, plain])
        #expect(try worker.next(within: 0.5) == nil, "nothing before its time")
        var story = try client.story(scheduled)
        #expect(story.state == "delayed" && story.notBefore == at)
        #expect(try client.status().queue.delayed == 1)
        for job in first { try worker.done(job) }

        // Its time is in the database: a new broker keeps it waiting.
        try harness.restart()
        client = try harness.client()
        story = try client.story(scheduled)
        #expect(story.state == "delayed" && story.notBefore == at, "after a restart")
        let again = try harness.worker("w-scheduled-2")
        try again.ready(credit: 1)
        let job = try again.job(within: 20)
        #expect(job.jobID == scheduled)
        #expect(ULIDGenerator.systemMilliseconds() >= at, "not before its time")
    }

    @Test func pauseHoldsDispatchThroughARestartWhileRunningJobsFinishAndResumeLetsThemGo() throws {
        let harness = try Harness()
        var client = try harness.client()
        func pause(_ paused: Bool) throws -> UInt64 {
            let reply = try client.request { paused ? PauseRequest(requestID: $0).frames() : ResumeRequest(requestID: $0).frames() }
            guard case .ok(let ok) = reply else { throw TestFailure("expected OK, got \(reply)") }
            return ok.count
        }
        let running = try client.submitAccepted().jobID
        let worker = try harness.worker("w-pause")
        try worker.ready(credit: 1)
        let first = try worker.job()
        #expect(first.jobID == running)

        let before = ULIDGenerator.systemMilliseconds()
        #expect(try pause(true) == 1)
        #expect(try pause(true) == 0, "already paused")
        let since = try #require(try client.status().queue.pausedSince)
        #expect(since >= before && since <= ULIDGenerator.systemMilliseconds())
        let queued = try [client.submitAccepted().jobID, client.submitAccepted(priority: 9).jobID]
        // The running job finishes and is stored; nothing new goes out.
        try worker.done(first)
        try worker.send(.credit(Credit(count: 2)))
        #expect(try worker.next(within: 0.8) == nil, "no JOB while paused")
        #expect(try client.story(running).state == "stored")
        #expect(try client.status().queue.ready.reduce(0, +) == 2)

        // The pause is in the database: a new broker holds the jobs too.
        try harness.restart()
        client = try harness.client()
        #expect(try client.status().queue.pausedSince == since, "after a restart")
        let again = try harness.worker("w-pause-2")
        try again.ready(credit: 2)
        #expect(try again.next(within: 0.8) == nil, "no JOB while paused, after a restart")

        #expect(try pause(false) == 1)
        #expect(try pause(false) == 0, "already running")
        let sent = try [again.job(), again.job()]
        #expect(sent.map(\.jobID) == [queued[1], queued[0]], "highest priority first")
        #expect(try client.status().queue.pausedSince == nil)
    }

    @Test func aJobNotStartedByItsDeadlineEndsExpiredThroughARestartWhileARunningOneFinishes() throws {
        let harness = try Harness()
        var client = try harness.client()
        func waitForState(_ job: ULID, _ state: String) throws -> JobStory {
            let deadline = Date().addingTimeInterval(15)
            var story = try client.story(job)
            while story.state != state, Date() < deadline {
                Thread.sleep(forTimeInterval: 0.05)
                story = try client.story(job)
            }
            #expect(story.state == state, "\(job): \(story.state)")
            return story
        }
        func expiredEvent(_ story: JobStory) -> JobEvent? {
            story.events.last.flatMap { $0.kind == "cancelled" && $0.failure?.code == FailureDetail.Code.expired ? $0 : nil }
        }
        let now = ULIDGenerator.systemMilliseconds()
        let running = try client.submitAccepted(expires: now + 1_500).jobID
        let waiting = try client.submitAccepted(expires: now + 1_500).jobID
        let plain = try client.submitAccepted().jobID
        let worker = try harness.worker("w-deadline")
        try worker.ready(credit: 1)
        let first = try worker.job()
        #expect(first.jobID == running)
        #expect(try client.story(waiting).expires == now + 1_500, "a waiting job's story gives its deadline")

        // The waiting one passes its deadline: cancelled, with the reason.
        let expired = try waitForState(waiting, "cancelled")
        #expect(expiredEvent(expired) != nil, "\(expired.events)")
        #expect(expired.events.last?.failure?.reason.contains("not started by its deadline") == true)
        // The running one is not stopped: its DONE stores it.
        try worker.done(first)
        _ = try waitForState(running, "stored")

        // A job that fails after its deadline is requeued, then ends expired, never dispatched again.
        let failing = try client.submitAccepted(priority: 9, expires: ULIDGenerator.systemMilliseconds() + 800).jobID
        try worker.send(.credit(Credit(count: 1)))
        let attempt = try worker.job()
        #expect(attempt.jobID == failing)
        Thread.sleep(forTimeInterval: 1.0)
        try worker.fail(attempt, retryable: true)
        let failed = try waitForState(failing, "cancelled")
        #expect(failed.events.suffix(2).map(\.kind) == ["retrying", "cancelled"], "\(failed.events.map(\.kind))")
        #expect(expiredEvent(failed) != nil)
        try worker.send(.credit(Credit(count: 1)))
        #expect(try worker.job().jobID == plain, "the job without a deadline, not the expired one")

        // The deadline is in the database: a new broker expires the job too.
        let later = try client.submitAccepted(expires: ULIDGenerator.systemMilliseconds() + 2_000).jobID
        try harness.restart()
        client = try harness.client()
        #expect(try client.story(later).state == "queued", "before its deadline, after the restart")
        #expect(expiredEvent(try waitForState(later, "cancelled")) != nil)

        // DEAD-RETRY clears the deadline: a dead job past it runs when revived.
        let dying = try client.submitAccepted(maxAttempts: 1, expires: ULIDGenerator.systemMilliseconds() + 1_000).jobID
        let again = try harness.worker("w-deadline-2")
        try again.ready(credit: 1)
        let once = try again.job()
        #expect(once.jobID == dying)
        try again.fail(once, retryable: true)
        _ = try waitForState(dying, "dead")
        Thread.sleep(forTimeInterval: 1.0)
        guard case .ok = try client.request({ DeadRetry(requestID: $0, target: .job(dying)).frames() }) else {
            Issue.record("DEAD-RETRY did not answer OK")
            return
        }
        try again.send(.credit(Credit(count: 1)))
        #expect(try again.job().jobID == dying, "revived past its deadline, and run")
    }

    @Test func jobListGivesEachStateInItsOrderWithTotalsAndPages() throws {
        let harness = try Harness()
        let client = try harness.client()
        func list(_ state: JobListState, offset: UInt32 = 0, limit: UInt32 = 100) throws -> JobList {
            let reply = try client.request { JobListRequest(requestID: $0, state: state, offset: offset, limit: limit).frames() }
            guard case .jobListReply(let r) = reply else { throw TestFailure("expected JOB-LIST-REPLY, got \(reply)") }
            return r.list
        }
        let now = ULIDGenerator.systemMilliseconds()
        let low = try client.submitAccepted(priority: 1, source: "low.jpg").jobID
        let high = try client.submitAccepted(priority: 9, source: "high.jpg", expires: now + 60_000).jobID
        let mid = try [client.submitAccepted(priority: 5, source: "mid-a.jpg").jobID, client.submitAccepted(priority: 5, source: "mid-b.jpg").jobID]
        let later = try client.submitAccepted(source: "later.jpg", notBefore: now + 60_000).jobID
        let soon = try client.submitAccepted(source: "soon.jpg", notBefore: now + 30_000).jobID

        var queued = try list(.queued)
        #expect(queued.total == 4 && queued.offset == 0)
        #expect(try [high, mid[0], mid[1], low].map { try client.story($0).position } == [1, 2, 3, 4], "each job's place in line")
        #expect(try client.story(soon).position == nil, "a delayed job has no place in line")
        #expect(queued.jobs.map(\.jobID) == [high, mid[0], mid[1], low], "the order workers get them")
        #expect(queued.jobs.first?.expires == now + 60_000 && queued.jobs.last?.expires == nil)
        let page = try list(.queued, offset: 1, limit: 2)
        #expect(page.total == 4 && page.offset == 1 && page.jobs.map(\.jobID) == mid)
        #expect(try list(.queued, offset: 9).jobs.isEmpty)
        let delayed = try list(.delayed)
        #expect(delayed.jobs.map(\.jobID) == [soon, later], "soonest first")
        #expect(delayed.jobs.map(\.notBefore) == [now + 30_000, now + 60_000])

        let worker = try harness.worker("w-list")
        try worker.ready(credit: 2)
        let sent = try [worker.job(), worker.job()]
        #expect(sent.map(\.jobID) == [high, mid[0]])
        guard case .ok = try client.request({ CancelRequest(requestID: $0, target: .job(mid[0])).frames() }) else {
            throw TestFailure("CANCEL did not answer OK")
        }
        let running = try list(.running)
        #expect(running.total == 2)
        #expect(running.jobs.map(\.jobID) == [high, mid[0]].sorted())
        #expect(running.jobs.allSatisfy { $0.worker == "w-list" && $0.attempt == 1 })
        #expect(running.jobs.first { $0.jobID == mid[0] }?.cancelling == true)
        #expect(running.jobs.first { $0.jobID == high }?.cancelling == nil)
        queued = try list(.queued)
        #expect(queued.jobs.map(\.jobID) == [mid[1], low])
        #expect(try client.story(low).position == 2, "moved up as the jobs ahead left")
        #expect(try client.story(high).position == nil, "running")
    }

    @Test func jobListPagesFromACursorGoOnWhereTheLastEndedWhileTheQueueMoves() throws {
        let harness = try Harness()
        let client = try harness.client()
        func list(_ state: JobListState, limit: UInt32, after: JobListCursor? = nil) throws -> JobList {
            let reply = try client.request { JobListRequest(requestID: $0, state: state, limit: limit, after: after).frames() }
            guard case .jobListReply(let r) = reply else { throw TestFailure("expected JOB-LIST-REPLY, got \(reply)") }
            return r.list
        }
        let jobs = try (0..<6).map { try client.submitAccepted(priority: $0 < 3 ? 7 : 3, source: "job-\($0).jpg").jobID }
        let first = try list(.queued, limit: 2)
        #expect(first.jobs.map(\.jobID) == Array(jobs[0..<2]))
        #expect(first.jobs.map(\.cursor) == ["7-\(jobs[0])", "7-\(jobs[1])"])
        let cursor = try #require(first.jobs.last?.cursor.flatMap { JobListCursor($0, state: .queued) })

        // The first two are dispatched before the next page is asked for:
        // an offset of 2 would now skip two jobs; the cursor skips none.
        let worker = try harness.worker("w-cursor")
        try worker.ready(credit: 2)
        #expect(try [worker.job(), worker.job()].map(\.jobID) == Array(jobs[0..<2]))
        let second = try list(.queued, limit: 2, after: cursor)
        #expect(second.jobs.map(\.jobID) == Array(jobs[2..<4]), "from the priority 7 job after the cursor on, across priorities")
        #expect(second.offset == 0 && second.total == 4, "none of the queued jobs comes before the page now")
        // A job joining before the cursor's place is on no later page.
        let late = try client.submitAccepted(priority: 9, source: "late.jpg").jobID
        let third = try list(.queued, limit: 10, after: try #require(second.jobs.last?.cursor.flatMap { JobListCursor($0, state: .queued) }))
        #expect(third.jobs.map(\.jobID) == Array(jobs[4..<6]))
        #expect(third.offset == 3, "the new priority 9 job and the page before come first")
        #expect(try list(.queued, limit: 10).jobs.first?.jobID == late)

        // Running jobs page by job id.
        let running = try list(.running, limit: 1)
        let rest = try list(.running, limit: 5, after: .running(jobID: try #require(running.jobs.first?.jobID)))
        #expect((running.jobs + rest.jobs).map(\.jobID) == Array(jobs[0..<2]).sorted())
        #expect(rest.offset == 1)
    }

    @Test func aVersionOneQueueIsMigratedWithItsInputs() throws {
        let harness = try Harness()
        var client = try harness.client()
        let images = [jpeg(size: 2_000, seed: 7), jpeg(size: 3_500, seed: 8)]
        let ids = try images.map { try client.submitAccepted(image: $0).jobID }
        harness.broker.stop(grace: .seconds(1))
        harness.broker.wait()
        // Put the database back into the layout of schema version 1: inputs
        // keyed by job id, one index over (state, priority, id).
        let db = try Connection(path: harness.directory + "/queue.sqlite")
        try db.execute("""
            BEGIN;
            CREATE TABLE job_inputs (id TEXT PRIMARY KEY, input BLOB NOT NULL);
            INSERT INTO job_inputs SELECT j.id, i.input FROM job_input i JOIN jobs j ON j.rowid = i.job;
            DROP TABLE job_input;
            DROP INDEX jobs_open; DROP INDEX jobs_dead;
            CREATE INDEX jobs_dispatch ON jobs (state, priority DESC, id);
            ALTER TABLE jobs DROP COLUMN cancel_requested;
            ALTER TABLE jobs DROP COLUMN output_flags;
            ALTER TABLE jobs DROP COLUMN max_attempts;
            INSERT INTO jobs (id, priority, state, pipeline, thumb_width, thumb_height, quality, thumb_quality,
                              source, input_bytes, created, finished, record_id)
            VALUES ('01JBX3Z7Q8M4N6P2R5T9V0W1XY', 0, 'done', 'crop:square,gravity=center', 256, 256, 95, 70,
                    'old.jpg', 10, 1, 2, '01JBX3Z9A2B3C4D5E6F7G8H9JK');
            PRAGMA user_version = 1;
            COMMIT;
            """)
        try harness.restart()
        client = try harness.client()
        let worker = try harness.worker("w-migrated")
        try worker.ready(credit: 2)
        let jobs = try [worker.job(), worker.job()]
        #expect(Set(jobs.map(\.jobID)) == Set(ids))
        for job in jobs {
            #expect(job.image == images[ids.firstIndex(of: job.jobID) ?? 0])
            #expect(job.options == .default, "a job queued before output flags has none")
            #expect(job.timeLimit == nil, "a job queued before time limits has none")
        }
        let version = try db.query("PRAGMA user_version") { $0.int64(0) ?? 0 }
        #expect(version == [9], "the latest schema version")
        #expect(try db.query("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'settings'") { $0.int64(0) ?? -1 } == [1])
        for column in ["cancel_requested", "output_flags", "max_attempts", "expires", "time_limit"] {
            #expect(try db.query("SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = ?", column) { $0.int64(0) ?? -1 } == [1], "\(column)")
        }
        let objects = try db.query("SELECT name FROM sqlite_master WHERE name IN ('job_inputs', 'jobs_dispatch', 'job_input', 'jobs_open', 'jobs_dead') ORDER BY name") { $0.string(0) ?? "" }
        #expect(objects == ["job_input", "jobs_dead", "jobs_open"])
        // Version 1 kept stored jobs' rows; version 2 has none.
        #expect(try db.query("SELECT COUNT(*) FROM jobs WHERE state = 'done'") { $0.int64(0) ?? -1 } == [0])
        for job in jobs { try worker.done(job) }
        _ = try client.waitForStatus("both stored") { $0.queue.inFlight == 0 && $0.queue.depth == 0 }
        #expect(try db.query("SELECT COUNT(*) FROM job_input") { $0.int64(0) ?? -1 } == [0])
        #expect(try db.query("SELECT COUNT(*) FROM jobs") { $0.int64(0) ?? -1 } == [0])
        try db.close()
    }

    @Test func eachJOBCarriesItsJobsTimeLimitFromMemoryFromDiskAndAfterARetry() throws {
        let harness = try Harness()
        var client = try harness.client()
        let limited = try client.submitAccepted(timeLimit: 90).jobID
        let plain = try client.submitAccepted().jobID
        var worker = try harness.worker("w1")
        try worker.ready(credit: 2)
        // Taken from the inputs kept in memory since their accept.
        var jobs = Dictionary(uniqueKeysWithValues: try [worker.job(), worker.job()].map { ($0.jobID, $0) })
        #expect(jobs[limited]?.timeLimit == 90)
        #expect(jobs[plain]?.timeLimit == nil, "a job without a limit gets a JOB of 8 frames")
        try worker.fail(try #require(jobs[limited]), retryable: false)
        try worker.done(try #require(jobs[plain]))
        _ = try client.waitForStatus("one dead") { $0.queue.dead == 1 }

        // Revived after a restart, it is read from disk with its limit.
        try harness.restart()
        client = try harness.client()
        guard case .ok(let revived) = try client.request({ DeadRetry(requestID: $0, target: .job(limited)).frames() }) else {
            Issue.record("DEAD-RETRY was not answered OK")
            return
        }
        #expect(revived.count == 1)
        worker = try harness.worker("w2")
        try worker.ready(credit: 1)
        jobs = [limited: try worker.job()]
        #expect(jobs[limited]?.timeLimit == 90)
        #expect(jobs[limited]?.attempt == 2)
    }

    // MARK: Attempts and failures

    @Test func aStaleFailIsIgnoredButADoneFromAnEarlierAttemptCompletesTheJob() throws {
        let harness = try Harness()
        let client = try harness.client()
        let accepted = try client.submitAccepted()
        let worker = try harness.worker("w-retry")
        try worker.ready(credit: 1)
        let first = try worker.job()
        #expect(first.attempt == 1)
        try worker.fail(first, retryable: true, code: "store.unreachable", reason: "no STORED")
        try worker.send(.credit(Credit(count: 1)))
        let second = try worker.job()
        #expect(second.jobID == accepted.jobID)
        #expect(second.attempt == 2)

        // A FAIL for attempt 1 again is stale: attempt 2 runs on.
        try worker.fail(first, retryable: false, code: "image.corrupt", reason: "late")
        #expect(try client.status().queue.inFlight == 1)
        // A DONE from attempt 1 means the record is stored (DONE follows
        // STORED, and every attempt yields the same record): the job is done.
        let record = ULIDGenerator.shared.next()
        try worker.done(first, record: record)
        _ = try client.waitForStatus("the job to be stored") { $0.queue.inFlight == 0 }
        // Attempt 2's own DONE then finds the job finished.
        try worker.done(second)
        let (events, _) = try client.replay(from: 1)
        #expect(events.map(\.kind) == [.accepted, .started, .failed, .retrying, .started, .stored])
        let stored = try #require(events.last)
        #expect(stored.attempt == 1)
        #expect(stored.recordID == record)
        #expect(try client.status().queue.depth == 0)
    }

    @Test func nonRetryableFailureGoesDeadWithItsReason() throws {
        let harness = try Harness()
        let client = try harness.client()
        let accepted = try client.submitAccepted(source: "bad.jpg")
        let worker = try harness.worker("w-dead")
        try worker.ready(credit: 1)
        let job = try worker.job()
        try worker.fail(job, retryable: false, code: "image.invalid-argument", reason: "rectangle exceeds image 500x400",
                        stepIndex: 1, step: "crop:600x600+0+0")
        let status = try client.waitForStatus("the job to die") { $0.queue.dead == 1 }
        #expect(status.queue.inFlight == 0)
        let reply = try client.request { DeadListRequest(requestID: $0, limit: 10).frames() }
        guard case .deadListReply(let list) = reply else { Issue.record("expected DEAD-LIST-REPLY, got \(reply)"); return }
        #expect(list.list.total == 1)
        let dead = try #require(list.list.jobs.first)
        #expect(dead.jobID == accepted.jobID)
        #expect(dead.source == "bad.jpg")
        #expect(dead.stepIndex == 1)
        #expect(dead.step == "crop:600x600+0+0")
        #expect(dead.errorCode == "image.invalid-argument")
        #expect(dead.reason == "rectangle exceeds image 500x400")
        #expect(dead.attempts == 1)
    }

    @Test func retryableFailuresGoDeadAfterMaxAttempts() throws {
        let harness = try Harness { $0.maxAttempts = 2 }
        let client = try harness.client()
        _ = try client.submitAccepted()
        let worker = try harness.worker("w-max")
        try worker.ready(credit: 1)
        let first = try worker.job()
        try worker.fail(first, retryable: true)
        try worker.send(.credit(Credit(count: 1)))
        let second = try worker.job()
        #expect(second.attempt == 2)
        try worker.fail(second, retryable: true, reason: "still broken")
        let status = try client.waitForStatus("the job to die") { $0.queue.dead == 1 }
        #expect(status.queue.depth == 0)
    }

    @Test func aJobsOwnAttemptsOverrideTheBrokersThroughARestartAndARevival() throws {
        let harness = try Harness { $0.maxAttempts = 2 }
        var client = try harness.client()
        let once = try client.submitAccepted(source: "once.jpg", maxAttempts: 1).jobID
        let four = try client.submitAccepted(source: "four.jpg", maxAttempts: 4).jobID
        var worker = try harness.worker("w-own")
        try worker.ready(credit: 2)
        let first = try [worker.job(), worker.job()]
        for job in first { try worker.fail(job, retryable: true) }
        // 1 attempt: dead at its first retryable failure; 4: retried.
        _ = try client.waitForStatus("one dead, one retrying") { $0.queue.dead == 1 && $0.queue.depth == 1 }
        #expect(try client.story(once).state == "dead")
        try worker.send(.credit(Credit(count: 1)))
        let second = try worker.job()
        #expect(second.jobID == four && second.attempt == 2)
        try worker.fail(second, retryable: true)

        // The limit is in the database: a restarted broker still retries
        // the third failure, where its own limit of 2 would not.
        try harness.restart()
        client = try harness.client()
        worker = try harness.worker("w-own-2")
        try worker.ready(credit: 1)
        let third = try worker.job(within: 30)
        #expect(third.jobID == four && third.attempt == 3, "beyond the broker's 2")
        try worker.fail(third, retryable: true)
        try worker.send(.credit(Credit(count: 1)))
        let fourth = try worker.job(within: 30)
        #expect(fourth.jobID == four && fourth.attempt == 4, "retried after a restart")
        try worker.fail(fourth, retryable: true, reason: "still broken")
        _ = try client.waitForStatus("both dead") { $0.queue.dead == 2 }
        let story = try client.story(four)
        #expect(story.state == "dead" && story.attempts.count == 4, "\(story)")

        // A revived job keeps its own limit: one attempt, then dead again.
        let revived = try client.request { DeadRetry(requestID: $0, target: .job(once)).frames() }
        #expect(revived == .ok(OKReply(requestID: client.nextID - 1, count: 1)))
        try worker.send(.credit(Credit(count: 1)))
        let again = try worker.job()
        #expect(again.jobID == once)
        try worker.fail(again, retryable: true)
        _ = try client.waitForStatus("dead again after one attempt") { $0.queue.dead == 2 && $0.queue.depth == 0 }
    }

    @Test func aSilentWorkersJobsGoToAnotherWorkerWithTheNextAttempt() throws {
        let harness = try Harness {
            $0.heartbeatInterval = .milliseconds(100)
            $0.heartbeatLiveness = 3
        }
        let client = try harness.client()
        let accepted = try client.submitAccepted()
        let silent = try harness.worker("w-silent")
        try silent.ready(credit: 1)
        let lost = try silent.job()
        #expect(lost.attempt == 1)
        // `silent` now says nothing; a second worker takes over its job.
        let healthy = try harness.worker("w-healthy")
        try healthy.ready(credit: 1)
        let retried = try healthy.job()
        #expect(retried.jobID == accepted.jobID)
        #expect(retried.attempt == 2)
        try healthy.done(retried)
        let (events, _) = try client.replay(from: 1)
        let failed = events.first { $0.kind == .failed }
        #expect(failed?.failure?.code == "worker.lost")
        #expect(failed?.workerID == "w-silent")
        // The silent worker is forgotten: its next message gets DISCONNECT.
        try silent.send(.heartbeat)
        #expect(try silent.next(within: 10) == .disconnect)
    }

    @Test func disconnectRequeuesAtOnce() throws {
        let harness = try Harness()
        let client = try harness.client()
        let accepted = try client.submitAccepted()
        let leaving = try harness.worker("w-leaving")
        try leaving.ready(credit: 1)
        _ = try leaving.job()
        try leaving.send(.disconnect)
        let next = try harness.worker("w-next")
        try next.ready(credit: 1)
        let job = try next.job()
        #expect(job.jobID == accepted.jobID)
        #expect(job.attempt == 2)
    }

    // MARK: Events

    @Test func eventsAreGaplessAndReplayReturnsTheMissedOnes() throws {
        let harness = try Harness()
        let subscriber = try harness.subscriber()
        let client = try harness.client()
        // Wait until the subscription is live: PING does not help, so submit until an event arrives.
        var published: [Event] = []
        let deadline = Date().addingTimeInterval(10)
        while published.isEmpty && Date() < deadline {
            _ = try client.submitAccepted()
            published = try collectEvents(subscriber, count: 1)
        }
        #expect(!published.isEmpty)
        for _ in 0..<3 { _ = try client.submitAccepted() }
        let worker = try harness.worker("w-events")
        try worker.ready(credit: 10)
        for _ in 0..<2 { try worker.done(try worker.job()) }
        let status = try client.waitForStatus("two jobs stored") { $0.rates.stored * Double($0.rates.windowSeconds) >= 1.999 }
        let head = status.eventSeq
        let (all, end) = try client.replay(from: 1)
        #expect(all.map(\.seq) == Array(1...end.lastSeq))
        #expect(end.headSeq >= head)
        // Whatever the subscriber saw is the same as what REPLAY returns for those seqs.
        let firstSeen = try #require(published.first).seq
        published += try collectEvents(subscriber, count: Int(end.lastSeq - firstSeen + 1) - published.count)
        let seqs = published.map(\.seq)
        #expect(seqs == Array(firstSeen...end.lastSeq))
        for event in published {
            #expect(all.first { $0.seq == event.seq } == event)
        }
        // A REPLAY from the middle, in small pages.
        let (page, pageEnd) = try client.replay(from: 3, limit: 2)
        #expect(page.map(\.seq) == [3, 4])
        #expect(pageEnd.lastSeq == 4)
        #expect(pageEnd.headSeq == end.headSeq)
        // From past the head: nothing, last = from − 1.
        let (none, noneEnd) = try client.replay(from: end.headSeq + 1)
        #expect(none.isEmpty)
        #expect(noneEnd.lastSeq == end.headSeq)
    }

    @Test func eachEventFormGoesToItsSubscribersWithTheSameSeqs() throws {
        let harness = try Harness()
        let single = try harness.subscriber(Wire.eventTopic)
        let batched = try harness.subscriber(Wire.eventBatchTopic)
        let client = try harness.client()
        // Until both subscriptions are live, submit one job at a time.
        var warmup: [EventMessage] = [], warmupBatched: [EventMessage] = []
        var jobs = 0
        let deadline = Date().addingTimeInterval(10)
        while (warmup.isEmpty || warmupBatched.isEmpty) && Date() < deadline {
            _ = try client.submitAccepted()
            jobs += 1
            warmup += try collectMessages(single, events: 1)
            warmupBatched += try collectMessages(batched, events: 1)
        }
        let seenSingle = warmup.flatMap(\.events).map(\.seq).max() ?? 0
        let seenBatched = warmupBatched.flatMap(\.events).map(\.seq).max() ?? 0
        #expect(seenSingle > 0 && seenBatched > 0)
        // Ten more jobs, then a worker takes and stores them all: from the
        // first event both subscribers are sure to get, 10 accepted, then
        // a started and a stored for every job.
        for _ in 0..<10 { _ = try client.submitAccepted() }
        jobs += 10
        let worker = try harness.worker("w-forms", slots: UInt32(jobs))
        try worker.ready(credit: UInt32(jobs))
        for _ in 0..<jobs { try worker.done(try worker.job()) }
        let first = max(seenSingle, seenBatched) + 1
        let head = try client.waitForStatus("all stored") { $0.queue.inFlight == 0 && $0.queue.depth == 0 }.eventSeq
        let wanted = Array(first...head)
        #expect(wanted.count >= 10 + 2 * 10)

        let singles = try collectMessages(single, events: Int(head - seenSingle))
        let batches = try collectMessages(batched, events: Int(head - seenBatched))
        #expect(singles.allSatisfy { $0.command == .event }, "topic 'ev' gets only EVENT")
        #expect(batches.allSatisfy { $0.command == .events }, "topic 'eb' gets only EVENTS")
        let singleEvents = singles.flatMap(\.events).filter { $0.seq >= first }
        let batchedEvents = batches.flatMap(\.events).filter { $0.seq >= first }
        #expect(singleEvents.map(\.seq) == wanted)
        #expect(batchedEvents == singleEvents, "the same events, in the same order, either way")
        #expect(batches.count < singles.count, "batches carry several events per message")
        #expect(batchedEvents.filter { $0.kind == .stored }.count == jobs)
    }

    // MARK: Submit keys

    @Test func aSubmitKeyQueuesOneJobHoweverOftenItIsSent() throws {
        let harness = try Harness()
        var client = try harness.client()
        func submit(key: String?, requestID: UInt64) throws -> FrontendMessage {
            try client.request { _ in
                Submit(requestID: requestID, priority: 4, options: .default, pipeline: "crop:square", sourceName: "k.jpg",
                       image: jpeg(), submitKey: key).frames()
            }
        }
        guard case .accepted(let first) = try submit(key: "order-17-photo-3", requestID: 1),
              case .accepted(let again) = try submit(key: "order-17-photo-3", requestID: 2),
              case .accepted(let other) = try submit(key: "order-17-photo-4", requestID: 3),
              case .accepted(let keyless) = try submit(key: nil, requestID: 4) else {
            Issue.record("a SUBMIT was not accepted")
            return
        }
        #expect(again.requestID == 2)
        #expect(again.jobID == first.jobID && again.eventSeq == first.eventSeq)
        #expect(other.jobID != first.jobID && keyless.jobID != first.jobID)
        #expect(try client.status().queue.depth == 3)
        let (events, _) = try client.replay(from: 1)
        #expect(events.filter { $0.kind == .accepted }.count == 3)

        // The key outlives a restart.
        try harness.restart()
        client = try harness.client()
        guard case .accepted(let afterRestart) = try submit(key: "order-17-photo-3", requestID: 5) else {
            Issue.record("the resent SUBMIT was not accepted after a restart")
            return
        }
        #expect(afterRestart.jobID == first.jobID)
        #expect(try client.status().queue.depth == 3)

        // A key with a space is malformed, and nothing is queued for it.
        guard case .error(let bad) = try submit(key: "two words", requestID: 6) else {
            Issue.record("a bad submit key was not refused")
            return
        }
        #expect(bad.code == .malformed && bad.requestID == 6 && bad.reason.contains("submit key"))
    }

    // MARK: Retention

    @Test func storedJobsLeaveAtOnceAndEventsPastTheRetentionArePrunedButNotTheNewestOrTheDead() throws {
        let harness = try Harness {
            $0.retention = .milliseconds(400)
            $0.pruneInterval = .milliseconds(50)
        }
        var client = try harness.client()
        let stored = try client.submitAccepted()
        let dead = try client.submitAccepted()
        let worker = try harness.worker("w-prune")
        try worker.ready(credit: 2)
        let first = try worker.job()
        let second = try worker.job()
        try worker.done(first.jobID == stored.jobID ? first : second)
        try worker.fail(first.jobID == stored.jobID ? second : first, retryable: false)
        let status = try client.waitForStatus("one job dead") { $0.queue.dead == 1 }
        let head = status.eventSeq
        #expect(head >= 6)
        // The stored job's row went with its DONE (pruning only ever deletes
        // events and submit keys); the dead one stays.
        let early = try Connection(path: harness.directory + "/queue.sqlite")
        #expect(try early.query("SELECT state FROM jobs WHERE id = ?", stored.jobID.description) { $0.string(0) ?? "" } == [])
        #expect(try early.query("SELECT state FROM jobs WHERE id = ?", dead.jobID.description) { $0.string(0) ?? "" } == ["dead"])
        try early.close()

        // Everything but the newest event goes once it is older than the retention.
        var kept: [Event] = []
        let deadline = Date().addingTimeInterval(10)
        repeat {
            Thread.sleep(forTimeInterval: 0.1)
            kept = try client.replay(from: 1).0
        } while kept.first?.seq != head && Date() < deadline
        #expect(kept.map(\.seq) == [head])
        let db = try Connection(path: harness.directory + "/queue.sqlite")
        let jobs = try db.query("SELECT id, state FROM jobs") { [$0.string(0) ?? "", $0.string(1) ?? ""] }
        #expect(jobs == [[dead.jobID.description, "dead"]])
        try db.close()

        // Sequence numbers carry on from the kept event after a restart.
        try harness.restart()
        client = try harness.client()
        #expect(try client.submitAccepted().eventSeq == head + 1)
    }

    // MARK: Restart

    @Test func afterARestartALeasedJobWaitsForItsWorkerWhichReclaimsItUncounted() throws {
        let harness = try Harness()
        var client = try harness.client()
        let leasedJob = try client.submitAccepted(priority: 9)
        let queuedJob = try client.submitAccepted(priority: 0)
        let worker = try harness.worker("w-restart")
        try worker.ready(credit: 1)
        let running = try worker.job()
        #expect(running.jobID == leasedJob.jobID)
        let headBefore = try client.status().eventSeq

        try harness.restart()
        client = try harness.client()
        let status = try client.status()
        #expect(status.queue.depth == 1)
        #expect(status.queue.inFlight == 1, "the leased job is held for its worker, not requeued")
        #expect(try client.replay(from: headBefore + 1).0.isEmpty)

        // The worker comes back on a new connection, says it still runs
        // the job, and has room for one more.
        let back = try harness.worker("w-restart", slots: 2)
        try back.send(.ready(Ready(workerID: "w-restart", host: "test-host", pid: 4242, slots: 2)))
        try back.send(.holding(Holding(jobs: [.init(jobID: running.jobID, attempt: running.attempt)])))
        try back.send(.credit(Credit(count: 1)))
        let next = try back.job()
        #expect(next.jobID == queuedJob.jobID)
        #expect(next.attempt == 1)
        try back.done(running)
        try back.done(next)
        _ = try client.waitForStatus("both jobs to be stored") { $0.queue.inFlight == 0 && $0.queue.depth == 0 }
        let (events, _) = try client.replay(from: headBefore + 1)
        #expect(events.map(\.kind) == [.started, .stored, .stored])
        #expect(events.filter { $0.kind == .stored }.map(\.attempt) == [1, 1])
        #expect(!events.contains { $0.kind == .failed || $0.kind == .retrying })
    }

    @Test func aHeldJobWhoseWorkerDoesNotComeBackIsRequeuedAsLostAfterTheWindow() throws {
        let harness = try Harness { $0.reclaimWindow = .milliseconds(300) }
        var client = try harness.client()
        let job = try client.submitAccepted()
        let worker = try harness.worker("w-gone")
        try worker.ready(credit: 1)
        _ = try worker.job()
        let headBefore = try client.status().eventSeq

        try harness.restart()
        client = try harness.client()
        let other = try harness.worker("w-other")
        try other.ready(credit: 1)
        let again = try other.job(within: 5)
        #expect(again.jobID == job.jobID)
        #expect(again.attempt == 2)
        let (events, _) = try client.replay(from: headBefore + 1)
        #expect(events.map(\.kind) == [.failed, .retrying, .started])
        #expect(events.first?.failure?.code == FailureDetail.Code.workerLost)
        #expect(events.first?.failure?.reason.contains("w-gone") == true)
    }

    @Test func aWorkerThatComesBackWithoutItsJobGetsItRequeuedWithoutCountingTheAttempt() throws {
        let harness = try Harness { $0.maxAttempts = 1 }
        var client = try harness.client()
        let job = try client.submitAccepted()
        let worker = try harness.worker("w-forgot")
        try worker.ready(credit: 1)
        let first = try worker.job()
        try harness.restart()
        client = try harness.client()

        // Back on a new connection, holding nothing: the job goes back at
        // once, and the attempt it lost is not counted.
        let back = try harness.worker("w-forgot")
        try back.ready(credit: 1)
        let second = try back.job()
        #expect(second.jobID == job.jobID)
        #expect(second.attempt == first.attempt + 1)
        // With one attempt allowed, a retryable failure now is the job's first counted one.
        try back.fail(second, retryable: true, code: "store.unreachable", reason: "no STORED")
        let dead = try client.waitForStatus("the job to be dead") { $0.queue.dead == 1 }
        #expect(dead.queue.inFlight == 0)
        let (events, _) = try client.replay(from: 1)
        let retrying = try #require(events.first { $0.kind == .retrying })
        #expect(retrying.failure?.code == FailureDetail.Code.workerReconnected)
        #expect(retrying.failure?.reason.contains("not counted") == true)
        #expect(events.last?.kind == .dead)
        #expect(events.last?.failure?.reason.contains("gave up after 1 attempt(s)") == true)
    }

    @Test func aDoneFromAConnectionTheBrokerDoesNotKnowCountsAndIsAnsweredDisconnect() throws {
        let harness = try Harness()
        var client = try harness.client()
        let job = try client.submitAccepted()
        let worker = try harness.worker("w-late")
        try worker.ready(credit: 1)
        let running = try worker.job()
        try harness.restart()
        client = try harness.client()

        // The result arrives on a connection that never sent READY (as a
        // worker's queued DONE does when its socket reconnects by itself).
        let stranger = try harness.worker("w-late")
        try stranger.done(running)
        let reply = try stranger.next(within: 5)
        #expect(reply == .disconnect)
        _ = try client.waitForStatus("the job to be stored") { $0.queue.inFlight == 0 }
        let (events, _) = try client.replay(from: 1)
        #expect(events.last?.kind == .stored)
        #expect(events.last?.jobID == job.jobID)
        #expect(events.last?.attempt == 1)
    }

    @Test func aJobHandedBackByAStoppingWorkerGoesToAnotherWorkerUncounted() throws {
        let harness = try Harness { $0.maxAttempts = 1 }
        let client = try harness.client()
        let job = try client.submitAccepted()
        let stopping = try harness.worker("w-stopping")
        try stopping.ready(credit: 2)
        let first = try stopping.job()
        try stopping.fail(first, retryable: true, code: FailureDetail.Code.workerShutdown, reason: "worker is shutting down")
        // It still has credit, but it is stopping: the job must go elsewhere.
        #expect(try stopping.next(within: 0.5) == nil)
        let other = try harness.worker("w-other")
        try other.ready(credit: 1)
        let second = try other.job()
        #expect(second.jobID == job.jobID)
        #expect(second.attempt == 2)
        try other.done(second)
        _ = try client.waitForStatus("the job to be stored") { $0.queue.inFlight == 0 }
        let (events, _) = try client.replay(from: 1)
        #expect(events.map(\.kind) == [.accepted, .started, .retrying, .started, .stored])
        #expect(events[2].failure?.code == FailureDetail.Code.workerShutdown)
        #expect(try client.status().queue.dead == 0)
    }

    @Test func holdingRightAfterReadyIsAcceptedEvenWithNothingHeldButNotLater() throws {
        let harness = try Harness()
        let client = try harness.client()
        let accepted = try client.submitAccepted()
        // A worker whose held jobs were all finished meanwhile (their DONEs
        // came on its old connection) still sends HOLDING after READY.
        let worker = try harness.worker("w-holding")
        try worker.send(.ready(Ready(workerID: "w-holding", host: "test-host", pid: 4242, slots: 2)))
        try worker.send(.holding(Holding(jobs: [.init(jobID: ULIDGenerator.shared.next(), attempt: 1)])))
        try worker.send(.credit(Credit(count: 1)))
        let job = try worker.job()
        #expect(job.jobID == accepted.jobID)
        #expect(job.attempt == 1)
        // A HOLDING anywhere else is refused.
        try worker.send(.holding(Holding(jobs: [])))
        guard case .error(let refusal) = try worker.next(within: 5) else { throw TestFailure("expected ERROR") }
        #expect(refusal.code == .unexpectedCommand)
    }

    @Test func aWorkerOnANewConnectionKeepsTheJobsItSaysItHolds() throws {
        let harness = try Harness()
        let client = try harness.client()
        _ = try client.submitAccepted()
        _ = try client.submitAccepted()
        let worker = try harness.worker("w-hop", slots: 2)
        try worker.ready(credit: 2)
        let a = try worker.job()
        let b = try worker.job()
        // A new connection (the worker thought the broker silent): READY,
        // then HOLDING names one of its two jobs.
        let again = try harness.worker("w-hop", slots: 2)
        try again.send(.ready(Ready(workerID: "w-hop", host: "test-host", pid: 4242, slots: 2)))
        try again.send(.holding(Holding(jobs: [.init(jobID: a.jobID, attempt: a.attempt)])))
        try again.send(.credit(Credit(count: 1)))
        // The one it dropped comes back to it as the next attempt.
        let resent = try again.job()
        #expect(resent.jobID == b.jobID)
        #expect(resent.attempt == b.attempt + 1)
        // The old connection is forgotten: its heartbeat is answered DISCONNECT.
        try worker.send(.heartbeat)
        #expect(try worker.next(within: 5) == .disconnect)
        try again.done(a)
        try again.done(resent)
        _ = try client.waitForStatus("both jobs to be stored") { $0.queue.inFlight == 0 && $0.queue.depth == 0 }
        let (events, _) = try client.replay(from: 1)
        #expect(events.filter { $0.kind == .failed }.isEmpty)
        #expect(events.filter { $0.kind == .retrying }.map(\.failure?.code) == [FailureDetail.Code.workerReconnected])
    }

    // MARK: Dead letters

    @Test func deadLetterListRetryAndDiscard() throws {
        let harness = try Harness()
        let client = try harness.client()
        let a = try client.submitAccepted(source: "a.jpg")
        let b = try client.submitAccepted(source: "b.jpg")
        let worker = try harness.worker("w-dlq")
        try worker.ready(credit: 2)
        for _ in 0..<2 { try worker.fail(try worker.job(), retryable: false, code: "image.corrupt", reason: "not a JPEG") }
        _ = try client.waitForStatus("two dead jobs") { $0.queue.dead == 2 }

        let page = try client.request { DeadListRequest(requestID: $0, limit: 1).frames() }
        guard case .deadListReply(let first) = page else { Issue.record("expected DEAD-LIST-REPLY, got \(page)"); return }
        #expect(first.list.total == 2)
        #expect(first.list.jobs.map(\.jobID) == [a.jobID])
        let rest = try client.request { DeadListRequest(requestID: $0, limit: 10, after: a.jobID).frames() }
        guard case .deadListReply(let second) = rest else { Issue.record("expected DEAD-LIST-REPLY, got \(rest)"); return }
        #expect(second.list.jobs.map(\.jobID) == [b.jobID])

        let retried = try client.request { DeadRetry(requestID: $0, target: .job(a.jobID)).frames() }
        #expect(retried == .ok(OKReply(requestID: client.nextID - 1, count: 1)))
        try worker.send(.credit(Credit(count: 1)))
        let revived = try worker.job()
        #expect(revived.jobID == a.jobID)
        #expect(revived.attempt == 2)

        let discarded = try client.request { DeadDiscard(requestID: $0, target: .all).frames() }
        #expect(discarded == .ok(OKReply(requestID: client.nextID - 1, count: 1)))
        let missing = try client.request { DeadRetry(requestID: $0, target: .job(b.jobID)).frames() }
        guard case .error(let error) = missing else { Issue.record("expected ERROR, got \(missing)"); return }
        #expect(error.code == .notFound)
        #expect(error.requestID == client.nextID - 1)
        let empty = try client.request { DeadRetry(requestID: $0, target: .all).frames() }
        #expect(empty == .ok(OKReply(requestID: client.nextID - 1, count: 0)))

        let (events, _) = try client.replay(from: 1)
        #expect(events.filter { $0.kind == .revived }.map(\.jobID) == [a.jobID])
        #expect(events.filter { $0.kind == .discarded }.map(\.jobID) == [b.jobID])
    }

    // MARK: Bad input

    @Test func malformedMessagesGetErrorAndTheBrokerKeepsAnswering() throws {
        let harness = try Harness()
        let client = try harness.client()

        try client.send([Array("DRK2".utf8), [0x02], [0, 0, 0, 0, 0, 0, 0, 1]])
        guard case .error(let version) = try client.receive() else { Issue.record("expected ERROR"); return }
        #expect(version.code == .badVersion)
        #expect(version.reason.contains("DRK1"))

        try client.send([Wire.protocolID, [0x7F], [0, 0, 0, 0, 0, 0, 0, 2]])
        guard case .error(let unknown) = try client.receive() else { Issue.record("expected ERROR"); return }
        #expect(unknown.code == .unknownCommand)

        // SUBMIT with a frame missing: malformed, and the error carries the request id.
        try client.send([Wire.protocolID, [Command.submit.rawValue], [0, 0, 0, 0, 0, 0, 0, 7], [0]])
        guard case .error(let malformed) = try client.receive() else { Issue.record("expected ERROR"); return }
        #expect(malformed.code == .malformed)
        #expect(malformed.requestID == 7)

        // A worker command on the frontend.
        try client.send(BackendMessage.heartbeat.frames())
        guard case .error(let unexpected) = try client.receive() else { Issue.record("expected ERROR"); return }
        #expect(unexpected.code == .unexpectedCommand)

        // Garbage on the backend is answered there too.
        let worker = try harness.worker("w-bad")
        try worker.socket.send([[0xDE, 0xAD]])
        guard case .error(let backendError) = try worker.next(within: 10) else { Issue.record("expected ERROR"); return }
        #expect(backendError.code == .badVersion)

        let pong = try client.request { Ping(requestID: $0).frames() }
        #expect(pong == .pong(Pong(requestID: client.nextID - 1)))
    }

    /// Subscriptions are prefixes (section 8): `e` takes both forms, a
    /// topic the broker never publishes under gets nothing, and a
    /// subscription over 4 KiB gets its connection dropped.
    @Test func theEventsSocketMatchesPrefixesAndTakesNoHugeSubscription() throws {
        let harness = try Harness()
        let batches = try harness.subscriber(Wire.eventBatchTopic)
        let foreign = try harness.subscriber(Array("zz".utf8))
        let prefix = try harness.subscriber(Array("e".utf8))
        // A long subscription: the socket reads at most 4 KiB of one.
        // (libzmq's own SUB keeps a subscription as a trie one level per
        // byte, freed recursively: a client of megabytes overflows its
        // own stack, so a test in this process stays at a few kilobytes.)
        let huge = try harness.subscriber([UInt8](repeating: 0x65, count: 4_096))
        Thread.sleep(forTimeInterval: 0.3)
        let client = try harness.client()
        let accepted = try client.submitAccepted()
        let events = try collectEvents(batches, count: 1)
        #expect(events.map(\.kind) == [.accepted])
        var forms: Set<[UInt8]> = []
        while let frames = try prefix.receive() {
            #expect(try EventMessage.decode(frames).events.contains { $0.jobID == accepted.jobID })
            if let topic = frames.first { forms.insert(topic) }
        }
        #expect(forms == [Wire.eventTopic, Wire.eventBatchTopic])
        for socket in [foreign, huge] {
            #expect(try socket.receive() == nil)
        }
        #expect(try client.request { Ping(requestID: $0).frames() } == .pong(Pong(requestID: client.nextID - 1)))
    }

    /// Subscribers to each form, receiving: one job at a time is submitted
    /// until both have an event.
    private func liveSubscribers(_ harness: Harness, _ client: Client) throws -> (single: Socket, batched: Socket) {
        let single = try harness.subscriber(Wire.eventTopic)
        let batched = try harness.subscriber(Wire.eventBatchTopic)
        var got = (single: false, batched: false)
        let deadline = Date().addingTimeInterval(10)
        while !(got.single && got.batched), Date() < deadline {
            _ = try client.submitAccepted()
            got.single = try got.single || !collectMessages(single, events: 1).isEmpty
            got.batched = try got.batched || !collectMessages(batched, events: 1).isEmpty
        }
        try #require(got.single && got.batched, "the subscribers never received an event")
        return (single, batched)
    }

    /// Whether each subscriber gets the events of one more job.
    private func bothReceive(_ subscribers: (single: Socket, batched: Socket), _ client: Client) throws -> (single: Bool, batched: Bool) {
        let job = try client.submitAccepted().jobID
        func got(_ socket: Socket) throws -> Bool {
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                guard let frames = try socket.receive() else { continue }
                if try EventMessage.decode(frames).events.contains(where: { $0.jobID == job }) { return true }
            }
            return false
        }
        return (try got(subscribers.single), try got(subscribers.batched))
    }

    /// libzmq takes a later frame of a message that starts with 1 for a
    /// subscription too, and unsubscribes it when the peer goes. The broker
    /// read only the first frame, so that unsubscribe took away another
    /// subscriber's subscription.
    @Test func aPeerThatSubscribedInALaterFrameAndLeftStopsNoOnesEvents() throws {
        let harness = try Harness()
        let client = try harness.client()
        let subscribers = try liveSubscribers(harness, client)
        for topic in [Wire.eventTopic, Wire.eventBatchTopic] {
            let peer = try harness.context.socket(.xsub)
            try peer.setLinger(milliseconds: 0)
            try peer.connect(harness.endpoint("events"))
            try peer.send([[0x02], [0x01] + topic])
            Thread.sleep(forTimeInterval: 0.3)
            peer.close()
        }
        Thread.sleep(forTimeInterval: 0.5)
        let got = try bothReceive(subscribers, client)
        #expect(got.single)
        #expect(got.batched)
    }

    @Test func aMessageOverTheLimitInAllItsFramesIsDroppedUnansweredAndABadVersionIsAlwaysAnswered() throws {
        let harness = try Harness()
        let client = try harness.client()
        // Two frames of 33 MiB each: each under ZMQ_MAXMSGSIZE, together over 65 MiB.
        let half = [UInt8](repeating: 0xAB, count: 33 << 20)
        var frames = Submit(requestID: 77, priority: 1, options: .default, pipeline: "crop:square", sourceName: "big", image: half).frames()
        frames.append(half)
        try client.send(frames)
        // The next answer is the PING's.
        #expect(try client.request { Ping(requestID: $0).frames() } == .pong(Pong(requestID: client.nextID - 1)))
        #expect(try client.status().queue.depth == 0)
        // Another protocol id is answered bad-version even with the ERROR byte in frame 1.
        try client.send([Array("DRK2".utf8), [Command.error.rawValue], [0, 0, 0, 0, 0, 0, 0, 0]])
        guard case .error(let reply) = try client.receive() else { throw TestFailure("expected ERROR") }
        #expect(reply.code == .badVersion)
    }

    @Test func statusReportsWorkersAndQueue() throws {
        let harness = try Harness()
        let client = try harness.client()
        _ = try client.submitAccepted(priority: 2)
        _ = try client.submitAccepted(priority: 2)
        let worker = try harness.worker("w-status", slots: 3)
        try worker.ready(credit: 1)
        _ = try worker.job()
        let status = try client.waitForStatus("the worker to show") { $0.workers.count == 1 && $0.queue.inFlight == 1 }
        #expect(status.queue.ready[2] == 1)
        #expect(status.queue.limit == 100_000)
        #expect(status.protocolVersion == "DRK1")
        let entry = try #require(status.workers.first)
        #expect(entry.id == "w-status")
        #expect(entry.slots == 3)
        #expect(entry.busy == 1)
        #expect(entry.host == "test-host")
        #expect(status.rates.accepted > 0)
    }
}
