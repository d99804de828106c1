@testable import DarkroomBroker
import DarkroomProtocol
import Testing

/// The broker's decisions, made by `BrokerState` alone: no sockets, no
/// files, no SQLite. Every plan here also proves that planning changes
/// nothing and that events and rowids continue where the state left off
/// (see `StateDriver`).
@Suite struct BrokerStateTests {
    // MARK: Dispatch

    @Test func dispatchTakesTheHighestPriorityFirstAndSubmissionOrderWithinAPriority() {
        var driver = StateDriver()
        let low = driver.accept(priority: 0)
        let midFirst = driver.accept(priority: 5)
        let high = driver.accept(priority: 9)
        let midSecond = driver.accept(priority: 5)
        driver.register("w1", slots: 8, credit: 8)
        let leases = driver.dispatchAll()
        #expect(leases.map(\.job.id) == [high.id, midFirst.id, midSecond.id, low.id])
        #expect(leases.allSatisfy { $0.job.attempt == 1 && $0.worker == "w1" })
        #expect(driver.state.depth == 0)
        #expect(driver.state.workers["w1"]?.jobs == Set(leases.map(\.job.id)))
    }

    @Test func theReadyQueueFindsTheJobsPastTheirDeadlineInOrderAndForgetsThoseThatLeft() {
        var queue = ReadyQueue()
        func job(_ n: UInt64, expires: UInt64) -> JobHandle {
            JobHandle(id: ULID(milliseconds: 1_000 + n, randomHigh: 0, randomLow: n), priority: 0, source: "\(n).jpg", rowID: Int64(n),
                      expires: expires)
        }
        let jobs = [job(1, expires: 500), job(2, expires: 300), job(3, expires: 0), job(4, expires: 900), job(5, expires: 300)]
        queue.add(jobs[0], now: 0)
        queue.add(jobs[1], notBefore: 10_000, now: 0)  // delayed: its deadline counts all the same
        for j in jobs[2...] { queue.add(j, now: 0) }
        #expect(queue.nextDeadline == 300)
        #expect(queue.expired(by: 299).isEmpty)
        #expect(queue.expired(by: 500).map(\.source) == ["2.jpg", "5.jpg", "1.jpg"], "by deadline, then id")
        // Taken out (dispatched, cancelled): no longer due, and not the next deadline.
        queue.remove(jobs[1].id)
        queue.remove(jobs[4].id)
        #expect(queue.nextDeadline == 500)
        #expect(queue.expired(by: 1_000).map(\.source) == ["1.jpg", "4.jpg"])
        // Back in the queue (a retry) with its deadline: due again, once.
        queue.add(jobs[4], now: 0)
        #expect(queue.expired(by: 1_000).map(\.source) == ["5.jpg", "1.jpg", "4.jpg"])
        for j in jobs { queue.remove(j.id) }
        #expect(queue.nextDeadline == nil)
    }

    @Test func aDispatchLeasesTheJobWithTheNextAttemptAndAStartedEvent() throws {
        var driver = StateDriver()
        let job = driver.accept(source: "photo.jpg")
        driver.register("w1", credit: 1)
        let now = driver.now
        let (t, lease) = try unwrap(driver.plan { $0.planDispatch(now: now) })
        var leased = job
        leased.attempt = 1
        #expect(lease == Lease(job: leased, worker: "w1"))
        #expect(t.writes == [.lease(leased, worker: "w1")])
        #expect(t.events.map(\.kind) == [.started])
        #expect(t.events.first?.attempt == 1)
        #expect(t.events.first?.workerID == "w1")
        #expect(t.events.first?.sourceName == "photo.jpg")
        #expect(t.changes == [.unqueue(job.id), .lease(lease, usesCredit: true)])
    }

    @Test func aWorkerNeverGetsMoreJobsThanTheCreditItGranted() throws {
        var driver = StateDriver()
        for _ in 0..<5 { driver.accept() }
        driver.register("w1", slots: 4, credit: 2)
        let first = driver.dispatchAll()
        #expect(first.count == 2)
        #expect(driver.state.workers["w1"]?.credit == 0)

        // A DONE frees a slot but grants nothing.
        let done = Done(jobID: first[0].job.id, attempt: 1, recordID: driver.newID())
        let now = driver.now
        let stored = try unwrap(driver.plan { $0.planDone(done, from: StateDriver.identity("w1"), dead: nil, now: now) })
        driver.apply(stored)
        expectEqual(driver.dispatch(), nil)

        expectEqual(driver.state.grant(1, worker: "w1"), nil)
        expectEqual(driver.dispatchAll().count, 1)
        #expect(driver.state.depth == 2)
    }

    @Test func creditIsNeverMoreThanTheWorkersFreeSlots() {
        var driver = StateDriver()
        for _ in 0..<5 { driver.accept() }
        driver.register("w1", slots: 3)
        let warning = driver.state.grant(5, worker: "w1")
        #expect(warning?.contains("granted credit 5") == true)
        #expect(driver.state.workers["w1"]?.credit == 3)

        check(driver.dispatch() != nil)
        check(driver.dispatch() != nil)
        // Two of three slots busy, one credit left: a grant of 4 leaves room for 1.
        check(driver.state.grant(4, worker: "w1") != nil)
        #expect(driver.state.workers["w1"]?.credit == 1)
        expectEqual(driver.dispatchAll().count, 1)
        #expect(driver.state.workers["w1"]?.jobs.count == 3)
        // A full worker gets no credit at all.
        _ = driver.state.grant(1, worker: "w1")
        #expect(driver.state.workers["w1"]?.credit == 0)
        expectEqual(driver.dispatch(), nil)
    }

    @Test func theWorkerWithTheMostCreditGoesFirstAndWorkersWithEqualCreditTakeTurns() {
        var driver = StateDriver()
        for _ in 0..<10 { driver.accept() }
        driver.register("w1", slots: 8, credit: 1)
        driver.register("w2", slots: 8, credit: 3)
        expectEqual(driver.dispatch()?.worker, "w2")
        expectEqual(driver.dispatch()?.worker, "w2")
        // Both have 1 now; w1 has waited longer.
        expectEqual(driver.dispatch()?.worker, "w1")
        expectEqual(driver.dispatch()?.worker, "w2")
        expectEqual(driver.dispatch(), nil)

        _ = driver.state.grant(3, worker: "w1")
        _ = driver.state.grant(3, worker: "w2")
        let turns = driver.dispatchAll().map(\.worker)
        #expect(turns.count == 6)
        for (earlier, later) in zip(turns, turns.dropFirst()) {
            #expect(earlier != later, "equal credit alternates: \(turns)")
        }
    }

