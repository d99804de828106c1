import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Synchronization

/// The ZAP handler (RFC 27) for Darkroom's CURVE servers: admits a client
/// when its public key is in the allowlist and the key's role may use the
/// ZAP domain of the socket it connects to (`Role.admitted`).
///
/// It runs on its own thread, owning a REP socket bound to
/// `inproc://zeromq.zap.01` on the servers' context; there is one per
/// context, started before the servers it guards (libzmq admits every CURVE
/// client when no handler is bound). Accepted connections carry the key's
/// role and the key itself as their ZAP user id (`ConnectionIdentity`), so
/// the servers check each request against the role and drop a revoked
/// key's requests. Each denial is logged on one line with the key's prefix,
/// the domain and the reason; repeats of the same denial (a refused client
/// keeps reconnecting) are summarised at most every 30 s.
///
/// Every `directoryCheck` it looks whether the allowlist directory's files
/// changed and reloads them (as SIGHUP does), so a key added to or removed
/// from a mounted Secret takes effect without a restart.
public final class ZAPAuthenticator: Sendable {
    fileprivate let allowlist: LiveAllowlist
    fileprivate let context: Context
    fileprivate let logger: Logger

    fileprivate enum Control: Sendable { case stop }

    private let service = ServiceThread<Control>(name: "darkroom-zap")
    private let allowedCount = Atomic<Int>(0)
    private let deniedCount = Atomic<Int>(0)

    /// How often the allowlist directory is looked at for changes.
    public static let directoryCheck: Duration = .seconds(2)

    public init(allowlist: LiveAllowlist, context: Context, logger: Logger = Logger("zap")) {
        self.allowlist = allowlist
        self.context = context
        self.logger = logger
    }

    fileprivate func log(_ change: LiveAllowlist.Change, reason: String) {
        logger.info("allowlist reloaded (\(reason)): \(change.summary); \(allowlist.current.count) key(s) allowed")
    }

    /// Connections admitted and refused so far.
    public var decisions: (allowed: Int, denied: Int) {
        (allowedCount.load(ordering: .relaxed), deniedCount.load(ordering: .relaxed))
    }

    /// Binds the handler on its own thread and returns once it is bound.
    /// Throws the bind error, e.g. when the context already has a handler.
    public func start() throws {
        do {
            try service.start { [self] in try ZAPLoop(handler: self) }
        } catch {
            switch error {
            case .alreadyStarted: throw SecurityError("the ZAP handler is already started")
            case .failed(let cause): throw cause
            }
        }
    }

    /// Asks the handler to stop and waits up to `grace` for its thread.
    /// Stop it after the servers it guards: while they run without it,
    /// libzmq would admit any CURVE client.
    public func stop(grace: Duration = .seconds(5)) {
        guard service.post(.stop) else { return }
        if !service.wait(timeout: grace) {
            logger.warn("the ZAP handler did not stop within \(grace)")
        }
    }

    /// Blocks until the handler's thread has exited (at once if never started).
    public func wait() {
        service.wait()
    }

    // MARK: Decisions

    fileprivate struct Repeats {
        var lastLogged: ContinuousClock.Instant
        var suppressed: Int
    }

