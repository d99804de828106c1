import Dispatch
import Foundation
import Synchronization
import DarkroomFixtures
import Testing

@testable import DarkroomImage

@testable import DarkroomPipeline

/// The `srgb` step: pixels in an embedded RGB ICC profile converted to sRGB,
/// checked against the colour science done here by hand (the profile's
/// matrix and curves, then sRGB's), and files written without a profile.
@Suite("Converting to sRGB")
struct SRGBConversionTests {
    /// Adobe RGB (1998) as an ICC v2 matrix/TRC display profile, built
    /// byte by byte: the D50-adapted colorants of the published profile
    /// and one gamma of 563/256 (the u8Fixed8 nearest 2.2) for every channel.
    static let adobeColorants: [[Double]] = [[0.6097, 0.3111, 0.0195], [0.2053, 0.6257, 0.0609], [0.1492, 0.0632, 0.7446]]
    static let adobeGamma = 563.0 / 256.0

    static func adobeRGBProfile() -> [UInt8] {
        let curve = Array("curv".utf8) + [0, 0, 0, 0] + ICCProfiles.be32(1) + [UInt8(563 >> 8), UInt8(563 & 0xFF), 0, 0]
        return ICCProfiles.assemble(deviceClass: "mntr", colorSpace: "RGB ", pcs: "XYZ ", tags: [
            ("wtpt", ICCProfiles.xyz(ICCProfiles.d50)), ("rXYZ", ICCProfiles.xyz(adobeColorants[0])),
            ("gXYZ", ICCProfiles.xyz(adobeColorants[1])), ("bXYZ", ICCProfiles.xyz(adobeColorants[2])),
            ("rTRC", curve), ("gTRC", curve), ("bTRC", curve),
        ])
    }

    /// What an Adobe RGB colour is in sRGB, worked out here: the profile's
    /// curve and matrix to XYZ (D50), then the inverse of sRGB's own D50
    /// matrix (Bradford-adapted, as ICC profiles carry it) and sRGB's curve.
    static func expectedSRGB(_ rgb: (UInt8, UInt8, UInt8)) -> [Double] {
        let linear = [rgb.0, rgb.1, rgb.2].map { pow(Double($0) / 255, adobeGamma) }
        return srgb(fromXYZ: (0..<3).map { row in (0..<3).reduce(0.0) { $0 + adobeColorants[$1][row] * linear[$1] } })
    }

    /// A D50 XYZ colour in sRGB (0…255, not rounded), by the inverse of
    /// sRGB's own D50 matrix and sRGB's curve, clipped to the gamut.
    static func srgb(fromXYZ xyz: [Double]) -> [Double] {
        let s: [[Double]] = [[0.4361, 0.3851, 0.1431], [0.2225, 0.7169, 0.0606], [0.0139, 0.0971, 0.7141]]
        // The inverse of s, by cofactors.
        let det = s[0][0] * (s[1][1] * s[2][2] - s[1][2] * s[2][1]) - s[0][1] * (s[1][0] * s[2][2] - s[1][2] * s[2][0])
            + s[0][2] * (s[1][0] * s[2][1] - s[1][1] * s[2][0])
        let inverse: [[Double]] = [
            [s[1][1] * s[2][2] - s[1][2] * s[2][1], s[0][2] * s[2][1] - s[0][1] * s[2][2], s[0][1] * s[1][2] - s[0][2] * s[1][1]],
            [s[1][2] * s[2][0] - s[1][0] * s[2][2], s[0][0] * s[2][2] - s[0][2] * s[2][0], s[0][2] * s[1][0] - s[0][0] * s[1][2]],
            [s[1][0] * s[2][1] - s[1][1] * s[2][0], s[0][1] * s[2][0] - s[0][0] * s[2][1], s[0][0] * s[1][1] - s[0][1] * s[1][0]],
        ].map { $0.map { $0 / det } }
        return (0..<3).map { row in
            let v = min(1, max(0, (0..<3).reduce(0.0) { $0 + inverse[row][$1] * xyz[$1] }))
            let encoded = v <= 0.0031308 ? 12.92 * v : 1.055 * pow(v, 1 / 2.4) - 0.055
            return encoded * 255
        }
    }

