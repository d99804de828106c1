import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Testing
@testable import DarkroomStore

/// `--keep-records`: records past their lifetime are deleted with their
/// thumbnails and the blob files no other record shares; younger ones stay.
@Suite("Record expiry", .serialized)
struct RecordExpiryTests {
    static func request(_ job: ULID, full: [UInt8], thumb: [UInt8]) -> StoreRequest {
        StoreRequest(requestID: 1, jobID: job, sourceName: "photo.jpg", pipeline: "grayscale",
                     fullSize: fullSize, thumbnailSize: thumbSize, full: full, thumbnail: thumb)
    }

    @Test func expireDeletesTheOldestBeforeTheCutoffUpToTheLimitAndNothingYounger() throws {
        let directory = try TemporaryDirectory()
        let store = try RecordStore(directory: directory.storePath, threshold: 1024, maxBlobBytes: 1 << 26,
                                    logger: Logger("store-test", minimum: .error))
        defer { store.close() }
        func storeOne(_ seed: UInt64) throws -> ULID {
            try store.begin()
            let (id, _) = try store.store(Self.request(ULIDGenerator.shared.next(), full: fullJPEG(seed: seed, bytes: 3000),
                                                      thumb: thumbJPEG(seed: seed + 100)), now: ULIDGenerator.systemMilliseconds())
            try store.commit()
            return id
        }
        var old: [ULID] = []
        for seed in 1...5 {
            old.append(try storeOne(UInt64(seed)))
            Thread.sleep(forTimeInterval: 0.003)
        }
        Thread.sleep(forTimeInterval: 0.01)
        let cutoff = ULIDGenerator.systemMilliseconds()
        Thread.sleep(forTimeInterval: 0.01)
        let young = try [storeOne(11), storeOne(12)]
        #expect(blobFiles(directory.storePath).count == 7)

        try store.begin()
        let first = try store.expire(before: cutoff, limit: 2)
        try store.commit()
        #expect(first.map(\.id) == Array(old.prefix(2)), "the two oldest")
        try store.begin()
        let rest = try store.expire(before: cutoff, limit: 10)
        try store.commit()
        #expect(rest.map(\.id) == Array(old.dropFirst(2)))
        try store.begin()
        #expect(try store.expire(before: cutoff, limit: 10).isEmpty, "nothing stored after the cutoff")
        try store.commit()

        #expect(try store.list(limit: 10, before: nil).map(\.id) == young.reversed())
        #expect(blobFiles(directory.storePath).count == 2, "the old records' files are gone after the commit")
        for id in old { #expect(try store.record(matching: id) == nil) }
        #expect(try count(directory.storePath, "SELECT count(*) FROM thumbnails") == 2)
    }

    @Test func aNodeDeletesRecordsPastTheirLifetimeAndKeepsFilesAYoungerRecordShares() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        var configuration = StoreConfiguration(endpoint: "tcp://127.0.0.1:*", dataDirectory: directory.storePath, externalBlobThreshold: 1024)
        configuration.recordLifetime = .seconds(3)
        configuration.expiryBatch = 2
        let node = StoreNode(configuration, context: context, logger: Logger("store-test", minimum: .error))
        try node.start()
        defer { node.stop() }
        let client = try StoreClient(context, node: node)

        let shared = fullJPEG(seed: 70, bytes: 3000)
        var old: [ULID] = []
        for seed in 1...5 {
            let full = seed == 1 ? shared : fullJPEG(seed: UInt64(seed), bytes: 3000)
            old.append(try client.store(job: ULIDGenerator.shared.next(), full: full, thumb: thumbJPEG(seed: UInt64(seed), bytes: 2000)).recordID)
        }
        Thread.sleep(forTimeInterval: 1.5)
        let young = try client.store(job: ULIDGenerator.shared.next(), full: shared, thumb: thumbJPEG(seed: 80, bytes: 2000)).recordID
        #expect(blobFiles(directory.storePath).count == 11, "five full images, six thumbnails")

        // The old ones go after 3 s (in three transactions of at most 2); the young one stays until its own time.
        let deadline = Date().addingTimeInterval(20)
        var stats = try client.stats()
        while stats.records > 1, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            stats = try client.stats()
        }
        #expect(stats.records == 1)
        #expect(try client.list(limit: 10).map(\.id) == [young], "the young record is still there")
        guard case .getReply(let reply) = try client.get(young, .full) else {
            Issue.record("GET of the young record did not answer GET-REPLY")
            return
        }
        #expect(reply.image == shared, "the file it shares with an expired record stays")
        #expect(blobFiles(directory.storePath).count == 2)
        for id in old {
            guard case .error(let gone) = try client.get(id, .thumbnail) else {
                Issue.record("GET of an expired record did not answer ERROR")
                continue
            }
            #expect(gone.code == .notFound)
        }
        #expect(node.metrics.expired == 5)

        while try client.stats().records > 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(try client.stats().records == 0)
        #expect(blobFiles(directory.storePath).isEmpty)
        #expect(node.metrics.expired == 6)
    }

    @Test func aNodeOverItsByteCapDeletesTheOldestRecordsUntilTheRestFit() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        var configuration = StoreConfiguration(endpoint: "tcp://127.0.0.1:*", dataDirectory: directory.storePath, externalBlobThreshold: 1024)
        // Each record is 5,000 bytes of images: three fit, a fourth does not.
        configuration.maxImageBytes = 16_000
        configuration.expiryBatch = 2
        let node = StoreNode(configuration, context: context, logger: Logger("store-test", minimum: .error))
        try node.start()
        defer { node.stop() }
        let client = try StoreClient(context, node: node)
        var ids: [ULID] = []
        for seed in 1...6 {
            let stored = try client.store(job: ULIDGenerator.shared.next(), full: fullJPEG(seed: UInt64(seed), bytes: 3000),
                                          thumb: thumbJPEG(seed: UInt64(seed), bytes: 2000))
            ids.append(stored.recordID)
        }
        let deadline = Date().addingTimeInterval(10)
        var stats = try client.stats()
        while stats.records > 3, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            stats = try client.stats()
        }
        #expect(stats.records == 3 && stats.fullBytes + stats.thumbBytes == 15_000, "\(stats)")
        #expect(try client.list(limit: 10).map(\.id) == ids.suffix(3).reversed(), "the newest stay")
        #expect(blobFiles(directory.storePath).count == 6, "the evicted records' files are gone")
        #expect(node.metrics.evicted == 3 && node.metrics.expired == 0)
    }
}
