@testable import DarkroomBroker
import DarkroomProtocol
import Testing

/// CANCEL decided by `BrokerState` alone: a waiting job ends at once, a
/// running one once its worker answers (or is lost), and a DONE that
/// comes first wins.
@Suite struct CancelStateTests {
    @Test func aWaitingJobIsCancelledAtOnceAndLeavesTheQueue() throws {
        var driver = StateDriver()
        let job = driver.accept()
        let now = driver.now
        guard case .cancelled(let t)? = driver.plan({ $0.planCancel(job.id, now: now) }) else {
            Issue.record("a waiting job is cancelled at once"); return
        }
        #expect(t.events.map(\.kind) == [.cancelled])
        #expect(t.events.first?.workerID == "")
        #expect(t.writes == [.delete(job)])
        #expect(t.cancelled == 1)
        driver.apply(t)
        #expect(driver.state.place(of: job.id) == nil)
        #expect(driver.state.depth == 0)
        // Nothing left to cancel, and nothing to dispatch.
        #expect(driver.plan { $0.planCancel(job.id, now: now) } == nil)
        driver.register("w1", credit: 1)
        #expect(driver.dispatch() == nil)
    }

    @Test func aRunningJobIsCancelledWhenItsWorkerAnswersAndIsNeverRetried() throws {
        var driver = StateDriver()
        let job = driver.accept()
        driver.register("w1", credit: 2)
        let lease = try unwrap(driver.dispatch())
        let now = driver.now
        guard case let .stopping(t, stopping, connection)? = driver.plan({ $0.planCancel(job.id, now: now) }) else {
            Issue.record("a leased job is stopped on its worker"); return
        }
        #expect(stopping == lease)
        #expect(connection == StateDriver.identity("w1"))
        // No event yet; the row is marked, so a restart asks again.
        #expect(t.events.isEmpty)
        #expect(t.writes == [.requestCancel(lease.job, at: now.wall)])
        driver.apply(t)
        #expect(driver.state.cancelling == [job.id])
        // Asking again changes nothing more.
        guard case let .stopping(again, _, _)? = driver.plan({ $0.planCancel(job.id, now: now) }) else {
            Issue.record("still stopping"); return
        }
        #expect(again.isEmpty)

        // The worker's FAIL, retryable or not, ends it cancelled.
        let answer = try unwrap(driver.fail(lease, retryable: true, code: FailureDetail.Code.cancelled))
        #expect(answer.events.map(\.kind) == [.cancelled])
        #expect(answer.events.first?.workerID == "w1" && answer.events.first?.attempt == 1)
        #expect(answer.writes == [.delete(lease.job)])
        #expect(answer.failed == 0)
        #expect(driver.state.cancelling.isEmpty)
        #expect(driver.state.place(of: job.id) == nil)
        #expect(driver.state.deadCount == 0)
        #expect(driver.state.workers["w1"]?.jobs.isEmpty == true)
    }

    @Test func aLostWorkerEndsItsCancellingJobCancelledAndRequeuesTheOthers() throws {
        var driver = StateDriver()
        let a = driver.accept()
        let b = driver.accept()
        driver.register("w1", credit: 2)
        _ = driver.dispatchAll()
        let now = driver.now
        guard case let .stopping(t, _, _)? = driver.plan({ $0.planCancel(a.id, now: now) }) else {
            Issue.record("stopping"); return
        }
        driver.apply(t)
        let lost = driver.plan { $0.planLost("w1", reason: "worker w1 stopped answering", now: now) }
        #expect(lost.events.filter { $0.jobID == a.id }.map(\.kind) == [.cancelled])
        #expect(lost.events.filter { $0.jobID == b.id }.map(\.kind) == [.failed, .retrying])
        driver.apply(lost)
        #expect(driver.state.cancelling.isEmpty)
        #expect(driver.state.place(of: a.id) == nil)
        if case .waiting? = driver.state.place(of: b.id) {} else { Issue.record("b is queued again") }
    }

    @Test func aDoneThatComesFirstStoresTheJob() throws {
        var driver = StateDriver()
        let job = driver.accept()
        driver.register("w1", credit: 1)
        let lease = try unwrap(driver.dispatch())
        let now = driver.now
        guard case let .stopping(t, _, _)? = driver.plan({ $0.planCancel(job.id, now: now) }) else {
            Issue.record("stopping"); return
        }
        driver.apply(t)
        let done = Done(jobID: job.id, attempt: lease.job.attempt, recordID: StateDriver.id(999))
        let stored = try unwrap(driver.plan { $0.planDone(done, from: StateDriver.identity("w1"), dead: nil, now: now) })
        #expect(stored.events.map(\.kind) == [.stored])
        driver.apply(stored)
        #expect(driver.state.cancelling.isEmpty)
    }

    @Test func aReconnectedWorkerIsAskedAgainAndOneThatComesBackWithoutTheJobEndsItCancelled() throws {
        var driver = StateDriver()
        let a = driver.accept()
        let b = driver.accept()
        driver.register("w1", credit: 2)
        let leases = driver.dispatchAll()
        let now = driver.now
        for id in [a.id, b.id] {
            guard case let .stopping(t, _, _)? = driver.plan({ $0.planCancel(id, now: now) }) else {
                Issue.record("stopping"); return
            }
            driver.apply(t)
        }
        // The worker reconnects, still holding a but not b.
        _ = driver.register("w1", connection: "w1-again", credit: 0)
        let held = leases.filter { $0.job.id == a.id }.map { Holding.Entry(jobID: $0.job.id, attempt: $0.job.attempt) }
        let settle = driver.plan { $0.planSettle("w1", holding: held, now: now) }
        #expect(settle.events.filter { $0.jobID == b.id }.map(\.kind) == [.cancelled])
        #expect(!settle.events.contains { $0.jobID == a.id })
        driver.apply(settle)
        #expect(driver.state.cancelling == [a.id])
        #expect(driver.state.cancellingLeases(of: "w1").map(\.job.id) == [a.id])
    }

    @Test func cancellingTheQueueTakesEveryWaitingJobAndNoRunningOne() throws {
        var driver = StateDriver()
        let running = driver.accept()
        driver.register("w1", credit: 1)
        _ = try unwrap(driver.dispatch())
        let waiting = [driver.accept(), driver.accept(priority: 9), driver.accept()]
        let now = driver.now
        let t = driver.plan { $0.planCancelQueued(now: now) }
        #expect(t.cancelled == 3)
        #expect(Set(t.events.map(\.jobID)) == Set(waiting.map(\.id)))
        #expect(t.events.allSatisfy { $0.kind == .cancelled })
        driver.apply(t)
        #expect(driver.state.depth == 0)
        if case .leased? = driver.state.place(of: running.id) {} else { Issue.record("the running job is untouched") }
    }
}
