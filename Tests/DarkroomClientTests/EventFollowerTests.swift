import Testing
import DarkroomClient
import DarkroomProtocol
import DarkroomZMQ

/// A broker stand-in for events: answers REPLAY from `log` (at most
/// `pageSize` events per answer) and STATUS with the head seq. Once it has
/// sent a REPLAY-END that is caught up and a subscriber is listening, it
/// appends `later` to the log and publishes the events whose seq is in
/// `publish`, so the follower must fill the rest through REPLAY.
struct EventScript: Sendable {
    var log: [Event]
    var later: [Event] = []
    var publish: Set<UInt64> = []
    var pageSize = 1000
    /// When false, `later` is only published, never replayed: the follower
    /// can only get it from the events socket.
    var replayLater = true
    /// REPLAY answers whose REPLAY-END is dropped (as an overflowing ROUTER would).
    var dropEnds = 0
    /// REPLAYs from `silentFrom` or later left unanswered (a broker gone
    /// silent), and STATUS requests left unanswered.
    var silentReplays = 0
    var silentFrom: UInt64 = 0
    var silentStatuses = 0
    /// REPLAYs answered with ERROR `refusal` instead.
    var refusedReplays = 0
    var refusal = ErrorCode.internal
    var replays: [UInt64] = []
    var caughtUp = false
    var released = false
}

func eventBroker(_ context: Context, _ script: Shared<EventScript>) throws -> TestServer {
    let server = try TestServer(context: context, events: true) { io, identity, frames in
        guard let message = try? FrontendMessage.decode(frames) else { return }
        switch message {
        case .replay(let request):
            let answer = script.with { s -> ErrorCode?? in
                s.replays.append(request.fromSeq)
                if s.silentReplays > 0, request.fromSeq >= s.silentFrom {
                    s.silentReplays -= 1
                    return .some(nil)
                }
                if s.refusedReplays > 0 {
                    s.refusedReplays -= 1
                    return .some(s.refusal)
                }
                return nil
            }
            if case .some(let refusal) = answer {
                if let refusal { io.reply(identity, ErrorReply(requestID: request.requestID, code: refusal, reason: "refused by the script").frames()) }
                return
            }
            let (events, end, drop) = script.with { s -> ([Event], ReplayEnd, Bool) in
                let drop = s.dropEnds > 0
                if drop { s.dropEnds -= 1 }
                let head = s.log.last?.seq ?? 0
                let cap = request.limit == 0 ? s.pageSize : min(Int(request.limit), s.pageSize)
                let slice = Array(s.log.filter { $0.seq >= request.fromSeq }.prefix(cap))
                let last = slice.last?.seq ?? max(request.fromSeq, 1) - 1
                if last >= head && !drop { s.caughtUp = true }
                return (slice, ReplayEnd(requestID: request.requestID, lastSeq: last, headSeq: head), drop)
            }
            for event in events { io.reply(identity, event.frames()) }
            if !drop { io.reply(identity, end.frames()) }
        case .status(let request):
            let silent = script.with { s in
                if s.silentStatuses > 0 { s.silentStatuses -= 1; return true }
                return false
            }
            if silent { return }
            let head = script.with { $0.log.last?.seq ?? 0 }
            let status = BrokerStatus(time: 1, eventSeq: head,
                                      queue: QueueStatus(ready: Array(repeating: 0, count: 10), delayed: 0, inFlight: 0, dead: 0, limit: 100),
                                      workers: [], rates: Rates(windowSeconds: 10, accepted: 0, stored: 0, failed: 0))
            io.reply(identity, StatusReply(requestID: request.requestID, status: status).frames())
        default:
            break
        }
    }
    server.run { io in
        io.tick = { io in
            guard io.subscribed else { return }
            let live = script.with { s -> [Event] in
                guard s.caughtUp, !s.released else { return [] }
                s.released = true
                if s.replayLater { s.log += s.later }
                return s.later.filter { s.publish.contains($0.seq) }
            }
            // Runs of consecutive seqs go out together, as one EVENTS.
            var run: [Event] = []
            for event in live {
                if let last = run.last, event.seq != last.seq + 1 {
                    io.publish(run)
                    run = []
                }
                run.append(event)
            }
            io.publish(run)
        }
    }
    return server
}

