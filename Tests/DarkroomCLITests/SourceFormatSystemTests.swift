import DarkroomFixtures
import DarkroomImage
import Foundation
import Testing

/// PNG, WebP, GIF and HEIF sources through real processes: `process` and `submit`
/// take them from a directory beside JPEGs, the broker queues them, a
/// worker decodes them (transparency onto white), and the storage node
/// keeps the results; a file of no source format is named, not sent.
@Suite("PNG, WebP, GIF and HEIF sources end to end", .serialized)
struct SourceFormatSystemTests {
    /// A picture's pixels as RGB (or RGBA, `alpha` giving each pixel's) rows.
    static func rgb(_ picture: Image, alpha: ((Int, Int) -> UInt8)? = nil) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(picture.width * picture.height * (alpha == nil ? 3 : 4))
        for y in 0..<picture.height {
            for x in 0..<picture.width {
                let p = picture.pixel(x: x, y: y)
                bytes += [p.r, p.g, p.b]
                if let alpha { bytes.append(alpha(x, y)) }
            }
        }
        return bytes
    }

    /// A folder of one source in each format (the GIF animated, with a
    /// transparent corner; the HEIC with a transparent left quarter; the
    /// TIFF turned by its Orientation tag), and a BMP named .png (which a
    /// directory yields, and which fails).
    static func folder(in h: SystemHarness) throws -> URL {
        let folder = h.dir.url.appendingPathComponent("mixed")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let picture = SamplePhoto.render(Size(width: 160, height: 120), seed: 7)
        try Data(try JPEG.encode(picture, options: EncodeOptions(quality: 90))).write(to: folder.appendingPathComponent("photo.jpg"))
        var samples: [UInt16] = []
        for y in 0..<120 {
            for x in 0..<160 {
                let p = picture.pixel(x: x, y: y)
                samples += [UInt16(p.r), UInt16(p.g), UInt16(p.b), x < 40 ? 0 : 255]  // the left quarter transparent
            }
        }
        try Data(PNGFixtures.png(PNGFixtures.Spec(width: 160, height: 120, colorType: .rgba, samples: samples)))
            .write(to: folder.appendingPathComponent("logo.PNG"))
        try Data(try WebP.encode(picture, quality: 90)).write(to: folder.appendingPathComponent("still.webp"))
        let palette = GIFFixtures.palette(64)
        var indices = [UInt8](repeating: 0, count: 160 * 120)
        for y in 0..<120 {
            for x in 0..<160 where x >= 20 || y >= 20 {  // the top left corner transparent
                indices[y * 160 + x] = UInt8(1 + (x / 4 + y / 3) % 63)
            }
        }
        let first = GIFFixtures.Frame(width: 160, height: 120, transparent: 0, indices: indices)
        let second = GIFFixtures.Frame(width: 160, height: 120, indices: [UInt8](repeating: 5, count: 160 * 120))
        try Data(GIFFixtures.gif(width: 160, height: 120, palette: palette, frames: [first, second]))
            .write(to: folder.appendingPathComponent("anim.gif"))
        let withAlpha = rgb(picture) { x, _ in x < 40 ? 0 : 255 }
        try Data(HEIFFixtures.heif(width: 160, height: 120, pixels: withAlpha, alpha: true, codec: .hevc, quality: 90))
            .write(to: folder.appendingPathComponent("phone.HEIC"))
        try Data(HEIFFixtures.heif(width: 160, height: 120, pixels: rgb(picture), codec: .av1, quality: 90))
            .write(to: folder.appendingPathComponent("clip.avif"))
        // Stored turned a quarter (90° counter-clockwise), with Orientation 6.
        let turned = picture.applying(.left)
        try Data(TIFFFixtures.tiff(width: turned.width, height: turned.height, pixels: rgb(turned), compression: .lzw, orientation: 6))
            .write(to: folder.appendingPathComponent("scan.tif"))
        try Data([0x42, 0x4D, 0x36, 0x00] + [UInt8](repeating: 0, count: 40)).write(to: folder.appendingPathComponent("fake.png"))
        return folder
    }

    @Test("process and submit take .png, .webp, .gif, .heic, .avif and .tif files beside .jpg: the same bytes either way, transparency white, a BMP named .png refused by name")
    func mixedFolder() throws {
        let h = try SystemHarness()
        let folder = try Self.folder(in: h)
        let flags = ["--ops", "scale:80x60", "--thumb", "20x20"]

        let local = try h.run(["process", folder.path, "-o", h.dir.path("local"), "--json"] + flags)
        #expect(local.status == 1, "\(local.stderr)")
        let lines = SystemHarness.jsonLines(local.stdout)
        let names = lines.compactMap { ($0["input"] as? String).map { ($0 as NSString).lastPathComponent } }
        #expect(names.sorted() == ["anim.gif", "clip.avif", "fake.png", "logo.PNG", "phone.HEIC", "photo.jpg", "scan.tif", "still.webp"], "\(names)")
        let fake = try #require(lines.first { ($0["input"] as? String)?.hasSuffix("fake.png") == true })
        let error = try #require(fake["error"] as? [String: Any])
        #expect(error["code"] as? String == "image.unsupported-format")
        #expect(error["reason"] as? String == "not a JPEG, PNG, WebP, GIF, HEIF or TIFF image (starts with 42 4D 36 00: looks like BMP)", "\(error)")
        let logo = [UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/logo.jpg")))
        let decoded = try JPEG.decode(logo).image
        #expect(decoded.width == 80 && decoded.height == 60)
        let corner = decoded.pixel(x: 2, y: 30)
        #expect(corner.r > 245 && corner.g > 245 && corner.b > 245, "the transparent quarter is white: \(corner)")
        // The GIF's first frame, its transparent corner white (the second
        // frame, one opaque colour, would have covered it).
        let anim = try JPEG.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/anim.jpg")))).image
        #expect(anim.width == 80 && anim.height == 60)
        let gifCorner = anim.pixel(x: 2, y: 2)
        #expect(gifCorner.r > 245 && gifCorner.g > 245 && gifCorner.b > 245, "the transparent corner is white: \(gifCorner)")
        // The HEIC's transparent quarter white, the rest the picture's.
        let phone = try JPEG.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/phone.jpg")))).image
        #expect(phone.width == 80 && phone.height == 60)
        let heicCorner = phone.pixel(x: 4, y: 30)
        #expect(heicCorner.r > 240 && heicCorner.g > 240 && heicCorner.b > 240, "the transparent quarter is white: \(heicCorner)")
        let avif = try JPEG.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/clip.jpg")))).image
        #expect(avif.width == 80 && avif.height == 60)
        // The TIFF upright: stored 120x160, shown 160x120 like the photo.
        let scan = try JPEG.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/scan.jpg")))).image
        let photo = try JPEG.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/photo.jpg")))).image
        #expect(scan.width == 80 && scan.height == 60)
        let difference = zip(scan.pixels, photo.pixels).map { abs(Int($0) - Int($1)) }.reduce(0, +) / scan.pixels.count
        #expect(difference < 4, "the TIFF, turned upright, is the photo: mean difference \(difference)")

        try h.startSystem(workers: [("w1", 2)])
        let submit = try h.run(["submit", folder.path, "--wait", "--json", "--skip-invalid"] + flags + h.clientFlags)
        #expect(submit.status == 1, "\(submit.stderr)")
        #expect(submit.stderr.contains("8 input(s): 7 stored, 0 dead, 0 refused, 0 never answered, 1 invalid"), "\(submit.stderr)")
        let results = SystemHarness.jsonLines(submit.stdout)
        let invalid = try #require(results.first { $0["status"] as? String == "invalid" })
        #expect((invalid["input"] as? String)?.hasSuffix("fake.png") == true)
        #expect((invalid["reason"] as? String)?.contains("not a JPEG, PNG, WebP, GIF, HEIF or TIFF image") == true, "\(invalid)")
        for name in ["photo.jpg", "logo.PNG", "still.webp", "anim.gif", "phone.HEIC", "clip.avif", "scan.tif"] {
            let stored = try #require(results.first { ($0["input"] as? String)?.hasSuffix(name) == true && $0["status"] as? String == "stored" },
                                      "\(name) was not stored")
            let job = try #require(stored["job"] as? String)
            let path = h.dir.path("got-\(name).jpg")
            let got = try h.run(["get", job, "-o", path] + h.storeFlags)
            #expect(got.status == 0, "\(got.stderr)")
            // A worker wrote what `process` wrote here: the same decode, steps and encode.
            let base = (name as NSString).deletingPathExtension
            let expected = try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/\(base).jpg"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == expected, "\(name)")
        }
    }

    @Test("a worker SIGKILLed while it decodes PNG, WebP, GIF, HEIF and TIFF sources loses nothing: each job is retried, stored once, byte for byte what process writes")
    func killedWorkerOnEachSourceFormat() throws {
        let h = try SystemHarness()
        let folder = h.dir.url.appendingPathComponent("sources")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // Big enough that a job takes a while in a debug build.
        for i in 0..<7 {
            let picture = SamplePhoto.render(Size(width: 800, height: 600), seed: UInt64(20 + i))
            if i == 6 {
                try Data(TIFFFixtures.tiff(width: 800, height: 600, pixels: Self.rgb(picture), compression: .deflate, tile: 256))
                    .write(to: folder.appendingPathComponent("s\(i).tiff"))
            } else if i >= 4 {
                try Data(HEIFFixtures.heif(width: 800, height: 600, pixels: Self.rgb(picture), codec: i == 4 ? .hevc : .av1, quality: 85))
                    .write(to: folder.appendingPathComponent(i == 4 ? "s\(i).heic" : "s\(i).avif"))
            } else if i % 2 == 0 {
                var samples: [UInt16] = []
                samples.reserveCapacity(800 * 600 * 3)
                for y in 0..<600 {
                    for x in 0..<800 {
                        let p = picture.pixel(x: x, y: y)
                        samples += [UInt16(p.r), UInt16(p.g), UInt16(p.b)]
                    }
                }
                try Data(PNGFixtures.png(PNGFixtures.Spec(width: 800, height: 600, colorType: .rgb, samples: samples)))
                    .write(to: folder.appendingPathComponent("s\(i).png"))
            } else if i == 1 {
                try Data(try WebP.encode(picture, quality: 90)).write(to: folder.appendingPathComponent("s\(i).webp"))
            } else {
                // The picture's colours cut to a 256-colour palette (3-3-2 bits).
                var palette: [(UInt8, UInt8, UInt8)] = []
                for index in 0..<256 {
                    let red = (index >> 5) * 255 / 7, green = (index >> 2 & 7) * 255 / 7, blue = (index & 3) * 85
                    palette.append((UInt8(red), UInt8(green), UInt8(blue)))
                }
                var indices = [UInt8](repeating: 0, count: 800 * 600)
                for y in 0..<600 {
                    for x in 0..<800 {
                        let p = picture.pixel(x: x, y: y)
                        indices[y * 800 + x] = (p.r >> 5) << 5 | (p.g >> 5) << 2 | p.b >> 6
                    }
                }
                try Data(GIFFixtures.gif(width: 800, height: 600, palette: palette, frames: [GIFFixtures.Frame(width: 800, height: 600, indices: indices)]))
                    .write(to: folder.appendingPathComponent("s\(i).gif"))
            }
        }
        let flags = ["--ops", "blur:3 | scale:200x200,mode=fill | crop:square", "--thumb", "32x32"]
        let local = try h.run(["process", folder.path, "-o", h.dir.path("local")] + flags)
        #expect(local.status == 0, "\(local.stderr)")

        let (jobs, sourceOf) = try h.jobsThroughAKilledWorker(folder, flags, count: 7)
        // What the rescuer stored is what the same job gives here.
        for job in jobs {
            let source = try #require(sourceOf[job], "no accepted event for \(job)")
            let path = h.dir.path("got-\(job).jpg")
            let got = try h.run(["get", job, "-o", path] + h.storeFlags)
            #expect(got.status == 0, "\(got.stderr)")
            let base = ((source as NSString).lastPathComponent as NSString).deletingPathExtension
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == (try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/\(base).jpg"))),
                    "\(source)")
        }
    }
}
