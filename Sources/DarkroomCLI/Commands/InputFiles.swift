import DarkroomCore
import DarkroomFetch
import DarkroomProtocol
import Foundation

/// Turns the FILE|DIR arguments of `process` and `submit` into a list of files.
enum InputFiles {
    struct Input: Sendable {
        /// The file's path, or the URL of a web source: the name shown for
        /// the input and the job's source name.
        var path: String
        /// Why this input cannot be read, if known before reading (missing file).
        var problem: String?
        /// An http:// or https:// URL, downloaded before it is checked.
        var isURL = false
    }

    struct ReadError: Error {
        var message: String
    }

    /// Expands directories to their image files, sorted by name; with
    /// `recursive`, those of their subdirectories too, at any depth, sorted
    /// by path (hidden files and directories left out, a directory reached
    /// twice through links taken once). Missing paths are kept, with a
    /// problem, so they are reported in order.
    static func expand(_ arguments: [String], recursive: Bool = false) -> [Input] {
        var inputs: [Input] = []
        let fm = FileManager.default
        for argument in arguments {
            var isDirectory: ObjCBool = false
            guard fm.fileExists(atPath: argument, isDirectory: &isDirectory) else {
                // A quoted pattern that matched nothing is left as it was.
                let problem = argument.contains(where: { "*?[".contains($0) })
                    ? "no such file or directory, and no file matches it as a pattern" : "no such file or directory"
                inputs.append(Input(path: argument, problem: problem))
                continue
            }
            guard isDirectory.boolValue else {
                inputs.append(Input(path: argument))
                continue
            }
            // The directory as given, then the name: "photos" and "photos/"
            // both give "photos/a.jpg".
            let prefix = argument.hasSuffix("/") ? argument : argument + "/"
            var visited = Set<Posix.FileIdentity>()
            let images = imagesUnder(argument, recursive: recursive, visited: &visited)
            if images.files.isEmpty {
                let deeper = !recursive && images.subdirectories > 0
                    ? " (its \(images.subdirectories) subdirector\(images.subdirectories == 1 ? "y is" : "ies are") not searched without --recursive)" : ""
                inputs.append(Input(path: argument, problem: "directory has no .jpg, .jpeg, .png, .webp, .gif, .heic, .heif, .avif, .tif or .tiff files\(deeper)"))
            }
            for relative in images.files {
                inputs.append(Input(path: prefix + relative))
            }
        }
        return inputs
    }