@Suite struct EventFollowerTests {
    @Test func replaysFromASeqPageByPageThenContinuesLive() throws {
        let context = try Context()
        let job = ulid()
        let script = Shared(EventScript(log: (1...6).map { event($0, .started, job: job) },
                                        later: [event(7, .started, job: job), event(8, .stored, job: job, record: ulid())],
                                        publish: [7, 8], pageSize: 2, replayLater: false))
        let server = try eventBroker(context, script)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .seconds(20))
        var seen: [UInt64] = []
        let result = try follower.follow(from: 3, for: .seconds(30)) { event in
            seen.append(event.seq)
            return event.seq == 8 ? .stop : .continue
        }
        #expect(seen == [3, 4, 5, 6, 7, 8])
        #expect(result.ending == .stopped)
        #expect(result.lastSeq == 8 && result.delivered == 6 && result.pruned.isEmpty)
        #expect(follower.lastDeliveredSeq == 8)
        // Two pages of two events each brought it from 3 to the head (6).
        #expect(Array(script.current.replays.prefix(2)) == [3, 5])
    }

    @Test func eventsTheBrokerPrunedAreReportedBeforeTheRest() throws {
        let context = try Context()
        let job = ulid()
        // The broker kept only 4...6: 1...3 went with its retention.
        let script = Shared(EventScript(log: (4...6).map { event($0, .started, job: job) }))
        let server = try eventBroker(context, script)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .seconds(20))
        var log: [String] = []
        follower.onPruned = { range in log.append("pruned \(range.lowerBound)-\(range.upperBound)") }
        let result = try follower.follow(from: 1, for: .seconds(30)) { event in
            log.append("event \(event.seq)")
            return event.seq == 6 ? .stop : .continue
        }
        #expect(log == ["pruned 1-3", "event 4", "event 5", "event 6"])
        #expect(result.pruned == [1...3])
    }

    @Test func fillsAGapInLiveEventsWithReplayExactlyOnceInOrder() throws {
        let context = try Context()
        let job = ulid()
        let script = Shared(EventScript(log: [], later: (1...5).map { event($0, .started, job: job) },
                                        publish: [1, 2, 5], pageSize: 2))
        let server = try eventBroker(context, script)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .seconds(20))
        var seen: [UInt64] = []
        let result = try follower.follow(from: 1, for: .seconds(30)) { event in
            seen.append(event.seq)
            return event.seq == 5 ? .stop : .continue
        }
        #expect(seen == [1, 2, 3, 4, 5])
        #expect(result.ending == .stopped)
        #expect(script.current.replays.contains(3))
    }

    @Test func skippedKindsMoveTheCursorButAreNeitherDeliveredNorCounted() throws {
        let context = try Context()
        let job = ulid()
        let record = ulid()
        // Replayed first, then one live batch (consecutive seqs go out together).
        let script = Shared(EventScript(log: [event(1, .accepted, job: job), event(2, .started, job: job)],
                                        later: [event(3, .accepted, job: job), event(4, .started, job: job),
                                                event(5, .stored, job: job, record: record), event(6, .dead, job: job)],
                                        publish: [3, 4, 5, 6], replayLater: false))
        let server = try eventBroker(context, script)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .seconds(20))
        follower.skippedKinds = [.accepted, .started]
        var seen: [Event] = []
        let result = try follower.follow(from: 1, for: .seconds(30)) { event in
            seen.append(event)
            return event.seq == 6 ? .stop : .continue
        }
        #expect(seen.map(\.seq) == [5, 6])
        #expect(seen.first == event(5, .stored, job: job, record: record), "a delivered event is read in full")
        #expect(result.delivered == 2 && result.lastSeq == 6)
        #expect(follower.nextSeq == 7 && follower.lastDeliveredSeq == 6)
    }

    @Test func aReplayWhoseEndIsLostIsAskedAgain() throws {
        let context = try Context()
        let job = ulid()
        var script = EventScript(log: (1...6).map { event($0, .started, job: job) }, pageSize: 4)
        script.dropEnds = 1
        let shared = Shared(script)
        let server = try eventBroker(context, shared)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .milliseconds(500))
        var seen: [UInt64] = []
        _ = try follower.follow(from: 1, for: .seconds(30)) { event in
            seen.append(event.seq)
            return event.seq == 6 ? .stop : .continue
        }
        #expect(seen == [1, 2, 3, 4, 5, 6])
        #expect(Array(shared.current.replays.prefix(2)) == [1, 5])
    }

    @Test func followingFromLatestSkipsOlderEvents() throws {
        let context = try Context()
        let job = ulid()
        let script = Shared(EventScript(log: (1...4).map { event($0, .started, job: job) },
                                        later: [event(5, .started, job: job), event(6, .stored, job: job, record: ulid())],
                                        publish: [5, 6]))
        let server = try eventBroker(context, script)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .seconds(20))
        var seen: [UInt64] = []
        _ = try follower.follow(from: nil, for: .seconds(30)) { event in
            seen.append(event.seq)
            return event.seq == 6 ? .stop : .continue
        }
        #expect(seen == [5, 6])
    }

    @Test func stoppingInsideAReplayThenFollowingAgainLosesNothing() throws {
        let context = try Context()
        let job = ulid()
        let script = Shared(EventScript(log: (1...6).map { event($0, .started, job: job) }))
        let server = try eventBroker(context, script)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .seconds(20))
        var seen: [UInt64] = []
        let first = try follower.follow(from: 1) { event in
            seen.append(event.seq)
            return event.seq == 2 ? .stop : .continue
        }
        #expect(first.lastSeq == 2)
        _ = try follower.follow(from: first.lastSeq + 1, for: .seconds(30)) { event in
            seen.append(event.seq)
            return event.seq == 6 ? .stop : .continue
        }
        #expect(seen == [1, 2, 3, 4, 5, 6])
    }

    @Test func waitForJobsReturnsWhenEachJobIsStoredOrDead() throws {
        let context = try Context()
        let (a, b, c, other) = (ulid(), ulid(), ulid(), ulid())
        let (recordA, recordC) = (ulid(), ulid())
        let corrupt = FailureDetail(stepIndex: 0, step: "", code: "image.corrupt", reason: "not a JPEG: missing SOI marker")
        let script = Shared(EventScript(
            log: [event(1, .accepted, job: a), event(2, .accepted, job: b), event(3, .accepted, job: c), event(4, .started, job: a)],
            later: [event(5, .stored, job: a, record: recordA), event(6, .started, job: b), event(7, .failed, job: b, failure: corrupt),
                    event(8, .dead, job: b, failure: corrupt), event(9, .accepted, job: other), event(10, .stored, job: other, record: ulid()),
                    event(11, .started, job: c), event(12, .stored, job: c, record: recordC)],
            publish: Set(5...12)))
        let server = try eventBroker(context, script)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .seconds(20))
        var seen: [UInt64] = []
        let outcomes = try follower.waitForJobs([a, b, c], from: 1, timeout: .seconds(30)) { seen.append($0.seq) }
        #expect(outcomes == [a: .stored(recordID: recordA), b: .dead(corrupt), c: .stored(recordID: recordC)])
        #expect(seen == [1, 2, 3, 4, 5, 6, 7, 8, 11, 12])
    }

    @Test func waitForJobsTimesOutNamingWhatIsUnfinished() throws {
        let context = try Context()
        let job = ulid()
        let script = Shared(EventScript(log: [event(1, .accepted, job: job)]))
        let server = try eventBroker(context, script)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .seconds(20))
        let error = #expect(throws: ClientError.self) {
            try follower.waitForJobs([job, ulid()], from: 1, timeout: .milliseconds(300))
        }
        #expect(error?.kind == .timeout)
        #expect(error?.message == "2 of 2 job(s) still unfinished after 300 ms (no stored, dead or cancelled event yet)")
    }

    /// A backoff short enough for tests.
    static let quickRetry = RetryBackoff(initial: .milliseconds(20), maximum: .milliseconds(80))

    @Test func theCursorMovesWithEachEventEvenWhenFollowThrows() throws {
        let context = try Context()
        let job = ulid()
        // Pages of two whose REPLAY-END never comes: the follower asks once
        // more, then gives up, having delivered four events.
        var script = EventScript(log: (1...6).map { event($0, .started, job: job) }, pageSize: 2)
        script.dropEnds = 2
        let server = try eventBroker(context, Shared(script))
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .milliseconds(300))
        var seen: [UInt64] = []
        let error = #expect(throws: ClientError.self) {
            try follower.follow(from: 1) { event in
                seen.append(event.seq)
                return .continue
            }
        }
        #expect(error?.kind == .timeout)
        #expect(seen == [1, 2, 3, 4])
        #expect(follower.lastDeliveredSeq == 4 && follower.nextSeq == 5)

        let result = try follower.follow(from: .resume, for: .seconds(30)) { event in
            seen.append(event.seq)
            return event.seq == 6 ? .stop : .continue
        }
        #expect(seen == [1, 2, 3, 4, 5, 6])
        #expect(result.delivered == 2 && result.lastSeq == 6)
    }

    @Test func aRetryingFollowRidesOutASilentBrokerAndTellsOnceEachWay() throws {
        let context = try Context()
        let job = ulid()
        // Events 1...3 come, then the broker ignores three REPLAYs from 4.
        var script = EventScript(log: (1...6).map { event($0, .started, job: job) }, pageSize: 3)
        script.silentReplays = 3
        script.silentFrom = 4
        let shared = Shared(script)
        let server = try eventBroker(context, shared)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .milliseconds(200))
        var log: [String] = []
        var silence = Duration.zero
        follower.onBrokerContact = { contact in
            switch contact {
            case let .lost(error, resumeSeq):
                log.append("lost \(error.kind) \(resumeSeq.map(String.init) ?? "-")")
                #expect(follower.silence != nil)
            case let .regained(quiet, resumeSeq):
                log.append("regained \(resumeSeq)")
                silence = quiet
            }
        }
        let result = try follower.follow(from: .seq(1), for: .seconds(30), retry: Self.quickRetry) { event in
            log.append("event \(event.seq)")
            return event.seq == 6 ? .stop : .continue
        }
        #expect(log == ["event 1", "event 2", "event 3", "lost timeout 4", "regained 4", "event 4", "event 5", "event 6"])
        #expect(result.ending == .stopped && result.delivered == 6 && result.lastSeq == 6)
        #expect(shared.current.replays.filter { $0 == 4 }.count == 4)
        // Three REPLAYs of 200 ms went unanswered: the silence counts from
        // the last answer before them, not from the first failure.
        #expect(silence >= .milliseconds(600), "silence \(silence)")
        #expect(follower.silence == nil)
    }

    @Test func followingFromLatestWaitsForTheFirstStatusAndStartsAtTheHeadThen() throws {
        let context = try Context()
        let job = ulid()
        var script = EventScript(log: (1...4).map { event($0, .started, job: job) },
                                 later: [event(5, .started, job: job), event(6, .stored, job: job, record: ulid())],
                                 publish: [5, 6])
        script.silentStatuses = 2
        let server = try eventBroker(context, Shared(script))
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .milliseconds(200))
        var log: [String] = []
        follower.onBrokerContact = { contact in
            switch contact {
            case let .lost(_, resumeSeq): log.append("lost \(resumeSeq.map(String.init) ?? "-")")
            case let .regained(_, resumeSeq): log.append("regained \(resumeSeq)")
            }
        }
        _ = try follower.follow(from: .latest, for: .seconds(30), retry: Self.quickRetry) { event in
            log.append("event \(event.seq)")
            return event.seq == 6 ? .stop : .continue
        }
        #expect(log == ["lost -", "regained 5", "event 5", "event 6"])
    }

    @Test func refusalsThatMayGoAwayAreRetriedAndOthersEndTheFollowAtOnce() throws {
        let context = try Context()
        let job = ulid()
        var script = EventScript(log: (1...2).map { event($0, .started, job: job) })
        script.refusedReplays = 2
        script.refusal = .internal
        let shared = Shared(script)
        let server = try eventBroker(context, shared)
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .seconds(20))
        var contacts = 0
        follower.onBrokerContact = { _ in contacts += 1 }
        var seen: [UInt64] = []
        _ = try follower.follow(from: .seq(1), for: .seconds(30), retry: Self.quickRetry) { event in
            seen.append(event.seq)
            return event.seq == 2 ? .stop : .continue
        }
        #expect(seen == [1, 2] && contacts == 2)
        #expect(shared.current.replays == [1, 1, 1])

        shared.with {
            $0.refusedReplays = 1
            $0.refusal = .forbidden
        }
        let error = #expect(throws: ClientError.self) {
            try follower.follow(from: .resume, for: .seconds(30), retry: Self.quickRetry) { _ in .continue }
        }
        #expect(error?.kind == .server(.forbidden))
        #expect(shared.current.replays == [1, 1, 1, 3])
    }

    @Test func waitForJobsKeepsWaitingAcrossASilentBrokerAndLosesNoJob() throws {
        let context = try Context()
        let (a, b) = (ulid(), ulid())
        var script = EventScript(log: [event(1, .accepted, job: a), event(2, .accepted, job: b),
                                       event(3, .stored, job: a, record: ulid()), event(4, .stored, job: b, record: ulid())],
                                 pageSize: 3)
        // The stored event of b (4) is only to be had after three silences.
        script.silentReplays = 3
        script.silentFrom = 4
        let server = try eventBroker(context, Shared(script))
        defer { server.stop() }

        let follower = try EventFollower(frontend: server.endpoint, events: server.eventsEndpoint, context: context, timeout: .milliseconds(200))
        var seen: [UInt64] = []
        let outcomes = try follower.waitForJobs([a, b], from: 1, timeout: .seconds(30), retry: Self.quickRetry) { seen.append($0.seq) }
        #expect(outcomes.count == 2 && outcomes.values.allSatisfy { if case .stored = $0 { true } else { false } })
        #expect(seen == [1, 2, 3, 4])
    }
}

@Suite struct RetryBackoffTests {
    @Test func pausesDoubleUpToTheCapAndJitterOnlyShortensThem() {
        let backoff = RetryBackoff.standard
        #expect(backoff.delay(afterFailures: 1, unit: 0) == .milliseconds(250))
        #expect(backoff.delay(afterFailures: 2, unit: 0) == .milliseconds(500))
        #expect(backoff.delay(afterFailures: 4, unit: 0) == .seconds(2))
        #expect(backoff.delay(afterFailures: 5, unit: 0) == .seconds(4))
        #expect(backoff.delay(afterFailures: 1_000, unit: 0) == .seconds(4))
        #expect(backoff.delay(afterFailures: 5, unit: 1) == .seconds(2))
        for failures in 1...8 {
            let pause = backoff.delay(afterFailures: failures)
            let full = backoff.delay(afterFailures: failures, unit: 0)
            #expect(pause <= full && pause >= full / 2)
        }
    }
}
