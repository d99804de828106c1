import DarkroomCore
import Foundation
import Testing

func temporaryDirectory(_ prefix: String = "durable") throws -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

func temporaryNames(in dir: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix(DurableFile.temporaryPrefix) }
}

@Suite("Durable files")
struct DurableFileTests {
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
        try DurableFile.write([], to: dir + "/empty")
        #expect(try DurableFile.read(dir + "/empty", limit: 0) == [])
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(names == ["blob", "empty"])
        #expect(try temporaryNames(in: dir).isEmpty)
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
            #expect(error.code == ENOENT)
            #expect(!error.isNoSpace)
        }
        do {
            try DurableFile.write([1], to: dir + "/no/such/dir/file")
            Issue.record("expected a failure")
        } catch {
            #expect(error.operation == "create")
            #expect(error.path.hasPrefix(dir + "/no/such/dir/" + DurableFile.temporaryPrefix))
            #expect(error.code == ENOENT)
        }
    }

    @Test("syncDirectory of a missing directory fails naming the directory and the reason")
    func syncMissingDirectory() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let missing = dir + "/no-such-dir"
        do {
            try DurableFile.syncDirectory(missing)
            Issue.record("expected a failure")
        } catch {
            #expect(error.path == missing)
            #expect(error.code == ENOENT)
            #expect(error.description.contains(missing))
            #expect(error.description.contains("No such file or directory"))
        }
        // A file is not a directory either.
        try DurableFile.write([1], to: dir + "/file")
        #expect(throws: DurableFile.Failure.self) { try DurableFile.syncDirectory(dir + "/file") }
    }

    @Test("a file over the limit is refused from its size, before any byte is read")
    func limitCheckedBeforeReading() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A sparse 64 GiB file: reading it, or allocating room for it, would
        // take the test down; the size alone must refuse it.
        let path = dir + "/huge"
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        #expect(truncate(path, 64 << 30) == 0)
        let started = ContinuousClock.now
        do {
            _ = try DurableFile.read(path, limit: 1 << 20)
            Issue.record("expected a failure")
        } catch {
            #expect(error.operation == "read")
            #expect(error.path == path)
            #expect(error.code == EFBIG)
            #expect(error.reason.contains("over the limit of 1048576"))
            #expect(error.reason.contains("\(64 << 30) bytes"))
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        // At the limit exactly, the file is read.
        try DurableFile.write([UInt8](repeating: 5, count: 64), to: dir + "/exact")
        #expect(try DurableFile.read(dir + "/exact", limit: 64).count == 64)
    }

    @Test("a write that fails at the rename removes its temporary file and leaves the target alone")
    func failedRenameRemovesTemporary() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A non-empty directory where the file should go: the temporary file
        // is written and synced, then the rename is refused.
        let target = dir + "/taken"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        try DurableFile.write([7], to: target + "/inside")
        do {
            try DurableFile.write([UInt8](repeating: 3, count: 10_000), to: target)
            Issue.record("expected a failure")
        } catch {
            #expect(error.operation == "rename")
            #expect(error.code == EISDIR)
            #expect(error.reason.contains(target))
        }
        #expect(try temporaryNames(in: dir).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["taken"])
        #expect(try DurableFile.read(target + "/inside", limit: 1) == [7])
    }

    @Test(
        "a write to a full file system fails with 'no space left' and leaves neither a temporary nor a partial file",
        .enabled(if: Tmpfs.canMount, "needs to mount a 1 MB tmpfs, which takes root (CAP_SYS_ADMIN); mounting is not permitted here")
    )
    func fullFileSystem() throws {
        let tmpfs = try Tmpfs(size: "1m")
        defer { tmpfs.unmount() }
        let dir = tmpfs.directory
        let old = [UInt8](repeating: 1, count: 1_000)
        try DurableFile.write(old, to: dir + "/image")
        try DurableFile.syncDirectory(dir)
        let big = [UInt8](repeating: 7, count: 2 << 20)

        for name in ["image", "fresh"] {
            do {
                try DurableFile.write(big, to: dir + "/" + name)
                Issue.record("a 2 MB write to a 1 MB file system succeeded")
            } catch {
                #expect(error.isNoSpace)
                #expect(error.code == ENOSPC)
                #expect(error.operation == "write")
                #expect(error.path.hasPrefix(dir + "/" + DurableFile.temporaryPrefix))
                #expect(error.description.lowercased().contains("no space left"), "\(error)")
            }
        }
        // The old file is whole, the new one never appeared, no debris.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["image"])
        #expect(try DurableFile.read(dir + "/image", limit: 1 << 20) == old)
        // The space the failed writes took is free again.
        try DurableFile.write([UInt8](repeating: 2, count: 512 << 10), to: dir + "/fits")
        #expect(try DurableFile.read(dir + "/fits", limit: 1 << 20).count == 512 << 10)
    }
}

/// A small tmpfs mounted in a fresh temporary directory, for running a
/// file system out of space for real.
struct Tmpfs {
    let directory: String

    /// Whether this process may mount one: root with CAP_SYS_ADMIN, as in CI.
    /// Found by trying once, since being uid 0 in a container is not enough.
    static let canMount: Bool = {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/bin/mount") else { return false }
        guard let probe = try? Tmpfs(size: "64k") else { return false }
        probe.unmount()
        return true
    }()

    init(size: String) throws {
        directory = try temporaryDirectory("tmpfs")
        guard Tmpfs.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", directory]) else {
            try? FileManager.default.removeItem(atPath: directory)
            throw CocoaError(.fileWriteNoPermission)
        }
    }

    func unmount() {
        _ = Tmpfs.run("/bin/umount", [directory])
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func run(_ tool: String, _ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
