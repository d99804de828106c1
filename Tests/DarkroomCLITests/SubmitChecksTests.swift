import DarkroomImage
import Foundation
import Testing

/// `darkroom submit`'s local checks, which read a big input list on several
/// threads: what they report must not depend on which thread read what.
@Suite("darkroom submit: local checks")
struct SubmitChecksTests {
    @Test("300 files with three bad ones among them: each bad one named in input order, nothing submitted, exit 1")
    func badFilesAmongManyAreNamedInOrder() throws {
        let scratch = try TemporaryDirectory()
        let folder = scratch.url.appendingPathComponent("in")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let good = try Data(ProcessCommandTests.goodJPEG(width: 40, height: 30))
        let badIndexes: [Int: Data] = [
            17: Data("not a jpeg".utf8),
            150: Data(),
            283: good.prefix(40),
        ]
        for i in 0..<300 {
            try (badIndexes[i] ?? good).write(to: folder.appendingPathComponent(String(format: "f-%03d.jpg", i)))
        }
        // Nothing listens here: a submit that sent anything would wait for it
        // until --deadline, and say so.
        let result = try DarkroomProcess.run(["submit", folder.path, "--ops", "grayscale", "--broker", "tcp://127.0.0.1:1",
                                              "--deadline", "1", "--json"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("3 of 300 input(s) failed the local checks; nothing was submitted"), "\(result.stderr)")
        let invalid = result.stdout.split(separator: "\n").compactMap { line -> String? in
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            guard object?["status"] as? String == "invalid" else { return nil }
            return (object?["input"] as? String).map { URL(fileURLWithPath: $0).lastPathComponent }
        }
        #expect(invalid == ["f-017.jpg", "f-150.jpg", "f-283.jpg"])
        #expect(!result.stdout.contains("\"accepted\""))
    }

    /// A worker refuses, before decoding, an AVIF output over 4096² pixels
    /// and a WebP one over 16383 a side; the local checks ask the same of
    /// each input, so such a job is not queued only to end dead.
    @Test("an output too large for AVIF or WebP is refused by the local checks, naming the output and the limit")
    func outputLimitsAreChecked() throws {
        let scratch = try TemporaryDirectory()
        let photo = scratch.url.appendingPathComponent("photo.jpg")
        try Data(ProcessCommandTests.goodJPEG(width: 40, height: 30)).write(to: photo)
        let nowhere = ["--broker", "tcp://127.0.0.1:1", "--deadline", "1"]
        let avif = try DarkroomProcess.run(["submit", photo.path, "--ops", "scale:5000x5000", "--format", "avif"] + nowhere)
        #expect(avif.status == 1, "\(avif.stderr)")
        #expect(avif.stderr.contains("\(photo.path): encode full: cannot encode a 5000x3750 image as AVIF"), "\(avif.stderr)")
        #expect(avif.stderr.contains("1 of 1 input(s) failed the local checks; nothing was submitted\n"), "no rest to submit: \(avif.stderr)")
        let webp = try DarkroomProcess.run(["submit", photo.path, "--ops", "scale:16384x100,mode=force", "--format", "webp"] + nowhere)
        #expect(webp.status == 1, "\(webp.stderr)")
        #expect(webp.stderr.contains("\(photo.path): encode full:"), "\(webp.stderr)")
        #expect(webp.stderr.contains("16383"), "\(webp.stderr)")
        // The same size as JPEG passes the checks (and then finds no broker).
        let jpeg = try DarkroomProcess.run(["submit", photo.path, "--ops", "scale:5000x5000"] + nowhere)
        #expect(jpeg.status == 2, "\(jpeg.stderr)")
    }

    /// Beyond the 64 MiB the checks keep for sending, a file's head alone
    /// is read and checked, and the file is read whole when it is sent. A
    /// header longer than the head is checked on the whole file, which also
    /// gives the reason when it is bad (not "truncated", as the head alone
    /// would). A file sent from its head only would be dead: its scan data
    /// runs far past the head.
    @Test("past the kept bytes: files checked by their head (a long header by the whole file) and each sent whole")
    func checksPastTheKeptBytes() throws {
        let h = try SystemHarness()
        let folder = h.dir.url.appendingPathComponent("in")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let small = try ProcessCommandTests.goodJPEG(width: 64, height: 48)
        func padded(_ bytes: [UInt8], to size: Int) -> [UInt8] { bytes + [UInt8](repeating: 0, count: max(0, size - bytes.count)) }
        // Comment segments between SOI and the rest: a header of ~390 KB.
        func longHeader(_ jpeg: [UInt8]) -> [UInt8] {
            var out: [UInt8] = [0xFF, 0xD8]
            for _ in 0..<6 { out += [0xFF, 0xFE, 0xFD, 0xEA] + [UInt8](repeating: 0x41, count: 65_000) }
            return out + jpeg.dropFirst(2)
        }
        // Kept whole: almost all of the 64 MiB (data after EOI is never read).
        try Data(padded(small, to: 63 << 20)).write(to: folder.appendingPathComponent("a-filler.jpg"))
        // Noise: about a megabyte of scan data, four times the head.
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        let noise = (0..<(800 * 600 * 4)).map { i -> UInt8 in
            if i % 4 == 3 { return 255 }
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: seed >> 56)
        }
        let big = try JPEG.encode(Image(width: 800, height: 600, pixels: noise), options: EncodeOptions(quality: 95))
        try #require(big.count > 4 * (256 << 10), "the noise image is \(big.count) bytes")
        try Data(big).write(to: folder.appendingPathComponent("b-noise.jpg"))
        try Data(padded(longHeader(small), to: 2 << 20)).write(to: folder.appendingPathComponent("c-long-header.jpg"))
        // The same, its frame header saying width 0.
        var zeroWidth = longHeader(small)
        let sof = try #require((2..<zeroWidth.count - 1).first { zeroWidth[$0] == 0xFF && [0xC0, 0xC1, 0xC2].contains(zeroWidth[$0 + 1]) })
        zeroWidth[sof + 7] = 0
        zeroWidth[sof + 8] = 0
        try Data(padded(zeroWidth, to: 2 << 20)).write(to: folder.appendingPathComponent("d-bad-late.jpg"))

        try h.startSystem(workers: [("w", 2)])
        let checked = try h.run(["submit", folder.path, "--ops", "grayscale", "--thumb", "32x32", "--json"] + h.clientFlags)
        #expect(checked.status == 1)
        let invalid = SystemHarness.jsonLines(checked.stdout).filter { $0["status"] as? String == "invalid" }
        #expect(invalid.compactMap { ($0["input"] as? String).map { URL(fileURLWithPath: $0).lastPathComponent } } == ["d-bad-late.jpg"],
                "\(checked.stdout)")
        let reason = invalid.first?["reason"] as? String ?? ""
        #expect(reason.contains("width 0"), "\(checked.stdout)")

        try FileManager.default.removeItem(at: folder.appendingPathComponent("d-bad-late.jpg"))
        let submit = try h.run(["submit", folder.path, "--ops", "grayscale", "--thumb", "32x32", "--wait", "--json"] + h.clientFlags)
        #expect(submit.status == 0, "\(submit.stderr)")
        let stored = SystemHarness.jsonLines(submit.stdout).filter { $0["status"] as? String == "stored" }
        #expect(stored.compactMap { ($0["input"] as? String).map { URL(fileURLWithPath: $0).lastPathComponent } }.sorted()
                == ["a-filler.jpg", "b-noise.jpg", "c-long-header.jpg"], "\(submit.stdout)\n\(submit.stderr)")
    }
}
