import DarkroomCore
import Dispatch
import Foundation
import Synchronization
import Testing

/// What the fake services and the group did, in order, across threads.
private final class Journal: Sendable {
    private let lines = Mutex<[String]>([])

    func add(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
    var stops: [String] { all.filter { $0.hasPrefix("stop ") } }
}

/// A service with no thread of its own: it "ends" when told to, after a
/// delay from `start`, or when stopped (if it honours stop).
private final class FakeService: RunnableService {
    let name: String
    private let journal: Journal
    private let endsAfter: Duration?
    private let honoursStop: Bool
    /// Ended along with this one, as a worker ends when its broker goes.
    private let takesDown: FakeService?
    private let done = Mutex(false)
    private let ended = DispatchGroup()

    init(_ name: String, _ journal: Journal, endsAfter: Duration? = nil, honoursStop: Bool = true, takesDown: FakeService? = nil) {
        self.name = name
        self.journal = journal
        self.endsAfter = endsAfter
        self.honoursStop = honoursStop
        self.takesDown = takesDown
        ended.enter()
    }

    func start() {
        guard let endsAfter else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(endsAfter.milliseconds))) { self.end() }
    }

    func stop(grace: Duration) {
        journal.add("stop \(name) grace \(grace.milliseconds)")
        if honoursStop { end() }
    }

    func wait() { ended.wait() }

    /// Ends the service's "thread" (once).
    func end() {
        let first = done.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        journal.add("ended \(name)")
        takesDown?.end()
        ended.leave()
    }
}

/// Log lines the group wrote, as "level message".
private final class Lines: Sendable {
    private let lines = Mutex<[String]>([])

    var log: ServiceGroup.Log {
        { level, message in self.lines.withLock { $0.append("\(level.description.trimmingCharacters(in: .whitespaces)) \(message)") } }
    }
    var all: [String] { lines.withLock { $0 } }
    var unexpected: [String] { all.filter { $0.contains("unexpectedly") } }
}

/// Starts the fakes and runs the group on a thread of its own, so that a
/// group that never returns fails the test instead of hanging it.
private func run(_ group: ServiceGroup, within limit: Duration = .seconds(10)) -> ServiceGroup.Outcome? {
    for entry in group.entries { try? entry.service.start() }
    let outcome = Mutex<ServiceGroup.Outcome?>(nil)
    let finished = DispatchSemaphore(value: 0)
    Thread {
        let result = group.run()
        outcome.withLock { $0 = result }
        finished.signal()
    }.start()
    guard finished.wait(timeout: .now() + .milliseconds(Int(limit.milliseconds))) == .success else {
        Issue.record("the group did not return within \(limit)")
        return nil
    }
    return outcome.withLock { $0 }
}

@Suite struct ServiceGroupTests {
    @Test func aServiceThatEndsOnItsOwnStopsTheOthersInReverseOrder() {
        let journal = Journal()
        let lines = Lines()
        let entries: [ServiceGroup.Entry] = [
            .init(name: "ZAP handler", service: FakeService("zap", journal)),
            .init(name: "broker", service: FakeService("broker", journal)),
            .init(name: "storage node", service: FakeService("store", journal, endsAfter: .milliseconds(50))),
            .init(name: "worker 1", service: FakeService("worker1", journal)),
            .init(name: "worker 2", service: FakeService("worker2", journal)),
        ]
        let group = ServiceGroup(entries, grace: .seconds(7), log: lines.log)
        let outcome = run(group)
        #expect(outcome == .serviceEnded("storage node"))
        #expect(outcome?.exitStatus == 1)
        // The dead one is not asked; every other one is, last started first,
        // with the group's grace.
        #expect(journal.stops == ["stop worker2 grace 7000", "stop worker1 grace 7000", "stop broker grace 7000", "stop zap grace 7000"])
        #expect(journal.all.first == "ended store")
        #expect(lines.unexpected == ["error the storage node stopped unexpectedly; stopping the others"])
        #expect(lines.all.last == "warn every service has stopped; exiting with status 1")
    }

    @Test func aLoneServiceThatEndsExitsNonZero() {
        let journal = Journal()
        let lines = Lines()
        let group = ServiceGroup([.init(name: "worker", service: FakeService("worker", journal, endsAfter: .milliseconds(20)))],
                                 grace: .seconds(1), log: lines.log)
        let outcome = run(group)
        #expect(outcome == .serviceEnded("worker"))
        #expect(outcome?.exitStatus == 1)
        #expect(journal.stops.isEmpty)
        #expect(lines.unexpected == ["error the worker stopped unexpectedly; exiting"])
    }

