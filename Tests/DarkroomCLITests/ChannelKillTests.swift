@testable import DarkroomClient
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Testing

/// The client channel's send gate against a broker killed with SIGKILL: a
/// look at the connection's handshake events stands for a burst of sends
/// while linked (`Channel.handshakeFreshness`), and once the broker process
/// is gone a send must see the drop and wait for a connection, not hand its
/// message to the socket to arrive, stale, at the next broker.
@Suite struct ChannelKillTests {
    @Test("a burst of PINGs to a real broker is answered; after SIGKILL a send waits and ends unsent; a restarted broker answers on the same channel")
    func sendAfterBrokerKilled() throws {
        let harness = try SystemHarness()
        try harness.startBroker()
        let context = try Context()
        let channel = try Channel(context: context, endpoint: harness.frontend, role: .broker, timeout: .milliseconds(800), curve: nil)

        let burst = 200
        for n in 1...burst { try channel.send(Ping(requestID: UInt64(n)).frames(), what: "PING \(n)") }
        var answered = Set<UInt64>()
        while answered.count < burst, let frames = try channel.receive(until: .now + .seconds(10)) {
            answered.insert(try Pong.decode(frames).requestID)
        }
        #expect(answered == Set((1...burst).map(UInt64.init)))

        harness.signal("broker", SIGKILL)
        // Long past the freshness of the last look, and long enough for the
        // monitor to report the drop.
        Thread.sleep(forTimeInterval: 0.3)
        let started = ContinuousClock.now
        do {
            try channel.send(Ping(requestID: 1_000).frames(), what: "the late PING")
            Issue.record("a send after the broker was killed was handed to the socket")
        } catch {
            #expect(error.kind == .timeout, "\(error)")
            #expect(error.message.contains("could not send the late PING"), "\(error.message)")
        }
        #expect(ContinuousClock.now - started >= .milliseconds(700), "the send did not wait for a connection")

        // The same channel reconnects to a broker started again on the port.
        try harness.startBroker()
        let pong = try channel.call("PING", build: { Ping(requestID: $0).frames() }, decode: Pong.decode, requestID: { $0.requestID })
        #expect(pong.requestID > 0)
    }
}
