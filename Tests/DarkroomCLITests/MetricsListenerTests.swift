import DarkroomMetrics
import Foundation
import Synchronization
import Testing

/// The metrics listener on its own, in this process, with short limits:
/// what it answers, and what it does with clients that misbehave. One
/// test at a time: a port one test releases must not go to another's
/// listener while it checks that the port is free again.
@Suite(.serialized) struct MetricsListenerTests {
    final class Renders: Sendable {
        let count = Mutex(0)
        func page() -> String {
            let n = count.withLock { $0 += 1; return $0 }
            return "# HELP test_renders_total Pages rendered.\n# TYPE test_renders_total counter\ntest_renders_total \(n)\n"
        }
    }

    static func listener(_ limits: MetricsLimits = MetricsLimits(), renders: Renders = Renders()) throws -> MetricsListener {
        let listener = MetricsListener(address: try MetricsAddress(parsing: "127.0.0.1:0"), limits: limits, render: renders.page)
        try listener.start()
        return listener
    }

    @Test func servesTheRenderedPageOnAFreePort() throws {
        let renders = Renders()
        let listener = try Self.listener(renders: renders)
        defer { listener.stop() }
        let port = try #require(listener.port)
        #expect(port != 0)
        #expect(listener.url == "http://127.0.0.1:\(port)/metrics")
        let response = try HTTPProbe.get("/metrics", port: Int(port))
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
        #expect(HTTPProbe.samples(response.body)["test_renders_total"] == 1)
        #expect(try HTTPProbe.scrape(port: Int(port))["test_renders_total"] == 2)
        // A query string is not part of the path.
        #expect(try HTTPProbe.get("/metrics?name[]=x", port: Int(port)).status == 200)
    }

    @Test func pointerNotFoundAndMethodNotAllowed() throws {
        let renders = Renders()
        let listener = try Self.listener(renders: renders)
        defer { listener.stop() }
        let port = Int(try #require(listener.port))
        let root = try HTTPProbe.get("/", port: port)
        #expect(root.status == 200)
        #expect(root.body.contains("/metrics"))
        #expect(try HTTPProbe.get("/jobs", port: port).status == 404)
        #expect(try HTTPProbe.get("/metrics/../admin", port: port).status == 404)
        for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
            let response = try HTTPProbe.request(method, "/metrics", port: port)
            #expect(response.status == 405, "\(method)")
            #expect(response.headers["allow"] == "GET, HEAD")
        }
        let head = try HTTPProbe.request("HEAD", "/metrics", port: port)
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        // Only the HEAD of /metrics rendered the page.
        #expect(renders.count.withLock { $0 } == 1)
    }