    fileprivate func answer(_ frames: [[UInt8]], repeats: inout [String: Repeats]) -> [[UInt8]] {
        let request: ZAPRequest
        do {
            request = try ZAPRequest(frames: frames)
        } catch {
            deniedCount.add(1, ordering: .relaxed)
            logger.warn("ZAP denied a malformed request: \(error)")
            let requestID = frames.count > 1 ? frames[1] : []
            return [Array("1.0".utf8), requestID, Array("500".utf8), Array("malformed ZAP request".utf8), [], []]
        }
        let key = request.curvePublicKey
        switch allowlist.decide(key: key, domain: request.domain) {
        case .allowed(let entry):
            allowedCount.add(1, ordering: .relaxed)
            logger.debug("ZAP allowed \(entry.name) (\(entry.role)) on \(request.domain) from \(request.address)")
            let identity = ConnectionIdentity(role: entry.role, key: key?.z85)
            return request.reply(status: 200, text: "OK", userID: identity.userID)
        case .denied(let reason):
            deniedCount.add(1, ordering: .relaxed)
            let prefix = key.map { String($0.z85.prefix(8)) + "…" } ?? request.mechanism
            let subject = "\(prefix) \(request.domain)"
            let now = ContinuousClock.now
            // Bounded: a peer making a fresh key per attempt must not grow it forever.
            if repeats.count > 10_000 { repeats.removeAll() }
            if var seen = repeats[subject], now - seen.lastLogged < .seconds(30) {
                seen.suppressed += 1
                repeats[subject] = seen
            } else {
                let again = repeats[subject].map { $0.suppressed > 0 ? " (\($0.suppressed) more since the last report)" : "" } ?? ""
                logger.warn("ZAP denied key \(prefix) on \(request.domain) from \(request.address): \(reason)\(again)")
                repeats[subject] = Repeats(lastLogged: now, suppressed: 0)
            }
            return request.reply(status: 400, text: reason)
        }
    }
}

/// The handler's loop: the REP socket on `inproc://zeromq.zap.01` and the
/// mailbox, owned by the handler's thread.
private final class ZAPLoop: ServiceLoop {
    let handler: ZAPAuthenticator
    let socket: Socket
    let inbox: MailboxInbox<ZAPAuthenticator.Control>
    var mailbox: Mailbox<ZAPAuthenticator.Control> { inbox.mailbox }
    var boundEndpoints: [String: String] { ["zap": ZAPRequest.endpoint] }

    init(handler: ZAPAuthenticator) throws {
        self.handler = handler
        socket = try handler.context.socket(.rep)
        try socket.setLinger(milliseconds: 0)
        do {
            try socket.bind(ZAPRequest.endpoint)
        } catch {
            socket.close()
            throw SecurityError("cannot bind the ZAP handler at \(ZAPRequest.endpoint) (is another one running in this process?): \(error)")
        }
        do {
            inbox = try Mailbox<ZAPAuthenticator.Control>.make(context: handler.context).inbox
        } catch {
            socket.close()
            throw error
        }
    }

    func run() {
        let logger = handler.logger
        logger.info("ZAP handler running: \(handler.allowlist.current.count) key(s) allowed")
        defer {
            inbox.close()
            socket.close()
        }
        let poller = Poller()
        let socketItem = poller.add(socket)
        let inboxItem = poller.add(inbox)
        var repeats: [String: ZAPAuthenticator.Repeats] = [:]
        var nextCheck = ContinuousClock.now + ZAPAuthenticator.directoryCheck
        while true {
            let ready: PollResult
            do {
                let wait = max(.zero, nextCheck - ContinuousClock.now)
                ready = try poller.poll(timeoutMilliseconds: Int(wait.milliseconds) + 1)
            } catch {
                if (error as? ZMQError)?.isTerminated != true { logger.error("ZAP poll failed: \(error)") }
                return
            }
            if ready.isReadable(inboxItem) {
                let controls = (try? inbox.drain()) ?? [.stop]
                if controls.contains(.stop) { return }
            }
            if ContinuousClock.now >= nextCheck {
                nextCheck = ContinuousClock.now + ZAPAuthenticator.directoryCheck
                do {
                    if let change = try handler.allowlist.reloadIfChanged() {
                        handler.log(change, reason: "the files in \(handler.allowlist.directory) changed")
                    }
                } catch {
                    logger.error("allowlist not reloaded (the files in \(handler.allowlist.directory) changed): \(error); the keys loaded before stay in force")
                }
            }
            guard ready.isReadable(socketItem) else { continue }
            do {
                // REP: each request is answered before the next is read.
                while let frames = try socket.receive(dontWait: true) {
                    try socket.send(handler.answer(frames, repeats: &repeats))
                }
            } catch {
                if (error as? ZMQError)?.isTerminated != true { logger.error("ZAP socket failed: \(error)") }
                return
            }
        }
    }
}