    @Test func aStoppingWorkerGetsNoJobsWhateverItsCredit() throws {
        var driver = StateDriver()
        driver.accept()
        driver.accept()
        driver.register("w1", slots: 4, credit: 4)
        let lease = try unwrap(driver.dispatch())
        driver.state.markStopping("w1")
        #expect(driver.state.workers["w1"]?.credit == 0)
        expectEqual(driver.dispatch(), nil)
        expectEqual(driver.state.grant(2, worker: "w1"), nil)
        #expect(driver.state.workers["w1"]?.credit == 0)
        expectEqual(driver.dispatch(), nil)
        // The job it hands back goes elsewhere.
        driver.fail(lease, code: FailureDetail.Code.workerShutdown, reason: "stopping")
        driver.register("w2", credit: 2)
        expectEqual(driver.dispatchAll().map(\.worker), ["w2", "w2"])
    }

    @Test func aDelayedJobIsNotDispatchedBeforeItsTime() throws {
        var driver = StateDriver(random: { 0.5 })
        driver.accept()
        driver.register("w1", credit: 2)
        let lease = try unwrap(driver.dispatch())
        driver.fail(lease)
        #expect(driver.state.depth == 1)
        expectEqual(driver.dispatch(), nil)
        driver.advance(999)
        driver.state.promote(now: driver.now)
        expectEqual(driver.dispatch(), nil)
        driver.advance(1)
        driver.state.promote(now: driver.now)
        expectEqual(driver.dispatch()?.job.attempt, 2)
    }

    // MARK: FAIL

    @Test func aFailForAnotherAttemptFromAnotherConnectionOrForAJobNotLeasedIsStale() throws {
        var driver = StateDriver()
        driver.accept()
        driver.accept()
        let waiting = driver.accept()
        driver.register("w1", credit: 1)
        driver.register("w2", credit: 1)
        let lease = try unwrap(driver.dispatch())
        let other = try unwrap(driver.dispatch())
        let unknown = driver.newID()
        let now = driver.now
        func fail(_ id: ULID, attempt: UInt32, from connection: String) -> Transition? {
            let message = Fail(jobID: id, attempt: attempt, retryable: true, failure: FailureDetail(code: "internal", reason: "x"))
            return driver.plan { $0.planFail(message, from: StateDriver.identity(connection), now: now) }
        }
        #expect(fail(lease.job.id, attempt: 2, from: lease.worker) == nil, "another attempt")
        #expect(fail(lease.job.id, attempt: 0, from: lease.worker) == nil, "another attempt")
        #expect(fail(lease.job.id, attempt: 1, from: other.worker) == nil, "another worker's connection")
        #expect(fail(lease.job.id, attempt: 1, from: "stranger") == nil, "a connection that never sent READY")
        #expect(fail(waiting.id, attempt: 0, from: lease.worker) == nil, "a job waiting in the queue")
        #expect(fail(waiting.id, attempt: 1, from: lease.worker) == nil, "a job waiting in the queue")
        #expect(fail(unknown, attempt: 1, from: lease.worker) == nil, "an unknown job")
        #expect(fail(lease.job.id, attempt: 1, from: lease.worker) != nil, "the current attempt from its worker counts")
    }

    @Test(arguments: [0.0, 0.25, 0.5, 0.75, 1.0])
    func aRetryableFailureWithAttemptsLeftIsRetriedAfterAJitteredExponentialBackoff(unit: Double) throws {
        var driver = StateDriver(random: { unit })
        let job = driver.accept()
        driver.register("w1", credit: 3)
        var base: Double = 1_000
        for attempt in 1...2 {
            let lease = try unwrap(driver.dispatch())
            #expect(lease.job.attempt == UInt32(attempt))
            let t = try unwrap(driver.fail(lease, code: "store.unreachable", reason: "no STORED"))
            #expect(t.events.map(\.kind) == [.failed, .retrying])
            #expect(t.events[0].attempt == UInt32(attempt))
            #expect(t.events[0].workerID == "w1")
            #expect(t.events[0].failure == FailureDetail(code: "store.unreachable", reason: "no STORED"))
            #expect(t.events[1].attempt == UInt32(attempt + 1))
            #expect(t.events[1].failure?.code == "store.unreachable")
            #expect(t.events[1].failure?.reason.hasSuffix(": no STORED") == true)
            #expect(t.failed == 1)
            guard case let .requeue(requeued, notBefore, failure) = try unwrap(t.writes.first), t.writes.count == 1 else {
                Issue.record("expected one requeue, got \(t.writes)")
                return
            }
            #expect(requeued.id == job.id && requeued.attemptBase == 0)
            #expect(failure?.code == "store.unreachable")
            let delay = notBefore - driver.now.wall
            #expect(delay == UInt64(base * (1 + 0.25 * (2 * unit - 1))))
            #expect(Double(delay) >= base * 0.75 && Double(delay) <= base * 1.25)
            #expect(driver.state.ready.nextDelayedTime == notBefore)
            driver.advance(delay)
            driver.state.promote(now: driver.now)
            base *= 2
        }
    }

    @Test func theBackoffStopsGrowingAtTheCap() {
        let policy = RetryPolicy(maxAttempts: 50, backoffBase: 1_000, backoffCap: 60_000, jitter: 0.25)
        #expect(policy.backoff(afterUsing: 6, unit: 0.5) == 32_000)
        #expect(policy.backoff(afterUsing: 7, unit: 0.5) == 60_000)
        #expect(policy.backoff(afterUsing: 45, unit: 1) == 75_000)
        #expect(policy.backoff(afterUsing: 45, unit: 0) == 45_000)
        // A random number out of range is clamped to the jitter's bounds.
        #expect(policy.backoff(afterUsing: 1, unit: 7) == 1_250)
        #expect(policy.backoff(afterUsing: 1, unit: -3) == 750)
    }

