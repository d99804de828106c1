#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed system call: the operation, the path it was about and the errno
/// the system gave, so a caller can tell a full disk from a missing file
/// without parsing text, and a log line still reads as a sentence.
public struct PosixError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was being done ("open", "write", "fsync directory", …).
    public let operation: String
    /// The file or directory it was done to.
    public let path: String
    /// The errno value.
    public let code: Int32
    /// The system's text for `code`, with any detail the wrapper added.
    public let reason: String

    public init(_ operation: String, _ path: String, errno code: Int32, detail: String? = nil) {
        self.operation = operation
        self.path = path
        self.code = code
        // Taken now rather than on demand: the text belongs to the moment of
        // the failure, and `strerror` is cheap next to the call that failed.
        let text = String(cString: strerror(code))
        self.reason = detail.map { "\(text) (\($0))" } ?? text
    }

    /// The file system (or the user's quota on it) is full: retrying the same
    /// write will fail again until someone frees space.
    public var isNoSpace: Bool { PosixError.isNoSpace(code) }

    /// The path, or a directory on the way to it, does not exist.
    public var isNotFound: Bool { code == ENOENT }

    public static func isNoSpace(_ code: Int32) -> Bool { code == ENOSPC || code == EDQUOT }

    public var description: String { "\(operation) \(path): \(reason)" }
}

/// The few POSIX file calls the broker's input files and the storage node's
/// blob files are built on, each a thin wrapper that:
///
/// - retries EINTR, so a signal arriving mid-call (a profiler, a debugger,
///   a terminal resize) never turns into a failed write;
/// - throws `PosixError` with the operation, the path and errno, instead of
///   a Boolean or an error with the errno stripped away;
/// - takes and returns `[UInt8]`, reading and writing the array's own
///   storage, so a 50 MB image is never copied on its way to the disk.
///
/// Descriptors are opened with O_CLOEXEC, so a child process (a codec, a
/// shell-out) never inherits a half-written file.
///
/// EBADF and EFAULT are programming errors here (a descriptor used after
/// close, a bad buffer), not conditions to report: a stale descriptor may by
/// then name another file, so the process stops rather than write to it.
public enum Posix {
    /// What `stat` says about a path: enough to tell a blob from a directory
    /// and to size a read.
    public struct FileInfo: Sendable, Equatable {
        public let size: Int
        public let isRegularFile: Bool
        public let isDirectory: Bool
        /// The file itself, whatever path reached it: two paths with the
        /// same identity (a link, `./a` and `a`) are one file.
        public let identity: FileIdentity
    }

    /// A file's device and inode numbers.
    public struct FileIdentity: Sendable, Hashable {
        public let device: UInt64
        public let inode: UInt64
    }

    /// An open descriptor and the path it was opened by, which every error
    /// about it names. Closing is explicit, once per opened file: a durable
    /// write must see the error `close` can report (NFS reports some write
    /// errors only there), which a close in a deinit would have to swallow.
    public struct File: Sendable {
        public let descriptor: Int32
        public let path: String

        /// Writes every byte of `bytes`, looping over short writes.
        public func writeAll(_ bytes: [UInt8]) throws(PosixError) {
            var failure: PosixError?
            bytes.withUnsafeBytes { buffer in
                do throws(PosixError) { try writeAll(buffer) } catch { failure = error }
            }
            if let failure { throw failure }
        }

        /// Writes every byte of `buffer`. A regular file may take fewer bytes
        /// than asked (a signal, the 2 GB cap of one Linux write), and then
        /// the rest is written by the next call; a full disk ends the loop
        /// with ENOSPC.
        public func writeAll(_ buffer: UnsafeRawBufferPointer) throws(PosixError) {
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let written = try Posix.retryingInterrupts("write", path) {
                    systemWrite(descriptor, base + offset, buffer.count - offset)
                }
                // A regular file never accepts nothing without an error; if
                // one did, looping on it would spin forever.
                guard written > 0 else {
                    throw PosixError("write", path, errno: EIO, detail: "the system accepted 0 of \(buffer.count - offset) bytes")
                }
                offset += written
            }
        }

