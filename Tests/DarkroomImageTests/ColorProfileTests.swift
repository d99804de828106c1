import Testing

@testable import DarkroomImage

/// ICC colour profiles: read from a file's APP2 chunks, written into an
/// encoded file, and told apart when they cannot describe the pixels.
@Suite("JPEG codec: ICC colour profiles")
struct ColorProfileTests {
    /// Bytes shaped like an ICC profile of `space` ("RGB ", "CMYK", "GRAY"):
    /// its size, the 'acsp' signature and the data colour space where a
    /// profile has them, then `count - 128` bytes of pattern. The codec
    /// carries a profile without reading it.
    static func profile(_ space: String, count: Int) -> [UInt8] {
        var bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 7) }
        let size = UInt32(count)
        bytes.replaceSubrange(0..<4, with: [UInt8(size >> 24), UInt8(truncatingIfNeeded: size >> 16), UInt8(truncatingIfNeeded: size >> 8), UInt8(truncatingIfNeeded: size)])
        bytes.replaceSubrange(16..<20, with: Array(space.utf8))
        bytes.replaceSubrange(36..<40, with: Array("acsp".utf8))
        return bytes
    }

    /// `jpeg` with APP2 "ICC_PROFILE" chunks inserted after SOI, each
    /// given as (its number, the count it claims, its part).
    static func withChunks(_ jpeg: [UInt8], _ chunks: [(seq: UInt8, count: UInt8, part: [UInt8])]) -> [UInt8] {
        var out: [UInt8] = [0xFF, 0xD8]
        for chunk in chunks {
            let length = 2 + 12 + 2 + chunk.part.count
            out += [0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)] + Array("ICC_PROFILE".utf8) + [0, chunk.seq, chunk.count] + chunk.part
        }
        return out + jpeg.dropFirst(2)
    }

    static func picture() -> Image {
        var image = Image(width: 48, height: 32)
        for y in 0..<32 {
            for x in 0..<48 { image.setPixel(x: x, y: y, (UInt8(x * 5), UInt8(y * 7), UInt8((x + y) * 3))) }
        }
        return image
    }

    @Test("a profile written with the pixels reads back whole, in one chunk or several, and leaves the pixels as they were",
          arguments: [588, 65_519, 65_520, 200_000])
    func roundTrip(size: Int) throws {
        let profile = Self.profile("RGB ", count: size)
        let plain = try JPEG.encode(Self.picture(), options: EncodeOptions(quality: 90))
        let tagged = try JPEG.encode(Self.picture(), options: EncodeOptions(quality: 90, iccProfile: profile))
        let header = try JPEG.readHeader(tagged)
        #expect(header.iccProfile == profile)
        #expect(header.rgbProfile == profile)
        #expect(try JPEG.readHeader(plain).iccProfile == nil)
        #expect(try JPEG.decode(tagged).image == (try JPEG.decode(plain).image))
        // 65,519 bytes fill one chunk exactly; one more takes two.
        let chunks = tagged.indices.dropLast(13).filter { tagged[$0] == 0xFF && tagged[$0 + 1] == 0xE2 && tagged[($0 + 4)..<($0 + 15)].elementsEqual("ICC_PROFILE".utf8) }
        #expect(chunks.count == (size + 65_518) / 65_519)
    }

    @Test("a one-component file gets no profile: an RGB one would not describe it")
    func grayFilesHaveNone() throws {
        let profile = Self.profile("RGB ", count: 600)
        let gray = try JPEG.encode(Self.picture(), options: EncodeOptions(quality: 90, grayscale: true, iccProfile: profile))
        let header = try JPEG.readHeader(gray)
        #expect(header.components == 1 && header.iccProfile == nil)
    }

    @Test("chunks in any order make the profile; a missing, doubled or miscounted chunk makes none and the picture still decodes")
    func chunksPutTogether() throws {
        let profile = Self.profile("RGB ", count: 3_000)
        let jpeg = try JPEG.encode(Self.picture(), options: EncodeOptions(quality: 90))
        let (a, b, c) = (Array(profile[0..<1_000]), Array(profile[1_000..<2_000]), Array(profile[2_000...]))
        #expect(try JPEG.readHeader(Self.withChunks(jpeg, [(2, 3, b), (3, 3, c), (1, 3, a)])).iccProfile == profile)
        let broken: [[(seq: UInt8, count: UInt8, part: [UInt8])]] = [
            [(1, 3, a), (3, 3, c)],             // the second missing
            [(1, 3, a), (2, 3, b), (2, 3, b), (3, 3, c)],  // one twice
            [(1, 3, a), (2, 2, b), (3, 3, c)],  // counts that disagree
            [(0, 1, profile)],                  // numbered from 0
            [(1, 1, Array(profile[0..<100]))],  // shorter than an ICC header
        ]
        for chunks in broken {
            let file = Self.withChunks(jpeg, chunks)
            #expect(try JPEG.readHeader(file).iccProfile == nil)
            #expect(try JPEG.decode(file).image == (try JPEG.decode(jpeg).image))
        }
    }

    @Test("only an RGB profile of an RGB or YCbCr file describes the decoded pixels")
    func whichProfilesCarryOver() throws {
        let cmykFile = try JPEG.encodeRaw([UInt8](repeating: 40, count: 16 * 16 * 4), width: 16, height: 16, components: 4)
        let cmyk = try JPEG.readHeader(Self.withChunks(cmykFile, [(1, 1, Self.profile("CMYK", count: 500))]))
        #expect(cmyk.iccProfile != nil && cmyk.rgbProfile == nil)
        let ycbcrFile = try JPEG.encode(Self.picture(), options: EncodeOptions(quality: 90))
        let grayProfile = try JPEG.readHeader(Self.withChunks(ycbcrFile, [(1, 1, Self.profile("GRAY", count: 500))]))
        #expect(grayProfile.iccProfile != nil && grayProfile.rgbProfile == nil)
    }
}