    /// A POST announcing a megabyte is answered before its body is sent:
    /// the listener never waits for (or reads) a body.
    @Test func neverWaitsForABody() throws {
        let listener = try Self.listener()
        defer { listener.stop() }
        let probe = try HTTPProbe(port: Int(try #require(listener.port)), timeout: .seconds(5))
        probe.send("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n")
        probe.send("only the first bytes")
        let response = try #require(probe.response())
        #expect(response.status == 405)
    }

    @Test func malformedRequestsGet4xxOrAreDropped() throws {
        let listener = try Self.listener()
        defer { listener.stop() }
        let port = Int(try #require(listener.port))
        let garbage: [[UInt8]] = [
            Array("HELLO\r\n\r\n".utf8),
            Array("GET\r\n\r\n".utf8),
            Array("GET /metrics HTTP/9.9\r\n\r\n".utf8),
            Array("GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n".utf8),
            [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03] + Array(repeating: 0, count: 64) + Array("\r\n\r\n".utf8),
            Array(repeating: 0xff, count: 2048) + Array("\r\n\r\n".utf8),
        ]
        for bytes in garbage {
            let probe = try HTTPProbe(port: port, timeout: .seconds(5))
            probe.send(bytes)
            let answer = try #require(probe.readToEnd(), "the listener neither answered nor closed")
            if let response = HTTPProbe.parse(answer) {
                #expect((400..<500).contains(response.status) || response.status == 505, "\(response.status)")
            }
        }
        #expect(try HTTPProbe.get("/metrics", port: port).status == 200)
    }

    @Test func hugeHeaderIsRefused() throws {
        let listener = try Self.listener()
        defer { listener.stop() }
        let port = Int(try #require(listener.port))
        let probe = try HTTPProbe(port: port, timeout: .seconds(5))
        let filler = String(repeating: "a", count: 256 * 1024)
        probe.send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Filler: \(filler)\r\n\r\n")
        let answer = try #require(probe.readToEnd(), "the listener neither answered nor closed")
        if let response = HTTPProbe.parse(answer) {
            #expect((400..<500).contains(response.status), "\(response.status)")
        }
        let longPath = try HTTPProbe.get("/" + String(repeating: "p", count: 64 * 1024), port: port)
        #expect((400..<500).contains(longPath.status))
        #expect(try HTTPProbe.get("/metrics", port: port).status == 200)
    }

    /// A client that sends half a request and stalls holds one connection,
    /// not the listener: others are served meanwhile, and the stalled one
    /// is closed after the idle timeout.
    @Test func slowClientIsServedAroundThenDropped() throws {
        var limits = MetricsLimits()
        limits.idleTimeout = .seconds(1)
        let listener = try Self.listener(limits)
        defer { listener.stop() }
        let port = Int(try #require(listener.port))
        let slow = try HTTPProbe(port: port, timeout: .seconds(6))
        slow.send("GET /metr")
        #expect(try HTTPProbe.get("/metrics", port: port).status == 200)
        let started = ContinuousClock.now
        let rest = slow.readToEnd()
        let waited = ContinuousClock.now - started
        #expect(rest != nil, "the stalled connection was not closed")
        #expect(waited < .seconds(5))
        #expect(try HTTPProbe.get("/metrics", port: port).status == 200)
    }

    /// Past the connection limits, new connections are closed at once; the
    /// listener serves again as soon as connections are released (not
    /// after the idle timeout: its thread never waits in `accept`).
    @Test func connectionLimits() throws {
        var limits = MetricsLimits()
        limits.connections = 4
        limits.connectionsPerAddress = 3
        limits.idleTimeout = .seconds(30)
        let listener = try Self.listener(limits)
        defer { listener.stop() }
        let port = Int(try #require(listener.port))
        let held = try (0..<3).map { _ in try HTTPProbe(port: port, timeout: .seconds(5)) }
        for probe in held { probe.send("GET /") }
        // Give the listener's thread a moment to accept the three.
        Thread.sleep(forTimeInterval: 0.2)
        let extra = try HTTPProbe(port: port, timeout: .seconds(5))
        extra.send("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let refused = extra.readToEnd()
        #expect(refused == [] || refused.flatMap(HTTPProbe.parse) == nil, "a fourth connection from one address was served")
        for probe in held { probe.close() }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(try HTTPProbe.get("/metrics", port: port).status == 200)

        // A flood of half requests, dropped by the client at once.
        let flood = (0..<40).compactMap { _ in try? HTTPProbe(port: port, timeout: .seconds(5)) }
        for probe in flood { probe.send("GET /") }
        for probe in flood { probe.close() }
        let deadline = ContinuousClock.now + .seconds(3)
        var served = false
        while !served && ContinuousClock.now < deadline {
            served = (try? HTTPProbe.get("/metrics", port: port).status) == 200
            if !served { Thread.sleep(forTimeInterval: 0.05) }
        }
        #expect(served, "the listener did not serve again within 3 s of the flood")
    }

    @Test func addressInUseIsReportedAndStopReleasesIt() throws {
        let first = try Self.listener()
        let port = try #require(first.port)
        let second = MetricsListener(address: MetricsAddress(host: "127.0.0.1", port: port), render: { "" })
        #expect {
            try second.start()
        } throws: { error in
            "\(error)".contains("cannot listen on 127.0.0.1:\(port)") && "\(error)".contains("in use")
        }
        first.stop()
        first.wait()
        // The port is free again at once.
        let again = MetricsListener(address: MetricsAddress(host: "127.0.0.1", port: port), render: { "" })
        try again.start()
        again.stop()
    }

    @Test func unresolvableHostFails() throws {
        let listener = MetricsListener(address: MetricsAddress(host: "no-such-host.invalid", port: 0), render: { "" })
        #expect(throws: MetricsListenerError.self) { try listener.start() }
        listener.wait()
    }
}
