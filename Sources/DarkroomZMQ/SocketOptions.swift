import CZeroMQ

/// Socket options. Each setter maps to one `zmq_setsockopt` option and throws
/// `ZMQError` (usually `EINVAL`) when libzmq refuses the value. Durations are
/// in milliseconds, as libzmq counts them; `-1` means "no limit" where libzmq
/// allows it.
extension Socket {
    // MARK: Raw access

    /// Sets an integer option by its libzmq number (for options without a named setter).
    public func setOption(_ option: Int32, _ value: Int32) throws {
        let handle = try openHandle("zmq_setsockopt")
        try zmqCall("zmq_setsockopt(\(option))") { darkroom_zmq_setsockopt_int(handle, option, value) }
    }

    /// Sets a 64-bit integer option by its libzmq number.
    public func setOption(_ option: Int32, int64 value: Int64) throws {
        let handle = try openHandle("zmq_setsockopt")
        try zmqCall("zmq_setsockopt(\(option))") { darkroom_zmq_setsockopt_int64(handle, option, value) }
    }

    /// Sets a binary option by its libzmq number.
    public func setOption(_ option: Int32, bytes value: [UInt8]) throws {
        let handle = try openHandle("zmq_setsockopt")
        try zmqCall("zmq_setsockopt(\(option))") {
            value.withUnsafeBytes { zmq_setsockopt(handle, option, $0.baseAddress, $0.count) }
        }
    }

    /// Reads an integer option by its libzmq number.
    public func intOption(_ option: Int32) throws -> Int32 {
        let handle = try openHandle("zmq_getsockopt")
        var value: Int32 = 0
        try zmqCall("zmq_getsockopt(\(option))") { darkroom_zmq_getsockopt_int(handle, option, &value) }
        return value
    }

    /// Reads a 64-bit integer option by its libzmq number.
    public func int64Option(_ option: Int32) throws -> Int64 {
        let handle = try openHandle("zmq_getsockopt")
        var value: Int64 = 0
        try zmqCall("zmq_getsockopt(\(option))") { darkroom_zmq_getsockopt_int64(handle, option, &value) }
        return value
    }

    /// Reads a binary option of at most `capacity` bytes by its libzmq number.
    public func bytesOption(_ option: Int32, capacity: Int = 256) throws -> [UInt8] {
        let handle = try openHandle("zmq_getsockopt")
        var buffer = [UInt8](repeating: 0, count: capacity)
        var size = capacity
        try zmqCall("zmq_getsockopt(\(option))") {
            buffer.withUnsafeMutableBytes { zmq_getsockopt(handle, option, $0.baseAddress, &size) }
        }
        return Array(buffer.prefix(size))
    }

    private func setFlag(_ option: Int32, _ value: Bool) throws {
        try setOption(option, value ? 1 : 0)
    }

    private func setInt(_ option: Int32, _ value: Int) throws {
        guard let narrow = Int32(exactly: value) else {
            throw ZMQError.invalid("zmq_setsockopt(\(option))", "value \(value) is out of range")
        }
        try setOption(option, narrow)
    }

    private func setString(_ option: Int32, _ value: String) throws {
        try setOption(option, bytes: Array(value.utf8))
    }

    // MARK: Life cycle and queues

    /// How long unsent messages are kept after `close()` (`ZMQ_LINGER`); 0 drops them, -1 waits forever.
    public func setLinger(milliseconds: Int) throws { try setInt(ZMQ_LINGER, milliseconds) }

    /// The send high-water mark in messages (`ZMQ_SNDHWM`); 0 means no limit.
    public func setSendHighWaterMark(_ messages: Int) throws { try setInt(ZMQ_SNDHWM, messages) }

    /// The receive high-water mark in messages (`ZMQ_RCVHWM`); 0 means no limit.
    public func setReceiveHighWaterMark(_ messages: Int) throws { try setInt(ZMQ_RCVHWM, messages) }