    @Test func aRetryableFailureOnTheLastAttemptMakesTheJobDeadSayingHowManyItUsed() throws {
        var driver = StateDriver(policy: RetryPolicy(maxAttempts: 2, backoffBase: 0, backoffCap: 0, jitter: 0))
        let job = driver.accept()
        driver.register("w1", credit: 2)
        driver.fail(try unwrap(driver.dispatch()))
        let last = try unwrap(driver.dispatch())
        #expect(last.job.attempt == 2)
        let t = try unwrap(driver.fail(last, reason: "still broken"))
        #expect(t.events.map(\.kind) == [.failed, .dead])
        #expect(t.events[1].attempt == 2)
        #expect(t.events[1].failure?.reason == "gave up after 2 attempt(s): still broken")
        guard case let .bury(buried, failure, _) = try unwrap(t.writes.first) else {
            Issue.record("expected a bury, got \(t.writes)")
            return
        }
        #expect(buried.id == job.id)
        #expect(failure.reason == "gave up after 2 attempt(s): still broken")
        #expect(driver.state.deadCount == 1)
        #expect(driver.state.place(of: job.id) == nil)
        #expect(driver.state.workers["w1"]?.jobs.isEmpty == true)
    }

    @Test func aNonRetryableFailureMakesTheJobDeadAtOnceWithItsOwnReason() throws {
        var driver = StateDriver()
        let job = driver.accept()
        driver.register("w1", credit: 1)
        let lease = try unwrap(driver.dispatch())
        let message = Fail(jobID: job.id, attempt: 1, retryable: false,
                           failure: FailureDetail(stepIndex: 2, step: "crop:600x600+0+0", code: "image.invalid-argument",
                                                  reason: "rectangle exceeds image 500x400"))
        let now = driver.now
        let t = try unwrap(driver.plan { $0.planFail(message, from: StateDriver.identity(lease.worker), now: now) })
        driver.apply(t)
        #expect(t.events.map(\.kind) == [.failed, .dead])
        #expect(t.events[1].failure == message.failure)
        #expect(t.writes == [.bury(lease.job, failure: message.failure, at: now.wall)])
        #expect(driver.state.deadCount == 1)
        #expect(driver.state.depth == 0)
    }

