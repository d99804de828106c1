import DarkroomBroker
import DarkroomProtocol
import DarkroomSQLite
import DarkroomZMQ
import Dispatch
import Foundation
import Synchronization
import Testing

/// The broker with its database failing under it, on real sockets: a
/// database that fills up, and turns that SQLite rolls back. Whatever
/// fails, every ACCEPTED job is in the database, nothing rolled back was
/// ACCEPTED, event seqs stay gapless, the broker keeps answering, and it
/// takes jobs again once it can write.
@Suite(.serialized) struct FaultTests {
    /// A SUBMIT of a `size`-byte image with a submit key, answered.
    private func submit(_ client: Client, key: String, size: Int = 200) throws -> FrontendMessage {
        let image = jpeg(size: size, seed: key.utf8.reduce(0, &+))
        return try client.request {
            Submit(requestID: $0, priority: 0, options: .default, pipeline: "crop:square", sourceName: "\(key).jpg", image: image,
                   submitKey: key).frames()
        }
    }

    /// Checks that the committed events are gapless from 1 and that the
    /// jobs they accepted are exactly `accepted`.
    private func expectEvents(_ client: Client, accepted: Set<ULID>, sourceLocation: SourceLocation = #_sourceLocation) throws -> [Event] {
        let events = try expectEventsGapless(client, sourceLocation: sourceLocation)
        #expect(Set(events.filter { $0.kind == .accepted }.map(\.jobID)) == accepted, sourceLocation: sourceLocation)
        return events
    }

    /// Checks that the committed events are gapless from 1.
    private func expectEventsGapless(_ client: Client, sourceLocation: SourceLocation = #_sourceLocation) throws -> [Event] {
        var events: [Event] = []
        var end: ReplayEnd
        repeat {
            let (page, pageEnd) = try client.replay(from: UInt64(events.count) + 1)
            events += page
            end = pageEnd
        } while end.lastSeq < end.headSeq
        #expect(events.map(\.seq) == (0..<end.headSeq).map { $0 + 1 }, "no seq is missing", sourceLocation: sourceLocation)
        return events
    }

