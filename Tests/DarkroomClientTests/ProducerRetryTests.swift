import Dispatch
import Foundation
import Testing
import DarkroomClient
import DarkroomProtocol
import DarkroomZMQ

/// The producer through broker outages: silence, no broker at all, refusals
/// for now, a lost copy, a failure no retry can mend. Timeouts are a few
/// hundred milliseconds, so each test takes a second or two.
@Suite struct ProducerRetryTests {
    /// One SUBMIT as a test broker received it.
    struct Arrival: Sendable {
        var time: ContinuousClock.Instant
        var requestID: UInt64
        var key: String?
        var source: String
    }

    static func job(_ name: String) -> SubmitRequest {
        SubmitRequest(sourceName: name, image: .bytes(fakeJPEG(200)), pipeline: "invert")
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    @Test("a silent broker: resends with the same ids and keys, waits growing with jitter, until the deadline; then every job is unanswered")
    func silentBrokerUntilTheDeadline() throws {
        let context = try Context()
        let arrivals = Shared<[Arrival]>([])
        let server = try TestServer(context: context) { _, _, frames in
            guard case .submit(let submit)? = try? FrontendMessage.decode(frames) else { return }
            arrivals.with { $0.append(Arrival(time: .now, requestID: submit.requestID, key: submit.submitKey, source: submit.sourceName)) }
        }
        defer { server.stop() }

        let timeout = Duration.milliseconds(200)
        let backoff = Backoff(initial: .milliseconds(200), maximum: .milliseconds(400))
        let producer = try Producer(endpoint: server.endpoint, context: context, timeout: timeout, deadline: .seconds(2), backoff: backoff)
        var results: [String: SubmitResult] = [:]
        var notices: [SubmitNotice] = []
        let started = ContinuousClock.now
        let summary = try producer.submit(["a.jpg", "b.jpg", "c.jpg"].map(Self.job), window: 2, onNotice: { notices.append($0) }) { request, result in
            #expect(results[request.sourceName] == nil, "\(request.sourceName) reported twice")
            results[request.sourceName] = result
        }
        let elapsed = ContinuousClock.now - started

        // It kept trying for the whole deadline, and not much longer.
        #expect(elapsed >= .seconds(2) && elapsed < .milliseconds(2_700), "returned after \(elapsed)")
        #expect(summary.unanswered == 3 && summary.accepted == 0 && summary.rejected == 0 && summary.failed == 0)
        // Only the window was ever sent; the job never taken is not queued.
        for name in ["a.jpg", "b.jpg"] {
            guard case .unanswered(let sends, let error)? = results[name] else { Issue.record("\(name): \(String(describing: results[name]))"); continue }
            #expect(sends >= 4, "\(name) sent \(sends) time(s)")
            #expect(error.kind == .timeout)
            #expect(error.message.contains("no answer from the broker at \(server.endpoint) within 2 s"), "\(error.message)")
            #expect(error.message.contains("sent \(sends) time(s); the job may or may not be queued"), "\(error.message)")
        }
        guard case .unanswered(0, let never)? = results["c.jpg"] else { Issue.record("c.jpg: \(String(describing: results["c.jpg"]))"); return }
        #expect(never.message.contains("never sent; the job is not queued"))

        // Every copy of a job carried its first request id and submit key.
        let seen = arrivals.current
        for name in ["a.jpg", "b.jpg"] {
            let copies = seen.filter { $0.source == name }
            #expect(Set(copies.map(\.requestID)).count == 1 && Set(copies.map(\.key)).count == 1)
            #expect(copies.first?.key.flatMap { ULID($0) } != nil)
        }
        #expect(summary.resent == seen.count - 2)
        // The first resend after one timeout of silence; each later one
        // after the timeout plus a jittered backoff.
        let times = seen.filter { $0.source == "a.jpg" }.map(\.time)
        let gaps = zip(times.dropFirst(), times).map { Self.seconds($0 - $1) }
        #expect(gaps.count >= 3)
        if let first = gaps.first { #expect(first >= 0.19 && first < 0.35, "gaps \(gaps)") }
        for gap in gaps.dropFirst() { #expect(gap >= 0.29 && gap < 0.75, "gaps \(gaps)") }
        // One notice for the whole outage, and no "back".
        #expect(notices.count == 1, "\(notices)")
        if case .brokerSilent(let waiting, let giveUpIn)? = notices.first {
            #expect(waiting == 2)
            #expect(giveUpIn > .milliseconds(1_500) && giveUpIn <= .milliseconds(1_810), "\(giveUpIn)")
        } else {
            Issue.record("no silence notice: \(notices)")
        }
    }

    @Test("a broker silent for a second, then answering: every job accepted once, one notice when it goes and one when it is back")
    func silentThenAnswering() throws {
        let context = try Context()
        let opens = ContinuousClock.now + .seconds(1)
        let copies = Shared<[String: Int]>([:])
        let jobs = Shared<[String: ULID]>([:])
        let server = try TestServer(context: context) { io, identity, frames in
            guard case .submit(let submit)? = try? FrontendMessage.decode(frames), let key = submit.submitKey else { return }
            copies.with { $0[submit.sourceName, default: 0] += 1 }
            guard ContinuousClock.now >= opens else { return }
            // One job per key, as the broker keeps them.
            let job = jobs.with { known in
                if let job = known[key] { return job }
                let job = ulid()
                known[key] = job
                return job
            }
            io.reply(identity, Accepted(requestID: submit.requestID, jobID: job, eventSeq: 1).frames())
        }
        defer { server.stop() }

        let producer = try Producer(endpoint: server.endpoint, context: context, timeout: .milliseconds(200), deadline: .seconds(10),
                                    backoff: Backoff(initial: .milliseconds(100), maximum: .milliseconds(200)))
        let names = (1...5).map { "p\($0).jpg" }
        var results: [String: SubmitResult] = [:]
        var notices: [SubmitNotice] = []
        let started = ContinuousClock.now
        let summary = try producer.submit(names.map(Self.job), onNotice: { notices.append($0) }) { request, result in
            results[request.sourceName] = result
        }
        let elapsed = ContinuousClock.now - started

        #expect(summary.accepted == 5 && summary.unanswered == 0)
        #expect(Set(names.compactMap { results[$0]?.jobID }) == Set(jobs.current.values) && jobs.current.count == 5)
        #expect(elapsed >= .seconds(1) && elapsed < .seconds(2), "took \(elapsed)")
        #expect(copies.current.values.allSatisfy { $0 >= 2 }, "\(copies.current)")
        #expect(summary.resent == copies.current.values.reduce(0, +) - 5)
        #expect(notices.count == 2, "\(notices)")
        if case .brokerSilent(5, _)? = notices.first {} else { Issue.record("first notice: \(notices)") }
        if case .brokerBack(let after)? = notices.last {
            #expect(after >= .milliseconds(900) && after < .milliseconds(1_800), "back after \(after)")
        } else {
            Issue.record("last notice: \(notices)")
        }
    }

    @Test("no broker listening at first: a SUBMIT that cannot be queued is retried, not fatal, and goes through when one starts")
    func noBrokerThenOneStarts() throws {
        let context = try Context()
        let endpoint = try unusedEndpoint(context)
        let broker = LateBroker(context: context, endpoint: endpoint, after: .seconds(1))
        defer { broker.stop() }

        let producer = try Producer(endpoint: endpoint, context: context, timeout: .milliseconds(300), deadline: .seconds(10),
                                    backoff: Backoff(initial: .milliseconds(100), maximum: .milliseconds(300)))
        var results: [SubmitResult] = []
        var notices: [SubmitNotice] = []
        let started = ContinuousClock.now
        let summary = try producer.submit(["x.jpg", "y.jpg", "z.jpg"].map(Self.job), onNotice: { notices.append($0) }) { _, result in
            results.append(result)
        }
        let elapsed = ContinuousClock.now - started

        #expect(summary.accepted == 3, "\(results)")
        #expect(elapsed >= .seconds(1) && elapsed < .milliseconds(2_500), "took \(elapsed)")
        // The producer held the SUBMITs while nothing listened: the channel
        // hands a copy to the socket only on a finished handshake, so each
        // job reached the broker, and no more copies than the producer sent
        // (a resend still on its way when the first answers came is never
        // read: the broker stops).
        let arrivals = broker.received.current
        // Copies queued through the outage would be resends of each job in
        // every round of it (three rounds or more in its second), six at least.
        #expect(summary.resent < 6, "resent \(summary.resent)")
        #expect(Set(arrivals).count == 3 && arrivals.count <= 3 + summary.resent,
                "the broker saw \(arrivals.count) SUBMIT(s); the producer resent \(summary.resent)")
        #expect(notices.count == 2, "\(notices)")
        if case .brokerSilent? = notices.first {} else { Issue.record("first notice: \(notices)") }
        if case .brokerBack? = notices.last {} else { Issue.record("last notice: \(notices)") }
    }

    @Test("refusals for now are retried with backoff until the deadline; any other refusal is final at once")
    func refusalsForNowAreRetried() throws {
        let context = try Context()
        let copies = Shared<[String: Int]>([:])
        let server = try TestServer(context: context) { io, identity, frames in
            guard case .submit(let submit)? = try? FrontendMessage.decode(frames) else { return }
            let copy = copies.with { counts -> Int in
                counts[submit.sourceName, default: 0] += 1
                return counts[submit.sourceName]!
            }
            switch submit.sourceName {
            case "bad.jpg":
                io.reply(identity, Rejected(requestID: submit.requestID, code: .invalidImage, reason: "not a JPEG").frames())
            case "busy.jpg" where copy <= 2:
                io.reply(identity, Rejected(requestID: submit.requestID, code: .shuttingDown, reason: "the broker is shutting down").frames())
            case "full.jpg":
                io.reply(identity, Rejected(requestID: submit.requestID, code: .queueFull, reason: "queue is full").frames())
            default:
                io.reply(identity, Accepted(requestID: submit.requestID, jobID: ulid(), eventSeq: 3).frames())
            }
        }
        defer { server.stop() }

        let producer = try Producer(endpoint: server.endpoint, context: context, timeout: .seconds(1), deadline: .milliseconds(1_500),
                                    backoff: Backoff(initial: .milliseconds(100), maximum: .milliseconds(200)))
        var results: [String: SubmitResult] = [:]
        var notices: [SubmitNotice] = []
        let summary = try producer.submit(["bad.jpg", "busy.jpg", "full.jpg"].map(Self.job), onNotice: { notices.append($0) }) { request, result in
            results[request.sourceName] = result
        }

        #expect(summary.accepted == 1 && summary.rejected == 2 && summary.unanswered == 0)
        #expect(results["bad.jpg"] == .rejected(code: .invalidImage, reason: "not a JPEG"))
        #expect(results["busy.jpg"]?.jobID != nil)
        #expect(results["full.jpg"] == .rejected(code: .queueFull, reason: "queue is full"))
        let sent = copies.current
        #expect(sent["bad.jpg"] == 1 && sent["busy.jpg"] == 3, "\(sent)")
        // Waits of 50–100, 100–200, then 100–200 ms over the 1.5 s after busy.jpg was accepted.
        #expect((8...20).contains(sent["full.jpg"] ?? 0), "\(sent)")
        // Refusing, accepting again (busy.jpg), refusing again (full.jpg).
        let kinds = notices.map { notice -> String in
            switch notice {
            case .brokerRefusing(let code, _, _, _): "refusing \(code)"
            case .brokerSilent: "silent"
            case .brokerBack: "back"
            }
        }
        #expect(kinds.count == 3 && kinds[0].hasPrefix("refusing") && kinds[1] == "back" && kinds[2] == "refusing queue-full", "\(kinds)")
    }

    @Test("a copy lost while the broker answers others is sent again after four timeouts, without waiting for a silence")
    func lostCopyIsResent() throws {
        let context = try Context()
        let arrivals = Shared<[String]>([])
        let server = try TestServer(context: context) { io, identity, frames in
            guard case .submit(let submit)? = try? FrontendMessage.decode(frames) else { return }
            let first = arrivals.with { seen -> Bool in
                defer { seen.append(submit.sourceName) }
                return !seen.contains(submit.sourceName)
            }
            if submit.sourceName == "lost.jpg" && first { return }  // as if lost with a connection
            Thread.sleep(forTimeInterval: 0.02)
            io.reply(identity, Accepted(requestID: submit.requestID, jobID: ulid(), eventSeq: 1).frames())
        }
        defer { server.stop() }

        let producer = try Producer(endpoint: server.endpoint, context: context, timeout: .milliseconds(100), deadline: .seconds(10))
        var notices: [SubmitNotice] = []
        let names = ["lost.jpg"] + (1...40).map { "n\($0).jpg" }
        let summary = try producer.submit(names.map(Self.job), window: 2, onNotice: { notices.append($0) }) { _, _ in }

        #expect(summary.accepted == names.count && summary.resent == 1)
        let seen = arrivals.current
        let again = try #require(seen.indices.filter { seen[$0] == "lost.jpg" }.dropFirst().first)
        // It went again while the others were still being sent, and the
        // broker was never taken for silent.
        #expect(again < seen.count - 5, "lost.jpg sent again at \(again) of \(seen.count)")
        #expect(notices.isEmpty, "\(notices)")
    }

    @Test("an error no retry can mend ends the submit at once, every job not answered reported with it")
    func unmendableErrorIsFatal() throws {
        let context = try Context()
        let server = try TestServer(context: context) { io, identity, frames in
            guard case .submit? = try? FrontendMessage.decode(frames) else { return }
            io.reply(identity, ErrorReply(requestID: 0, code: .malformed, reason: "frame 3 is not a u8").frames())
        }
        defer { server.stop() }

        let producer = try Producer(endpoint: server.endpoint, context: context, timeout: .seconds(5), deadline: .seconds(60))
        var results: [String: SubmitResult] = [:]
        let started = ContinuousClock.now
        let error = #expect(throws: ClientError.self) {
            try producer.submit(["a.jpg", "b.jpg", "c.jpg", "d.jpg"].map(Self.job), window: 2) { request, result in
                results[request.sourceName] = result
            }
        }
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(error?.kind == .server(.malformed) && error?.isRetryable == false)
        #expect(results.count == 4)
        for (name, result) in results {
            guard case .unanswered(_, let reported) = result else { Issue.record("\(name): \(result)"); continue }
            #expect(reported == error)
        }
    }

    @Test("the backoff doubles up to its cap, jittered within the upper half")
    func backoffGrowsAndIsCapped() {
        let backoff = Backoff(initial: .milliseconds(500), maximum: .seconds(10))
        #expect(backoff.delay(1, unit: 1) == .milliseconds(500))
        #expect(backoff.delay(1, unit: 0) == .milliseconds(250))
        #expect(backoff.delay(3, unit: 1) == .seconds(2))
        #expect(backoff.delay(6, unit: 1) == .seconds(10))
        #expect(backoff.delay(60, unit: 0.5) == .milliseconds(7_500))
    }
}

/// A broker frontend that starts listening on a given endpoint only after
/// a while, then accepts every SUBMIT: a broker that was down when the
/// producer started.
final class LateBroker: Sendable {
    /// The job key of each SUBMIT received, in order.
    let received = Shared<[String]>([])
    private let stopping = Shared(false)
    private let finished = DispatchSemaphore(value: 0)

    init(context: Context, endpoint: String, after delay: Duration) {
        let received = received, stopping = stopping, finished = finished
        Thread.detachNewThread {
            defer { finished.signal() }
            Thread.sleep(forTimeInterval: ProducerRetryTests.seconds(delay))
            guard let router = try? context.socket(.router) else { return }
            defer { router.close() }
            guard (try? router.setLinger(milliseconds: 0)) != nil, (try? router.setReceiveTimeout(milliseconds: 20)) != nil,
                  (try? router.bind(endpoint)) != nil else { return }
            while !stopping.current {
                guard let message = try? router.receive(), message.count > 1,
                      case .submit(let submit)? = try? FrontendMessage.decode(Array(message.dropFirst())) else { continue }
                received.with { $0.append(submit.submitKey ?? "") }
                try? router.send([message[0]] + Accepted(requestID: submit.requestID, jobID: ulid(), eventSeq: 1).frames())
            }
        }
    }

    func stop() {
        stopping.with { $0 = true }
        _ = finished.wait(timeout: .now() + 10)
    }
}
