import Dispatch
import Foundation
import Testing
@testable import DarkroomClient
import DarkroomZMQ

/// A server that goes away while a client is still reading its long
/// multipart messages (a broker killed in the middle of a flood of
/// answers). libzmq learns of the reconnect between two frames of a
/// message the client is reading; with `ZMQ_IMMEDIATE` on the client's
/// socket it then ends the connection's pipe under that half-read message
/// and aborts the process (`!_more`, fq.cpp). The channel must read on.
@Suite struct ChannelReconnectTests {
    static let rounds = 3
    static let messagesPerRound = 300
    static let framesPerMessage = 150

    /// Frame `frame` of message `message` of round `round`: what the client checks.
    static func frame(round: Int, message: Int, frame: Int) -> [UInt8] {
        [UInt8(round), UInt8(message >> 8), UInt8(message & 0xff), UInt8(frame)]
    }

    @Test("a server closed while the client is midway through its 150-frame messages, three times: the channel reconnects, the process lives, and every message it reads is whole")
    func serverGoneMidMessage() throws {
        let context = try Context()
        let serverContext = try Context()
        // An ipc path of this test's own, bound again each round so that the
        // client's one connection reconnects to it (a TCP port, once freed,
        // could be taken by a test running alongside).
        let endpoint = "ipc://\(NSTemporaryDirectory())darkroom-channel-\(UUID().uuidString)"
        let requested = DispatchSemaphore(value: 0)
        let closed = DispatchSemaphore(value: 0)
        let serverDone = Handoff<String?>()
        Thread.detachNewThread {
            do {
                for round in 0..<Self.rounds {
                    let router = try serverContext.socket(.router)
                    // Closing sends what is queued first, then drops the
                    // connection: every message reaches the client.
                    try router.setLinger(milliseconds: 5_000)
                    try router.setSendHighWaterMark(0)
                    // libzmq closes the last round's listener in the
                    // background: the path may be busy for a moment.
                    var attempts = 0
                    while true {
                        do {
                            try router.bind(endpoint)
                            break
                        } catch where attempts < 200 {
                            attempts += 1
                            Thread.sleep(forTimeInterval: 0.01)
                        }
                    }
                    guard let request = try router.receive(), let peer = request.first else { throw ServerFailure("no request") }
                    requested.signal()
                    for message in 0..<Self.messagesPerRound {
                        let frames = [peer] + (0..<Self.framesPerMessage).map { Self.frame(round: round, message: message, frame: $0) }
                        try router.send(frames)
                    }
                    // Drop the connection while the client is still reading.
                    Thread.sleep(forTimeInterval: 0.1)
                    router.close()
                    closed.signal()
                }
                serverDone.put(nil)
            } catch {
                serverDone.put("\(error)")
            }
        }

        let channel = try Channel(context: context, endpoint: endpoint, role: .broker, timeout: .seconds(10), curve: nil)
        var received: [Int: Int] = [:]
        for round in 0..<Self.rounds {
            try channel.send([Array("more".utf8)], what: "the request of round \(round)")
            #expect(requested.wait(timeout: .now() + 10) == .success, "round \(round): the server got no request")
            var next = 0
            // Slowly, so that the server closes while messages still wait
            // and libzmq's reconnect lands between frames of one of them.
            while next < Self.messagesPerRound, let frames = try channel.receive(until: .now + .seconds(5)) {
                #expect(frames.count == Self.framesPerMessage, "round \(round) message \(next): \(frames.count) frames")
                let expected = (0..<Self.framesPerMessage).map { Self.frame(round: round, message: next, frame: $0) }
                #expect(frames == expected, "round \(round): message \(next) not whole or out of order")
                next += 1
                Thread.sleep(forTimeInterval: 0.001)
            }
            received[round] = next
            // The next request goes once this round's connection is gone.
            #expect(closed.wait(timeout: .now() + 10) == .success, "round \(round): the server did not close")
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(serverDone.take() == .some(nil))
        // What reached the client before the server closed is still read:
        // every message of every round.
        #expect(received == Dictionary(uniqueKeysWithValues: (0..<Self.rounds).map { ($0, Self.messagesPerRound) }))
    }
}

/// A send looks at the handshake events at most `handshakeFreshness`
/// apart while linked (one look serves a burst of SUBMITs); once the server
/// is gone and that time has passed, a send must see the drop and wait for a
/// connection instead of handing the message to the socket.
@Suite struct ChannelSendGateTests {
    @Test("a burst of sends while linked all arrive; after the server goes away, a send waits for a connection and ends unsent")
    func sendAfterDropWaits() throws {
        let context = try Context()
        let serverContext = try Context()
        let endpoint = "ipc://\(NSTemporaryDirectory())darkroom-gate-\(UUID().uuidString)"
        let router = try serverContext.socket(.router)
        try router.setLinger(milliseconds: 0)
        try router.bind(endpoint)
        let channel = try Channel(context: context, endpoint: endpoint, role: .broker, timeout: .milliseconds(600), curve: nil)
        // Linked: every message of a burst is handed over and arrives.
        let burst = 200
        for n in 0..<burst { try channel.send([Array("m\(n)".utf8)], what: "message \(n)") }
        var arrived = 0
        let poller = Poller()
        poller.add(router)
        while arrived < burst, try poller.poll(timeoutMilliseconds: 5_000).isReadable(0) {
            while let frames = try router.receive(dontWait: true) {
                #expect(frames.last == Array("m\(arrived)".utf8))
                arrived += 1
            }
        }
        #expect(arrived == burst)

        router.close()
        // Long past the freshness of the last look, and long enough for the
        // monitor to report the drop.
        Thread.sleep(forTimeInterval: 0.3)
        let started = ContinuousClock.now
        do {
            try channel.send([Array("after the drop".utf8)], what: "the late message")
            Issue.record("a send after the server went away was handed to the socket")
        } catch {
            #expect(error.kind == .timeout, "\(error)")
            #expect(error.message.contains("could not send the late message"), "\(error.message)")
        }
        #expect(ContinuousClock.now - started >= .milliseconds(500), "the send did not wait for a connection")
    }
}

private struct ServerFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
