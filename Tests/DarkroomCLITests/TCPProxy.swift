import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A TCP forwarder on 127.0.0.1 that a test puts between a client and one
/// server port, to break the network for real: `cut()` closes every
/// connection through it and refuses new ones (the port stops listening),
/// `restore()` listens again on the same port. `stall()` keeps every
/// connection open but stops passing the server's bytes to the client
/// (what the client sends still flows) until `unstall()` or `cut()`, which
/// drops what was held: a message lost on the way while both ends look
/// alive. With `delay`, each chunk is
/// passed on that long after it was read, for tests of a distant link: a
/// delay line, so a round trip gains twice the delay while the bytes keep
/// flowing (chunks read meanwhile are not held up behind it).
///
/// One thread accepts (it alone opens and closes the listening socket);
/// each connection has a thread per direction that reads a chunk and writes
/// it on, or with a delay two: one reads chunks into a `DelayLine`, the
/// other writes each when it is due. A connection's two sockets are closed
/// by the last of its threads to finish, under the lock, and everything
/// else only calls `shutdown` on them under the same lock, so no descriptor
/// is used after it was closed (and perhaps reused by another socket).
final class TCPProxy: Sendable {
    /// The port clients connect to.
    let port: Int
    /// The server port connections are forwarded to.
    let targetPort: Int
    let delay: Duration

    private struct Connection {
        var client: Int32
        var upstream: Int32
        /// Threads still running (2 or 4; at 0 the sockets close).
        var pumps: Int
    }

    private struct State {
        /// What the test asked for: listening or not.
        var wantOpen = true
        var stopping = false
        /// Bytes from the server wait in the proxy (see `stall`).
        var stalled = false
        /// What the accepting thread has done about it.
        var isOpen = false
        var acceptorDone = false
        var connections: [Int: Connection] = [:]
        var nextID = 0
        /// Connections accepted and forwarded, over the proxy's life.
        var accepted = 0
    }

    private let state = Mutex(State())

    var endpoint: String { "tcp://127.0.0.1:\(port)" }

    /// Connections accepted and forwarded so far.
    var accepted: Int { state.withLock { $0.accepted } }

    /// Connections open now.
    var openConnections: Int { state.withLock { $0.connections.count } }

    /// Starts forwarding a fresh port of 127.0.0.1 to `targetPort`.
    init(to targetPort: Int, delay: Duration = .zero) throws {
        self.targetPort = targetPort
        self.delay = delay
        let listener = try TCPProxy.listen(port: 0)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        guard named == 0 else {
            close(listener)
            throw HarnessError("proxy: getsockname failed: errno \(errno)")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        state.withLock { $0.isOpen = true }
        let thread = Thread { [self] in acceptLoop(listener) }
        thread.name = "tcp-proxy-\(port)"
        thread.start()
    }

    /// Closes every connection through the proxy and stops listening, so
    /// new connections are refused; returns once both are done.
    func cut() {
        state.withLock { s in
            s.wantOpen = false
            for connection in s.connections.values {
                shutdown(connection.client, Int32(SHUT_RDWR))
                shutdown(connection.upstream, Int32(SHUT_RDWR))
            }
        }
        waitFor { !$0.isOpen && $0.connections.isEmpty }
    }

    /// Stops passing bytes from the server to the client on every
    /// connection, new ones included; they wait until `unstall()`, or are
    /// dropped by `cut()`. (Without a delay only.)
    func stall() {
        precondition(delay == .zero, "a delayed proxy does not stall")
        state.withLock { $0.stalled = true }
    }

    /// Passes the server's bytes on again, those held first.
    func unstall() {
        state.withLock { $0.stalled = false }
    }

    /// Listens again on the same port; returns once it does.
    func restore() {
        state.withLock { $0.wantOpen = true }
        waitFor { $0.isOpen }
    }

    /// Closes everything for good.
    func stop() {
        state.withLock { s in
            s.stopping = true
            for connection in s.connections.values {
                shutdown(connection.client, Int32(SHUT_RDWR))
                shutdown(connection.upstream, Int32(SHUT_RDWR))
            }
        }
        waitFor { $0.acceptorDone && $0.connections.isEmpty }
    }

    private func waitFor(_ condition: (State) -> Bool) {
        let deadline = ContinuousClock.now + .seconds(10)
        while !state.withLock({ condition($0) }), ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
    }

    // MARK: - Threads

    private func acceptLoop(_ first: Int32) {
        var listener: Int32 = first
        while true {
            let (wantOpen, stopping) = state.withLock { ($0.wantOpen, $0.stopping) }
            if stopping || (!wantOpen && listener >= 0) {
                if listener >= 0 { close(listener) }
                listener = -1
                state.withLock { $0.isOpen = false }
                if stopping { break }
            }
            if wantOpen && listener < 0 {
                // The port was ours a moment ago; SO_REUSEADDR lets it be
                // bound again while old connections linger in TIME_WAIT.
                if let fresh = try? TCPProxy.listen(port: port) {
                    listener = fresh
                    state.withLock { $0.isOpen = true }
                } else {
                    Thread.sleep(forTimeInterval: 0.02)
                    continue
                }
            }
            guard listener >= 0 else {
                Thread.sleep(forTimeInterval: 0.01)
                continue
            }
            var item = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&item, 1, 20) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            forward(client)
        }
        state.withLock { $0.acceptorDone = true }
    }

