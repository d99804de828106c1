import DarkroomProtocol

/// The subscriptions of the events socket. The socket is an XPUB in manual
/// mode: every subscribe and unsubscribe comes up here, and only the
/// topics DRK1 defines (`ev`, `eb`, and the empty prefix, which takes both)
/// are applied; any other subscription is dropped, so a peer cannot make
/// the broker match arbitrary prefixes. (The socket's `ZMQ_MAXMSGSIZE` of
/// `maxMessageBytes` keeps a huge one from even being read: ZeroMQ drops
/// the peer that sends it.)
///
/// Known limits, both libzmq's (4.3): it keeps every subscription a
/// connected peer sends, applied or not, to unsubscribe it when the peer
/// goes, at some 35 bytes of memory for each byte of topic, however many the
/// peer sends; and a message that is not a subscription, which it queues
/// without its peer, makes it apply the subscriptions read after it in the
/// same batch to other peers' connections.
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

    /// Applied subscriptions per topic: one for each subscribe, less one
    /// for each subscriber that went away holding it.
    private(set) var counts: [[UInt8]: Int] = [:]

    /// What to do with one message the XPUB passed up.
    enum Decision: Equatable {
        case subscribe([UInt8])
        case unsubscribe([UInt8])
        case drop
    }

    /// Counts a subscribe or unsubscribe of a DRK1 topic and says to apply
    /// it; anything else is dropped. `fromConnection`: the message came
    /// from a subscriber's connection (`Socket.receiveNotingConnection`),
    /// rather than from the socket itself.
    ///
    /// The socket passes up every unsubscribe a peer sends, whether or not
    /// that peer holds the topic, and does not say which peer sent it.
    /// Applied, an unsubscribe acts on the sender's connection alone, so
    /// one from a peer that never subscribed changes nothing there; but
    /// counted, it would take away another subscriber's subscription, and
    /// the broker would stop publishing a form that subscriber still
    /// wants. So a peer's own unsubscribe is applied and not counted, and
    /// the count falls only by the unsubscribes the socket makes itself
    /// for a subscriber that has gone, one for each topic it held. A
    /// subscriber that unsubscribes before it goes (no darkroom client
    /// does) leaves its topic counted: the broker then publishes a form
    /// nobody may want, which costs only the publishing.
    mutating func take(_ message: [UInt8], fromConnection: Bool) -> Decision {
        guard let kind = message.first else { return .drop }
        let topic = Array(message.dropFirst())
        guard Self.topics.contains(topic) else { return .drop }
        switch kind {
        case 1:
            counts[topic, default: 0] += 1
            return .subscribe(topic)
        case 0 where fromConnection:
            return .unsubscribe(topic)
        case 0:
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
