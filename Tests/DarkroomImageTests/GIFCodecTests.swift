import DarkroomFixtures
import Testing

@testable import DarkroomImage

/// The GIF decoder: the first picture on the logical screen through its
/// palette, transparency and uncovered parts showing the background,
/// interlacing, animated files, the limits, damaged files, cancellation and
/// a seeded mutation fuzz. Fixtures come from GIFFixtures (giflib's encoder).
@Suite("GIF codec")
struct GIFCodecTests {
    typealias Frame = GIFFixtures.Frame

    /// Indices that make every row and column differ: a picture whose rows
    /// land in the wrong place (interlacing) or are shifted shows it.
    static func indices(width: Int, height: Int, colors: Int, seed: Int = 0) -> [UInt8] {
        (0..<width * height).map { UInt8((($0 % width) * 7 + ($0 / width) * 3 + seed) % colors) }
    }

    /// What the decoder must draw: `frame` through `palette` at its place on
    /// a `width` × `height` screen of `background`.
    static func expected(width: Int, height: Int, palette: [(UInt8, UInt8, UInt8)], frame: Frame,
                         background: (UInt8, UInt8, UInt8) = (255, 255, 255)) -> Image {
        var pixels = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                var color = background
                let fx = x - frame.left, fy = y - frame.top
                if fx >= 0, fy >= 0, fx < frame.width, fy < frame.height {
                    let index = Int(frame.indices[fy * frame.width + fx])
                    if index != frame.transparent && index < palette.count { color = palette[index] }
                }
                let at = (y * width + x) * 4
                (pixels[at], pixels[at + 1], pixels[at + 2]) = color
            }
        }
        return Image(width: width, height: height, pixels: pixels)
    }

    static let palette = GIFFixtures.palette(16)
    static let plain = Frame(width: 40, height: 30, indices: indices(width: 40, height: 30, colors: 16))

    @Test("a still picture decodes to its palette's colours, pixel for pixel, and its header says its size")
    func stillPicture() throws {
        let bytes = GIFFixtures.gif(width: 40, height: 30, palette: Self.palette, frames: [Self.plain])
        #expect(SourceFormat(signatureOf: bytes) == .gif)
        let header = try GIF.readHeader(bytes)
        #expect(header == GIFHeader(size: Size(width: 40, height: 30), hasAlpha: false, isInterlaced: false))
        #expect(try GIF.decode(bytes) == Self.expected(width: 40, height: 30, palette: Self.palette, frame: Self.plain))
        // Through the source layer, as a job reads it.
        let source = try Source.readHeader(bytes)
        #expect(source.format == .gif && source.uprightSize == Size(width: 40, height: 30) && !source.hasAlpha && source.orientation == .up)
        #expect(try Source.decode(bytes, header: source) == Self.expected(width: 40, height: 30, palette: Self.palette, frame: Self.plain))
    }

    @Test("interlaced rows land in their places")
    func interlaced() throws {
        var frame = Self.plain
        frame.interlaced = true
        let bytes = GIFFixtures.gif(width: 40, height: 30, palette: Self.palette, frames: [frame])
        #expect(try GIF.readHeader(bytes).isInterlaced)
        #expect(try GIF.decode(bytes) == Self.expected(width: 40, height: 30, palette: Self.palette, frame: Self.plain))
    }

    @Test("the transparent colour, and the screen the picture leaves uncovered, show the background")
    func transparencyAndOffset() throws {
        let small = Frame(left: 5, top: 4, width: 20, height: 10, transparent: 3, indices: Self.indices(width: 20, height: 10, colors: 16, seed: 1))
        let bytes = GIFFixtures.gif(width: 32, height: 24, palette: Self.palette, frames: [small])
        #expect(try GIF.readHeader(bytes).hasAlpha)
        let white = try GIF.decode(bytes)
        #expect(white == Self.expected(width: 32, height: 24, palette: Self.palette, frame: small))
        #expect(white.pixel(x: 0, y: 0) == (255, 255, 255))
        let black = try GIF.decode(bytes, background: (0, 0, 0))
        #expect(black == Self.expected(width: 32, height: 24, palette: Self.palette, frame: small, background: (0, 0, 0)))
        // Some pixels are index 3, so transparent.
        #expect(small.indices.contains(3))
        // A picture reaching past the screen is cut at its edge.
        let over = Frame(left: 20, top: 20, width: 20, height: 10, indices: Self.indices(width: 20, height: 10, colors: 16, seed: 2))
        let cut = GIFFixtures.gif(width: 32, height: 24, palette: Self.palette, frames: [over])
        #expect(try GIF.decode(cut) == Self.expected(width: 32, height: 24, palette: Self.palette, frame: over))
    }

    @Test("an animated GIF gives its first frame")
    func animatedGivesTheFirstFrame() throws {
        let second = Frame(width: 40, height: 30, indices: [UInt8](repeating: 9, count: 1200))
        let bytes = GIFFixtures.gif(width: 40, height: 30, palette: Self.palette, frames: [Self.plain, second, second])
        #expect(try GIF.decode(bytes) == Self.expected(width: 40, height: 30, palette: Self.palette, frame: Self.plain))
    }

    @Test("limits are checked from the header; damaged and foreign files get a clear error")
    func limitsAndDamage() throws {
        let bytes = GIFFixtures.gif(width: 40, height: 30, palette: Self.palette, frames: [Self.plain])
        #expect(throws: ImageError.self) { _ = try GIF.readHeader(bytes, limits: DecodeLimits(maxPixels: 1_000)) }
        do {
            _ = try GIF.decode(bytes, limits: DecodeLimits(maxSide: 32))
            Issue.record("a 40-pixel side passed a 32-pixel limit")
        } catch {
            #expect(error.code == .limitExceeded, "\(error)")
        }
        // Cut inside the picture's data, then inside the header.
        for cut in [bytes.count - 20, 30, 8, 4] {
            do {
                _ = try GIF.decode(Array(bytes.prefix(cut)))
                Issue.record("a file cut to \(cut) bytes decoded")
            } catch {
                #expect(error.code == .truncated, "cut to \(cut): \(error)")
            }
        }
        // A screen with no picture.
        let empty = GIFFixtures.gif(width: 10, height: 10, palette: Self.palette, frames: [])
        do {
            _ = try GIF.decode(empty)
            Issue.record("a GIF without a picture decoded")
        } catch {
            #expect(error.code == .corrupt && error.message.contains("first picture"), "\(error)")
        }
        do {
            _ = try GIF.readHeader([0x49, 0x49, 0x2A, 0x00, 1, 2, 3, 4])
            Issue.record("a TIFF header read as a GIF")
        } catch {
            #expect(error.code == .corrupt && error.message.contains("not a GIF"), "\(error)")
        }
        // A source that starts like a GIF is handed to the GIF reader.
        #expect(Source.format(of: Array("GIF8".utf8)) == .gif)
        #expect(Source.unsupportedMessage([0x42, 0x4D, 0x36, 0x00]).contains("JPEG, PNG, WebP, GIF, HEIF or TIFF"))
    }

    @Test("the flag is looked at every 16 rows, and a flag set halfway stops the decode")
    func cancellation() throws {
        let bytes = GIFFixtures.gif(width: 40, height: 30, palette: Self.palette, frames: [Self.plain])
        let cancelled = CancellationFlag()
        cancelled.cancel()
        #expect(throws: ImageError.cancelled) { _ = try GIF.decode(bytes, cancellation: cancelled) }
        let counting = CancellationFlag()
        #expect(try GIF.decode(bytes, cancellation: counting) == (try GIF.decode(bytes)))
        #expect(counting.pollCount == 2)  // rows 0 and 16 of 30
        let flag = CancellationFlag(cancellingAtPoll: 2)
        #expect(throws: ImageError.cancelled) { _ = try GIF.decode(bytes, cancellation: flag) }
    }

    @Test("seeded mutations of a valid file decode to the header's size or throw, never crash")
    func mutationFuzz() throws {
        var frame = Self.plain
        frame.transparent = 2
        let original = GIFFixtures.gif(width: 40, height: 30, palette: Self.palette, frames: [frame, Self.plain])
        let limits = DecodeLimits(maxPixels: 1 << 20, maxSide: 4096)
        let allowed: Set<ImageError.Code> = [.corrupt, .truncated, .limitExceeded, .invalidDimensions, .empty]
        // Half the edits land in the first 60 bytes: the screen, the
        // colour table, the control block and the descriptor.
        let tally = MutationFuzz.run(original, iterations: 600, seed: 0x61F_5EED, headerBytes: 60, allowed: allowed,
                                     header: { bytes throws(ImageError) in try GIF.readHeader(bytes, limits: limits).size },
                                     decode: { bytes throws(ImageError) in try GIF.decode(bytes, limits: limits) })
        #expect(tally.decoded > 20 && tally.refused > 50, "\(tally)")
    }
}
