import DarkroomProtocol

/// The topic prefixes subscribed to on the events socket. An XPUB socket
/// passes up one message per change: byte 1 then the prefix when the first
/// subscriber takes it, byte 0 then the prefix when the last one drops it
/// (or disconnects).
struct EventSubscriptions {
    private(set) var prefixes: Set<[UInt8]> = []

    mutating func apply(_ message: [UInt8]) {
        guard let kind = message.first else { return }
        let prefix = Array(message.dropFirst())
        switch kind {
        case 1: prefixes.insert(prefix)
        case 0: prefixes.remove(prefix)
        default: break
        }
    }

    /// Whether some subscriber receives messages published under `topic`.
    func wants(_ topic: [UInt8]) -> Bool {
        prefixes.contains { topic.starts(with: $0) }
    }
}