    @Test func aStopRequestStopsEveryServiceAndExitsZero() {
        let journal = Journal()
        let lines = Lines()
        let entries: [ServiceGroup.Entry] = [
            .init(name: "broker", service: FakeService("broker", journal)),
            .init(name: "storage node", service: FakeService("store", journal)),
            .init(name: "worker 1", service: FakeService("worker1", journal)),
        ]
        let group = ServiceGroup(entries, grace: .seconds(3), log: lines.log)
        // What the SIGTERM handler does, from another thread while the group runs.
        let answers = Mutex<[Bool]>([])
        let asked = DispatchSemaphore(value: 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) {
            answers.withLock { $0.append(group.requestStop(announcing: "received SIGTERM")) }
            answers.withLock { $0.append(group.requestStop(announcing: "received SIGINT")) }
            asked.signal()
        }
        let outcome = run(group)
        // The group may end between the two requests: wait for the second.
        #expect(asked.wait(timeout: .now() + 10) == .success)
        #expect(outcome == .stopped)
        #expect(outcome?.exitStatus == 0)
        #expect(answers.withLock { $0 } == [true, false])
        #expect(journal.stops == ["stop worker1 grace 3000", "stop store grace 3000", "stop broker grace 3000"])
        #expect(lines.unexpected.isEmpty)
        // The reason first, once; then the stop.
        #expect(lines.all == ["info received SIGTERM", "info stopping the worker 1", "info stopping the storage node",
                              "info stopping the broker", "info stopped cleanly"])
    }

    @Test func aStopRequestedBeforeRunIsKept() {
        let journal = Journal()
        let lines = Lines()
        let group = ServiceGroup([.init(name: "broker", service: FakeService("broker", journal))], grace: .seconds(1), log: lines.log)
        #expect(group.requestStop())
        #expect(run(group) == .stopped)
        #expect(journal.stops == ["stop broker grace 1000"])
    }

    @Test func aServiceThatEndsWhileTheGroupStopsIsNoSurprise() {
        let journal = Journal()
        let lines = Lines()
        // Stopping the broker ends the worker before the group asks it to:
        // started after the worker, the broker is stopped first.
        let worker = FakeService("worker", journal)
        let entries: [ServiceGroup.Entry] = [
            .init(name: "worker", service: worker),
            .init(name: "broker", service: FakeService("broker", journal, takesDown: worker)),
        ]
        let group = ServiceGroup(entries, grace: .seconds(1), log: lines.log)
        #expect(group.requestStop())
        let outcome = run(group)
        #expect(outcome == .stopped)
        #expect(outcome?.exitStatus == 0)
        #expect(journal.stops.first == "stop broker grace 1000")
        #expect(lines.unexpected.isEmpty)
        #expect(lines.all.last == "info stopped cleanly")
    }

    @Test func onlyTheFirstServiceToEndIsNamed() {
        let journal = Journal()
        let lines = Lines()
        // The store dies; stopping the worker then ends the ZAP handler too,
        // which is part of the stop, not a second failure.
        let zap = FakeService("zap", journal)
        let entries: [ServiceGroup.Entry] = [
            .init(name: "ZAP handler", service: zap),
            .init(name: "storage node", service: FakeService("store", journal, endsAfter: .milliseconds(20))),
            .init(name: "worker", service: FakeService("worker", journal, takesDown: zap)),
        ]
        let group = ServiceGroup(entries, grace: .seconds(1), log: lines.log)
        let outcome = run(group)
        #expect(outcome == .serviceEnded("storage node"))
        #expect(journal.stops.first == "stop worker grace 1000")
        #expect(!journal.stops.contains { $0.hasPrefix("stop store") })
        #expect(lines.unexpected == ["error the storage node stopped unexpectedly; stopping the others"])
        // A signal now finds the group already stopping.
        #expect(!group.requestStop())
    }

    @Test func aServiceThatIgnoresStopIsStillWaitedFor() {
        let journal = Journal()
        let lines = Lines()
        // Asked to stop, it ends later on its own: run returns only after it has.
        let slow = FakeService("slow", journal, endsAfter: .milliseconds(200), honoursStop: false)
        let group = ServiceGroup([.init(name: "slow one", service: slow)], grace: .milliseconds(10), log: lines.log)
        #expect(group.requestStop())
        #expect(run(group) == .stopped)
        #expect(journal.all == ["stop slow grace 10", "ended slow"])
    }
}