    /// Connects `client` to the target and starts its two pumps, unless the
    /// proxy was cut meanwhile or the target refuses.
    private func forward(_ client: Int32) {
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard upstream >= 0 else {
            close(client)
            return
        }
        var address = TCPProxy.loopback(port: targetPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        for fd in [client, upstream] {
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        let id: Int? = state.withLock { s in
            guard connected == 0, s.wantOpen, !s.stopping else { return nil }
            s.nextID += 1
            s.accepted += 1
            s.connections[s.nextID] = Connection(client: client, upstream: upstream, pumps: delay > .zero ? 4 : 2)
            return s.nextID
        }
        guard let id else {
            close(client)
            close(upstream)
            return
        }
        for (from, to) in [(client, upstream), (upstream, client)] {
            var threads: [Thread] = []
            if delay > .zero {
                let line = DelayLine()
                threads.append(Thread { [self] in read(id, from: from, into: line) })
                threads.append(Thread { [self] in deliver(id, from: line, to: to) })
            } else {
                threads.append(Thread { [self] in pump(id, from: from, to: to, towardClient: from == upstream) })
            }
            for thread in threads {
                thread.name = "tcp-proxy-\(port)-\(id)"
                thread.start()
            }
        }
    }

    /// The most bytes a delay line holds before its reader waits.
    static let delayLineBytes = 64 << 20

    /// Reads chunks into the delay line, each due `delay` from now, until
    /// the socket ends; then marks the end, so that what was read is still
    /// delivered before the connection closes.
    private func read(_ id: Int, from: Int32, into line: DelayLine) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            while line.heldBytes > TCPProxy.delayLineBytes { Thread.sleep(forTimeInterval: 0.001) }
            let count = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            line.append(Array(buffer[..<count]), due: .now + delay)
        }
        line.end(due: .now + delay)
        finish(id, closing: false)
    }

    /// Writes each chunk of the delay line when it is due, until its end or
    /// a failed write; then ends the whole connection.
    private func deliver(_ id: Int, from line: DelayLine, to: Int32) {
        copying: while let chunk = line.next() {
            var sent = 0
            while sent < chunk.count {
                let n = chunk.withUnsafeBytes { send(to, $0.baseAddress! + sent, chunk.count - sent, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { break copying }
                sent += n
            }
        }
        finish(id, closing: true)
    }

    /// Copies from one socket to the other until either end closes or the
    /// proxy is cut, then ends the whole connection.
    private func pump(_ id: Int, from: Int32, to: Int32, towardClient: Bool) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            // Stalled: hold the chunk until released, or drop it when the
            // connection is cut (the send below then fails).
            while towardClient && state.withLock({ $0.stalled && $0.wantOpen && !$0.stopping }) {
                Thread.sleep(forTimeInterval: 0.005)
            }
            var sent = 0
            while sent < count {
                let n = buffer.withUnsafeBytes { send(to, $0.baseAddress! + sent, count - sent, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { break copying }
                sent += n
            }
        }
        finish(id, closing: true)
    }

    /// One of a connection's threads is done: with `closing`, both sockets
    /// are shut down (the connection ends); the last thread closes them.
    private func finish(_ id: Int, closing: Bool) {
        state.withLock { s in
            guard var connection = s.connections[id] else { return }
            if closing {
                shutdown(connection.client, Int32(SHUT_RDWR))
                shutdown(connection.upstream, Int32(SHUT_RDWR))
            }
            connection.pumps -= 1
            if connection.pumps == 0 {
                close(connection.client)
                close(connection.upstream)
                s.connections[id] = nil
            } else {
                s.connections[id] = connection
            }
        }
    }

    // MARK: - Sockets

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    /// A listening socket on 127.0.0.1:`port` (0: a free one).
    private static func listen(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("proxy: socket failed: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(fd, 64) == 0 else {
            let code = errno
            close(fd)
            throw HarnessError("proxy: cannot listen on 127.0.0.1:\(port): errno \(code)")
        }
        return fd
    }
}

/// Chunks of one direction of a delayed connection, each with the moment it
/// is due: the reading thread appends, the writing thread takes them in
/// order as they fall due.
final class DelayLine: Sendable {
    private struct State {
        var chunks: [(due: ContinuousClock.Instant, bytes: [UInt8]?)] = []
        var first = 0
        var held = 0
    }

    private let state = Mutex(State())

    var heldBytes: Int { state.withLock { $0.held } }

    func append(_ bytes: [UInt8], due: ContinuousClock.Instant) {
        state.withLock { s in
            s.chunks.append((due, bytes))
            s.held += bytes.count
        }
    }

    /// Marks the end: `next` returns nil once it is due.
    func end(due: ContinuousClock.Instant) {
        state.withLock { $0.chunks.append((due, nil)) }
    }

    /// The next chunk once it is due (waiting for it), or nil at the end.
    func next() -> [UInt8]? {
        while true {
            let now = ContinuousClock.now
            let (ready, wait): ([UInt8]??, Duration) = state.withLock { s in
                guard s.first < s.chunks.count else { return (nil, .milliseconds(1)) }
                let (due, bytes) = s.chunks[s.first]
                guard due <= now else { return (nil, min(due - now, .milliseconds(5))) }
                s.first += 1
                s.held -= bytes?.count ?? 0
                // Drop what was taken once it is most of the array.
                if s.first > 1024, s.first * 2 > s.chunks.count {
                    s.chunks.removeFirst(s.first)
                    s.first = 0
                }
                return (.some(bytes), .zero)
            }
            if let ready { return ready }
            Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18)
        }
    }
}