    @Test func aJobHandedBackByAStoppingWorkerIsRequeuedAtOnceWithoutCountingTheAttempt() throws {
        var driver = StateDriver(policy: RetryPolicy(maxAttempts: 1, backoffBase: 1_000, backoffCap: 1_000, jitter: 0))
        let job = driver.accept()
        driver.register("w1", credit: 1)
        let lease = try unwrap(driver.dispatch())
        let t = try unwrap(driver.fail(lease, code: FailureDetail.Code.workerShutdown, reason: "worker is shutting down"))
        #expect(t.events.map(\.kind) == [.retrying])
        #expect(t.events[0].attempt == 2)
        #expect(t.events[0].failure?.code == FailureDetail.Code.workerShutdown)
        #expect(t.events[0].failure?.reason.contains("not counted") == true)
        #expect(t.failed == 0)
        var requeued = lease.job
        requeued.attemptBase = 1
        #expect(t.writes == [.requeue(requeued, notBefore: 0, failure: FailureDetail(code: FailureDetail.Code.workerShutdown,
                                                                                       reason: "worker is shutting down"))])
        #expect(driver.state.place(of: job.id) == .waiting(requeued))
        #expect(requeued.attemptsUsed == 0)

        // With one attempt allowed, the next dispatch is the job's first counted one.
        driver.register("w2", credit: 1)
        let second = try unwrap(driver.dispatch())
        #expect(second.job.attempt == 2)
        let dead = try unwrap(driver.fail(second, reason: "no STORED"))
        #expect(dead.events.last?.failure?.reason == "gave up after 1 attempt(s): no STORED")
    }

    // MARK: DONE

    /// Where the job is when its DONE arrives, and who sends it.
    enum DoneCase: String, CaseIterable {
        case leasedFromItsWorker, leasedEarlierAttempt, leasedFromAnotherWorker, leasedFromAStranger
        case held, waitingAfterARetry, dead
    }

    @Test(arguments: DoneCase.allCases)
    func aDoneFromAnyAttemptAndAnyConnectionCompletesAnUnfinishedJob(_ place: DoneCase) throws {
        var driver = StateDriver(policy: RetryPolicy(maxAttempts: 1, backoffBase: 0, backoffCap: 0, jitter: 0))
        let job = driver.accept(source: "x.jpg")
        driver.register("w1", credit: 1)
        driver.register("w2", credit: 1)
        let lease = try unwrap(driver.dispatch())
        var attempt: UInt32 = 1
        var sender = lease.worker
        var dead: JobHandle?
        switch place {
        case .leasedFromItsWorker:
            break
        case .leasedEarlierAttempt:
            // The worker reports attempt 1 of a job now at attempt 2 (on the same worker).
            driver.register(lease.worker, connection: "again", slots: 4)
            let now = driver.now
            driver.apply(driver.plan { $0.planSettle(lease.worker, holding: [], now: now) })
            _ = driver.state.grant(1, worker: lease.worker)
            _ = driver.state.grant(1, worker: "w2")
            let again = try unwrap(driver.dispatch())
            #expect(again.job.attempt == 2)
            sender = again.worker == lease.worker ? "again" : again.worker
        case .leasedFromAnotherWorker:
            sender = lease.worker == "w1" ? "w2" : "w1"
        case .leasedFromAStranger:
            sender = "stranger"
        case .held:
            driver.register(lease.worker, connection: "new")
            sender = "stranger"
        case .waitingAfterARetry:
            driver.fail(lease, code: FailureDetail.Code.workerShutdown)
        case .dead:
            driver.fail(lease, retryable: false)
            dead = lease.job
            attempt = 1
            sender = "stranger"
        }
        let record = driver.newID()
        let done = Done(jobID: job.id, attempt: attempt, recordID: record)
        let now = driver.now
        let identity = StateDriver.identity(sender)
        let t = try unwrap(driver.plan { $0.planDone(done, from: identity, dead: dead, now: now) })
        #expect(t.events.map(\.kind) == [.stored])
        #expect(t.events[0].attempt == attempt)
        #expect(t.events[0].recordID == record)
        #expect(t.events[0].workerID.isEmpty == false || place == .waitingAfterARetry || place == .dead)
        #expect(t.stored == 1)
        guard case .delete(let deleted) = try unwrap(t.writes.first), t.writes.count == 1 else {
            Issue.record("expected one delete, got \(t.writes)")
            return
        }
        #expect(deleted.id == job.id)
        let deadBefore = driver.state.deadCount
        driver.apply(t)
        #expect(driver.state.place(of: job.id) == nil)
        #expect(driver.state.deadCount == deadBefore - (place == .dead ? 1 : 0))
        #expect(driver.state.workers.values.allSatisfy { !$0.jobs.contains(job.id) })
        #expect(driver.state.held.isEmpty)

        // The job is finished now: a second DONE (any attempt, anyone) is ignored.
        check(driver.plan { $0.planDone(done, from: identity, dead: nil, now: now) } == nil)
        check(driver.plan { $0.planDone(Done(jobID: job.id, attempt: 9, recordID: record),
                                        from: StateDriver.identity("w1"), dead: nil, now: now) } == nil)
    }

    @Test func aDoneForAnUnknownJobIsIgnored() throws {
        var driver = StateDriver()
        let job = driver.accept()
        let now = driver.now
        let unknown = Done(jobID: driver.newID(), attempt: 1, recordID: driver.newID())
        check(driver.plan { $0.planDone(unknown, from: StateDriver.identity("w1"), dead: nil, now: now) } == nil)
        // A dead handle for another job does not stand in for the unknown one.
        check(driver.plan { $0.planDone(unknown, from: StateDriver.identity("w1"), dead: job, now: now) } == nil)
    }

    // MARK: Lost workers

    @Test func aLostWorkersJobsAreRequeuedAtOnceAndCountedAndTheWorkerIsForgotten() throws {
        var driver = StateDriver(policy: RetryPolicy(maxAttempts: 2, backoffBase: 5_000, backoffCap: 5_000, jitter: 0))
        let a = driver.accept()
        let b = driver.accept()
        driver.register("w1", credit: 1)
        let leaseA = try unwrap(driver.dispatch())
        #expect(leaseA.job.id == a.id)
        // b uses one of its two attempts on w0 first.
        driver.register("w0", credit: 1)
        let onW0 = try unwrap(driver.dispatch())
        #expect(onW0.job.id == b.id)
        driver.fail(onW0)
        driver.advance(5_000)
        driver.state.promote(now: driver.now)
        _ = driver.state.grant(1, worker: "w1")
        let secondB = try unwrap(driver.dispatch())
        #expect(secondB.job.id == b.id && secondB.job.attempt == 2 && secondB.worker == "w1")

        let now = driver.now
        let t = driver.plan { $0.planLost("w1", reason: "worker w1 stopped answering", now: now) }
        #expect(t.events.map(\.kind) == [.failed, .retrying, .failed, .dead])
        #expect(t.events.map(\.jobID) == [a.id, a.id, b.id, b.id])
        #expect(t.events.filter { $0.kind == .failed }.allSatisfy { $0.failure?.code == FailureDetail.Code.workerLost && $0.workerID == "w1" })
        #expect(t.events[3].failure?.reason == "gave up after 2 attempt(s): worker w1 stopped answering")
        #expect(t.failed == 2)
        #expect(t.writes.contains(.requeue(leaseA.job, notBefore: 0, failure: FailureDetail(code: FailureDetail.Code.workerLost,
                                                                                               reason: "worker w1 stopped answering"))))
        driver.apply(t)
        #expect(driver.state.workers["w1"] == nil)
        #expect(driver.state.workerID(for: StateDriver.identity("w1")) == nil)
        #expect(driver.state.workers["w0"] != nil, "other workers stay")
        #expect(driver.state.place(of: a.id) == .waiting(leaseA.job))
        #expect(driver.state.deadCount == 1)
    }

    // MARK: Reclaim

    /// A state as a broker finds it at start: two leases and a queued job.
    private func restarted() -> (driver: StateDriver, leases: [Lease], queued: JobHandle) {
        var loaded = BrokerState.Loaded()
        let one = JobHandle(id: StateDriver.id(1), priority: 9, source: "one.jpg", rowID: 1, attempt: 1)
        let two = JobHandle(id: StateDriver.id(2), priority: 9, source: "two.jpg", rowID: 2, attempt: 3, attemptBase: 1)
        let queued = JobHandle(id: StateDriver.id(3), priority: 0, source: "three.jpg", rowID: 3)
        loaded.leased = [Lease(job: one, worker: "w1"), Lease(job: two, worker: "w2")]
        loaded.queued = [(queued, 0)]
        loaded.eventSeq = 40
        loaded.lastRowID = 3
        return (StateDriver(loaded: loaded, firstID: 10), loaded.leased, queued)
    }

    @Test func atStartEveryLeasedJobIsHeldForItsWorkerUntilTheReclaimWindowEnds() throws {
        let (start, leases, queued) = restarted()
        var driver = start
        #expect(driver.state.held.count == 2)
        for lease in leases {
            #expect(driver.state.place(of: lease.job.id) == .held(HeldLease(lease: lease, deadline: driver.now.monotonic + 6_000)))
        }
        #expect(driver.state.nextHoldDeadline == driver.now.monotonic + 6_000)
        // Another worker gets only the queued job.
        driver.register("w3", credit: 4)
        expectEqual(driver.dispatchAll().map(\.job.id), [queued.id])

        driver.advance(5_999)
        let early = driver.now
        check(driver.plan { $0.planExpiredHolds(now: early) } == nil)
        driver.advance(1)
        let late = driver.now
        let t = try unwrap(driver.plan { $0.planExpiredHolds(now: late) })
        #expect(t.events.map(\.kind) == [.failed, .retrying, .failed, .retrying])
        #expect(t.events.map(\.jobID) == [leases[0].job.id, leases[0].job.id, leases[1].job.id, leases[1].job.id])
        let seq = driver.state.eventSeq
        #expect(t.events.map(\.seq) == [seq + 1, seq + 2, seq + 3, seq + 4])
        #expect(t.events[0].failure?.code == FailureDetail.Code.workerLost)
        #expect(t.events[0].failure?.reason.contains("w1") == true)
        #expect(t.events[1].attempt == 2 && t.events[3].attempt == 4)
        #expect(t.failed == 2)
        driver.apply(t)
        #expect(driver.state.held.isEmpty)
        expectEqual(driver.dispatchAll().map(\.job.attempt), [2, 4])
    }

    @Test func aWorkerWithHeldJobsIsSettledByItsFirstMessageKeepingWhatItListsAndRequeuingTheRestUncounted() throws {
        let (start, leases, _) = restarted()
        let extra = JobHandle(id: StateDriver.id(4), priority: 1, source: "four.jpg", rowID: 4, attempt: 2)
        // Three held jobs, all w1's here; the second one at attempt 3.
        var loaded = start.loaded()
        loaded.leased = [leases[0], Lease(job: leases[1].job, worker: "w1"), Lease(job: extra, worker: "w1")]
        loaded.lastRowID = 4
        var driver = StateDriver(loaded: loaded, firstID: 10)

        driver.register("fresh")
        // Every worker's first message after READY settles it, nothing held or not.
        #expect(driver.state.unsettledWorker(for: StateDriver.identity("fresh")) == "fresh")
        driver.settle("fresh", holding: [])
        #expect(driver.state.unsettledWorker(for: StateDriver.identity("fresh")) == nil)
        driver.register("w1", slots: 3)
        #expect(driver.state.unsettledWorker(for: StateDriver.identity("w1")) == "w1")

        let holding: [Holding.Entry] = [
            .init(jobID: leases[0].job.id, attempt: 1),           // kept
            .init(jobID: leases[1].job.id, attempt: 2),           // held at attempt 3: not this one
            .init(jobID: StateDriver.id(99), attempt: 1),         // unknown: ignored
        ]
        let now = driver.now
        let t = driver.plan { $0.planSettle("w1", holding: holding, now: now) }
        #expect(t.events.map(\.kind) == [.retrying, .retrying])
        #expect(t.events.map(\.jobID) == [leases[1].job.id, extra.id])
        #expect(t.events.map(\.attempt) == [4, 3])
        #expect(t.events.allSatisfy { $0.failure?.code == FailureDetail.Code.workerReconnected })
        #expect(t.events.allSatisfy { $0.failure?.reason.contains("not counted") == true })
        #expect(t.failed == 0)
        var second = leases[1].job
        second.attemptBase += 1
        var third = extra
        third.attemptBase += 1
        #expect(t.writes.map { write -> JobHandle? in
            if case .requeue(let job, 0, _) = write { return job }
            return nil
        } == [second, third])
        #expect(t.changes.contains(.lease(Lease(job: leases[0].job, worker: "w1"), usesCredit: false)))
        driver.apply(t)
        #expect(driver.state.unsettledWorker(for: StateDriver.identity("w1")) == nil)
        #expect(driver.state.place(of: leases[0].job.id) == .leased(Lease(job: leases[0].job, worker: "w1")))
        #expect(driver.state.workers["w1"]?.jobs == [leases[0].job.id])
        #expect(driver.state.workers["w1"]?.credit == 0, "a reclaimed job uses no credit")
        // The reclaimed job keeps its slot.
        _ = driver.state.grant(3, worker: "w1")
        #expect(driver.state.workers["w1"]?.credit == 2)
        #expect(driver.state.held.isEmpty)
    }

    @Test func settlingWithoutHoldingRequeuesEveryHeldJobUncounted() throws {
        let (start, leases, _) = restarted()
        var driver = start
        driver.register("w1")
        let now = driver.now
        let t = driver.plan { $0.planSettle("w1", holding: [], now: now) }
        #expect(t.events.map(\.kind) == [.retrying])
        #expect(t.events.first?.jobID == leases[0].job.id)
        driver.apply(t)
        var requeued = leases[0].job
        requeued.attemptBase = 1
        #expect(driver.state.place(of: requeued.id) == .waiting(requeued))
        // w2's held job is not w1's to settle.
        #expect(driver.state.place(of: leases[1].job.id) == .held(HeldLease(lease: leases[1], deadline: now.monotonic + 6_000)))
    }

    @Test func aWorkerOnANewConnectionRetiresTheOldOneWhoseLeasesWaitForTheReconnectWindow() throws {
        var driver = StateDriver()
        let a = driver.accept()
        let b = driver.accept()
        driver.register("w1", credit: 2)
        let leases = driver.dispatchAll()
        #expect(leases.count == 2)

        let forgotten = driver.register("w1", connection: "w1-again", slots: 4)
        #expect(forgotten == [StateDriver.identity("w1")])
        #expect(driver.state.workerID(for: StateDriver.identity("w1")) == nil)
        #expect(driver.state.workerID(for: StateDriver.identity("w1-again")) == "w1")
        #expect(driver.state.unsettledWorker(for: StateDriver.identity("w1-again")) == "w1")
        #expect(driver.state.leases.isEmpty)
        for lease in leases {
            #expect(driver.state.place(of: lease.job.id) == .held(HeldLease(lease: lease, deadline: driver.now.monotonic + 3_000)))
        }
        #expect(driver.state.workers["w1"]?.jobs.isEmpty == true && driver.state.workers["w1"]?.credit == 0)

        // While held, a FAIL for its attempt counts from any connection, the old one included.
        let fail = try unwrap(driver.fail(leases[0], from: "w1"))
        #expect(fail.events.map(\.kind) == [.failed, .retrying])
        if case .waiting = driver.state.place(of: a.id) {} else { Issue.record("a's failure did not requeue it") }

        // The other is requeued, counted, when the window passes unsettled.
        driver.advance(3_000)
        let now = driver.now
        let expired = try unwrap(driver.plan { $0.planExpiredHolds(now: now) })
        #expect(expired.events.map(\.jobID) == [b.id, b.id])
        #expect(expired.events.first?.failure?.code == FailureDetail.Code.workerLost)
    }

    @Test func aSecondReadyOnTheSameConnectionHoldsItsJobsAndForgetsNoConnection() throws {
        var driver = StateDriver()
        driver.accept()
        driver.register("w1", credit: 1)
        let lease = try unwrap(driver.dispatch())
        check(driver.register("w1").isEmpty)
        #expect(driver.state.place(of: lease.job.id) == .held(HeldLease(lease: lease, deadline: driver.now.monotonic + 3_000)))
        #expect(driver.state.unsettledWorker(for: StateDriver.identity("w1")) == "w1")
    }

    // MARK: Dead letters

    @Test func deadRetryRequeuesWithAFreshBudgetAndDeadDiscardDeletes() throws {
        var driver = StateDriver()
        let job = driver.accept()
        let other = driver.accept()
        driver.register("w1", credit: 2)
        for lease in driver.dispatchAll() { driver.fail(lease, retryable: false) }
        #expect(driver.state.deadCount == 2)
        var dead = job
        dead.attempt = 1
        var otherDead = other
        otherDead.attempt = 1

        let now = driver.now
        let revive = driver.plan { $0.planRevive([dead], now: now) }
        var revived = dead
        revived.attemptBase = 1
        #expect(revive.writes == [.revive(revived)])
        #expect(revive.events.map(\.kind) == [.revived])
        #expect(revive.events.first?.attempt == 2)
        driver.apply(revive)
        #expect(driver.state.place(of: job.id) == .waiting(revived))
        #expect(driver.state.deadCount == 1)

        let discard = driver.plan { $0.planDiscard([otherDead], now: now) }
        #expect(discard.writes == [.delete(otherDead)])
        #expect(discard.events.map(\.kind) == [.discarded])
        driver.apply(discard)
        #expect(driver.state.deadCount == 0)
    }

    @Test func aWaitingJobWhoseInputCannotBeReadIsBuried() throws {
        var driver = StateDriver()
        let job = driver.accept()
        let now = driver.now
        let failure = FailureDetail(code: "input.unreadable", reason: "gone")
        let t = try unwrap(driver.plan { $0.planBury(job.id, failure: failure, now: now) })
        #expect(t.writes == [.bury(job, failure: failure, at: now.wall)])
        #expect(t.events.map(\.kind) == [.dead])
        driver.apply(t)
        #expect(driver.state.deadCount == 1 && driver.state.depth == 0)
        check(driver.plan { $0.planBury(job.id, failure: failure, now: now) } == nil)
    }

    // MARK: Numbering

    @Test func eventSeqsAndRowidsContinueFromWhatWasLoaded() throws {
        var loaded = BrokerState.Loaded()
        loaded.eventSeq = 41
        loaded.lastRowID = 17
        var driver = StateDriver(loaded: loaded)
        let job = driver.accept()
        #expect(job.rowID == 18)
        #expect(driver.state.eventSeq == 42)
        driver.accept()
        #expect(driver.state.lastRowID == 19 && driver.state.eventSeq == 43)
        driver.register("w1", credit: 2)
        _ = driver.dispatchAll()
        let now = driver.now
        let lost = driver.plan { $0.planLost("w1", reason: "gone", now: now) }
        #expect(lost.events.map(\.seq) == [46, 47, 48, 49])
    }

    // MARK: Plans

    @Test func noPlanChangesTheState() throws {
        let (start, leases, queued) = restarted()
        var driver = start
        driver.register("w1", slots: 4)
        driver.register("w3", slots: 4, credit: 2)
        driver.accept(priority: 3)
        driver.accept(priority: 5, file: true, key: "k-1")
        let lease = try unwrap(driver.dispatch())
        driver.advance(10)
        let now = driver.now
        let snapshot = driver.state
        let id = driver.newID()
        _ = driver.plan { $0.planAccept(id: id, priority: 1, source: "s", options: .default, pipeline: "p", inlineInput: [1],
                                        inputFile: nil, inputBytes: 1, submitKey: "k", now: now) }
        _ = driver.plan { $0.planDispatch(now: now) }
        _ = driver.plan { $0.planDone(Done(jobID: lease.job.id, attempt: 1, recordID: id), from: StateDriver.identity("w3"), dead: nil, now: now) }
        _ = driver.plan { $0.planDone(Done(jobID: leases[1].job.id, attempt: 1, recordID: id), from: [], dead: nil, now: now) }
        _ = driver.plan { $0.planFail(Fail(jobID: lease.job.id, attempt: 1, retryable: true, failure: FailureDetail(code: "c", reason: "r")),
                                      from: StateDriver.identity("w3"), now: now) }
        _ = driver.plan { $0.planLost("w3", reason: "gone", now: now) }
        _ = driver.plan { $0.planSettle("w1", holding: [.init(jobID: leases[0].job.id, attempt: 1)], now: now) }
        _ = driver.plan { $0.planExpiredHolds(now: Moment(wall: now.wall + 60_000, monotonic: now.monotonic + 60_000)) }
        _ = driver.plan { $0.planBury(queued.id, failure: FailureDetail(code: "c", reason: "r"), now: now) }
        _ = driver.plan { $0.planRevive([queued], now: now) }
        _ = driver.plan { $0.planDiscard([queued], now: now) }
        #expect(driver.state == snapshot)
    }

    // MARK: Rebuilding after a lost turn

    @Test func restoreRebuildsTheStateAsItWasWhenTheMemoWasTaken() throws {
        var driver = StateDriver(policy: RetryPolicy(maxAttempts: 3, backoffBase: 10_000, backoffCap: 10_000, jitter: 0))
        // Before the memo: jobs queued, delayed, leased, held, dead and
        // stored (the newest one, so no remaining row has the highest rowid).
        driver.register("w1", slots: 4)
        driver.register("w2", slots: 4)
        for priority: UInt8 in [2, 2, 7, 0, 4, 4] { driver.accept(priority: priority) }
        _ = driver.state.grant(3, worker: "w1")
        _ = driver.state.grant(3, worker: "w2")
        var leases = driver.dispatchAll()
        #expect(leases.count == 6)
        driver.fail(leases.removeFirst())                      // delayed
        driver.fail(leases.removeFirst(), retryable: false)    // dead
        let newest = driver.accept(priority: 9)
        _ = driver.state.grant(1, worker: "w1")
        let stored = try unwrap(driver.dispatch())
        #expect(stored.job.id == newest.id)
        let now = driver.now
        let done = try unwrap(driver.plan { $0.planDone(Done(jobID: newest.id, attempt: 1, recordID: newest.id),
                                                        from: StateDriver.identity(stored.worker), dead: nil, now: now) })
        driver.apply(done)
        driver.register("w2", connection: "w2-again", slots: 2)        // w2's leases held
        driver.register("w3", slots: 2, credit: 1)
        driver.state.markStopping("w3")
        driver.advance(100)
        driver.state.promote(now: driver.now)
        // The database holds no row with the stored job's rowid any more.
        let committed = driver.loaded(lastRowID: newest.rowID - 1)

        let memo = driver.state.memo()
        let before = driver.state

        // The turn that is then lost: new jobs, dispatches, failures,
        // registrations, settlements, a lost worker.
        driver.accept(priority: 1)
        driver.accept(priority: 8, file: true, key: "lost")
        driver.register("w4", slots: 2, credit: 2)
        _ = driver.dispatchAll()
        let turnNow = driver.now
        driver.apply(driver.plan { $0.planSettle("w2", holding: [], now: turnNow) })
        driver.apply(driver.plan { $0.planLost("w1", reason: "gone", now: turnNow) })
        if let expired = driver.plan({ $0.planExpiredHolds(now: Moment(wall: turnNow.wall, monotonic: turnNow.monotonic + 10_000)) }) {
            driver.apply(expired)
        }
        #expect(driver.state != before)

        driver.state.restore(memo, loaded: committed, now: driver.now)
        #expect(driver.state == before)
        #expect(driver.state.lastRowID == newest.rowID, "rowids never go back: the stored job's is not handed out again")
        let id = driver.newID()
        let again = driver.plan { $0.planAccept(id: id, priority: 0, source: "s", options: .default, pipeline: "p", inlineInput: [1],
                                                inputFile: nil, inputBytes: 1, submitKey: nil, now: turnNow) }
        #expect(again.events.first?.seq == before.eventSeq + 1)
    }
}

