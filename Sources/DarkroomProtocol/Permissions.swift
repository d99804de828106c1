/// Which requests a client may send, by the role of its CURVE key
/// (section 12 of `protocol/drk1.md`). The servers' ZAP handler gives each
/// accepted connection its key's role as the ZAP user id; a connection
/// without keys has no role and is not checked (it is trusted for being on
/// loopback, or explicitly allowed with `--insecure`).
public enum Permissions {
    /// The commands that are requests, which the servers check; anything
    /// else a client sends is answered as an unexpected command.
    public static let requests: Set<Command> = [
        .ping, .submit, .status, .replay, .deadList, .deadRetry, .deadDiscard,
        .list, .get, .delete, .stats,
        .ready, .holding, .credit, .done, .fail, .heartbeat, .disconnect, .store,
    ]

    /// Whether a connection whose ZAP user id is `role` may send `command`.
    /// A user id that names no role may send nothing.
    public static func allows(role: String, _ command: Command) -> Bool {
        Role(name: role)?.requests.contains(command) ?? false
    }

    /// The ERROR reason for a refused command.
    public static func refusal(role: String, _ command: Command) -> String {
        let needed = Role.allCases.filter { $0 != .admin && $0.requests.contains(command) }.map(\.rawValue) + ["admin"]
        return "\(command) needs a key with the role \(needed.joined(separator: " or ")); this connection's key is a \(role) key"
    }
}
