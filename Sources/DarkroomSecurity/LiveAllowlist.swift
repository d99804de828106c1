import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Synchronization

/// The allowlist a running server admits clients by. It is loaded from the
/// `--allow` directory at start and loaded again on SIGHUP or when the
/// directory's files change (a Kubernetes Secret update swaps the files
/// behind their `..data` link), so keys are added and revoked without a
/// restart. The servers ask it about every request's key (`admits`), so a
/// revoked key's connections are refused from the next message on.
///
/// The server's own public key is always admitted, as admin: whoever holds
/// the server's secret key is the server. This lets a server's health probe
/// use the server's own key file, with no client key mounted for it.
///
/// Shared between the ZAP handler's thread, the servers' threads and the
/// signal handler: its state is behind a mutex.
public final class LiveAllowlist: Sendable {
    /// What a reload changed.
    public struct Change: Sendable, Equatable {
        /// Names of keys now admitted that were not before.
        public var added: [String] = []
        /// Keys no longer admitted (removed, or whose role changed): their
        /// connections must be refused or closed.
        public var revoked: [CurveKey] = []
        /// Names of keys whose role changed.
        public var changed: [String] = []

        public var isEmpty: Bool { added.isEmpty && revoked.isEmpty && changed.isEmpty }

        /// One line for the log: what was added, changed and revoked (a
        /// revoked key by the first characters of its public key).
        public var summary: String {
            var parts: [String] = []
            if !added.isEmpty { parts.append("added \(added.joined(separator: ", "))") }
            if !changed.isEmpty { parts.append("role changed for \(changed.joined(separator: ", "))") }
            if !revoked.isEmpty {
                parts.append("revoked \(revoked.count) key(s) (\(revoked.map { String($0.z85.prefix(8)) + "…" }.joined(separator: ", ")))")
            }
            return parts.isEmpty ? "nothing changed" : parts.joined(separator: "; ")
        }
    }

    /// Reloads now (SIGHUP) and returns the line to log.
    public func reloadNow(because reason: String) -> (ok: Bool, line: String) {
        do {
            let change = try reload()
            return (true, "allowlist reloaded (\(reason)): \(change?.summary ?? "nothing changed"); \(current.count) key(s) allowed")
        } catch {
            return (false, "allowlist not reloaded (\(reason)): \(error); the keys loaded before stay in force")
        }
    }

    private struct State: Sendable {
        var allowlist: Allowlist
        var signature: [String]
    }

    public let directory: String
    public let serverKey: CurveKey
    private let state: Mutex<State>
    private let observers = Mutex<[@Sendable (Change) -> Void]>([])

    /// The name the server's own key goes by in logs.
    public static let serverKeyName = "this server's own key"

    public init(directory: String, serverKey: CurveKey) throws(SecurityError) {
        self.directory = directory
        self.serverKey = serverKey
        let loaded = try Allowlist(directory: directory)
        state = Mutex(State(allowlist: LiveAllowlist.withServerKey(loaded, serverKey), signature: LiveAllowlist.signature(of: directory)))
    }

    private static func withServerKey(_ allowlist: Allowlist, _ key: CurveKey) -> Allowlist {
        var allowlist = allowlist
        allowlist.allow(key, name: serverKeyName, role: .admin)
        return allowlist
    }

    /// The allowlist as last loaded.
    public var current: Allowlist { state.withLock { $0.allowlist } }

    /// The ZAP verdict on `key` for a socket in `domain`.
    public func decide(key: CurveKey?, domain: String) -> Allowlist.Decision {
        current.decide(key: key, domain: domain)
    }

    /// Whether the key whose Z85 text is `keyText` is still admitted (with
    /// the role it was admitted with, `role`).
    public func admits(keyText: String, role: Role?) -> Bool {
        guard let key = try? CurveKey(z85: keyText) else { return false }
        return state.withLock { state in
            guard let entry = state.allowlist.entries[key] else { return false }
            return role == nil || entry.role == role
        }
    }

    /// Calls `observer` after each reload that changed something.
    public func onChange(_ observer: @escaping @Sendable (Change) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    /// Loads the directory again and applies it; nil when nothing changed.
    /// A directory that no longer loads leaves the allowlist as it was.
    @discardableResult
    public func reload() throws(SecurityError) -> Change? {
        let loaded = LiveAllowlist.withServerKey(try Allowlist(directory: directory), serverKey)
        let signature = LiveAllowlist.signature(of: directory)
        let change = state.withLock { state -> Change in
            let change = LiveAllowlist.difference(from: state.allowlist, to: loaded)
            state.allowlist = loaded
            state.signature = signature
            return change
        }
        guard !change.isEmpty else { return nil }
        for observer in observers.withLock({ $0 }) { observer(change) }
        return change
    }

    /// Reloads when the directory's key files changed since the last load
    /// (names, sizes, modification times and files behind links); nil when
    /// they did not or nothing the allowlist holds changed.
    public func reloadIfChanged() throws(SecurityError) -> Change? {
        let now = LiveAllowlist.signature(of: directory)
        guard state.withLock({ $0.signature != now }) else { return nil }
        do {
            return try reload()
        } catch {
            // Remember the broken state, so the same error is not logged every check.
            state.withLock { $0.signature = now }
            throw error
        }
    }

    private static func difference(from old: Allowlist, to new: Allowlist) -> Change {
        var change = Change()
        for (key, entry) in new.entries where old.entries[key] == nil { change.added.append(entry.name) }
        for (key, entry) in old.entries {
            guard let now = new.entries[key] else {
                change.revoked.append(key)
                continue
            }
            if now.role != entry.role {
                change.revoked.append(key)
                change.changed.append(now.name)
            }
        }
        change.added.sort()
        change.changed.sort()
        return change
    }

    /// What the directory holds, as far as a reload cares: each public key
    /// file's name and the identity of the file behind it.
    private static func signature(of directory: String) -> [String] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
        return names.filter { $0.hasSuffix("." + KeyFile.publicExtension) && !$0.hasPrefix(".") }.map { name in
            var info = stat()
            let path = directory + "/" + name
            guard stat(path, &info) == 0 else { return name + " missing" }
            return "\(name) \(info.st_ino) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
        }
    }
}
