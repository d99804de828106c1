import DarkroomProtocol
import DarkroomZMQ

/// Checks what a worker reaches, with a worker's key: that the broker's
/// backend answers PING (section 4). A worker's health probe uses it
/// beside a PING of the storage node, so a worker pod's probe needs only
/// the worker's own key.
///
/// Threading: it owns a ZeroMQ socket, so it belongs to the thread that
/// created it and is not `Sendable`.
public final class BackendProbe {
    let channel: Channel

    /// Connects (in the background) to the broker's backend.
    public init(endpoint: String = Wire.Endpoint.backend, context: Context, timeout: Duration = .seconds(5),
                curve: CurveClientKeys? = nil) throws(ClientError) {
        channel = try Channel(context: context, endpoint: endpoint, role: .broker, timeout: timeout, curve: curve)
    }

    /// Sends PING and waits for PONG; an older broker's ERROR answer proves
    /// it alive too, and counts.
    public func ping() throws(ClientError) {
        let reply = try channel.call("PING", build: { Ping(requestID: $0).frames() }, decode: BackendMessage.decode, requestID: \.requestID)
        switch reply {
        case .pong, .error:
            return
        default:
            throw ClientError(.protocolViolation, "the broker's backend at \(channel.endpoint) answered PING with \(reply.command.name)")
        }
    }
}

@available(*, unavailable, message: "a client owns a ZeroMQ socket and belongs to one thread; make one per thread")
extension BackendProbe: Sendable {}
