import DarkroomImage
import Foundation
import Testing

/// `--format webp` and `--thumb-format` through real processes: the broker
/// keeps the choice, a worker writes the files, the storage node checks and
/// keeps them, and `ls`, `get` and `contact-sheet` show and read them.
@Suite("WebP outputs end to end", .serialized)
struct WebPSystemTests {
    @Test("submit --format webp stores WebP files with the source's profile, byte for byte as process writes them; --thumb-format mixes; ls, get and contact-sheet read them")
    func webpEndToEnd() throws {
        let h = try SystemHarness()
        try h.startSystem(workers: [("w1", 1)])
        var profile = (0..<700).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) }
        profile.replaceSubrange(16..<20, with: Array("RGB ".utf8))
        let folder = try h.taggedPhotoFolder(profile: profile)
        let flags = ["--ops", "scale:96x72", "--thumb", "30x30", "--quality", "85", "--thumb-quality", "60"]

        let job = try h.submitStored(folder, flags + ["--format", "webp"])
        let (full, fullNote) = try h.getImage(job, thumb: false, to: "full.webp")
        let (thumb, _) = try h.getImage(job, thumb: true, to: "thumb.webp")
        #expect(WebP.isWebP(full) && WebP.isWebP(thumb))
        #expect(try WebP.readHeader(full).size == Size(width: 96, height: 72))
        #expect(try WebP.readHeader(thumb).size == Size(width: 30, height: 30))
        #expect(WebP.iccProfile(full) == profile && WebP.iccProfile(thumb) == profile)
        #expect(fullNote.contains("wrote \(h.dir.path("full.webp")): webp 96x72"), "\(fullNote)")
        #expect(!fullNote.contains("note:"))
        // The same job run here writes the same bytes: every option reached the worker.
        let local = try h.run(["process", folder.path, "-o", h.dir.path("local"), "--format", "webp"] + flags)
        #expect(local.status == 0, "\(local.stderr)")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/photo.webp"))) == full)
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: h.dir.path("local") + "/photo.thumb.webp"))) == thumb)

        // A WebP full-resolution file with a JPEG thumbnail.
        let mixed = try h.submitStored(folder, flags + ["--format", "webp", "--thumb-format", "jpeg"])
        #expect(WebP.isWebP(try h.getImage(mixed, thumb: false, to: "mixed.webp").bytes))
        let (mixedThumb, thumbNote) = try h.getImage(mixed, thumb: true, to: "mixed-thumb.webp")
        #expect(try JPEG.readHeader(mixedThumb).storedSize == Size(width: 30, height: 30))
        #expect(thumbNote.contains("note: the image is a JPEG file; \(h.dir.path("mixed-thumb.webp")) ends in .webp, not .jpg"), "\(thumbNote)")

        let formats = try h.listedFormats()
        #expect(formats.full == ["webp", "webp"] && formats.thumbnail == ["jpeg", "webp"], "\(formats)")
        let text = try h.run(["ls"] + h.storeFlags).stdout
        #expect(text.contains("96x72 webp "), "\(text)")

        // The contact sheet decodes WebP thumbnails beside JPEG ones.
        let sheet = h.dir.path("sheet.jpg")
        let made = try h.run(["contact-sheet", "-o", sheet] + h.storeFlags)
        #expect(made.status == 0 && made.stderr.contains("2 thumbnails"), "\(made.stderr)")
        // Both thumbnails carry the source's profile, one in WebP's ICCP chunk, one in JPEG's APP2.
        #expect(!made.stderr.contains("colour profiles"), "\(made.stderr)")
        #expect(try JPEG.readHeader([UInt8](try Data(contentsOf: URL(fileURLWithPath: sheet)))).iccProfile == profile)

        let wrong = try h.run(["submit", folder.path, "--ops", "grayscale", "--format", "gif"] + h.clientFlags)
        #expect(wrong.status == 64 && wrong.stderr.contains("--format must be jpeg, webp, png or avif, not \"gif\""), "\(wrong.stderr)")
    }
}
