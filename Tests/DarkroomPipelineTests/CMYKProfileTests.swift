import DarkroomFixtures
import Foundation
import Testing

@testable import DarkroomImage
@testable import DarkroomPipeline

/// A CMYK JPEG with its own CMYK profile is decoded through that profile to
/// sRGB, checked against the colour science done here by hand: the
/// profile's table gives each ink its Lab colour, and Lab goes to sRGB by
/// the way `SRGBConversionTests` checks Adobe RGB.
@Suite("CMYK sources and their profiles")
struct CMYKProfileTests {
    /// The Lab colour (D50) the test profile gives each corner of the ink
    /// cube, by cyan, magenta, yellow and black in 0 (none) or 1 (full):
    /// roughly a coated press's. Every corner with full black is L* 0, so
    /// the profile's black point is zero and black point compensation
    /// changes nothing.
    static func lab(_ c: Int, _ m: Int, _ y: Int, _ k: Int) -> [Double] {
        if k == 1 { return [0, 0, 0] }
        switch (c, m, y) {
        case (0, 0, 0): return [100, 0, 0]
        case (1, 0, 0): return [55, -37, -50]
        case (0, 1, 0): return [48, 74, -3]
        case (0, 0, 1): return [89, -5, 93]
        case (1, 1, 0): return [24, 22, -46]
        case (1, 0, 1): return [50, -65, 27]
        case (0, 1, 1): return [47, 68, 48]
        default: return [20, 0, 0]
        }
    }

    /// An ICC v2 output profile for CMYK, built byte by byte: a white point
    /// and an A2B0 lut16 whose table has two points per ink (its corners
    /// are `lab`), identity curves, Lab as its connection space.
    static func cmykProfile() -> [UInt8] {
        let (be16, s15) = (ICCProfiles.be16, ICCProfiles.s15)
        var lut = Array("mft2".utf8) + [0, 0, 0, 0] + [4, 3, 2, 0]
        for row in 0..<3 { for column in 0..<3 { lut += s15(row == column ? 1 : 0) } }
        lut += be16(2) + be16(2)
        for _ in 0..<4 { lut += be16(0) + be16(65535) }
        // The table's first input (cyan) varies slowest. Lab in the v2
        // 16-bit encoding: L* 100 is 0xFF00, a* and b* 0 are 0x8000.
        for c in 0...1 { for m in 0...1 { for y in 0...1 { for k in 0...1 {
            let v = lab(c, m, y, k)
            lut += be16(Int((v[0] * 65_280 / 100).rounded())) + be16(Int(((v[1] + 128) * 256).rounded()))
                + be16(Int(((v[2] + 128) * 256).rounded()))
        } } } }
        for _ in 0..<3 { lut += be16(0) + be16(65535) }
        return ICCProfiles.assemble(deviceClass: "prtr", colorSpace: "CMYK", pcs: "Lab ",
                                    tags: [("wtpt", ICCProfiles.xyz(ICCProfiles.d50)), ("A2B0", lut)])
    }

    /// What a Lab colour (D50) is in sRGB, worked out here.
    static func expectedSRGB(lab: [Double]) -> [Double] {
        let fy = (lab[0] + 16) / 116
        let fx = fy + lab[1] / 500
        let fz = fy - lab[2] / 200
        func inverse(_ t: Double) -> Double { t > 6.0 / 29 ? t * t * t : 3 * (6.0 / 29) * (6.0 / 29) * (t - 4.0 / 29) }
        let xyz = [0.9642 * inverse(fx), 1.0 * inverse(fy), 0.8249 * inverse(fz)]
        return SRGBConversionTests.srgb(fromXYZ: xyz)
    }

