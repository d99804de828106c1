import DarkroomProtocol

/// The subscriptions of the events socket. The socket is an XPUB in manual
/// mode: every subscribe and unsubscribe comes up here, and only the
/// topics DRK1 defines (`ev`, `eb`, and the empty prefix, which takes both)
/// are applied; any other subscription is dropped at no cost, so a peer
/// cannot make the broker keep and match arbitrary prefixes. (The socket's
/// `ZMQ_MAXMSGSIZE` of `maxMessageBytes` keeps a huge one from even being
/// read: ZeroMQ drops the peer that sends it.)
struct EventSubscriptions {
    /// The largest frame the events socket reads. ZeroMQ applies the limit
    /// to the CURVE handshake's commands too (HELLO is 200 bytes, INITIATE
    /// carries the client's metadata, and an encrypted subscription grows
    /// by the MESSAGE command's overhead), so it is set well above the
    /// longest DRK1 topic: a few KiB is nothing to the broker, a huge
    /// subscription is still never read.
    static let maxMessageBytes: Int64 = 4096

    /// The topics a subscriber may take.
    static let topics: Set<[UInt8]> = [[], Wire.eventTopic, Wire.eventBatchTopic]

    /// Applied subscriptions per topic (one per subscriber that took it).
    private(set) var counts: [[UInt8]: Int] = [:]

    /// What to do with one message the XPUB passed up.
    enum Decision: Equatable {
        case subscribe([UInt8])
        case unsubscribe([UInt8])
        case drop
    }

    /// Counts a subscribe or unsubscribe of a DRK1 topic and says to apply
    /// it; anything else is dropped.
    mutating func take(_ message: [UInt8]) -> Decision {
        guard let kind = message.first else { return .drop }
        let topic = Array(message.dropFirst())
        guard Self.topics.contains(topic) else { return .drop }
        switch kind {
        case 1:
            counts[topic, default: 0] += 1
            return .subscribe(topic)
        case 0:
            // An unsubscribe comes only for a topic that was applied (the
            // subscriber's own, or all of its own when it disconnects).
            guard let count = counts[topic], count > 0 else { return .drop }
            counts[topic] = count == 1 ? nil : count - 1
            return .unsubscribe(topic)
        default:
            return .drop
        }
    }

    /// Whether some subscriber receives messages published under `topic`.
    func wants(_ topic: [UInt8]) -> Bool {
        counts.keys.contains { topic.starts(with: $0) }
    }
}