    @Test func aFullQueueDatabaseRefusesSubmitsWithTheReasonLosesNothingAcceptedAndTakesJobsAgainOnceSpaceIsBack() throws {
        let harness = try Harness { $0.maxDatabasePages = 256 }
        var client = try harness.client()
        // 60 KB inputs, kept inline: a dozen or so fill a 1 MB database.
        var accepted: [ULID: String] = [:]
        var refused: [(key: String, rejected: Rejected)] = []
        for n in 0..<100 where refused.count < 4 {
            let key = "big-\(n)"
            switch try submit(client, key: key, size: 60_000) {
            case .accepted(let reply): accepted[reply.jobID] = key
            case .rejected(let reply): refused.append((key, reply))
            case let other: Issue.record("unexpected reply to SUBMIT: \(other)")
            }
        }
        try #require(refused.count == 4, "the database never filled up")
        #expect(accepted.count > 4)
        for (_, rejected) in refused {
            #expect(rejected.code == .internal)
            #expect(rejected.reason.contains("full"), "the refusal names the failure: \(rejected.reason)")
            #expect(rejected.reason.contains("again"), "the refusal says the job may be submitted again: \(rejected.reason)")
        }

        // The broker keeps answering, and it holds exactly what it accepted.
        #expect(try client.request { Ping(requestID: $0).frames() } == .pong(Pong(requestID: client.nextID - 1)))
        #expect(try client.status().queue.depth == UInt64(accepted.count))
        _ = try expectEvents(client, accepted: Set(accepted.keys))

        // Space comes back as a worker takes jobs and stores them.
        let worker = try harness.worker("w-drain", slots: 4)
        try worker.ready(credit: 4)
        var stored: Set<ULID> = []
        for _ in 0..<4 {
            let job = try worker.job()
            #expect(accepted[job.jobID] != nil)
            try worker.done(job)
            stored.insert(job.jobID)
        }
        // Once the broker writes again, a refused key is a new job; an accepted one is the same job.
        let deadline = Date().addingTimeInterval(15)
        var again: Accepted?
        while again == nil && Date() < deadline {
            if case .accepted(let reply) = try submit(client, key: refused[0].key, size: 60_000) {
                again = reply
            } else {
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        let revived = try #require(again, "SUBMITs were not accepted again once space came back")
        #expect(accepted[revived.jobID] == nil, "a refused SUBMIT did not take its key")
        accepted[revived.jobID] = refused[0].key
        let firstKey = try #require(accepted.first)
        if case .accepted(let same) = try submit(client, key: firstKey.value, size: 60_000) {
            #expect(same.jobID == firstKey.key)
        } else {
            Issue.record("a resent accepted key was not answered ACCEPTED")
        }
        _ = try client.waitForStatus("the stored jobs to leave") { $0.queue.inFlight == 0 }

        // After a restart the database holds every job accepted and not stored.
        try harness.restart()
        client = try harness.client()
        #expect(try client.status().queue.depth == UInt64(accepted.count - stored.count))
        let events = try expectEvents(client, accepted: Set(accepted.keys))
        #expect(Set(events.filter { $0.kind == .stored }.map(\.jobID)) == stored)
    }

    @Test func aFullQueueDatabaseStillDispatchesAndStoresWhileProducersKeepSubmitting() throws {
        let harness = try Harness { $0.maxDatabasePages = 256 }
        let client = try harness.client()
        var accepted = 0
        for n in 0..<100 {
            guard case .accepted = try submit(client, key: "fill-\(n)", size: 60_000) else { break }
            accepted += 1
        }
        #expect(accepted > 4)

        // Two producers keep 32 SUBMITs each in flight, sending another as each is refused.
        let producers = (0..<2).map { _ in
            ProducerLoad(context: harness.context, endpoint: harness.endpoint("frontend"), window: 32, size: 60_000)
        }
        defer { for producer in producers { producer.stop() } }
        let loaded = Date().addingTimeInterval(10)
        while producers.contains(where: { $0.replies == 0 }) && Date() < loaded { Thread.sleep(forTimeInterval: 0.05) }

        // A worker still gets jobs at once, and storing them makes room,
        // which the producers' next SUBMITs take.
        let acceptedBefore = producers.map(\.accepted).reduce(0, +)
        let worker = try harness.worker("w-under-load", slots: 2)
        try worker.ready(credit: 2)
        let first = try worker.job(within: 3)
        let second = try worker.job(within: 3)
        try worker.done(first)
        try worker.done(second)
        let deadline = Date().addingTimeInterval(10)
        while producers.map(\.accepted).reduce(0, +) == acceptedBefore && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        for producer in producers { producer.stop() }
        let acceptedUnderLoad = producers.map(\.accepted).reduce(0, +)
        #expect(acceptedUnderLoad > acceptedBefore, "SUBMITs were not accepted again once jobs were stored")
        // SUBMITs still on their way when the producers stopped may yet be
        // accepted, unanswered; once they are in, the queue holds exactly
        // the jobs accepted and not stored.
        Thread.sleep(forTimeInterval: 0.3)
        let depth = try client.status().queue.depth
        let events = try expectEventsGapless(client)
        #expect(depth >= UInt64(accepted - 2 + acceptedUnderLoad))
        #expect(depth == UInt64(events.filter { $0.kind == .accepted }.count - events.filter { $0.kind == .stored }.count))
    }

    @Test func aTurnSQLiteRollsBackIsAnsweredWithTheReasonAndTheBrokerBacksOffThenWritesAgain() throws {
        let harness = try Harness()
        var client = try harness.client()
        var accepted: Set<ULID> = [try client.submitAccepted().jobID, try client.submitAccepted().jobID]
        let worker = try harness.worker("w-fault", slots: 2)
        try worker.ready(credit: 1)
        let running = try worker.job()

        // From another connection: SQLite rolls back any transaction that writes a job.
        let db = try Connection(path: harness.directory + "/queue.sqlite")
        defer { try? db.close() }
        try db.execute("CREATE TRIGGER inject_fault BEFORE INSERT ON jobs BEGIN SELECT RAISE(ROLLBACK, 'injected fault'); END")

        // A DONE in flight meanwhile is applied (again, if its turn was lost) and counted once.
        try worker.done(running)
        var lostTurn = 0
        var backingOff = 0
        for n in 0..<8 {
            switch try submit(client, key: "fault-\(n)") {
            case .rejected(let rejected):
                #expect(rejected.code == .internal)
                #expect(rejected.reason.contains("injected fault"), "the refusal names the failure: \(rejected.reason)")
                if rejected.reason.contains("could not write to its queue") { lostTurn += 1 }
                if rejected.reason.contains("cannot write to its queue") { backingOff += 1 }
            case let other:
                Issue.record("a SUBMIT was not refused while every job write fails: \(other)")
            }
        }
        #expect(lostTurn > 0, "a SUBMIT in a lost turn is refused with the reason")
        #expect(backingOff > 0, "SUBMITs are refused at once while the broker backs off")
        #expect(try client.request { Ping(requestID: $0).frames() } == .pong(Pong(requestID: client.nextID - 1)))
        let status = try client.status()
        #expect(status.queue.depth == 1)

        try db.execute("DROP TRIGGER inject_fault")
        let deadline = Date().addingTimeInterval(15)
        var recovered: Accepted?
        var n = 0
        while recovered == nil && Date() < deadline {
            n += 1
            switch try submit(client, key: "after-\(n)") {
            case .accepted(let reply): recovered = reply
            case .rejected(let rejected):
                #expect(rejected.reason.contains("injected fault"))
                Thread.sleep(forTimeInterval: 0.1)
            case let other: Issue.record("unexpected reply to SUBMIT: \(other)")
            }
        }
        let job = try #require(recovered, "SUBMITs were not accepted again once the queue could be written")
        accepted.insert(job.jobID)
        _ = try client.waitForStatus("the DONE to be applied") { $0.queue.inFlight == 0 }

        try harness.restart()
        client = try harness.client()
        #expect(try client.status().queue.depth == 2)
        let events = try expectEvents(client, accepted: accepted)
        #expect(events.filter { $0.kind == .stored }.map(\.jobID) == [running.jobID])
    }

    @Test
    func aReadThatFailsIsAnsweredWithAnErrorTheClientCanDecode() throws {
        let harness = try Harness()
        let client = try harness.client()
        _ = try client.submitAccepted()
        // From another connection: the events table goes away under the broker, then comes back.
        let db = try Connection(path: harness.directory + "/queue.sqlite")
        defer { try? db.close() }
        try db.execute("ALTER TABLE events RENAME TO events_away")
        let reply = try client.request { ReplayRequest(requestID: $0, fromSeq: 1, limit: 0).frames() }
        guard case .error(let error) = reply else {
            Issue.record("expected ERROR, got \(reply)")
            return
        }
        #expect(error.code == .internal)
        #expect(error.reason.contains("events"), "the error names the failure: \(error.reason)")
        try db.execute("ALTER TABLE events_away RENAME TO events")
        #expect(try client.replay(from: 1).0.map(\.seq) == [1])
    }

    @Test
    func anIdleBrokerDoesNotSpinAfterALostTurn() throws {
        let threadsBefore = Set(try threadCPU().keys)
        let harness = try Harness()
        let client = try harness.client()
        _ = try client.submitAccepted()
        // The broker's threads: those that came with it.
        let broker = Set(try threadCPU().keys).subtracting(threadsBefore)
        #expect(try busiest(of: broker, over: 0.5) < 0.2, "an idle broker sleeps")

        let db = try Connection(path: harness.directory + "/queue.sqlite")
        defer { try? db.close() }
        try db.execute("CREATE TRIGGER inject_fault BEFORE INSERT ON jobs BEGIN SELECT RAISE(ROLLBACK, 'injected fault'); END")
        guard case .rejected = try submit(client, key: "lost") else {
            Issue.record("the SUBMIT of a lost turn was not refused")
            return
        }
        try db.execute("DROP TRIGGER inject_fault")
        // The backoff (100 ms) passes; then nothing happens, and the broker should sleep again.
        Thread.sleep(forTimeInterval: 0.3)
        let used = try busiest(of: broker, over: 1)
        #expect(used < 0.5, "a broker thread used \(used) s of CPU in 1 s with nothing to do")
    }

    /// CPU time (seconds) each thread of this process has used, by thread id.
    private func threadCPU() throws -> [String: Double] {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var times: [String: Double] = [:]
        for task in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") {
            guard let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // After "pid (comm)": the state is field 3, utime and stime are fields 14 and 15.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            times[task] = (user + system) / ticks
        }
        return times
    }

    /// The most CPU time (seconds) one of `threads` used over `seconds`.
    private func busiest(of threads: Set<String>, over seconds: Double) throws -> Double {
        let before = try threadCPU()
        Thread.sleep(forTimeInterval: seconds)
        let after = try threadCPU()
        return threads.compactMap { task in after[task].flatMap { time in before[task].map { time - $0 } } }.max() ?? 0
    }
}

/// SUBMITs sent without pause from a thread of their own, keeping `window`
/// of them in flight, until stopped.
final class ProducerLoad: Sendable {
    private let running = Atomic<Bool>(true)
    private let answered = Atomic<Int>(0)
    private let acceptedCount = Atomic<Int>(0)
    private let finished = DispatchSemaphore(value: 0)

