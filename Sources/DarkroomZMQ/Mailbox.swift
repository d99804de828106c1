import Synchronization

/// The sending side of a mailbox: lets any thread hand values to the thread
/// that owns a set of sockets and waits on them with a `Poller`.
///
/// Threading model. A service loop runs on one thread and owns its sockets,
/// its `Poller` and the `MailboxInbox`. Other threads (a disk-commit thread,
/// a signal handler's thread, a worker's job threads) hold the `Mailbox` and
/// call `post`. A posted value goes into a mutex-protected outbox; the first
/// post after a drain also sends a one-byte wake-up over an `inproc` PUSH
/// socket to the inbox's PULL socket, which makes the loop's `poll` return.
/// The loop then calls `inbox.drain()` and handles the values on its own
/// thread, in the order they were posted.
///
/// The PUSH socket is only touched with the mutex held, so the threads that
/// post never use it at the same time; the mutex's acquire and release give
/// libzmq the full memory barrier it requires when a socket moves between
/// threads. Values travel as Swift values (no serialization), so they must
/// be `Sendable`. Posting a `@Sendable () -> Void` closure gives the
/// "run this on the loop's thread" pattern (`MailboxInbox.runPending`).
public final class Mailbox<Message: Sendable>: Sendable {
    struct Outbox: ~Copyable {
        var messages: [Message] = []
        /// A wake-up byte has been sent since the last drain.
        var signalled = false
        /// The wake-up socket; nil once the mailbox is closed.
        var notifier: Socket?
    }

    let outbox: Mutex<Outbox>
    /// The inproc endpoint the inbox listens on (unique per mailbox).
    public let endpoint: String

    private static var nextID: Int { mailboxCounter.add(1, ordering: .relaxed).newValue }

    private init(outbox: consuming sending Outbox, endpoint: String) {
        self.outbox = Mutex(outbox)
        self.endpoint = endpoint
    }

    /// Creates a mailbox on `context`. Call this on the thread that will own
    /// the returned inbox; the `Mailbox` may then be shared with any thread.
    public static func make(context: Context) throws -> (mailbox: Mailbox<Message>, inbox: MailboxInbox<Message>) {
        let endpoint = "inproc://darkroom.mailbox.\(nextID)"
        let receiver = try context.socket(.pull)
        try receiver.setLinger(milliseconds: 0)
        try receiver.bind(endpoint)
        let notifier = try context.socket(.push)
        try notifier.setLinger(milliseconds: 0)
        try notifier.connect(endpoint)
        let mailbox = Mailbox(outbox: Outbox(notifier: notifier), endpoint: endpoint)
        return (mailbox, MailboxInbox(socket: receiver, mailbox: mailbox))
    }

    /// Queues `message` for the owning thread and wakes its poll loop.
    ///
    /// Returns false, dropping the message, when the mailbox is closed (the
    /// inbox was closed or released) or its context was shut down: the loop
    /// that would have handled it is gone. Never blocks on the loop.
    @discardableResult
    public func post(_ message: Message) -> Bool {
        outbox.withLock { outbox in
            guard let notifier = outbox.notifier else { return false }
            outbox.messages.append(message)
            if outbox.signalled { return true }
            do {
                try notifier.send([1], dontWait: true)
                outbox.signalled = true
                return true
            } catch {
                // EAGAIN: the queue to the inbox is full of wake-ups already,
                // so the loop will wake; anything else means the context is
                // going away and the socket must be closed for it to finish.
                if (error as? ZMQError)?.isWouldBlock == true { return true }
                notifier.close()
                outbox.notifier = nil
                outbox.messages.removeAll()
                return false
            }
        }
    }

    /// Whether posts are still accepted.
    public var isOpen: Bool {
        outbox.withLock { $0.notifier != nil }
    }

    /// Closes the sending side: later posts return false and queued messages
    /// are discarded. The inbox calls this when it closes.
    public func close() {
        outbox.withLock { outbox in
            outbox.notifier?.close()
            outbox.notifier = nil
            outbox.messages.removeAll()
        }
    }

    /// Takes every queued message (called by the inbox after reading wake-ups).
    func takeAll() -> [Message] {
        outbox.withLock { outbox in
            outbox.signalled = false
            let messages = outbox.messages
            outbox.messages = []
            return messages
        }
    }
}

private let mailboxCounter = Atomic<Int>(0)

/// The receiving side of a mailbox, owned by the thread that runs the poll
/// loop (not `Sendable`, like the sockets next to it). Add it to the loop's
/// `Poller`; when it is readable, call `drain()`.
public final class MailboxInbox<Message: Sendable> {
    let socket: Socket
    /// The sending side, to hand to other threads.
    public let mailbox: Mailbox<Message>

    init(socket: Socket, mailbox: Mailbox<Message>) {
        self.socket = socket
        self.mailbox = mailbox
    }

    deinit {
        mailbox.close()
        socket.close()
    }

    /// Returns every message posted since the last drain, oldest first, and
    /// consumes the wake-ups that announced them. Never blocks; returns an
    /// empty array after a spurious wake-up. Throws `ETERM` once the context
    /// is shut down.
    public func drain() throws -> [Message] {
        while try socket.receive(dontWait: true) != nil {}
        return mailbox.takeAll()
    }

    /// Closes both sides of the mailbox; pending and later messages are dropped.
    public func close() {
        mailbox.close()
        socket.close()
    }
}

extension MailboxInbox where Message == @Sendable () -> Void {
    /// Runs every pending closure on the calling (owning) thread, in posting
    /// order, and returns how many ran.
    @discardableResult
    public func runPending() throws -> Int {
        let jobs = try drain()
        for job in jobs { job() }
        return jobs.count
    }
}

@available(*, unavailable, message: "an inbox belongs to the thread that polls it; share its Mailbox instead")
extension MailboxInbox: Sendable {}
