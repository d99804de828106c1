import DarkroomProtocol

/// What the broker knows of the events socket's subscriptions.
///
/// The socket is an XPUB that applies each subscription itself, to the
/// connection that sent it, and passes every subscribe and unsubscribe up
/// (`ZMQ_XPUB_VERBOSER`). The broker publishes under `ev` and `eb` only, so
/// a subscription delivers something only when it is a prefix of one of
/// them (the empty prefix, `e`, `ev`, `eb`); any other matches nothing.
///
/// Why not manual mode, where the broker would apply only DRK1's topics:
/// libzmq 4.3.4 keeps the connection of a queued subscription only for
/// subscriptions, not for the other messages it queues with them, so one
/// peer's stray message made the broker apply the subscriptions read after
/// it to other peers' connections; and it could apply one to a connection
/// already freed. Applied by the socket, a subscription always lands on the
/// connection that sent it.
///
/// What this type bounds: every subscription costs memory while its peer
/// stays (libzmq's trie, some 35 bytes per byte of topic), and an XPUB
/// cannot close one peer's connection. So the subscriptions that match
/// nothing are charged (their bytes and `overheadBytes` each), and when
/// the charge passes `strayLimitBytes` the broker drops every events
/// connection (`Switchboard.reopenEvents`). A DRK1 subscriber costs a few
/// bytes and never comes near it. (The socket's `ZMQ_MAXMSGSIZE` of
/// `maxMessageBytes` keeps a huge subscription from even being read:
/// ZeroMQ drops the peer that sends it.)
struct EventSubscriptions {
    /// The largest frame the events socket reads. ZeroMQ applies the limit
    /// to the CURVE handshake's commands too (HELLO is 200 bytes, INITIATE
    /// carries the client's metadata, and an encrypted subscription grows
    /// by the MESSAGE command's overhead), so it is set well above the
    /// longest DRK1 topic: a few KiB is nothing to the broker, a huge
    /// subscription is still never read.
    static let maxMessageBytes: Int64 = 4096

    /// The charge of held subscriptions that match no published topic, in
    /// bytes of topic plus `overheadBytes` each, beyond which every events
    /// connection is dropped: about 4.5 MB of libzmq's trie at most.
    static let strayLimitBytes = 128 << 10

    /// What one held subscription is charged beyond its topic's bytes.
    static let overheadBytes = 64

    /// The topics the broker publishes under.
    static let published: [[UInt8]] = [Wire.eventTopic, Wire.eventBatchTopic]

    /// Held subscriptions per topic that is a prefix of a published one:
    /// one for each subscribe, less one for each that a departed
    /// subscriber's connection gave up.
    private(set) var counts: [[UInt8]: Int] = [:]

    /// The charge of held subscriptions that match no published topic.
    private(set) var strayBytes = 0

    /// Whether the broker must drop every events connection now.
    enum Outcome: Equatable {
        case noted
        case overLimit
    }

    /// Notes one message the socket passed up. `fromConnection`: it came
    /// from a subscriber's connection (`Socket.receiveNotingConnection`),
    /// rather than from the socket itself as a departed connection's
    /// subscriptions are given up.
    ///
    /// A peer's own unsubscribe is not counted: the socket passes it up
    /// whether or not that peer held the topic, and counted, a stranger's
    /// unsubscribe would take away a subscriber's form. The count falls
    /// only by the unsubscribes the socket makes for a connection that has
    /// gone, one for each topic it held. A subscriber that unsubscribes
    /// before it goes (no darkroom client does) leaves its topic counted:
    /// the broker then publishes a form nobody may want, which costs only
    /// the publishing; a stray subscription given up that way stays
    /// charged, which brings the drop of every connection nearer, and only
    /// for a peer outside DRK1.
    mutating func take(_ message: [UInt8], fromConnection: Bool) -> Outcome {
        guard let kind = message.first, kind <= 1 else { return .noted }
        let topic = Array(message.dropFirst())
        let matches = Self.published.contains { $0.starts(with: topic) }
        switch (kind, fromConnection) {
        case (1, _) where matches:
            counts[topic, default: 0] += 1
        case (1, _):
            strayBytes += topic.count + Self.overheadBytes
            if strayBytes > Self.strayLimitBytes { return .overLimit }
        case (0, true):
            break
        case (0, false) where matches:
            if let count = counts[topic] { counts[topic] = count > 1 ? count - 1 : nil }
        default:
            strayBytes = max(0, strayBytes - topic.count - Self.overheadBytes)
        }
        return .noted
    }

    /// Whether some subscriber receives messages published under `topic`.
    func wants(_ topic: [UInt8]) -> Bool {
        counts.keys.contains { topic.starts(with: $0) }
    }
}
