import Testing
import DarkroomZMQ
import Glibc

@Suite struct SocketTests {
    @Test func versionIsModern() {
        let version = ZMQVersion.current
        #expect(version >= ZMQVersion(major: 4, minor: 2, patch: 0))
        #expect(version.description.split(separator: ".").count == 3)
    }

    @Test func routerDealerMultipartRoundTripWithIdentities() throws {
        let context = try Context()
        let router = try Socket.make(context, .router)
        try router.setRouterMandatory(true)
        let endpoint = try router.bindLoopback()
        #expect(endpoint.hasPrefix("tcp://127.0.0.1:"))
        #expect(!endpoint.hasSuffix(":*"))

        let alpha = try Socket.make(context, .dealer)
        try alpha.setRoutingID(bytes("alpha"))
        #expect(try alpha.routingID() == bytes("alpha"))
        try alpha.connect(endpoint)
        let beta = try Socket.make(context, .dealer)
        try beta.setRoutingID(bytes("beta"))
        try beta.connect(endpoint)

        let binary: [UInt8] = [0, 255, 1, 254, 0, 0]
        try alpha.send([bytes("job"), [], binary])
        try beta.send([bytes("credit"), bytes("4")])

        var seen: [[UInt8]: [[UInt8]]] = [:]
        for _ in 0..<2 {
            let message = try #require(try router.receive())
            let identity = try #require(message.first)
            seen[identity] = Array(message.dropFirst())
        }
        #expect(seen[bytes("alpha")] == [bytes("job"), [], binary])
        #expect(seen[bytes("beta")] == [bytes("credit"), bytes("4")])

        try router.send([bytes("beta"), bytes("to beta")])
        try router.send([bytes("alpha"), bytes("to alpha"), []])
        #expect(try alpha.receive() == [bytes("to alpha"), []])
        #expect(try beta.receive() == [bytes("to beta")])

        // With ROUTER_MANDATORY an unknown identity is an error, not a silent drop.
        let unknown = #expect(throws: ZMQError.self) {
            try router.send([bytes("nobody"), bytes("x")])
        }
        #expect(unknown?.isHostUnreachable == true)
        #expect(unknown?.name == "EHOSTUNREACH")
    }

    @Test func publishSubscribeFiltersByPrefix() throws {
        let context = try Context()
        let publisher = try Socket.make(context, .pub)
        let endpoint = try publisher.bindLoopback()
        let subscriber = try Socket.make(context, .sub)
        try subscriber.subscribe("event.")
        try subscriber.connect(endpoint)

        // A subscription reaches the publisher asynchronously, so publish
        // until the first matching message arrives.
        let poller = Poller()
        let item = poller.add(subscriber)
        var received: [[UInt8]]?
        for sequence in 0..<500 where received == nil {
            try publisher.send([bytes("other.\(sequence)"), bytes("ignored")])
            try publisher.send([bytes("event.\(sequence)"), bytes("payload")])
            if try poller.poll(timeoutMilliseconds: 20).isReadable(item) {
                received = try subscriber.receive(dontWait: true)
            }
        }
        let first = try #require(received)
        #expect(first.count == 2)
        #expect(first[0].starts(with: bytes("event.")))
        #expect(first[1] == bytes("payload"))

        try publisher.send([bytes("event.last"), bytes("end")])
        var rest: [[[UInt8]]] = []
        while let message = try subscriber.receive() {
            rest.append(message)
            if message[0] == bytes("event.last") { break }
        }
        #expect(rest.last == [bytes("event.last"), bytes("end")])
        #expect(rest.allSatisfy { $0[0].starts(with: bytes("event.")) })
    }

    @Test func aTCPPortAbove65535IsRefusedNotWrapped() throws {
        let context = try Context()
        let socket = try Socket.make(context, .router)
        for endpoint in ["tcp://127.0.0.1:73440", "tcp://127.0.0.1:65536", "tcp://127.0.0.1:99999999999999999999"] {
            #expect {
                try socket.bind(endpoint)
            } throws: { error in
                (error as? ZMQError)?.message == "port \(endpoint.split(separator: ":").last!) is out of range: a TCP port is 0 to 65535"
            }
            #expect(throws: ZMQError.self) { try socket.connect(endpoint) }
        }
        // No port was bound behind the refusals (73440 modulo 65536 is 7904).
        #expect(try socket.lastEndpoint() == "")
        try socket.bind("tcp://127.0.0.1:*")
        #expect(try socket.lastEndpoint().hasPrefix("tcp://127.0.0.1:"))
    }

    @Test func pollReturnsNothingWhenIdle() throws {
        let context = try Context()
        let pull = try Socket.make(context, .pull)
        _ = try pull.bindLoopback()
        let poller = Poller()
        let item = poller.add(pull)
        let result = try poller.poll(timeoutMilliseconds: 50)
        #expect(result.isEmpty)
        #expect(!result.isReadable(item))
        #expect(try pull.receive(dontWait: true) == nil)
    }

    @Test func nonBlockingSendReportsWouldBlock() throws {
        let context = try Context()
        // A DEALER with no peer has nowhere to queue a message.
        let dealer = try Socket.make(context, .dealer)
        let error = #expect(throws: ZMQError.self) {
            try dealer.send([bytes("x")], dontWait: true)
        }
        #expect(error?.isWouldBlock == true)
        #expect(checkMatchesWouldBlock { try dealer.send([bytes("x")], dontWait: true) })
    }

    /// Whether `body` fails with an error that `catch ZMQError.Code.wouldBlock` catches.
    private func checkMatchesWouldBlock(_ body: () throws -> Void) -> Bool {
        do {
            try body()
            return false
        } catch ZMQError.Code.wouldBlock {
            return true
        } catch {
            return false
        }
    }

    @Test func oversizedMessageDropsOnlyItsSender() throws {
        let context = try Context()
        let router = try Socket.make(context, .router)
        try router.setMaxMessageSize(1024)
        let endpoint = try router.bindLoopback()

        let offender = try Socket.make(context, .dealer)
        try offender.setRoutingID(bytes("offender"))
        try offender.connect(endpoint)
        let honest = try Socket.make(context, .dealer)
        try honest.setRoutingID(bytes("honest"))
        try honest.connect(endpoint)

        try offender.send([[UInt8](repeating: 7, count: 64 * 1024)])
        try honest.send([bytes("small 1")])

        var fromHonest: [[[UInt8]]] = []
        var fromOffender = 0
        while fromHonest.isEmpty, let message = try router.receive() {
            if message[0] == bytes("honest") { fromHonest.append(message) } else { fromOffender += 1 }
        }
        #expect(fromHonest == [[bytes("honest"), bytes("small 1")]])

        // The router keeps serving the other peer.
        try honest.send([bytes("small 2")])
        let next = try #require(try router.receive())
        #expect(next == [bytes("honest"), bytes("small 2")])

        // The oversized message never arrives.
        let poller = Poller()
        let item = poller.add(router)
        while try poller.poll(timeoutMilliseconds: 200).isReadable(item) {
            if let message = try router.receive(dontWait: true), message[0] == bytes("offender") { fromOffender += 1 }
        }
        #expect(fromOffender == 0)
    }

    @Test func contextShutdownUnblocksReceiveOnAnotherThread() throws {
        let context = try Context()
        let bound = Handoff<Bool>()
        let receiver = Spawned { () -> ZMQError? in
            do {
                let socket = try context.socket(.pull)
                defer { socket.close() }
                try socket.setLinger(milliseconds: 0)
                try socket.bind("inproc://shutdown-test")
                bound.put(true)
                _ = try socket.receive()  // blocks with no timeout
                return nil
            } catch let error as ZMQError {
                return error
            } catch {
                return nil
            }
        }
        #expect(bound.take() == true)
        context.shutdown()
        let outcome = try #require(receiver.wait())
        let error = try #require(outcome)
        #expect(error.isTerminated)
        #expect(error.name == "ETERM")
        // New sockets are refused once the context is shut down.
        #expect(throws: ZMQError.self) { try context.socket(.pair) }
        context.close()
    }

    @Test func closedSocketThrowsInsteadOfCrashing() throws {
        let context = try Context()
        let socket = try context.socket(.pair)
        socket.close()
        #expect(!socket.isOpen)
        #expect(throws: ZMQError.self) { try socket.send([bytes("x")]) }
        #expect(throws: ZMQError.self) { try socket.receive(dontWait: true) }
        #expect(throws: ZMQError.self) { try socket.bind("inproc://closed") }
    }

    @Test func badEndpointIsAnError() throws {
        let context = try Context()
        let socket = try Socket.make(context, .pair)
        let error = #expect(throws: ZMQError.self) { try socket.bind("nonsense://x") }
        #expect(error?.call.contains("zmq_bind") == true)
        #expect(error?.message.isEmpty == false)
    }

    @Test func anErrorsTextIsLibzmqsUnlessGivenOne() {
        // Looked up when read, not when the error is made.
        #expect(ZMQError(code: EAGAIN, call: "zmq_msg_recv").message == "Resource temporarily unavailable")
        #expect(ZMQError(code: EAGAIN, call: "zmq_msg_recv", message: "queue full").message == "queue full")
        #expect(ZMQError(code: EAGAIN, call: "zmq_msg_recv") == ZMQError(code: EAGAIN, call: "zmq_msg_recv"))
    }
}
