@testable import DarkroomBroker
import DarkroomProtocol
import DarkroomSQLite
import DarkroomZMQ
import Foundation
import Testing

/// A queue database in a temp directory, written by a `StateDriver` the
/// way the broker's core writes it: plan, persist, and apply only what was
/// persisted.
final class StoreBench {
    let directory: String
    private(set) var store: JobStore
    var driver: StateDriver
    /// Every event of every transition persisted and committed, in order.
    private(set) var committedEvents: [Event] = []
    private var turnEvents: [Event] = []

    init(maxPages: Int? = nil, maxMappedInputs: Int = 16_384) throws {
        directory = NSTemporaryDirectory() + "darkroom-jobstore-test-\(UUID().uuidString)"
        store = try JobStore(directory: directory, maxInputBytes: 1 << 24, maxPages: maxPages, maxMappedInputs: maxMappedInputs)
        driver = StateDriver(loaded: try store.load())
    }

    deinit {
        store.close()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Closes the store and opens the same directory again.
    func reopen(maxPages: Int? = nil) throws {
        store.close()
        store = try JobStore(directory: directory, maxInputBytes: 1 << 24, maxPages: maxPages)
    }

    /// Plans an accept of `bytes`, kept inline or written to its input file first.
    func planAccept(_ bytes: [UInt8] = jpeg(size: 200), priority: UInt8 = 0, file: Bool = false, source: String? = nil,
                    key: String? = nil) throws -> Transition {
        let id = driver.newID()
        if file { try store.inputs.write(bytes, name: id.description) }
        let now = driver.now
        return driver.plan { $0.planAccept(id: id, priority: priority, source: source ?? "\(id).jpg", options: .default,
                                           pipeline: "crop:square", inlineInput: file ? nil : bytes,
                                           inputFile: file ? id.description : nil, inputBytes: bytes.count, submitKey: key, now: now) }
    }

    /// Persists a transition in the open turn and, once written, applies it.
    @discardableResult
    func write(_ t: Transition) throws(JobStoreError) -> JobPayload? {
        let payload = try store.persist(t)
        driver.apply(t)
        turnEvents += t.events
        return payload
    }

    /// Plans, persists and applies an accept; returns the job's id.
    @discardableResult
    func accept(_ bytes: [UInt8] = jpeg(size: 200), priority: UInt8 = 0, file: Bool = false, key: String? = nil) throws -> ULID {
        let t = try planAccept(bytes, priority: priority, file: file, key: key)
        try write(t)
        return t.events[0].jobID
    }

    /// Plans, persists and applies the next dispatch.
    func dispatch() throws -> (lease: Lease, payload: JobPayload?)? {
        let now = driver.now
        guard let (t, lease) = driver.plan({ $0.planDispatch(now: now) }) else { return nil }
        let payload = try write(t)
        return (lease, payload)
    }

    /// Persists a transition expected to fail; returns how it failed (nil when it did not).
    func refusal(_ t: Transition) -> JobStoreError? {
        do {
            _ = try store.persist(t)
            return nil
        } catch {
            return error
        }
    }

    func commit() throws(JobStoreError) {
        try store.commit()
        committedEvents += turnEvents
        turnEvents.removeAll()
    }

    /// The core's answer to a lost turn: forget it and rebuild the state
    /// from the database as of the memo taken at the turn's start.
    func lose(_ memo: BrokerState.Memo) throws {
        store.abandonTurn()
        turnEvents.removeAll()
        driver.state.restore(memo, loaded: try store.load(), now: driver.now)
    }

    // Reads, through the store's own connection (they see the open turn).

    func count(_ sql: String, _ bindings: (any SQLiteBindable)?...) throws -> Int64 {
        try store.db.prepare("SELECT COUNT(*) AS n FROM " + sql).query(bindings) { try $0.int64("n") }.first ?? -1
    }

    func rowCount(of id: ULID) throws -> Int64 {
        try store.db.query("SELECT COUNT(*) AS n FROM jobs WHERE id = ?", id.description) { try $0.int64("n") }.first ?? -1
    }

    func eventSeqs() throws -> [UInt64] {
        try store.db.query("SELECT seq FROM events ORDER BY seq") { try $0.integer("seq", as: UInt64.self) }
    }

    func jobIDs() throws -> Set<String> {
        Set(try store.db.query("SELECT id FROM jobs") { try $0.string("id") })
    }

    func hasFile(_ id: ULID) -> Bool {
        FileManager.default.fileExists(atPath: store.inputs.path(of: id.description))
    }

    var summary: LoadedSummary {
        get throws { LoadedSummary(try store.load(), now: driver.now.wall) }
    }

    /// What the state says the database holds.
    var expected: LoadedSummary { LoadedSummary(driver.loaded(), now: driver.now.wall) }
}

/// The queue database with real SQLite files: what a turn writes, what it
/// leaves when a transition or the whole turn fails, and what comes back.
@Suite struct JobStoreTests {
    /// An input kept in a file goes out mapped, not read; past the cap on
    /// mappings (here 0) it is read into memory as before, the same bytes.
    @Test func fileInputsAreMappedUntilTheCapThenRead() throws {
        // Mappings another owner holds in this process (the storage node's,
        // in `darkroom up`) do not count against the broker's cap.
        let elsewhere = FrameTally()
        let otherPath = NSTemporaryDirectory() + "darkroom-jobstore-elsewhere-\(UUID().uuidString)"
        #expect(FileManager.default.createFile(atPath: otherPath, contents: Data(jpeg(size: 100))))
        defer { try? FileManager.default.removeItem(atPath: otherPath) }
        let others = try (0..<8).map { _ in try MappedFile(path: otherPath, maxBytes: 1 << 20, tally: elsewhere) }
        defer { withExtendedLifetime(others) {} }
        for cap in [16_384, 1, 0] {
            let bench = try StoreBench(maxMappedInputs: cap)
            let bytes = jpeg(size: 700)
            let id = try bench.accept(bytes, file: true)
            try bench.commit()
            bench.driver.register("w1", slots: 1, credit: 1)
            do {
                let (lease, payload) = try unwrap(try bench.dispatch())
                #expect(lease.job.id == id)
                #expect(payload?.input == bytes, "cap \(cap)")
                if cap == 0 {
                    #expect(payload?.file == nil && payload?.image == bytes, "read into memory past the cap")
                    #expect(bench.store.mappedInputs.current == 0)
                } else {
                    #expect(payload?.file?.count == bytes.count && payload?.image.isEmpty == true, "mapped, not read, cap \(cap)")
                    #expect(bench.store.mappedInputs.current == 1)
                }
            }
            // The JOB was never sent: its mapping went with it.
            #expect(bench.store.mappedInputs.current == 0)
            try bench.commit()
        }
    }

