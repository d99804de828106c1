import CMicroHTTPD
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The limits that keep a client of the metrics listener from costing the
/// process more than a few hundred kilobytes and a few sockets, whatever
/// it sends (or does not send).
public struct MetricsLimits: Sendable, Equatable {
    /// Connections open at once; more are closed as soon as they are accepted.
    public var connections: Int = 32
    /// Connections open at once from one address, so that one client
    /// cannot take every connection from Prometheus.
    public var connectionsPerAddress: Int = 8
    /// Memory for one connection's request line, headers and response
    /// headers. A request whose headers do not fit in about half of it is
    /// answered 431 and closed.
    public var bytesPerConnection: Int = 16 * 1024
    /// How long a connection may go without sending or taking a byte
    /// before it is closed: a client that opens a connection and then
    /// dribbles a header or nothing at all is dropped after this.
    public var idleTimeout: Duration = .seconds(10)

    public init() {}
}

/// A read-only HTTP listener for Prometheus: `GET /metrics` answers the
/// page `render` builds, in the text format (`text/plain; version=0.0.4`);
/// `GET /` a line saying where the metrics are; any other path 404, any
/// other method 405. Nothing is ever read from a request's body, and no
/// request can change anything: jobs, results and events never travel
/// here. It is off unless a role is started with `--metrics`.
///
/// libmicrohttpd does the HTTP: it parses requests, answers malformed ones
/// itself (400, 431 and the like), enforces `MetricsLimits`, and serves
/// every connection from one polling thread of its own (poll(2)). `render` runs on
/// that thread, one request at a time, so it must only read what the roles
/// publish (values behind a lock, copied out): it never touches a role's
/// sockets or database, and a slow scrape never slows a role down.
///
/// Threading: `start`, `stop` and `wait` may be called from any thread.
public final class MetricsListener: Sendable {
    public let address: MetricsAddress
    public let limits: MetricsLimits
    private let handler: RequestHandler
    private let state = Mutex<State>(State())
    /// Entered by `start`, left by `stop`: `wait` waits on it.
    private let running = DispatchGroup()

    private struct State {
        var daemon: OpaquePointer?
        var port: UInt16?
        var started = false
        var stopped = false
    }

    /// `render` builds the page for `GET /metrics`; see `MetricsText`.
    public init(address: MetricsAddress, limits: MetricsLimits = MetricsLimits(), render: @escaping @Sendable () -> String) {
        self.address = address
        self.limits = limits
        handler = RequestHandler(render: render)
    }

    /// Binds the address and starts serving; returns once the listener
    /// accepts connections. Throws when the address cannot be resolved or
    /// bound (in use, not this machine's, a privileged port) or when
    /// libmicrohttpd cannot start.
    public func start() throws(MetricsListenerError) {
        try state.withLock { (state: inout State) throws(MetricsListenerError) in
            guard !state.started else { throw MetricsListenerError("the metrics listener was already started") }
            // libmicrohttpd is loaded here, when a listener first starts.
            if let unusable = darkroom_mhd_load() { throw MetricsListenerError(String(cString: unusable)) }
            let socket = try ListenSocket.open(address)
            // The handler lives as long as the listener, which outlives the
            // daemon (`stop` stops the daemon before anything is released),
            // so an unretained pointer to it is safe for every call.
            let context = Unmanaged.passUnretained(handler).toOpaque()
            // poll(2), not epoll: with epoll's edge triggering, libmicrohttpd
            // 0.9.75 now and then missed a client that sent half a request
            // and closed, and held its connection until the idle timeout, so
            // a burst of those kept every client out for that long. poll is
            // level-triggered, and over a few dozen connections costs nothing.
            let flags = UInt32(MHD_USE_POLL_INTERNAL_THREAD.rawValue | MHD_USE_ITC.rawValue)
            guard let daemon = darkroom_mhd_start(
                flags, socket.descriptor,
                UInt32(clamping: max(1, limits.connections)), UInt32(clamping: max(1, limits.connectionsPerAddress)),
                max(4_096, limits.bytesPerConnection),
                UInt32(clamping: max(1, (limits.idleTimeout + .milliseconds(999)).components.seconds)),
                metricsAccessHandler, context
            ) else {
                close(socket.descriptor)
                throw MetricsListenerError("libmicrohttpd could not start serving \(address)")
            }
            state.daemon = daemon
            state.port = socket.port
            state.started = true
            running.enter()
        }
    }

    /// The port bound (the one the system chose for port 0); nil before
    /// `start`.
    public var port: UInt16? { state.withLock { $0.port } }

    /// `http://HOST:PORT/metrics` with the port actually bound.
    public var url: String {
        var bound = address
        bound.port = port ?? address.port
        return "http://\(bound)/metrics"
    }

    /// Closes the listening socket and every connection, and waits for
    /// libmicrohttpd's thread to end (a request being answered finishes
    /// first). Does nothing before `start` or after a first `stop`.
    public func stop() {
        let daemon: OpaquePointer? = state.withLock { state in
            guard state.started, !state.stopped else { return nil }
            state.stopped = true
            defer { state.daemon = nil }
            return state.daemon
        }
        guard let daemon else { return }
        darkroom_mhd_stop_daemon(daemon)
        running.leave()
    }

    /// `stop()`; the listener has nothing in hand worth a grace period.
    public func stop(grace: Duration) {
        stop()
    }

