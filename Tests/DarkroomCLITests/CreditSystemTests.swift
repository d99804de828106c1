import DarkroomImage
import DarkroomProtocol
import Foundation
import Testing

/// The credit a real worker grants when its broker and storage node are far
/// away: every byte between them passes a `TCPProxy` that adds 50 ms each
/// way, so each round trip is at least 100 ms longer. What is checked is
/// what the worker did, read from its metrics and the others': how many
/// jobs it held, what it stored, how many input bytes it held. How fast it
/// went is not checked.
@Suite("Credit over a distant link", .serialized)
struct CreditSystemTests {
    static let delay: Duration = .milliseconds(50)

    /// A broker and a storage node with their metrics on, and a proxy in
    /// front of each for the worker.
    struct Distant {
        let h: SystemHarness
        let brokerMetrics: Int
        let storeMetrics: Int
        let backend: TCPProxy
        let store: TCPProxy

        init() throws {
            h = try SystemHarness()
            try h.startBroker(["--metrics", "127.0.0.1:0"])
            try h.start("store", ["store", "--data", h.dir.path("data"), "--bind", h.store, "--metrics", "127.0.0.1:0"])
            try h.waitUntil("the store answers") { [h] in
                try h.run(["status", "--check", "--only", "store", "--store", h.store, "--timeout", "1"]).status == 0
            }
            brokerMetrics = try MetricsSystemTests.metricsPort(h, "broker")
            storeMetrics = try MetricsSystemTests.metricsPort(h, "store")
            backend = try TCPProxy(to: SystemHarness.port(of: h.backend), delay: CreditSystemTests.delay)
            store = try TCPProxy(to: SystemHarness.port(of: h.store), delay: CreditSystemTests.delay)
        }

        func stop() {
            h.signal("worker", SIGTERM)
            backend.stop()
            store.stop()
        }

        /// Starts the worker through both proxies and returns the port of
        /// its metrics.
        func startWorker(_ extra: [String]) throws -> Int {
            try h.start("worker", ["worker", "--broker", backend.endpoint, "--store", store.endpoint, "--id", "far",
                                   "--grace", "5", "--metrics", "127.0.0.1:0"] + extra)
            return try MetricsSystemTests.metricsPort(h, "worker")
        }

        func submit(_ folder: URL, ops: String) throws {
            let submit = try h.run(["submit", folder.path, "--ops", ops, "--thumb", "32x32"] + h.clientFlags)
            try #require(submit.status == 0, "submit: \(submit.stderr)")
        }

        func waitUntilStored(_ jobs: Int) throws {
            try h.waitUntil("the broker has stored all \(jobs) jobs", timeout: .seconds(180)) {
                try HTTPProbe.scrape(port: brokerMetrics)["darkroom_broker_jobs_stored_total"] == Double(jobs)
            }
        }

        /// Every job stored exactly once, none failed.
        func expectEachStoredOnce(_ jobs: Int) throws {
            let broker = try HTTPProbe.scrape(port: brokerMetrics)
            #expect(broker["darkroom_broker_jobs_stored_total"] == Double(jobs))
            #expect(broker["darkroom_broker_jobs_failed_total"] == 0)
            #expect(broker["darkroom_broker_jobs_in_flight"] == 0)
            let store = try HTTPProbe.scrape(port: storeMetrics)
            #expect(store["darkroom_store_records"] == Double(jobs))
            // Repeats would count here too: each job was stored by one STORE.
            #expect(store["darkroom_store_stores_total"] == Double(jobs))
        }
    }

    /// Writes `count` copies of one JPEG, so that every input is the same size.
    static func writeCopies(_ h: SystemHarness, _ count: Int, size: Size, quality: Int = 85) throws -> (folder: URL, bytes: Int) {
        let folder = h.dir.url.appendingPathComponent("copies")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let jpeg = Data(try JPEG.encode(SamplePhoto.render(size, seed: 5), options: EncodeOptions(quality: quality)))
        for i in 0..<count {
            try jpeg.write(to: folder.appendingPathComponent(String(format: "copy-%03d.jpg", i)))
        }
        return (folder, jpeg.count)
    }

    @Test("tiny jobs over a long round trip: one thread, many more jobs held than threads, each job stored once")
    func tinyJobsFarAwayAreHeldManyAtATime() throws {
        let d = try Distant()
        defer { d.stop() }
        let jobs = 150
        let input = try d.h.writeImages(jobs, size: Size(width: 64, height: 64))
        // The queue is full before the worker comes, so the broker can
        // always answer its credit at once.
        try d.submit(input, ops: "grayscale")
        let port = try d.startWorker(["--concurrency", "1"])
        try d.waitUntilStored(jobs)
        try d.expectEachStoredOnce(jobs)

        let label = #"{worker="far"}"#
        let worker = try HTTPProbe.scrape(port: port)
        #expect(worker["darkroom_worker_threads\(label)"] == 1)
        // No cap set: the worker declares the protocol's most slots, and
        // its credit target decides.
        #expect(worker["darkroom_worker_slots\(label)"] == Double(Wire.Limit.maxSlots))
        #expect(worker["darkroom_worker_jobs_done_total\(label)"] == Double(jobs))
        #expect(worker["darkroom_worker_jobs_failed_total\(label)"] == 0)
        // One thread, yet more jobs held at once than one running and one
        // waiting (what a fixed prefetch of one per thread would hold): the
        // round trips were covered by jobs in flight.
        let held = try #require(worker["darkroom_worker_jobs_running_max\(label)"])
        let target = try #require(worker["darkroom_worker_credit_target_max\(label)"])
        print("CreditSystemTests: tiny jobs, 1 thread: most jobs held \(held), highest credit target \(target)")
        #expect(held > 2, "most jobs held \(held)")
        #expect(target > 2, "highest credit target \(target)")
        #expect(held <= target)
        // Both round trips went through a proxy that delays each way.
        let trip = 0.1
        #expect((worker[#"darkroom_worker_round_trip_seconds{worker="far",peer="broker"}"#] ?? 0) >= trip)
        #expect((worker[#"darkroom_worker_round_trip_seconds{worker="far",peer="store"}"#] ?? 0) >= trip)
        #expect(d.h.log("worker").contains("credit target "))

        let broker = try HTTPProbe.scrape(port: d.brokerMetrics)
        #expect(broker[#"darkroom_broker_worker_slots{worker="far"}"#] == Double(Wire.Limit.maxSlots))
        #expect(d.h.signal("worker", SIGTERM) == 0)
        #expect(d.h.log("worker").contains("credit: highest target"))
    }

