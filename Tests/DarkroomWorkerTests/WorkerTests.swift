import DarkroomCore
import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import DarkroomWorker
import DarkroomZMQ
import Foundation
import Testing

@Suite("Worker against a broker and a store played by the test")
struct WorkerTests {
    @Test func readyThenCreditForEverySlot() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: broker, store: store.endpoint, concurrency: 3)
        defer { worker.stop(grace: .zero) }

        let session = try #require(try broker.handshake())
        #expect(session.ready.slots == 3)
        #expect(session.ready.workerID == worker.configuration.workerID)
        #expect(session.ready.pid == UInt32(ProcessInfo.processInfo.processIdentifier))
        #expect(!session.ready.host.isEmpty)
        #expect(session.credit == 3)
    }

    @Test func byDefaultTheMostSlotsAreDeclaredAndTheStartingTargetGranted() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let configuration = WorkerConfiguration(backendEndpoint: broker.endpoint, storeEndpoint: store.endpoint, concurrency: 1,
                                                inputBudget: 256 << 20)
        let worker = Worker(configuration, context: context, logger: Logger("worker-test", minimum: .warn))
        try worker.start()
        defer { worker.stop(grace: .zero) }

        let session = try #require(try broker.handshake())
        // The slots bound the credit; the credit target (two jobs per
        // thread before anything is measured) decides what is granted.
        #expect(session.ready.slots == Wire.Limit.maxSlots)
        #expect(session.credit == 2)
        #expect(worker.status.slots == Int(Wire.Limit.maxSlots))
        #expect(worker.status.threads == 1)
        #expect(worker.status.creditTarget == 2)
        #expect(worker.status.inputBudget == 256 << 20)
    }


    @Test func successfulJobIsStoredThenDone() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, store, worker, session) = (rig.broker, rig.store, rig.worker, rig.session)

        let job = Fixture.job(source: "photos/tiny.jpg")
        try broker.send(.job(job), to: session.identity)

        let (storeIdentity, request) = try #require(try store.nextStore())
        #expect(request.jobID == job.jobID)
        #expect(request.sourceName == "photos/tiny.jpg")
        #expect(request.pipeline == (try Pipeline(parsing: job.pipeline)).canonical)
        #expect(request.fullSize == ImageSize(width: 64, height: 64))
        #expect(request.thumbnailSize == ImageSize(width: 32, height: 32))
        // The bytes are real JPEGs of the announced sizes.
        #expect(try JPEG.readHeader(request.full).uprightSize == Size(width: 64, height: 64))
        #expect(try JPEG.readHeader(request.thumbnail).uprightSize == Size(width: 32, height: 32))

        let record = try store.answer(request, from: storeIdentity)
        let done = try #require(try broker.next())
        #expect(done.message == .done(Done(jobID: job.jobID, attempt: 1, recordID: record)))
        let credit = try #require(try broker.next())
        #expect(credit.message == .credit(Credit(count: 1)))
        #expect(worker.status.done == 1)
    }

    @Test func corruptJPEGFailsAtDecodeForGood() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, session) = (rig.broker, rig.session)

        let truncated = Array(Fixture.jpeg.prefix(Fixture.jpeg.count / 2))
        let job = Fixture.job(image: truncated, attempt: 2)
        try broker.send(.job(job), to: session.identity)

        let reply = try #require(try broker.next())
        guard case .fail(let fail) = reply.message else {
            Issue.record("expected FAIL, got \(reply.message)")
            return
        }
        #expect(fail.jobID == job.jobID)
        #expect(fail.attempt == 2)
        #expect(!fail.retryable)
        #expect(fail.failure.stepIndex == 0)
        #expect(fail.failure.step == "")
        #expect(fail.failure.code == "image.truncated" || fail.failure.code == "image.corrupt")
        #expect(fail.failure.reason.hasPrefix("decode: "))
        #expect(fail.failure.reason.contains("truncated") || fail.failure.reason.contains("corrupt"))
        #expect(try broker.next()?.message == .credit(Credit(count: 1)))
    }

    @Test func garbageImageIsJustAFailedJob() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, session) = (rig.broker, rig.session)

        let job = Fixture.job(image: Array("definitely not a jpeg".utf8))
        try broker.send(.job(job), to: session.identity)
        guard case .fail(let fail) = try #require(try broker.next()).message else {
            Issue.record("expected FAIL")
            return
        }
        #expect(!fail.retryable)
        #expect(fail.failure.code == "image.unsupported-format")
        #expect(fail.failure.reason == "decode: not a JPEG, PNG, WebP, GIF, HEIF or TIFF image (starts with 64 65 66 69)")
        #expect(try broker.next()?.message == .credit(Credit(count: 1)))
    }

    @Test func cropTooLargeNamesTheStep() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, session) = (rig.broker, rig.session)

        let text = "scale:64x64,mode=fill | grayscale | crop:200x200+0+0"
        let job = Fixture.job(pipeline: text)
        try broker.send(.job(job), to: session.identity)

        guard case .fail(let fail) = try #require(try broker.next()).message else {
            Issue.record("expected FAIL")
            return
        }
        #expect(!fail.retryable)
        // The third step, numbered from 1 as people read it.
        #expect(fail.failure.stepIndex == 3)
        #expect(fail.failure.step == (try Pipeline(parsing: text)).steps[2].canonical)
        #expect(fail.failure.code == "image.invalid-argument")
        #expect(fail.failure.reason.contains("exceeds"))
        #expect(try broker.next()?.message == .credit(Credit(count: 1)))
    }

    @Test func unparseablePipelineFailsForGood() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, session) = (rig.broker, rig.session)

        let job = Fixture.job(pipeline: "scale:64x64 | crpo:square")
        try broker.send(.job(job), to: session.identity)
        guard case .fail(let fail) = try #require(try broker.next()).message else {
            Issue.record("expected FAIL")
            return
        }
        #expect(!fail.retryable)
        #expect(fail.failure.code == "pipeline.invalid")
        #expect(fail.failure.stepIndex == 0)
        #expect(fail.failure.reason.contains("crpo"))
    }

    @Test func silentStoreFailsRetryable() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: broker, store: store.endpoint, storeTimeout: .milliseconds(800), storeRetry: .milliseconds(300))
        defer { worker.stop(grace: .zero) }
        let session = try #require(try broker.handshake())

        let job = Fixture.job()
        try broker.send(.job(job), to: session.identity)
        // The store receives the STORE (perhaps more than once) and never answers.
        let first = try #require(try store.nextStore())
        #expect(first.request.jobID == job.jobID)

        guard case .fail(let fail) = try #require(try broker.next()).message else {
            Issue.record("expected FAIL")
            return
        }
        #expect(fail.jobID == job.jobID)
        #expect(fail.retryable)
        #expect(fail.failure.code == "store.unreachable")
        #expect(fail.failure.reason.contains("storage node unreachable"))
        #expect(try broker.next()?.message == .credit(Credit(count: 1)))

        // A late STORED for the abandoned job changes nothing.
        try store.answer(first.request, from: first.identity)
        try broker.send(.heartbeat, to: session.identity)
        #expect(eventually { worker.status.failed == 1 })
        #expect(worker.status.done == 0)
    }

    @Test func unreachableStoreFailsRetryable() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        // The storage node is there when the worker starts (a worker takes
        // jobs only once it has reached it), then goes away.
        let gone = try TestStore(context)
        let worker = try makeWorker(context, broker: broker, store: gone.endpoint, storeTimeout: .milliseconds(600), storeRetry: .milliseconds(200))
        defer { worker.stop(grace: .zero) }
        let session = try #require(try broker.handshake())
        gone.router.socket.close()

        let job = Fixture.job()
        try broker.send(.job(job), to: session.identity)
        guard case .fail(let fail) = try #require(try broker.next()).message else {
            Issue.record("expected FAIL")
            return
        }
        #expect(fail.jobID == job.jobID)
        #expect(fail.retryable)
        #expect(fail.failure.code == "store.unreachable")
        #expect(fail.failure.reason.contains("storage node unreachable"))
        #expect(try broker.next()?.message == .credit(Credit(count: 1)))
    }

    @Test func aWorkerTakesNoJobsUntilItHasReachedItsStorageNode() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        // A unique ipc path that nothing has bound: nothing listens there
        // yet. (Not one bound and closed: libzmq closes a listener in the
        // background, and a worker quick enough would reach it.)
        let endpoint = "ipc://\(NSTemporaryDirectory())darkroom-store-\(UUID().uuidString)"
        let worker = try makeWorker(context, broker: broker, store: endpoint, concurrency: 2)
        defer { worker.stop(grace: .zero) }
        // READY, and no CREDIT while the storage node cannot be reached.
        let ready = try #require(try broker.next())
        guard case .ready = ready.message else {
            Issue.record("expected READY, got \(ready.message)")
            return
        }
        #expect(try broker.next(seconds: 1)?.message == nil)
        // Once it is there, the worker grants its slots.
        let store = try TestStore(context, endpoint: endpoint)
        defer { _ = store }
        let credit = try #require(try broker.next(seconds: 10))
        #expect(credit.message == .credit(Credit(count: 2)))
    }

    @Test func storeErrorFailsByItsClass() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, store, session) = (rig.broker, rig.store, rig.session)

        try broker.send(.job(Fixture.job()), to: session.identity)
        let (identity, request) = try #require(try store.nextStore())
        try store.reply(.error(ErrorReply(requestID: request.requestID, code: .internal, reason: "disk full")), to: identity)
        guard case .fail(let fail) = try #require(try broker.next()).message else {
            Issue.record("expected FAIL")
            return
        }
        #expect(fail.retryable)
        #expect(fail.failure.code == "store.rejected")
        #expect(fail.failure.reason.contains("disk full"))
    }

    @Test func neverMoreJobsRunningThanSlots() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, store, worker, session) = (rig.broker, rig.store, rig.worker, rig.session)
        #expect(session.credit == 2)

        // A misbehaving broker sends three JOBs for two credits.
        let jobs = (0..<3).map { _ in Fixture.job() }
        for job in jobs { try broker.send(.job(job), to: session.identity) }

        // The third goes straight back; the first two hold their slots until stored.
        guard case .fail(let extra) = try #require(try broker.next()).message else {
            Issue.record("expected FAIL for the JOB beyond the credit")
            return
        }
        #expect(extra.jobID == jobs[2].jobID)
        #expect(extra.retryable)
        let a = try #require(try store.nextStore())
        let b = try #require(try store.nextStore())
        #expect(Set([a.request.jobID, b.request.jobID]) == Set([jobs[0].jobID, jobs[1].jobID]))
        #expect(worker.status.running == 2)

        try store.answer(a.request, from: a.identity)
        try store.answer(b.request, from: b.identity)
        var done: Set<ULID> = []
        var credit: UInt32 = 0
        while done.count < 2 || credit < 2, let (_, message) = try broker.next() {
            switch message {
            case .done(let d): done.insert(d.jobID)
            case .credit(let c): credit += c.count
            default: Issue.record("unexpected \(message)")
            }
        }
        #expect(done == Set([jobs[0].jobID, jobs[1].jobID]))
        #expect(credit == 2)
        #expect(worker.status.peakRunning == 2)
    }

    @Test func aWorkerThatPingsStillSendsHeartbeats() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        // PINGs go once a second, as HEARTBEATs do by default.
        let worker = try makeWorker(context, broker: broker, store: store.endpoint, concurrency: 1, heartbeat: .seconds(1))
        defer { worker.stop(grace: .zero) }
        let session = try #require(try broker.handshake())

        // The test answers every PING, as any broker does, even on a
        // connection it does not know: only a HEARTBEAT (or another
        // message) lets a broker that forgot this worker say DISCONNECT.
        var pings = 0
        var heartbeats = 0
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, pings < 2 || heartbeats < 2 {
            guard let (identity, frames) = try broker.router.receive(seconds: deadline.timeIntervalSinceNow) else { break }
            #expect(identity == session.identity)
            switch try BackendMessage.decode(frames) {
            case .ping(let ping):
                pings += 1
                try broker.router.send(Pong(requestID: ping.requestID).frames(), to: identity)
            case .heartbeat:
                heartbeats += 1
                try broker.send(.heartbeat, to: identity)
            case let other:
                Issue.record("unexpected \(other)")
            }
        }
        #expect(pings >= 2)
        #expect(heartbeats >= 2)
    }

    @Test func silentBrokerMeansANewSession() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: broker, store: store.endpoint, concurrency: 2, heartbeat: .milliseconds(100))
        defer { worker.stop(grace: .zero) }

        // The test never answers: after three silent intervals the worker
        // drops the connection and starts again with READY on a new socket.
        let first = try #require(try broker.handshake())
        let second = try #require(try broker.handshake())
        #expect(second.identity != first.identity)
        #expect(second.ready.workerID == first.ready.workerID)
        #expect(second.credit == 2)
        // The status is published at the end of the loop turn that sent READY.
        let deadline = Date().addingTimeInterval(10)
        while worker.status.sessions < 2 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(worker.status.sessions >= 2)
        // The silence that ended the first session is the longest yet.
        #expect(worker.status.longestBrokerSilence >= .milliseconds(300))
    }

    @Test func jobRunningAcrossAReconnectReportsOnTheNewSession() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: broker, store: store.endpoint, concurrency: 2)
        defer { worker.stop(grace: .zero) }
        let first = try #require(try broker.handshake())

        let job = Fixture.job()
        try broker.send(.job(job), to: first.identity)
        let (storeIdentity, request) = try #require(try store.nextStore())

        // The broker asks for a new session while the job waits for STORED:
        // READY, HOLDING with the job at its attempt, CREDIT for the other slot.
        try broker.send(.disconnect, to: first.identity)
        let second = try #require(try broker.holdingHandshake())
        #expect(second.identity != first.identity)
        #expect(second.holding.jobs == [Holding.Entry(jobID: job.jobID, attempt: 1)])
        let credit = try #require(try broker.next())
        #expect(credit.identity == second.identity)
        #expect(credit.message == .credit(Credit(count: 1)))

        let record = try store.answer(request, from: storeIdentity)
        let done = try #require(try broker.next())
        #expect(done.identity == second.identity)
        #expect(done.message == .done(Done(jobID: job.jobID, attempt: 1, recordID: record)))
        #expect(try broker.next()?.message == .credit(Credit(count: 1)))
    }

    @Test func stopFinishesTheRunningJobThenDisconnects() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: broker, store: store.endpoint, concurrency: 2)
        let session = try #require(try broker.handshake())

        let job = Fixture.job()
        try broker.send(.job(job), to: session.identity)
        let (storeIdentity, request) = try #require(try store.nextStore())

        let stopping = Background { worker.stop(grace: .seconds(20)) }
        #expect(eventually { worker.status.stopping })
        // A JOB arriving now is handed back at once.
        let late = Fixture.job()
        try broker.send(.job(late), to: session.identity)
        guard case .fail(let handedBack) = try #require(try broker.next()).message else {
            Issue.record("expected FAIL for a JOB sent while stopping")
            return
        }
        #expect(handedBack.jobID == late.jobID)
        #expect(handedBack.retryable)
        #expect(handedBack.failure.code == "worker.shutdown")

        let record = try store.answer(request, from: storeIdentity)
        #expect(try broker.next()?.message == .done(Done(jobID: job.jobID, attempt: 1, recordID: record)))
        // No new credit while stopping: the next message is DISCONNECT.
        #expect(try broker.next()?.message == .disconnect)
        #expect(stopping.wait())
        worker.wait()
        #expect(worker.status.done == 1)
    }

    @Test func stopHandsBackWhatItCannotFinish() throws {
        let context = try Context()
        let broker = try TestBroker(context)
        let store = try TestStore(context)
        let worker = try makeWorker(context, broker: broker, store: store.endpoint, concurrency: 1)
        let session = try #require(try broker.handshake())

        let job = Fixture.job(attempt: 3)
        try broker.send(.job(job), to: session.identity)
        _ = try #require(try store.nextStore())

        worker.stop(grace: .milliseconds(200))
        guard case .fail(let fail) = try #require(try broker.next()).message else {
            Issue.record("expected FAIL")
            return
        }
        #expect(fail.jobID == job.jobID)
        #expect(fail.attempt == 3)
        #expect(fail.retryable)
        #expect(fail.failure.code == "worker.shutdown")
        #expect(try broker.next()?.message == .disconnect)
        worker.wait()
    }

    @Test func malformedMessagesAreAnsweredAndIgnored() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, store, session) = (rig.broker, rig.store, rig.session)

        try broker.router.send([Array("DRK2".utf8), [0x22]], to: session.identity)
        guard case .error(let versionError) = try #require(try broker.next()).message else {
            Issue.record("expected ERROR")
            return
        }
        #expect(versionError.code == .badVersion)

        // A JOB with a frame missing, and a command the worker never receives.
        var short = Fixture.job().frames()
        short.removeLast()
        try broker.router.send(short, to: session.identity)
        guard case .error(let malformed) = try #require(try broker.next()).message else {
            Issue.record("expected ERROR")
            return
        }
        #expect(malformed.code == .malformed)
        try broker.send(.credit(Credit(count: 1)), to: session.identity)
        guard case .error(let unexpected) = try #require(try broker.next()).message else {
            Issue.record("expected ERROR")
            return
        }
        #expect(unexpected.code == .unexpectedCommand)

        // An ERROR is never answered, and the worker still runs jobs.
        try broker.send(.error(ErrorReply(requestID: 0, code: .malformed, reason: "test")), to: session.identity)
        let job = Fixture.job()
        try broker.send(.job(job), to: session.identity)
        let (identity, request) = try #require(try store.nextStore())
        // Garbage from the store is answered too, and the job still completes.
        try store.router.send([Array("DRK1".utf8), [0x7E]], to: identity)
        let record = try store.answer(request, from: identity)
        #expect(try broker.next()?.message == .done(Done(jobID: job.jobID, attempt: 1, recordID: record)))
        let storeError = try #require(try store.router.receive(seconds: 20))
        guard case .error(let unknown) = try StoreMessage.decode(storeError.frames) else {
            Issue.record("expected ERROR from the worker on the store socket")
            return
        }
        #expect(unknown.code == .unknownCommand)
    }
}

