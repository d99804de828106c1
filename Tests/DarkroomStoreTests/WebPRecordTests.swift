import DarkroomCore
import DarkroomImage
import DarkroomProtocol
import DarkroomSQLite
import DarkroomZMQ
import Foundation
import Testing
@testable import DarkroomStore

/// WebP images at the storage node (DRK1 sections 10.3 and 11): checked by
/// their header as JPEGs are, kept as sent, and each record says which
/// format each image is, also for records stored before there was a format.
@Suite struct WebPRecordTests {
    /// A real WebP of `width`×`height` (`fullSize` and `thumbSize` by default).
    static func webp(_ width: Int, _ height: Int, seed: UInt64) throws -> [UInt8] {
        try WebP.encode(SamplePhoto.render(Size(width: width, height: height), seed: seed), quality: 80)
    }

    private func request(full: [UInt8], thumb: [UInt8]) -> StoreRequest {
        StoreRequest(requestID: 1, jobID: ULIDGenerator.shared.next(), sourceName: "photo.jpg", pipeline: "invert",
                     fullSize: fullSize, thumbnailSize: thumbSize, full: full, thumbnail: thumb)
    }

    @Test func webpImagesPassOrAreRefusedByTheirHeader() throws {
        let check = ImageCheck(limits: .default)
        let full = try Self.webp(Int(fullSize.width), Int(fullSize.height), seed: 1)
        let thumb = try Self.webp(Int(thumbSize.width), Int(thumbSize.height), seed: 2)
        #expect(check.failure(of: request(full: full, thumb: thumb)) == nil)
        // Either format for either image.
        #expect(check.failure(of: request(full: full, thumb: thumbJPEG(seed: 3))) == nil)
        #expect(check.failure(of: request(full: fullJPEG(seed: 4), thumb: thumb)) == nil)

        // The size in the header against the declared one.
        let other = try Self.webp(60, 40, seed: 5)
        #expect(check.failure(of: request(full: other, thumb: thumb))
                == ProtocolError(.invalidImage, "full: header says 60x40, STORE declares \(fullSize.width)x\(fullSize.height)"))
        // Cut inside its first chunk's header.
        let cut = check.failure(of: request(full: full, thumb: Array(thumb.prefix(20))))
        #expect(cut?.code == .invalidImage)
        #expect(cut?.reason.hasPrefix("thumbnail: ") == true, "\(String(describing: cut))")
        // Over the node's limits.
        let small = ImageCheck(limits: DecodeLimits(maxPixels: 100))
        let over = small.failure(of: request(full: full, thumb: thumb))
        #expect(over?.code == .tooLarge, "\(String(describing: over))")
        #expect(over?.reason.hasPrefix("full: ") == true)

        // An extended header (VP8X) that says the file is animated: the
        // canvas is the declared size, but outputs are still images.
        var animated: [UInt8] = Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8X".utf8) + [10, 0, 0, 0]
        animated += [0x02, 0, 0, 0]
        animated += [UInt8(fullSize.width - 1), 0, 0, UInt8(fullSize.height - 1), 0, 0]
        animated += Array("ANIM".utf8) + [6, 0, 0, 0] + [0, 0, 0, 0, 0, 0]
        let size = UInt32(animated.count - 8)
        animated.replaceSubrange(4..<8, with: [UInt8(size & 0xFF), UInt8(size >> 8 & 0xFF), 0, 0])
        #expect(check.failure(of: request(full: animated, thumb: thumb))
                == ProtocolError(.invalidImage, "full: an animated WebP (outputs are still images)"))
    }

    @Test func aRecordSaysWhichFormatEachImageIs() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        // A low threshold puts the full-resolution WebP in a blob file and
        // keeps the thumbnail inline.
        let node = try startNode(context, directory: directory.storePath, threshold: 1024)
        defer { node.stop() }
        let client = try StoreClient(context, node: node)
        let full = try Self.webp(Int(fullSize.width), Int(fullSize.height), seed: 7)
        let thumb = thumbJPEG(seed: 8, bytes: 900)
        #expect(full.count > 1024)
        let job = ULIDGenerator.shared.next()
        let stored = try client.store(job: job, full: full, thumb: thumb)
        guard case .getReply(let got) = try client.get(stored.recordID, .full) else {
            Issue.record("GET full did not answer GET-REPLY")
            return
        }
        #expect(got.image == full)
        #expect(got.record.full == ImageInfo(width: fullSize.width, height: fullSize.height, bytes: UInt64(full.count),
                                             sha256: SHA256.hex(full), format: "webp"))
        #expect(got.record.thumb.format == "jpeg")
        #expect(blobFiles(directory.storePath).count == 1)
        let listed = try client.list(limit: 10)
        #expect(listed.map(\.full.format) == ["webp"] && listed.map(\.thumb.format) == ["jpeg"])
        // The JSON a client in another language reads.
        let json = String(decoding: try JSONEncoder().encode(got.record), as: UTF8.self)
        #expect(json.contains("\"format\":\"webp\""), "\(json)")
    }

    @Test func recordsFromBeforeFormatsAreJPEGs() throws {
        let directory = try TemporaryDirectory()
        let storePath = directory.storePath
        try FileManager.default.createDirectory(atPath: storePath, withIntermediateDirectories: true)
        let job = ULIDGenerator.shared.next()
        let recordID = ULIDGenerator.shared.next()
        let full = fullJPEG(seed: 11, bytes: 2000)
        let thumb = thumbJPEG(seed: 12, bytes: 900)
        do {
            // A store database of schema version 1, as an earlier darkroom left it.
            let old = try Connection(path: storePath + "/store.db")
            try old.execute(try #require(RecordStore.migrations.first { $0.version == 1 }).sql)
            try old.execute("""
                INSERT INTO full_res (id, job_id, source, pipeline, width, height, bytes, sha256, created, blob)
                VALUES (?1, ?2, 'old.jpg', 'invert', ?3, ?4, ?5, ?6, 1700000000000, ?7)
                """, recordID.description, job.description, Int64(fullSize.width), Int64(fullSize.height), Int64(full.count),
                SHA256.hex(full), full)
            try old.execute("""
                INSERT INTO thumbnails (id, full_res_id, job_id, source, pipeline, width, height, bytes, sha256, created, blob)
                VALUES (?1, ?2, ?3, 'old.jpg', 'invert', ?4, ?5, ?6, ?7, 1700000000000, ?8)
                """, ULIDGenerator.shared.next().description, recordID.description, job.description, Int64(thumbSize.width),
                Int64(thumbSize.height), Int64(thumb.count), SHA256.hex(thumb), thumb)
            try old.execute("PRAGMA user_version = 1")
            try old.close()
        }
        let context = try Context()
        let node = try startNode(context, directory: storePath)
        defer { node.stop() }
        let client = try StoreClient(context, node: node)
        guard case .getReply(let got) = try client.get(job, .thumbnail) else {
            Issue.record("GET of the old record did not answer GET-REPLY")
            return
        }
        #expect(got.image == thumb)
        #expect(got.record.id == recordID)
        #expect(got.record.full.format == "jpeg" && got.record.thumb.format == "jpeg")
        #expect(try count(storePath, "PRAGMA user_version") == RecordStore.schemaVersion)
        // A record a client of the earlier revision wrote down, without a
        // format, reads as JPEG.
        let earlier = #"{"width":1,"height":2,"bytes":3,"sha256":"ab"}"#
        #expect(try JSONDecoder().decode(ImageInfo.self, from: Data(earlier.utf8)).format == "jpeg")
    }
}
