import Foundation

/// Crash-safe file writes, shared by the broker (input images) and the storage
/// node (result images): write a temporary file in the target's directory,
/// fsync it, rename it into place; the caller then fsyncs the directory
/// (`syncDirectory`) before it commits anything that names the file. A crash
/// at any point leaves either no file or a complete one, plus at most a
/// temporary file that the owner removes at start-up.
public enum DurableFile {
    /// A failed file operation, with the path and the reason.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let operation: String
        public let path: String
        public let reason: String

        public init(_ operation: String, _ path: String, _ reason: String) {
            self.operation = operation
            self.path = path
            self.reason = reason
        }

        public var description: String { "\(operation) \(path): \(reason)" }
    }

    /// Temporary files start with this; anything named so is debris from a crash.
    public static let temporaryPrefix = ".tmp-"

    /// Writes `bytes` to `path` through a fsynced temporary file and a rename.
    /// The directory entry is durable only after `syncDirectory`.
    public static func write(_ bytes: [UInt8], to path: String) throws(Failure) {
        let directory = (path as NSString).deletingLastPathComponent
        let temporary = directory + "/" + temporaryPrefix + String(UInt64.random(in: .min ... .max), radix: 16)
            + "-" + String(ProcessInfo.processInfo.processIdentifier)
        guard FileManager.default.createFile(atPath: temporary, contents: nil) else {
            throw Failure("create", temporary, "cannot create the file")
        }
        do {
            guard let handle = FileHandle(forWritingAtPath: temporary) else {
                throw Failure("open", temporary, "cannot open the file for writing")
            }
            do {
                try handle.write(contentsOf: Data(bytes))
                try handle.synchronize()
                try handle.close()
            } catch {
                try? handle.close()
                throw Failure("write", temporary, reason(error))
            }
            // rename(2) replaces an existing file atomically.
            guard rename(temporary, path) == 0 else {
                throw Failure("rename", temporary, String(cString: strerror(errno)))
            }
        } catch let failure as Failure {
            try? FileManager.default.removeItem(atPath: temporary)
            throw failure
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw Failure("write", temporary, reason(error))
        }
    }

    /// Makes the entries of `directory` durable (fsync of the directory).
    public static func syncDirectory(_ directory: String) throws(Failure) {
        guard let handle = FileHandle(forReadingAtPath: directory) else {
            throw Failure("open directory", directory, "cannot open it")
        }
        defer { try? handle.close() }
        do {
            try handle.synchronize()
        } catch {
            throw Failure("fsync directory", directory, reason(error))
        }
    }

    /// Reads a whole file, refusing one larger than `limit` bytes before
    /// reading it, so a damaged file never makes the caller allocate without bound.
    public static func read(_ path: String, limit: Int) throws(Failure) -> [UInt8] {
        let size: Int
        do {
            size = ((try FileManager.default.attributesOfItem(atPath: path))[.size] as? NSNumber)?.intValue ?? 0
        } catch {
            throw Failure("open", path, reason(error))
        }
        guard size <= limit else { throw Failure("read", path, "file is \(size) bytes, over the limit of \(limit)") }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Failure("read", path, "cannot read the file")
        }
        return [UInt8](data)
    }

    private static func reason(_ error: any Error) -> String {
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
        return ns.localizedDescription
    }
}