    @Test func committedTurnsLoadBackAsTheStateThatWroteThem() throws {
        let bench = try StoreBench()
        var images: [ULID: [UInt8]] = [:]
        for (index, priority) in [UInt8(3), 0, 9, 3, 5, 1].enumerated() {
            let bytes = jpeg(size: 300 + index, seed: UInt8(index))
            let id = try bench.accept(bytes, priority: priority, file: index % 3 == 1, key: "key-\(index)")
            images[id] = bytes
        }
        try bench.commit()

        bench.driver.register("w1", slots: 4, credit: 4)
        var leases: [Lease] = []
        for _ in 0..<4 {
            let (lease, payload) = try unwrap(try bench.dispatch())
            #expect(payload?.input == images[lease.job.id], "a JOB carries the submitted bytes")
            #expect(payload?.pipeline == "crop:square")
            leases.append(lease)
        }
        try bench.commit()

        // A retry with a backoff, a dead job, a job handed back, a stored one.
        try bench.write(try unwrap(bench.driver.plan { [now = bench.driver.now] in
            $0.planFail(Fail(jobID: leases[0].job.id, attempt: 1, retryable: true, failure: FailureDetail(code: "internal", reason: "boom")),
                        from: StateDriver.identity("w1"), now: now) }))
        try bench.write(try unwrap(bench.driver.plan { [now = bench.driver.now] in
            $0.planFail(Fail(jobID: leases[1].job.id, attempt: 1, retryable: false, failure: FailureDetail(code: "image.corrupt", reason: "bad")),
                        from: StateDriver.identity("w1"), now: now) }))
        try bench.write(try unwrap(bench.driver.plan { [now = bench.driver.now] in
            $0.planFail(Fail(jobID: leases[2].job.id, attempt: 1, retryable: true,
                             failure: FailureDetail(code: FailureDetail.Code.workerShutdown, reason: "stopping")),
                        from: StateDriver.identity("w1"), now: now) }))
        try bench.write(try unwrap(bench.driver.plan { [now = bench.driver.now] in
            $0.planDone(Done(jobID: leases[3].job.id, attempt: 1, recordID: leases[3].job.id), from: StateDriver.identity("w1"),
                        dead: nil, now: now) }))
        try bench.commit()

        #expect(bench.store.committedSeq == bench.driver.state.eventSeq)
        #expect(try bench.summary == bench.expected)
        #expect(try bench.store.events(from: 1, limit: 1_000) == bench.committedEvents)
        #expect(try bench.store.deadCount() == 1)
        #expect(try bench.store.acceptedJob(forKey: "key-4")?.eventSeq == 5)
        // Each job's last event, as CANCEL's answer reads it, is the last
        // one committed for it; a job the log never saw has none.
        for lease in leases {
            #expect(try bench.store.lastEvent(of: lease.job.id) == bench.committedEvents.last { $0.jobID == lease.job.id })
        }
        #expect(try bench.store.lastEvent(of: leases[3].job.id)?.kind == .stored)
        #expect(try bench.store.lastEvent(of: leases[1].job.id)?.kind == .dead)
        #expect(try bench.store.lastEvent(of: ULIDGenerator().next()) == nil)

        // The same after closing and opening the database again; a state
        // built from it has the same queue and holds every lease.
        try bench.reopen()
        #expect(bench.store.committedSeq == bench.driver.state.eventSeq)
        #expect(try bench.summary == bench.expected)
        let restarted = BrokerState(policy: StateDriver.policy, reclaimWindow: 6_000, reconnectWindow: 3_000,
                                    loaded: try bench.store.load(), now: bench.driver.now)
        #expect(restarted.ready == bench.driver.state.ready)
        #expect(Set(restarted.held.keys) == Set(bench.driver.state.leases.keys))
        #expect(restarted.eventSeq == bench.driver.state.eventSeq)
        #expect(restarted.lastRowID == bench.driver.state.lastRowID)
        #expect(restarted.deadCount == 1)
    }

