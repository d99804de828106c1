import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A ZMTP 3.0 peer (rfc.zeromq.org/spec/23) written over a plain TCP socket,
/// for what a libzmq socket in the test process cannot do:
///
/// - send a subscription of megabytes as a SUB would. libzmq keeps a SUB's
///   own subscriptions as a trie one level per byte and frees it
///   recursively, so a multi-megabyte topic would overflow the test's own
///   stack when that socket closes; here a subscription is just bytes;
/// - send what no libzmq socket sends: a bad greeting, a frame whose length
///   lies, a frame over the server's `ZMQ_MAXMSGSIZE`;
/// - see the server close the connection.
///
/// The wire format, as the specification gives it:
///
///     greeting  = signature version mechanism as-server filler      (64 octets)
///     signature = %xFF 8OCTET %x7F
///     version   = %x03 %x00
///     mechanism = "NULL" padded with %x00 to 20 octets
///     as-server = %x00                  (NULL: always 0)
///     filler    = 31 %x00
///     frame     = flags size body
///     flags     = bit 0 MORE, bit 1 LONG (8-octet size), bit 2 COMMAND
///     READY     = command: %d5 "READY" then properties (name-length name value-length(4) value)
///
/// A SUB subscribes with a one-frame message whose body is %x01 and the
/// topic, and unsubscribes with %x00 and the topic.
///
/// Blocking I/O, one thread; every read waits at most a given time.
final class ZMTPPeer {
    private(set) var fd: Int32
    private var buffer: [UInt8] = []
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    /// Connects to 127.0.0.1:`port`; nothing is sent yet.
    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("zmtp: socket failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            // Through close(), which forgets the descriptor: deinit runs
            // for an init that throws here, and closing the number again
            // could close another thread's file that has just reused it.
            close()
            throw HarnessError("zmtp: cannot connect to 127.0.0.1:\(port): errno \(code)")
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close() }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    // MARK: Wire format

    /// The 64-octet greeting. The defaults are a correct ZMTP 3.0 NULL
    /// greeting; the parameters let a test send a wrong one.
    static func greeting(major: UInt8 = 3, minor: UInt8 = 0, mechanism: String = "NULL", asServer: UInt8 = 0,
                         signatureStart: UInt8 = 0xFF, signatureEnd: UInt8 = 0x7F) -> [UInt8] {
        var bytes: [UInt8] = [signatureStart] + [UInt8](repeating: 0, count: 8) + [signatureEnd, major, minor]
        let name = Array(mechanism.utf8.prefix(20))
        bytes += name + [UInt8](repeating: 0, count: 20 - name.count)
        bytes.append(asServer)
        bytes += [UInt8](repeating: 0, count: 31)
        return bytes
    }

    /// One frame: flags, a short (1-octet) or long (8-octet) size, the body.
    static func frame(_ body: [UInt8], more: Bool = false, command: Bool = false) -> [UInt8] {
        var flags: UInt8 = (more ? 0x01 : 0) | (command ? 0x04 : 0)
        var out: [UInt8] = []
        out.reserveCapacity(body.count + 9)
        if body.count > 255 {
            flags |= 0x02
            out.append(flags)
            out.appendBigEndian64(UInt64(body.count))
        } else {
            out.append(flags)
            out.append(UInt8(body.count))
        }
        out += body
        return out
    }

    /// The header of a long frame that claims `size` octets of body.
    static func longFrameHeader(size: UInt64, more: Bool = false) -> [UInt8] {
        var out: [UInt8] = [0x02 | (more ? 0x01 : 0)]
        out.appendBigEndian64(size)
        return out
    }

    /// A message: its frames, each but the last with MORE set.
    static func message(_ frames: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for (index, body) in frames.enumerated() {
            out += frame(body, more: index < frames.count - 1)
        }
        return out
    }

    /// A command frame: the name's length, the name, the data.
    static func command(_ name: String, _ data: [UInt8]) -> [UInt8] {
        let nameBytes = Array(name.utf8)
        return frame([UInt8(nameBytes.count)] + nameBytes + data, command: true)
    }

