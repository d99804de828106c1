import Synchronization
import Testing
import DarkroomZMQ

@Suite struct MailboxTests {
    @Test func mailboxWakesAPollLoopFromOtherThreads() throws {
        let context = try Context()
        let mailboxReady = Handoff<Mailbox<Int>>()
        // The loop thread owns its inbox, a PULL socket and the poller; it
        // stops after receiving 200 posted values.
        let loop = Spawned { () -> Result<[Int], any Error> in
            do {
                let (mailbox, inbox) = try Mailbox<Int>.make(context: context)
                let idle = try context.socket(.pull)
                try idle.setLinger(milliseconds: 0)
                try idle.bind("inproc://mailbox-idle")
                let poller = Poller()
                let inboxItem = poller.add(inbox)
                poller.add(idle)
                mailboxReady.put(mailbox)
                var received: [Int] = []
                var rounds = 0
                while received.count < 200 && rounds < 10_000 {
                    rounds += 1
                    let ready = try poller.poll(timeoutMilliseconds: 10_000)
                    if ready.isReadable(inboxItem) {
                        received += try inbox.drain()
                    }
                }
                return .success(received)
            } catch {
                return .failure(error)
            }
        }
        let mailbox = try #require(mailboxReady.take())
        let posters = (0..<2).map { poster in
            Spawned { () -> Bool in
                (0..<100).allSatisfy { mailbox.post(poster * 1000 + $0) }
            }
        }
        for poster in posters { #expect(poster.wait() == true) }
        let received = try #require(loop.wait()).get()
        #expect(received.count == 200)
        // Each thread's posts arrive in the order that thread made them.
        #expect(received.filter { $0 < 1000 } == Array(0..<100))
        #expect(received.filter { $0 >= 1000 } == Array(1000..<1100))
    }

    @Test func postedClosuresRunOnTheOwningThread() throws {
        let context = try Context()
        let (mailbox, inbox) = try Mailbox<@Sendable () -> Void>.make(context: context)
        let counter = Atomic<Int>(0)
        let poster = Spawned { () -> Bool in
            mailbox.post { counter.add(1, ordering: .relaxed) } && mailbox.post { counter.add(10, ordering: .relaxed) }
        }
        #expect(poster.wait() == true)
        let poller = Poller()
        let item = poller.add(inbox)
        var ran = 0
        while ran < 2, try poller.poll(timeoutMilliseconds: 10_000).isReadable(item) {
            ran += try inbox.runPending()
        }
        #expect(ran == 2)
        #expect(counter.load(ordering: .relaxed) == 11)
        // Nothing is pending after a drain.
        #expect(try inbox.drain().isEmpty)
    }

    @Test func closedMailboxRefusesPosts() throws {
        let context = try Context()
        let (mailbox, inbox) = try Mailbox<String>.make(context: context)
        #expect(mailbox.post("before"))
        inbox.close()
        #expect(!mailbox.isOpen)
        #expect(!mailbox.post("after"))
        // With every socket closed the context terminates without waiting.
        context.close()
    }
}
