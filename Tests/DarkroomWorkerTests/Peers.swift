import Testing
import DarkroomCore
import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
import DarkroomWorker
import DarkroomZMQ
import Dispatch
import Foundation
import Synchronization

/// A socket the test owns, bound on an ephemeral loopback port, that reads
/// with a short timeout so a waiting loop can give up after a deadline.
struct BoundRouter {
    let socket: Socket
    let endpoint: String

    /// Binds `endpoint`: a free port by default, or the endpoint of a peer
    /// that went away, to play it coming back.
    init(_ context: Context, endpoint: String = "tcp://127.0.0.1:*") throws {
        socket = try context.socket(.router)
        try socket.setLinger(milliseconds: 0)
        try socket.setMaxMessageSize(Wire.maxMessageSize)
        try socket.setReceiveTimeout(milliseconds: 100)
        try socket.bind(endpoint)
        self.endpoint = try socket.lastEndpoint()
    }

    /// The next message as (identity, DRK1 frames), or nil after `seconds`.
    func receive(seconds: Double) throws -> (identity: [UInt8], frames: [[UInt8]])? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard let frames = try socket.receive() else { continue }
            guard frames.count >= 1 else { continue }
            return (frames[0], Array(frames.dropFirst()))
        }
        return nil
    }

    func send(_ frames: [[UInt8]], to identity: [UInt8]) throws {
        try socket.send([identity] + frames)
    }
}

/// The broker's backend, played by the test: a ROUTER speaking DRK1.
struct TestBroker {
    let router: BoundRouter
    var endpoint: String { router.endpoint }

    init(_ context: Context, endpoint: String = "tcp://127.0.0.1:*") throws {
        router = try BoundRouter(context, endpoint: endpoint)
    }

    /// The next backend message other than HEARTBEAT and PING, or nil
    /// after `seconds`. A PING (the worker timing its round trip) is
    /// answered with PONG, as a broker does.
    func next(seconds: Double = 20) throws -> (identity: [UInt8], message: BackendMessage)? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard let (identity, frames) = try router.receive(seconds: deadline.timeIntervalSinceNow) else { return nil }
            let message = try BackendMessage.decode(frames)
            if message == .heartbeat { continue }
            if case .ping(let ping) = message {
                try router.send(Pong(requestID: ping.requestID).frames(), to: identity)
                continue
            }
            return (identity, message)
        }
        return nil
    }

    func send(_ message: BackendMessage, to identity: [UInt8]) throws {
        try router.send(message.frames(), to: identity)
    }

    /// Expects READY then CREDIT from a new session; returns its identity,
    /// the READY and the credit granted.
    func handshake(seconds: Double = 20) throws -> (identity: [UInt8], ready: Ready, credit: UInt32)? {
        guard let (identity, first) = try next(seconds: seconds), case .ready(let ready) = first else { return nil }
        guard let (sameIdentity, second) = try next(seconds: seconds), sameIdentity == identity,
              case .credit(let credit) = second else { return nil }
        return (identity, ready, credit.count)
    }

    /// Expects the opening of a session by a worker that still holds jobs:
    /// READY, then HOLDING, from one new identity. The reports and CREDIT
    /// that follow are left to the caller.
    func holdingHandshake(seconds: Double = 20) throws -> (identity: [UInt8], ready: Ready, holding: Holding)? {
        guard let (identity, first) = try next(seconds: seconds), case .ready(let ready) = first else { return nil }
        guard let (sameIdentity, second) = try next(seconds: seconds), sameIdentity == identity,
              case .holding(let holding) = second else { return nil }
        return (identity, ready, holding)
    }
}

/// The storage node, played by the test: a ROUTER that answers STORE only
/// when the test says so.
struct TestStore {
    let router: BoundRouter
    var endpoint: String { router.endpoint }

    init(_ context: Context, endpoint: String = "tcp://127.0.0.1:*") throws { router = try BoundRouter(context, endpoint: endpoint) }

    /// The next STORE and who sent it, or nil after `seconds`.
    func nextStore(seconds: Double = 20) throws -> (identity: [UInt8], request: StoreRequest)? {
        guard let (identity, frames) = try router.receive(seconds: seconds) else { return nil }
        guard case .store(let request) = try StoreMessage.decode(frames) else { return nil }
        return (identity, request)
    }

    func reply(_ message: StoreMessage, to identity: [UInt8]) throws {
        try router.send(message.frames(), to: identity)
    }

    /// Answers one STORE with STORED and a fresh record id, which it returns.
    @discardableResult
    func answer(_ request: StoreRequest, from identity: [UInt8]) throws -> ULID {
        let record = ULIDGenerator.shared.next()
        try reply(.stored(Stored(requestID: request.requestID, jobID: request.jobID, recordID: record, created: true)), to: identity)
        return record
    }
}