        /// Reads the whole file into a new array, refusing a file over
        /// `limit` bytes before reading a byte of it, so a damaged or hostile
        /// file never makes the caller allocate without bound.
        /// `size` is the file's size if the caller has just asked `info()`
        /// (one system call less a file).
        public func readAll(limit: Int, size: Int? = nil) throws(PosixError) -> [UInt8] {
            let expected: Int
            if let size {
                precondition(size >= 0, "readAll: a file's size cannot be negative")
                expected = size
            } else {
                expected = try info().size
            }
            guard expected <= limit else {
                throw PosixError("read", path, errno: EFBIG, detail: "file is \(expected) bytes, over the limit of \(limit)")
            }
            // One byte of room beyond the size fstat gave notices a file that
            // grew in the meantime; the array is filled in place, not copied.
            // Reads that end exactly at that size are taken as the whole file,
            // without one more read to see the end: a regular file gives less
            // than asked only at its end, and one that grew since fstat fills
            // the byte of room. (Growth after the last read goes unseen either
            // way.) For 5,000 small inputs that is 5,000 system calls fewer.
            var failure: PosixError?
            var bytes = [UInt8](unsafeUninitializedCapacity: expected + 1) { buffer, count in
                do throws(PosixError) {
                    count = try readFully(into: UnsafeMutableRawBufferPointer(buffer), endingAt: expected)
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
            guard bytes.count > expected else { return bytes }
            // Grown since fstat (someone else is writing it): read the rest
            // in chunks, still within the limit.
            let grown = PosixError("read", path, errno: EFBIG, detail: "file grew while being read, over the limit of \(limit)")
            guard bytes.count <= limit else { throw grown }
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = chunk.withUnsafeMutableBytes { buffer in
                    do throws(PosixError) { return try readFully(into: buffer) } catch { failure = error; return 0 }
                }
                if let failure { throw failure }
                if count == 0 { return bytes }
                guard bytes.count + count <= limit else { throw grown }
                bytes.append(contentsOf: chunk[..<count])
            }
        }

        /// Reads the first `count` bytes from where the file stands (its
        /// start, just opened), or fewer when it ends before.
        public func readPrefix(_ count: Int) throws(PosixError) -> [UInt8] {
            precondition(count >= 0, "readPrefix: a negative count")
            var failure: PosixError?
            let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, filled in
                do throws(PosixError) {
                    filled = try readFully(into: UnsafeMutableRawBufferPointer(buffer))
                } catch {
                    failure = error
                    filled = 0
                }
            }
            if let failure { throw failure }
            return bytes
        }

        /// Reads until `buffer` is full, the file ends, or (given `end`)
        /// exactly `end` bytes are in; returns the count.
        private func readFully(into buffer: UnsafeMutableRawBufferPointer, endingAt end: Int? = nil) throws(PosixError) -> Int {
            guard let base = buffer.baseAddress else { return 0 }
            var offset = 0
            while offset < buffer.count {
                let count = try Posix.retryingInterrupts("read", path) {
                    systemRead(descriptor, base + offset, buffer.count - offset)
                }
                if count == 0 { break }
                offset += count
                if offset == end { break }
            }
            return offset
        }

        /// Makes the file's data and metadata durable (fsync). For a
        /// directory, this makes its entries durable: a new or renamed name.
        public func sync() throws(PosixError) {
            _ = try Posix.retryingInterrupts("fsync", path) { systemFsync(descriptor) }
        }

        /// What fstat says about the open file.
        public func info() throws(PosixError) -> FileInfo {
            var status = stat()
            _ = try Posix.retryingInterrupts("stat", path) { systemFstat(descriptor, &status) }
            return FileInfo(status)
        }