    /// The inks of each patch, left to right.
    static let patches: [(Int, Int, Int, Int)] = [
        (0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (1, 1, 0, 0), (1, 0, 1, 0), (0, 1, 1, 0), (1, 1, 1, 0), (0, 0, 0, 1),
    ]
    static let side = 16

    /// A strip of flat 16×16 patches as an Adobe CMYK JPEG (inverted
    /// samples, 0 is full ink), with `profile` embedded, stored as CMYK or YCCK.
    static func strip(profile: [UInt8]?, ycck: Bool = false) throws -> [UInt8] {
        let width = side * patches.count
        var samples: [UInt8] = []
        for _ in 0..<side {
            for (c, m, y, k) in patches {
                for _ in 0..<side { samples += [c, m, y, k].map { UInt8(255 - 255 * $0) } }
            }
        }
        return try JPEG.encodeRaw(samples, width: width, height: side, components: 4, storeYCCK: ycck, quality: 100,
                                  iccProfile: profile)
    }

    @Test("each ink comes out as its profile says, within 3 of 255 (CMYK and YCCK files); without the profile, the plain formula")
    func inksThroughTheProfile() throws {
        let profile = Self.cmykProfile()
        for ycck in [false, true] {
            let decoded = try JPEG.decode(try Self.strip(profile: profile, ycck: ycck))
            #expect(decoded.header.cmykProfile == profile && decoded.header.invertedCMYK)
            for (index, inks) in Self.patches.enumerated() {
                let pixel = decoded.image.pixel(x: index * Self.side + Self.side / 2, y: Self.side / 2)
                let expected = Self.expectedSRGB(lab: Self.lab(inks.0, inks.1, inks.2, inks.3))
                let got = [Double(pixel.r), Double(pixel.g), Double(pixel.b)]
                let off = zip(got, expected).map { abs($0 - $1) }.max() ?? 0
                #expect(off <= 3, "inks \(inks) ycck \(ycck): got \(got), expected \(expected.map { $0.rounded() })")
            }
        }
        // The profile's cyan is not the formula's: (0, 255, 255) would be
        // far outside what a press prints.
        let cyan = try JPEG.decode(try Self.strip(profile: profile)).image.pixel(x: Self.side + Self.side / 2, y: Self.side / 2)
        let plainCyan = try JPEG.decode(try Self.strip(profile: nil)).image.pixel(x: Self.side + Self.side / 2, y: Self.side / 2)
        #expect(plainCyan.r <= 2 && plainCyan.g >= 253 && plainCyan.b >= 253, "\(plainCyan)")
        #expect(Int(plainCyan.g) - Int(cyan.g) > 60, "profile \(cyan), formula \(plainCyan)")
        // Every fourth byte is 255, as everywhere in the engine.
        let image = try JPEG.decode(try Self.strip(profile: profile)).image
        #expect(stride(from: 3, to: image.pixels.count, by: 4).allSatisfy { image.pixels[$0] == 255 })
    }

    @Test("a CMYK TIFF with its own profile goes through it, in strips and in tiles; without one, by libtiff's plain formula")
    func tiffThroughTheProfile() throws {
        let profile = Self.cmykProfile()
        let width = Self.side * Self.patches.count
        // TIFF's ink samples: 0 is none, 255 full.
        var samples: [UInt8] = []
        for _ in 0..<Self.side {
            for (c, m, y, k) in Self.patches {
                for _ in 0..<Self.side { samples += [c, m, y, k].map { UInt8(255 * $0) } }
            }
        }
        for tile in [0, 16] {
            let bytes = TIFFFixtures.tiff(width: width, height: Self.side, pixels: samples, samples: 4, cmyk: true, compression: .lzw,
                                          tile: tile, icc: profile)
            let header = try Source.readHeader(bytes)
            #expect(header.format == .tiff && header.rgbProfile == nil, "a CMYK profile does not describe the sRGB pixels decoded")
            #expect(try TIFF.readHeader(bytes).isPlainCMYK)
            let image = try Source.decode(bytes, header: header)
            for (index, inks) in Self.patches.enumerated() {
                let pixel = image.pixel(x: index * Self.side + Self.side / 2, y: Self.side / 2)
                let expected = Self.expectedSRGB(lab: Self.lab(inks.0, inks.1, inks.2, inks.3))
                let got = [Double(pixel.r), Double(pixel.g), Double(pixel.b)]
                let off = zip(got, expected).map { abs($0 - $1) }.max() ?? 0
                #expect(off <= 3, "tile \(tile), inks \(inks): got \(got), expected \(expected.map { $0.rounded() })")
            }
            #expect(stride(from: 3, to: image.pixels.count, by: 4).allSatisfy { image.pixels[$0] == 255 })
        }
        // No profile: libtiff's formula, under which cyan is (0, 255, 255).
        let plain = try TIFF.decode(TIFFFixtures.tiff(width: width, height: Self.side, pixels: samples, samples: 4, cmyk: true))
        let cyan = plain.pixel(x: Self.side + Self.side / 2, y: Self.side / 2)
        #expect(cyan.r <= 2 && cyan.g >= 253 && cyan.b >= 253, "\(cyan)")
    }

    @Test("a CMYK file whose profile is not a usable CMYK profile is decoded by the plain formula")
    func unusableProfiles() throws {
        let plain = try JPEG.decode(try Self.strip(profile: nil)).image
        // An RGB profile on a CMYK file, and a CMYK header over garbage.
        var broken = Self.cmykProfile()
        broken.replaceSubrange(200..<260, with: [UInt8](repeating: 0xAB, count: 60))
        for profile in [SRGBConversionTests.adobeRGBProfile(), broken] {
            let decoded = try JPEG.decode(try Self.strip(profile: profile))
            #expect(decoded.image == plain)
        }
    }

    @Test("a job on a CMYK source with a profile writes the converted colours, untagged, at every decode size")
    func jobsUseTheConversion() throws {
        let profile = Self.cmykProfile()
        let source = try Self.strip(profile: profile)
        let output = try ImageJob(pipeline: try Pipeline(parsing: "scale:72x8"), options: JobOptions(thumbnail: Size(width: 8, height: 8), quality: 100, subsampling: .s444)).run(source)
        #expect(try JPEG.readHeader(output.full.bytes).iccProfile == nil)
        let full = try JPEG.decode(output.full.bytes).image
        // Patch 2 (magenta) is now 8 pixels wide, from x 16.
        let magenta = full.pixel(x: 20, y: 4)
        let expected = Self.expectedSRGB(lab: Self.lab(0, 1, 0, 0))
        let off = zip([Double(magenta.r), Double(magenta.g), Double(magenta.b)], expected).map { abs($0 - $1) }.max() ?? 0
        #expect(off <= 8, "\(magenta) against \(expected)")
        // A decode shrunk on load (DCT scaling) converts too: magenta is at x 16 to 23 of 72.
        let shrunk = try JPEG.decode(source, options: DecodeOptions(shrink: 2)).image
        let small = shrunk.pixel(x: 20, y: 4)
        let smallOff = zip([Double(small.r), Double(small.g), Double(small.b)], expected).map { abs($0 - $1) }.max() ?? 0
        #expect(smallOff <= 8, "\(small) against \(expected)")
    }
}
