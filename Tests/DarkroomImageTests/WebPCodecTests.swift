import Testing

@testable import DarkroomImage

/// The WebP codec: lossy encoding of RGBX and gray pixels, the ICCP chunk,
/// cancellation, and the header checks and errors of decoding.
@Suite("WebP codec")
struct WebPCodecTests {
    /// A smooth gradient: R across, G down, B along the diagonal.
    static func gradient(width: Int, height: Int) -> Image {
        var image = Image(width: width, height: height)
        for y in 0..<height {
            for x in 0..<width {
                image.setPixel(x: x, y: y, (
                    UInt8(x * 255 / (width - 1)), UInt8(y * 255 / (height - 1)),
                    UInt8((x + y) * 255 / (width + height - 2))))
            }
        }
        return image
    }

    static func grayGradient(width: Int, height: Int) -> GrayImage {
        GrayImage(width: width, height: height, pixels: (0..<width * height).map { i in
            UInt8((i % width + i / width) * 255 / (width + height - 2))
        })
    }

    /// Mean absolute difference per channel (R, G, B) of two same-size images.
    static func meanError(_ a: Image, _ b: Image) -> [Double] {
        var sums = [0, 0, 0]
        for i in 0..<a.pixels.count where i % 4 != 3 {
            sums[i % 4] += abs(Int(a.pixels[i]) - Int(b.pixels[i]))
        }
        return sums.map { Double($0) / Double(a.width * a.height) }
    }

    /// The chunks of a RIFF WebP file after its 12-byte header, as (fourcc,
    /// payload); nil when a chunk runs past the end.
    static func chunks(_ file: [UInt8]) -> [(fourcc: String, payload: [UInt8])]? {
        var result: [(String, [UInt8])] = []
        var i = 12
        while i < file.count {
            guard i + 8 <= file.count else { return nil }
            let size = Int(file[i + 4]) | Int(file[i + 5]) << 8 | Int(file[i + 6]) << 16 | Int(file[i + 7]) << 24
            guard i + 8 + size <= file.count else { return nil }
            result.append((String(decoding: file[i..<i + 4], as: UTF8.self), Array(file[i + 8..<i + 8 + size])))
            i += 8 + size + (size & 1)  // payloads are padded to an even size
        }
        return result
    }

    /// A RIFF WebP file of `chunks`, with the RIFF size filled in.
    static func riff(_ chunks: [(String, [UInt8])]) -> [UInt8] {
        var body = Array("WEBP".utf8)
        for (fourcc, payload) in chunks {
            body += Array(fourcc.utf8) + le32(payload.count) + payload + (payload.count & 1 == 1 ? [0] : [])
        }
        return Array("RIFF".utf8) + le32(body.count) + body
    }

    static func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    static func le24(_ v: Int) -> [UInt8] { (0..<3).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }

    /// A VP8X chunk payload: flags, three reserved bytes, canvas size minus one.
    static func vp8x(flags: UInt8, width: Int, height: Int) -> [UInt8] {
        [flags, 0, 0, 0] + le24(width - 1) + le24(height - 1)
    }

    static let source = gradient(width: 96, height: 64)
    static let encoded: [UInt8] = (try? WebP.encode(source, quality: 90)) ?? []

    @Test("a gradient encodes to a WebP whose header and pixels match it")
    func roundTrip() throws {
        let bytes = Self.encoded
        #expect(WebP.isWebP(bytes))
        let header = try WebP.readHeader(bytes)
        #expect(header == WebPHeader(size: Size(width: 96, height: 64), hasAlpha: false, isAnimated: false))
        let decoded = try WebP.decode(bytes)
        #expect(decoded.width == 96 && decoded.height == 64)
        #expect(TestImages.paddingIsOpaque(decoded))
        // Lossy VP8 at quality 90 on a picture with no edges: what is lost
        // is the rounding of finely quantized smooth blocks and the 4:2:0
        // chroma, about a level on average. A misread channel order, a
        // shifted row or a colour conversion gone wrong costs tens.
        let errors = Self.meanError(Self.source, decoded)
        #expect(errors.allSatisfy { $0 < 4 }, "mean errors \(errors)")
        // Without alpha or a profile, the file is the simple format: one VP8 chunk.
        #expect(Self.chunks(bytes)?.map(\.fourcc) == ["VP8 "])
    }

