import DarkroomImage
import DarkroomZMQ
import Foundation
import Testing

/// Clients and workers whose CURVE keys a server refuses: they are told at
/// once, with what to check, instead of waiting out their timeout as if the
/// server were down; and a refused worker stays quiet and idle.
@Suite("Refused keys", .serialized, .enabled(if: Curve.isAvailable, "libzmq built without CURVE"))
struct RefusedKeyTests {
    /// A broker and a storage node with keys: an admin and a producer key
    /// allowed by both, a worker key allowed by the broker only, and keys
    /// no server knows.
    final class KeyedSystem {
        let h: SystemHarness
        var keys: String { h.dir.path("keys") }

        init() throws {
            h = try SystemHarness()
            for (name, role, dir) in [("admin", "admin", "allow"), ("producer", "producer", "allow"), ("worker", "worker", "allow-broker"),
                                      ("stranger", "producer", "elsewhere"), ("other-server", nil, "elsewhere")] as [(String, String?, String)] {
                var args = ["keygen", name, "--dir", h.dir.path(dir)]
                if let role { args += ["--role", role] }
                let made = try h.run(args)
                try #require(made.status == 0, "\(made.stderr)")
            }
            let server = try h.run(["keygen", "server", "--dir", keys])
            try #require(server.status == 0, "\(server.stderr)")
            // The broker allows the admin, the producer and the worker; the
            // storage node the admin and the producer only.
            try FileManager.default.createDirectory(atPath: h.dir.path("allow-all"), withIntermediateDirectories: true)
            for file in ["admin.key", "producer.key"] {
                try FileManager.default.copyItem(atPath: h.dir.path("allow/\(file)"), toPath: h.dir.path("allow-all/\(file)"))
            }
            try FileManager.default.copyItem(atPath: h.dir.path("allow-broker/worker.key"), toPath: h.dir.path("allow-all/worker.key"))
            let secret = h.dir.path("keys/server.key_secret")
            try h.start("broker", ["broker", "--data", h.dir.path("data"), "--frontend", h.frontend, "--backend", h.backend,
                                   "--events", h.events, "--curve-key", secret, "--allow", h.dir.path("allow-all")])
            try h.start("store", ["store", "--data", h.dir.path("data"), "--bind", h.store, "--curve-key", secret, "--allow", h.dir.path("allow")])
            try h.waitUntil("both servers answer the admin key") {
                try h.run(["status", "--check"] + self.statusFlags + self.keyFlags("allow/admin.key_secret")).status == 0
            }
        }

        /// Where `status` finds both servers.
        var statusFlags: [String] { h.brokerFlags + h.storeFlags }

        func keyFlags(_ secret: String, serverKey: String = "keys/server.key") -> [String] {
            ["--curve-key", h.dir.path(secret), "--server-key", h.dir.path(serverKey), "--store-key", h.dir.path(serverKey)]
        }

        /// Runs a client command and how long it took.
        func timed(_ args: [String]) throws -> (DarkroomProcess.Output, Duration) {
            let start = ContinuousClock.now
            let output = try h.run(args)
            return (output, ContinuousClock.now - start)
        }
    }

    @Test("submit, status and watch are told at once that the broker refuses their key, and why")
    func refusedClientsAreToldAtOnce() throws {
        let system = try KeyedSystem()
        let input = try system.h.writeImages(1)
        let cases: [(name: String, keys: [String], says: String)] = [
            ("unknown key", system.keyFlags("elsewhere/stranger.key_secret"), "refused this client's key"),
            ("worker key on the frontend", system.keyFlags("allow-broker/worker.key_secret"), "refused this client's key"),
            ("no keys", [], "requires CURVE keys"),
            ("another server's key", system.keyFlags("allow/producer.key_secret", serverKey: "elsewhere/other-server.key"),
             "--server-key is not that server's public key"),
        ]
        let commands: [(name: String, args: [String])] = [
            ("submit", ["submit", input.path, "--ops", "invert"] + system.h.clientFlags),
            ("status", ["status"] + system.statusFlags),
            ("status --check", ["status", "--check", "--only", "broker"] + system.statusFlags),
            ("watch", ["watch", "--from", "1"] + system.h.clientFlags),
        ]
        for command in commands {
            for refusal in cases {
                // A timeout far longer than the refusal may take: waiting it
                // out would show.
                let (output, took) = try system.timed(command.args + ["--timeout", "30"] + refusal.keys)
                print("refused keys: \(command.name), \(refusal.name): exit \(output.status) after \(took)")
                #expect(output.status == 1, "\(command.name), \(refusal.name): exit \(output.status)\n\(output.stderr)")
                #expect(output.stderr.contains(refusal.says), "\(command.name), \(refusal.name): \(output.stderr)")
                #expect(!output.stderr.contains("no answer"), "\(command.name), \(refusal.name): \(output.stderr)")
                #expect(took < .seconds(5), "\(command.name), \(refusal.name) took \(took)")
            }
        }
        // The right key still works.
        let (good, _) = try system.timed(["submit", input.path, "--ops", "invert"] + system.h.clientFlags + system.keyFlags("allow/producer.key_secret"))
        #expect(good.status == 0, "\(good.stderr)")
    }

