/// The CURVE identity of a server (the broker or a storage node): its key
/// pair. A socket set up with it accepts only CURVE clients that know the
/// public key, and asks the ZAP handler on the same context (see
/// `ZAPRequest`) whether each client may connect, naming the socket's ZAP
/// domain. Without a ZAP handler libzmq admits every CURVE client, so a
/// server with keys should always run one.
public struct ServerCurve: Sendable, Hashable {
    public var keyPair: CurveKeyPair

    public init(keyPair: CurveKeyPair) {
        self.keyPair = keyPair
    }

    /// The ZAP domains of the Darkroom server sockets; the ZAP handler
    /// decides per domain which client roles may connect.
    public enum Domain {
        /// The broker's ROUTER for producers and admin clients.
        public static let frontend = "frontend"
        /// The broker's PUB socket for events.
        public static let events = "events"
        /// The broker's ROUTER for workers.
        public static let backend = "backend"
        /// A storage node's ROUTER.
        public static let store = "store"
    }
}

extension Socket {
    /// Makes this socket a CURVE server with `curve`'s secret key whose
    /// connections are authenticated in `zapDomain`. Set before binding.
    public func setCurveServer(_ curve: ServerCurve, zapDomain: String) throws {
        try setCurveServer(secretKey: curve.keyPair.secretKey)
        try setZAPDomain(zapDomain)
    }
}
