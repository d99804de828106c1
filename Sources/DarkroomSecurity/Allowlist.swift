import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// The client public keys a server admits, each with its role.
public struct Allowlist: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public var name: String
        public var role: Role
        public init(name: String, role: Role) {
            self.name = name
            self.role = role
        }
    }

    /// The entries by public key.
    public private(set) var entries: [CurveKey: Entry]
    /// Public key files in the directory that name no role (typically a
    /// server's own key); they admit nothing.
    public private(set) var skipped: [String] = []

    public init(entries: [CurveKey: Entry] = [:]) {
        self.entries = entries
    }

    /// Adds or replaces one key.
    public mutating func allow(_ key: CurveKey, name: String, role: Role) {
        entries[key] = Entry(name: name, role: role)
    }

    public var count: Int { entries.count }

    /// Loads every `*.key` file in `directory` (secret `*.key_secret` files
    /// are ignored). A file that does not parse is an error naming the file;
    /// a file without `role` is listed in `skipped`; the same key with two
    /// different roles is an error.
    public init(directory: String) throws(SecurityError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw SecurityError("the allowlist directory \(directory) does not exist")
        }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        } catch {
            throw SecurityError("cannot list the allowlist directory \(directory): \(KeyFile.reason(error))")
        }
        self.init()
        for fileName in names where fileName.hasSuffix("." + KeyFile.publicExtension) && !fileName.hasPrefix(".") {
            let path = URL(fileURLWithPath: directory).appendingPathComponent(fileName).path
            let file = try KeyFile.load(path)
            guard let role = file.role else {
                skipped.append(path)
                continue
            }
            let name = file.name ?? String(fileName.dropLast(KeyFile.publicExtension.count + 1))
            if let existing = entries[file.publicKey], existing.role != role {
                throw SecurityError("\(path): this public key is already allowed as \(existing.role) (\(existing.name)); one key has one role")
            }
            entries[file.publicKey] = Entry(name: name, role: role)
        }
    }

    /// The verdict on a client that presents `key` to a socket in `domain`.
    public func decide(key: CurveKey?, domain: String) -> Decision {
        guard let key else { return .denied(reason: "not a CURVE client") }
        guard let entry = entries[key] else { return .denied(reason: "unknown key") }
        guard entry.role.mayConnect(to: domain) else {
            return .denied(reason: "role \(entry.role) (\(entry.name)) may not use \(domain)")
        }
        return .allowed(entry)
    }

    public enum Decision: Sendable, Hashable {
        case allowed(Entry)
        case denied(reason: String)
    }
}
