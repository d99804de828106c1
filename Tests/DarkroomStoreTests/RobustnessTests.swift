import DarkroomCore
import DarkroomProtocol
import DarkroomSQLite
import DarkroomZMQ
import Foundation
import Testing
@testable import DarkroomStore

@Suite struct RobustnessTests {
    private func expectError(_ reply: StoreMessage, _ code: ErrorCode, requestID: UInt64, mentioning text: String? = nil) {
        guard case .error(let error) = reply else {
            Issue.record("expected ERROR \(code), got \(reply)")
            return
        }
        #expect(error.code == code)
        #expect(error.requestID == requestID)
        if let text { #expect(error.reason.contains(text), "reason: \(error.reason)") }
    }

    @Test func badMessagesGetErrorAndTheNodeKeepsServing() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        let node = try startNode(context, directory: directory.storePath)
        defer { node.stop() }
        let client = try StoreClient(context, node: node)
        let ping: [UInt8] = [Command.ping.rawValue]

        // Wrong protocol version: bad-version, request id 0, naming the version.
        expectError(try client.request([Array("DRK2".utf8), ping, u64Frame(3)]), .badVersion, requestID: 0, mentioning: "DRK1")
        // Whatever frame 1 holds: with another protocol id it is not an ERROR.
        expectError(try client.request([Array("DRK2".utf8), [Command.error.rawValue], u64Frame(3)]), .badVersion, requestID: 0)
        expectError(try client.request([[]]), .badVersion, requestID: 0)
        // Unknown command byte.
        expectError(try client.request([Wire.protocolID, [0x7E], u64Frame(4)]), .unknownCommand, requestID: 0, mentioning: "0x7e")
        // Only the protocol id.
        expectError(try client.request([Wire.protocolID]), .malformed, requestID: 0)
        // A command frame of two bytes.
        expectError(try client.request([Wire.protocolID, [0x30, 0x00], u64Frame(5)]), .malformed, requestID: 0)
        // STORE with a frame missing: malformed, with the request id.
        var store = StoreRequest(requestID: 11, jobID: ULIDGenerator.shared.next(), sourceName: "x.jpg", pipeline: "invert",
                                 fullSize: ImageSize(width: 1, height: 1), thumbnailSize: ImageSize(width: 1, height: 1),
                                 full: jpeg(1, 1, seed: 1), thumbnail: jpeg(1, 1, seed: 2)).frames()
        store.removeLast()
        expectError(try client.request(store), .malformed, requestID: 11)
        // A lower-case job id is malformed on the wire.
        var lower = StoreRequest(requestID: 12, jobID: ULIDGenerator.shared.next(), sourceName: "x.jpg", pipeline: "invert",
                                 fullSize: ImageSize(width: 1, height: 1), thumbnailSize: ImageSize(width: 1, height: 1),
                                 full: jpeg(1, 1, seed: 1), thumbnail: jpeg(1, 1, seed: 2)).frames()
        lower[3] = Array(String(decoding: lower[3], as: UTF8.self).lowercased().utf8)
        expectError(try client.request(lower), .malformed, requestID: 12)
        // A size of 0x0 is out of range.
        var zero = StoreRequest(requestID: 13, jobID: ULIDGenerator.shared.next(), sourceName: "x.jpg", pipeline: "invert",
                                fullSize: ImageSize(width: 1, height: 1), thumbnailSize: ImageSize(width: 1, height: 1),
                                full: jpeg(1, 1, seed: 1), thumbnail: jpeg(1, 1, seed: 2)).frames()
        zero[6] = [UInt8](repeating: 0, count: 8)
        expectError(try client.request(zero), .malformed, requestID: 13)
        // GET with a variant of 2.
        var get = GetRequest(requestID: 14, id: ULIDGenerator.shared.next(), variant: .full).frames()
        get[4] = [2]
        expectError(try client.request(get), .malformed, requestID: 14)
        // A reply sent as a request, and a command of another socket.
        expectError(try client.request(Pong(requestID: 15).frames()), .unexpectedCommand, requestID: 15)
        expectError(try client.request(Stored(requestID: 16, jobID: ULIDGenerator.shared.next(), recordID: ULIDGenerator.shared.next(), created: true).frames()),
                    .unexpectedCommand, requestID: 16)
        expectError(try client.request([Wire.protocolID, [Command.credit.rawValue], [0, 0, 0, 1]]), .unexpectedCommand, requestID: 0)

        // An ERROR is never answered: the next reply is the PONG.
        try client.sendRaw(ErrorReply(requestID: 1, code: .internal, reason: "peer trouble").frames())
        try client.sendRaw([Wire.protocolID, [Command.error.rawValue]])
        #expect(try client.ping())

        // Nothing was stored by any of it.
        #expect(try client.stats().records == 0)
    }

