import DarkroomMetrics
import Foundation
import Testing

/// `--metrics` on real processes: what each role's page shows as jobs go
/// through, and that nothing sent to the listener disturbs the role.
@Suite("Metrics end to end", .serialized)
struct MetricsSystemTests {
    /// The port a role's listener bound, from its "metrics on" line.
    static func metricsPort(_ h: SystemHarness, _ name: String) throws -> Int {
        var port: Int?
        try h.waitUntil("\(name) says where its metrics are", timeout: .seconds(30)) {
            let log = h.log(name)
            guard let range = log.range(of: #"metrics on http://[^ ]*:([0-9]+)/metrics"#, options: .regularExpression) else { return false }
            let url = log[range].dropFirst("metrics on ".count)
            port = Int(url.split(separator: ":").last?.split(separator: "/").first ?? "")
            return port != nil
        }
        return try #require(port)
    }

    func startStore(_ h: SystemHarness, _ extra: [String] = []) throws {
        try h.start("store", ["store", "--data", h.dir.path("data"), "--bind", h.store] + extra)
        try h.waitUntil("the store answers") { try h.run(["status", "--check", "--only", "store", "--store", h.store, "--timeout", "1"]).status == 0 }
    }

    static func sum(_ samples: [String: Double], _ name: String) -> Double {
        samples.filter { $0.key == name || $0.key.hasPrefix(name + "{") }.values.reduce(0, +)
    }

    @Test("libmicrohttpd is mapped only by a role started with --metrics, libcurl, libheif and libtiff by no role that has not needed them: all are loaded on first use")
    func librariesAreLoadedOnFirstUse() throws {
        let h = try SystemHarness()
        try h.startBroker(["--metrics", "127.0.0.1:0"])
        try startStore(h)
        let metricsPort = try Self.metricsPort(h, "broker")
        func mapped(_ name: String) throws -> String {
            let pid = try #require(h.processes[name]).processIdentifier
            // Read to the end: /proc says its files are empty, and a read by size stops short.
            let file = try #require(FileHandle(forReadingAtPath: "/proc/\(pid)/maps"))
            defer { try? file.close() }
            return String(decoding: try #require(try file.readToEnd()), as: UTF8.self)
        }
        try h.startWorker("w1")
        try h.waitUntil("the worker is ready", timeout: .seconds(20)) {
            try HTTPProbe.scrape(port: metricsPort)["darkroom_broker_workers"] == 1
        }
        let broker = try mapped("broker"), store = try mapped("store"), worker = try mapped("w1")
        #expect(broker.contains("/libmicrohttpd.so"))
        #expect(!store.contains("/libmicrohttpd.so"))
        #expect(!broker.contains("/libcurl.so") && !store.contains("/libcurl.so"))
        // A worker maps libheif (and its codecs) at its first HEIF source
        // only, and libtiff (and its) at its first TIFF.
        for roleMaps in [broker, store, worker] {
            #expect(!roleMaps.contains("/libheif.so") && !roleMaps.contains("/libde265.so") && !roleMaps.contains("/libx265.so"))
            #expect(!roleMaps.contains("/libtiff.so") && !roleMaps.contains("/libLerc.so") && !roleMaps.contains("/libjbig.so"))
        }
        #expect(worker.contains("/libjpeg.so"), "the worker's maps were read")
        // The store still serves: the library it did not load was not needed.
        #expect(try h.run(["status", "--check", "--only", "store", "--store", h.store, "--timeout", "5"]).status == 0)
    }

    @Test("ready rises while no worker runs and falls to 0 once one does; stored, records and the stage histograms count every job")
    func metricsFollowTheJobs() throws {
        let h = try SystemHarness()
        try h.startBroker(["--metrics", "127.0.0.1:0"])
        try startStore(h, ["--metrics", "127.0.0.1:0"])
        let brokerPort = try Self.metricsPort(h, "broker")
        let storePort = try Self.metricsPort(h, "store")

        let jobs = 8
        let input = try h.writeImages(jobs)
        let submit = try h.run(["submit", input.path, "--ops", "scale:64x64,mode=fill | crop:square", "--thumb", "32x32"] + h.clientFlags)
        #expect(submit.status == 0, "submit: \(submit.stderr)")

        var broker = try HTTPProbe.scrape(port: brokerPort)
        #expect(Self.sum(broker, "darkroom_broker_jobs_ready") == Double(jobs))
        #expect(broker[#"darkroom_broker_jobs_ready{priority="5"}"#] == Double(jobs))
        #expect(broker["darkroom_broker_jobs_accepted_total"] == Double(jobs))
        #expect(broker["darkroom_broker_jobs_stored_total"] == 0)
        #expect(broker["darkroom_broker_workers"] == 0)
        #expect(broker["darkroom_broker_slots"] == 0)
        #expect(broker["darkroom_broker_event_seq"] == Double(jobs))
        var store = try HTTPProbe.scrape(port: storePort)
        #expect(store["darkroom_store_records"] == 0)
        #expect(store["darkroom_store_stores_total"] == 0)

        try h.startWorker("w1", concurrency: 2, ["--metrics", "127.0.0.1:0"])
        let workerPort = try Self.metricsPort(h, "w1")
        try h.waitUntil("the broker has stored every job") {
            try HTTPProbe.scrape(port: brokerPort)["darkroom_broker_jobs_stored_total"] == Double(jobs)
        }
        broker = try HTTPProbe.scrape(port: brokerPort)
        #expect(Self.sum(broker, "darkroom_broker_jobs_ready") == 0)
        #expect(broker["darkroom_broker_jobs_in_flight"] == 0)
        #expect(broker["darkroom_broker_jobs_failed_total"] == 0)
        #expect(broker["darkroom_broker_workers"] == 1)
        let slots = try #require(broker[#"darkroom_broker_worker_slots{worker="w1"}"#])
        #expect(slots >= 2)
        #expect(broker["darkroom_broker_slots"] == slots)
        #expect(broker[#"darkroom_broker_worker_busy{worker="w1"}"#] == 0)
        let silence = try #require(broker[#"darkroom_broker_worker_silence_seconds{worker="w1"}"#])
        #expect(silence >= 0 && silence < 3)

        store = try HTTPProbe.scrape(port: storePort)
        #expect(store["darkroom_store_records"] == Double(jobs))
        #expect(store["darkroom_store_stores_total"] == Double(jobs))
        #expect(store["darkroom_store_stores_refused_total"] == 0)
        #expect((store[#"darkroom_store_image_bytes{variant="full"}"#] ?? 0) > 0)
        #expect((store[#"darkroom_store_image_bytes{variant="thumbnail"}"#] ?? 0) > 0)

        let worker = try HTTPProbe.scrape(port: workerPort)
        #expect(worker[#"darkroom_worker_slots{worker="w1"}"#] == slots)
        #expect(worker[#"darkroom_worker_jobs_done_total{worker="w1"}"#] == Double(jobs))
        #expect(worker[#"darkroom_worker_jobs_failed_total{worker="w1"}"#] == 0)
        #expect(worker[#"darkroom_worker_jobs_running{worker="w1"}"#] == 0)
        #expect(worker[#"darkroom_worker_connected{worker="w1"}"#] == 1)
        #expect(worker[#"darkroom_worker_sessions_total{worker="w1"}"#] == 1)
        for stage in ["decode", "pipeline", "encode_full", "encode_thumbnail", "store"] {
            let labels = #"worker="w1",stage=""# + stage + "\""
            #expect(worker["darkroom_worker_stage_seconds_count{\(labels)}"] == Double(jobs), "\(stage)")
            #expect(worker["darkroom_worker_stage_seconds_bucket{\(labels),le=\"+Inf\"}"] == Double(jobs), "\(stage)")
            #expect((worker["darkroom_worker_stage_seconds_sum{\(labels)}"] ?? -1) >= 0, "\(stage)")
            // Cumulative: every bucket holds at least the one before it.
            var last = 0.0
            for bound in ["0.0005", "0.001", "0.01", "0.1", "1", "30"] {
                let count = try #require(worker["darkroom_worker_stage_seconds_bucket{\(labels),le=\"\(bound)\"}"], "\(stage) le=\(bound)")
                #expect(count >= last)
                last = count
            }
        }

        // What a scrape costs: the page for one worker, rendered on the
        // listener's thread from the roles' snapshots.
        var latencies: [Duration] = []
        for _ in 0..<50 {
            let start = ContinuousClock.now
            _ = try HTTPProbe.get("/metrics", port: brokerPort)
            latencies.append(ContinuousClock.now - start)
        }
        latencies.sort()
        print("MetricsSystemTests: broker scrape p50 \(latencies[25]), max \(latencies[49]) over 50")
        #expect(latencies[25] < .milliseconds(200))
    }

    @Test("bad requests get 4xx or are dropped, and the role goes on: it answers status and stores a job afterwards")
    func badRequestsDoNotDisturbTheRoles() throws {
        let h = try SystemHarness()
        try h.startBroker(["--metrics", "127.0.0.1:0"])
        try startStore(h, ["--metrics", "127.0.0.1:0"])
        try h.startWorker("w1", ["--metrics", "127.0.0.1:0"])
        let ports = [try Self.metricsPort(h, "broker"), try Self.metricsPort(h, "store"), try Self.metricsPort(h, "w1")]

        // Slow clients: half a request line, then nothing; they hold a
        // connection each for the rest of the test.
        var slow: [HTTPProbe] = []
        for port in ports {
            let probe = try HTTPProbe(port: port, timeout: .seconds(15))
            probe.send("GET /metr")
            slow.append(probe)
        }
        for port in ports {
            let post = try HTTPProbe.request("POST", "/metrics", port: port)
            #expect(post.status == 405)
            #expect(try HTTPProbe.get("/no/such/path", port: port).status == 404)
            #expect(try HTTPProbe.request("DELETE", "/", port: port).status == 405)
            // A POST with a body it never sends is answered at once.
            let body = try HTTPProbe(port: port, timeout: .seconds(5))
            body.send("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\nsome")
            #expect(body.response()?.status == 405)
            for garbage in ["HELLO\r\n\r\n", "\u{1}\u{2}\u{3}\r\n\r\n", "GET / HTTP/1.1\r\nbroken header line\r\n\r\n", "GET /metrics HTTP/7.0\r\n\r\n"] {
                let probe = try HTTPProbe(port: port, timeout: .seconds(5))
                probe.send(garbage)
                let answer = try #require(probe.readToEnd(), "the listener neither answered nor closed '\(garbage)'")
                if let response = HTTPProbe.parse(answer) {
                    #expect((400..<600).contains(response.status), "\(response.status) for '\(garbage)'")
                }
            }
            let huge = try HTTPProbe(port: port, timeout: .seconds(5))
            huge.send("GET /metrics HTTP/1.1\r\nHost: x\r\nCookie: \(String(repeating: "c", count: 1 << 20))\r\n\r\n")
            let refused = try #require(huge.readToEnd(), "a huge header was neither refused nor dropped")
            if let response = HTTPProbe.parse(refused) { #expect((400..<500).contains(response.status)) }
            // More connections than the listener takes: the extras are
            // closed; the listener serves again once they go.
            let flood = (0..<48).compactMap { _ in try? HTTPProbe(port: port, timeout: .seconds(5)) }
            for probe in flood { probe.send("GET /") }
            for probe in flood { probe.close() }
            try h.waitUntil("the listener on \(port) serves again", timeout: .seconds(10)) {
                try HTTPProbe.get("/metrics", port: port).status == 200
            }
        }

        // The roles never noticed.
        let status = try h.run(["status", "--check"] + h.brokerFlags + h.storeFlags)
        #expect(status.status == 0, "status: \(status.stdout)\(status.stderr)")
        let input = try h.writeImages(1)
        let submit = try h.run(["submit", input.path, "--ops", "grayscale", "--thumb", "16x16", "--wait"] + h.clientFlags)
        #expect(submit.status == 0, "submit: \(submit.stderr)")
        #expect(try HTTPProbe.scrape(port: ports[1])["darkroom_store_records"] == 1)
        for name in ["broker", "store", "w1"] {
            #expect(h.processes[name]?.isRunning == true, "\(name) stopped:\n\(h.log(name).suffix(2000))")
        }
        for probe in slow { probe.close() }
    }

    @Test("up serves its broker, storage node and workers on one listener")
    func upServesEveryRole() throws {
        let h = try SystemHarness()
        try h.start("up", ["up", "--data", h.dir.path("data"), "--frontend", h.frontend, "--backend", h.backend, "--events", h.events,
                           "--store", h.store, "--workers", "2", "--concurrency", "1", "--metrics", "127.0.0.1:0"])
        let port = try Self.metricsPort(h, "up")
        try h.waitUntil("both workers are connected") {
            try HTTPProbe.scrape(port: port)["darkroom_broker_workers"] == 2
        }
        let input = try h.writeImages(3)
        let submit = try h.run(["submit", input.path, "--ops", "scale:48x48,mode=fill", "--thumb", "16x16", "--wait"] + h.clientFlags)
        #expect(submit.status == 0, "submit: \(submit.stderr)")
        try h.waitUntil("the broker has committed every DONE") {
            try HTTPProbe.scrape(port: port)["darkroom_broker_jobs_stored_total"] == 3
        }
        let page = try HTTPProbe.get("/metrics", port: port).body
        let samples = HTTPProbe.samples(page)
        #expect(samples["darkroom_store_records"] == 3)
        #expect(samples["darkroom_store_stores_total"] == 3)
        let workerSlots = samples.filter { $0.key.hasPrefix("darkroom_worker_slots{") }
        #expect(workerSlots.count == 2)
        #expect(Self.sum(samples, "darkroom_worker_jobs_done_total") == 3)
        #expect(Self.sum(samples, "darkroom_worker_slots") == samples["darkroom_broker_slots"])
        let storeCounts = samples.filter { $0.key.hasPrefix("darkroom_worker_stage_seconds_count{") && $0.key.contains(#"stage="store""#) }
        #expect(storeCounts.values.reduce(0, +) == 3)
        // Each family once: its HELP and TYPE lines are not repeated per worker.
        let types = page.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }
        #expect(Set(types).count == types.count)
        #expect(types.contains("# TYPE darkroom_worker_stage_seconds histogram"))
        #expect(h.signal("up", SIGTERM) == 0)
    }

    @Test("a malformed address is a usage error; an address in use stops the role before it starts; beyond loopback it is said once")
    func addressesAndTheNotice() throws {
        let dir = try TemporaryDirectory()
        let malformed = try DarkroomProcess.run(["store", "--data", dir.path("a"), "--bind", "tcp://127.0.0.1:*", "--metrics", "9464"])
        #expect(malformed.status == 64)
        #expect(malformed.stderr.contains("--metrics: '9464' has no port"), "\(malformed.stderr)")

        let holder = MetricsListener(address: MetricsAddress(host: "127.0.0.1", port: 0), render: { "" })
        try holder.start()
        defer { holder.stop() }
        let taken = try #require(holder.port)
        let inUse = try DarkroomProcess.run(["broker", "--data", dir.path("b"), "--frontend", "tcp://127.0.0.1:*", "--backend", "tcp://127.0.0.1:*",
                                             "--events", "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:\(taken)"])
        #expect(inUse.status == 1)
        #expect(inUse.stderr.contains("cannot start the metrics listener: cannot listen on 127.0.0.1:\(taken)"), "\(inUse.stderr)")
        #expect(!inUse.stderr.contains("broker ready"), "\(inUse.stderr)")

        let h = try SystemHarness()
        try startStore(h, ["--metrics", "0.0.0.0:0"])
        let port = try Self.metricsPort(h, "store")
        #expect(try HTTPProbe.get("/metrics", port: port).status == 200)
        let notices = h.log("store").split(separator: "\n").filter { $0.contains("metrics on http://0.0.0.0:\(port)/metrics") }
        #expect(notices.count == 1)
        #expect(notices.first?.contains("warn") == true)
        #expect(notices.first?.hasSuffix("read-only; queue sizes and worker names are visible to whoever can reach it") == true)
        #expect(h.signal("store", SIGTERM) == 0)
    }
}