/// Long runs of random messages, in the order the core may apply them,
/// with the state's invariants checked after every step and, now and then,
/// a turn thrown away and the state restored from its memo.
@Suite struct BrokerStateRunTests {
    /// SplitMix64: the same run for the same seed.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Every job's fate beyond what the state holds: accepted, dead, stored, discarded or cancelled.
    struct Ledger {
        var accepted: [ULID] = []
        var dead: [ULID: JobHandle] = [:]
        var stored: Set<ULID> = []
        var discarded: Set<ULID> = []
        var cancelled: Set<ULID> = []
        var connections = 0

        mutating func record(_ t: Transition) {
            for write in t.writes {
                switch write {
                case .bury(let job, _, _): dead[job.id] = job
                case .revive(let job): dead[job.id] = nil
                case .delete(let job) where t.events.contains(where: { $0.kind == .cancelled && $0.jobID == job.id }):
                    cancelled.insert(job.id)
                case .delete(let job):
                    if dead.removeValue(forKey: job.id) == nil || t.events.contains(where: { $0.kind == .stored && $0.jobID == job.id }) {
                        stored.insert(job.id)
                    } else {
                        discarded.insert(job.id)
                    }
                case .insert, .lease, .requeue, .requestCancel, .pause: break
                }
            }
        }
    }

