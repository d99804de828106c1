import Testing
@testable import DarkroomImage

@Suite("JPEG codec: bad input and limits")
struct CodecErrorTests {
    static let valid: [UInt8] = JPEGFixtures.jpeg(JPEGFixtures.noiseImage(width: 64, height: 48), quality: 90)

    func decodeError(_ data: [UInt8], _ options: DecodeOptions = .init()) -> ImageError? {
        do {
            _ = try JPEG.decode(data, options: options)
            return nil
        } catch {
            return error
        }
    }

    @Test func emptyInput() {
        let error = decodeError([])
        #expect(error?.code == .empty)
        #expect(error?.message == "empty input (0 bytes)")
    }

    @Test func onlySOIIsTruncated() {
        let error = decodeError([0xFF, 0xD8])
        #expect(error?.code == .truncated)
        #expect(error?.message == "truncated: data ends before the image does (libjpeg: Premature end of JPEG file)")
    }

    @Test func pngSignatureIsNamed() {
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]
        let error = decodeError(png)
        #expect(error?.code == .notJPEG)
        #expect(error?.message == "not a JPEG (starts with 89 50 4E 47: looks like PNG)")
    }

    @Test func randomBytesAreNotJPEG() {
        var noise = JPEGFixtures.noise(count: 4096)
        noise[0] = 0x12
        #expect(decodeError(noise)?.code == .notJPEG)
    }

    @Test func randomBytesAfterSOIFailCleanly() {
        let data: [UInt8] = [0xFF, 0xD8] + JPEGFixtures.noise(count: 4096, seed: 3)
        let code = decodeError(data)?.code
        #expect(code == .corrupt || code == .truncated)
    }

    @Test func truncatedHalf() {
        #expect(!Self.valid.isEmpty)
        let error = decodeError(Array(Self.valid.prefix(Self.valid.count / 2)))
        #expect(error?.code == .truncated)
        #expect(error?.message.contains("Premature end of JPEG file") == true)
    }

    @Test func truncationBelowTheRegionIsStillDetected() {
        // The region is the top rows; the damage is near the bottom.
        let cut = Array(Self.valid.prefix(Self.valid.count - 200))
        let error = decodeError(cut, DecodeOptions(region: Rect(x: 0, y: 0, width: 16, height: 8)))
        #expect(error?.code == .truncated)
        let shrunk = decodeError(cut, DecodeOptions(shrink: 8, region: Rect(x: 8, y: 0, width: 16, height: 16)))
        #expect(shrunk?.code == .truncated)
    }

    @Test func corruptedScanData() {
        let error = decodeError(JPEGFixtures.corruptScan(Self.valid))
        #expect(error?.code == .corrupt)
        #expect(error?.message.hasPrefix("corrupt JPEG data (libjpeg: ") == true)
        // Also when only a region away from the damage is asked for.
        let region = decodeError(JPEGFixtures.corruptScan(Self.valid), DecodeOptions(region: Rect(x: 0, y: 0, width: 8, height: 8)))
        #expect(region?.code == .corrupt)
    }

    @Test func warningsCanBeTolerated() throws {
        let lenient = DecodeOptions(limits: DecodeLimits(failOnWarning: false))
        let decoded = try JPEG.decode(Array(Self.valid.prefix(Self.valid.count / 2)), options: lenient)
        #expect(decoded.warnings > 0)
        #expect(decoded.image.width == 64 && decoded.image.height == 48)
    }

    @Test func hugeHeaderIsRefusedFromTheHeader() {
        let bomb = JPEGFixtures.patchSize(Self.valid, width: 60000, height: 60000)
        #expect(throws: ImageError(.limitExceeded, "image 60000x60000 is 3600.0 megapixels, over the 50.0 megapixel limit")) {
            _ = try JPEG.readHeader(bomb)
        }
        #expect(decodeError(bomb)?.code == .limitExceeded)
    }

    @Test func zeroWidth() {
        let error = decodeError(JPEGFixtures.patchSize(Self.valid, width: 0, height: 48))
        #expect(error?.code == .invalidDimensions)
        #expect(error?.message == "header declares width 0")
    }

    @Test func limitsAreConfigurable() throws {
        let pixels = DecodeLimits(maxPixels: 64 * 48 - 1)
        #expect(decodeError(Self.valid, DecodeOptions(limits: pixels))?.code == .limitExceeded)
        _ = try JPEG.decode(Self.valid, options: DecodeOptions(limits: DecodeLimits(maxPixels: 64 * 48)))

        let side = DecodeLimits(maxSide: 63)
        let sideError = decodeError(Self.valid, DecodeOptions(limits: side))
        #expect(sideError?.code == .limitExceeded)
        #expect(sideError?.message == "image 64x48 has a side of 64 pixels, over the 63 pixel limit")

        let bytes = DecodeLimits(maxInputBytes: Self.valid.count - 1)
        #expect(throws: ImageError(.limitExceeded, "input is \(Self.valid.count) bytes, over the \(Self.valid.count - 1) byte limit")) {
            _ = try JPEG.readHeader(Self.valid, limits: bytes)
        }
        #expect(DecodeLimits.default == DecodeLimits(maxPixels: 50_000_000, maxSide: 16_384, maxInputBytes: 64 << 20, failOnWarning: true))
    }

    /// Noise at quality 95 compresses badly: about 160 KB for 256x256, so an
    /// output buffer that starts at 4 KB has doubled several times by 64 KB.
    static let noisy = JPEGFixtures.noiseImage(width: 256, height: 256)

    @Test func encoderErrorAfterTheBufferGrewFreesItOnce() throws {
        let whole = try JPEG.encode(Self.noisy)
        #expect(whole.count > 128 << 10)

        var probe = JPEG.EncoderProbe(firstCapacity: 4 << 10, failAfter: 64 << 10)
        #expect(throws: ImageError(.encodeFailed, "JPEG encoding failed (libjpeg: Insufficient memory (case 10))")) {
            _ = try JPEG.encode(Self.noisy, probe: &probe)
        }
        #expect(probe.growths == 4)  // 4 -> 8 -> 16 -> 32 -> 64 KB, then the growth that fails
        #expect(probe.buffersFreed == 1)

        // The failure leaves nothing behind: the next encode writes the same file.
        #expect(try JPEG.encode(Self.noisy) == whole)
    }

    @Test func growingTheBufferDoesNotChangeTheFile() throws {
        for options in [EncodeOptions(), EncodeOptions(quality: 80, subsampling: .s420, progressive: true)] {
            var probe = JPEG.EncoderProbe(firstCapacity: 1)
            let grown = try JPEG.encode(Self.noisy, options: options, probe: &probe)
            #expect(probe.growths >= 10)
            #expect(probe.buffersFreed == 0)
            #expect(grown == (try JPEG.encode(Self.noisy, options: options)))
        }
    }

    @Test func badRequestsAreInvalidArguments() throws {
        #expect(decodeError(Self.valid, DecodeOptions(shrink: 3))?.code == .invalidArgument)
        #expect(decodeError(Self.valid, DecodeOptions(region: Rect(x: 60, y: 0, width: 10, height: 10)))?.code == .invalidArgument)
        #expect(decodeError(Self.valid, DecodeOptions(region: Rect(x: 0, y: 0, width: 0, height: 10)))?.code == .invalidArgument)
        #expect(throws: ImageError.self) {
            _ = try JPEG.encode(Image(width: 2, height: 2), options: EncodeOptions(quality: 0))
        }
    }
}