    init(context: Context, endpoint: String, window: Int, size: Int) {
        let thread = Thread { [self] in
            defer { finished.signal() }
            guard let socket = try? context.socket(.dealer) else { return }
            try? socket.setLinger(milliseconds: 0)
            try? socket.setReceiveTimeout(milliseconds: 100)
            guard (try? socket.connect(endpoint)) != nil else { return }
            var next: UInt64 = 1
            func send() {
                let image = jpeg(size: size, seed: UInt8(truncatingIfNeeded: next))
                _ = try? socket.send(Submit(requestID: next, priority: 0, options: .default, pipeline: "crop:square",
                                            sourceName: "load.jpg", image: image).frames())
                next += 1
            }
            for _ in 0..<window { send() }
            while running.load(ordering: .relaxed) {
                guard let frames = try? socket.receive() else { continue }
                if let reply = try? FrontendMessage.decode(frames) {
                    answered.add(1, ordering: .relaxed)
                    if case .accepted = reply { acceptedCount.add(1, ordering: .relaxed) }
                }
                send()
            }
            socket.close()
        }
        thread.start()
    }

    var replies: Int { answered.load(ordering: .relaxed) }
    var accepted: Int { acceptedCount.load(ordering: .relaxed) }

    /// Stops sending and waits for the thread (once).
    func stop() {
        if running.exchange(false, ordering: .relaxed) { finished.wait() }
    }
}
