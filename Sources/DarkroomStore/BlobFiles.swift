import DarkroomCore
import DarkroomZMQ

/// A failed file operation on the blob directory, with the path and the
/// system's reason.
struct BlobFileError: Error, CustomStringConvertible {
    let operation: String
    let path: String
    let reason: String

    init(_ failure: MappedFile.Failure) {
        operation = failure.operation
        path = failure.path
        reason = failure.reason
    }

    init(_ error: PosixError) {
        operation = error.operation
        path = error.path
        reason = error.reason
    }

    init(_ failure: DurableFile.Failure) {
        operation = failure.operation
        path = failure.path
        reason = failure.reason
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
struct BlobFiles {
    static let temporaryPrefix = DurableFile.temporaryPrefix
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
            try Posix.makeDirectories(data)
        } catch {
            throw BlobFileError(error)
        }
        _ = try makeDirectory(root)
        try syncDirectory(path: root)
        try syncDirectory(path: data)
    }

    /// Creates one directory; returns whether it was new.
    private func makeDirectory(_ path: String) throws(BlobFileError) -> Bool {
        do {
            return try Posix.makeDirectory(path)
        } catch {
            throw BlobFileError(error)
        }
    }

    /// Whether a regular file exists at `relative`.
    func exists(_ relative: String) -> Bool {
        (try? Posix.info(path(relative)))??.isRegularFile == true
    }

    /// Writes `bytes` to `relative` through a fsynced temporary file and a
    /// rename (`DurableFile`). The directory entry is made durable by `syncDirectory`.
    func write(_ bytes: [UInt8], to relative: String) throws(BlobFileError) {
        let final = path(relative)
        if try makeDirectory(BlobFiles.parent(of: final)) {
            // A new fan-out directory: its own entry must survive a crash too.
            try syncDirectory(path: root)
        }
        do {
            try DurableFile.write(bytes, to: final)
        } catch {
            throw BlobFileError(error)
        }
    }

    /// Makes the directory entries under the fan-out directory of `relative`
    /// durable (fsync of the directory).
    func syncDirectory(of relative: String) throws(BlobFileError) {
        try syncDirectory(path: BlobFiles.parent(of: path(relative)))
    }

    private func syncDirectory(path: String) throws(BlobFileError) {
        do {
            try DurableFile.syncDirectory(path)
        } catch {
            throw BlobFileError(error)
        }
    }

    /// Maps a whole blob read-only, to be sent without copying it. Blob
    /// files are never changed once named, which mapping needs (see
    /// `MappedFile`). Refuses files larger than `limit` bytes, so a damaged
    /// file is never sent whole. The mapping is counted on `tally`.
    func map(_ relative: String, limit: Int, tally: FrameTally) throws(BlobFileError) -> MappedFile {
        do {
            return try MappedFile(path: path(relative), maxBytes: limit, tally: tally)
        } catch {
            throw BlobFileError(error)
        }
    }

    /// Removes a blob file; a file already gone is not an error.
    func remove(_ relative: String) throws(BlobFileError) {
        do {
            try Posix.unlinkIfPresent(path(relative))
        } catch {
            throw BlobFileError(error)
        }
    }

    /// Every file in the fan-out directories, as relative paths, split into
    /// blobs and leftover temporary files.
    func scan() -> (blobs: [String], temporary: [String]) {
        var blobs: [String] = []
        var temporary: [String] = []
        let directories = ((try? Posix.listDirectory(root)) ?? []).sorted()
        for directory in directories {
            // Anything that is not a directory (or cannot be listed) holds no blobs.
            guard let names = try? Posix.listDirectory(root + "/" + directory) else { continue }
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
        UInt64(max(0, (try? Posix.info(path))??.size ?? 0))
    }
}
