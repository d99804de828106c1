import DarkroomCore
import Foundation

/// Turns the FILE|DIR arguments of `process` and `submit` into a list of files.
enum InputFiles {
    struct Input: Sendable {
        var path: String
        /// Why this input cannot be read, if known before reading (missing file).
        var problem: String?
    }

    struct ReadError: Error {
        var message: String
    }

    /// Expands directories to their JPEG files (sorted by name, not recursive).
    /// Missing paths are kept, with a problem, so they are reported in order.
    static func expand(_ arguments: [String]) -> [Input] {
        var inputs: [Input] = []
        let fm = FileManager.default
        for argument in arguments {
            var isDirectory: ObjCBool = false
            guard fm.fileExists(atPath: argument, isDirectory: &isDirectory) else {
                inputs.append(Input(path: argument, problem: "no such file or directory"))
                continue
            }
            guard isDirectory.boolValue else {
                inputs.append(Input(path: argument))
                continue
            }
            let names = (try? fm.contentsOfDirectory(atPath: argument)) ?? []
            let jpegs = names.filter(isJPEGName).sorted()
            if jpegs.isEmpty {
                inputs.append(Input(path: argument, problem: "directory has no .jpg or .jpeg files"))
            }
            // The directory as given, then the name: "photos" and "photos/"
            // both give "photos/a.jpg".
            let prefix = argument.hasSuffix("/") ? argument : argument + "/"
            for name in jpegs {
                inputs.append(Input(path: prefix + name))
            }
        }
        return inputs
    }

    /// Whether a directory entry is a JPEG by its name: not hidden, and
    /// ending in .jpg or .jpeg in any case.
    static func isJPEGName(_ name: String) -> Bool {
        guard !name.hasPrefix("."), let dot = name.utf8.lastIndex(of: UInt8(ascii: ".")) else { return false }
        let ext = name[name.utf8.index(after: dot)...].lowercased()
        return ext == "jpg" || ext == "jpeg"
    }

    /// Output base names: the input's name without its extension, made unique
    /// with -2, -3... when two inputs share a name.
    static func outputNames(for paths: [String]) -> [String] {
        var seen: [String: Int] = [:]
        return paths.map { path in
            let base = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
            let stem = base.isEmpty ? "image" : base
            let n = seen[stem, default: 0] + 1
            seen[stem] = n
            return n == 1 ? stem : "\(stem)-\(n)"
        }
    }

    /// Reads a file, refusing one over `limit` bytes before reading it:
    /// open, fstat, read and close, with no other system calls (a submit
    /// reads thousands of small files a second).
    static func read(_ path: String, limit: Int) throws(ReadError) -> [UInt8] {
        let unreadable = ReadError(message: "cannot read file (permission denied or not a regular file)")
        guard let file = try? Posix.openForReading(path) else { throw unreadable }
        defer { try? file.close() }
        guard let info = try? file.info(), info.isRegularFile else { throw unreadable }
        if info.size > limit {
            throw ReadError(message: "file is \(info.size) bytes, over the \(limit)-byte input limit")
        }
        do {
            return try file.readAll(limit: limit)
        } catch where error.code == EFBIG {
            throw ReadError(message: "file grew past the \(limit)-byte input limit while being read")
        } catch {
            throw unreadable
        }
    }
}