    @Test("a worker whose key the broker refuses says so once, backs off, and stays idle")
    func aRefusedWorkerStaysQuietAndIdle() throws {
        let system = try KeyedSystem()
        let worker = try system.h.start("refused", ["worker", "--broker", system.h.backend, "--store", system.h.store, "--id", "refused"]
                                                      + system.keyFlags("elsewhere/stranger.key_secret"))
        try system.h.waitUntil("the worker says the broker refused it") {
            system.h.log("refused").contains("the broker at \(system.h.backend) refused this worker")
        }
        let before = try Self.cpuTicks(worker.processIdentifier)
        let linesBefore = Self.lines(system.h.log("refused"))
        let watched: Double = 20
        Thread.sleep(forTimeInterval: watched)
        let used = Double(try Self.cpuTicks(worker.processIdentifier) - before) / Double(sysconf(Int32(_SC_CLK_TCK)))
        let lines = Self.lines(system.h.log("refused")) - linesBefore
        print("refused worker: \(used) s of CPU over \(watched) s (\(used / watched * 100)% of a core); \(lines) log line(s)")
        #expect(used / watched < 0.05, "CPU \(used) s over \(watched) s")
        #expect(lines * 60 / Int(watched) < 10, "\(lines) lines in \(watched) s:\n\(system.h.log("refused"))")
        #expect(system.h.log("refused").components(separatedBy: "the broker at \(system.h.backend) refused this worker").count - 1 == 1)
        // The broker never saw it as a worker.
        let status = try system.h.run(["status", "--json"] + system.statusFlags + system.keyFlags("allow/admin.key_secret"))
        #expect(!status.stdout.contains("\"refused\""), "\(status.stdout)")
    }

    @Test("a worker the broker takes but the storage node refuses says so once and takes no jobs")
    func aWorkerTheStoreRefusesTakesNoJobs() throws {
        let system = try KeyedSystem()
        try system.h.start("half", ["worker", "--broker", system.h.backend, "--store", system.h.store, "--id", "half"]
                                    + system.keyFlags("allow-broker/worker.key_secret"))
        try system.h.waitUntil("the worker says the storage node refused it") {
            system.h.log("half").contains("the storage node at \(system.h.store) refused this worker")
        }
        let input = try system.h.writeImages(1)
        let submit = try system.h.run(["submit", input.path, "--ops", "invert", "--json"] + system.h.clientFlags + system.keyFlags("allow/producer.key_secret"))
        #expect(submit.status == 0, "\(submit.stderr)")
        Thread.sleep(forTimeInterval: 2)
        let status = try system.h.run(["status", "--json"] + system.statusFlags + system.keyFlags("allow/admin.key_secret"))
        let object = try #require(SystemHarness.jsonLines(status.stdout).first)
        let workers = try #require(object["workers"] as? [[String: Any]])
        let half = try #require(workers.first { $0["id"] as? String == "half" }, "\(status.stdout)")
        #expect(half["credit"] as? Int == 0, "\(half)")
        #expect(half["busy"] as? Int == 0, "\(half)")
        let queue = try #require(object["queue"] as? [String: Any])
        #expect((queue["ready"] as? [Int])?.reduce(0, +) == 1, "the job waits: \(queue)")
        #expect(system.h.log("half").components(separatedBy: "refused this worker").count - 1 == 1)
    }

