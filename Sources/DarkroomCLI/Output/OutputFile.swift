import DarkroomCore
import Foundation

/// The files the commands write for the user: `get`'s image, the results
/// of `process`, the contact sheet. Written through `Posix`, so a failure
/// keeps its errno and is reported in plain words ("it is a directory")
/// rather than as Foundation's "NSCocoaErrorDomain error 512".
enum OutputFile {
    /// Writes `bytes` to `path` through a temporary file beside it and a
    /// rename (`DurableFile.write`), so no one sees half an image and a
    /// failed write leaves an older file there whole. Not fsynced, as
    /// Foundation's atomic write was not: nothing is committed that names
    /// the file, and `process` would wait on the disk twice an image.
    static func write(_ bytes: [UInt8], to path: String) throws(RuntimeError) {
        do {
            try DurableFile.write(bytes, to: path, sync: false)
        } catch {
            throw RuntimeError("cannot write \(path): \(reason(error, path: path))")
        }
    }

    /// Creates `path` and any directory missing on the way to it.
    static func makeDirectory(_ path: String, what: String) throws(RuntimeError) {
        do {
            try Posix.makeDirectories(path)
        } catch {
            // A directory on the way may be the one that failed.
            let reason = error.path == path ? error.reason : "\(error.path): \(error.reason)"
            throw RuntimeError("cannot create \(what) \(path): \(reason)")
        }
    }

    /// Why writing `path` failed. The error may be about the temporary file
    /// beside it, whose name means nothing to the user, so the system's
    /// text is used only where it speaks of `path` as well.
    static func reason(_ error: DurableFile.Failure, path: String) -> String {
        switch error.code {
        case EISDIR?:
            return "it is a directory"
        case ENOENT?:
            let directory = (path as NSString).deletingLastPathComponent
            return "the directory \(directory.isEmpty ? "." : directory) does not exist"
        default:
            return error.reason
        }
    }
}
