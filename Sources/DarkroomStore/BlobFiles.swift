import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed file operation on the blob directory, with the path and the
/// system's reason.
struct BlobFileError: Error, CustomStringConvertible {
    let operation: String
    let path: String
    let reason: String

    init(_ operation: String, _ path: String, errno code: Int32) {
        self.operation = operation
        self.path = path
        self.reason = String(cString: strerror(code))
    }

    init(_ operation: String, _ path: String, reason: String) {
        self.operation = operation
        self.path = path
        self.reason = reason
    }

    var description: String { "\(operation) \(path): \(reason)" }
}

/// The content-addressed blob files of a storage node: `blobs/ab/cdef…`,
/// where `abcdef…` is the 64 hex digits of the blob's SHA-256. The same bytes
/// always land in the same file, so identical images are stored once.
///
/// A file is written crash-safely: to a temporary file in the same directory,
/// which is fsynced and then renamed to its final name. The caller fsyncs the
/// directory (`syncDirectory`) before it commits a row naming the file, so a
/// committed row never points at a file a crash could take away. Temporary
/// files left by a crash start with `.tmp-` and are removed at startup.
///
/// Every system call and raw buffer of the storage node lives in this file.
struct BlobFiles {
    static let temporaryPrefix = ".tmp-"
    /// The blob directory (`<data directory>/blobs`).
    let root: String

    /// The path of a blob relative to `root`: `ab/cdef…`.
    static func relativePath(sha256 hex: String) -> String {
        "\(hex.prefix(2))/\(hex.dropFirst(2))"
    }

    /// Whether `relative` has the shape `relativePath` makes (two hex digits,
    /// a slash, 62 hex digits), so a damaged row never names a path outside
    /// the blob directory.
    static func isValidRelativePath(_ relative: String) -> Bool {
        let bytes = Array(relative.utf8)
        guard bytes.count == 65, bytes[2] == UInt8(ascii: "/") else { return false }
        return bytes.enumerated().allSatisfy { index, byte in
            index == 2 || (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66)
        }
    }

    func path(_ relative: String) -> String { root + "/" + relative }

    /// The directory part of `path` ("" when it has none).
    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Creates the data directory and the blob directory in it, and makes
    /// their entries durable. Fan-out directories are made on first use.
    func prepare() throws(BlobFileError) {
        let parent = BlobFiles.parent(of: root)
        let data = parent.isEmpty ? "." : parent
        do {
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        } catch {
            throw BlobFileError("create directory", data, reason: "\(error)")
        }
        _ = try makeDirectory(root)
        try syncDirectory(path: root)
        try syncDirectory(path: data)
    }

    /// Creates one directory; returns whether it was new.
    private func makeDirectory(_ path: String) throws(BlobFileError) -> Bool {
        if mkdir(path, 0o755) == 0 { return true }
        if errno == EEXIST { return false }
        throw BlobFileError("create directory", path, errno: errno)
    }

    /// Whether a regular file exists at `relative`.
    func exists(_ relative: String) -> Bool {
        var info = stat()
        return stat(path(relative), &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    /// Writes `bytes` to `relative` through a fsynced temporary file and a
    /// rename. The directory entry is made durable by `syncDirectory`.
    func write(_ bytes: [UInt8], to relative: String) throws(BlobFileError) {
        let final = path(relative)
        let directory = BlobFiles.parent(of: final)
        if try makeDirectory(directory) {
            // A new fan-out directory: its own entry must survive a crash too.
            try syncDirectory(path: root)
        }
        let temporary = directory + "/" + BlobFiles.temporaryPrefix
            + String(UInt64.random(in: .min ... .max), radix: 16) + "-" + String(getpid())
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BlobFileError("create", temporary, errno: errno) }
        var failure: BlobFileError?
        var offset = 0
        while offset < bytes.count, failure == nil {
            let written = bytes.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return Glibc.write(fd, base + offset, buffer.count - offset)
            }
            if written > 0 {
                offset += written
            } else if written < 0 && errno == EINTR {
                continue
            } else {
                failure = BlobFileError("write", temporary, errno: written < 0 ? errno : EIO)
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = BlobFileError("fsync", temporary, errno: errno) }
        if close(fd) != 0, failure == nil { failure = BlobFileError("close", temporary, errno: errno) }
        if failure == nil, rename(temporary, final) != 0 { failure = BlobFileError("rename", temporary, errno: errno) }
        if let failure {
            unlink(temporary)
            throw failure
        }
    }

    /// Makes the directory entries under the fan-out directory of `relative`
    /// durable (fsync of the directory).
    func syncDirectory(of relative: String) throws(BlobFileError) {
        try syncDirectory(path: BlobFiles.parent(of: path(relative)))
    }

    private func syncDirectory(path: String) throws(BlobFileError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw BlobFileError("open directory", path, errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw BlobFileError("fsync directory", path, errno: errno) }
    }

    /// Reads a whole blob. Refuses files larger than `limit` bytes, so a
    /// damaged file never makes the node allocate without bound.
    func read(_ relative: String, limit: Int) throws(BlobFileError) -> [UInt8] {
        let file = path(relative)
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BlobFileError("open", file, errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw BlobFileError("stat", file, errno: errno) }
        let size = Int(info.st_size)
        guard size >= 0, size <= limit else {
            throw BlobFileError("read", file, reason: "file is \(size) bytes, over the limit of \(limit)")
        }
        var bytes = [UInt8](repeating: 0, count: size)
        var offset = 0
        var failure: BlobFileError?
        while offset < size, failure == nil {
            let count = bytes.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return Glibc.read(fd, base + offset, buffer.count - offset)
            }
            if count > 0 {
                offset += count
            } else if count < 0 && errno == EINTR {
                continue
            } else if count == 0 {
                failure = BlobFileError("read", file, reason: "file ended after \(offset) of \(size) bytes")
            } else {
                failure = BlobFileError("read", file, errno: errno)
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Removes a blob file; a file already gone is not an error.
    func remove(_ relative: String) throws(BlobFileError) {
        let file = path(relative)
        if unlink(file) != 0 && errno != ENOENT { throw BlobFileError("remove", file, errno: errno) }
    }

    /// Every file in the fan-out directories, as relative paths, split into
    /// blobs and leftover temporary files.
    func scan() -> (blobs: [String], temporary: [String]) {
        var blobs: [String] = []
        var temporary: [String] = []
        let manager = FileManager.default
        let directories = ((try? manager.contentsOfDirectory(atPath: root)) ?? []).sorted()
        for directory in directories {
            guard let names = try? manager.contentsOfDirectory(atPath: root + "/" + directory) else { continue }
            for name in names.sorted() {
                let relative = directory + "/" + name
                if name.hasPrefix(BlobFiles.temporaryPrefix) {
                    temporary.append(relative)
                } else {
                    blobs.append(relative)
                }
            }
        }
        return (blobs, temporary)
    }

    /// The size of a file in bytes, or 0 if it does not exist.
    static func fileSize(_ path: String) -> UInt64 {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        return UInt64(max(0, info.st_size))
    }
}
