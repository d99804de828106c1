/// The ZeroMQ Authentication Protocol (ZAP, RFC 27): the pieces needed to
/// write a handler.
///
/// A handler is a REP socket bound to `ZAPRequest.endpoint` on the same
/// context as the sockets it guards. libzmq sends it one request per new
/// CURVE (or PLAIN/NULL with a domain) connection; the handler answers with
/// `reply(...)` and the connection is accepted on status 200. The handler
/// owns its socket like any other, on its own thread or in a poll loop.
public struct ZAPRequest: Sendable, Hashable {
    /// Where libzmq looks for the handler.
    public static let endpoint = "inproc://zeromq.zap.01"

    public let version: String
    public let requestID: [UInt8]
    /// The ZAP domain of the accepting socket (`setZAPDomain`).
    public let domain: String
    /// The peer's IP address, as text.
    public let address: String
    /// The routing id of the connecting socket, if it set one.
    public let routingID: [UInt8]
    /// "NULL", "PLAIN" or "CURVE".
    public let mechanism: String
    /// Mechanism-specific credentials; for CURVE, one frame: the client's 32-byte public key.
    public let credentials: [[UInt8]]

    /// Parses a request as received on the REP socket. Throws `EINVAL` for a
    /// malformed request.
    public init(frames: [[UInt8]]) throws {
        guard frames.count >= 6 else {
            throw ZMQError.invalid("ZAPRequest", "a ZAP request has at least 6 frames, got \(frames.count)")
        }
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        version = text(frames[0])
        guard version == "1.0" else {
            throw ZMQError.invalid("ZAPRequest", "unsupported ZAP version \"\(version)\"")
        }
        requestID = frames[1]
        domain = text(frames[2])
        address = text(frames[3])
        routingID = frames[4]
        mechanism = text(frames[5])
        credentials = Array(frames.dropFirst(6))
    }

    /// The client's public key, for a CURVE request.
    public var curvePublicKey: CurveKey? {
        guard mechanism == "CURVE", let first = credentials.first else { return nil }
        return try? CurveKey(bytes: first)
    }

    /// The reply frames: `status` is 200 (accept), 300 (temporary failure),
    /// 400 (denied) or 500 (internal error). `userID` is attached to every
    /// message from the connection as its "User-Id" property.
    public func reply(status: Int, text: String = "", userID: String = "") -> [[UInt8]] {
        [Array("1.0".utf8), requestID, Array(String(status).utf8), Array(text.utf8), Array(userID.utf8), []]
    }
}