    @Test func aCancelAskedOfARunningJobIsStillPendingAfterARestartAndALostTurnTakesItsMarkWithIt() throws {
        let bench = try StoreBench()
        let first = try bench.accept(key: "first")
        let second = try bench.accept(key: "second")
        try bench.commit()
        bench.driver.register("w1", slots: 2, credit: 2)
        _ = try unwrap(try bench.dispatch())
        _ = try unwrap(try bench.dispatch())
        try bench.commit()

        /// CANCEL of a running job: nil when the job is not running.
        func askToStop(_ id: ULID) -> Transition? {
            guard case let .stopping(t, _, _)? = bench.driver.state.planCancel(id, now: bench.driver.now) else { return nil }
            return t
        }
        // A second CANCEL of the same job writes nothing more.
        try bench.write(try unwrap(askToStop(first)))
        #expect(askToStop(first)?.isEmpty == true)
        try bench.commit()
        #expect(bench.driver.state.cancelling == [first])

        // A turn that marks the other one is lost: its mark goes with it.
        let memo = bench.driver.state.memo()
        try bench.write(try unwrap(askToStop(second)))
        #expect(bench.driver.state.cancelling == [first, second])
        try bench.lose(memo)
        #expect(bench.driver.state.cancelling == [first])
        #expect(try bench.summary == bench.expected)

        // After a restart the job is still being cancelled: held for its
        // worker, which is asked again when it comes back holding it.
        try bench.reopen()
        #expect(try bench.summary == bench.expected)
        let restarted = BrokerState(policy: StateDriver.policy, reclaimWindow: 6_000, reconnectWindow: 3_000,
                                    loaded: try bench.store.load(), now: bench.driver.now)
        #expect(restarted.cancelling == [first])
        #expect(Set(restarted.held.keys) == [first, second])
    }