    @Test("probes pass with each role's own key: a server's own key pair, a worker's key for what a worker reaches")
    func probesWithOwnKeys() throws {
        let system = try KeyedSystem()
        let h = system.h
        // The broker and the storage node, each checked with the servers' own key pair.
        let own = ["--curve-key", h.dir.path("keys/server.key_secret"), "--server-key", h.dir.path("keys/server.key"),
                   "--store-key", h.dir.path("keys/server.key"), "--timeout", "2"]
        let broker = try h.run(["status", "--check", "--only", "broker", "--broker", h.frontend] + own)
        #expect(broker.status == 0, "\(broker.stderr)")
        let store = try h.run(["status", "--check", "--only", "store", "--store", h.store] + own)
        #expect(store.status == 0, "\(store.stderr)")
        // A storage node's probe needs only the store's public key.
        let storeOnly = try h.run(["status", "--check", "--only", "store", "--store", h.store, "--timeout", "2",
                                   "--curve-key", h.dir.path("keys/server.key_secret"), "--store-key", h.dir.path("keys/server.key")])
        #expect(storeOnly.status == 0, "\(storeOnly.stderr)")
        // What a worker reaches, with the worker's key (the broker allows it;
        // this storage node does not, and the probe says so).
        let worker = try h.run(["status", "--check", "--only", "worker", "--broker", h.backend, "--store", h.store, "--timeout", "2"]
                                + system.keyFlags("allow-broker/worker.key_secret"))
        #expect(worker.status == 1)
        #expect(worker.stderr.contains("store:") && worker.stderr.contains("refused this client's key"), "\(worker.stderr)")
        #expect(!worker.stderr.contains("broker backend:"), "\(worker.stderr)")
        // A producer key may not use the backend.
        let producer = try h.run(["status", "--check", "--only", "worker", "--broker", h.backend, "--store", h.store, "--timeout", "2"]
                                  + system.keyFlags("allow/producer.key_secret"))
        #expect(producer.status == 1 && producer.stderr.contains("broker backend:"), "\(producer.stderr)")
    }

