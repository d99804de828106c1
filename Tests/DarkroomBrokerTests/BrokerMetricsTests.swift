import DarkroomBroker
import DarkroomProtocol
import Foundation
import Testing

/// `Broker.metrics`: the status STATUS would answer, with the totals since
/// start and when each worker was last heard.
@Suite(.serialized) struct BrokerMetricsTests {
    /// Polls the broker's metrics until `condition` holds (the core
    /// publishes after its turn; the switchboard copies what it heard
    /// every 250 ms).
    func metrics(_ harness: Harness, until what: String, _ condition: (BrokerMetrics) -> Bool) throws -> BrokerMetrics {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let metrics = harness.broker.metrics, condition(metrics) { return metrics }
            Thread.sleep(forTimeInterval: 0.02)
        }
        throw TestFailure("timed out waiting for \(what); last: \(String(describing: harness.broker.metrics))")
    }

    @Test func totalsCountCommittedJobsSinceStart() throws {
        let harness = try Harness()
        let start = try #require(harness.broker.metrics)
        #expect(start.accepted == 0 && start.stored == 0 && start.failed == 0)
        let client = try harness.client()
        for _ in 0..<3 { _ = try client.submitAccepted(priority: 4) }
        var metrics = try #require(harness.broker.metrics)
        // ACCEPTED is sent after the snapshot that counts it.
        #expect(metrics.accepted == 3)
        #expect(metrics.status.queue.ready[4] == 3)

        let worker = try harness.worker("w-metrics", slots: 2)
        try worker.ready(credit: 2)
        let first = try worker.job()
        let second = try worker.job()
        try worker.done(first)
        try worker.fail(second, retryable: true)
        metrics = try self.metrics(harness, until: "one stored and one failed") { $0.stored == 1 && $0.failed == 1 }
        #expect(metrics.accepted == 3)
        #expect(metrics.status.workers.map(\.id) == ["w-metrics"])

        // Counters are per run of the broker; the queue and its events are not.
        let seq = metrics.status.eventSeq
        try harness.restart()
        let after = try #require(harness.broker.metrics)
        #expect(after.accepted == 0 && after.stored == 0 && after.failed == 0)
        #expect(after.status.eventSeq == seq)
    }

    @Test func aWorkerLastHeardIsWhenItsLastMessageCame() throws {
        let harness = try Harness()
        let worker = try harness.worker("w-silent", slots: 1)
        try worker.ready(credit: 0)
        try worker.send(.heartbeat)
        let heard = try metrics(harness, until: "the worker is heard") { $0.status.workers.first?.lastHeartbeat ?? 0 > 0 }
        let entry = try #require(heard.status.workers.first)
        #expect(heard.status.time >= entry.lastHeartbeat)
        #expect(heard.status.time - entry.lastHeartbeat < 1_000)
        // Silent for a while (the harness's liveness is 10 s): the silence grows.
        Thread.sleep(forTimeInterval: 1.2)
        let silent = try #require(harness.broker.metrics)
        let silence = silent.status.time - (silent.status.workers.first?.lastHeartbeat ?? 0)
        #expect(silence >= 1_000)
        #expect(silence < 3_000)
        try worker.send(.heartbeat)
        _ = try metrics(harness, until: "the heartbeat is heard") { $0.status.time - ($0.status.workers.first?.lastHeartbeat ?? 0) < 600 }
    }
}
