import DarkroomFixtures
import Testing

@testable import DarkroomImage

/// The codecs' seeded mutation fuzz: `iterations` copies of a valid file,
/// each with `FuzzEdits` applied (half of them within `headerBytes`), read
/// for their header and decoded. A decode must give the header's size with
/// opaque padding (unless `keepsAlpha`, where it is the alpha), and every refusal must be one of `allowed`: never a
/// crash, never another kind of failure.
enum MutationFuzz {
    struct Tally {
        var decoded = 0
        var refused = 0
        var headersRead = 0
    }

    static func run(
        _ original: [UInt8], iterations: Int, seed: UInt64, headerBytes: Int, allowed: Set<ImageError.Code>,
        repair: (Int, [UInt8]) -> [UInt8] = { $1 }, keepsAlpha: Bool = false,
        header: ([UInt8]) throws(ImageError) -> Size, decode: ([UInt8]) throws(ImageError) -> Image
    ) -> Tally {
        var random = PNGFixtures.SplitMix64(state: seed)
        var tally = Tally()
        for iteration in 0..<iterations {
            var bytes = original
            FuzzEdits.apply(to: &bytes, headerBytes: headerBytes, random: &random)
            bytes = repair(iteration, bytes)
            var size: Size? = nil
            do throws(ImageError) {
                size = try header(bytes)
                tally.headersRead += 1
            } catch {
                #expect(allowed.contains(error.code), "iteration \(iteration): \(error)")
            }
            do throws(ImageError) {
                let image = try decode(bytes)
                tally.decoded += 1
                // A file whose header is refused is refused whole.
                #expect(size != nil, "iteration \(iteration): decoded without a header")
                #expect(Size(width: image.width, height: image.height) == size, "iteration \(iteration)")
                #expect(keepsAlpha || TestImages.paddingIsOpaque(image))
            } catch {
                tally.refused += 1
                #expect(allowed.contains(error.code), "iteration \(iteration): \(error)")
            }
        }
        return tally
    }
}