        /// Closes the descriptor, exactly once. EINTR is not retried: Linux
        /// has already released the descriptor when close reports it, and a
        /// second close could close one another thread has just opened.
        public func close() throws(PosixError) {
            guard systemClose(descriptor) == -1 else { return }
            let code = errno
            if code == EINTR { return }
            throw Posix.failure("close", path, code)
        }
    }

    /// Opens `path` with `flags` (O_CLOEXEC is always added); `mode` applies
    /// when O_CREAT creates the file, less the process's umask.
    public static func open(_ path: String, flags: Int32, mode: mode_t = 0o666) throws(PosixError) -> File {
        try open(path, flags: flags, mode: mode, operation: "open")
    }

    private static func open(_ path: String, flags: Int32, mode: mode_t, operation: String) throws(PosixError) -> File {
        let descriptor = try retryingInterrupts(operation, path) { systemOpen(path, flags | O_CLOEXEC, mode) }
        return File(descriptor: descriptor, path: path)
    }

    /// Opens an existing file for reading.
    public static func openForReading(_ path: String) throws(PosixError) -> File {
        try open(path, flags: O_RDONLY)
    }

    /// Creates a new file for writing; fails with EEXIST rather than open a
    /// file someone else is writing.
    public static func createNew(_ path: String, mode: mode_t = 0o666) throws(PosixError) -> File {
        try open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: mode, operation: "create")
    }

    /// Opens a directory itself, for fsync; fails with ENOTDIR on anything else.
    public static func openDirectory(_ path: String) throws(PosixError) -> File {
        try open(path, flags: O_RDONLY | O_DIRECTORY, mode: 0, operation: "open directory")
    }

    /// Makes the entries of `directory` durable: after a rename into it, the
    /// new name survives a crash only once the directory itself is fsynced.
    public static func syncDirectory(_ directory: String) throws(PosixError) {
        let file = try openDirectory(directory)
        do {
            try file.sync()
        } catch {
            try? file.close()
            throw PosixError("fsync directory", directory, errno: error.code)
        }
        try file.close()
    }

    /// Renames `source` to `destination`, replacing any file there in one
    /// step: a reader sees the old file or the new one, never a mix.
    public static func rename(_ source: String, to destination: String) throws(PosixError) {
        try retryingInterrupts("rename", source, detail: "to \(destination)") { systemRename(source, destination) }
    }

    /// Removes a file.
    public static func unlink(_ path: String) throws(PosixError) {
        _ = try retryingInterrupts("remove", path) { systemUnlink(path) }
    }

    /// Removes a file if it is there; returns whether it was.
    @discardableResult
    public static func unlinkIfPresent(_ path: String) throws(PosixError) -> Bool {
        do {
            try unlink(path)
            return true
        } catch where error.isNotFound {
            return false
        }
    }

    /// Creates one directory; returns whether it was new (false when
    /// something of that name already exists).
    @discardableResult
    public static func makeDirectory(_ path: String, mode: mode_t = 0o755) throws(PosixError) -> Bool {
        do {
            try retryingInterrupts("create directory", path) { systemMkdir(path, mode) }
            return true
        } catch where error.code == EEXIST {
            return false
        }
    }

    /// Creates `path` and any missing directory on the way to it (mkdir -p);
    /// fails if the path ends up being something other than a directory.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws(PosixError) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            try makeDirectory(prefix, mode: mode)
            prefix += "/"
        }
        guard try info(path)?.isDirectory == true else {
            throw PosixError("create directory", path, errno: ENOTDIR)
        }
    }

    /// What stat says about `path`, or nil when nothing is there.
    public static func info(_ path: String) throws(PosixError) -> FileInfo? {
        var status = stat()
        do {
            try retryingInterrupts("stat", path) { systemStat(path, &status) }
        } catch where error.isNotFound {
            return nil
        }
        return FileInfo(status)
    }

    /// The names in `directory` (without "." and ".."), in the order the
    /// file system keeps them; callers sort when the order matters.
    public static func listDirectory(_ directory: String) throws(PosixError) -> [String] {
        var stream = systemOpendir(directory)
        while stream == nil && errno == EINTR { stream = systemOpendir(directory) }
        guard let stream else { throw failure("list directory", directory, errno) }
        defer { _ = systemClosedir(stream) }
        var names: [String] = []
        while true {
            // readdir signals an error only through errno, so it is cleared first.
            errno = 0
            guard let entry = systemReaddir(stream) else {
                if errno != 0 { throw failure("list directory", directory, errno) }
                return names
            }
            let name = withUnsafePointer(to: entry.pointee.d_name) { tuple in
                UnsafeRawPointer(tuple).withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) {
                    String(cString: $0)
                }
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    /// The id of this process, which names its temporary files so debris can
    /// be traced to the process that left it.
    public static var processID: Int32 { getpid() }

    /// Runs a call that returns -1 and sets errno on failure, again for as
    /// long as it fails with EINTR.
    @discardableResult
    static func retryingInterrupts<T: FixedWidthInteger>(
        _ operation: String, _ path: String, detail: String? = nil, _ call: () -> T
    ) throws(PosixError) -> T {
        while true {
            let result = call()
            if result != -1 { return result }
            let code = errno
            if code != EINTR { throw failure(operation, path, code, detail: detail) }
        }
    }

    static func failure(_ operation: String, _ path: String, _ code: Int32, detail: String? = nil) -> PosixError {
        precondition(code != EBADF && code != EFAULT,
                     "\(operation) \(path): \(String(cString: strerror(code))): a descriptor or buffer was misused")
        return PosixError(operation, path, errno: code, detail: detail)
    }
}

extension Posix.FileInfo {
    init(_ status: stat) {
        size = Int(status.st_size)
        isRegularFile = (status.st_mode & S_IFMT) == S_IFREG
        isDirectory = (status.st_mode & S_IFMT) == S_IFDIR
        identity = Posix.FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }
}

// The C calls under their own names: inside `Posix`, `open`, `rename` and the
// rest name the wrappers, so the wrappers reach the C functions through these.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func systemClose(_ descriptor: Int32) -> Int32 { close(descriptor) }
private func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { write(descriptor, buffer, count) }
private func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int { read(descriptor, buffer, count) }
private func systemFsync(_ descriptor: Int32) -> Int32 { fsync(descriptor) }
private func systemFstat(_ descriptor: Int32, _ status: inout stat) -> Int32 { fstat(descriptor, &status) }
private func systemStat(_ path: String, _ status: inout stat) -> Int32 { stat(path, &status) }
private func systemRename(_ source: String, _ destination: String) -> Int32 { rename(source, destination) }
private func systemUnlink(_ path: String) -> Int32 { unlink(path) }
private func systemMkdir(_ path: String, _ mode: mode_t) -> Int32 { mkdir(path, mode) }
private func systemOpendir(_ path: String) -> OpaquePointer? { opendir(path) }
private func systemReaddir(_ stream: OpaquePointer) -> UnsafeMutablePointer<dirent>? { readdir(stream) }
private func systemClosedir(_ stream: OpaquePointer) -> Int32 { closedir(stream) }
