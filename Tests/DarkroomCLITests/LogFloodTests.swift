import DarkroomZMQ
import Foundation
import Testing

/// A peer that sends bad messages as fast as it can must not make a server
/// write a log line for each: ten lines per kind every ten seconds, then
/// one line that counts the rest. Against real `darkroom broker` and
/// `darkroom store` processes, read from their logs.
@Suite("A flood of bad messages")
struct LogFloodTests {
    /// Sends `count` malformed messages to `endpoint` and reads the ERROR
    /// each one is answered with, so that all of them have been handled.
    static func flood(_ endpoint: String, count: Int, context: Context) throws -> Int {
        let socket = try context.socket(.dealer)
        try socket.setLinger(milliseconds: 0)
        try socket.setReceiveTimeout(milliseconds: 20_000)
        try socket.connect(endpoint)
        var answered = 0
        for index in 0..<count {
            // Not a DRK1 message: an unknown version byte.
            try socket.send([[0xEE, UInt8(truncatingIfNeeded: index)], Array("flood".utf8)])
            // Read as we go, so neither side's queue fills.
            while (try socket.receive(dontWait: true)) != nil { answered += 1 }
        }
        while answered < count, (try socket.receive()) != nil { answered += 1 }
        socket.close()
        return answered
    }

    /// The number in the line that reports what `kind` left out, if the log has one.
    static func leftOut(_ log: String, kind: String) -> Int? {
        for line in log.split(separator: "\n") {
            guard let range = line.range(of: "\(kind): ") else { continue }
            let rest = line[range.upperBound...]
            guard rest.contains("similar line(s) left out"), let number = Int(rest.prefix { $0.isNumber }) else { continue }
            return number
        }
        return nil
    }

    @Test("5,000 malformed messages to the broker and to the storage node: ten lines each, then one line that counts the other 4,990")
    func malformedMessagesAreCounted() throws {
        let h = try SystemHarness()
        try h.startBroker()
        try h.startStore()
        let context = try Context()
        let count = 5_000
        #expect(try Self.flood(h.frontend, count: count, context: context) == count, "the broker did not answer every bad message")
        #expect(try Self.flood(h.store, count: count, context: context) == count, "the storage node did not answer every bad message")

        // Both still serve.
        #expect(try h.run(["status", "--check", "--broker", h.frontend, "--store", h.store, "--timeout", "5"]).status == 0)

        let brokerLines = h.log("broker").split(separator: "\n").count { $0.contains("frontend: bad message from") }
        let storeLines = h.log("store").split(separator: "\n").count { $0.contains("store dropped a message from peer") }
        #expect(brokerLines == 10, "the broker wrote \(brokerLines) lines for \(count) bad messages")
        #expect(storeLines == 10, "the storage node wrote \(storeLines) lines for \(count) bad messages")

        // Once the ten seconds are over, each says how many it left out,
        // though no bad message came since.
        try h.waitUntil("both logs count what they left out", timeout: .seconds(40)) {
            Self.leftOut(h.log("broker"), kind: "frontend: bad messages") != nil && Self.leftOut(h.log("store"), kind: "bad messages") != nil
        }
        #expect(Self.leftOut(h.log("broker"), kind: "frontend: bad messages") == count - 10)
        #expect(Self.leftOut(h.log("store"), kind: "bad messages") == count - 10)
        #expect(h.processes["broker"]?.isRunning == true && h.processes["store"]?.isRunning == true)
    }
}