@Suite("Worker configuration")
struct WorkerConfigurationTests {
    @Test func defaultsMatchTheProtocol() {
        let configuration = WorkerConfiguration()
        #expect(configuration.backendEndpoint == Wire.Endpoint.backend)
        #expect(configuration.storeEndpoint == Wire.Endpoint.store)
        #expect(configuration.concurrency >= 1)
        #expect(configuration.heartbeatInterval == .seconds(1))
        #expect(configuration.heartbeatLiveness == 3)
        #expect(configuration.shutdownGrace == .seconds(30))
        #expect(configuration.reconnectInitial == .milliseconds(100))
        #expect(configuration.reconnectMaximum == .seconds(5))
        #expect(throws: Never.self) { try configuration.validate() }
    }

    @Test func slotsAreTheProtocolsMostUnlessPrefetchSetsACap() {
        // By default the credit target alone decides how many jobs are held,
        // within the 4096 slots DRK1 allows.
        let plain = WorkerConfiguration(concurrency: 3)
        #expect(plain.slots == 4096)
        #expect(WorkerConfiguration().concurrency == WorkerConfiguration.defaultConcurrency)
        #expect(WorkerConfiguration().slots == 4096)
        // --prefetch caps the jobs held beyond the running ones.
        #expect(WorkerConfiguration(concurrency: 1, prefetch: 1).slots == 2)
        #expect(WorkerConfiguration(concurrency: 3, prefetch: 0).slots == 3)
        #expect(WorkerConfiguration(concurrency: 1024, prefetch: 8).slots == 1032)
        #expect(WorkerConfiguration(concurrency: 1024, prefetch: 4096).slots == 4096)
    }

