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

private struct ServerFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