    /// Blocks until `stop` (at once if the listener never started).
    public func wait() {
        running.wait()
    }
}

/// The metrics listener could not start.
public struct MetricsListenerError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

// MARK: Requests

/// What the listener answers, decided from the method and the path alone.
struct MetricsResponse: Sendable, Equatable {
    var status: UInt32
    var contentType: String
    var body: String
    /// Sent with 405: the methods that are allowed.
    var allow: String?

    static let textFormat = "text/plain; version=0.0.4; charset=utf-8"
    static let plainText = "text/plain; charset=utf-8"

    /// The answer to `method` on `path` (the path without its query string:
    /// libmicrohttpd has split it off). Only GET and HEAD are served; HEAD
    /// is answered like GET and libmicrohttpd leaves the body out.
    static func answer(method: String, path: String, render: () -> String) -> MetricsResponse {
        let readable = method == "GET" || method == "HEAD"
        switch path {
        case "/metrics" where readable:
            return MetricsResponse(status: 200, contentType: textFormat, body: render())
        case "/" where readable:
            return MetricsResponse(status: 200, contentType: plainText,
                                   body: "Darkroom metrics: GET /metrics (Prometheus text format). Read-only.\n")
        case "/metrics", "/":
            return MetricsResponse(status: 405, contentType: plainText, body: "405 method not allowed: only GET and HEAD are served here\n",
                                   allow: "GET, HEAD")
        default:
            return MetricsResponse(status: 404, contentType: plainText, body: "404 not found: the metrics are at /metrics\n")
        }
    }
}

/// Holds the render function for the C callback, which gets it back from
/// the daemon's context pointer.
final class RequestHandler: Sendable {
    let render: @Sendable () -> String
    init(render: @escaping @Sendable () -> String) { self.render = render }
}

/// libmicrohttpd's access handler. It is called once the request line and
/// headers are read, and answers at once: a response queued on that first
/// call means the body, if any, is never read (libmicrohttpd closes the
/// connection after the response instead).
private let metricsAccessHandler: MHD_AccessHandlerCallback = { context, connection, url, method, _, _, _, _ in
    guard let context, let connection else { return .NO }
    let handler = Unmanaged<RequestHandler>.fromOpaque(context).takeUnretainedValue()
    let answer = MetricsResponse.answer(method: method.map { String(cString: $0) } ?? "",
                                        path: url.map { String(cString: $0) } ?? "",
                                        render: handler.render)
    var body = Array(answer.body.utf8)
    let response = body.withUnsafeMutableBytes { bytes in
        // MUST_COPY: libmicrohttpd keeps its own copy of the body.
        darkroom_mhd_create_response_from_buffer(bytes.count, bytes.baseAddress, .RESPMEM_MUST_COPY)
    }
    guard let response else { return .NO }
    defer { darkroom_mhd_destroy_response(response) }
    _ = darkroom_mhd_add_response_header(response, "Content-Type", answer.contentType)
    if let allow = answer.allow { _ = darkroom_mhd_add_response_header(response, "Allow", allow) }
    return darkroom_mhd_queue_response(connection, answer.status, response)
}

// MARK: The listening socket

/// The listening socket, made here rather than by libmicrohttpd so that a
/// failure names its cause (`Address already in use`) and the port the
/// system chose is known. libmicrohttpd takes it over and closes it when
/// it stops.
enum ListenSocket {
    struct Opened {
        var descriptor: Int32
        var port: UInt16
    }

    static func open(_ address: MetricsAddress) throws(MetricsListenerError) -> Opened {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var found: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(address.host, String(address.port), &hints, &found)
        guard resolved == 0, let first = found else {
            throw MetricsListenerError("cannot resolve \(address.host): \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(first) }
        // The first address that binds wins (a name may resolve to several);
        // the first failure is the one reported.
        var failure: String?
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let info = candidate {
            candidate = info.pointee.ai_next
            if let opened = bindAndListen(info.pointee, failure: &failure) { return opened }
        }
        throw MetricsListenerError("cannot listen on \(address): \(failure ?? "no address to bind")")
    }

    private static func bindAndListen(_ info: addrinfo, failure: inout String?) -> Opened? {
        #if canImport(Glibc)
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #else
        let type = SOCK_STREAM | SOCK_CLOEXEC
        #endif
        let descriptor = socket(info.ai_family, type, 0)
        guard descriptor >= 0 else {
            failure = failure ?? reason()
            return nil
        }
        var one: Int32 = 1
        // A restarted process can bind again at once, while the old
        // process's connections are still in TIME_WAIT.
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        // Non-blocking, as libmicrohttpd expects: it accepts until the
        // queue is empty, and a blocking accept would hold its only thread
        // there, with every open connection unserved, until the next client.
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0,
              bind(descriptor, info.ai_addr, info.ai_addrlen) == 0, listen(descriptor, 64) == 0 else {
            failure = failure ?? reason()
            close(descriptor)
            return nil
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else {
            failure = failure ?? reason()
            close(descriptor)
            return nil
        }
        let family = Int32(storage.ss_family)
        let port: UInt16 = withUnsafePointer(to: &storage) { pointer in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        return Opened(descriptor: descriptor, port: port)
    }

    private static func reason() -> String {
        String(cString: strerror(errno))
    }
}