    @Test func byteCountsReadAsPeopleWriteThem() {
        #expect(WorkerConfiguration.parseByteCount("268435456") == 268_435_456)
        #expect(WorkerConfiguration.parseByteCount("256M") == 256 << 20)
        #expect(WorkerConfiguration.parseByteCount("256MiB") == 256 << 20)
        #expect(WorkerConfiguration.parseByteCount("64kb") == 64 << 10)
        #expect(WorkerConfiguration.parseByteCount("1G") == 1 << 30)
        #expect(WorkerConfiguration.parseByteCount("100B") == 100)
        #expect(WorkerConfiguration.parseByteCount(" 8 MiB ") == 8 << 20)
        for bad in ["", "M", "0", "-5M", "1.5G", "12 apples", "99999999999999999999G"] {
            #expect(WorkerConfiguration.parseByteCount(bad) == nil, "\(bad)")
        }
        let budget = WorkerConfiguration.defaultInputBudget
        #expect(budget >= 16 << 20 && budget <= 256 << 20)
        #expect(WorkerConfiguration(inputBudget: 5).effectiveInputBudget == 5)
    }

    @Test func defaultWorkerIDIsAValidWireID() throws {
        let id = WorkerConfiguration.makeWorkerID(host: "build host.example.com\u{7}" + String(repeating: "x", count: 80))
        #expect((1...64).contains(id.utf8.count))
        #expect(!id.utf8.contains { $0 <= 0x20 || $0 >= 0x7F })
        #expect(id.contains("-\(ProcessInfo.processInfo.processIdentifier)-"))
        #expect(id != WorkerConfiguration.makeWorkerID(host: "build host.example.com\u{7}" + String(repeating: "x", count: 80)))
        // It passes the same check the broker applies to READY.
        let ready = Ready(workerID: id, host: "h", pid: 1, slots: 1)
        #expect(try Ready.decode(ready.frames()) == ready)
    }

