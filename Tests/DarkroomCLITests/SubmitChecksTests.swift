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
}