    static let colours: [(UInt8, UInt8, UInt8)] = [(200, 100, 50), (50, 180, 90), (128, 128, 128), (30, 60, 200), (240, 230, 20), (10, 10, 10)]

    static func strip() -> Image {
        var image = Image(width: colours.count * 8, height: 8)
        for (index, colour) in colours.enumerated() {
            for y in 0..<8 { for x in index * 8..<index * 8 + 8 { image.setPixel(x: x, y: y, (colour.0, colour.1, colour.2)) } }
        }
        return image
    }

    @Test("the engine converts Adobe RGB pixels as the colour science says, within 3 of 255")
    func engineConversion() throws {
        let (converted, failure) = try Self.strip().convertedToSRGB(from: Self.adobeRGBProfile())
        #expect(failure == nil)
        var moved = 0
        for (index, colour) in Self.colours.enumerated() {
            let got = converted.pixel(x: index * 8 + 3, y: 3)
            let want = Self.expectedSRGB(colour)
            for (channel, value) in [got.r, got.g, got.b].enumerated() {
                #expect(abs(Double(value) - want[channel]) <= 3, "\(colour) → \(got), expected \(want)")
            }
            if abs(Int(got.r) - Int(colour.0)) + abs(Int(got.g) - Int(colour.1)) + abs(Int(got.b) - Int(colour.2)) >= 8 { moved += 1 }
        }
        #expect(moved >= 3, "saturated colours change: Adobe RGB's gamut is wider than sRGB's")
        // The fourth byte of every pixel stays 255.
        #expect(stride(from: 3, to: converted.pixels.count, by: 4).allSatisfy { converted.pixels[$0] == 255 })
    }

    @Test("a profile that cannot be used leaves the pixels as they are and says why")
    func unusableProfile() throws {
        var garbage = (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        garbage.replaceSubrange(16..<20, with: Array("RGB ".utf8))
        let image = Self.strip()
        for profile in [garbage, [UInt8](repeating: 0, count: 20)] {
            let (same, failure) = try image.convertedToSRGB(from: profile)
            #expect(same == image)
            #expect(failure?.isEmpty == false)
        }
    }

    @Test("a job with srgb writes converted pixels and no profile; without the step the profile stays")
    func jobDropsTheProfile() throws {
        let profile = Self.adobeRGBProfile()
        let source = try JPEG.encode(Self.strip(), options: EncodeOptions(quality: 100, subsampling: .s444, iccProfile: profile))
        let options = JobOptions(thumbnail: Size(width: 16, height: 16))
        let converted = try ImageJob(pipeline: try Pipeline(parsing: "srgb"), options: options).run(source)
        #expect(try JPEG.readHeader(converted.full.bytes).iccProfile == nil)
        #expect(try JPEG.readHeader(try #require(converted.thumbnail).bytes).iccProfile == nil)
        let pixels = try JPEG.decode(converted.full.bytes).image
        for (index, colour) in Self.colours.enumerated() {
            let got = pixels.pixel(x: index * 8 + 3, y: 3)
            let want = Self.expectedSRGB(colour)
            for (channel, value) in [got.r, got.g, got.b].enumerated() {
                #expect(abs(Double(value) - want[channel]) <= 6, "\(colour) → \(got), expected \(want) (through JPEG at q100)")
            }
        }
        let kept = try ImageJob(pipeline: try Pipeline(parsing: "invert"), options: options).run(source)
        #expect(try JPEG.readHeader(kept.full.bytes).iccProfile == profile)
        // A source without a profile is taken as sRGB: the step changes nothing.
        let plain = try JPEG.encode(Self.strip(), options: EncodeOptions(quality: 100, subsampling: .s444))
        let untouched = try ImageJob(pipeline: try Pipeline(parsing: "srgb"), options: options).run(plain)
        let plainJob = try ImageJob(pipeline: try Pipeline(parsing: "scale:48x8"), options: options).run(plain)
        #expect(untouched.full.bytes == plainJob.full.bytes)
    }

    @Test("srgb parses with no arguments and is its own canonical text")
    func parses() throws {
        #expect(try Pipeline(parsing: "SRGB | scale:10x10").steps.first == .srgb)
        #expect(try Pipeline(parsing: "srgb").canonical == "srgb")
        #expect(throws: PipelineSyntaxError.self) { try Pipeline(parsing: "srgb:1") }
    }

    @Test("a profile's transform is made once and shared; threads converting at once get the same pixels")
    func transformsAreShared() throws {
        let cache = SRGBTransforms(capacity: 2)
        let adobe = Self.adobeRGBProfile()
        let first = try cache.transform(for: adobe).get()
        #expect(try cache.transform(for: adobe).get() === first)
        var other = adobe
        other[other.count - 1] ^= 1  // a different profile (padding byte), the same colours
        _ = try cache.transform(for: other).get()
        guard case .failure = cache.transform(for: [UInt8](repeating: 1, count: 200)) else {
            Issue.record("a profile of ones was read")
            return
        }
        #expect(cache.count == 2, "the least recently used is dropped past the capacity")

        let image = Self.strip()
        let alone = try image.convertedToSRGB(from: adobe).image
        let results = Mutex<[Image]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            if let converted = try? image.convertedToSRGB(from: adobe).image { results.withLock { $0.append(converted) } }
        }
        let all = results.withLock { $0 }
        #expect(all.count == 8 && all.allSatisfy { $0 == alone })
    }

