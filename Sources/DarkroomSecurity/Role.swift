import DarkroomZMQ

/// What a client key may do. Each allowlisted public key has exactly one role.
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

    /// Parses a role name, ignoring case and surrounding spaces.
    public init?(name: String) {
        self.init(rawValue: name.trimmingSpaces().lowercased())
    }

    /// The roles admitted to each ZAP domain (see `ServerCurve.Domain`).
    /// Workers are kept off the events socket: they never need it, and the
    /// event stream names every job's source file.
    public static let admitted: [String: Set<Role>] = [
        ServerCurve.Domain.frontend: [.producer, .admin],
        ServerCurve.Domain.events: [.producer, .admin],
        ServerCurve.Domain.backend: [.worker, .admin],
        ServerCurve.Domain.store: [.worker, .producer, .admin],
    ]

    /// Whether a key with this role may connect to a socket in `domain`.
    /// An unknown domain admits only admin.
    public func mayConnect(toDomain domain: String) -> Bool {
        if self == .admin { return true }
        return Role.admitted[domain]?.contains(self) ?? false
    }
}

extension String {
    func trimmingSpaces() -> String {
        var scalars = Substring(self).unicodeScalars
        while let first = scalars.first, first.properties.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
