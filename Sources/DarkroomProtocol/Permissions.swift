/// Which requests a client may send, by the role of its CURVE key
/// (section 12 of `protocol/drk1.md`). The servers' ZAP handler gives each
/// accepted connection its key's role as the ZAP user id; a connection
/// without keys has no role and is not checked (it is trusted for being on
/// loopback, or explicitly allowed with `--insecure`).
public enum Permissions {
    /// The commands that are requests, which the servers check; anything
    /// else a client sends is answered as an unexpected command.
    public static let requests: Set<Command> = [
        .ping, .submit, .status, .replay, .deadList, .deadRetry, .deadDiscard, .jobInfo, .cancel, .pause, .resume, .jobList,
        .list, .get, .delete, .stats,
        .ready, .holding, .credit, .done, .fail, .heartbeat, .disconnect, .store,
    ]

    /// Whether a connection whose ZAP user id is `userID` may send `command`.
    /// A user id that names no role may send nothing.
    public static func allows(role userID: String, _ command: Command) -> Bool {
        ConnectionIdentity(userID: userID).role?.requests.contains(command) ?? false
    }

    /// The ERROR reason for a refused command.
    public static func refusal(role userID: String, _ command: Command) -> String {
        let needed = Role.allCases.filter { $0 != .admin && $0.requests.contains(command) }.map(\.rawValue) + ["admin"]
        return "\(command) needs a key with the role \(needed.joined(separator: " or ")); this connection's key is a \(ConnectionIdentity(userID: userID).roleName) key"
    }

    /// Why a connection whose ZAP user id is `userID` may not send this
    /// frontend request, or nil when it may: the command's role, and one
    /// rule on a field, CANCEL `queued` (every waiting job), which is an
    /// admin's, as PAUSE is.
    public static func refusal(role userID: String, _ message: FrontendMessage) -> String? {
        if requests.contains(message.command), !allows(role: userID, message.command) { return refusal(role: userID, message.command) }
        let identity = ConnectionIdentity(userID: userID)
        if case .cancel(let request) = message, request.target == .queued, identity.role != .admin {
            return "CANCEL queued (every waiting job) needs a key with the role admin; this connection's key is a \(identity.roleName) key, which cancels one job at a time"
        }
        return nil
    }
}

/// What a server knows about a CURVE connection from its ZAP user id: the
/// role of the key its ZAP handler admitted, and the key (Z85 text), so a
/// request from a key revoked since can be refused. The user id is the
/// role, a space and the key; a user id that is just a role (a handler that
/// does not give the key) carries no key.
public struct ConnectionIdentity: Sendable, Hashable {
    public var role: Role?
    public var key: String?

    public init(role: Role?, key: String?) {
        self.role = role
        self.key = key
    }

    public init(userID: String) {
        let parts = userID.split(separator: " ", maxSplits: 1)
        role = parts.first.flatMap { Role(name: String($0)) }
        key = parts.count > 1 ? String(parts[1]) : nil
    }

    /// The ZAP user id that carries this identity.
    public var userID: String {
        [role?.rawValue ?? "", key ?? ""].filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// The role's name for messages, or "unknown".
    public var roleName: String { role?.rawValue ?? "unknown" }
}