    /// The image files in `directory` (paths relative to it), sorted, and
    /// how many subdirectories it has; with `recursive`, the images of the
    /// subdirectories as well, depth first in name order.
    private static func imagesUnder(_ directory: String, recursive: Bool,
                                    visited: inout Set<Posix.FileIdentity>) -> (files: [String], subdirectories: Int) {
        // Links can only lead back when subdirectories are walked.
        if recursive, let identity = try? Posix.info(directory)?.identity {
            guard visited.insert(identity).inserted else { return ([], 0) }
        }
        let names = ((try? Posix.listDirectory(directory)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
        var files: [String] = []
        var subdirectories = 0
        for name in names {
            // An image's name is taken as a file without a stat (a submit
            // of thousands of files would pay one each); its read says
            // if it is not one. Only the other names may be directories.
            if isImageName(name) {
                files.append(name)
                continue
            }
            let path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
            guard (try? Posix.info(path))??.isDirectory == true else { continue }
            subdirectories += 1
            if recursive {
                files += imagesUnder(path, recursive: true, visited: &visited).files.map { name + "/" + $0 }
            }
        }
        return (files, subdirectories)
    }

    /// `-r, --recursive`, of `process` and `submit`.
    static let recursiveOption = OptionSpec.flag(
        "recursive", short: "r", help: "Take the images in the directories' subdirectories too, at any depth (hidden ones left out).")

    /// The inputs of `submit`, from its arguments and `--from-list`.
    static func submitInputs(_ args: ParsedArguments) throws -> [Input] {
        let recursive = args.flag("recursive")
        let list = args.value("from-list")
        if args.positionals.isEmpty && list == nil {
            throw UsageError("missing expected argument '<inputs> ...' (or --from-list FILE, or --follow DIR)")
        }
        let inputs: [Input]
        do {
            inputs = try gather(args.positionals, fromList: list, recursive: recursive)
        } catch {
            throw RuntimeError(error.message)
        }
        if inputs.isEmpty { throw RuntimeError("no inputs: the list \(list ?? "-") names none") }
        return inputs
    }

    /// The inputs of `submit`: its arguments, then the lines of the
    /// `--from-list` file (`-` for stdin), in order. URLs are kept as they
    /// are; paths are expanded as `expand` does, after quoted globs.
    static func gather(_ arguments: [String], fromList list: String?, recursive: Bool = false) throws(ReadError) -> [Input] {
        var entries = arguments
        if let list { entries += try listEntries(list) }
        var inputs: [Input] = []
        for entry in entries {
            if FetchRequest.isWebURL(entry) {
                // The URL becomes the job's source name: refused here, before
                // its download, if it is too long for one.
                let limit = Wire.Limit.sourceNameBytes
                let problem = entry.utf8.count > limit
                    ? "cannot submit: the URL is longer than the \(limit) bytes a job's source name may have" : nil
                inputs.append(Input(path: entry, problem: problem, isURL: true))
            } else if entry.contains("://"), !FileManager.default.fileExists(atPath: entry) {
                inputs.append(Input(path: entry, problem: "cannot download: only http:// and https:// URLs are supported", isURL: true))
            } else {
                inputs += expand(Globs.expand([entry]), recursive: recursive)
            }
        }
        return inputs
    }

    /// The entries of a list file, one a line: surrounding blanks are
    /// dropped, and so are empty lines and lines that start with `#`.
    static func listEntries(_ list: String) throws(ReadError) -> [String] {
        let data: Data
        if list == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            // Through a file handle, so a pipe (`--from-list <(…)`) reads too.
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: list, isDirectory: &isDirectory) else {
                throw ReadError(message: "cannot read the list \(list): no such file")
            }
            guard !isDirectory.boolValue, let handle = FileHandle(forReadingAtPath: list) else {
                throw ReadError(message: "cannot read the list \(list): \(isDirectory.boolValue ? "a directory" : "permission denied")")
            }
            defer { try? handle.close() }
            data = handle.readDataToEndOfFile()
        }
        return String(decoding: data, as: UTF8.self)
            .split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    /// Whether a directory entry is a source image by its name: not
    /// hidden, and ending in .jpg, .jpeg, .png, .webp, .gif, .heic, .heif, .tif, .tiff or
    /// .avif in any case.
    static func isImageName(_ name: String) -> Bool {
        guard !name.hasPrefix("."), let dot = name.utf8.lastIndex(of: UInt8(ascii: ".")) else { return false }
        let ext = name[name.utf8.index(after: dot)...].lowercased()
        return ["jpg", "jpeg", "png", "webp", "gif", "heic", "heif", "avif", "tif", "tiff"].contains(ext)
    }

    /// Output base names: the input's name without its extension, made unique
    /// with -2, -3... A name stands for every file written under it, NAME.jpg
    /// and (with `thumbnails`) NAME.thumb.jpg (or the `extensions` given),
    /// so it is taken when any of
    /// them is another input's file too: not only a second "x.jpg", but
    /// "x.thumb.jpg" beside "x.jpg" (whose thumbnail it would overwrite), or
    /// "x-2.jpg" beside two "x.jpg".
    static func outputNames(for paths: [String], thumbnails: Bool,
                            extensions: (full: String, thumbnail: String) = ("jpg", "jpg")) -> [String] {
        var taken: Set<String> = []
        // The suffix each stem goes on from, so a thousand inputs of one
        // name do not each try every suffix before theirs.
        var nextSuffix: [String: Int] = [:]
        return paths.map { path in
            let base = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
            let stem = base.isEmpty ? "image" : base
            var n = nextSuffix[stem, default: 1]
            while true {
                let name = n == 1 ? stem : "\(stem)-\(n)"
                let full = name + "." + extensions.full
                let files = thumbnails ? [full, name + ".thumb." + extensions.thumbnail] : [full]
                n += 1
                if files.allSatisfy({ !taken.contains($0) }) {
                    taken.formUnion(files)
                    nextSuffix[stem] = n
                    return name
                }
            }
        }
    }

    /// Reads a file, refusing one over `limit` bytes before reading it:
    /// open, fstat, read and close, with no other system calls (a submit
    /// reads thousands of small files a second).
    static func read(_ path: String, limit: Int) throws(ReadError) -> [UInt8] {
        switch try read(path, limit: limit, head: 0, whole: { _ in true }) {
        case .whole(let bytes): bytes
        case .head: preconditionFailure("a whole read gave a part")
        }
    }

    /// A file as `read(_:limit:head:whole:)` read it.
    enum Read {
        /// All of its bytes.
        case whole([UInt8])
        /// Its first bytes only (all of them when it is no longer), and its
        /// size when opened.
        case head([UInt8], size: Int)
    }

    /// Reads a file whole when `whole` says so of its size (the size fstat
    /// gives, after the checks against `limit`), otherwise only its first
    /// `head` bytes: enough for a JPEG's header, without reading, say, 20 MB
    /// of scan data that the caller will not keep.
    static func read(_ path: String, limit: Int, head: Int, whole: (Int) -> Bool) throws(ReadError) -> Read {
        let unreadable = ReadError(message: "cannot read file (permission denied or not a regular file)")
        guard let file = try? Posix.openForReading(path) else { throw unreadable }
        defer { try? file.close() }
        guard let info = try? file.info(), info.isRegularFile else { throw unreadable }
        if info.size > limit {
            throw ReadError(message: "file is \(info.size) bytes, over the \(limit)-byte input limit")
        }
        do {
            if whole(info.size) { return .whole(try file.readAll(limit: limit, size: info.size)) }
            return .head(try file.readPrefix(min(head, info.size)), size: info.size)
        } catch where error.code == EFBIG {
            throw ReadError(message: "file grew past the \(limit)-byte input limit while being read")
        } catch {
            throw unreadable
        }
    }
}