    @Test("a key removed from the allowlist is refused by broker and store after SIGHUP, with no restart and no job lost")
    func revokedWithoutRestart() throws {
        let system = try KeyedSystem()
        let h = system.h
        let producer = system.keyFlags("allow/producer.key_secret")
        let admin = system.keyFlags("allow/admin.key_secret")
        try h.start("worker", ["worker", "--broker", h.backend, "--store", h.store, "--id", "steady"] + system.keyFlags("allow-broker/worker.key_secret"))
        // The worker's key must be allowed by the store too for it to take jobs.
        try FileManager.default.copyItem(atPath: h.dir.path("allow-broker/worker.key"), toPath: h.dir.path("allow/worker.key"))
        let store = try #require(h.processes["store"])
        kill(store.processIdentifier, SIGHUP)
        let input = try h.writeImages(3)
        let before = try h.run(["submit", input.path, "--ops", "invert", "--wait"] + h.clientFlags + producer)
        #expect(before.status == 0, "\(before.stderr)")
        // A watch that stays connected with the producer key.
        try h.start("watch", ["watch", "--json"] + h.clientFlags + producer)
        Thread.sleep(forTimeInterval: 1)

        // Revoke the producer: remove its public key from both allowlists, then SIGHUP.
        try FileManager.default.removeItem(atPath: h.dir.path("allow-all/producer.key"))
        try FileManager.default.removeItem(atPath: h.dir.path("allow/producer.key"))
        let revokedAt = ContinuousClock.now
        for name in ["broker", "store"] { kill(try #require(h.processes[name]).processIdentifier, SIGHUP) }
        try h.waitUntil("both servers reloaded", timeout: .seconds(5)) {
            h.log("broker").contains("revoked 1 key(s)") && h.log("store").contains("revoked 1 key(s)")
        }
        let reloaded = ContinuousClock.now - revokedAt
        print("revocation: both servers reloaded \(reloaded) after SIGHUP")
        #expect(reloaded < .seconds(1))
        let submit = try h.run(["submit", input.path, "--ops", "invert", "--timeout", "30"] + h.clientFlags + producer)
        #expect(submit.status == 1 && submit.stderr.contains("refused this client's key"), "\(submit.stderr)")
        let list = try h.run(["ls", "--timeout", "30"] + h.storeFlags + producer)
        #expect(list.status == 1 && list.stderr.contains("refused this client's key"), "\(list.stderr)")
        // The watch that was connected is cut off and says why.
        try h.waitUntil("the watch ends", timeout: .seconds(10)) { h.processes["watch"]?.isRunning == false }
        #expect(h.log("watch").contains("refused"), "\(h.log("watch"))")

        // Nothing restarted, and the admin's jobs still go through.
        #expect(h.processes["broker"]?.isRunning == true && h.processes["store"]?.isRunning == true)
        let after = try h.run(["submit", input.path, "--ops", "invert", "--wait"] + h.clientFlags + admin)
        #expect(after.status == 0, "\(after.stderr)")
        let records = try h.run(["ls", "--json", "--limit", "100"] + h.storeFlags + admin)
        #expect(SystemHarness.jsonLines(records.stdout).count == 6)
        #expect(h.log("broker").contains("SIGHUP") && !h.log("broker").contains("exit"))
    }

    @Test("a worker whose key is revoked mid-batch is disconnected; its jobs go to another worker, none lost or stored twice")
    func revokedWorker() throws {
        let system = try KeyedSystem()
        let h = system.h
        let admin = system.keyFlags("allow/admin.key_secret")
        let made = try h.run(["keygen", "kept", "--role", "worker", "--dir", h.dir.path("allow-kept")])
        try #require(made.status == 0, "\(made.stderr)")
        // Both worker keys allowed by the storage node, the second by the broker too.
        try FileManager.default.copyItem(atPath: h.dir.path("allow-broker/worker.key"), toPath: h.dir.path("allow/worker.key"))
        try FileManager.default.copyItem(atPath: h.dir.path("allow-kept/kept.key"), toPath: h.dir.path("allow/kept.key"))
        try FileManager.default.copyItem(atPath: h.dir.path("allow-kept/kept.key"), toPath: h.dir.path("allow-all/kept.key"))
        for name in ["broker", "store"] { kill(try #require(h.processes[name]).processIdentifier, SIGHUP) }
        try h.waitUntil("both servers added the keys", timeout: .seconds(5)) {
            h.log("broker").contains("added kept") && h.log("store").contains("added kept")
        }
        try h.start("revoked", ["worker", "--broker", h.backend, "--store", h.store, "--id", "revoked", "--concurrency", "2"]
                    + system.keyFlags("allow-broker/worker.key_secret"))
        let input = try h.writeImages(20, size: Size(width: 320, height: 240))
        // One attempt each: a revoke that charged the attempts of the jobs
        // the worker held (it once did, as a lost worker's) would make them dead.
        let submit = try h.run(["submit", input.path, "--ops", FaultTests.slowOps, "--retries", "0", "--json"] + h.clientFlags + admin)
        try #require(submit.status == 0, "\(submit.stderr)")
        let jobs = Set(SystemHarness.jsonLines(submit.stdout).compactMap { $0["job"] as? String })
        try #require(jobs.count == 20)
        func status() throws -> [String: Any] {
            let out = try h.run(["status", "--json", "--timeout", "5"] + system.statusFlags + admin)
            return try #require(SystemHarness.jsonLines(out.stdout).first, "\(out.stderr)")
        }
        func inFlight() throws -> Int { (try status()["queue"] as? [String: Any])?["inFlight"] as? Int ?? 0 }
        try h.waitUntil("the first worker holds jobs") { try inFlight() > 0 }

        // Revoke the first worker's key on both servers, in the middle of its work.
        try FileManager.default.removeItem(atPath: h.dir.path("allow-all/worker.key"))
        try FileManager.default.removeItem(atPath: h.dir.path("allow/worker.key"))
        for name in ["broker", "store"] { kill(try #require(h.processes[name]).processIdentifier, SIGHUP) }
        try h.waitUntil("the broker drops the revoked worker", timeout: .seconds(10)) {
            h.log("broker").contains("uses a revoked key; disconnected")
        }
        // The other worker finishes the batch.
        try h.start("kept", ["worker", "--broker", h.backend, "--store", h.store, "--id", "kept", "--concurrency", "2"]
                    + system.keyFlags("allow-kept/kept.key_secret"))
        var records: [[String: Any]] = []
        try h.waitUntil("every job is stored", timeout: .seconds(120)) {
            let ls = try h.run(["ls", "--json", "--limit", "100", "--timeout", "5"] + h.storeFlags + admin)
            records = SystemHarness.jsonLines(ls.stdout)
            return records.count >= 20
        }
        let stored = records.compactMap { $0["jobId"] as? String }
        #expect(Set(stored) == jobs, "every job stored")
        #expect(stored.count == 20, "none stored twice")
        let queue = try #require(try status()["queue"] as? [String: Any])
        #expect(queue["dead"] as? Int == 0)
        #expect(h.log("broker").contains("worker revoked dropped: its key was revoked; requeuing"), "\(h.log("broker"))")
        // Its jobs went back uncounted, as worker.revoked, and none failed.
        let events = SystemHarness.jsonLines(try h.run(["watch", "--from", "1", "--duration", "2", "--json"] + h.clientFlags + admin).stdout)
        let requeued = events.filter { $0["kind"] as? String == "retrying" }
        #expect(!requeued.isEmpty && requeued.allSatisfy { ($0["error"] as? [String: Any])?["code"] as? String == "worker.revoked" },
                "\(requeued)")
        #expect(events.allSatisfy { $0["kind"] as? String != "failed" && $0["kind"] as? String != "dead" })
        // The revoked worker keeps running, refused, and says so.
        #expect(h.processes["revoked"]?.isRunning == true)
        #expect(h.log("revoked").contains("refused"), "\(h.log("revoked"))")
    }

    @Test("a key added to the allowlist directory is admitted within seconds, without a signal")
    func addedByWatchingTheDirectory() throws {
        let system = try KeyedSystem()
        let h = system.h
        let made = try h.run(["keygen", "late", "--role", "producer", "--dir", h.dir.path("later")])
        try #require(made.status == 0)
        let late = system.keyFlags("later/late.key_secret")
        #expect(try h.run(["status", "--check", "--only", "broker", "--timeout", "5"] + system.statusFlags + late).status == 1)
        try FileManager.default.copyItem(atPath: h.dir.path("later/late.key"), toPath: h.dir.path("allow-all/late.key"))
        try h.waitUntil("the broker admits the new key", timeout: .seconds(10)) {
            try h.run(["status", "--check", "--only", "broker", "--timeout", "5"] + system.statusFlags + late).status == 0
        }
        #expect(h.log("broker").contains("added late"), "\(h.log("broker"))")
    }

    /// User plus system CPU time of a process, in clock ticks.
    static func cpuTicks(_ pid: Int32) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command name (which is in parentheses): utime is
        // the 14th field of the line, stime the 15th.
        guard let close = stat.lastIndex(of: ")") else { throw HarnessError("unreadable /proc/\(pid)/stat") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else {
            throw HarnessError("unreadable /proc/\(pid)/stat")
        }
        return user + system
    }

    static func lines(_ text: String) -> Int { text.split(separator: "\n").count }

    /// The hot folder with a key the broker does not allow: retrying the
    /// same way cannot help, so it ends with the reason instead of trying
    /// its files again forever.
    @Test("a hot folder whose key the broker refuses ends with the reason, exit 1")
    func hotFolderRefused() throws {
        let system = try KeyedSystem()
        let h = system.h
        let hot = try h.writeImages(2, name: "hot")
        let follow = try h.start("follow", ["submit", "--follow", hot.path, "--ops", "invert"] + h.clientFlags
                                 + system.keyFlags("elsewhere/stranger.key_secret"), separateStderr: true)
        try h.waitUntil("the hot folder ends", timeout: .seconds(60)) { !follow.isRunning }
        #expect(follow.terminationStatus == 1, "\(h.errors("follow"))")
        #expect(h.errors("follow").contains("refused this client's key"), "\(h.errors("follow"))")
    }
}
