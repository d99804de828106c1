import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Testing
@testable import DarkroomStore

/// What `StoreNode.metrics` shows: kept as requests are answered, and
/// agreeing with what STATS counts from the database.
@Suite struct StoreMetricsTests {
    @Test func totalsFollowStoresRefusalsAndDeletes() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        let node = try startNode(context, directory: directory.storePath)
        defer { node.stop() }
        #expect(node.metrics == StoreMetrics())
        let client = try StoreClient(context, node: node)

        let first = ULIDGenerator.shared.next()
        let second = ULIDGenerator.shared.next()
        _ = try client.store(job: first, full: fullJPEG(seed: 1, bytes: 2048), thumb: thumbJPEG(seed: 2, bytes: 1024))
        _ = try client.store(job: second, full: fullJPEG(seed: 3, bytes: 3000), thumb: thumbJPEG(seed: 4, bytes: 600))
        // A repeat is answered STORED with the first record: counted, not added.
        _ = try client.store(job: first, full: fullJPEG(seed: 1, bytes: 2048), thumb: thumbJPEG(seed: 2, bytes: 1024))
        // Not a JPEG: refused by the header check.
        let garbage = StoreRequest(requestID: client.requestID(), jobID: ULIDGenerator.shared.next(), sourceName: "x.jpg", pipeline: "invert",
                                   fullSize: fullSize, thumbnailSize: thumbSize, full: fixture(500, seed: 9), thumbnail: thumbJPEG(seed: 5))
        guard case .error = try client.request(garbage.frames()) else {
            Issue.record("a STORE of garbage was not refused")
            return
        }
        var metrics = node.metrics
        #expect(metrics.records == 2)
        #expect(metrics.fullBytes == 5048)
        #expect(metrics.thumbnailBytes == 1624)
        #expect(metrics.stores == 3)
        #expect(metrics.refused == 1)

        guard case .ok = try client.request(DeleteRequest(requestID: client.requestID(), id: first).frames()) else {
            Issue.record("DELETE did not answer OK")
            return
        }
        metrics = node.metrics
        #expect(metrics.records == 1)
        #expect(metrics.fullBytes == 3000)
        #expect(metrics.thumbnailBytes == 600)
        let stats = try client.stats()
        #expect(stats.records == metrics.records)
        #expect(stats.fullBytes == metrics.fullBytes)
        #expect(stats.thumbBytes == metrics.thumbnailBytes)
    }

    @Test func totalsAtStartComeFromTheDatabase() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        do {
            let node = try startNode(context, directory: directory.storePath)
            let client = try StoreClient(context, node: node)
            _ = try client.store(job: ULIDGenerator.shared.next(), full: fullJPEG(seed: 1, bytes: 2048), thumb: thumbJPEG(seed: 2, bytes: 1024))
            node.stop()
            node.wait()
        }
        let node = try startNode(context, directory: directory.storePath)
        defer { node.stop() }
        let metrics = node.metrics
        #expect(metrics.records == 1)
        #expect(metrics.fullBytes == 2048)
        #expect(metrics.thumbnailBytes == 1024)
        // Counters start again with the process.
        #expect(metrics.stores == 0)
    }
}
