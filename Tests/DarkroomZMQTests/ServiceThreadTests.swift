import Foundation
import Synchronization
import Testing
import DarkroomZMQ

/// A loop that binds a PAIR socket, records every instruction it gets and
/// ends on "stop". Built on the service thread, like every real loop.
private final class RecordingLoop: ServiceLoop {
    let inbox: MailboxInbox<String>
    let socket: Socket
    let seen: Seen
    var mailbox: Mailbox<String> { inbox.mailbox }
    let boundEndpoints: [String: String]

    init(context: Context, seen: Seen, delay: Duration = .zero) throws {
        Thread.sleep(forTimeInterval: Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
        self.seen = seen
        inbox = try Mailbox<String>.make(context: context).inbox
        socket = try context.socket(.pair)
        try socket.setLinger(milliseconds: 0)
        try socket.bind("tcp://127.0.0.1:*")
        boundEndpoints = ["pair": try socket.lastEndpoint()]
        seen.value.withLock { $0.append("built") }
    }

    func run() {
        defer {
            inbox.close()
            socket.close()
        }
        let poller = Poller()
        let item = poller.add(inbox)
        while true {
            guard let ready = try? poller.poll(timeoutMilliseconds: 5_000), ready.isReadable(item) else { return }
            for instruction in (try? inbox.drain()) ?? ["stop"] {
                seen.value.withLock { $0.append(instruction) }
                if instruction == "stop" { return }
            }
        }
    }
}

/// What a loop saw, shared between the test and the loop's thread.
private final class Seen: Sendable {
    let value = Mutex<[String]>([])
}

struct LoopFailed: Error {}

@Suite struct ServiceThreadTests {
    @Test func startBuildsTheLoopOnItsThreadAndInstructionsArriveInOrder() throws {
        let context = try Context()
        let seen = Seen()
        let service = ServiceThread<String>(name: "test-service")
        try service.start { try RecordingLoop(context: context, seen: seen) }
        #expect(service.isRunning)
        #expect(service.boundEndpoints["pair"]?.hasPrefix("tcp://127.0.0.1:") == true)
        #expect(service.post("one") && service.post("two") && service.post("stop"))
        #expect(service.wait(timeout: .seconds(10)))
        #expect(!service.isRunning)
        #expect(seen.value.withLock { $0 } == ["built", "one", "two", "stop"])
        // After the end, instructions are dropped.
        #expect(!service.post("late"))
    }

    @Test func aSecondStartAndAFailingLoopAreReported() throws {
        let context = try Context()
        let seen = Seen()
        let service = ServiceThread<String>(name: "test-twice")
        try service.start { try RecordingLoop(context: context, seen: seen) }
        #expect {
            try service.start { try RecordingLoop(context: context, seen: seen) }
        } throws: { error in
            if case .alreadyStarted? = error as? ServiceThread<String>.StartError { return true }
            return false
        }
        service.post("stop")
        service.wait()

        let failing = ServiceThread<String>(name: "test-failing")
        #expect {
            try failing.start { () throws -> RecordingLoop in throw LoopFailed() }
        } throws: { error in
            if case .failed(let cause)? = error as? ServiceThread<String>.StartError { return cause is LoopFailed }
            return false
        }
        #expect(!failing.isRunning)
        #expect(!failing.post("stop"))
        #expect(failing.wait(timeout: .seconds(1)))
    }

    @Test func anInstructionPostedWhileTheLoopIsBuiltIsDelivered() throws {
        let context = try Context()
        let seen = Seen()
        let service = ServiceThread<String>(name: "test-early")
        // The loop takes a moment to build; "stop" is posted from another
        // thread meanwhile and must still reach it.
        let poster = Thread {
            while !service.post("stop") { Thread.sleep(forTimeInterval: 0.001) }
        }
        poster.start()
        try service.start { try RecordingLoop(context: context, seen: seen, delay: .milliseconds(200)) }
        #expect(service.wait(timeout: .seconds(10)))
        #expect(seen.value.withLock { $0 }.last == "stop")
    }

    @Test func waitingOnAServiceThatNeverStartedReturnsAtOnce() {
        let service = ServiceThread<String>(name: "test-idle")
        #expect(service.wait(timeout: .milliseconds(10)))
        #expect(!service.post("anything"))
        #expect(service.boundEndpoints.isEmpty)
    }
}
