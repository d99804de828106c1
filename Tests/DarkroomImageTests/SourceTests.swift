import Testing

@testable import DarkroomImage

/// A job's source in any of its formats: the signature picks the reader,
/// bytes of no format are named, and a WebP source's transparency and EXIF
/// orientation are honoured as a JPEG's orientation is.
@Suite("Sources")
struct SourceTests {
    typealias W = WebPCodecTests

    @Test("the signature picks the reader, and bytes of no format are named")
    func signatures() throws {
        let jpeg = JPEGFixtures.jpeg(JPEGFixtures.pattern(width: 40, height: 30))
        #expect(SourceFormat(signatureOf: jpeg) == .jpeg)
        #expect(SourceFormat(signatureOf: W.encoded) == .webp)
        #expect(SourceFormat(signatureOf: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0]) == .png)
        #expect(SourceFormat(signatureOf: [0x89, 0x50, 0x4E, 0x47]) == nil)
        #expect(SourceFormat(signatureOf: Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WAVE".utf8)) == nil)

        let header = try Source.readHeader(jpeg)
        #expect(header.format == .jpeg && header.uprightSize == Size(width: 40, height: 30) && header.jpeg != nil)
        let webp = try Source.readHeader(W.encoded)
        #expect(webp.format == .webp && webp.uprightSize == Size(width: 96, height: 64) && webp.jpeg == nil && !webp.hasAlpha)

        let bmp = error { () throws(ImageError) in _ = try Source.readHeader([0x42, 0x4D, 0x36, 0x00, 8, 0, 0, 0]) }
        #expect(bmp?.code == .unsupportedFormat)
        #expect(bmp?.message == "not a JPEG, PNG, WebP, GIF, HEIF or TIFF image (starts with 42 4D 36 00: looks like BMP)")
        // A TIFF's byte order mark picks the TIFF reader, which says what is wrong.
        let tiff = error { () throws(ImageError) in _ = try Source.readHeader([0x49, 0x49, 0x2A, 0x00, 8, 0, 0, 0]) }
        #expect(tiff?.code == .corrupt && tiff?.message.hasPrefix("corrupt TIFF data") == true, "\(String(describing: tiff))")
        // A GIF's signature picks the GIF reader, which says what is wrong.
        let gif = error { () throws(ImageError) in _ = try Source.readHeader(Array("GIF89a".utf8) + [1, 0, 1, 0]) }
        #expect(gif?.code == .truncated)
        let text = error { () throws(ImageError) in _ = try Source.readHeader(Array("hello".utf8)) }
        #expect(text?.message == "not a JPEG, PNG, WebP, GIF, HEIF or TIFF image (starts with 68 65 6C 6C)")
        #expect(error { () throws(ImageError) in _ = try Source.readHeader([]) }?.code == .empty)
        // Cut inside a signature: each format's own reader says it is cut short.
        #expect(error { () throws(ImageError) in _ = try Source.readHeader(Array(W.encoded.prefix(6))) }?.code == .truncated)
        #expect(error { () throws(ImageError) in _ = try Source.readHeader([0xFF]) }?.code == .unsupportedFormat)
        #expect(error { () throws(ImageError) in _ = try Source.readHeader([0xFF, 0xD8]) }?.code == .truncated)
    }

    /// `encoded`'s lossy bitstream under a VP8X header with an ALPH chunk of
    /// raw (uncompressed) alpha: a left-to-right ramp from 0 to 255.
    static func withAlpha() throws -> (file: [UInt8], alpha: [UInt8]) {
        let vp8 = try #require(W.chunks(W.encoded)?.first)
        let alpha: [UInt8] = (0..<96 * 64).map { (i: Int) -> UInt8 in UInt8((i % 96) * 255 / 95) }
        let alph: [UInt8] = [0] + alpha  // no compression, filtering or preprocessing
        let file = W.riff([("VP8X", W.vp8x(flags: 0x10, width: 96, height: 64)), ("ALPH", alph), (vp8.fourcc, vp8.payload)])
        return (file, alpha)
    }

    @Test("a transparent WebP source is composited onto white, each pixel by its alpha")
    func webPAlphaIsComposited() throws {
        let (file, alpha) = try Self.withAlpha()
        #expect(try Source.readHeader(file).hasAlpha)
        let colours = try WebP.decode(file)  // alpha dropped: the file's own colours
        let header = try Source.readHeader(file)
        let composited = try Source.decode(file, header: header)
        #expect(TestImages.paddingIsOpaque(composited))
        var mismatches = 0
        for i in 0..<96 * 64 {
            let a = Int(alpha[i])
            for c in 0..<3 {
                let expected = (Int(colours.pixels[i * 4 + c]) * a + 255 * (255 - a) + 127) / 255
                if Int(composited.pixels[i * 4 + c]) != expected { mismatches += 1 }
            }
        }
        #expect(mismatches == 0)
        // Fully transparent on the left is white; fully opaque on the right is the colour.
        #expect(composited.pixel(x: 0, y: 10) == (255, 255, 255))
        #expect(composited.pixel(x: 95, y: 10) == colours.pixel(x: 95, y: 10))
        // Onto another background, the same formula.
        let black = try WebP.decode(file, background: (0, 0, 0))
        #expect(black.pixel(x: 0, y: 10) == (0, 0, 0))
    }

    @Test("a WebP source's EXIF orientation turns it upright, with or without the Exif prefix")
    func webPOrientation() throws {
        let vp8 = try #require(W.chunks(W.encoded)?.first)
        let segment = JPEGFixtures.exifSegment(orientation: 6, bigEndian: false)
        let tiff = Array(segment.dropFirst(10))  // FF E1, the length, "Exif\0\0"
        for exif in [tiff, Array(segment.dropFirst(4))] {
            let file = W.riff([("VP8X", W.vp8x(flags: 0x08, width: 96, height: 64)), (vp8.fourcc, vp8.payload), ("EXIF", exif)])
            let header = try Source.readHeader(file)
            #expect(header.orientation == .right)
            #expect(header.uprightSize == Size(width: 64, height: 96))
            let upright = try Source.decode(file, header: header)
            #expect(upright.width == 64 && upright.height == 96)
            // The stored top-left pixel ends up top-right after a quarter turn clockwise.
            let stored = try WebP.decode(W.encoded)
            #expect(upright.pixel(x: 63, y: 0) == stored.pixel(x: 0, y: 0))
        }
        // The EXIF chunk is only read when VP8X announces it.
        let unannounced = W.riff([("VP8X", W.vp8x(flags: 0, width: 96, height: 64)), (vp8.fourcc, vp8.payload),
                                  ("EXIF", Array(segment.dropFirst(10)))])
        #expect(try Source.readHeader(unannounced).uprightSize == Size(width: 96, height: 64))
    }

    @Test("a WebP decode stops through its flag, before or at its first slice")
    func webPDecodeCancels() throws {
        let set = CancellationFlag()
        set.cancel()
        #expect(error { () throws(ImageError) in _ = try WebP.decode(W.encoded, cancellation: set) }?.code == .cancelled)
        let atFirstLook = CancellationFlag(cancellingAtPoll: 1)
        #expect(error { () throws(ImageError) in _ = try WebP.decode(W.encoded, cancellation: atFirstLook) }?.code == .cancelled)
        // A flag never set decodes as before.
        #expect(try WebP.decode(W.encoded, cancellation: CancellationFlag()) == (try WebP.decode(W.encoded)))
    }
}
