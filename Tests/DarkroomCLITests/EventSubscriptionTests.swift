import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Testing

/// What peers on the events socket can do to each other's subscriptions,
/// against a real broker, with raw ZMTP peers for what no libzmq socket
/// sends.
@Suite("Events socket: subscriptions", .serialized)
struct EventSubscriptionTests {
    /// The events socket passes up every unsubscribe a peer sends, whether
    /// that peer holds the topic or not. A peer that never subscribed (an
    /// XSUB drops such an unsubscribe itself, a raw peer does not) could
    /// bring the broker's count of a topic to 0, and the broker stopped
    /// publishing the form its subscribers still wanted.
    @Test("an unsubscribe from a peer that never subscribed stops no one's events")
    func strangersUnsubscribe() throws {
        let h = try SystemHarness()
        try h.startBroker()
        let port = SystemHarness.port(of: h.events)
        var subscribers: [(ZMTPPeer, [UInt8])] = []
        for topic in [Wire.eventTopic, Wire.eventBatchTopic] {
            let peer = try ZMTPPeer(port: port)
            try peer.handshake(socketType: "SUB")
            peer.write(ZMTPPeer.subscription(topic))
            subscribers.append((peer, topic))
        }
        let stranger = try ZMTPPeer(port: port)
        try stranger.handshake(socketType: "SUB")
        for _ in 0..<3 {
            for topic in [[], Wire.eventTopic, Wire.eventBatchTopic] { stranger.write(ZMTPPeer.frame([0x00] + topic)) }
        }
        Thread.sleep(forTimeInterval: 0.5)

        let context = try Context()
        let dealer = try context.socket(.dealer)
        defer { dealer.close() }
        try dealer.setLinger(milliseconds: 0)
        try dealer.setReceiveTimeout(milliseconds: 10_000)
        try dealer.connect(h.frontend)
        let photo = try h.writeImages(1, name: "one")
        let image = try [UInt8](Data(contentsOf: photo.appendingPathComponent("photo-000.jpg")))
        try dealer.send(Submit(requestID: 1, priority: 5, options: .default, pipeline: "grayscale", sourceName: "a.jpg", image: image).frames())
        let reply = try #require(try dealer.receive())
        guard case .accepted(let accepted) = try FrontendMessage.decode(reply) else {
            Issue.record("expected ACCEPTED, got a reply of \(reply.count) frame(s)")
            return
        }
        for (peer, topic) in subscribers {
            var got = false
            let deadline = Date().addingTimeInterval(5)
            while !got, Date() < deadline {
                guard let frames = peer.readMessage(timeout: 0.2), frames.first == topic else { continue }
                got = (try? EventMessage.decode(frames))?.events.contains { $0.jobID == accepted.jobID } ?? false
            }
            #expect(got, "the subscriber to '\(String(decoding: topic, as: UTF8.self))' got no event of job \(accepted.jobID)")
            peer.close()
        }
        stranger.close()
    }
}
