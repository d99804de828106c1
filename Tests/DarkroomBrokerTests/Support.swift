import DarkroomBroker
import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Testing

/// A broker on loopback with `*` ports and a temp data directory, plus
/// real DEALER/SUB peers that speak DRK1 to it.
final class Harness {
    let context: Context
    let directory: String
    var configuration: BrokerConfiguration
    var broker: Broker

    init(_ adjust: (inout BrokerConfiguration) -> Void = { _ in }, directory: String? = nil) throws {
        context = try Context()
        self.directory = directory ?? NSTemporaryDirectory() + "darkroom-broker-test-\(UUID().uuidString)"
        var configuration = BrokerConfiguration(dataDirectory: self.directory)
        configuration.frontendEndpoint = "tcp://127.0.0.1:*"
        configuration.backendEndpoint = "tcp://127.0.0.1:*"
        configuration.eventsEndpoint = "tcp://127.0.0.1:*"
        configuration.heartbeatInterval = .milliseconds(500)
        configuration.heartbeatLiveness = 20
        configuration.retryBackoffBase = .milliseconds(20)
        configuration.retryBackoffCap = .milliseconds(100)
        adjust(&configuration)
        self.configuration = configuration
        broker = Broker(configuration, context: context, logger: Logger("broker-test", minimum: .error))
        try broker.start()
    }

    /// Stops the broker and starts a new one on the same data directory (new ports).
    func restart() throws {
        broker.stop(grace: .seconds(1))
        broker.wait()
        broker = Broker(configuration, context: context, logger: Logger("broker-test", minimum: .error))
        try broker.start()
    }

    func endpoint(_ name: String) -> String { broker.boundEndpoints[name] ?? "" }

    func client() throws -> Client { try Client(context: context, endpoint: endpoint("frontend")) }
    func worker(_ id: String, slots: UInt32 = 4) throws -> TestWorker {
        try TestWorker(context: context, endpoint: endpoint("backend"), id: id, slots: slots)
    }

    /// A SUB on the events socket, subscribed to `topic` ("ev": one EVENT
    /// per message; "eb": EVENTS batches).
    func subscriber(_ topic: [UInt8] = Wire.eventTopic) throws -> Socket {
        let socket = try context.socket(.sub)
        try socket.setLinger(milliseconds: 0)
        try socket.setReceiveTimeout(milliseconds: 200)
        try socket.subscribe(topic)
        try socket.connect(endpoint("events"))
        return socket
    }