    @Test func aPauseLoadsBackAfterARestartALostTurnTakesItWithItAndResumeClearsIt() throws {
        let bench = try StoreBench()
        _ = try bench.accept(key: "waiting")
        try bench.commit()
        let now = bench.driver.now
        #expect(bench.driver.state.planPause(false, now: now) == nil, "RESUME while running plans nothing")

        // A turn that pauses is lost: the pause goes with it.
        let memo = bench.driver.state.memo()
        try bench.write(try unwrap(bench.driver.state.planPause(true, now: now)))
        #expect(bench.driver.state.pausedSince == now.wall)
        try bench.lose(memo)
        #expect(bench.driver.state.pausedSince == nil)
        #expect(try bench.summary == bench.expected)

        try bench.write(try unwrap(bench.driver.state.planPause(true, now: now)))
        try bench.commit()
        #expect(bench.driver.state.planPause(true, now: now) == nil, "PAUSE while paused plans nothing")
        try bench.reopen()
        #expect(try bench.summary == bench.expected)
        #expect(try bench.store.load().pausedSince == now.wall)
        bench.driver.register("w1", slots: 2, credit: 2)
        #expect(try bench.dispatch() == nil, "no dispatch while paused")

        try bench.write(try unwrap(bench.driver.state.planPause(false, now: now)))
        try bench.commit()
        try bench.reopen()
        #expect(try bench.store.load().pausedSince == nil)
        #expect(try bench.summary == bench.expected)
        #expect(try bench.dispatch() != nil, "dispatch again after RESUME")
    }

    @Test func aTransitionWhoseLaterWriteFailsLeavesNoneOfItsWritesWhileTheTurnsEarlierWorkCommits() throws {
        let bench = try StoreBench()
        let kept = try bench.accept(key: "kept")

        var failing = try bench.planAccept(jpeg(size: 500), file: true, key: "dropped")
        let dropped = failing.events[0].jobID
        #expect(bench.hasFile(dropped))
        // A write after the insert that the database refuses: a requeue of a row that does not exist.
        let ghost = JobHandle(id: bench.driver.newID(), priority: 0, source: "ghost.jpg", rowID: 999)
        failing.writes.append(.requeue(ghost, notBefore: 0, failure: nil))
        let refusal = bench.refusal(failing)
        guard case .rejected(let reason) = refusal else {
            Issue.record("expected the transition to be rejected, got \(String(describing: refusal))")
            return
        }
        #expect(reason.contains("requeue of job \(ghost.id) changed 0 rows"), "\(reason)")
        #expect(try bench.rowCount(of: dropped) == 0)
        #expect(!bench.hasFile(dropped), "the input file of a refused accept is removed")

        // The turn goes on; the next event takes the seq the refused one would have had.
        let next = try bench.accept(key: "next")
        try bench.commit()

        #expect(try bench.jobIDs() == [kept.description, next.description])
        #expect(try bench.count("job_input") == 2)
        #expect(try bench.eventSeqs() == [1, 2])
        #expect(try bench.count("events WHERE job_id = ?", dropped.description) == 0)
        #expect(try bench.store.acceptedJob(forKey: "dropped") == nil)
        #expect(try bench.store.acceptedJob(forKey: "kept")?.job == kept)
        #expect(try bench.store.acceptedJob(forKey: "next")?.eventSeq == 2)
        #expect(bench.store.committedSeq == 2)
        #expect(try bench.summary == bench.expected)
    }

