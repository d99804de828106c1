import DarkroomCore
import DarkroomFixtures
import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Testing
@testable import DarkroomStore

/// The header checks of STORE (DRK1 section 11): what is refused, with which
/// ERROR and reason, and that a refused STORE leaves nothing behind.
@Suite struct ImageCheckTests {
    private let check = ImageCheck(limits: .default)

    /// A STORE of `full` and `thumb`, declared as `fullSize` and `thumbSize` unless told.
    private func request(full: [UInt8], thumb: [UInt8], job: ULID = ULIDGenerator.shared.next(), requestID: UInt64 = 1,
                         declaring declared: (full: ImageSize, thumb: ImageSize) = (fullSize, thumbSize)) -> StoreRequest {
        StoreRequest(requestID: requestID, jobID: job, sourceName: "photo.jpg", pipeline: "invert",
                     fullSize: declared.full, thumbnailSize: declared.thumb, full: full, thumbnail: thumb)
    }

    /// The JPEG cut right before its first scan (SOS): a header that ends early.
    private func headerOnly(_ jpeg: [UInt8]) throws -> [UInt8] {
        let sos = try #require(startOfScan(jpeg))
        return Array(jpeg.prefix(sos))
    }

    /// The offset of the SOS marker; the test JPEGs hold no 0xFF in their
    /// comment, so the first FF DA is the marker.
    private func startOfScan(_ jpeg: [UInt8]) -> Int? {
        jpeg.indices.dropLast().first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDA }
    }

    @Test func aRealPairPasses() throws {
        #expect(check.failure(of: request(full: fullJPEG(seed: 1), thumb: thumbJPEG(seed: 2))) == nil)
        // A progressive colour file is as good as a baseline gray one.
        let colour = try JPEG.encode(Image(width: 64, height: 48, red: 200, green: 40, blue: 10), options: EncodeOptions(progressive: true))
        #expect(check.failure(of: request(full: colour, thumb: thumbJPEG(seed: 2))) == nil)
    }

    @Test func aPNGAndAnAVIFPassButAHEICDoesNot() throws {
        let picture = SamplePhoto.render(Size(width: 64, height: 48), seed: 3)
        let png = try PNG.encode(picture), avif = try HEIF.encodeAVIF(picture, quality: 60)
        #expect(check.failure(of: request(full: png, thumb: thumbJPEG(seed: 1))) == nil)
        #expect(check.failure(of: request(full: avif, thumb: thumbJPEG(seed: 1))) == nil)
        #expect(RecordStore.format(of: png) == "png" && RecordStore.format(of: avif) == "avif")
        let heic = HEIFFixtures.heif(width: 64, height: 48, pixels: HEIFFixtures.pattern(width: 64, height: 48))
        let refused = check.failure(of: request(full: heic, thumb: thumbJPEG(seed: 1)))
        #expect(refused?.code == .invalidImage && refused?.reason == "full: a HEIF that is not an AVIF (coded with HEVC, not AV1)",
                "\(String(describing: refused))")
        // Of another size than declared, as for the other formats.
        let small = try HEIF.encodeAVIF(SamplePhoto.render(Size(width: 63, height: 48), seed: 3), quality: 60)
        #expect(check.failure(of: request(full: small, thumb: thumbJPEG(seed: 1)))?.reason == "full: header says 63x48, STORE declares 64x48")
    }

    @Test func garbageDeclaredAsAJPEGIsNotAJPEG() {
        let garbage = fixture(4000, seed: 7)
        let declared = (ImageSize(width: 100, height: 100), ImageSize(width: 100, height: 100))
        let full = check.failure(of: request(full: garbage, thumb: jpeg(100, 100, seed: 1), declaring: declared))
        #expect(full?.code == .invalidImage)
        #expect(full?.reason.hasPrefix("full: not a JPEG, WebP, PNG or AVIF (no SOI marker, RIFF WEBP header, PNG signature or HEIF ftyp box") == true, "\(String(describing: full))")
        let thumb = check.failure(of: request(full: jpeg(100, 100, seed: 1), thumb: garbage, declaring: declared))
        #expect(thumb?.code == .invalidImage)
        #expect(thumb?.reason.hasPrefix("thumbnail: not a JPEG, WebP, PNG or AVIF (no SOI marker, RIFF WEBP header, PNG signature or HEIF ftyp box") == true, "\(String(describing: thumb))")
        // Bytes that start like a GIF say what they look like.
        let gif = Array("GIF89a".utf8) + garbage
        let named = check.failure(of: request(full: gif, thumb: thumbJPEG(seed: 1)))
        #expect(named?.reason == "full: not a JPEG, WebP, PNG or AVIF (no SOI marker, RIFF WEBP header, PNG signature or HEIF ftyp box; starts with 47 49 46 38: looks like GIF)",
                "\(String(describing: named))")
        // A PNG signature and then garbage is a corrupt PNG.
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + garbage
        let badPNG = check.failure(of: request(full: png, thumb: thumbJPEG(seed: 1)))
        #expect(badPNG?.code == .invalidImage)
        #expect(badPNG?.reason.hasPrefix("full: corrupt PNG data") == true, "\(String(describing: badPNG))")
        // SOI and then garbage is a corrupt header.
        let corrupt = check.failure(of: request(full: [0xFF, 0xD8] + garbage, thumb: thumbJPEG(seed: 1)))
        #expect(corrupt?.code == .invalidImage)
        #expect(corrupt?.reason.hasPrefix("full: corrupt JPEG data") == true, "\(String(describing: corrupt))")
    }

    @Test func aJPEGOfAnotherSizeIsRefusedNamingBothSizes() {
        let declared = (ImageSize(width: 100, height: 100), thumbSize)
        let full = check.failure(of: request(full: jpeg(99, 100, seed: 1), thumb: thumbJPEG(seed: 2), declaring: declared))
        #expect(full == ProtocolError(.invalidImage, "full: header says 99x100, STORE declares 100x100"))
        let thumb = check.failure(of: request(full: fullJPEG(seed: 1), thumb: jpeg(16, 15, seed: 2)))
        #expect(thumb == ProtocolError(.invalidImage, "thumbnail: header says 16x15, STORE declares 16x16"))
        // Full and thumbnail swapped: the full image is named, it comes first.
        let swapped = check.failure(of: request(full: thumbJPEG(seed: 2), thumb: fullJPEG(seed: 1)))
        #expect(swapped == ProtocolError(.invalidImage, "full: header says 16x16, STORE declares 64x48"))
    }

    @Test func aHeaderThatEndsEarlyIsTruncated() throws {
        let cut = try headerOnly(fullJPEG(seed: 1))
        let full = check.failure(of: request(full: cut, thumb: thumbJPEG(seed: 2)))
        #expect(full == ProtocolError(.invalidImage, "full: truncated header (the data ends before the first scan)"))
        let thumb = check.failure(of: request(full: fullJPEG(seed: 1), thumb: Array(thumbJPEG(seed: 2).prefix(60))))
        #expect(thumb == ProtocolError(.invalidImage, "thumbnail: truncated header (the data ends before the first scan)"))
    }

    @Test func anImageOverTheLimitsIsTooLarge() {
        let wide = jpeg(20_000, 1, seed: 1)
        let failure = check.failure(of: request(full: wide, thumb: thumbJPEG(seed: 2),
                                                declaring: (ImageSize(width: 20_000, height: 1), thumbSize)))
        #expect(failure == ProtocolError(.tooLarge, "full: image 20000x1 has a side of 20000 pixels, over the 16384 pixel limit"))
        // The limits are the node's to set.
        let small = ImageCheck(limits: DecodeLimits(maxPixels: 100))
        #expect(small.failure(of: request(full: fullJPEG(seed: 1), thumb: thumbJPEG(seed: 2)))?.code == .tooLarge)
        // Warnings are always errors here, whatever the limits say.
        #expect(ImageCheck(limits: DecodeLimits(failOnWarning: false)).limits.failOnWarning)
    }

    /// Only the header is read: a file whose scan is cut short passes (the
    /// worker failed to encode it, and finding that out costs a decode),
    /// and checking a large pair costs microseconds, not a decode's
    /// milliseconds.
    @Test func onlyTheHeaderIsRead() throws {
        let full = fullJPEG(seed: 1)
        let sos = try #require(startOfScan(full))
        let cutScan = Array(full.prefix(sos + 16))
        #expect(throws: ImageError.self) { try JPEG.decode(cutScan) }
        #expect(check.failure(of: request(full: cutScan, thumb: thumbJPEG(seed: 2))) == nil)

        let big = request(full: jpeg(2048, 2048, seed: 3), thumb: jpeg(256, 256, seed: 4),
                          declaring: (ImageSize(width: 2048, height: 2048), ImageSize(width: 256, height: 256)))
        #expect(check.failure(of: big) == nil)
        // A few microseconds a pair (2.5 µs measured for a 2048x2048 photo
        // and its thumbnail); decoding that photo takes about 23 ms.
        let started = ContinuousClock.now
        for _ in 0..<1000 { _ = check.failure(of: big) }
        #expect(ContinuousClock.now - started < .seconds(1))
    }

    @Test func theNodeRefusesBadImagesAndStoresNothing() throws {
        let context = try Context()
        let directory = try TemporaryDirectory()
        // Every image over 16 bytes would be a file: a refused STORE must leave none.
        let node = try startNode(context, directory: directory.storePath, threshold: 16)
        defer { node.stop() }
        let client = try StoreClient(context, node: node)

        let refusals: [(StoreRequest, ErrorCode, String)] = [
            (request(full: fixture(3000, seed: 1), thumb: jpeg(100, 100, seed: 2), requestID: 21,
                     declaring: (ImageSize(width: 100, height: 100), ImageSize(width: 100, height: 100))),
             .invalidImage, "full: not a JPEG, WebP, PNG or AVIF (no SOI marker, RIFF WEBP header, PNG signature or HEIF ftyp box"),
            (request(full: fullJPEG(seed: 3), thumb: fixture(300, seed: 4), requestID: 22), .invalidImage, "thumbnail: not a JPEG, WebP, PNG or AVIF (no SOI marker, RIFF WEBP header, PNG signature or HEIF ftyp box"),
            (request(full: jpeg(63, 48, seed: 5), thumb: thumbJPEG(seed: 6), requestID: 23), .invalidImage,
             "full: header says 63x48, STORE declares 64x48"),
            (request(full: fullJPEG(seed: 7), thumb: jpeg(16, 17, seed: 8), requestID: 24), .invalidImage,
             "thumbnail: header says 16x17, STORE declares 16x16"),
            (request(full: try headerOnly(fullJPEG(seed: 9)), thumb: thumbJPEG(seed: 10), requestID: 25), .invalidImage,
             "full: truncated header"),
        ]
        for (store, code, reason) in refusals {
            guard case .error(let error) = try client.request(store.frames()) else {
                Issue.record("STORE \(store.requestID) was not refused")
                continue
            }
            #expect(error.requestID == store.requestID)
            #expect(error.code == code)
            #expect(error.reason.hasPrefix(reason), "reason: \(error.reason)")
            // Nothing of it is kept: GET by its job id finds nothing.
            guard case .error(let missing) = try client.get(store.jobID, .full) else {
                Issue.record("a refused STORE left a record")
                continue
            }
            #expect(missing.code == .notFound)
        }
        #expect(try client.stats().records == 0)
        #expect(try count(directory.storePath, "SELECT count(*) FROM full_res") == 0)
        #expect(try count(directory.storePath, "SELECT count(*) FROM thumbnails") == 0)
        #expect(blobFiles(directory.storePath).isEmpty)

        // A real pair is stored and served as sent.
        let job = ULIDGenerator.shared.next()
        let full = fullJPEG(seed: 11)
        let thumb = thumbJPEG(seed: 12)
        let stored = try client.store(job: job, full: full, thumb: thumb)
        #expect(stored.created)
        guard case .getReply(let reply) = try client.get(job, .full) else {
            Issue.record("GET did not answer GET-REPLY")
            return
        }
        #expect(reply.image == full)
        #expect(reply.record.full.width == 64 && reply.record.full.height == 48)

        // The check comes before the job's record is looked up: garbage for a
        // job that has a record is refused, not answered STORED.
        guard case .error(let refused) = try client.request(request(full: fixture(500, seed: 13), thumb: thumb, job: job, requestID: 30).frames()) else {
            Issue.record("garbage for a stored job was not refused")
            return
        }
        #expect(refused.code == .invalidImage && refused.requestID == 30)
        #expect(try client.stats().records == 1)
        #expect(blobFiles(directory.storePath).count == 2)
    }
}
