import DarkroomCore
import Foundation
import Testing

@Suite("POSIX wrapper")
struct PosixTests {
    @Test("a failed call names the operation and the path, and keeps errno and its text")
    func errorsCarryErrno() throws {
        let dir = try temporaryDirectory("posix")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            _ = try Posix.openForReading(dir + "/missing")
            Issue.record("expected a failure")
        } catch {
            #expect(error.operation == "open")
            #expect(error.path == dir + "/missing")
            #expect(error.code == ENOENT)
            #expect(error.isNotFound && !error.isNoSpace)
            #expect(error.description == "open \(dir)/missing: No such file or directory")
        }
        #expect(PosixError("write", "/x", errno: ENOSPC).isNoSpace)
        #expect(PosixError("write", "/x", errno: EDQUOT).isNoSpace)
        #expect(PosixError("write", "/x", errno: ENOSPC).reason == "No space left on device")
        // A second exclusive create of one name is refused.
        let file = try Posix.createNew(dir + "/once")
        try file.close()
        #expect(throws: PosixError("create", dir + "/once", errno: EEXIST)) { try Posix.createNew(dir + "/once") }
        // A file is not a directory to open as one.
        #expect(throws: PosixError("open directory", dir + "/once", errno: ENOTDIR)) { try Posix.openDirectory(dir + "/once") }
    }

    @Test("writeAll and readAll move whole arrays, empty and large, and readAll keeps to its limit")
    func writeAndReadAll() throws {
        let dir = try temporaryDirectory("posix")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for count in [0, 1, 65_537, 3_000_000] {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) }
            let path = dir + "/file-\(count)"
            let writer = try Posix.createNew(path)
            try writer.writeAll(bytes)
            try writer.sync()
            let info = try writer.info()
            #expect(info.size == count && info.isRegularFile && !info.isDirectory)
            try writer.close()
            let reader = try Posix.openForReading(path)
            defer { try? reader.close() }
            #expect(try reader.readAll(limit: count) == bytes)
        }
        let reader = try Posix.openForReading(dir + "/file-65537")
        defer { try? reader.close() }
        #expect(throws: PosixError("read", dir + "/file-65537", errno: EFBIG, detail: "file is 65537 bytes, over the limit of 65536")) {
            try reader.readAll(limit: 65_536)
        }
    }

    @Test("readPrefix reads a file's first bytes, all of a shorter file, and none when asked for none")
    func readPrefix() throws {
        let dir = try temporaryDirectory("posix")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let writer = try Posix.createNew(dir + "/file")
        try writer.writeAll(bytes)
        try writer.close()
        for (count, expected) in [(0, 0), (1, 1), (65_536, 65_536), (262_144, 262_144), (400_000, 300_000)] {
            let reader = try Posix.openForReading(dir + "/file")
            defer { try? reader.close() }
            #expect(try reader.readPrefix(count) == Array(bytes.prefix(expected)), "asked for \(count)")
        }
    }

    @Test("readAll reads a file that grew after its size was taken, and refuses one that grew past the limit")
    func readAllSeesGrowthSinceTheSize() throws {
        let dir = try temporaryDirectory("posix")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/growing"
        let writer = try Posix.createNew(path)
        try writer.writeAll(Array(repeating: 1, count: 4_000))
        let reader = try Posix.openForReading(path)
        defer { try? reader.close() }
        let size = try reader.info().size
        // Written after the size was taken, before the read.
        try writer.writeAll(Array(repeating: 2, count: 100_000))
        try writer.close()
        let bytes = try reader.readAll(limit: 1 << 20, size: size)
        #expect(bytes.count == 104_000)
        #expect(bytes.prefix(4_000).allSatisfy { $0 == 1 } && bytes.suffix(100_000).allSatisfy { $0 == 2 })
        // The same growth past a limit the size was within is refused.
        let again = try Posix.openForReading(path)
        defer { try? again.close() }
        #expect(throws: PosixError("read", path, errno: EFBIG, detail: "file grew while being read, over the limit of 50000")) {
            try again.readAll(limit: 50_000, size: 4_000)
        }
    }

    @Test("directories: made with their parents, listed without . and .., synced; files renamed and removed")
    func directories() throws {
        let dir = try temporaryDirectory("posix")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let nested = dir + "/a/b/c"
        try Posix.makeDirectories(nested)
        try Posix.makeDirectories(nested)
        #expect(try Posix.info(nested)?.isDirectory == true)
        #expect(try Posix.makeDirectory(dir + "/a/d"))
        #expect(try !Posix.makeDirectory(dir + "/a/d"))
        #expect(try Posix.listDirectory(dir + "/a").sorted() == ["b", "d"])
        #expect(try Posix.listDirectory(nested) == [])
        try Posix.syncDirectory(nested)

        let file = try Posix.createNew(nested + "/x")
        try file.writeAll([1, 2, 3])
        try file.close()
        try Posix.rename(nested + "/x", to: nested + "/y")
        #expect(try Posix.listDirectory(nested) == ["y"])
        let info = try #require(try Posix.info(nested + "/y"))
        #expect(info.size == 3 && info.isRegularFile && !info.isDirectory)
        #expect(try Posix.info(nested + "/x") == nil)
        // mkdir -p through a file fails rather than pretend.
        #expect(throws: PosixError.self) { try Posix.makeDirectories(nested + "/y/z") }
        #expect(throws: PosixError.self) { try Posix.listDirectory(nested + "/y") }

        #expect(try Posix.unlinkIfPresent(nested + "/y"))
        #expect(try !Posix.unlinkIfPresent(nested + "/y"))
        #expect(throws: PosixError("remove", nested + "/y", errno: ENOENT)) { try Posix.unlink(nested + "/y") }
        #expect(throws: PosixError("list directory", dir + "/none", errno: ENOENT)) { try Posix.listDirectory(dir + "/none") }
    }

    @Test("descriptors are not inherited by child processes (O_CLOEXEC)")
    func closeOnExec() throws {
        let dir = try temporaryDirectory("posix")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = try Posix.createNew(dir + "/f")
        defer { try? file.close() }
        #expect(fcntl(file.descriptor, F_GETFD) & FD_CLOEXEC != 0)
    }
}
