import DarkroomFixtures
import DarkroomImage
import Foundation
import Testing

/// `--format png` and `--format avif` through real processes: a worker writes the files,
/// the storage node checks and keeps them, and `ls`, `get` and
/// `contact-sheet` show and read them.
@Suite("PNG and AVIF outputs end to end", .serialized)
struct OutputFormatSystemTests {
    @Test("submit --format png stores lossless PNGs with the source's profile, byte for byte as process writes them; a gray result is a gray PNG; ls, get and contact-sheet read them")
    func pngEndToEnd() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        let profile = PNGFixtures.iccProfile()
        let folder = try h.taggedPhotoFolder(profile: profile)
        let flags = ["--ops", "scale:96x72", "--thumb", "30x30"]

        let job = try h.submitStored(folder, flags + ["--format", "png"])
        let (full, fullNote) = try h.getImage(job, thumb: false, to: "full.png")
        let (thumb, _) = try h.getImage(job, thumb: true, to: "thumb.png")
        #expect(PNG.isPNG(full) && PNG.isPNG(thumb))
        #expect(try PNG.readHeader(full).storedSize == Size(width: 96, height: 72))
        #expect(try PNG.readHeader(thumb).storedSize == Size(width: 30, height: 30))
        #expect(try PNG.readHeader(full).iccProfile == profile && PNG.readHeader(thumb).iccProfile == profile)
        #expect(fullNote.contains("wrote \(h.dir.path("full.png")): png 96x72"), "\(fullNote)")
        #expect(!fullNote.contains("note:"))
        // The same job run here writes the same bytes, and the same pixels
        // as its JPEG would have before JPEG's losses: the scaled source.
        let local = try h.run(["process", folder.path, "-o", h.dir.path("local"), "--format", "png"] + flags)
        #expect(local.status == 0, "\(local.stderr)")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/photo.png"))) == full)
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/photo.thumb.png"))) == thumb)

        // A gray result is a gray PNG (colour type 0), untagged.
        let grayJob = try h.submitStored(folder, ["--ops", "scale:96x72 | grayscale", "--thumb", "30x30", "--format", "png", "--thumb-format", "jpeg"])
        let (gray, _) = try h.getImage(grayJob, thumb: false, to: "gray.png")
        #expect(gray[25] == 0, "colour type \(gray[25])")
        #expect(try PNG.readHeader(gray).iccProfile == nil)
        let decoded = try PNG.decode(gray)
        let pixels = decoded.pixels
        var equalChannels = true
        for i in stride(from: 0, to: pixels.count, by: 4) where pixels[i] != pixels[i + 1] || pixels[i] != pixels[i + 2] {
            equalChannels = false
        }
        #expect(equalChannels)
        let (grayThumb, thumbNote) = try h.getImage(grayJob, thumb: true, to: "gray-thumb.png")
        #expect(try JPEG.readHeader(grayThumb).storedSize == Size(width: 30, height: 30))
        #expect(thumbNote.contains("note: the image is a JPEG file; \(h.dir.path("gray-thumb.png")) ends in .png, not .jpg"), "\(thumbNote)")

        let formats = try h.listedFormats()
        #expect(formats.full == ["png", "png"] && formats.thumbnail == ["jpeg", "png"], "\(formats)")
        #expect(try h.run(["ls"] + h.storeFlags).stdout.contains("96x72 png "))

