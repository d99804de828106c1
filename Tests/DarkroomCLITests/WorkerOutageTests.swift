import Foundation
import Testing

/// A worker whose broker is away keeps trying without filling its log:
/// one line when the broker goes quiet, one when it answers again.
@Suite("Worker across a broker outage", .serialized)
struct WorkerOutageTests {
    @Test("a worker started before its broker logs two lines about it, not one per try, and then takes jobs")
    func aWorkerWaitsForItsBrokerQuietly() throws {
        let h = try SystemHarness()
        try h.startStore()
        try h.startWorker("early")
        // Long enough for several tries: the liveness period is 3 s and the
        // reconnect backoff grows from 0.1 s.
        Thread.sleep(forTimeInterval: 8)
        try h.startBroker()
        try h.waitUntil("the worker is back") { h.log("early").contains("answering again") }
        let lines = h.log("early").split(separator: "\n").filter { $0.contains("broker") && !$0.contains("worker started") && !$0.contains("on ") }
        print("worker outage log:\n\(lines.joined(separator: "\n"))")
        #expect(lines.filter { $0.contains("silent") }.count == 1, "\(lines)")
        #expect(lines.filter { $0.contains("answering again") }.count == 1, "\(lines)")
        #expect(lines.count <= 3, "\(lines)")
        let back = try #require(lines.first { $0.contains("answering again") })
        #expect(back.contains("connection(s) tried"))

        let input = try h.writeImages(1)
        let submit = try h.run(["submit", input.path, "--ops", "invert", "--wait"] + h.clientFlags)
        #expect(submit.status == 0, "\(submit.stderr)")
    }
}
