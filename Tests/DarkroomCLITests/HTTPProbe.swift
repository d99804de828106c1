import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A tiny HTTP client over a POSIX socket, for the metrics listener: it can
/// send exactly the bytes a test wants (a garbage request line, a huge
/// header, half a request) and see whether the listener answered, with
/// what, or closed the connection. Every request asks for `Connection:
/// close`, so a response ends where the stream ends.
final class HTTPProbe {
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    struct ProbeError: Error, CustomStringConvertible {
        var description: String
    }

    private var descriptor: Int32

    /// Connects to 127.0.0.1:`port`; reads wait at most `timeout`.
    init(port: Int, timeout: Duration = .seconds(10)) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ProbeError(description: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            // Through close(), which forgets the descriptor: deinit runs
            // for an init that throws here, and closing the number again
            // could close another thread's file that has just reused it.
            close()
            throw ProbeError(description: "connect to port \(port): \(reason)")
        }
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        var limit = timeval(tv_sec: Int(milliseconds / 1000), tv_usec: Int(milliseconds % 1000) * 1000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { if descriptor >= 0 { Glibc.close(descriptor) } }

    func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    /// Sends every byte; false when the listener has already closed the
    /// connection (or reset it).
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Reads until the listener closes the connection (nil if it did not
    /// within the timeout). A reset counts as closed.
    func readToEnd() -> [UInt8]? {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                out += buffer[0..<n]
            } else if n == 0 || errno == ECONNRESET {
                return out
            } else if errno == EINTR {
                continue
            } else {
                return nil
            }
        }
    }

    /// Reads to the end and parses the response; nil when the connection
    /// was closed without one (or the read timed out).
    func response() -> Response? {
        guard let bytes = readToEnd(), !bytes.isEmpty else { return nil }
        return HTTPProbe.parse(bytes)
    }

    static func parse(_ bytes: [UInt8]) -> Response? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return nil }
        let head = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let statusParts = head.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Response(status: status, headers: headers, body: String(text[split.upperBound...]))
    }

    /// One request (`METHOD PATH`, no body) on a fresh connection.
    static func request(_ method: String, _ path: String, port: Int, timeout: Duration = .seconds(10)) throws -> Response {
        let probe = try HTTPProbe(port: port, timeout: timeout)
        probe.send("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        guard let response = probe.response() else { throw ProbeError(description: "\(method) \(path): no response") }
        return response
    }

    static func get(_ path: String, port: Int) throws -> Response {
        try request("GET", path, port: port)
    }

    /// `GET /metrics`, parsed into sample lines: `name{labels}` to value.
    static func scrape(port: Int) throws -> [String: Double] {
        let response = try get("/metrics", port: port)
        guard response.status == 200 else { throw ProbeError(description: "GET /metrics: \(response.status) \(response.body)") }
        return samples(response.body)
    }

    static func samples(_ page: String) -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in page.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            let value = line[line.index(after: space)...]
            samples[String(line[..<space])] = value == "+Inf" ? .infinity : Double(value)
        }
        return samples
    }
}