    /// The matrix from linear RGB in the primaries `xy` (red x, y, green x,
    /// y, blue x, y, white x, y) to XYZ, the white at Y 1.
    static func toXYZ(_ xy: [Double]) -> [[Double]] {
        func column(_ x: Double, _ y: Double) -> [Double] { [x / y, 1, (1 - x - y) / y] }
        let c = [column(xy[0], xy[1]), column(xy[2], xy[3]), column(xy[4], xy[5])]
        let w = column(xy[6], xy[7])
        // Scales s with c · s = w, by Cramer's rule.
        func det(_ m: [[Double]]) -> Double {
            m[0][0] * (m[1][1] * m[2][2] - m[2][1] * m[1][2]) - m[1][0] * (m[0][1] * m[2][2] - m[2][1] * m[0][2])
                + m[2][0] * (m[0][1] * m[1][2] - m[1][1] * m[0][2])
        }
        let d = det(c)
        let scale = (0..<3).map { i in det(c.enumerated().map { $0.offset == i ? w : $0.element }) / d }
        return (0..<3).map { row in (0..<3).map { col in c[col][row] * scale[col] } }
    }

    /// Display P3 colour (sRGB's curve, D65) in sRGB, worked out here: both
    /// share the white, so linear P3 goes to XYZ and back by sRGB's matrix.
    static func srgb(fromP3 rgb: (UInt8, UInt8, UInt8)) -> [Double] {
        func linear(_ v: UInt8) -> Double { let c = Double(v) / 255; return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4) }
        let p3 = toXYZ([0.680, 0.320, 0.265, 0.690, 0.150, 0.060, 0.3127, 0.3290])
        let s = toXYZ([0.640, 0.330, 0.300, 0.600, 0.150, 0.060, 0.3127, 0.3290])
        let l = [linear(rgb.0), linear(rgb.1), linear(rgb.2)]
        let xyz = (0..<3).map { row in (0..<3).reduce(0.0) { $0 + p3[row][$1] * l[$1] } }
        // s⁻¹ · xyz by Cramer's rule again.
        func det(_ m: [[Double]]) -> Double {
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        }
        let d = det(s)
        return (0..<3).map { i in
            // Column i of s replaced by xyz.
            let replaced = s.enumerated().map { r, row in row.enumerated().map { c, value in c == i ? xyz[r] : value } }
            let v = min(1, max(0, det(replaced) / d))
            return (v <= 0.0031308 ? 12.92 * v : 1.055 * pow(v, 1 / 2.4) - 0.055) * 255
        }
    }

    @Test("an AVIF whose nclx box says Display P3 is converted from P3 by srgb, and keeps a P3 profile without it")
    func nclxDisplayP3() throws {
        // Blocks of 16 so that 4:2:0 chroma stays flat at each centre.
        let colours: [(UInt8, UInt8, UInt8)] = [(200, 100, 50), (50, 180, 90), (128, 128, 128), (30, 60, 200)]
        let width = colours.count * 16
        var rgb: [UInt8] = []
        for _ in 0..<16 { for colour in colours { for _ in 0..<16 { rgb += [colour.0, colour.1, colour.2] } } }
        let p3 = HEIFFixtures.heif(width: width, height: 16, pixels: rgb, codec: .av1, lossless: true, nclx: (primaries: 12, transfer: 13))
        let header = try Source.readHeader(p3)
        let profile = try #require(header.rgbProfile, "a P3 profile stands for the nclx box")

        let converted = try ImageJob(pipeline: try Pipeline(parsing: "srgb"), options: JobOptions(thumbnail: nil, format: .png)).run(p3)
        #expect(try PNG.readHeader(converted.full.bytes).iccProfile == nil)
        let pixels = try PNG.decode(converted.full.bytes)
        var moved = 0
        for (index, colour) in colours.enumerated() {
            let got = pixels.pixel(x: index * 16 + 8, y: 8)
            let want = Self.srgb(fromP3: colour)
            for (channel, value) in [got.r, got.g, got.b].enumerated() {
                #expect(abs(Double(value) - want[channel]) <= 4, "\(colour) → \(got), expected \(want)")
            }
            moved += [got.r, got.g, got.b] == [colour.0, colour.1, colour.2] ? 0 : 1
        }
        #expect(moved >= 3, "P3 colours other than gray change in sRGB")

        // Without the step the outputs carry that profile, as they would an
        // embedded one, and the pixels stay as coded.
        let kept = try ImageJob(pipeline: try Pipeline(parsing: "scale:32x8"), options: JobOptions(thumbnail: nil, format: .png)).run(p3)
        #expect(try PNG.readHeader(kept.full.bytes).iccProfile == profile)
        #expect(try JPEG.readHeader(try ImageJob(pipeline: try Pipeline(parsing: "scale:32x8"), options: JobOptions(thumbnail: nil)).run(p3)
            .full.bytes).iccProfile == profile)

        // sRGB's own primaries, and HDR transfers, stand for no profile.
        for nclx in [(primaries: 1, transfer: 13), (primaries: 1, transfer: 1), (primaries: 12, transfer: 16), (primaries: 9, transfer: 18)] {
            let file = HEIFFixtures.heif(width: width, height: 16, pixels: rgb, codec: .av1, quality: 80, nclx: nclx)
            #expect(try Source.readHeader(file).rgbProfile == nil, "\(nclx)")
        }
        // BT.2020 primaries with sRGB's curve do, and so does a gamma curve
        // with unspecified primaries (taken for BT.709's).
        let wide = HEIFFixtures.heif(width: width, height: 16, pixels: rgb, codec: .av1, quality: 80, nclx: (primaries: 9, transfer: 13))
        #expect(try Source.readHeader(wide).rgbProfile != nil)
        let gamma = HEIFFixtures.heif(width: width, height: 16, pixels: rgb, codec: .av1, quality: 80, nclx: (primaries: 2, transfer: 4))
        #expect(try Source.readHeader(gamma).rgbProfile != nil)

        // The same box is always the same bytes: the profile's creation
        // date is fixed (2000-01-01), not the time it was made.
        #expect(try Source.readHeader(p3).rgbProfile == profile)
        #expect(Array(profile[24 ..< 36]) == [0x07, 0xD0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0])
    }

    @Test("an AVIF whose nclx box says linear light with BT.709 primaries: srgb brings mid-gray to sRGB's 188")
    func nclxLinear() throws {
        let gray = [UInt8](repeating: 128, count: 32 * 16 * 3)
        let linear = HEIFFixtures.heif(width: 32, height: 16, pixels: gray, codec: .av1, lossless: true, nclx: (primaries: 1, transfer: 8))
        #expect(try Source.readHeader(linear).rgbProfile != nil)
        let output = try ImageJob(pipeline: try Pipeline(parsing: "srgb"), options: JobOptions(thumbnail: nil, format: .png)).run(linear)
        let p = try PNG.decode(output.full.bytes).pixel(x: 16, y: 8)
        // 128/255 of linear light is 0.735 of sRGB's curve: 187.5.
        #expect([p.r, p.g, p.b].allSatisfy { abs(Int($0) - 188) <= 3 }, "\(p)")
    }
}
