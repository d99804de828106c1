import DarkroomCore
import DarkroomZMQ

/// Input images above the inline threshold live in files in
/// `<data>/inputs/`, named by their job id, so the queue database stays
/// small. (Naming them by job id rather than by content spares the broker
/// hashing every large upload; the storage node content-addresses results.)
///
/// A file is written crash-safely before the transaction that names it
/// commits: a temporary file, fsynced, renamed into place (`write`, run by
/// the `InputWriter`'s threads, off the broker's loop); then one fsync of
/// the directory for all the files a turn names (`syncDirectory`), just
/// before its commit. A crash before the commit leaves at most a file no
/// row names, which `sweep(keeping:)` removes at the next start; a
/// committed row never names a missing file.
struct InputFiles: Sendable {
    let directory: String

    init(directory: String) throws {
        self.directory = directory
        do {
            try Posix.makeDirectories(directory)
        } catch {
            throw BrokerError.storage("\(error)")
        }
    }

    func path(of name: String) -> String { directory + "/" + name }

    /// Writes `bytes` under `name` (the job id) through a fsynced temporary
    /// file and a rename. Its directory entry is durable after `syncDirectory`.
    func write(_ bytes: [UInt8], name: String) throws(DurableFile.Failure) {
        try DurableFile.write(bytes, to: path(of: name))
    }

    /// Makes the directory's entries durable.
    func syncDirectory() throws(DurableFile.Failure) {
        try DurableFile.syncDirectory(directory)
    }

    /// Maps a file read-only, refusing one larger than `limit` bytes, to be
    /// sent without being read into memory. An input file is never changed
    /// once named (a rewrite is a new file renamed over it), which mapping
    /// needs (see `MappedFile`).
    func map(_ name: String, limit: Int, tally: FrameTally) throws(MappedFile.Failure) -> MappedFile {
        try MappedFile(path: path(of: name), maxBytes: limit, tally: tally)
    }

    /// Reads a file, refusing one larger than `limit` bytes before reading it.
    func read(_ name: String, limit: Int) throws(DurableFile.Failure) -> [UInt8] {
        try DurableFile.read(path(of: name), limit: limit)
    }

    func remove(_ name: String) {
        _ = try? Posix.unlinkIfPresent(path(of: name))
    }

    /// Removes temporary files and files no committed job names (left by a
    /// crash between the file write and the commit). Returns how many went.
    func sweep(keeping referenced: Set<String>) -> Int {
        let names = (try? Posix.listDirectory(directory)) ?? []
        var removed = 0
        for name in names where !referenced.contains(name) {
            remove(name)
            removed += 1
        }
        return removed
    }
}

/// Failures of the broker itself (not of jobs).
public enum BrokerError: Error, Sendable, CustomStringConvertible {
    /// A file or database operation failed.
    case storage(String)
    /// `start()` was called twice.
    case alreadyStarted

    public var description: String {
        switch self {
        case .storage(let reason): "broker storage: \(reason)"
        case .alreadyStarted: "broker already started"
        }
    }
}
