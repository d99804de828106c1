/// Crash-safe file writes, shared by the broker (input images) and the storage
/// node (result images): write a temporary file in the target's directory,
/// fsync it, rename it into place; the caller then fsyncs the directory
/// (`syncDirectory`) before it commits anything that names the file. A crash
/// at any point leaves either no file or a complete one, plus at most a
/// temporary file that the owner removes at start-up.
///
/// `write` deliberately stops short of the directory fsync. A directory fsync
/// costs about as much as the file's own, and a commit usually names many
/// files in few directories: the caller writes them all, fsyncs each
/// directory once, then commits. What must hold is only the order: every
/// file and its directory entry durable before the commit that names it.
///
/// Built on `Posix`, so the bytes go from the caller's array to the kernel
/// without a copy, EINTR is retried, and a failure keeps its errno: a full
/// disk is `isNoSpace`, not a sentence to parse.
public enum DurableFile {
    /// A failed file operation, with the path and the reason.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let operation: String
        public let path: String
        public let reason: String
        /// The errno behind the failure, when a system call gave one.
        public let code: Int32?

        public init(_ operation: String, _ path: String, _ reason: String) {
            self.operation = operation
            self.path = path
            self.reason = reason
            self.code = nil
        }

        public init(_ error: PosixError) {
            operation = error.operation
            path = error.path
            reason = error.reason
            code = error.code
        }

        /// The file system or the quota is full (ENOSPC, EDQUOT): a caller
        /// can answer "disk full" rather than retry the same write.
        public var isNoSpace: Bool { code.map(PosixError.isNoSpace) ?? false }

        public var description: String { "\(operation) \(path): \(reason)" }
    }

    /// Temporary files start with this; anything named so is debris from a crash.
    public static let temporaryPrefix = ".tmp-"

    /// Writes `bytes` to `path` through a fsynced temporary file and a rename,
    /// replacing any file already there in one step. On failure the temporary
    /// file is removed and `path` is untouched: neither a partial file nor a
    /// lost old one. The directory entry is durable only after `syncDirectory`.
    /// With `sync` false the file is not fsynced: still replaced in one step,
    /// but not durable, for files nothing commits (a command's output, which
    /// would otherwise wait on the disk for each one).
    public static func write(_ bytes: [UInt8], to path: String, sync: Bool = true) throws(Failure) {
        let temporary = temporaryPath(beside: path)
        let file: Posix.File
        do {
            file = try Posix.createNew(temporary)
        } catch {
            throw Failure(error)
        }
        do {
            try file.writeAll(bytes)
            if sync { try file.sync() }
        } catch {
            try? file.close()
            discard(temporary)
            throw Failure(error)
        }
        do {
            try file.close()
            // rename(2) replaces an existing file atomically.
            try Posix.rename(temporary, to: path)
        } catch {
            discard(temporary)
            throw Failure(error)
        }
    }

    /// Makes the entries of `directory` durable (fsync of the directory): once
    /// per commit, after every file the commit names has been written.
    public static func syncDirectory(_ directory: String) throws(Failure) {
        do {
            try Posix.syncDirectory(directory)
        } catch {
            throw Failure(error)
        }
    }

    /// Reads a whole file, refusing one larger than `limit` bytes before
    /// reading it, so a damaged file never makes the caller allocate without bound.
    public static func read(_ path: String, limit: Int) throws(Failure) -> [UInt8] {
        do {
            let file = try Posix.openForReading(path)
            defer { try? file.close() }
            return try file.readAll(limit: limit)
        } catch {
            throw Failure(error)
        }
    }

    /// A fresh name in the directory of `path`, so the rename never crosses
    /// file systems. 64 random bits make a clash with a live writer
    /// practically impossible (and `createNew` would refuse one); the process
    /// id tells whose debris a leftover is.
    static func temporaryPath(beside path: String) -> String {
        let name = temporaryPrefix + String(UInt64.random(in: .min ... .max), radix: 16) + "-" + String(Posix.processID)
        guard let slash = path.lastIndex(of: "/") else { return name }
        return String(path[...slash]) + name
    }

    /// Removes a temporary file after a failed write. A failure to remove it
    /// is not reported over the write's own: the owner's start-up sweep
    /// removes anything named with `temporaryPrefix`.
    private static func discard(_ temporary: String) {
        _ = try? Posix.unlinkIfPresent(temporary)
    }
}
