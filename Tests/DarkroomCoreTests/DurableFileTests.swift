import DarkroomCore
import Foundation
import Testing

@Suite("Durable files")
struct DurableFileTests {
    func temporaryDirectory() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("durable-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test("a write lands whole, replaces an older file and leaves no temporary file")
    func writeReadReplace() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/blob"
        let first = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try DurableFile.write(first, to: path)
        try DurableFile.syncDirectory(dir)
        #expect(try DurableFile.read(path, limit: 1 << 20) == first)
        try DurableFile.write([1, 2, 3], to: path)
        #expect(try DurableFile.read(path, limit: 10) == [1, 2, 3])
        let names = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(names == ["blob"])
        #expect(!names.contains { $0.hasPrefix(DurableFile.temporaryPrefix) })
    }

    @Test("reads over the limit, missing files and missing directories fail with the path")
    func failures() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try DurableFile.write([UInt8](repeating: 9, count: 100), to: dir + "/big")
        #expect(throws: DurableFile.Failure.self) { try DurableFile.read(dir + "/big", limit: 99) }
        do {
            _ = try DurableFile.read(dir + "/missing", limit: 10)
            Issue.record("expected a failure")
        } catch {
            #expect(error.path.hasSuffix("/missing"))
        }
        #expect(throws: DurableFile.Failure.self) { try DurableFile.write([1], to: dir + "/no/such/dir/file") }
        #expect(throws: DurableFile.Failure.self) { try DurableFile.syncDirectory(dir + "/no-such-dir") }
    }
}
