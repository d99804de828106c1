import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// A CURVE key on disk, in two text files that share a base name:
///
///     NAME.key          the public key and its metadata; not secret, goes
///                       into the servers' allowlist directory
///     NAME.key_secret   the same plus the secret key; mode 0600, stays
///                       with the process that uses it
///
/// Each file is lines of `field = value`; `#` starts a comment line and
/// blank lines are ignored. Keys are 40 characters of Z85 in double quotes
/// (Z85 uses `#` and `=`, never `"`):
///
///     # Darkroom CURVE public key "alice".
///     public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
///     name = alice
///     role = producer
///
/// `role` is one of producer, worker, store, admin (see `Role`); a server's
/// own key may leave it out. Other `field = value` lines are kept as metadata.
public struct KeyFile: Sendable, Hashable {
    public var publicKey: CurveKey
    /// Present when loaded from (or made for) a secret key file.
    public var secretKey: CurveKey?
    /// Every `field = value` except the keys, including `name` and `role`.
    public var metadata: [String: String]

    public static let publicExtension = "key"
    public static let secretExtension = "key_secret"
    /// Files larger than this are not key files.
    static let maxFileBytes = 64 * 1024

    /// A key file for `keyPair`.
    public init(keyPair: CurveKeyPair, name: String, role: Role?) {
        publicKey = keyPair.publicKey
        secretKey = keyPair.secretKey
        metadata = ["name": name]
        if let role { metadata["role"] = role.rawValue }
    }

    /// A fresh key pair (`zmq_curve_keypair`). Throws when libzmq has no CURVE.
    public static func generate(name: String, role: Role?) throws -> KeyFile {
        guard Curve.isAvailable else {
            throw SecurityError("this libzmq was built without CURVE support, so no keys can be made")
        }
        return KeyFile(keyPair: try CurveKeyPair.generate(), name: name, role: role)
    }

    public var name: String? { metadata["name"] }

    /// The role, or nil when the file names none. Loading already refused
    /// an unknown role name.
    public var role: Role? { metadata["role"].flatMap { Role(name: $0) } }

    /// The key pair, when the secret key is known.
    public var keyPair: CurveKeyPair? {
        secretKey.map { CurveKeyPair(publicKey: publicKey, secretKey: $0) }
    }

    // MARK: Text

    /// The public file's text.
    public var publicText: String {
        text(header: "# Darkroom CURVE public key\(nameSuffix).\n# Not secret: give it to the operators of the broker and storage nodes.\n",
             secret: false)
    }

    /// The secret file's text, or nil without a secret key.
    public var secretText: String? {
        guard secretKey != nil else { return nil }
        return text(header: "# Darkroom CURVE secret key\(nameSuffix).\n# KEEP IT PRIVATE: whoever holds this file can act as this key.\n",
                    secret: true)
    }

    private var nameSuffix: String { name.map { " \"\($0)\"" } ?? "" }

    private func text(header: String, secret: Bool) -> String {
        var out = header
        out += "public-key = \"\(publicKey.z85)\"\n"
        if secret, let secretKey { out += "secret-key = \"\(secretKey.z85)\"\n" }
        let order = ["name", "role"] + metadata.keys.filter { $0 != "name" && $0 != "role" }.sorted()
        for field in order {
            if let value = metadata[field] { out += "\(field) = \(value)\n" }
        }
        return out
    }

