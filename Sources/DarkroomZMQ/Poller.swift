import CZeroMQ

/// Readiness a `Poller` can wait for.
public struct PollEvents: OptionSet, Sendable, Hashable {
    public let rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }
    /// A message can be received without blocking (for a file descriptor: it is readable).
    public static let readable = PollEvents(rawValue: Int16(ZMQ_POLLIN))
    /// A message can be sent without blocking.
    public static let writable = PollEvents(rawValue: Int16(ZMQ_POLLOUT))
    /// An error condition on a file descriptor.
    public static let error = PollEvents(rawValue: Int16(ZMQ_POLLERR))
}

/// Waits on several sockets, and optionally plain file descriptors, at once
/// (`zmq_poll`).
///
/// A poller holds its sockets, so it belongs to the thread that owns them and
/// is not `Sendable`. Items are numbered in the order they were added; `poll`
/// reports readiness by that number.
public final class Poller {
    private enum Target {
        case socket(Socket)
        case fileDescriptor(Int32)
    }

    private var targets: [(target: Target, events: PollEvents)] = []

    public init() {}

    /// The number of items added.
    public var count: Int { targets.count }

    /// Puts `socket` in the place of item `index`, which was a socket, with
    /// the same events: for a socket closed and opened again.
    public func replace(_ index: Int, with socket: Socket) {
        targets[index].target = .socket(socket)
    }

    /// Adds a socket and returns its item number.
    @discardableResult
    public func add(_ socket: Socket, events: PollEvents = .readable) -> Int {
        targets.append((.socket(socket), events))
        return targets.count - 1
    }

    /// Changes what item `index` waits for; an empty set leaves it out of
    /// the wait (a socket the owner does not want to read for now).
    public func setEvents(_ events: PollEvents, for index: Int) {
        targets[index].events = events
    }

    /// Adds a file descriptor (for example a pipe or an eventfd) and returns its item number.
    @discardableResult
    public func add(fileDescriptor: Int32, events: PollEvents = .readable) -> Int {
        targets.append((.fileDescriptor(fileDescriptor), events))
        return targets.count - 1
    }

    /// Adds a mailbox's inbox and returns its item number; when it is
    /// readable, call `inbox.drain()`.
    @discardableResult
    public func add<Message>(_ inbox: MailboxInbox<Message>) -> Int {
        add(inbox.socket, events: .readable)
    }

    /// Waits until an item is ready or `timeoutMilliseconds` pass
    /// (0 returns at once, -1 waits indefinitely).
    ///
    /// Returns the ready items; the result is empty on timeout, and may be
    /// empty early if a signal interrupted the wait. Throws `ETERM` when the
    /// context is shut down, and `ENOTSOCK` if a socket was closed.
    public func poll(timeoutMilliseconds: Int) throws -> PollResult {
        var items: [zmq_pollitem_t] = []
        items.reserveCapacity(targets.count)
        for (target, events) in targets {
            switch target {
            case .socket(let socket):
                let handle = try socket.openHandle("zmq_poll")
                items.append(zmq_pollitem_t(socket: handle, fd: -1, events: events.rawValue, revents: 0))
            case .fileDescriptor(let fd):
                items.append(zmq_pollitem_t(socket: nil, fd: fd, events: events.rawValue, revents: 0))
            }
        }
        let timeout = timeoutMilliseconds < 0 ? -1 : timeoutMilliseconds
        let count = items.count
        do throws(ZMQError) {
            try zmqCall("zmq_poll", retryOnInterrupt: false) {
                items.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32(count), timeout) }
            }
        } catch {
            if error.isInterrupted { return PollResult(events: Array(repeating: [], count: count)) }
            throw error
        }
        return PollResult(events: items.map { PollEvents(rawValue: $0.revents) })
    }
}

/// What a `Poller.poll` call found, by item number.
public struct PollResult: Sendable, Hashable {
    /// The readiness of each item, in the order the items were added.
    public let events: [PollEvents]

    /// Whether item `index` is readable.
    public func isReadable(_ index: Int) -> Bool {
        events.indices.contains(index) && events[index].contains(.readable)
    }

    /// Whether item `index` is writable.
    public func isWritable(_ index: Int) -> Bool {
        events.indices.contains(index) && events[index].contains(.writable)
    }

    /// The numbers of the readable items.
    public var readable: [Int] { events.indices.filter { events[$0].contains(.readable) } }

    /// Whether nothing was ready.
    public var isEmpty: Bool { events.allSatisfy(\.isEmpty) }
}
