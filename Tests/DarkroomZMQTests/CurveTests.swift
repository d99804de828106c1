import Testing
import DarkroomZMQ

@Suite struct Z85Tests {
    @Test func encodesTheSpecificationVector() throws {
        // The example from the Z85 specification (ZeroMQ RFC 32).
        let bytes: [UInt8] = [0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]
        #expect(try Z85.encode(bytes) == "HelloWorld")
        #expect(try Z85.decode("HelloWorld") == bytes)
    }

    @Test func rejectsMalformedInput() {
        #expect(throws: ZMQError.self) { try Z85.encode([1, 2, 3]) }
        #expect(throws: ZMQError.self) { try Z85.decode("Hell") }
        #expect(throws: ZMQError.self) { try Z85.decode("Hell~") }
        #expect(throws: ZMQError.self) { try CurveKey(z85: "tooshort") }
        #expect(throws: ZMQError.self) { try CurveKey(bytes: [1, 2, 3]) }
    }
}

@Suite(.enabled(if: Curve.isAvailable, "libzmq built without CURVE"))
struct CurveTests {
    @Test func keyPairsRoundTripThroughText() throws {
        let pair = try CurveKeyPair.generate()
        #expect(pair.publicKey.z85.count == 40)
        #expect(pair.publicKey != pair.secretKey)
        #expect(try CurveKey(z85: " \(pair.publicKey.z85)\n") == pair.publicKey)
        #expect(try CurveKeyPair(secretKey: pair.secretKey) == pair)
        #expect(try CurveKeyPair.generate() != pair)
    }

    @Test func clientWithTheServerKeyExchangesMessages() throws {
        let context = try Context()
        let serverKeys = try CurveKeyPair.generate()
        let server = try Socket.make(context, .router)
        try server.setCurveServer(secretKey: serverKeys.secretKey)
        let endpoint = try server.bindLoopback()

        let client = try Socket.make(context, .dealer)
        try client.setCurveClient(serverKey: serverKeys.publicKey, keyPair: try CurveKeyPair.generate())
        try client.connect(endpoint)
        try client.send([bytes("secret hello")])

        let request = try #require(try server.receive())
        #expect(request.count == 2)
        #expect(request[1] == bytes("secret hello"))
        try server.send([request[0], bytes("secret reply")])
        #expect(try client.receive() == [bytes("secret reply")])
    }

    @Test func clientWithTheWrongServerKeyGetsNothing() throws {
        let context = try Context()
        let serverKeys = try CurveKeyPair.generate()
        let server = try Socket.make(context, .router)
        try server.setCurveServer(secretKey: serverKeys.secretKey)
        let endpoint = try server.bindLoopback()

        let impostorKey = try CurveKeyPair.generate().publicKey
        let client = try Socket.make(context, .dealer)
        try client.setCurveClient(serverKey: impostorKey, keyPair: try CurveKeyPair.generate())
        try client.connect(endpoint)
        try client.send([bytes("hello?")])

        let poller = Poller()
        let serverItem = poller.add(server)
        let clientItem = poller.add(client)
        let result = try poller.poll(timeoutMilliseconds: 500)
        #expect(!result.isReadable(serverItem))
        #expect(!result.isReadable(clientItem))
        #expect(try server.receive(dontWait: true) == nil)
    }

    @Test func zapHandlerAdmitsOnlyAllowedKeys() throws {
        let context = try Context()
        let serverKeys = try CurveKeyPair.generate()
        let allowed = try CurveKeyPair.generate()
        let refused = try CurveKeyPair.generate()

        // The handler owns its REP socket on its own thread and stops when
        // the context is shut down.
        let handlerReady = Handoff<Bool>()
        let allowedKey = allowed.publicKey
        let handler = Spawned { () -> [String] in
            var decisions: [String] = []
            do {
                let zap = try context.socket(.rep)
                defer { zap.close() }
                try zap.setLinger(milliseconds: 0)
                try zap.bind(ZAPRequest.endpoint)
                handlerReady.put(true)
                while let frames = try zap.receive() {
                    let request = try ZAPRequest(frames: frames)
                    let ok = request.mechanism == "CURVE" && request.curvePublicKey == allowedKey
                    decisions.append(ok ? "allow" : "deny")
                    try zap.send(request.reply(status: ok ? 200 : 400, text: ok ? "OK" : "unknown key", userID: ok ? "worker" : ""))
                }
            } catch let error as ZMQError where error.isTerminated {
                decisions.append("stopped")
            } catch {
                decisions.append("error: \(error)")
            }
            return decisions
        }
        #expect(handlerReady.take() == true)

        let server = try Socket.make(context, .router)
        try server.setCurveServer(secretKey: serverKeys.secretKey)
        try server.setZAPDomain("darkroom")
        let endpoint = try server.bindLoopback()

        let stranger = try Socket.make(context, .dealer)
        try stranger.setCurveClient(serverKey: serverKeys.publicKey, keyPair: refused)
        try stranger.connect(endpoint)
        try stranger.send([bytes("from stranger")])

        let member = try Socket.make(context, .dealer)
        try member.setCurveClient(serverKey: serverKeys.publicKey, keyPair: allowed)
        try member.connect(endpoint)
        try member.send([bytes("from member")])

        let first = try #require(try server.receive())
        #expect(first.last == bytes("from member"))
        let poller = Poller()
        let item = poller.add(server)
        #expect(!(try poller.poll(timeoutMilliseconds: 300).isReadable(item)))

        server.close()
        stranger.close()
        member.close()
        context.shutdown()
        let decisions = try #require(handler.wait())
        #expect(decisions.contains("allow"))
        #expect(decisions.contains("deny"))
        #expect(decisions.last == "stopped")
    }
}
