/// Which requests a client may send, by the role of its CURVE key
/// (section 12 of `protocol/drk1.md`). The servers' ZAP handler gives each
/// accepted connection its key's role as the ZAP user id; a connection
/// without keys has no role and is not checked (it is trusted for being on
/// loopback, or explicitly allowed with `--insecure`).
public enum Permissions {
    /// The commands each role may send. Admin may send everything; replies
    /// and events are never requests, so no role sends them.
    public static let allowed: [String: Set<Command>] = [
        "producer": [.ping, .submit, .status, .replay, .deadList, .list, .get, .stats],
        "worker": [.ping, .ready, .holding, .credit, .done, .fail, .heartbeat, .disconnect, .store],
    ]

    /// The commands that are requests, which the servers check; anything
    /// else a client sends is answered as an unexpected command.
    public static let requests: Set<Command> = allowed.values.reduce(into: [.deadRetry, .deadDiscard, .delete]) { $0.formUnion($1) }

    /// Whether a connection whose key has `role` may send `command`.
    public static func allows(role: String, _ command: Command) -> Bool {
        if role == "admin" { return true }
        return allowed[role]?.contains(command) ?? false
    }

    /// The ERROR reason for a refused command.
    public static func refusal(role: String, _ command: Command) -> String {
        let needed = allowed.filter { $0.value.contains(command) }.keys.sorted() + ["admin"]
        return "\(command) needs a key with the role \(needed.joined(separator: " or ")); this connection's key is a \(role) key"
    }
}
