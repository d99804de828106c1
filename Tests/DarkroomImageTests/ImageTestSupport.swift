import Foundation
@testable import DarkroomImage

/// Builders and measures shared by the operation tests.
enum TestImages {
    /// A smooth image: slow sinusoids per channel plus a finer wave (periods of 9
    /// and 11 pixels) that is still below the Nyquist rate of a 2x downscale
    /// (period 4), so a good kernel can keep it and a poor one visibly loses it.
    static func smooth(width: Int, height: Int) -> Image {
        var px = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let fx = Double(x) / Double(width), fy = Double(y) / Double(height)
                let fine = 30 * sin(2 * .pi * (Double(x) / 9 + Double(y) / 11))
                let r = 128 + 80 * sin(2 * .pi * (1.5 * fx + 0.5 * fy)) + fine
                let g = 128 + 80 * cos(2 * .pi * (2 * fy - 0.7 * fx)) - fine
                let b = 128 + 80 * sin(2 * .pi * (fx * fy * 2 + 0.25)) + fine / 2
                let i = (y * width + x) * 4
                px[i] = UInt8(r.rounded()); px[i + 1] = UInt8(g.rounded()); px[i + 2] = UInt8(b.rounded())
            }
        }
        return Image(width: width, height: height, pixels: px)
    }

    /// Every pixel distinct and position-dependent: R = x, G = y, B = x ^ y (mod 256).
    static func coordinates(width: Int, height: Int) -> Image {
        var px = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 4
                px[i] = UInt8(x & 255); px[i + 1] = UInt8(y & 255); px[i + 2] = UInt8((x ^ y) & 255)
            }
        }
        return Image(width: width, height: height, pixels: px)
    }

    /// Seeded noise (a simple LCG), for exercising every byte value.
    static func noise(width: Int, height: Int, seed: UInt64 = 1) -> Image {
        var state = seed
        var px = [UInt8](repeating: 255, count: width * height * 4)
        for i in 0..<px.count where i % 4 != 3 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            px[i] = UInt8(truncatingIfNeeded: state >> 56)
        }
        return Image(width: width, height: height, pixels: px)
    }

    /// Peak signal-to-noise ratio over R, G and B, in dB.
    static func psnr(_ a: Image, _ b: Image) -> Double {
        precondition(a.width == b.width && a.height == b.height)
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

    /// Whether every padding byte is 255.
    static func paddingIsOpaque(_ image: Image) -> Bool {
        Swift.stride(from: 3, to: image.pixels.count, by: 4).allSatisfy { image.pixels[$0] == 255 }
    }
}

/// The error `body` throws, or nil when it returns: for checking a codec's
/// refusals in one expression.
func error(_ body: () throws(ImageError) -> Void) -> ImageError? {
    do {
        try body()
        return nil
    } catch {
        return error
    }
}
