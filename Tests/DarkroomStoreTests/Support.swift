import DarkroomCore
import DarkroomImage
import DarkroomProtocol
import DarkroomSQLite
import DarkroomZMQ
import Foundation
import Testing
@testable import DarkroomStore

/// A fresh directory under the system temp directory, removed at the end.
final class TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "darkroom-store-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    var storePath: String { path + "/store" }
}

/// Deterministic test bytes, not an image: for garbage a peer might send.
func fixture(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed &* 6364136223846793005 &+ 1442695040888963407
    return (0..<count).map { _ in
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}

/// A real JPEG of `width`x`height` (a flat gray picture, one component, so
/// it stays a few hundred bytes at any test size), distinct for each `seed`:
/// a comment segment (COM) right after SOI holds the seed. With `bytes`, more
/// comment segments of seeded bytes make the file exactly that long, for tests
/// that place blobs either side of the file threshold; it must then be at
/// least the unpadded length plus 4.
func jpeg(_ width: Int, _ height: Int, seed: UInt64, bytes: Int? = nil) -> [UInt8] {
    let picture = GrayImage(width: width, height: height, value: UInt8(truncatingIfNeeded: seed &* 37))
    guard let encoded = try? JPEG.encode(picture, options: EncodeOptions(quality: 50)) else {
        Issue.record("cannot encode a \(width)x\(height) test JPEG")
        return []
    }
    var segments = comment(Array("darkroom test image, seed \(seed)".utf8))
    if let bytes {
        var padding = bytes - encoded.count - segments.count
        precondition(padding == 0 || padding >= 4, "a \(width)x\(height) test JPEG cannot be \(bytes) bytes")
        var filler = fixture(max(padding, 0), seed: seed)[...]
        while padding > 0 {
            // A segment holds 4 to 65,537 bytes; never leave 1 to 3 for the last.
            var length = min(padding, 65_537)
            if (1...3).contains(padding - length) { length = padding - 4 }
            segments += comment(Array(filler.prefix(length - 4)))
            filler = filler.dropFirst(length - 4)
            padding -= length
        }
    }
    return Array(encoded.prefix(2)) + segments + Array(encoded.dropFirst(2))
}

/// One COM segment holding `body` (at most 65,533 bytes).
private func comment(_ body: [UInt8]) -> [UInt8] {
    let length = body.count + 2
    return [0xFF, 0xFE, UInt8(length >> 8), UInt8(length & 0xFF)] + body
}

/// The sizes `StoreClient.store` declares (STORE frames 6 and 7), and real
/// JPEGs of those sizes.
let fullSize = ImageSize(width: 64, height: 48)
let thumbSize = ImageSize(width: 16, height: 16)

func fullJPEG(seed: UInt64, bytes: Int? = nil) -> [UInt8] {
    jpeg(Int(fullSize.width), Int(fullSize.height), seed: seed, bytes: bytes)
}

func thumbJPEG(seed: UInt64, bytes: Int? = nil) -> [UInt8] {
    jpeg(Int(thumbSize.width), Int(thumbSize.height), seed: seed, bytes: bytes)
}

func u64Frame(_ value: UInt64) -> [UInt8] {
    (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
}

/// Starts a storage node on an ephemeral loopback port.
func startNode(_ context: Context, directory: String, threshold: Int = 100 * 1024, maxMessageSize: Int64 = Wire.maxMessageSize,
               maxMappedImages: Int? = nil, maxQueuedImageBytes: Int? = nil) throws -> StoreNode {
    var configuration = StoreConfiguration(
        endpoint: "tcp://127.0.0.1:*", dataDirectory: directory,
        externalBlobThreshold: threshold, maxMessageSize: maxMessageSize)
    if let maxMappedImages { configuration.maxMappedImages = maxMappedImages }
    if let maxQueuedImageBytes { configuration.maxQueuedImageBytes = maxQueuedImageBytes }
    let node = StoreNode(configuration, context: context, logger: Logger("store-test", minimum: .error))
    try node.start()
    return node
}

struct ClientTimeout: Error {}

/// A real DRK1 client of the storage node: a DEALER over TCP.
final class StoreClient {
    let socket: Socket
    private var nextID: UInt64 = 1

    init(_ context: Context, node: StoreNode) throws {
        socket = try context.socket(.dealer)
        try socket.setLinger(milliseconds: 0)
        try socket.setReceiveTimeout(milliseconds: 20_000)
        try socket.setMaxMessageSize(Wire.maxMessageSize)
        let endpoint = try #require(node.boundEndpoints["store"])
        try socket.connect(endpoint)
    }

    func requestID() -> UInt64 {
        defer { nextID += 1 }
        return nextID
    }

    func sendRaw(_ frames: [[UInt8]]) throws { try socket.send(frames) }

    func receive() throws -> StoreMessage {
        guard let frames = try socket.receive() else { throw ClientTimeout() }
        return try StoreMessage.decode(frames)
    }

    func request(_ frames: [[UInt8]]) throws -> StoreMessage {
        try socket.send(frames)
        return try receive()
    }

    /// STORE of `full` and `thumb`, declared as `fullSize` and `thumbSize`;
    /// anything but STORED is a test failure.
    func store(job: ULID, full: [UInt8], thumb: [UInt8], source: String = "photo.jpg",
               pipeline: String = "scale:64x64,mode=fill | crop:square") throws -> Stored {
        let request = StoreRequest(
            requestID: requestID(), jobID: job, sourceName: source, pipeline: pipeline,
            fullSize: fullSize, thumbnailSize: thumbSize, full: full, thumbnail: thumb)
        let reply = try self.request(request.frames())
        guard case .stored(let stored) = reply else {
            Issue.record("STORE answered \(reply)")
            throw ClientTimeout()
        }
        #expect(stored.requestID == request.requestID)
        #expect(stored.jobID == job)
        return stored
    }

    func get(_ id: ULID, _ variant: Variant) throws -> StoreMessage {
        try request(GetRequest(requestID: requestID(), id: id, variant: variant).frames())
    }

    func stats() throws -> StoreStats {
        let reply = try request(StatsRequest(requestID: requestID()).frames())
        guard case .statsReply(let stats) = reply else {
            Issue.record("STATS answered \(reply)")
            throw ClientTimeout()
        }
        return stats.stats
    }

    func list(limit: UInt32, before: ULID? = nil) throws -> [RecordInfo] {
        let reply = try request(ListRequest(requestID: requestID(), limit: limit, before: before).frames())
        guard case .listReply(let list) = reply else {
            Issue.record("LIST answered \(reply)")
            throw ClientTimeout()
        }
        return list.records
    }

    func ping() throws -> Bool {
        let id = requestID()
        return try request(Ping(requestID: id).frames()) == .pong(Pong(requestID: id))
    }
}

/// Files under the blob directory, relative to it, without temporary files.
func blobFiles(_ storeDirectory: String) -> [String] {
    BlobFiles(root: storeDirectory + "/blobs").scan().blobs
}

/// A second connection to the node's database, to check rows directly.
func count(_ storeDirectory: String, _ sql: String) throws -> Int64 {
    let connection = try Connection(path: storeDirectory + "/store.db")
    defer { try? connection.close() }
    return try connection.query(sql) { $0.int64(0) ?? -1 }.first ?? -1
}