    /// The NULL mechanism's READY command with these metadata properties.
    static func ready(_ properties: [(String, [UInt8])]) -> [UInt8] {
        var data: [UInt8] = []
        for (name, value) in properties {
            let nameBytes = Array(name.utf8)
            data.append(UInt8(nameBytes.count))
            data += nameBytes
            data.appendBigEndian32(UInt32(value.count))
            data += value
        }
        return command("READY", data)
    }

    /// The message by which a SUB subscribes to `topic` (ZMTP 3.0).
    static func subscription(_ topic: [UInt8]) -> [UInt8] { frame([0x01] + topic) }

    // MARK: I/O

    /// Writes all of `bytes`; false when the server has closed the connection.
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        guard fd >= 0 else { return false }
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    /// Sends a greeting and READY as a `socketType` peer, then reads the
    /// server's greeting and READY. Throws if the server does not complete
    /// the handshake within `timeout` seconds.
    func handshake(socketType: String, timeout: Double = 5) throws {
        guard write(ZMTPPeer.greeting() + ZMTPPeer.ready([("Socket-Type", Array(socketType.utf8))])) else {
            throw HarnessError("zmtp: the server closed the connection during the greeting")
        }
        guard let greeting = read(count: 64, timeout: timeout), greeting[0] == 0xFF, greeting[9] == 0x7F, greeting[10] >= 3 else {
            throw HarnessError("zmtp: no ZMTP 3 greeting from the server")
        }
        guard let (command, body) = readFrame(timeout: timeout), command, body.count >= 6, Array(body[1..<6]) == Array("READY".utf8) else {
            throw HarnessError("zmtp: the server sent no READY")
        }
    }

    /// The next message (commands are skipped), or nil when none came within
    /// `timeout` seconds or the connection closed.
    func readMessage(timeout: Double) -> [[UInt8]]? {
        let deadline = Date().addingTimeInterval(timeout)
        var frames: [[UInt8]] = []
        while true {
            let left = max(0, deadline.timeIntervalSinceNow)
            guard let (command, body, more) = readFrameWithMore(timeout: left) else { return nil }
            if command { continue }
            frames.append(body)
            if !more { return frames }
        }
    }

    /// Whether the server closes the connection within `timeout` seconds;
    /// whatever it sends meanwhile is read and dropped.
    func waitForClose(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while fd >= 0 {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return false }
            var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&item, 1, Int32(left * 1000) + 1)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return true }
        }
        return true
    }

    /// Whether the connection is still open: no end-of-file or error waiting.
    var isOpen: Bool {
        guard fd >= 0 else { return false }
        var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&item, 1, 0) > 0 else { return true }
        if item.revents & Int16(POLLERR | POLLHUP) != 0 { return false }
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    }

    private func readFrame(timeout: Double) -> (Bool, [UInt8])? {
        readFrameWithMore(timeout: timeout).map { ($0.0, $0.1) }
    }

    private func readFrameWithMore(timeout: Double) -> (Bool, [UInt8], Bool)? {
        let deadline = Date().addingTimeInterval(timeout)
        guard let flags = read(count: 1, timeout: timeout)?.first else { return nil }
        let sizeBytes = flags & 0x02 != 0 ? 8 : 1
        guard let sizeField = read(count: sizeBytes, timeout: max(0, deadline.timeIntervalSinceNow)) else { return nil }
        let size = sizeField.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        // Replies in these tests are small; a lying size is not believed.
        guard size <= 16 << 20 else { return nil }
        guard let body = read(count: Int(size), timeout: max(0, deadline.timeIntervalSinceNow)) else { return nil }
        return (flags & 0x04 != 0, body, flags & 0x01 != 0)
    }

    /// Exactly `count` bytes, or nil on timeout or end of file.
    private func read(count: Int, timeout: Double) -> [UInt8]? {
        let deadline = Date().addingTimeInterval(timeout)
        while buffer.count < count {
            guard fd >= 0 else { return nil }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return nil }
            var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&item, 1, Int32(left * 1000) + 1)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            buffer += scratch[0..<n]
        }
        let out = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return out
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian64(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    mutating func appendBigEndian32(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }
}