    deinit {
        broker.stop(grace: .milliseconds(200))
        broker.wait()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A producer/admin client: one DEALER on the frontend.
final class Client {
    let socket: Socket
    var nextID: UInt64 = 1

    init(context: Context, endpoint: String) throws {
        socket = try context.socket(.dealer)
        try socket.setLinger(milliseconds: 0)
        try socket.setReceiveTimeout(milliseconds: 15_000)
        try socket.connect(endpoint)
    }

    func send(_ frames: [[UInt8]]) throws { try socket.send(frames) }

    func receive() throws -> FrontendMessage {
        guard let frames = try socket.receive() else { throw TestFailure("no reply from the broker") }
        return try FrontendMessage.decode(frames)
    }

    func request(_ make: (UInt64) -> [[UInt8]]) throws -> FrontendMessage {
        let id = nextID
        nextID += 1
        try send(make(id))
        return try receive()
    }

    func submit(priority: UInt8 = 0, options: JobOptions = .default, pipeline: String = "crop:square", source: String = "a.jpg",
                image: [UInt8] = jpeg(), notBefore: UInt64? = nil, maxAttempts: UInt16? = nil, expires: UInt64? = nil,
                timeLimit: UInt32? = nil) throws -> FrontendMessage {
        try request {
            Submit(requestID: $0, priority: priority, options: options, pipeline: pipeline, sourceName: source, image: image, notBefore: notBefore,
                   maxAttempts: maxAttempts, expires: expires, timeLimit: timeLimit).frames()
        }
    }

    /// Submits and returns the job id, failing the test on anything but ACCEPTED.
    func submitAccepted(priority: UInt8 = 0, options: JobOptions = .default, source: String = "a.jpg", image: [UInt8] = jpeg(),
                        notBefore: UInt64? = nil, maxAttempts: UInt16? = nil, expires: UInt64? = nil, timeLimit: UInt32? = nil) throws -> Accepted {
        let reply = try submit(priority: priority, options: options, source: source, image: image, notBefore: notBefore, maxAttempts: maxAttempts,
                               expires: expires, timeLimit: timeLimit)
        guard case .accepted(let accepted) = reply else { throw TestFailure("expected ACCEPTED, got \(reply)") }
        return accepted
    }

    func story(_ job: ULID) throws -> JobStory {
        let reply = try request { JobInfoRequest(requestID: $0, jobID: job).frames() }
        guard case .jobInfoReply(let info) = reply else { throw TestFailure("expected JOB-INFO-REPLY, got \(reply)") }
        return info.story
    }

    func status() throws -> BrokerStatus {
        let reply = try request { StatusRequest(requestID: $0).frames() }
        guard case .statusReply(let status) = reply else { throw TestFailure("expected STATUS-REPLY, got \(reply)") }
        return status.status
    }

    /// Replays from `from` and returns the events and the REPLAY-END.
    func replay(from: UInt64, limit: UInt32 = 0) throws -> ([Event], ReplayEnd) {
        let id = nextID
        nextID += 1
        try send(ReplayRequest(requestID: id, fromSeq: from, limit: limit).frames())
        var events: [Event] = []
        while true {
            switch try receive() {
            case .event(let event): events.append(event)
            case .replayEnd(let end) where end.requestID == id: return (events, end)
            case let other: throw TestFailure("unexpected reply during REPLAY: \(other)")
            }
        }
    }

    /// Polls STATUS until `condition` holds (or 15 s pass).
    func waitForStatus(_ what: String, _ condition: (BrokerStatus) -> Bool) throws -> BrokerStatus {
        let deadline = Date().addingTimeInterval(15)
        while true {
            let status = try status()
            if condition(status) { return status }
            if Date() > deadline { throw TestFailure("timed out waiting for \(what); last status \(status)") }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }
}

/// A worker: one DEALER on the backend.
final class TestWorker {
    let socket: Socket
    let id: String
    let slots: UInt32

    init(context: Context, endpoint: String, id: String, slots: UInt32) throws {
        socket = try context.socket(.dealer)
        try socket.setLinger(milliseconds: 0)
        try socket.setReceiveTimeout(milliseconds: 50)
        try socket.connect(endpoint)
        self.id = id
        self.slots = slots
    }

    func send(_ message: BackendMessage) throws { try socket.send(message.frames()) }

    func ready(credit: UInt32) throws {
        try send(.ready(Ready(workerID: id, host: "test-host", pid: 4242, slots: slots)))
        if credit > 0 { try send(.credit(Credit(count: credit))) }
    }

    /// The next non-HEARTBEAT message within `seconds`, answering heartbeats meanwhile.
    func next(within seconds: Double = 15) throws -> BackendMessage? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard let frames = try socket.receive() else {
                try send(.heartbeat)
                continue
            }
            let message = try BackendMessage.decode(frames)
            if message == .heartbeat {
                try send(.heartbeat)
                continue
            }
            return message
        }
        return nil
    }

    func job(within seconds: Double = 15) throws -> JobDispatch {
        let message = try next(within: seconds)
        guard case .job(let job) = message else { throw TestFailure("expected JOB, got \(String(describing: message))") }
        return job
    }

    func done(_ job: JobDispatch, record: ULID = ULIDGenerator.shared.next()) throws {
        try send(.done(Done(jobID: job.jobID, attempt: job.attempt, recordID: record)))
    }

    func fail(_ job: JobDispatch, retryable: Bool, code: String = "internal", reason: String = "boom",
              stepIndex: Int32 = 0, step: String = "") throws {
        try send(.fail(Fail(jobID: job.jobID, attempt: job.attempt, retryable: retryable,
                            failure: FailureDetail(stepIndex: stepIndex, step: step, code: code, reason: reason))))
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Bytes that pass the broker's JPEG check (it only looks at the SOI marker;
/// the worker decodes).
func jpeg(size: Int = 64, seed: UInt8 = 1) -> [UInt8] {
    var bytes: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0]
    bytes.reserveCapacity(size)
    var state = seed
    while bytes.count < size {
        state = state &* 31 &+ 7
        bytes.append(state)
    }
    return bytes
}

/// Reads published events, in either form, until `count` arrived (or 15 s pass).
func collectEvents(_ socket: Socket, count: Int) throws -> [Event] {
    try collectMessages(socket, events: count).flatMap(\.events)
}

/// Reads published messages until they hold `events` events (or 15 s pass).
func collectMessages(_ socket: Socket, events count: Int) throws -> [EventMessage] {
    var messages: [EventMessage] = []
    var events = 0
    let deadline = Date().addingTimeInterval(15)
    while events < count && Date() < deadline {
        guard let frames = try socket.receive() else { continue }
        let message = try EventMessage.decode(frames)
        messages.append(message)
        events += message.events.count
    }
    return messages
}