enum Fixture {
    /// A small rendered photo as JPEG: tiny, so debug builds stay fast.
    static let jpeg: [UInt8] = {
        (try? JPEG.encode(SamplePhoto.render(Size(width: 96, height: 72), seed: 11), options: EncodeOptions(quality: 90))) ?? []
    }()

    static let thumbnail32 = DarkroomProtocol.JobOptions(thumbnailWidth: 32, thumbnailHeight: 32, quality: 90, thumbnailQuality: 70)

    static func job(
        pipeline: String = "scale:64x64,mode=fill | crop:square",
        image: [UInt8] = Fixture.jpeg,
        attempt: UInt32 = 1,
        source: String = "tiny.jpg"
    ) -> JobDispatch {
        JobDispatch(jobID: ULIDGenerator.shared.next(), attempt: attempt, options: thumbnail32, pipeline: pipeline, sourceName: source, image: image)
    }
}

/// A worker connected to the test's broker and to the storage node at
/// `store` (an endpoint: the test's store, or one nothing listens on),
/// with timings short enough for tests (none of them is asserted).
func makeWorker(
    _ context: Context,
    broker: TestBroker,
    store storeEndpoint: String,
    concurrency: Int = 2,
    heartbeat: Duration = .seconds(5),
    storeTimeout: Duration = .seconds(20),
    storeRetry: Duration = .seconds(5),
    prefetch: Int = 0
) throws -> Worker {
    let configuration = WorkerConfiguration(
        backendEndpoint: broker.endpoint,
        storeEndpoint: storeEndpoint,
        concurrency: concurrency,
        heartbeatInterval: heartbeat,
        reconnectInitial: .milliseconds(50),
        reconnectMaximum: .milliseconds(400),
        storeTimeout: storeTimeout,
        storeRetryInterval: storeRetry,
        prefetch: prefetch
    )

    let worker = Worker(configuration, context: context, logger: Logger("worker-test", minimum: .warn))
    try worker.start()
    return worker
}

/// A worker under test with its two peers, past its handshake (READY and
/// the first CREDIT). Stop it with `stop()` in a `defer`.
struct WorkerRig {
    let context: Context
    let broker: TestBroker
    let store: TestStore
    let worker: Worker
    let session: (identity: [UInt8], ready: Ready, credit: UInt32)

    init() throws {
        context = try Context()
        broker = try TestBroker(context)
        store = try TestStore(context)
        worker = try makeWorker(context, broker: broker, store: store.endpoint)
        do {
            session = try #require(try broker.handshake())
        } catch {
            worker.stop(grace: .zero)
            throw error
        }
    }

    func stop() {
        worker.stop(grace: .zero)
    }
}

/// Polls `condition` until it holds or `seconds` pass.
func eventually(seconds: Double = 20, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return condition()
}

/// Runs `body` on its own thread; `wait` returns once it has finished.
final class Background: Sendable {
    private let done = DispatchSemaphore(value: 0)
    init(_ body: @escaping @Sendable () -> Void) {
        Thread.detachNewThread { [done] in
            body()
            done.signal()
        }
    }
    func wait(seconds: Double = 30) -> Bool {
        done.wait(timeout: .now() + seconds) == .success
    }
}

/// A session a worker opened, as the broker sees it: the READY, then
/// everything the worker sent on that connection up to and including its
/// first CREDIT (HEARTBEATs left out).
struct OpenedSession {
    var identity: [UInt8]
    var ready: Ready
    var opening: [BackendMessage]
}

extension TestBroker {
    /// Plays a broker that has just started and knows no connection: a
    /// message from a connection that has not sent READY here is answered
    /// with DISCONNECT, as DRK1 asks (section 6.2), and the first session
    /// opened with READY is read through to its CREDIT. READY is answered
    /// with a HEARTBEAT, so the worker does not give up on the session while
    /// the test reads it.
    func awaitSession(seconds: Double = 20) throws -> OpenedSession? {
        let deadline = Date().addingTimeInterval(seconds)
        var session: OpenedSession?
        while Date() < deadline {
            guard let (identity, frames) = try router.receive(seconds: deadline.timeIntervalSinceNow) else { return nil }
            let message = try BackendMessage.decode(frames)
            if case .ready(let ready) = message {
                try send(.heartbeat, to: identity)
                session = OpenedSession(identity: identity, ready: ready, opening: [])
                continue
            }
            guard var opened = session, opened.identity == identity else {
                if message != .disconnect { try send(.disconnect, to: identity) }
                continue
            }
            if message == .heartbeat { continue }
            opened.opening.append(message)
            if case .credit = message { return opened }
            session = opened
        }
        return nil
    }

    /// A broker bound to `endpoint` again, as when a broker restarts: the
    /// port of a ROUTER just closed may take a moment to come free.
    static func rebind(_ context: Context, _ endpoint: String, seconds: Double = 10) throws -> TestBroker {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            do {
                return try TestBroker(context, endpoint: endpoint)
            } catch where Date() < deadline {
                Thread.sleep(forTimeInterval: 0.02)
            }
        }
    }
}
