import DarkroomImage
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

    /// A peer that floods the events socket with subscriptions to topics
    /// the broker never publishes makes it drop every events connection
    /// (an XPUB cannot close one). A `darkroom watch` connected meanwhile
    /// reconnects by itself and, replaying what it missed, prints every
    /// event once and in order.
    @Test("stray subscriptions get every events connection dropped; a watch reconnects and misses no event")
    func strayFloodDropsConnections() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        let input = try h.writeImages(2, name: "first", size: Size(width: 64, height: 48))
        try h.start("watch", ["watch", "--json", "--from", "1"] + h.clientFlags, separateStderr: true)
        let first = try h.run(["submit", input.path, "--ops", "grayscale", "--thumb", "16x16", "--wait"] + h.clientFlags)
        #expect(first.status == 0, "\(first.stderr)")

        let peer = try ZMTPPeer(port: SystemHarness.port(of: h.events))
        try peer.handshake(socketType: "SUB")
        for n in 0..<100 { peer.write(ZMTPPeer.subscription(Array("stray-\(n)-".utf8) + [UInt8](repeating: 0x61, count: 3_000))) }
        #expect(peer.waitForClose(timeout: 5), "the broker did not drop the flooding peer")
        peer.close()
        #expect(h.log("broker").contains("dropping every events connection"), "\(h.log("broker").suffix(2000))")

        let more = try h.writeImages(2, name: "second", size: Size(width: 64, height: 48))
        let second = try h.run(["submit", more.path, "--ops", "grayscale", "--thumb", "16x16", "--wait"] + h.clientFlags)
        #expect(second.status == 0, "\(second.stderr)")
        func stored() -> Int { SystemHarness.jsonLines(h.log("watch")).filter { $0["kind"] as? String == "stored" }.count }
        try h.waitUntil("the watch prints 4 stored events", timeout: .seconds(20)) { stored() >= 4 }
        let seqs = SystemHarness.jsonLines(h.log("watch")).compactMap { $0["seq"] as? Int }
        #expect(seqs == Array(1...(seqs.last ?? 0)), "the watch printed seqs \(seqs)")
        #expect(stored() == 4)
        #expect(h.processes["watch"]?.isRunning == true, "\(h.log("watch.err"))")
        _ = h.signal("watch", SIGTERM)
    }
}