    @Test func aTransitionThatFailsAfterTransitionsOfEveryKindIsUndoneAloneAndTheirWorkCommits() throws {
        let bench = try StoreBench()
        let stored = try bench.accept(file: true)
        bench.driver.register("w1", credit: 3)
        #expect(try unwrap(try bench.dispatch()).lease.job.id == stored)
        try bench.commit()

        // The turn, written without savepoints: an accept with an input
        // file, one inline (its input kept warm), a lease of each, the
        // first job stored (its file released), then a transition that
        // fails after its first write, then one more accept.
        let withFile = try bench.accept(file: true)
        let inline = try bench.accept()
        let leased = [try unwrap(try bench.dispatch()), try unwrap(try bench.dispatch())]
        #expect(Set(leased.map(\.lease.job.id)) == [withFile, inline])
        #expect(leased.allSatisfy { $0.payload?.input.isEmpty == false })
        let now = bench.driver.now
        try bench.write(try unwrap(bench.driver.plan {
            $0.planDone(Done(jobID: stored, attempt: 1, recordID: stored), from: StateDriver.identity("w1"), dead: nil, now: now) }))
        var failing = try bench.planAccept(jpeg(size: 300), file: true, key: "dropped")
        let dropped = failing.events[0].jobID
        let ghost = JobHandle(id: bench.driver.newID(), priority: 0, source: "ghost.jpg", rowID: 999)
        failing.writes.append(.requeue(ghost, notBefore: 0, failure: nil))
        guard case .rejected = bench.refusal(failing) else {
            Issue.record("expected the failing transition to be rejected alone")
            return
        }
        #expect(!bench.hasFile(dropped), "the refused accept's input file is removed")
        #expect(bench.hasFile(withFile), "the turn's earlier accept keeps its file")
        #expect(bench.hasFile(stored), "a released file goes only after the commit")
        let last = try bench.accept(key: "last")
        try bench.commit()

        #expect(try bench.summary == bench.expected)
        #expect(try bench.jobIDs() == [withFile.description, inline.description, last.description])
        #expect(try bench.count("jobs WHERE state = 'leased'") == 2)
        #expect(try bench.rowCount(of: dropped) == 0)
        #expect(try bench.store.acceptedJob(forKey: "dropped") == nil)
        #expect(try bench.store.acceptedJob(forKey: "last")?.job == last)
        #expect(try bench.eventSeqs() == Array(1...bench.store.committedSeq))
        #expect(bench.hasFile(withFile))
        #expect(!bench.hasFile(stored), "the stored job's file goes once the turn commits")

        // The next turn is written without savepoints again, and a lease
        // of the job accepted after the failure reads its input.
        bench.driver.register("w2", credit: 1)
        let (lease, payload) = try unwrap(try bench.dispatch())
        #expect(lease.job.id == last)
        #expect(payload?.input.isEmpty == false)
        try bench.commit()
        #expect(try bench.summary == bench.expected)
    }