    /// `up`'s embedded workers keep their ids across starts, and a long
    /// host name still leaves a valid id (it once had "-N" appended past
    /// the 64 bytes).
    @Test func embeddedWorkerIDIsStableAndValid() throws {
        let long = "build host.example.com\u{7}" + String(repeating: "x", count: 80)
        let first = WorkerConfiguration.embeddedWorkerID(host: long, index: 12)
        #expect(first == WorkerConfiguration.embeddedWorkerID(host: long, index: 12))
        #expect(first != WorkerConfiguration.embeddedWorkerID(host: long, index: 1))
        #expect(first.utf8.count == 64 && first.hasPrefix("build_host.example.com_x") && first.hasSuffix("-up-12"))
        #expect(WorkerConfiguration.embeddedWorkerID(host: "", index: 1) == "worker-up-1")
        let ready = Ready(workerID: first, host: "h", pid: 1, slots: 1)
        #expect(try Ready.decode(ready.frames()) == ready)
    }

    @Test func badValuesAreRefusedBeforeStarting() throws {
        #expect(throws: WorkerError.self) { try WorkerConfiguration(concurrency: 0).validate() }
        #expect(throws: WorkerError.self) { try WorkerConfiguration(concurrency: 2000).validate() }
        #expect(throws: WorkerError.self) { try WorkerConfiguration(workerID: "has space").validate() }
        #expect(throws: WorkerError.self) { try WorkerConfiguration(heartbeatInterval: .zero).validate() }
        #expect(throws: WorkerError.self) { try WorkerConfiguration(inputBudget: 0).validate() }
        #expect(throws: WorkerError.self) { try WorkerConfiguration(prefetch: -1).validate() }
        let context = try Context()
        let worker = Worker(WorkerConfiguration(backendEndpoint: "nonsense://x"), context: context)
        #expect(throws: WorkerError.self) { try worker.start() }
        worker.wait()
    }
}