    @Test("a gray image is written as RGB with equal channels, the file the same grays in RGBX give")
    func grayImage() throws {
        let gray = Self.grayGradient(width: 80, height: 48)
        let bytes = try WebP.encode(gray, quality: 90)
        // The gray plane is turned into YUV as libwebp turns R = G = B.
        #expect(bytes == (try WebP.encode(Image(gray), quality: 90)))
        let decoded = try WebP.decode(bytes)
        #expect(decoded.width == 80 && decoded.height == 48)
        // Neutral chroma decodes to equal channels, but for libwebp's
        // fixed-point YUV-to-RGB, whose green offset (-1161) is one below red
        // and blue's (-1160): green comes out one lower at Y 86, 159 and 232.
        var unequal = 0
        for i in Swift.stride(from: 0, to: decoded.pixels.count, by: 4) {
            let (r, g, b) = (Int(decoded.pixels[i]), Int(decoded.pixels[i + 1]), Int(decoded.pixels[i + 2]))
            #expect(r == b && (g == r || g == r - 1), "pixel \(i / 4): \(r) \(g) \(b)")
            if g != r { unequal += 1 }
        }
        #expect(unequal * 20 < 80 * 48, "\(unequal) pixels with green apart")
        #expect(Self.meanError(Image(gray), decoded).allSatisfy { $0 < 4 })
    }

    @Test("an ICC profile goes into an ICCP chunk, byte for byte, and leaves the pixels as they were")
    func iccProfile() throws {
        let profile = (0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let tagged = try WebP.encode(Self.source, quality: 90, iccProfile: profile)
        #expect(WebP.isWebP(tagged))
        let parsed = try #require(Self.chunks(tagged))
        #expect(parsed.map(\.fourcc) == ["VP8X", "ICCP", "VP8 "])
        #expect(parsed.first { $0.fourcc == "ICCP" }?.payload == profile)
        #expect(WebP.iccProfile(tagged) == profile)
        #expect(WebP.iccProfile(Self.encoded) == nil)
        // The VP8X flags announce the profile (bit 5) and nothing else.
        #expect(parsed.first?.payload.first == 0x20)
        #expect(Int(tagged[4]) | Int(tagged[5]) << 8 | Int(tagged[6]) << 16 | Int(tagged[7]) << 24 == tagged.count - 8)
        #expect(try WebP.readHeader(tagged).size == Size(width: 96, height: 64))
        #expect(try WebP.decode(tagged) == (try WebP.decode(Self.encoded)))
        // An empty profile is no profile.
        #expect(try WebP.encode(Self.source, quality: 90, iccProfile: []) == Self.encoded)
    }

    @Test("a flag set before the encode stops it before libwebp runs")
    func cancelledBeforeStart() {
        let flag = CancellationFlag()
        flag.cancel()
        #expect(throws: ImageError.cancelled) { _ = try WebP.encode(Self.source, quality: 90, cancellation: flag) }
        #expect(throws: ImageError.cancelled) {
            _ = try WebP.encode(Self.grayGradient(width: 32, height: 32), quality: 90, cancellation: flag)
        }
        #expect(flag.pollCount == 0)
    }

