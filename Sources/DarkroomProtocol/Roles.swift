/// What a client key may do (section 12). Each allowlisted public key has
/// exactly one role; the servers' ZAP handler admits a key to a socket by
/// its role, and hands the role to the server as the connection's ZAP user
/// id, which decides the requests it may send (`Permissions`).
public enum Role: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Submits jobs, follows events, reads results from the storage node.
    case producer
    /// Takes jobs from the broker's backend and stores results.
    case worker
    /// Reserved for storage nodes; admitted to no socket today.
    case store
    /// Everything.
    case admin

    public var description: String { rawValue }

    /// Parses a role name, ignoring case and surrounding white space.
    public init?(name: String) {
        var scalars = Substring(name).unicodeScalars
        while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        self.init(rawValue: String(scalars).lowercased())
    }

    /// The sockets (by their DRK1 names, which are also their ZAP domains)
    /// that admit each role. Workers are kept off the events socket: they
    /// never need it, and the event stream names every job's source file.
    public static let admitted: [String: Set<Role>] = [
        "frontend": [.producer, .admin],
        "events": [.producer, .admin],
        "backend": [.worker, .admin],
        "store": [.worker, .producer, .admin],
    ]

    /// Whether a key with this role may connect to the socket named
    /// `socket`. An unknown socket admits only admin.
    public func mayConnect(to socket: String) -> Bool {
        if self == .admin { return true }
        return Role.admitted[socket]?.contains(self) ?? false
    }

    /// The requests a key with this role may send once connected; admin may
    /// send every request. Replies and events are never requests.
    public var requests: Set<Command> {
        switch self {
        case .producer: [.ping, .submit, .status, .replay, .deadList, .jobInfo, .jobList, .cancel, .list, .get, .stats]
        case .worker: [.ping, .ready, .holding, .credit, .done, .fail, .heartbeat, .disconnect, .store]
        case .store: []
        case .admin: Permissions.requests
        }
    }
}
