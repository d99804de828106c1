import DarkroomCore
import DarkroomZMQ
import Dispatch
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
/// role as their ZAP user id. Each denial is logged on one line with the
/// key's prefix, the domain and the reason; repeats of the same denial
/// (a refused client keeps reconnecting) are summarised at most every 30 s.
public final class ZAPAuthenticator: Sendable {
    private let allowlist: Allowlist
    private let context: Context
    private let logger: Logger

    private enum Control: Sendable { case stop }

    private struct State {
        var started = false
        var stopRequested = false
        var mailbox: Mailbox<Control>?
    }

    private let state = Mutex(State())
    private let running = DispatchGroup()
    private let allowedCount = Atomic<Int>(0)
    private let deniedCount = Atomic<Int>(0)

    public init(allowlist: Allowlist, context: Context, logger: Logger = Logger("zap")) {
        self.allowlist = allowlist
        self.context = context
        self.logger = logger
    }

    /// Connections admitted and refused so far.
    public var decisions: (allowed: Int, denied: Int) {
        (allowedCount.load(ordering: .relaxed), deniedCount.load(ordering: .relaxed))
    }

    /// Binds the handler on its own thread and returns once it is bound.
    /// Throws the bind error, e.g. when the context already has a handler.
    public func start() throws {
        try state.withLock { state in
            guard !state.started else { throw SecurityError("the ZAP handler is already started") }
            state.started = true
        }
        let startup = Startup()
        running.enter()
        let thread = Thread { [self] in
            defer { running.leave() }
            let socket: Socket
            let inbox: MailboxInbox<Control>
            do {
                socket = try context.socket(.rep)
                try socket.setLinger(milliseconds: 0)
                do {
                    try socket.bind(ZAPRequest.endpoint)
                } catch {
                    socket.close()
                    throw SecurityError("cannot bind the ZAP handler at \(ZAPRequest.endpoint) (is another one running in this process?): \(error)")
                }
                do {
                    inbox = try Mailbox<Control>.make(context: context).inbox
                } catch {
                    socket.close()
                    throw error
                }
            } catch {
                startup.put(.failure(error))
                return
            }
            let stopEarly = state.withLock { state in
                state.mailbox = inbox.mailbox
                return state.stopRequested
            }
            if stopEarly { inbox.mailbox.post(.stop) }
            startup.put(.success(()))
            logger.info("ZAP handler running: \(allowlist.count) key(s) allowed")
            serve(socket: socket, inbox: inbox)
            inbox.close()
            socket.close()
        }
        thread.name = "darkroom-zap"
        thread.start()
        try startup.take().get()
    }

    /// Asks the handler to stop and waits up to `grace` for its thread.
    /// Stop it after the servers it guards: while they run without it,
    /// libzmq would admit any CURVE client.
    public func stop(grace: Duration = .seconds(5)) {
        let mailbox = state.withLock { state in
            state.stopRequested = true
            return state.mailbox
        }
        mailbox?.post(.stop)
        let (seconds, attoseconds) = grace.components
        let timeout = Double(seconds) + Double(attoseconds) / 1e18
        if running.wait(timeout: .now() + max(0, timeout)) == .timedOut {
            logger.warn("the ZAP handler did not stop within \(grace)")
        }
    }

    /// Blocks until the handler's thread has exited (at once if never started).
    public func wait() {
        running.wait()
    }

    // MARK: The loop

    private struct Repeats {
        var lastLogged: ContinuousClock.Instant
        var suppressed: Int
    }

    private func serve(socket: Socket, inbox: MailboxInbox<Control>) {
        let poller = Poller()
        let socketItem = poller.add(socket)
        let inboxItem = poller.add(inbox)
        var repeats: [String: Repeats] = [:]
        while true {
            let ready: PollResult
            do {
                ready = try poller.poll(timeoutMilliseconds: -1)
            } catch {
                if (error as? ZMQError)?.isTerminated != true { logger.error("ZAP poll failed: \(error)") }
                return
            }
            if ready.isReadable(inboxItem) {
                let controls = (try? inbox.drain()) ?? [.stop]
                if controls.contains(.stop) { return }
            }
            guard ready.isReadable(socketItem) else { continue }
            do {
                // REP: each request is answered before the next is read.
                while let frames = try socket.receive(dontWait: true) {
                    try socket.send(answer(frames, repeats: &repeats))
                }
            } catch {
                if (error as? ZMQError)?.isTerminated != true { logger.error("ZAP socket failed: \(error)") }
                return
            }
        }
    }

    private func answer(_ frames: [[UInt8]], repeats: inout [String: Repeats]) -> [[UInt8]] {
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
            return request.reply(status: 200, text: "OK", userID: entry.role.rawValue)
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

/// The outcome of startup, handed from the handler's thread to `start()`.
private final class Startup: Sendable {
    private let result = Mutex<Result<Void, any Error>?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    func put(_ value: Result<Void, any Error>) {
        result.withLock { $0 = value }
        ready.signal()
    }

    func take() -> Result<Void, any Error> {
        ready.wait()
        return result.withLock { $0 } ?? .failure(SecurityError("the ZAP handler did not report its start"))
    }
}
