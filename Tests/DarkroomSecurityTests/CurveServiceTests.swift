import DarkroomBroker
import DarkroomClient
import DarkroomCore
import DarkroomImage
import DarkroomProtocol
import DarkroomSecurity
import DarkroomStore
import DarkroomZMQ
import Foundation
import Testing

/// A broker and a storage node with CURVE keys and a ZAP handler, on
/// 127.0.0.1 ephemeral ports, as `darkroom up --curve-key --allow` runs them.
final class SecureSystem {
    let context: Context
    let dir: TemporaryDirectory
    let server: KeyFile
    let producer: KeyFile
    let worker: KeyFile
    let admin: KeyFile
    let authenticator: ZAPAuthenticator
    let broker: Broker
    let store: StoreNode

    init() throws {
        context = try Context()
        dir = try TemporaryDirectory()
        server = try KeyFile.generate(name: "server", role: nil)
        producer = try KeyFile.generate(name: "alice", role: .producer)
        worker = try KeyFile.generate(name: "w1", role: .worker)
        admin = try KeyFile.generate(name: "ops", role: .admin)
        for file in [server, producer, worker, admin] { try file.save(directory: dir.path("keys")) }
        let allowlist = try LiveAllowlist(directory: dir.path("keys"), serverKey: server.publicKey)
        let serverCurve = ServerCurve(keyPair: try #require(server.keyPair))

        authenticator = ZAPAuthenticator(allowlist: allowlist, context: context, logger: Logger("zap", minimum: .error))
        try authenticator.start()

        var brokerConfig = BrokerConfiguration(dataDirectory: dir.path("broker"))
        brokerConfig.frontendEndpoint = "tcp://127.0.0.1:*"
        brokerConfig.backendEndpoint = "tcp://127.0.0.1:*"
        brokerConfig.eventsEndpoint = "tcp://127.0.0.1:*"
        brokerConfig.curve = serverCurve
        broker = Broker(brokerConfig, context: context, logger: Logger("broker", minimum: .error))
        try broker.start()
        store = StoreNode(StoreConfiguration(endpoint: "tcp://127.0.0.1:*", dataDirectory: dir.path("store"), curve: serverCurve),
                          context: context, logger: Logger("store", minimum: .error))
        try store.start()
    }

    func endpoint(_ name: String) throws -> String {
        try #require(broker.boundEndpoints[name] ?? store.boundEndpoints[name])
    }

    func keys(_ file: KeyFile) throws -> CurveClientKeys {
        CurveClientKeys(serverKey: server.publicKey, keyPair: try #require(file.keyPair))
    }

    /// A DEALER that authenticates as `keyPair`.
    func dealer(_ keyPair: CurveKeyPair, to endpoint: String) throws -> Socket {
        let socket = try context.socket(.dealer)
        try socket.setLinger(milliseconds: 0)
        try socket.setReceiveTimeout(milliseconds: 20_000)
        try socket.setCurveClient(serverKey: server.publicKey, keyPair: keyPair)
        try socket.connect(endpoint)
        return socket
    }

    /// Polls `condition` until it holds or 20 s pass.
    func eventually(_ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return try condition()
    }

    func stop() {
        broker.stop(grace: .seconds(5))
        store.stop(grace: .seconds(5))
        authenticator.stop()
        broker.wait()
        store.wait()
        authenticator.wait()
    }
}

/// Bytes that pass the broker's JPEG check (it looks at the SOI marker).
func jpegLike() -> [UInt8] { [0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 7, count: 60) + [0xFF, 0xD9] }

/// A real JPEG of the given size: the storage node reads the header of what
/// it stores and refuses anything else.
func realJPEG(_ width: Int, _ height: Int) throws -> [UInt8] {
    try JPEG.encode(Image(width: width, height: height, red: 90, green: 120, blue: 150))
}

@Suite(.enabled(if: Curve.isAvailable, "libzmq has no CURVE"))
struct CurveServiceTests {
    @Test func anAllowlistedProducerSubmitsAndAnUnknownKeyGetsNothing() throws {
        let system = try SecureSystem()
        defer { system.stop() }

        let producer = try Producer(endpoint: try system.endpoint("frontend"), context: system.context,
                                    timeout: .seconds(20), curve: try system.keys(system.producer))
        let result = try producer.submit(SubmitRequest(sourceName: "a.jpg", image: .bytes(jpegLike()), pipeline: "crop:square"))
        #expect(result.jobID != nil, "\(result)")
        let allowedBefore = system.authenticator.decisions.allowed
        #expect(allowedBefore >= 1)

        // A key the servers do not know: the handshake is refused, so no
        // request ever reaches the broker, and the client is told so at once
        // rather than after its timeout.
        let strangerKeys = CurveClientKeys(serverKey: system.server.publicKey, keyPair: try CurveKeyPair.generate())
        let stranger = try Producer(endpoint: try system.endpoint("frontend"), context: system.context,
                                    timeout: .seconds(20), curve: strangerKeys)
        var strangerAccepted = false
        let start = ContinuousClock.now
        do {
            strangerAccepted = try stranger.submit(SubmitRequest(sourceName: "b.jpg", image: .bytes(jpegLike()), pipeline: "crop:square")).jobID != nil
        } catch {
            #expect(error.kind == .refused, "\(error)")
            #expect(error.message.contains("refused this client's key"), "\(error)")
        }
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(!strangerAccepted)
        #expect(system.eventually { system.authenticator.decisions.denied >= 1 })

        // Only the producer's job is queued.
        let admin = try Admin(endpoint: try system.endpoint("frontend"), context: system.context,
                              timeout: .seconds(20), curve: try system.keys(system.producer))
        let queue = try admin.status().queue
        #expect(queue.ready.reduce(0, +) + queue.inFlight == 1)
    }

    @Test func aProducerKeyCannotJoinTheBackendButAWorkerKeyCan() throws {
        let system = try SecureSystem()
        defer { system.stop() }
        let backend = try system.endpoint("backend")

        let impostor = try system.dealer(try #require(system.producer.keyPair), to: backend)
        defer { impostor.close() }
        try impostor.send(Ready(workerID: "impostor", host: "h", pid: 1, slots: 1).frames(), dontWait: true)
        #expect(system.eventually { system.authenticator.decisions.denied >= 1 })

        let worker = try system.dealer(try #require(system.worker.keyPair), to: backend)
        defer { worker.close() }
        try worker.send(Ready(workerID: "real-worker", host: "h", pid: 2, slots: 1).frames())

        let admin = try Admin(endpoint: try system.endpoint("frontend"), context: system.context,
                              timeout: .seconds(20), curve: try system.keys(system.producer))
        #expect(try system.eventually { try !admin.status().workers.isEmpty })
        let ids = try admin.status().workers.map(\.id)
        #expect(ids == ["real-worker"])
    }

    @Test func aWorkerKeyStoresAndAProducerKeyReadsTheRecord() throws {
        let system = try SecureSystem()
        defer { system.stop() }
        let storeEndpoint = try system.endpoint("store")

        let worker = try system.dealer(try #require(system.worker.keyPair), to: storeEndpoint)
        defer { worker.close() }
        let job = ULIDGenerator().next()
        let request = StoreRequest(requestID: 1, jobID: job, sourceName: "a.jpg", pipeline: "crop:square",
                                   fullSize: ImageSize(width: 8, height: 8), thumbnailSize: ImageSize(width: 4, height: 4),
                                   full: try realJPEG(8, 8), thumbnail: try realJPEG(4, 4))
        try worker.send(request.frames())
        let reply = try StoreMessage.decode(try #require(try worker.receive()))
        guard case .stored(let stored) = reply else {
            Issue.record("STORE answered \(reply)")
            return
        }
        #expect(stored.jobID == job && stored.created)

        let reader = try StoreClient(endpoint: storeEndpoint, context: system.context, timeout: .seconds(20),
                                     curve: try system.keys(system.producer))
        let records = try reader.list()
        #expect(records.map(\.id) == [stored.recordID])

        // A worker key is not a producer: the frontend refuses it.
        let denied = system.authenticator.decisions.denied
        let wrongRole = try Producer(endpoint: try system.endpoint("frontend"), context: system.context,
                                     timeout: .seconds(2), deadline: .seconds(2), curve: try system.keys(system.worker))
        let outcome = try? wrongRole.submit(SubmitRequest(sourceName: "c.jpg", image: .bytes(jpegLike()), pipeline: "crop:square"))
        #expect(outcome?.jobID == nil)
        #expect(system.eventually { system.authenticator.decisions.denied > denied })
    }

    @Test func eachRoleSendsOnlyItsCommands() throws {
        let system = try SecureSystem()
        defer { system.stop() }
        let frontend = try system.endpoint("frontend")
        let storeEndpoint = try system.endpoint("store")

        // A producer key may submit and read, not manage dead letters or delete.
        let producerAdmin = try Admin(endpoint: frontend, context: system.context, timeout: .seconds(20), curve: try system.keys(system.producer))
        #expect(try producerAdmin.status().queue.dead == 0)
        #expect(throws: ClientError.self) { try producerAdmin.deadRetry(.all) }
        do {
            _ = try producerAdmin.deadDiscard(.all)
            Issue.record("a producer key discarded dead jobs")
        } catch {
            #expect(error.kind == .server(.forbidden), "\(error)")
            #expect(error.description.contains("admin"), "\(error)")
        }
        let producerStore = try StoreClient(endpoint: storeEndpoint, context: system.context, timeout: .seconds(20), curve: try system.keys(system.producer))
        #expect(try producerStore.list().isEmpty)
        do {
            _ = try producerStore.delete(ULIDGenerator().next())
            Issue.record("a producer key deleted a record")
        } catch {
            #expect(error.kind == .server(.forbidden), "\(error)")
        }

        // Nor may it store results as if it were a worker.
        let impostor = try system.dealer(try #require(system.producer.keyPair), to: storeEndpoint)
        defer { impostor.close() }
        let request = StoreRequest(requestID: 9, jobID: ULIDGenerator().next(), sourceName: "fake.jpg", pipeline: "crop:square",
                                   fullSize: ImageSize(width: 8, height: 8), thumbnailSize: ImageSize(width: 4, height: 4),
                                   full: try realJPEG(8, 8), thumbnail: try realJPEG(4, 4))
        try impostor.send(request.frames())
        guard case .error(let refused) = try StoreMessage.decode(try #require(try impostor.receive())) else {
            Issue.record("a producer's STORE was not refused")
            return
        }
        #expect(refused.code == .forbidden && refused.requestID == 9)
        // The role is checked before the images: garbage is forbidden too, not invalid.
        var garbage = request
        garbage.requestID = 10
        garbage.full = jpegLike()
        try impostor.send(garbage.frames())
        guard case .error(let refusedGarbage) = try StoreMessage.decode(try #require(try impostor.receive())) else {
            Issue.record("a producer's STORE of garbage was not refused")
            return
        }
        #expect(refusedGarbage.code == .forbidden && refusedGarbage.requestID == 10)
        #expect(try producerStore.list().isEmpty)

        // An admin key may do all of it.
        let admin = try Admin(endpoint: frontend, context: system.context, timeout: .seconds(20), curve: try system.keys(system.admin))
        #expect(try admin.deadRetry(.all) == 0)
        #expect(try admin.deadDiscard(.all) == 0)
        let adminStore = try StoreClient(endpoint: storeEndpoint, context: system.context, timeout: .seconds(20), curve: try system.keys(system.admin))
        #expect(throws: ClientError.self) { try adminStore.delete(ULIDGenerator().next()) }  // not-found, not forbidden
        do {
            _ = try adminStore.delete(ULIDGenerator().next())
        } catch {
            #expect(error.kind == .server(.notFound), "\(error)")
        }
    }

    @Test func aSecondHandlerOnTheSameContextIsAClearError() throws {
        let context = try Context()
        let dir = try TemporaryDirectory()
        let server = try KeyFile.generate(name: "server", role: nil)
        try server.save(directory: dir.path("keys"))
        let allowlist = try LiveAllowlist(directory: dir.path("keys"), serverKey: server.publicKey)
        let first = ZAPAuthenticator(allowlist: allowlist, context: context, logger: Logger("zap", minimum: .error))
        try first.start()
        defer { first.stop(); first.wait() }
        let second = ZAPAuthenticator(allowlist: allowlist, context: context, logger: Logger("zap", minimum: .error))
        let error = try #require(throws: SecurityError.self) { try second.start() }
        #expect(error.message.contains("another one"))
    }
}