    @Test func anOversizedMessageDisconnectsOnlyThatPeer() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        let node = try startNode(context, directory: directory.storePath, maxMessageSize: 64 * 1024)
        defer { node.stop() }
        let offender = try StoreClient(context, node: node)
        #expect(try offender.ping())
        let huge = StoreRequest(requestID: 1, jobID: ULIDGenerator.shared.next(), sourceName: "big.jpg", pipeline: "invert",
                                fullSize: ImageSize(width: 1, height: 1), thumbnailSize: ImageSize(width: 1, height: 1),
                                full: jpeg(1, 1, seed: 90, bytes: 200 * 1024), thumbnail: jpeg(1, 1, seed: 91))
        try offender.sendRaw(huge.frames())

        let client = try StoreClient(context, node: node)
        #expect(try client.ping())
        let stored = try client.store(job: ULIDGenerator.shared.next(), full: fullJPEG(seed: 91, bytes: 1000), thumb: thumbJPEG(seed: 91))
        #expect(stored.created)
        #expect(try client.stats().records == 1)
    }

    @Test func aMessageOverTheLimitInAllItsFramesIsDroppedUnanswered() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        let node = try startNode(context, directory: directory.storePath, maxMessageSize: 64 * 1024)
        defer { node.stop() }
        let client = try StoreClient(context, node: node)
        // Each frame is under the limit, the message is not.
        let split = StoreRequest(requestID: 21, jobID: ULIDGenerator.shared.next(), sourceName: "split.jpg", pipeline: "invert",
                                 fullSize: ImageSize(width: 1, height: 1), thumbnailSize: ImageSize(width: 1, height: 1),
                                 full: jpeg(1, 1, seed: 92, bytes: 40 * 1024), thumbnail: jpeg(1, 1, seed: 93, bytes: 40 * 1024))
        try client.sendRaw(split.frames())
        // The next answer is the PING's: the split message got none.
        #expect(try client.ping())
        #expect(try client.stats().records == 0)
    }

    @Test func startupRemovesTemporaryAndUnreferencedFilesButKeepsCommittedOnes() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        let full = fullJPEG(seed: 100, bytes: 3000)
        let job = ULIDGenerator.shared.next()
        let first = try startNode(context, directory: directory.storePath, threshold: 1024)
        do {
            let client = try StoreClient(context, node: first)
            _ = try client.store(job: job, full: full, thumb: thumbJPEG(seed: 101))
        }
        first.stop()
        first.wait()
        let kept = try #require(blobFiles(directory.storePath).first)

        // What a crash can leave: a half-written temporary file, and a renamed
        // file whose row was never committed.
        let blobs = directory.storePath + "/blobs"
        let temporary = blobs + "/ab/.tmp-0123456789abcdef-42"
        let orphanSHA = SHA256.hex([9, 9, 9])
        for fanOut in ["ab", String(orphanSHA.prefix(2))] {
            try FileManager.default.createDirectory(atPath: blobs + "/" + fanOut, withIntermediateDirectories: true)
        }
        #expect(FileManager.default.createFile(atPath: temporary, contents: Data([1, 2, 3])))
        let orphan = blobs + "/" + orphanSHA.prefix(2) + "/" + orphanSHA.dropFirst(2)
        #expect(FileManager.default.createFile(atPath: orphan, contents: Data([9, 9, 9])))

        let second = try startNode(context, directory: directory.storePath, threshold: 1024)
        defer { second.stop() }
        #expect(!FileManager.default.fileExists(atPath: temporary))
        #expect(!FileManager.default.fileExists(atPath: orphan))
        #expect(blobFiles(directory.storePath) == [kept])
        let client = try StoreClient(context, node: second)
        guard case .getReply(let reply) = try client.get(job, .full) else {
            Issue.record("GET after recovery did not answer GET-REPLY")
            return
        }
        #expect(reply.image == full)
    }

    @Test func damagedBytesAreReportedNotReturned() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        let node = try startNode(context, directory: directory.storePath, threshold: 1024)
        defer { node.stop() }
        let client = try StoreClient(context, node: node)
        let full = fullJPEG(seed: 110, bytes: 3000)
        let stored = try client.store(job: ULIDGenerator.shared.next(), full: full, thumb: thumbJPEG(seed: 111, bytes: 500))

        // Flip one byte of the external file (same length).
        let file = directory.storePath + "/blobs/" + (try #require(blobFiles(directory.storePath).first))
        var damaged = full
        damaged[1500] ^= 0xFF
        #expect(FileManager.default.createFile(atPath: file, contents: Data(damaged)))
        expectError(try client.get(stored.recordID, .full), .internal, requestID: 2, mentioning: stored.recordID.description)

        // Damage the inline thumbnail through SQL.
        let connection = try Connection(path: directory.storePath + "/store.db")
        try connection.execute("UPDATE thumbnails SET blob = ?1 WHERE full_res_id = ?2", fixture(500, seed: 112), stored.recordID.description)
        try connection.close()
        expectError(try client.get(stored.recordID, .thumbnail), .internal, requestID: 3, mentioning: "sha256")

        // A missing file is an error naming the record too.
        try FileManager.default.removeItem(atPath: file)
        expectError(try client.get(stored.recordID, .full), .internal, requestID: 4, mentioning: stored.recordID.description)
        #expect(try client.ping())
    }

    @Test func schemaIsVersionedWithCascadingOneToOneLink() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        let node = try startNode(context, directory: directory.storePath)
        node.stop()
        node.wait()

        let connection = try Connection(path: directory.storePath + "/store.db")
        #expect(try connection.pragma("user_version") == String(RecordStore.schemaVersion))
        #expect(try connection.pragma("journal_mode") == "wal")
        let links = try connection.query("SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list('thumbnails')") {
            [$0.string(0) ?? "", $0.string(1) ?? "", $0.string(2) ?? "", $0.string(3) ?? ""]
        }
        #expect(links == [["full_res", "full_res_id", "id", "CASCADE"]])
        // The link is one-to-one: a second thumbnail for one record is refused.
        try connection.execute("""
            INSERT INTO full_res (id, job_id, source, pipeline, width, height, bytes, sha256, created, blob)
            VALUES ('R', 'J', 's', 'p', 1, 1, 1, 'x', 0, x'01')
            """)
        try connection.execute("""
            INSERT INTO thumbnails (id, full_res_id, job_id, source, pipeline, width, height, bytes, sha256, created, blob)
            VALUES ('T1', 'R', 'J', 's', 'p', 1, 1, 1, 'x', 0, x'01')
            """)
        #expect(throws: SQLiteError.self) {
            try connection.execute("""
                INSERT INTO thumbnails (id, full_res_id, job_id, source, pipeline, width, height, bytes, sha256, created, blob)
                VALUES ('T2', 'R', 'J2', 's', 'p', 1, 1, 1, 'x', 0, x'01')
                """)
        }
        // A thumbnail must name an existing record.
        #expect(throws: SQLiteError.self) {
            try connection.execute("""
                INSERT INTO thumbnails (id, full_res_id, job_id, source, pipeline, width, height, bytes, sha256, created, blob)
                VALUES ('T3', 'nope', 'J3', 's', 'p', 1, 1, 1, 'x', 0, x'01')
                """)
        }
        try connection.execute("DELETE FROM full_res WHERE id = 'R'")
        #expect(try connection.query("SELECT count(*) FROM thumbnails") { $0.int64(0) } == [0])

        // A database from a newer schema is refused with a clear reason.
        try connection.execute("PRAGMA user_version = 99")
        try connection.close()
        let newer = StoreNode(StoreConfiguration(endpoint: "tcp://127.0.0.1:*", dataDirectory: directory.storePath),
                              context: context, logger: Logger("store-test", minimum: .error))
        let error = #expect(throws: StoreNodeError.self) { try newer.start() }
        #expect(error?.description.contains("schema version 99") == true)
        newer.wait()
    }

    @Test func anUnusableDataDirectoryFailsStart() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        // A regular file where the data directory should be.
        let path = directory.path + "/not-a-directory"
        #expect(FileManager.default.createFile(atPath: path, contents: Data([0])))
        let node = StoreNode(StoreConfiguration(endpoint: "tcp://127.0.0.1:*", dataDirectory: path),
                             context: context, logger: Logger("store-test", minimum: .error))
        #expect(throws: StoreNodeError.self) { try node.start() }
        node.wait()
    }
}