        // The contact sheet decodes PNG thumbnails beside JPEG ones.
        let sheet = h.dir.path("sheet.jpg")
        let made = try h.run(["contact-sheet", "-o", sheet] + h.storeFlags)
        #expect(made.status == 0 && made.stderr.contains("2 thumbnails"), "\(made.stderr)")
        // A .png name gets a PNG (it got a JPEG); another name is refused.
        let png = try h.run(["contact-sheet", "-o", h.dir.path("sheet.png")] + h.storeFlags)
        #expect(png.status == 0, "\(png.stderr)")
        let pngBytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("sheet.png"))))
        #expect(Array(pngBytes.prefix(4)) == [0x89, 0x50, 0x4E, 0x47])
        let other = try h.run(["contact-sheet", "-o", h.dir.path("sheet.gif")] + h.storeFlags)
        #expect(other.status == 64 && other.stderr.contains("written as JPEG (.jpg, .jpeg) or PNG (.png)"), "\(other.stderr)")
    }

    @Test("submit --format avif stores AVIFs with the source's profile, byte for byte as process writes them; ls and get name them")
    func avifEndToEnd() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        let profile = PNGFixtures.iccProfile()
        let folder = try h.taggedPhotoFolder(profile: profile)
        let flags = ["--ops", "scale:96x72", "--thumb", "30x30", "--quality", "60", "--thumb-quality", "40"]

        let job = try h.submitStored(folder, flags + ["--format", "avif"])
        let (full, fullNote) = try h.getImage(job, thumb: false, to: "full.avif")
        let (thumb, _) = try h.getImage(job, thumb: true, to: "thumb.avif")
        let fullHeader = try HEIF.readHeader(full), thumbHeader = try HEIF.readHeader(thumb)
        #expect(fullHeader.isAVIF && fullHeader.size == Size(width: 96, height: 72) && fullHeader.iccProfile == profile)
        #expect(thumbHeader.isAVIF && thumbHeader.size == Size(width: 30, height: 30) && thumbHeader.iccProfile == profile)
        #expect(fullNote.contains("wrote \(h.dir.path("full.avif")): avif 96x72"), "\(fullNote)")
        let local = try h.run(["process", folder.path, "-o", h.dir.path("local"), "--format", "avif"] + flags)
        #expect(local.status == 0, "\(local.stderr)")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/photo.avif"))) == full)
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/photo.thumb.avif"))) == thumb)
        let formats = try h.listedFormats()
        #expect(formats.full == ["avif"] && formats.thumbnail == ["avif"], "\(formats)")
        let sheet = try h.run(["contact-sheet", "-o", h.dir.path("sheet.jpg")] + h.storeFlags)
        #expect(sheet.status == 0 && sheet.stderr.contains("1 thumbnail"), "\(sheet.stderr)")
    }

    @Test("a transparent PNG submitted for PNG and WebP outputs is stored with its alpha, byte for byte as process writes it; its JPEG is laid over white")
    func transparencyEndToEnd() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        let folder = h.dir.url.appendingPathComponent("logos")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // A photo whose left third is clear and whose middle third fades in.
        let picture = SamplePhoto.render(Size(width: 150, height: 100), seed: 6)
        var samples: [UInt16] = []
        for y in 0..<100 {
            for x in 0..<150 {
                let p = picture.pixel(x: x, y: y)
                samples += [UInt16(p.r), UInt16(p.g), UInt16(p.b), UInt16(min(255, max(0, (x - 50) * 255 / 50)))]
            }
        }
        try Data(PNGFixtures.png(PNGFixtures.Spec(width: 150, height: 100, colorType: .rgba, samples: samples)))
            .write(to: folder.appendingPathComponent("logo.png"))
        let flags = ["--ops", "scale:90x60 | sharpen:1", "--thumb", "24x24"]

        let job = try h.submitStored(folder, flags + ["--format", "png", "--thumb-format", "webp"])
        let (full, _) = try h.getImage(job, thumb: false, to: "full.png")
        let (thumb, _) = try h.getImage(job, thumb: true, to: "thumb.webp")
        #expect(full[25] == 6, "an RGBA PNG, colour type \(full[25])")
        #expect(try WebP.readHeader(thumb).hasAlpha)
        let header = try Source.readHeader(full)
        let stored = try Source.decode(full, header: header, options: DecodeOptions(keepAlpha: true))
        func alpha(_ x: Int) -> UInt8 { stored.pixels[(30 * 90 + x) * 4 + 3] }
        #expect(alpha(5) == 0 && alpha(85) == 255 && (100...160).contains(alpha(45)), "\(alpha(5)) \(alpha(45)) \(alpha(85))")
        let local = try h.run(["process", folder.path, "-o", h.dir.path("local"), "--format", "png", "--thumb-format", "webp"] + flags)
        #expect(local.status == 0, "\(local.stderr)")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/logo.png"))) == full)
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/logo.thumb.webp"))) == thumb)

        // The same source for a JPEG: the clear third is white.
        let jpegJob = try h.submitStored(folder, flags + ["--format", "jpeg", "--thumb-format", "png"])
        let (jpeg, _) = try h.getImage(jpegJob, thumb: false, to: "full.jpg")
        let laid = try JPEG.decode(jpeg).image.pixel(x: 5, y: 30)
        #expect(laid.r >= 250 && laid.g >= 250 && laid.b >= 250, "\(laid)")
        let (pngThumb, _) = try h.getImage(jpegJob, thumb: true, to: "thumb.png")
        #expect(pngThumb[25] == 6)
        let sheet = try h.run(["contact-sheet", "-o", h.dir.path("sheet.jpg")] + h.storeFlags)
        #expect(sheet.status == 0 && sheet.stderr.contains("2 thumbnails"), "\(sheet.stderr)")
    }

    @Test("a worker SIGKILLed while it works on transparent PNG, WebP, GIF, TIFF and HEIF sources and a transparent pad loses nothing: each job is retried, stored once with its alpha, byte for byte what process writes")
    func killedWorkerOnTransparentJobs() throws {
        let h = try SystemHarness()
        let folder = h.dir.url.appendingPathComponent("clear")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // Small, so that the fixtures and jobs cost the parallel suite
        // little; the victim is killed once a job has started whatever its
        // length. The left quarter clear, a ramp after it.
        let width = 240, height = 180
        func alpha(_ x: Int) -> UInt8 { x < 60 ? 0 : UInt8(min(255, (x - 60) * 2)) }
        for i in 0..<6 {
            let picture = SamplePhoto.render(Size(width: width, height: height), seed: UInt64(40 + i))
            var rgba: [UInt8] = []
            rgba.reserveCapacity(width * height * 4)
            for y in 0..<height {
                for x in 0..<width {
                    let p = picture.pixel(x: x, y: y)
                    rgba += [p.r, p.g, p.b, alpha(x)]
                }
            }
            let bytes: [UInt8]
            switch i {
            case 0: bytes = PNGFixtures.png(PNGFixtures.Spec(width: width, height: height, colorType: .rgba, samples: rgba.map { UInt16($0) }))
            case 1: bytes = try WebP.encode(AlphaImage(rgba: Image(width: width, height: height, pixels: rgba)), quality: 90)
            case 2:
                let indices = (0..<width * height).map { k in k % width < 60 ? UInt8(0) : UInt8(1 + (k % width / 8 + k / width / 8) % 63) }
                bytes = GIFFixtures.gif(width: width, height: height, palette: GIFFixtures.palette(64),
                                        frames: [GIFFixtures.Frame(width: width, height: height, transparent: 0, indices: indices)])
            case 3: bytes = TIFFFixtures.tiff(width: width, height: height, pixels: rgba, samples: 4, compression: .deflate)
            case 4: bytes = HEIFFixtures.heif(width: width, height: height, pixels: rgba, alpha: true, codec: .av1, quality: 85)
            default: bytes = try JPEG.encode(picture, options: EncodeOptions(quality: 90))
            }
            try Data(bytes).write(to: folder.appendingPathComponent("s\(i).\(["png", "webp", "gif", "tiff", "avif", "jpg"][i])"))
        }
        let flags = ["--ops", "blur:1 | scale:120x120 | pad:140x140,background=transparent", "--thumb", "32x32", "--format", "png",
                     "--thumb-format", "webp"]
        let local = try h.run(["process", folder.path, "-o", h.dir.path("local")] + flags)
        #expect(local.status == 0, "\(local.stderr)")

        let (jobs, sourceOf) = try h.jobsThroughAKilledWorker(folder, flags, count: 6)
        for job in jobs {
            let source = try #require(sourceOf[job], "no accepted event for \(job)")
            let base = ((source as NSString).lastPathComponent as NSString).deletingPathExtension
            let (full, _) = try h.getImage(job, thumb: false, to: "got-\(job).png")
            let (thumb, _) = try h.getImage(job, thumb: true, to: "got-\(job).webp")
            #expect(full == [UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/\(base).png"))), "\(source)")
            #expect(thumb == [UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/\(base).thumb.webp"))), "\(source)")
            #expect(full[25] == 6, "\(source): an RGBA PNG")
        }
    }
}