    /// Parses a key file's text; `source` names the file in errors.
    ///
    /// An error names the file, the line and the field, never text read from
    /// the file: a secret key file's lines are its secret, and before the
    /// whole file is parsed there is no telling which line holds it (a key
    /// with its `secret-key =` lost, a key split at one of the `=` that Z85
    /// uses). So a malformed line is described, not quoted, and a bad key is
    /// told by its length or alphabet. Only the field names this format
    /// defines are repeated back.
    public init(parsing text: String, source: String) throws(SecurityError) {
        var publicKey: CurveKey?
        var secretKey: CurveKey?
        var metadata: [String: String] = [:]
        var fieldLines: [String: Int] = [:]
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(rawLine).trimmingSpaces()
            if line.isEmpty || line.hasPrefix("#") { continue }
            let place = "\(source) line \(index + 1)"
            guard let equals = line.firstIndex(of: "=") else {
                throw SecurityError("\(place): expected 'field = value' or a '#' comment")
            }
            let field = String(line[..<equals]).trimmingSpaces().lowercased()
            var value = String(line[line.index(after: equals)...]).trimmingSpaces()
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast())
            }
            guard !field.isEmpty, field.unicodeScalars.allSatisfy({ KeyFile.fieldCharacters.contains($0) }) else {
                throw SecurityError("\(place): the text before '=' is not a field name (letters, digits, '-' and '_')")
            }
            if let first = fieldLines[field] {
                let named = KeyFile.definedFields.contains(field) ? field : "the field"
                throw SecurityError("\(place): \(named) is given twice (first on line \(first))")
            }
            fieldLines[field] = index + 1
            switch field {
            case "public-key", "secret-key":
                let key: CurveKey
                do {
                    key = try CurveKey(z85: value)
                } catch {
                    throw SecurityError("\(place): \(field) is not a CURVE key: \(KeyFile.keyProblem(value))")
                }
                if field == "public-key" { publicKey = key } else { secretKey = key }
            default:
                if field == "role", Role(name: value) == nil {
                    throw SecurityError("\(place): role is not one of \(Role.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                metadata[field] = value
            }
        }
        if let secretKey {
            // The public key follows from the secret key; a mismatch means
            // the file was edited or assembled from two pairs.
            let derived: CurveKey
            do {
                derived = try CurveKeyPair(secretKey: secretKey).publicKey
            } catch {
                throw SecurityError("\(source): cannot derive the public key from secret-key: \(error)")
            }
            if let publicKey, publicKey != derived {
                throw SecurityError("\(source): public-key does not belong to secret-key")
            }
            publicKey = derived
        }
        guard let publicKey else {
            // The first line whose field this format does not define: with
            // no key line at all, most likely a key split at one of its '='.
            if let line = fieldLines.filter({ !KeyFile.definedFields.contains($0.key) }).values.min() {
                throw SecurityError("\(source) line \(line): the text before '=' is not a field of a key file, "
                    + "and the file has no public-key line; is this a Darkroom key file?")
            }
            throw SecurityError("\(source): no public-key line; is this a Darkroom key file?")
        }
        self.publicKey = publicKey
        self.secretKey = secretKey
        self.metadata = metadata
    }

    /// Why `value` is not a key, in words that give away none of it: its
    /// length, or that a character is outside the Z85 alphabet (not which).
    static func keyProblem(_ value: String) -> String {
        let count = value.unicodeScalars.count
        if count != 40 {
            return "it has \(count) character\(count == 1 ? "" : "s") where a key has 40 (Z85, in double quotes)"
        }
        if !value.unicodeScalars.allSatisfy({ $0.isASCII && z85Characters.contains(UInt8($0.value)) }) {
            return "it has a character outside the Z85 alphabet"
        }
        return "it is not valid Z85"
    }

    /// The fields this format defines; an error may repeat these names back.
    private static let definedFields: Set<String> = ["public-key", "secret-key", "name", "role"]

    private static let z85Characters = Set(
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8
    )

    private static let fieldCharacters = Set("abcdefghijklmnopqrstuvwxyz0123456789-_".unicodeScalars)

    // MARK: Files

    /// `DIRECTORY/NAME.key` and `DIRECTORY/NAME.key_secret`.
    public static func paths(name: String, directory: String) -> (public: String, secret: String) {
        let base = URL(fileURLWithPath: directory).appendingPathComponent(name).path
        return (base + "." + publicExtension, base + "." + secretExtension)
    }

    /// Whether `name` can be a key file's base name: letters, digits, '.',
    /// '-' and '_', not starting with '.', at most 100 characters.
    public static func isValidName(_ name: String) -> Bool {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-".unicodeScalars)
        return !name.isEmpty && name.count <= 100 && !name.hasPrefix(".") && name.unicodeScalars.allSatisfy { allowed.contains($0) }
    }

    /// Loads a public or secret key file.
    public static func load(_ path: String) throws(SecurityError) -> KeyFile {
        try KeyFile(parsing: readText(path), source: path)
    }

    /// Loads a secret key file; a file without `secret-key` is an error.
    public static func loadSecret(_ path: String) throws(SecurityError) -> KeyFile {
        let file = try load(path)
        guard file.secretKey != nil else {
            throw SecurityError("\(path) holds no secret key; pass the .\(secretExtension) file made by 'darkroom keygen'")
        }
        return file
    }

    /// A warning when the secret key file at `path` can be read by users
    /// other than its owner; nil when it is private (or cannot be checked).
    ///
    /// The mode checked is the file's own, reached through any symbolic
    /// links: Kubernetes mounts a Secret as links (`server.key_secret` to
    /// `..data/server.key_secret`, `..data` to a timestamped directory), and
    /// a link's own mode (always 0777) says nothing about who can read the
    /// key. See `exposure(mode:owner:group:user:groups:)` for what counts.
    public static func exposureWarning(secretPath path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        guard let problem = exposure(mode: info.st_mode, owner: info.st_uid, group: info.st_gid,
                                     user: geteuid(), groups: processGroups()) else { return nil }
        var shown = path
        var link = stat()
        if lstat(path, &link) == 0, link.st_mode & S_IFMT == S_IFLNK, let target = realpath(path, nil) {
            shown += " (a link to \(String(cString: target)))"
            free(target)
        }
        return "\(shown) \(problem)"
    }

    /// What is wrong with a secret key file's permissions, or nil when only
    /// this process (and root) can read it.
    ///
    /// Any permission for other users is exposure. Permissions for the
    /// file's group are exposure too, with one exception: a file owned by
    /// another user and readable (only readable) by a group this process is
    /// in. There the group is how the owner lets this process in, not an
    /// extra: Kubernetes makes a Secret volume with `defaultMode: 0400` and
    /// a pod `fsGroup` into mode 0440, owned by root and group fsGroup, so a
    /// non-root container can read it; a host may give a key to a service's
    /// group (0640 root:darkroom). Who else is in that group cannot be seen
    /// from here; the owner chose it. A file this process owns needs no
    /// group bit, so there one is exposure.
    static func exposure(mode: mode_t, owner: uid_t, group: gid_t, user: uid_t, groups: Set<gid_t>) -> String? {
        // The group's read bit is no exposure when it is how this process
        // gets in; its other bits still are.
        let throughGroup = owner != user && groups.contains(group)
        // Group and other permissions folded into one rwx triple.
        let exposed = (mode & (throughGroup ? 0o030 : 0o070)) >> 3 | mode & 0o007
        guard exposed != 0 else { return nil }
        let what = exposed & 0o4 != 0 ? "is readable by other users"
            : exposed & 0o2 != 0 ? "can be changed by other users" : "is open to other users"
        let fix = owner == user ? "chmod 600 it" : "make it mode 400, or 440 for a group this process is in (for a Kubernetes Secret volume, defaultMode: 0400)"
        return "\(what) (mode \(String(mode & 0o777, radix: 8))); \(fix)"
    }

    /// The effective group and the supplementary groups of this process.
    static func processGroups() -> Set<gid_t> {
        var groups: Set<gid_t> = [getegid()]
        let count = getgroups(0, nil)
        if count > 0 {
            var list = [gid_t](repeating: 0, count: Int(count))
            let filled = getgroups(count, &list)
            if filled > 0 { groups.formUnion(list.prefix(Int(filled))) }
        }
        return groups
    }

    /// Writes `NAME.key` and `NAME.key_secret` (mode 0600) into `directory`,
    /// creating it if needed. Refuses to replace existing files.
    @discardableResult
    public func save(directory: String) throws(SecurityError) -> (public: String, secret: String) {
        guard let name, KeyFile.isValidName(name) else {
            throw SecurityError("'\(name ?? "")' cannot be a key file name (use letters, digits, '.', '-' and '_')")
        }
        guard let secretText else { throw SecurityError("there is no secret key to save for '\(name)'") }
        let paths = KeyFile.paths(name: name, directory: directory)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw SecurityError("cannot create the directory \(directory): \(KeyFile.reason(error))")
        }
        for path in [paths.public, paths.secret] where FileManager.default.fileExists(atPath: path) {
            throw SecurityError("\(path) already exists; remove it or choose another name")
        }
        // The secret first, so a failure never leaves a public key whose
        // secret is lost.
        try KeyFile.writeNew(paths.secret, text: secretText, mode: 0o600)
        do {
            try KeyFile.writeNew(paths.public, text: publicText, mode: 0o644)
        } catch {
            try? FileManager.default.removeItem(atPath: paths.secret)
            throw error
        }
        return paths
    }

    /// Creates `path` (failing if it exists) with `mode` from the start, so a
    /// secret is never readable by others, not even for a moment.
    static func writeNew(_ path: String, text: String, mode: mode_t) throws(SecurityError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else {
            throw SecurityError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        // The umask may have removed bits; set exactly the mode asked for.
        _ = fchmod(fd, mode)
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: Data(text.utf8))
            try handle.synchronize()
            try handle.close()
        } catch {
            try? handle.close()
            try? FileManager.default.removeItem(atPath: path)
            throw SecurityError("cannot write \(path): \(reason(error))")
        }
    }

    static func readText(_ path: String) throws(SecurityError) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let code = errno
            // A link whose target is gone (a Secret that was never mounted,
            // a key moved away) would otherwise read as "no such file"
            // while `ls` shows the name.
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: path) {
                let why = code == ENOENT ? "which does not exist" : "which cannot be followed (\(String(cString: strerror(code))))"
                throw SecurityError("cannot read the key file \(path): it is a symbolic link to \(target), \(why)")
            }
            let reason = code == ENOENT ? "no such file" : String(cString: strerror(code))
            throw SecurityError("cannot read the key file \(path): \(reason)")
        }
        guard info.st_mode & S_IFMT != S_IFDIR else {
            throw SecurityError("\(path) is a directory, not a key file")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw SecurityError("cannot read the key file \(path): \(reason(error))")
        }
        guard data.count <= maxFileBytes else {
            throw SecurityError("\(path) is \(data.count) bytes, too large for a key file")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw SecurityError("\(path) is not UTF-8 text; is it a Darkroom key file?")
        }
        return text
    }

    static func reason(_ error: any Error) -> String {
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        switch ns.code {
        case NSFileNoSuchFileError, NSFileReadNoSuchFileError: return "no such file"
        case NSFileReadNoPermissionError, NSFileWriteNoPermissionError: return "permission denied"
        default: return ns.localizedDescription
        }
    }
}

/// A key file prints its public key, name and role, never its secret key:
/// `CurveKey` prints its Z85 text, so the synthesized forms (in string
/// interpolation, `dump`, a failed test expectation) would print the
/// secret. Other metadata is left out too: a secret key file whose
/// `secret-key` field was mistyped keeps the key as metadata.
extension KeyFile: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        var parts = ["public-key \(publicKey.z85)", secretKey == nil ? "no secret key" : "secret key withheld"]
        if let name { parts.append("name \(name)") }
        if let role { parts.append("role \(role)") }
        return "KeyFile(\(parts.joined(separator: ", ")))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(self, children: ["publicKey": publicKey.z85, "secretKey": secretKey == nil ? "none" : "withheld",
                                "name": name ?? "", "role": role?.rawValue ?? ""],
               displayStyle: .struct)
    }
}