    static let workerSlots: [String: UInt32] = ["w1": 1, "w2": 2, "w3": 3, "w4": 4]

    @Test(arguments: 1...24)
    func aRandomRunKeepsEveryInvariant(seed: UInt64) throws {
        var random = Seeded(state: seed)
        var driver = StateDriver(policy: RetryPolicy(maxAttempts: 3, backoffBase: 500, backoffCap: 4_000, jitter: 0.25),
                                 random: { 0.3 })
        var ledger = Ledger()
        var connection: [String: String] = [:]
        var saved: (memo: BrokerState.Memo, state: BrokerState, ledger: Ledger, connection: [String: String], now: Moment,
                    loaded: BrokerState.Loaded)?

        func apply(_ t: Transition) {
            driver.apply(t)
            ledger.record(t)
        }
        /// The core settles a worker's held jobs at its first message after READY.
        func settleIfDue(_ worker: String) {
            guard let name = connection[worker],
                  driver.state.unsettledWorker(for: StateDriver.identity(name)) == worker else { return }
            let mine = driver.state.held.values.filter { $0.lease.worker == worker }.sorted { $0.lease.job.id < $1.lease.job.id }
            let holding = mine.filter { _ in Bool.random(using: &random) }.map {
                Holding.Entry(jobID: $0.lease.job.id, attempt: $0.lease.job.attempt + (Bool.random(using: &random) ? 0 : 1))
            }
            let now = driver.now
            apply(driver.plan { $0.planSettle(worker, holding: holding, now: now) })
        }
        func anyJob() -> ULID? { ledger.accepted.randomElement(using: &random) }

        for step in 0..<400 {
            let now = driver.now
            let worker = Self.workerSlots.keys.sorted().randomElement(using: &random)!
            switch Int.random(in: 0..<108, using: &random) {
            case 0..<18:
                // A quarter with a deadline, a few seconds ahead (or already past).
                let expires = Int.random(in: 0..<4, using: &random) == 0 ? now.wall + UInt64.random(in: 0...6_000, using: &random) : 0
                ledger.accepted.append(driver.accept(priority: UInt8.random(in: 0...9, using: &random), expires: expires).id)
            case 18..<26:
                // READY, on a new connection or (rarely) the same one again.
                ledger.connections += 1
                let name = connection[worker] != nil && Int.random(in: 0..<4, using: &random) == 0
                    ? connection[worker]! : "\(worker)-\(ledger.connections)"
                connection[worker] = name
                driver.register(worker, connection: name, slots: Self.workerSlots[worker]!)
            case 26..<40:
                guard driver.state.workers[worker] != nil else { continue }
                settleIfDue(worker)
                _ = driver.state.grant(UInt32.random(in: 1...4, using: &random), worker: worker)
            case 40..<55:
                let paused = driver.state.pausedSince != nil
                // The core runs the timers before it dispatches, at the same time.
                if let t = driver.plan({ $0.planExpire(now: now) }) { apply(t) }
                let sent = driver.dispatchAll()
                #expect(!paused || sent.isEmpty, "\(sent.count) JOB(s) went out while paused at step \(step)")
                for lease in sent {
                    #expect(!lease.job.hasExpired(by: now.wall), "job \(lease.job.id) dispatched past its deadline at step \(step)")
                }
            case 55..<67:
                // DONE for any job, any attempt, from the worker or a stranger.
                guard let id = anyJob() else { continue }
                let sender = Bool.random(using: &random) ? connection[worker] ?? "stranger" : "stranger"
                if sender != "stranger" { settleIfDue(worker) }
                let done = Done(jobID: id, attempt: UInt32.random(in: 0...4, using: &random), recordID: id)
                let dead = driver.state.place(of: id) == nil ? ledger.dead[id] : nil
                if let t = driver.plan({ $0.planDone(done, from: StateDriver.identity(sender), dead: dead, now: now) }) {
                    #expect(!ledger.stored.contains(id), "a stored job is stored again")
                    apply(t)
                } else {
                    #expect(ledger.stored.contains(id) || ledger.discarded.contains(id) || ledger.cancelled.contains(id),
                            "the DONE of an unfinished job was ignored")
                }
            case 67..<79:
                // FAIL for a leased or held job, mostly its current attempt.
                let leased = Array(driver.state.leases.values) + driver.state.held.values.map(\.lease)
                guard let lease = leased.sorted(by: { $0.job.id < $1.job.id }).randomElement(using: &random) else { continue }
                let from = Bool.random(using: &random) ? lease.worker : worker
                let name = connection[from] ?? "stranger"
                if driver.state.workers[from] != nil { settleIfDue(from) }
                let code = [FailureDetail.Code.workerShutdown, "internal", "image.corrupt"].randomElement(using: &random)!
                let fail = Fail(jobID: lease.job.id, attempt: lease.job.attempt + (Int.random(in: 0..<5, using: &random) == 0 ? 1 : 0),
                                retryable: code != "image.corrupt", failure: FailureDetail(code: code, reason: "step \(step)"))
                if code == FailureDetail.Code.workerShutdown, let sender = driver.state.workerID(for: StateDriver.identity(name)) {
                    driver.state.markStopping(sender)
                }
                if let t = driver.plan({ $0.planFail(fail, from: StateDriver.identity(name), now: now) }) { apply(t) }
            case 79..<84:
                guard driver.state.workers[worker] != nil else { continue }
                apply(driver.plan { $0.planLost(worker, reason: "silent", now: now) })
                connection[worker] = nil
            case 84..<94:
                driver.advance(UInt64.random(in: 0...4_000, using: &random))
                driver.state.promote(now: driver.now)
                let later = driver.now
                if let t = driver.plan({ $0.planExpiredHolds(now: later) }) { apply(t) }
                if let t = driver.plan({ $0.planExpire(now: later) }) {
                    #expect(t.events.allSatisfy { $0.kind == .cancelled && $0.failure?.code == FailureDetail.Code.expired })
                    apply(t)
                }
                #expect(driver.state.ready.expired(by: later.wall).isEmpty, "a job past its deadline still waits at step \(step)")
            case 94..<97:
                let dead = ledger.dead.values.sorted { $0.id < $1.id }
                if Bool.random(using: &random) {
                    apply(driver.plan { $0.planRevive(dead, now: now) })
                } else {
                    apply(driver.plan { $0.planDiscard(dead, now: now) })
                }
            case 97..<101:
                // CANCEL of any job: a waiting or held one ends at once, a
                // running one when its worker answers or is lost.
                guard let id = anyJob() else { continue }
                switch driver.plan({ $0.planCancel(id, now: now) }) {
                case .cancelled(let t)?, .stopping(let t, _, _)?: apply(t)
                case nil: #expect(driver.state.place(of: id) == nil, "CANCEL found no unfinished job \(id) at step \(step)")
                }
            case 101..<105:
                // PAUSE or RESUME: a change only when dispatch is the other way.
                let pause = Bool.random(using: &random)
                let was = driver.state.pausedSince
                if let t = driver.plan({ $0.planPause(pause, now: now) }) {
                    #expect((was == nil) == pause, "PAUSE/RESUME changed nothing yet planned a change at step \(step)")
                    apply(t)
                    #expect(driver.state.pausedSince == (pause ? now.wall : nil))
                } else {
                    #expect((was == nil) != pause, "PAUSE/RESUME planned nothing at step \(step)")
                }
            default:
                // A turn is lost: from here, back to the memo taken earlier (or take one).
                if let saved {
                    driver.state.restore(saved.memo, loaded: saved.loaded, now: saved.now)
                    #expect(driver.state == saved.state, "restore at step \(step)")
                    ledger = saved.ledger
                    connection = saved.connection
                    driver.now = saved.now
                } else {
                    let rowIDs = (driver.state.ready.all.map(\.job.rowID) + driver.state.leases.values.map(\.job.rowID)
                                  + driver.state.held.values.map(\.lease.job.rowID) + ledger.dead.values.map(\.rowID))
                    saved = (driver.state.memo(), driver.state, ledger, connection, driver.now, driver.loaded(lastRowID: rowIDs.max() ?? 0))
                    continue
                }
                saved = nil
            }
            try expectInvariants(driver.state, ledger, step: step)
        }
    }

    private func expectInvariants(_ state: BrokerState, _ ledger: Ledger, step: Int) throws {
        let ready = Set(state.ready.all.map(\.job.id))
        let leased = Set(state.leases.keys)
        let held = Set(state.held.keys)
        let dead = Set(ledger.dead.keys)
        #expect(ready.isDisjoint(with: leased) && ready.isDisjoint(with: held) && leased.isDisjoint(with: held),
                "a job is in two places at step \(step)")
        #expect(dead.isDisjoint(with: ready.union(leased).union(held)), "a dead job is also unfinished at step \(step)")
        #expect(ledger.stored.isDisjoint(with: ready.union(leased).union(held).union(dead)), "a stored job is back at step \(step)")
        #expect(ledger.cancelled.isDisjoint(with: ready.union(leased).union(held).union(dead).union(ledger.stored)),
                "a cancelled job is back at step \(step)")
        #expect(ready.union(leased).union(held).union(dead).union(ledger.stored).union(ledger.discarded).union(ledger.cancelled)
                    == Set(ledger.accepted), "a job went missing at step \(step)")
        #expect(state.cancelling.isSubset(of: leased.union(held)), "a job being cancelled is not running at step \(step)")
        #expect(state.deadCount == dead.count, "dead count at step \(step)")
        #expect(state.depth == ready.count)
        for (id, lease) in state.leases {
            #expect(state.workers[lease.worker]?.jobs.contains(id) == true, "a lease's worker does not know it at step \(step)")
            #expect(lease.job.attempt >= 1)
        }
        for worker in state.workers.values {
            #expect(worker.jobs.allSatisfy { state.leases[$0]?.worker == worker.id }, "a worker holds a job not leased to it at step \(step)")
            #expect(worker.credit >= 0 && worker.credit + worker.jobs.count <= Int(worker.slots),
                    "worker \(worker.id) has credit \(worker.credit) with \(worker.jobs.count) of \(worker.slots) slots busy at step \(step)")
            #expect(!worker.stopping || worker.credit == 0)
            #expect(state.workerIDs[worker.identity] == worker.id, "the registry lost worker \(worker.id) at step \(step)")
        }
        for (identity, id) in state.workerIDs {
            #expect(state.workers[id]?.identity == identity, "a connection names a worker on another at step \(step)")
        }
        for job in state.ready.all.map(\.job) + state.leases.values.map(\.job) + state.held.values.map(\.lease.job) {
            #expect(job.attemptsUsed >= 0 && job.attemptsUsed <= 3, "job \(job.id) used \(job.attemptsUsed) attempts at step \(step)")
        }
    }
}