    /// The largest inbound frame a peer may send, in bytes (`ZMQ_MAXMSGSIZE`).
    /// A peer that sends a larger one is disconnected; other peers are
    /// unaffected. -1 (the default) means no limit.
    public func setMaxMessageSize(_ bytes: Int64) throws { try setOption(ZMQ_MAXMSGSIZE, int64: bytes) }

    /// How long a blocking receive waits before returning nil (`ZMQ_RCVTIMEO`); -1 waits forever.
    public func setReceiveTimeout(milliseconds: Int) throws { try setInt(ZMQ_RCVTIMEO, milliseconds) }

    /// How long a blocking send waits before throwing `isWouldBlock` (`ZMQ_SNDTIMEO`); -1 waits forever.
    public func setSendTimeout(milliseconds: Int) throws { try setInt(ZMQ_SNDTIMEO, milliseconds) }

    /// Queue messages only to completed connections (`ZMQ_IMMEDIATE`).
    public func setImmediate(_ on: Bool) throws { try setFlag(ZMQ_IMMEDIATE, on) }

    // MARK: Identity and routing

    /// The identity this socket announces to a ROUTER peer (`ZMQ_ROUTING_ID`),
    /// 1 to 255 bytes, not starting with a zero byte. Set before connecting.
    public func setRoutingID(_ id: [UInt8]) throws { try setOption(ZMQ_ROUTING_ID, bytes: id) }

    /// This socket's identity (`ZMQ_ROUTING_ID`); empty if none was set.
    public func routingID() throws -> [UInt8] { try bytesOption(ZMQ_ROUTING_ID, capacity: 255) }

    /// On a ROUTER: fail a send to an unknown identity with `EHOSTUNREACH`
    /// instead of dropping it silently (`ZMQ_ROUTER_MANDATORY`).
    public func setRouterMandatory(_ on: Bool) throws { try setFlag(ZMQ_ROUTER_MANDATORY, on) }

    /// On a ROUTER: let a new connection that presents an identity already in
    /// use take it over (`ZMQ_ROUTER_HANDOVER`), as a reconnecting peer does.
    public func setRouterHandover(_ on: Bool) throws { try setFlag(ZMQ_ROUTER_HANDOVER, on) }

    // MARK: Subscriptions

    /// On a SUB: receive messages whose first frame starts with `prefix`; an empty prefix receives everything.
    public func subscribe(_ prefix: [UInt8] = []) throws { try setOption(ZMQ_SUBSCRIBE, bytes: prefix) }
    public func subscribe(_ prefix: String) throws { try subscribe(Array(prefix.utf8)) }

    /// On an XPUB: pass every subscribe and unsubscribe a peer sends up to
    /// the owner, and one unsubscribe for each topic a departed peer held
    /// (`ZMQ_XPUB_VERBOSER`), not only the first and the last of a topic.
    public func setXPubVerboser(_ on: Bool) throws { try setFlag(ZMQ_XPUB_VERBOSER, on) }

    // MARK: Connection health

    /// ZMTP heartbeats (`ZMQ_HEARTBEAT_IVL`, `_TTL`, `_TIMEOUT`): send a PING
    /// every `interval` ms; ask the peer to drop the connection after `timeToLive`
    /// ms without traffic; drop it here when no traffic arrives within `timeout`
    /// ms of a PING (libzmq uses `interval` when `timeout` is nil).
    public func setHeartbeat(interval: Int, timeToLive: Int? = nil, timeout: Int? = nil) throws {
        try setInt(ZMQ_HEARTBEAT_IVL, interval)
        if let timeToLive { try setInt(ZMQ_HEARTBEAT_TTL, timeToLive) }
        if let timeout { try setInt(ZMQ_HEARTBEAT_TIMEOUT, timeout) }
    }

    /// How long a TCP connect may take before it is given up and tried
    /// again (`ZMQ_CONNECT_TIMEOUT`): without it, a connect to a host whose
    /// packets are dropped waits out the kernel's SYN retries, tens of seconds.
    public func setConnectTimeout(milliseconds: Int) throws { try setInt(ZMQ_CONNECT_TIMEOUT, milliseconds) }