    @Test func aTurnThatSQLiteRollsBackIsLostWholeAndTheStoreIsBackAtItsLastCommit() throws {
        let bench = try StoreBench()
        let leasedID = try bench.accept(file: true)
        try bench.accept()
        bench.driver.register("w1", credit: 1)
        let (leased, _) = try unwrap(try bench.dispatch())
        #expect(leased.job.id == leasedID)
        try bench.commit()
        // SQLite rolls back the whole transaction when an event of a job named fault.jpg is written.
        try bench.store.db.execute("""
            CREATE TEMP TRIGGER inject_fault BEFORE INSERT ON main.events WHEN NEW.source = 'fault.jpg'
            BEGIN SELECT RAISE(ROLLBACK, 'injected fault'); END
            """)

        let committed = try bench.summary
        let committedSeq = bench.store.committedSeq
        let memo = bench.driver.state.memo()
        let before = bench.driver.state

        // The turn: a new job with an input file, the leased job stored
        // (which releases its file), a worker registered, then the fault.
        let early = try bench.accept(file: true)
        try bench.write(try unwrap(bench.driver.plan { [now = bench.driver.now] in
            $0.planDone(Done(jobID: leasedID, attempt: 1, recordID: leasedID), from: StateDriver.identity("w1"), dead: nil, now: now) }))
        bench.driver.register("w2", credit: 1)
        let fault = try bench.planAccept(file: true, source: "fault.jpg")
        let faultID = fault.events[0].jobID
        let refusal = bench.refusal(fault)
        guard case .turnLost(let reason) = refusal else {
            Issue.record("expected the turn to be lost, got \(String(describing: refusal))")
            return
        }
        #expect(reason.contains("injected fault"), "\(reason)")
        // The reason quotes the failing statement, and it goes into REJECTED: one line.
        #expect(reason.contains("INSERT INTO events"), "\(reason)")
        #expect(reason.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }, "\(reason)")

        #expect(!bench.store.db.isInTransaction)
        #expect(bench.store.committedSeq == committedSeq)
        #expect(try bench.summary == committed)
        #expect(try bench.eventSeqs() == Array(1...committedSeq))
        #expect(!bench.hasFile(early), "input files named by the lost turn are removed")
        #expect(!bench.hasFile(faultID))
        #expect(bench.hasFile(leasedID), "the stored job's file stays: its deletion was never committed")

        try bench.lose(memo)
        #expect(bench.driver.state == before)
        // The next turn carries on from the last commit, gapless.
        let after = try bench.accept()
        try bench.commit()
        #expect(try bench.eventSeqs() == Array(1...(committedSeq + 1)))
        #expect(try bench.store.acceptedJob(forKey: "none") == nil)
        #expect(try bench.rowCount(of: after) == 1)
        #expect(try bench.summary == bench.expected)
    }

    @Test func aTurnWhoseTransactionSQLiteEndedBetweenTransitionsWritesNothingMore() throws {
        let bench = try StoreBench()
        try bench.accept()
        try bench.commit()
        let committed = try bench.summary
        let committedSeq = bench.store.committedSeq
        let memo = bench.driver.state.memo()
        let before = bench.driver.state

        let early = try bench.accept()
        // SQLite may end the transaction by itself on an error in any
        // statement of the turn, a read included (a full disk, an I/O
        // error). Outside a transaction each write would commit on its own.
        try bench.store.db.execute("ROLLBACK")
        let late = try bench.planAccept(file: true)
        let lateID = late.events[0].jobID
        let refusal = bench.refusal(late)
        guard case .turnLost = refusal else {
            Issue.record("expected the turn to be lost, got \(String(describing: refusal))")
            return
        }
        #expect(try bench.rowCount(of: lateID) == 0, "nothing of the lost turn is written")
        #expect(try bench.rowCount(of: early) == 0)
        #expect(!bench.hasFile(lateID))
        #expect(bench.store.committedSeq == committedSeq)
        #expect(try bench.summary == committed)
        try bench.lose(memo)
        #expect(bench.driver.state == before)
        try bench.accept()
        try bench.commit()
        #expect(try bench.eventSeqs() == Array(1...(committedSeq + 1)))
    }