    /// A far worker holds many jobs at once, some running, some waiting for
    /// a thread, some with their STORE on the slow link. Killed with
    /// SIGKILL there, it hands nothing back: the broker takes its jobs back
    /// when it goes silent and another worker runs them. A job whose STORE
    /// had landed keeps its one record (the storage node answers a second
    /// STORE of a job with the first record).
    @Test("a far worker killed with SIGKILL while it holds many jobs: another takes them, one record per job, none dead")
    func aFarWorkerKilledHoldingManyJobsLosesNone() throws {
        let d = try Distant()
        defer {
            d.h.signal("worker2", SIGTERM)
            d.stop()
        }
        let jobs = 400
        let input = try d.h.writeImages(jobs, size: Size(width: 64, height: 64))
        try d.submit(input, ops: "grayscale")
        let port = try d.startWorker(["--concurrency", "2"])
        let label = #"{worker="far"}"#
        // Killed once it holds more jobs than its threads and has stored some.
        var heldAtKill = 0.0
        try d.h.waitUntil("the far worker holds many jobs and has stored some", timeout: .seconds(120)) {
            let worker = try HTTPProbe.scrape(port: port)
            heldAtKill = worker["darkroom_worker_jobs_running\(label)"] ?? 0
            return heldAtKill > 4 && (worker["darkroom_worker_jobs_done_total\(label)"] ?? 0) > 0
        }
        d.h.signal("worker", SIGKILL)
        let storedAtKill = try HTTPProbe.scrape(port: d.brokerMetrics)["darkroom_broker_jobs_stored_total"] ?? 0
        print("CreditSystemTests: far worker killed holding \(heldAtKill) job(s), \(storedAtKill) stored")
        #expect(storedAtKill < Double(jobs), "the kill came after the last job")

        try d.h.start("worker2", ["worker", "--broker", d.backend.endpoint, "--store", d.store.endpoint, "--id", "far-2",
                                  "--concurrency", "2", "--grace", "5"])
        try d.waitUntilStored(jobs)
        let broker = try HTTPProbe.scrape(port: d.brokerMetrics)
        #expect(broker["darkroom_broker_jobs_stored_total"] == Double(jobs))
        #expect(broker["darkroom_broker_jobs_dead"] == 0)
        #expect(broker["darkroom_broker_jobs_in_flight"] == 0)
        let store = try HTTPProbe.scrape(port: d.storeMetrics)
        #expect(store["darkroom_store_records"] == Double(jobs))
        #expect((store["darkroom_store_stores_total"] ?? 0) >= Double(jobs))
    }

    @Test("large inputs over a long round trip: the input bytes held stay within --input-budget")
    func largeInputsStayWithinTheBudget() throws {
        let d = try Distant()
        defer { d.stop() }
        let jobs = 12
        let (input, size) = try Self.writeCopies(d.h, jobs, size: Size(width: 1024, height: 768), quality: 92)
        // Room for three of them, and a half: the round trips alone would
        // ask for more.
        let budget = 3 * size + size / 2
        try d.submit(input, ops: "scale:64x64,mode=fill | crop:square")
        let port = try d.startWorker(["--concurrency", "1", "--input-budget", String(budget)])
        try d.waitUntilStored(jobs)
        try d.expectEachStoredOnce(jobs)

        let label = #"{worker="far"}"#
        let worker = try HTTPProbe.scrape(port: port)
        #expect(worker["darkroom_worker_input_budget_bytes\(label)"] == Double(budget))
        let peakBytes = try #require(worker["darkroom_worker_input_bytes_max\(label)"])
        let held = try #require(worker["darkroom_worker_jobs_running_max\(label)"])
        print("CreditSystemTests: inputs of \(size) bytes, budget \(budget): most jobs held \(held), most input bytes \(Int(peakBytes))")
        #expect(peakBytes <= Double(budget), "held \(peakBytes) input bytes at most, budget \(budget)")
        #expect(held <= 3)
        // The budget bounded a worker that did hold more than one job.
        #expect(held >= 2)
        #expect(peakBytes >= Double(2 * size))
        #expect(worker["darkroom_worker_input_bytes\(label)"] == 0)
        #expect(worker["darkroom_worker_jobs_done_total\(label)"] == Double(jobs))
    }
}
