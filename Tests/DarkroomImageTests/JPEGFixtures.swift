import Foundation
@testable import DarkroomImage

/// JPEG fixtures built in code: synthetic pictures, EXIF splicing and damaged files.
enum JPEGFixtures {
    /// A picture that looks different under every rotation and mirror: smooth
    /// gradients plus a red block at the top-left corner and a blue block at the
    /// bottom-right, of different sizes.
    static func pattern(width: Int, height: Int) -> Image {
        var image = Image(width: width, height: height)
        for y in 0..<height {
            for x in 0..<width {
                var rgb = (r: UInt8(x * 200 / width + 20), g: UInt8(y * 200 / height + 20), b: UInt8(128))
                if x < width / 4 && y < height / 3 { rgb = (230, 20, 20) }
                if x >= width * 3 / 4 && y >= height / 2 { rgb = (20, 20, 230) }
                image.setPixel(x: x, y: y, rgb)
            }
        }
        return image
    }

    /// Deterministic noise (a 64-bit LCG), for data that compresses badly.
    static func noise(count: Int, seed: UInt64 = 7) -> [UInt8] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }

    static func noiseImage(width: Int, height: Int) -> Image {
        var pixels = noise(count: width * height * 4)
        for i in stride(from: 3, to: pixels.count, by: 4) { pixels[i] = 255 }
        return Image(width: width, height: height, pixels: pixels)
    }

    static func jpeg(_ image: Image, quality: Int = 95, subsampling: ChromaSubsampling = .s444) -> [UInt8] {
        // Fixture construction: a failure here is a test failure, reported by the caller's #require.
        (try? JPEG.encode(image, options: EncodeOptions(quality: quality, subsampling: subsampling))) ?? []
    }

    /// An APP1 Exif segment holding only IFD0 with one Orientation entry.
    static func exifSegment(orientation: Int, bigEndian: Bool) -> [UInt8] {
        func u16(_ v: Int) -> [UInt8] {
            bigEndian ? [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] : [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)]
        }
        func u32(_ v: Int) -> [UInt8] {
            bigEndian ? u16(v >> 16) + u16(v & 0xFFFF) : u16(v & 0xFFFF) + u16(v >> 16)
        }
        var tiff: [UInt8] = bigEndian ? [0x4D, 0x4D] : [0x49, 0x49]
        tiff += u16(42) + u32(8)            // magic, IFD0 at offset 8
        tiff += u16(1)                      // one entry
        tiff += u16(0x0112) + u16(3) + u32(1) + u16(orientation) + u16(0)  // SHORT, count 1, value
        tiff += u32(0)                      // no next IFD
        let body: [UInt8] = Array("Exif".utf8) + [0, 0] + tiff
        let length = body.count + 2
        return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + body
    }

    /// `jpeg` with `segment` inserted right after SOI.
    static func splice(_ segment: [UInt8], into jpeg: [UInt8]) -> [UInt8] {
        Array(jpeg[0..<2]) + segment + Array(jpeg[2...])
    }

    /// Offset of the first occurrence of marker FF `marker`.
    static func markerOffset(_ marker: UInt8, in data: [UInt8]) -> Int? {
        var i = 2
        while i + 1 < data.count {
            if data[i] == 0xFF && data[i + 1] == marker { return i }
            i += 1
        }
        return nil
    }

    /// Rewrites the SOF0 width and height.
    static func patchSize(_ data: [UInt8], width: Int, height: Int) -> [UInt8] {
        guard let sof = markerOffset(0xC0, in: data) else { return data }
        var d = data
        d[sof + 5] = UInt8(height >> 8 & 0xFF)
        d[sof + 6] = UInt8(height & 0xFF)
        d[sof + 7] = UInt8(width >> 8 & 0xFF)
        d[sof + 8] = UInt8(width & 0xFF)
        return d
    }

    /// Overwrites 40 bytes in the middle of the entropy-coded data with stuffed
    /// 0xFF bytes: 160 one-bits in a row are never a valid Huffman code.
    static func corruptScan(_ data: [UInt8]) -> [UInt8] {
        guard let sos = markerOffset(0xDA, in: data) else { return data }
        let headerLength = Int(data[sos + 2]) << 8 | Int(data[sos + 3])
        let start = sos + 2 + headerLength
        let middle = start + (data.count - 2 - start) / 2
        var d = data
        for i in 0..<20 {
            d[middle + 2 * i] = 0xFF
            d[middle + 2 * i + 1] = 0x00
        }
        return d
    }

    /// Peak signal-to-noise ratio over R, G and B, in dB.
    static func psnr(_ a: Image, _ b: Image) -> Double {
        var sum = 0.0
        var n = 0
        for i in 0..<a.pixels.count where i % 4 != 3 {
            let d = Double(a.pixels[i]) - Double(b.pixels[i])
            sum += d * d
            n += 1
        }
        let mse = sum / Double(n)
        return mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
    }

    /// Mean absolute difference per channel, and the largest difference.
    static func difference(_ a: Image, _ b: Image) -> (mean: Double, max: Int) {
        var sum = 0
        var largest = 0
        for i in 0..<a.pixels.count where i % 4 != 3 {
            let d = abs(Int(a.pixels[i]) - Int(b.pixels[i]))
            sum += d
            largest = max(largest, d)
        }
        return (Double(sum) / Double(a.pixels.count / 4 * 3), largest)
    }

    /// The pixels of `rect` of `image`.
    static func crop(_ image: Image, _ rect: Rect) -> Image {
        var out = [UInt8]()
        out.reserveCapacity(rect.width * rect.height * 4)
        for y in rect.y..<rect.y + rect.height {
            let start = (y * image.width + rect.x) * 4
            out += image.pixels[start..<start + rect.width * 4]
        }
        return Image(width: rect.width, height: rect.height, pixels: out)
    }
}
