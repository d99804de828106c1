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
        let bound = Handoff<Result<String, ZMQError>>()
        let requested = DispatchSemaphore(value: 0)
        let serverDone = Handoff<String?>()
        Thread.detachNewThread {
            var endpoint: String?
            do {
                for round in 0..<Self.rounds {
                    let router = try serverContext.socket(.router)
                    try router.setLinger(milliseconds: 0)
                    try router.setSendHighWaterMark(0)
                    if let endpoint {
                        // The same port each round, so that the client's one
                        // connection reconnects to it. libzmq closes the last
                        // round's listener in the background: the port may
                        // be busy for a moment.
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
                    } else {
                        try router.bind("tcp://127.0.0.1:*")
                        endpoint = try router.lastEndpoint()
                        bound.put(.success(endpoint!))
                    }
                    guard let request = try router.receive(), let peer = request.first else { throw ServerFailure("no request") }
                    requested.signal()
                    for message in 0..<Self.messagesPerRound {
                        let frames = [peer] + (0..<Self.framesPerMessage).map { Self.frame(round: round, message: message, frame: $0) }
                        try router.send(frames)
                    }
                    // Let the bytes reach the client, then drop the connection.
                    Thread.sleep(forTimeInterval: 0.1)
                    router.close()
                }
                serverDone.put(nil)
            } catch {
                if endpoint == nil { bound.put(.failure(error as? ZMQError ?? ZMQError(code: 0, call: "server", message: "\(error)"))) }
                serverDone.put("\(error)")
            }
        }
        let endpoint = try #require(bound.take()).get()

        let channel = try Channel(context: context, endpoint: endpoint, role: .broker, timeout: .seconds(10), curve: nil)
        var received: [Int: Int] = [:]
        for round in 0..<Self.rounds {
            try channel.send([Array("more".utf8)], what: "the request of round \(round)")
            #expect(requested.wait(timeout: .now() + 10) == .success, "round \(round): the server got no request")
            var next = 0
            // Slowly, so that the server closes while messages still wait
            // and libzmq's reconnect lands between frames of one of them.
            while next < Self.messagesPerRound, let frames = try channel.receive(until: .now + .seconds(2)) {
                #expect(frames.count == Self.framesPerMessage, "round \(round) message \(next): \(frames.count) frames")
                let expected = (0..<Self.framesPerMessage).map { Self.frame(round: round, message: next, frame: $0) }
                #expect(frames == expected, "round \(round): message \(next) not whole or out of order")
                next += 1
                Thread.sleep(forTimeInterval: 0.001)
            }
            received[round] = next
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
