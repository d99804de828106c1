import DarkroomCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Input images above the blob threshold live in files in `<data>/inputs/`,
/// named by their job id, so the queue database stays small. (Naming them by
/// job id rather than by content spares the broker hashing every large
/// upload on its one thread; the storage node content-addresses results.)
///
/// A file is written crash-safely before the transaction that names it
/// commits: write a temp file, fsync it, rename it into place, fsync the
/// directory. A crash before the commit leaves at most an unreferenced file,
/// which `sweep(keeping:)` removes on the next start; a committed row never
/// names a missing file.
struct InputFiles {
    let directory: String

    init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    func path(of name: String) -> String { directory + "/" + name }

    /// Writes `bytes` durably under `name` (the job id) and returns the name.
    func write(_ bytes: [UInt8], name: String) throws -> String {
        let final = path(of: name)
        do {
            try DurableFile.write(bytes, to: final)
        } catch {
            throw BrokerError.storage(error.description)
        }
        try syncDirectory()
        return name
    }

    func read(_ name: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path(of: name)) else {
            throw BrokerError.storage("input file \(path(of: name)) is missing")
        }
        return [UInt8](data)
    }

    func remove(_ name: String) {
        try? FileManager.default.removeItem(atPath: path(of: name))
    }

    /// Removes temp files and files no committed job names (left by a crash
    /// between the file write and the commit).
    func sweep(keeping referenced: Set<String>) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var removed = 0
        for name in names where !referenced.contains(name) {
            remove(name)
            removed += 1
        }
        return removed
    }

    private func syncDirectory() throws {
        do {
            try DurableFile.syncDirectory(directory)
        } catch {
            throw BrokerError.storage(error.description)
        }
    }
}

/// Failures of the broker itself (not of jobs).
public enum BrokerError: Error, Sendable, CustomStringConvertible {
    /// The broker could not start: a bind failed, the data directory or database could not be opened.
    case startFailed(String)
    /// A file or database operation failed.
    case storage(String)
    /// `start()` was called twice.
    case alreadyStarted

    public var description: String {
        switch self {
        case .startFailed(let reason): "broker could not start: \(reason)"
        case .storage(let reason): "broker storage: \(reason)"
        case .alreadyStarted: "broker already started"
        }
    }
}
