import DarkroomCore
import DarkroomProtocol
@testable import DarkroomWorker
import DarkroomZMQ
import Foundation
import Testing

@Suite("Worker across broker restarts")
struct ReconnectTests {
    @Test func brokerThatComesBackHearsWhichJobTheWorkerStillRuns() throws {
        let context = try Context()
        let first = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: first, store: store.endpoint, concurrency: 3, heartbeat: .milliseconds(300))
        defer { worker.stop(grace: .zero) }
        let session = try #require(try first.handshake())
        #expect(session.credit == 3)

        // The job waits for STORED, which the test holds back.
        let job = Fixture.job(attempt: 2)
        try first.send(.job(job), to: session.identity)
        let (storeIdentity, request) = try #require(try store.nextStore())

        // The broker goes away, as when it is killed, and comes back on the
        // same endpoint knowing none of the worker's connections.
        first.router.socket.close()
        let second = try TestBroker.rebind(context, first.endpoint)
        let reopened = try #require(try second.awaitSession())
        #expect(reopened.identity != session.identity)
        #expect(reopened.ready.workerID == session.ready.workerID)
        // READY, then HOLDING with the job at the attempt of its JOB, then
        // CREDIT for the two slots that are free.
        #expect(reopened.opening == [
            .holding(Holding(jobs: [Holding.Entry(jobID: job.jobID, attempt: 2)])),
            .credit(Credit(count: 2)),
        ])

        // The job finishes on the new connection.
        let record = try store.answer(request, from: storeIdentity)
        let done = try #require(try second.next())
        #expect(done.message == .done(Done(jobID: job.jobID, attempt: 2, recordID: record)))
    }

    @Test func reportMadeWhileTheBrokerWasAwayIsListedThenSent() throws {
        let context = try Context()
        let first = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: first, store: store.endpoint, concurrency: 3, heartbeat: .milliseconds(300))
        defer { worker.stop(grace: .zero) }
        let session = try #require(try first.handshake())
        let job = Fixture.job()
        try first.send(.job(job), to: session.identity)
        let (storeIdentity, request) = try #require(try store.nextStore())

        // The broker goes away; the job is stored meanwhile, and its DONE
        // goes out on a connection that is down. The worker gives that
        // connection up for silence, and with it whatever it had queued.
        first.router.socket.close()
        let record = try store.answer(request, from: storeIdentity)
        #expect(eventually { worker.status.done == 1 && worker.status.sessions >= 2 })

        // The broker comes back: the DONE is listed in HOLDING, then sent,
        // and the CREDIT covers every slot.
        let second = try TestBroker.rebind(context, first.endpoint)
        let reopened = try #require(try second.awaitSession())
        #expect(reopened.opening == [
            .holding(Holding(jobs: [Holding.Entry(jobID: job.jobID, attempt: 1)])),
            .done(Done(jobID: job.jobID, attempt: 1, recordID: record)),
            .credit(Credit(count: 3)),
        ])
    }

    @Test func reportSentJustBeforeTheBrokerDiedIsListedAgainAfterDisconnect() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: broker, store: store.endpoint, concurrency: 3, heartbeat: .seconds(1))
        defer { worker.stop(grace: .zero) }
        let session = try #require(try broker.handshake())
        let job = Fixture.job()
        try broker.send(.job(job), to: session.identity)
        let (storeIdentity, request) = try #require(try store.nextStore())
        let record = try store.answer(request, from: storeIdentity)

        // The DONE reaches the broker, which is killed before it commits it.
        let done = try #require(try broker.next())
        #expect(done.message == .done(Done(jobID: job.jobID, attempt: 1, recordID: record)))
        // The broker that takes its place knows no connection, and the first
        // thing the worker hears from it is DISCONNECT (played here on the
        // same socket).
        try broker.send(.disconnect, to: session.identity)

        // The DONE may have died with the old broker: it is listed in HOLDING
        // and sent again on the new connection.
        let reopened = try #require(try broker.awaitSession())
        #expect(reopened.opening == [
            .holding(Holding(jobs: [Holding.Entry(jobID: job.jobID, attempt: 1)])),
            .done(Done(jobID: job.jobID, attempt: 1, recordID: record)),
            .credit(Credit(count: 3)),
        ])
    }

    @Test func longestBrokerSilenceIsTheLongestGapBetweenMessages() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: broker, store: store.endpoint, heartbeat: .seconds(1))
        defer { worker.stop(grace: .zero) }
        let session = try #require(try broker.handshake())
        #expect(worker.status.longestBrokerSilence < .seconds(3))

        // A broker that talks often, then stalls for half a second.
        for _ in 0..<5 {
            try broker.send(.heartbeat, to: session.identity)
            Thread.sleep(forTimeInterval: 0.02)
        }
        Thread.sleep(forTimeInterval: 0.5)
        try broker.send(.heartbeat, to: session.identity)
        #expect(eventually { worker.status.longestBrokerSilence >= .milliseconds(500) })
        // Liveness is 3 s, so nothing longer has been seen on this connection.
        #expect(worker.status.longestBrokerSilence < .seconds(3))
        #expect(worker.status.sessions == 1)
    }

    @Test func stopLineShowsTheSilenceInHundredthsOfASecond() {
        #expect(WorkerLoop.seconds(.milliseconds(405)) == "0.41 s")
        #expect(WorkerLoop.seconds(.milliseconds(60)) == "0.06 s")
        #expect(WorkerLoop.seconds(.zero) == "0.00 s")
        #expect(WorkerLoop.seconds(.milliseconds(1_999)) == "2.00 s")
    }
}
