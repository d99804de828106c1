import Dispatch
import Foundation
import Synchronization
import DarkroomProtocol
import DarkroomZMQ

/// The server side of a test: a ROUTER (and, for event tests, an XPUB, so the
/// server knows when a subscriber is listening) on 127.0.0.1 with ephemeral
/// ports, run by one thread that owns them, speaking DRK1 through
/// `DarkroomProtocol`. `handler` is called on that thread for each message
/// the ROUTER receives.
final class TestServer: Sendable {
    typealias Handler = @Sendable (ServerIO, _ identity: [UInt8], _ frames: [[UInt8]]) -> Void

    let endpoint: String
    let eventsEndpoint: String
    private let mailbox: Mailbox<@Sendable (ServerIO) -> Void>
    private let finished = DispatchSemaphore(value: 0)

    init(context: Context, events: Bool = false, curveSecret: CurveKey? = nil, handler: @escaping Handler) throws {
        let ready = Handoff<Result<(String, String, Mailbox<@Sendable (ServerIO) -> Void>), ZMQError>>()
        let finished = self.finished
        Thread.detachNewThread {
            let io: ServerIO
            let inbox: MailboxInbox<@Sendable (ServerIO) -> Void>
            do {
                let router = try context.socket(.router)
                try router.setLinger(milliseconds: 0)
                try router.setMaxMessageSize(Wire.maxMessageSize)
                if let curveSecret { try router.setCurveServer(secretKey: curveSecret) }
                try router.bind("tcp://127.0.0.1:*")
                var publisher: Socket?
                if events {
                    let xpub = try context.socket(.xpub)
                    try xpub.setLinger(milliseconds: 0)
                    try xpub.bind("tcp://127.0.0.1:*")
                    publisher = xpub
                }
                io = ServerIO(router: router, publisher: publisher)
                (_, inbox) = try Mailbox<@Sendable (ServerIO) -> Void>.make(context: context)
                ready.put(.success((try router.lastEndpoint(), try publisher?.lastEndpoint() ?? "", inbox.mailbox)))
            } catch let error as ZMQError {
                ready.put(.failure(error))
                finished.signal()
                return
            } catch {
                ready.put(.failure(ZMQError(code: 0, call: "server", message: "\(error)")))
                finished.signal()
                return
            }
            io.loop(inbox: inbox, handler: handler)
            inbox.close()
            io.router.close()
            io.publisher?.close()
            finished.signal()
        }
        guard let started = ready.take() else { throw ZMQError(code: 0, call: "server", message: "did not start") }
        let (endpoint, eventsEndpoint, mailbox) = try started.get()
        self.endpoint = endpoint
        self.eventsEndpoint = eventsEndpoint
        self.mailbox = mailbox
    }

    /// Runs `action` on the server thread.
    func run(_ action: @escaping @Sendable (ServerIO) -> Void) {
        _ = mailbox.post(action)
    }

    func stop() {
        run { $0.running = false }
        _ = finished.wait(timeout: .now() + 10)
    }
}

/// The server's sockets, used only on its thread.
final class ServerIO {
    let router: Socket
    let publisher: Socket?
    var running = true
    /// The topic prefixes subscribers have asked for.
    var topics: Set<[UInt8]> = []
    /// Whether a subscriber has subscribed to an events topic.
    var subscribed: Bool { !topics.isEmpty }
    /// Called on the server thread after each message (and each idle turn).
    var tick: ((ServerIO) -> Void)?

    init(router: Socket, publisher: Socket?) {
        self.router = router
        self.publisher = publisher
    }

    func reply(_ identity: [UInt8], _ frames: [[UInt8]]) {
        try? router.send([identity] + frames)
    }

    /// Publishes events as the broker does: each as an EVENT under "ev",
    /// and all of them in one EVENTS under "eb", for the topics subscribed to.
    func publish(_ events: [Event]) {
        guard !events.isEmpty else { return }
        if topics.contains(where: { Wire.eventTopic.starts(with: $0) }) {
            for event in events { try? publisher?.send(event.publishedFrames()) }
        }
        if topics.contains(where: { Wire.eventBatchTopic.starts(with: $0) }) {
            try? publisher?.send(EventBatch(events: events).publishedFrames())
        }
    }

    func publish(_ event: Event) { publish([event]) }

    func loop(inbox: MailboxInbox<@Sendable (ServerIO) -> Void>, handler: TestServer.Handler) {
        let poller = Poller()
        let routerItem = poller.add(router)
        let inboxItem = poller.add(inbox)
        let publisherItem = publisher.map { poller.add($0) }
        while running {
            guard let ready = try? poller.poll(timeoutMilliseconds: 20) else { return }
            if ready.isReadable(inboxItem), let actions = try? inbox.drain() {
                for action in actions { action(self) }
            }
            if let publisherItem, ready.isReadable(publisherItem), let publisher {
                while let message = try? publisher.receive(dontWait: true) {
                    guard let frame = message.first, let kind = frame.first else { continue }
                    if kind == 1 { topics.insert(Array(frame.dropFirst())) } else { topics.remove(Array(frame.dropFirst())) }
                }
            }
            if ready.isReadable(routerItem) {
                while let message = try? router.receive(dontWait: true), message.count >= 1 {
                    handler(self, message[0], Array(message.dropFirst()))
                }
            }
            tick?(self)
        }
    }
}

/// A one-shot value handed from one thread to another.
final class Handoff<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    func put(_ newValue: T) {
        value.withLock { $0 = newValue }
        ready.signal()
    }

    func take(seconds: Double = 20) -> T? {
        guard ready.wait(timeout: .now() + seconds) == .success else { return nil }
        return value.withLock { $0 }
    }
}

/// State shared between a test and its server thread.
final class Shared<T: Sendable>: Sendable {
    private let value: Mutex<T>
    init(_ initial: T) { value = Mutex(initial) }
    func with<R>(_ body: (inout T) -> R) -> R { value.withLock { body(&$0) } }
    var current: T { value.withLock { $0 } }
}

func ulid() -> ULID { ULIDGenerator.shared.next() }

func event(_ seq: UInt64, _ kind: EventKind, job: ULID, record: ULID? = nil, failure: FailureDetail? = nil) -> Event {
    Event(seq: seq, time: 1_730_000_000_000 + seq, kind: kind, jobID: job, attempt: kind == .accepted ? 0 : 1,
          sourceName: "img-\(seq).jpg", workerID: kind == .accepted ? "" : "w-1", recordID: record, failure: failure)
}

/// A JPEG-looking payload (SOI marker first) of `count` bytes.
func fakeJPEG(_ count: Int = 64, seed: UInt8 = 0) -> [UInt8] {
    [0xFF, 0xD8] + (0..<max(0, count - 2)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
}