    @Test("libwebp's progress hook looks at the flag, and a flag set halfway stops the encode")
    func cancelledDuringEncode() throws {
        let image = Self.gradient(width: 256, height: 192)
        let counting = CancellationFlag()
        #expect(try WebP.encode(image, quality: 80, cancellation: counting) == (try WebP.encode(image, quality: 80)))
        let looks = counting.pollCount
        #expect(looks >= 3, "\(looks) looks")

        let flag = CancellationFlag(cancellingAtPoll: 2)
        #expect(throws: ImageError.cancelled) { _ = try WebP.encode(image, quality: 80, cancellation: flag) }
        #expect(flag.pollCount == 2)

        let grayFlag = CancellationFlag(cancellingAtPoll: 2)
        #expect(throws: ImageError.cancelled) {
            _ = try WebP.encode(Self.grayGradient(width: 256, height: 192), quality: 80, cancellation: grayFlag)
        }
        #expect(grayFlag.pollCount == 2)
    }

    @Test("a lower quality makes a smaller file")
    func qualityChangesSize() throws {
        let image = TestImages.smooth(width: 128, height: 96)
        let low = try WebP.encode(image, quality: 10)
        let high = try WebP.encode(image, quality: 95)
        #expect(low.count < high.count, "\(low.count) bytes at 10, \(high.count) at 95")
    }

    @Test("quality outside 1...100 is refused")
    func qualityRange() {
        for quality in [0, 101] {
            let e = error { () throws(ImageError) in _ = try WebP.encode(Self.source, quality: quality) }
            #expect(e == ImageError(.invalidArgument, "quality must be 1 to 100, not \(quality)"))
        }
    }

    @Test("an image over 16383 pixels a side cannot be encoded")
    func sideLimit() throws {
        let wide = error { () throws(ImageError) in _ = try WebP.encode(Image(width: 16_384, height: 1), quality: 80) }
        #expect(wide == ImageError(.encodeFailed, "cannot encode a 16384x1 image as WebP: WebP allows at most 16383 pixels a side"))
        let tall = error { () throws(ImageError) in _ = try WebP.encode(GrayImage(width: 1, height: 16_384), quality: 80) }
        #expect(tall?.code == .encodeFailed)
        #expect(tall?.message.contains("at most 16383 pixels a side") == true)
        #expect(try WebP.readHeader(WebP.encode(Image(width: 16_383, height: 1), quality: 80)).size == Size(width: 16_383, height: 1))
    }

    @Test("the limits are checked on the header, worded as the JPEG decoder words them")
    func limits() {
        let bytes = Self.encoded
        let side = error { () throws(ImageError) in _ = try WebP.readHeader(bytes, limits: DecodeLimits(maxSide: 95)) }
        #expect(side == ImageError(.limitExceeded, "image 96x64 has a side of 96 pixels, over the 95 pixel limit"))
        let pixels = error { () throws(ImageError) in _ = try WebP.decode(bytes, limits: DecodeLimits(maxPixels: 6000)) }
        #expect(pixels == ImageError(.limitExceeded, "image 96x64 is 0.0 megapixels, over the 0.0 megapixel limit"))
        let input = error { () throws(ImageError) in _ = try WebP.decode(bytes, limits: DecodeLimits(maxInputBytes: bytes.count - 1)) }
        #expect(input == ImageError(.limitExceeded, "input is \(bytes.count) bytes, over the \(bytes.count - 1) byte limit"))
        // A canvas of 16384 x 16384 declared in 30 bytes is refused from its header alone.
        let huge = Self.riff([("VP8X", Self.vp8x(flags: 0x02, width: 16_384, height: 16_384))])
        let bomb = error { () throws(ImageError) in _ = try WebP.decode(huge) }
        #expect(bomb == ImageError(.limitExceeded, "image 16384x16384 is 268.4 megapixels, over the 50.0 megapixel limit"))
    }

    @Test("bytes that are not WebP are named by their first bytes")
    func notWebP() throws {
        var noise = JPEGFixtures.noise(count: 4096)
        noise[0] = 0x12
        let random = error { () throws(ImageError) in _ = try WebP.readHeader(noise) }
        #expect(random?.code == .notWebP)
        let hex = noise.prefix(4).map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }.joined(separator: " ")
        #expect(random?.message == "not a WebP (starts with \(hex))")
        #expect(!WebP.isWebP(noise))

        let jpeg = JPEGFixtures.jpeg(Self.source, quality: 90)
        let named = error { () throws(ImageError) in _ = try WebP.decode(jpeg) }
        #expect(named == ImageError(.notWebP, "not a WebP (starts with FF D8 FF E0: looks like JPEG)"))
        // A RIFF file of another kind (WAVE) is not WebP either.
        var wave = Self.encoded
        wave.replaceSubrange(8..<12, with: Array("WAVE".utf8))
        #expect(error { () throws(ImageError) in _ = try WebP.readHeader(wave) }?.code == .notWebP)
    }

    @Test("empty and cut-short input")
    func emptyAndTruncated() throws {
        let empty = error { () throws(ImageError) in _ = try WebP.readHeader([]) }
        #expect(empty == ImageError(.empty, "empty input (0 bytes)"))
        #expect(!WebP.isWebP([]))

        // Cut after 20 bytes: the RIFF header and the VP8 chunk's header,
        // none of the frame header that holds the size. libwebp asks for
        // more data, which for a whole file means it was cut short.
        let cut = Array(Self.encoded.prefix(20))
        #expect(WebP.isWebP(cut))
        let header = error { () throws(ImageError) in _ = try WebP.readHeader(cut) }
        #expect(header == ImageError(.truncated, "truncated: data ends before the image does (libwebp: not enough data)"))

        // Less than the signature, but as far as it goes "RIFF....WEBP".
        let signature = error { () throws(ImageError) in _ = try WebP.readHeader(Array(Self.encoded.prefix(10))) }
        #expect(signature?.code == .truncated)

        // The header is whole, the bitstream is not: the header reads, the decode stops.
        let half = Array(Self.encoded.prefix(Self.encoded.count / 2))
        #expect(try WebP.readHeader(half).size == Size(width: 96, height: 64))
        #expect(error { () throws(ImageError) in _ = try WebP.decode(half) }?.code == .truncated)
    }

    @Test("a damaged bitstream is corrupt")
    func corrupt() {
        // The VP8 frame tag's start code (9D 01 2A, after the 3-byte tag) broken.
        var bytes = Self.encoded
        bytes[20 + 3] ^= 0xFF
        let e = error { () throws(ImageError) in _ = try WebP.decode(bytes) }
        #expect(e?.code == .corrupt)
        #expect(e?.message.hasPrefix("corrupt WebP data (libwebp: ") == true)
    }

    @Test("an animation is read as a header but not decoded")
    func animated() throws {
        let bytes = Self.riff([("VP8X", Self.vp8x(flags: 0x02, width: 40, height: 30)), ("ANIM", [0, 0, 0, 0, 0, 0])])
        #expect(try WebP.readHeader(bytes) == WebPHeader(size: Size(width: 40, height: 30), hasAlpha: false, isAnimated: true))
        #expect(error { () throws(ImageError) in _ = try WebP.decode(bytes) }?.code == .unsupported)
    }

    @Test("a file that declares alpha decodes with the engine's opaque fourth byte")
    func alphaIsIgnored() throws {
        // The lossy bitstream of `encoded` under a VP8X header whose flags
        // declare alpha (bit 4) but with no ALPH chunk: libwebp reports the
        // alpha and decodes every pixel opaque.
        let vp8 = try #require(Self.chunks(Self.encoded)?.first)
        let bytes = Self.riff([("VP8X", Self.vp8x(flags: 0x10, width: 96, height: 64)), (vp8.fourcc, vp8.payload)])
        #expect(try WebP.readHeader(bytes).hasAlpha)
        let decoded = try WebP.decode(bytes)
        #expect(TestImages.paddingIsOpaque(decoded))
        #expect(decoded == (try WebP.decode(Self.encoded)))
    }
}