    @Test func anAcceptWhoseTurnCannotBeginLeavesNoInputFile() throws {
        let bench = try StoreBench()
        _ = try bench.store.db.pragma("busy_timeout = 0")
        let other = try Connection(path: bench.directory + "/queue.sqlite")
        defer { try? other.close() }
        try other.execute("BEGIN IMMEDIATE")
        let t = try bench.planAccept(file: true)
        let id = t.events[0].jobID
        let refusal = bench.refusal(t)
        guard case .turnLost(let reason) = refusal else {
            Issue.record("expected the turn to be lost, got \(String(describing: refusal))")
            return
        }
        #expect(reason.contains("cannot begin"), "\(reason)")
        #expect(!bench.hasFile(id), "the input file of an accept that was never written is removed")
        try other.execute("ROLLBACK")
        bench.store.abandonTurn()
        try bench.accept(file: true)
        try bench.commit()
        #expect(try bench.count("jobs") == 1)
    }

    @Test func inputFilesOfAFinishedJobAreRemovedOnlyOnceTheTurnCommits() throws {
        let bench = try StoreBench()
        let stored = try bench.accept(file: true)
        let discarded = try bench.accept(file: true)
        bench.driver.register("w1", credit: 2)
        let leases = [try unwrap(try bench.dispatch()).lease, try unwrap(try bench.dispatch()).lease]
        try bench.commit()
        let now = bench.driver.now
        for lease in leases where lease.job.id == discarded {
            try bench.write(try unwrap(bench.driver.plan {
                $0.planFail(Fail(jobID: lease.job.id, attempt: 1, retryable: false, failure: FailureDetail(code: "c", reason: "r")),
                            from: StateDriver.identity("w1"), now: now) }))
        }
        try bench.commit()

        // A turn that stores one job and discards the other, then is lost: both files stay.
        let memo = bench.driver.state.memo()
        let dead = try unwrap(try bench.store.deadJob(discarded))
        try bench.write(bench.driver.plan { $0.planDiscard([dead], now: now) })
        try bench.write(try unwrap(bench.driver.plan {
            $0.planDone(Done(jobID: stored, attempt: 1, recordID: stored), from: StateDriver.identity("w1"), dead: nil, now: now) }))
        #expect(bench.hasFile(stored) && bench.hasFile(discarded))
        try bench.lose(memo)
        #expect(bench.hasFile(stored) && bench.hasFile(discarded))

        // The same turn again, committed: the files go after the commit.
        try bench.write(bench.driver.plan { $0.planDiscard([dead], now: now) })
        try bench.write(try unwrap(bench.driver.plan {
            $0.planDone(Done(jobID: stored, attempt: 1, recordID: stored), from: StateDriver.identity("w1"), dead: nil, now: now) }))
        #expect(bench.hasFile(stored) && bench.hasFile(discarded), "not before the commit")
        try bench.commit()
        #expect(!bench.hasFile(stored) && !bench.hasFile(discarded))
        #expect(try bench.count("jobs") == 0)
    }

