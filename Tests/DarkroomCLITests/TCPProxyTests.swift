import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The test proxy itself: it forwards both ways, holds chunks back by its
/// delay, and a cut closes what is open and refuses what comes until it is
/// restored.
@Suite struct TCPProxyTests {
    @Test func forwardsWithItsDelayAndACutClosesAndRefusesUntilRestored() throws {
        let server = try Plain.listener()
        defer { close(server.fd) }
        let proxy = try TCPProxy(to: server.port, delay: .milliseconds(150))
        defer { proxy.stop() }

        let (client, accepted) = try Plain.pair(through: proxy, to: server.fd)
        defer { close(client); close(accepted) }

        let started = ContinuousClock.now
        #expect(Plain.send(client, "ping") && Plain.receive(accepted) == "ping")
        #expect(Plain.send(accepted, "pong") && Plain.receive(client) == "pong")
        // Each chunk waited 150 ms, once each way.
        #expect(ContinuousClock.now - started >= .milliseconds(300))
        #expect(proxy.accepted == 1 && proxy.openConnections == 1)

        proxy.cut()
        #expect(Plain.receive(client) == "", "the open connection is closed")
        #expect(Plain.connect(proxy.port) == nil, "a new connection is refused")
        #expect(proxy.openConnections == 0)

        proxy.restore()
        let again = try #require(Plain.connect(proxy.port))
        defer { close(again) }
        let acceptedAgain = accept(server.fd, nil, nil)
        defer { close(acceptedAgain) }
        #expect(Plain.send(again, "back") && Plain.receive(acceptedAgain) == "back")
        #expect(proxy.accepted == 2)
    }

    @Test func aStallHoldsTheServersBytesWhileTheClientsFlowAndACutDropsThem() throws {
        let server = try Plain.listener()
        defer { close(server.fd) }
        let proxy = try TCPProxy(to: server.port)
        defer { proxy.stop() }
        let (client, accepted) = try Plain.pair(through: proxy, to: server.fd)
        defer { close(client); close(accepted) }

        proxy.stall()
        #expect(Plain.send(client, "up") && Plain.receive(accepted) == "up", "the client's bytes still flow")
        #expect(Plain.send(accepted, "held"))
        #expect(!Plain.readable(client, withinMilliseconds: 300), "the server's bytes wait in the proxy")
        proxy.unstall()
        #expect(Plain.receive(client) == "held", "and arrive once it is released")

        proxy.stall()
        #expect(Plain.send(accepted, "dropped"))
        #expect(!Plain.readable(client, withinMilliseconds: 200))
        proxy.cut()
        #expect(Plain.receive(client) == "", "a cut closes the connection without what was held")
    }
}

/// Plain blocking TCP on 127.0.0.1, for testing the proxy.
private enum Plain {
    static func address(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    static func listener() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var any = address(0)
        let bound = withUnsafePointer(to: &any) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 8) == 0 else { throw HarnessError("cannot listen: errno \(errno)") }
        var named = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &named) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: named.sin_port)))
    }

    /// A connected socket, or nil when the connection is refused.
    static func connect(_ port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var target = address(port)
        let connected = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if connected != 0 {
            close(fd)
            return nil
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    static func send(_ fd: Int32, _ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return Glibc.send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count
    }

    /// A client connected through `proxy`, and the server's end of it.
    static func pair(through proxy: TCPProxy, to listener: Int32) throws -> (client: Int32, server: Int32) {
        guard let client = connect(proxy.port) else { throw HarnessError("cannot connect to the proxy") }
        let accepted = accept(listener, nil, nil)
        guard accepted >= 0 else {
            close(client)
            throw HarnessError("the proxy's connection never reached the server")
        }
        return (client, accepted)
    }

    /// Whether something (bytes or the end) can be read within the time.
    static func readable(_ fd: Int32, withinMilliseconds milliseconds: Int32) -> Bool {
        var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&item, 1, milliseconds) > 0
    }

    /// What one read returns ("" at the end of the stream or on an error).
    static func receive(_ fd: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
    }
}