    /// TCP keepalive (`ZMQ_TCP_KEEPALIVE`, `_IDLE`, `_INTVL`, `_CNT`); times in seconds, nil keeps the OS default.
    public func setTCPKeepalive(_ on: Bool, idle: Int? = nil, interval: Int? = nil, count: Int? = nil) throws {
        try setInt(ZMQ_TCP_KEEPALIVE, on ? 1 : 0)
        if let idle { try setInt(ZMQ_TCP_KEEPALIVE_IDLE, idle) }
        if let interval { try setInt(ZMQ_TCP_KEEPALIVE_INTVL, interval) }
        if let count { try setInt(ZMQ_TCP_KEEPALIVE_CNT, count) }
    }

    /// Reconnect delay and its exponential-backoff ceiling in ms (`ZMQ_RECONNECT_IVL`, `_MAX`).
    public func setReconnectInterval(_ milliseconds: Int, maximum: Int? = nil) throws {
        try setInt(ZMQ_RECONNECT_IVL, milliseconds)
        if let maximum { try setInt(ZMQ_RECONNECT_IVL_MAX, maximum) }
    }

    /// The longest a security handshake may take, in ms (`ZMQ_HANDSHAKE_IVL`); 0 means no limit.
    public func setHandshakeInterval(_ milliseconds: Int) throws { try setInt(ZMQ_HANDSHAKE_IVL, milliseconds) }

    /// The endpoint most recently bound or connected (`ZMQ_LAST_ENDPOINT`),
    /// with a wildcard port resolved, e.g. `tcp://127.0.0.1:41537`.
    public func lastEndpoint() throws -> String {
        var bytes = try bytesOption(ZMQ_LAST_ENDPOINT, capacity: 1024)
        while bytes.last == 0 { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether the last frame received had more frames after it (`ZMQ_RCVMORE`).
    public func hasMoreFrames() throws -> Bool { try intOption(ZMQ_RCVMORE) != 0 }

    // MARK: CURVE security

    /// Makes this socket a CURVE server with the given secret key
    /// (`ZMQ_CURVE_SERVER`, `ZMQ_CURVE_SECRETKEY`). Set before binding.
    public func setCurveServer(secretKey: CurveKey) throws {
        try setFlag(ZMQ_CURVE_SERVER, true)
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: secretKey.bytes)
    }

    /// Makes this socket a CURVE client of the server whose public key is
    /// `serverKey`, authenticating as `keyPair` (`ZMQ_CURVE_SERVERKEY`,
    /// `_PUBLICKEY`, `_SECRETKEY`). Set before connecting.
    public func setCurveClient(serverKey: CurveKey, keyPair: CurveKeyPair) throws {
        try setOption(ZMQ_CURVE_SERVERKEY, bytes: serverKey.bytes)
        try setOption(ZMQ_CURVE_PUBLICKEY, bytes: keyPair.publicKey.bytes)
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: keyPair.secretKey.bytes)
    }

    /// Sets `ZMQ_CURVE_SERVER` alone.
    public func setCurveServerRole(_ on: Bool) throws { try setFlag(ZMQ_CURVE_SERVER, on) }
    /// Sets `ZMQ_CURVE_PUBLICKEY` alone.
    public func setCurvePublicKey(_ key: CurveKey) throws { try setOption(ZMQ_CURVE_PUBLICKEY, bytes: key.bytes) }
    /// Sets `ZMQ_CURVE_SECRETKEY` alone.
    public func setCurveSecretKey(_ key: CurveKey) throws { try setOption(ZMQ_CURVE_SECRETKEY, bytes: key.bytes) }
    /// Sets `ZMQ_CURVE_SERVERKEY` alone.
    public func setCurveServerKey(_ key: CurveKey) throws { try setOption(ZMQ_CURVE_SERVERKEY, bytes: key.bytes) }

    /// The ZAP domain this socket's connections are authenticated in (`ZMQ_ZAP_DOMAIN`).
    public func setZAPDomain(_ domain: String) throws { try setString(ZMQ_ZAP_DOMAIN, domain) }
}