    /// With `capped`, the store knows its cap and refuses accepts that do
    /// not fit; without, the cap is set behind its back, as a full disk
    /// would stop it, and SQLite rolls back the turn that hits it.
    @Test(arguments: [true, false])
    func aFullDatabaseRefusesWholeTransitionsOrLosesWholeTurnsAndNeverHalfWritesEither(capped: Bool) throws {
        let bench = try StoreBench()
        try bench.accept()
        try bench.commit()
        let pageSize = try unwrap(Int(try bench.store.db.pragma("page_size") ?? ""))
        let pages = try unwrap(Int(try bench.store.db.pragma("page_count") ?? ""))
        // Room for a few dozen 20 KB inputs. Each turn writes three, until
        // one does not fit.
        let cap = pages + (600 << 10) / pageSize
        if capped {
            try bench.reopen(maxPages: cap)
        } else {
            _ = try bench.store.db.pragma("max_page_count = \(cap)")
        }

        var committedIDs: Set<String> = try bench.jobIDs()
        var refused = 0
        var lost = 0
        var turn = 0
        while refused + lost < 4 && turn < 200 {
            turn += 1
            let memo = bench.driver.state.memo()
            let before = bench.driver.state
            let committed = try bench.summary
            let committedSeq = bench.store.committedSeq
            var written: [ULID] = []
            var files: [ULID] = []
            var lostNow = false
            for index in 0..<3 {
                let file = index == 2
                let t = try bench.planAccept(jpeg(size: 20_000, seed: UInt8(truncatingIfNeeded: turn * 3 + index)), file: file)
                let id = t.events[0].jobID
                if file { files.append(id) }
                do {
                    try bench.write(t)
                    written.append(id)
                } catch .rejected(let reason) {
                    // The transition is undone; the turn goes on.
                    refused += 1
                    #expect(reason.contains("full"), "\(reason)")
                    #expect(try bench.rowCount(of: id) == 0)
                    #expect(try bench.count("events WHERE seq > ?", Int64(bench.driver.state.eventSeq)) == 0)
                    #expect(try bench.count("job_input") == bench.count("jobs WHERE input_file IS NULL"))
                    #expect(!bench.hasFile(id))
                } catch .turnLost(let reason) {
                    // SQLite undoes a single-row insert that finds the
                    // database full by rolling back the whole transaction.
                    #expect(reason.contains("full"), "\(reason)")
                    lostNow = true
                    break
                } catch {
                    Issue.record("an accept failed with \(error)")
                    lostNow = true
                    break
                }
            }
            if !lostNow {
                do {
                    try bench.commit()
                    committedIDs.formUnion(written.map(\.description))
                } catch {
                    #expect(error.description.contains("full"), "\(error)")
                    lostNow = true
                }
            }
            if lostNow {
                // Back at the last commit, the turn's input files gone.
                lost += 1
                #expect(!bench.store.db.isInTransaction)
                #expect(bench.store.committedSeq == committedSeq)
                #expect(try bench.summary == committed)
                for id in files { #expect(!bench.hasFile(id)) }
                try bench.lose(memo)
                #expect(bench.driver.state == before)
            }
            #expect(try bench.jobIDs() == committedIDs)
            #expect(try bench.eventSeqs() == Array(1...bench.store.committedSeq))
        }
        #expect(refused + lost >= 4, "the database never filled up")
        if capped {
            #expect(lost == 0, "an accept that does not fit is refused before it is written")
        } else {
            #expect(lost > 0)
        }
        #expect(try bench.summary == bench.expected)

        if capped {
            // Refusing accepts kept room to dispatch jobs and store them.
            bench.driver.register("w1", slots: 4, credit: 4)
            for _ in 0..<4 {
                let (lease, payload) = try unwrap(try bench.dispatch())
                #expect(payload != nil)
                let now = bench.driver.now
                try bench.write(try unwrap(bench.driver.plan {
                    $0.planDone(Done(jobID: lease.job.id, attempt: 1, recordID: lease.job.id), from: StateDriver.identity("w1"),
                                dead: nil, now: now) }))
            }
            try bench.commit()
        }

        // Space comes back as jobs finish, and accepts are written again.
        let now = bench.driver.now
        for case let (job, _) in bench.driver.state.ready.all.prefix(6) {
            try bench.write(try unwrap(bench.driver.plan {
                $0.planDone(Done(jobID: job.id, attempt: 0, recordID: job.id), from: [], dead: nil, now: now) }))
        }
        try bench.commit()
        let again = try bench.accept(jpeg(size: 20_000, seed: 99))
        try bench.commit()
        #expect(try bench.rowCount(of: again) == 1)
        #expect(try bench.eventSeqs() == Array(1...bench.store.committedSeq))
        #expect(try bench.store.events(from: 1, limit: 100_000) == bench.committedEvents)
    }
}
