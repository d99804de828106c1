import DarkroomZMQ
import Foundation
import Testing

/// `--insecure` said once in a server's log at start: a warning naming
/// each endpoint it leaves open, or a note that it changes nothing.
@Suite("--insecure notice", .serialized)
struct InsecureNoticeTests {
    /// Runs a role, with the arguments made for a fresh harness, until its
    /// ready line; stops it with SIGTERM and returns its log.
    static func startAndStop(_ arguments: (SystemHarness) throws -> [String], ready: String) throws -> String {
        let h = try SystemHarness()
        try h.start("role", try arguments(h) + ["--data", h.dir.path("data")])
        try h.waitUntil("the role is ready") { h.log("role").contains(ready) }
        #expect(h.signal("role", SIGTERM) == 0, "\(h.log("role"))")
        return h.log("role")
    }

    static func count(_ text: String, in log: String) -> Int {
        log.components(separatedBy: text).count - 1
    }

    /// The log's lines that mention --insecure.
    static func insecureLines(_ log: String) -> [String] {
        log.split(separator: "\n").map(String.init).filter { $0.contains("--insecure") }
    }

    @Test("a broker whose frontend listens on 0.0.0.0 without keys warns once, naming the frontend only")
    func theBrokerWarnsOnce() throws {
        let log = try Self.startAndStop({ h in
            ["broker", "--insecure", "--frontend", "tcp://0.0.0.0:*", "--backend", h.backend, "--events", h.events]
        }, ready: "broker ready")
        let lines = Self.insecureLines(log)
        #expect(lines.count == 1, "\(log)")
        let line = try #require(lines.first)
        #expect(line.contains(" broker warn  --insecure: the frontend listens on tcp://0.0.0.0:* without CURVE, so anyone who can reach it can submit jobs"), "\(line)")
        #expect(!line.contains("backend") && !line.contains("events"), "loopback endpoints are not open: \(line)")
    }

    @Test("a storage node on 0.0.0.0 without keys warns once")
    func theStoreWarnsOnce() throws {
        let log = try Self.startAndStop({ _ in ["store", "--insecure", "--bind", "tcp://0.0.0.0:*"] }, ready: "storage node ready")
        let lines = Self.insecureLines(log)
        #expect(lines.count == 1, "\(log)")
        #expect(lines.first?.contains(" store warn  --insecure: the storage node listens on tcp://0.0.0.0:* without CURVE, so anyone who can reach it can read, store and delete records") == true,
                "\(log)")
    }

    @Test("darkroom up with one endpoint on 0.0.0.0 warns once")
    func upWarnsOnce() throws {
        let log = try Self.startAndStop({ h in
            ["up", "--insecure", "--workers", "1", "--concurrency", "1", "--frontend", h.frontend, "--backend", h.backend,
             "--events", "tcp://0.0.0.0:*", "--store", "tcp://0.0.0.0:*"]
        }, ready: "darkroom is up")
        let lines = Self.insecureLines(log)
        #expect(lines.count == 1, "\(log)")
        let line = try #require(lines.first)
        #expect(line.contains(" up warn  --insecure: the events endpoint listens on tcp://0.0.0.0:*"), "\(line)")
        #expect(line.contains("the storage node listens on tcp://0.0.0.0:*") && line.contains("keep these ports on a private network"), "\(line)")
        #expect(!line.contains("the frontend") && !line.contains("the backend"), "\(line)")
    }

    @Test("--insecure with loopback endpoints only says once that it changes nothing; without it nothing is said")
    func loopbackOnlyIsNoWarning() throws {
        let flagged = try Self.startAndStop({ h in
            ["broker", "--insecure", "--frontend", h.frontend, "--backend", h.backend, "--events", h.events]
        }, ready: "broker ready")
        #expect(Self.insecureLines(flagged).count == 1, "\(flagged)")
        #expect(Self.count(" broker info  --insecure changes nothing: every endpoint is on loopback", in: flagged) == 1, "\(flagged)")
        #expect(!flagged.contains(" warn "), "\(flagged)")

        let plain = try Self.startAndStop({ h in ["store", "--bind", h.store] }, ready: "storage node ready")
        #expect(Self.insecureLines(plain).isEmpty, "\(plain)")
        #expect(!plain.contains(" warn "), "\(plain)")
    }

    @Test("--insecure with keys says once that it changes nothing", .enabled(if: Curve.isAvailable, "libzmq built without CURVE"))
    func keysMakeTheFlagMoot() throws {
        let log = try Self.startAndStop({ h in
            for (name, role, dir) in [("server", nil, "keys"), ("alice", "producer", "allow")] as [(String, String?, String)] {
                let made = try h.run(["keygen", name, "--dir", h.dir.path(dir)] + (role.map { ["--role", $0] } ?? []))
                try #require(made.status == 0, "\(made.stderr)")
            }
            return ["store", "--insecure", "--bind", "tcp://0.0.0.0:*", "--curve-key", h.dir.path("keys/server.key_secret"), "--allow", h.dir.path("allow")]
        }, ready: "storage node ready")
        #expect(Self.insecureLines(log).count == 1, "\(log)")
        #expect(Self.count(" store info  --insecure changes nothing: CURVE and the allowlist guard every endpoint", in: log) == 1, "\(log)")
        #expect(!log.contains(" warn "), "\(log)")
    }
}
