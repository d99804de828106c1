import DarkroomBroker
import DarkroomCore
import DarkroomMetrics
import DarkroomStore
import DarkroomWorker
import Synchronization

/// `--metrics HOST:PORT`, the same on every long-running role.
extension RoleOptions {
    static let metrics = OptionSpec.value(
        "metrics", "HOST:PORT",
        help: "Serve Prometheus metrics at http://HOST:PORT/metrics (read-only HTTP; port 0 picks a free port). Off unless given.")

    /// The metrics listener `--metrics` asks for, not started yet; nil
    /// without the option. A malformed address is a usage error here,
    /// before anything starts.
    static func metrics(_ args: ParsedArguments, logger: Logger) throws -> MetricsService? {
        guard let text = args.value("metrics") else { return nil }
        do {
            return MetricsService(address: try MetricsAddress(parsing: text), logger: logger)
        } catch {
            throw UsageError("--metrics: \(error.message)")
        }
    }
}

/// A process's metrics listener, run as one of its services: started
/// before the roles (an address in use stops the process before anything
/// else starts) and stopped after them, so a scrape can watch a role stop.
/// It serves the metrics of the services it is handed (`serve`): a broker,
/// a storage node and any number of workers, each family named for its
/// role (`darkroom_broker_…`, `darkroom_store_…`, `darkroom_worker_…`, the
/// workers' labelled `worker`), so `darkroom up` serves all of them on
/// one page.
final class MetricsService: RunnableService {
    let listener: MetricsListener
    private let sources: Sources
    private let logger: Logger

    init(address: MetricsAddress, logger: Logger) {
        let sources = Sources()
        self.sources = sources
        self.logger = logger
        listener = MetricsListener(address: address, render: { sources.render() })
    }

    /// The services whose metrics the page shows, from now on.
    func serve(_ services: [any RunnableService]) {
        sources.services.withLock { $0 = services }
    }

    /// This service as the entry that starts it.
    var entries: [ServiceGroup.Entry] { [.init(name: "metrics listener", service: self)] }

    /// Binds and starts serving, then says where, once. An address beyond
    /// loopback is allowed, since nothing can be changed through it, but
    /// the line says what it shows.
    func start() throws {
        try listener.start()
        if listener.address.isLoopback {
            logger.info("metrics on \(listener.url) (read-only)")
        } else {
            logger.warn("metrics on \(listener.url): read-only; queue sizes and worker names are visible to whoever can reach it")
        }
    }

    func stop(grace: Duration) { listener.stop() }
    func wait() { listener.wait() }

    /// The services, behind a lock: the page is rendered on the listener's
    /// thread, and `up` hands its services over once they have started.
    final class Sources: Sendable {
        let services = Mutex<[any RunnableService]>([])

        func render() -> String {
            let services = self.services.withLock { $0 }
            var text = MetricsText()
            for case let broker as Broker in services {
                if let metrics = broker.metrics { RoleMetrics.broker(metrics, into: &text) }
            }
            for case let store as StoreNode in services {
                RoleMetrics.store(store.metrics, into: &text)
            }
            let workers = services.compactMap { $0 as? Worker }.map { (id: $0.configuration.workerID, status: $0.status) }
            if !workers.isEmpty { RoleMetrics.workers(workers, into: &text) }
            return text.text
        }
    }
}

/// Each role's metrics, named and documented here, in one place: these
/// names are what dashboards, alerts and autoscalers are written against.
enum RoleMetrics {
    static func broker(_ metrics: BrokerMetrics, into text: inout MetricsText) {
        let queue = metrics.status.queue
        let workers = metrics.status.workers
        text.gauge("darkroom_broker_jobs_ready", help: "Jobs waiting to run, by priority (0-9, 9 runs first).",
                   (0..<10).map { .init([.init("priority", String($0))], count: $0 < queue.ready.count ? queue.ready[$0] : 0) })
        text.gauge("darkroom_broker_jobs_delayed", help: "Jobs waiting out a retry backoff or scheduled for later.", [.init(count: queue.delayed)])
        text.gauge("darkroom_broker_jobs_in_flight", help: "Jobs dispatched to a worker (or held for one reconnecting) and not yet done or failed.",
                   [.init(count: queue.inFlight)])
        text.gauge("darkroom_broker_jobs_dead", help: "Jobs in the dead-letter set.", [.init(count: queue.dead)])
        text.gauge("darkroom_broker_dispatch_paused", help: "1 while dispatch is paused (darkroom pause), else 0.",
                   [.init(count: queue.pausedSince == nil ? 0 : 1)])
        text.gauge("darkroom_broker_queue_limit", help: "Queued jobs (ready and delayed) above which submits are refused (--max-depth).",
                   [.init(count: queue.limit)])
        text.counter("darkroom_broker_jobs_accepted_total", help: "Jobs accepted (committed) since the broker started.",
                     [.init(count: metrics.accepted)])
        text.counter("darkroom_broker_jobs_stored_total", help: "Jobs stored (their DONE committed) since the broker started.",
                     [.init(count: metrics.stored)])
        text.counter("darkroom_broker_jobs_cancelled_total", help: "Jobs ended cancelled since the broker started: by CANCEL, or because their deadline passed before they started.",
                     [.init(count: metrics.cancelled)])
        text.counter("darkroom_broker_jobs_expired_total", help: "Jobs ended cancelled because their deadline (submit --expires-in) passed before a worker started them.",
                     [.init(count: metrics.expired)])
        text.counter("darkroom_broker_jobs_failed_total", help: "Failed attempts since the broker started (a FAIL, or a worker lost with the job); a job that failed twice counts twice.",
                     [.init(count: metrics.failed)])
        text.gauge("darkroom_broker_event_seq", help: "Sequence number of the newest event.", [.init(count: metrics.status.eventSeq)])
        text.gauge("darkroom_broker_workers", help: "Workers connected.", [.init(count: workers.count)])
        text.gauge("darkroom_broker_slots", help: "Slots of all connected workers (jobs they hold at once); ready jobs over slots is the backlog per slot.",
                   [.init(count: workers.reduce(UInt64(0)) { $0 + UInt64($1.slots) })])
        let label = { (id: String) in [MetricsText.Label("worker", id)] }
        text.gauge("darkroom_broker_worker_slots", help: "Slots each connected worker declared.",
                   workers.map { .init(label($0.id), count: UInt64($0.slots)) })
        text.gauge("darkroom_broker_worker_busy", help: "Jobs each connected worker holds now.",
                   workers.map { .init(label($0.id), count: UInt64($0.busy)) })
        text.gauge("darkroom_broker_worker_credit", help: "Credit each connected worker granted that the broker has not used yet.",
                   workers.map { .init(label($0.id), count: UInt64($0.credit)) })
        let now = metrics.status.time
        text.gauge("darkroom_broker_worker_silence_seconds", help: "Seconds since the broker last heard from each connected worker (heartbeats come every second).",
                   workers.filter { $0.lastHeartbeat > 0 }.map {
                       .init(label($0.id), Double(now > $0.lastHeartbeat ? now - $0.lastHeartbeat : 0) / 1_000)
                   })
        text.gauge("darkroom_broker_inputs_mapped", help: "Input files mapped for JOBs, sent or waiting for their workers to read them; past 16,384 inputs are read into memory instead.",
                   [.init(count: metrics.mappedInputs)])
    }

    static func store(_ metrics: StoreMetrics, into text: inout MetricsText) {
        text.gauge("darkroom_store_records", help: "Records held, each a full-resolution image and its thumbnail.", [.init(count: metrics.records)])
        text.gauge("darkroom_store_image_bytes", help: "Bytes of the images held, by variant.", [
            .init([.init("variant", "full")], count: metrics.fullBytes),
            .init([.init("variant", "thumbnail")], count: metrics.thumbnailBytes),
        ])
        text.counter("darkroom_store_stores_total", help: "STOREs answered STORED since the node started (a repeat for a job already stored included).",
                     [.init(count: metrics.stores)])
        text.counter("darkroom_store_stores_refused_total", help: "STOREs answered ERROR since the node started (an image that failed the header checks, a key not allowed to store, a failed write).",
                     [.init(count: metrics.refused)])
        text.counter("darkroom_store_records_expired_total", help: "Records deleted for being older than --keep-records since the node started.",
                     [.init(count: metrics.expired)])
        text.counter("darkroom_store_records_evicted_total", help: "Records deleted, oldest first, to keep the images within --keep-bytes since the node started.",
                     [.init(count: metrics.evicted)])
        text.gauge("darkroom_store_replies_held", help: "Replies waiting for a peer whose queue is full (a worker's STOREDs behind a slow link), sent in order as it reads.",
                   [.init(count: metrics.heldReplies)])
        text.counter("darkroom_store_replies_dropped_total", help: "Replies dropped since the node started because their peer left 1,000 unread (GET-REPLYs) or more than the held list keeps.",
                     [.init(count: metrics.droppedReplies)])
        text.gauge("darkroom_store_images_mapped", help: "Blob files mapped for GET-REPLYs, sent or waiting for their readers; past 16,384 a GET is answered queue-full.",
                   [.init(count: metrics.mappedImages)])
        text.gauge("darkroom_store_image_bytes_queued", help: "Bytes of inline images copied for GET-REPLYs and waiting for their readers; past 256 MiB a GET of one is answered queue-full.",
                   [.init(count: metrics.queuedImageBytes)])
    }

    static func workers(_ workers: [(id: String, status: WorkerStatus)], into text: inout MetricsText) {
        let label = { (id: String) in [MetricsText.Label("worker", id)] }
        text.gauge("darkroom_worker_slots", help: "Slots the worker declares to the broker, the most jobs it holds: 4096, or concurrency + prefetch.",
                   workers.map { .init(label($0.id), count: $0.status.slots) })
        text.gauge("darkroom_worker_threads", help: "Processing threads (--concurrency).",
                   workers.map { .init(label($0.id), count: $0.status.threads) })
        text.gauge("darkroom_worker_jobs_running", help: "Jobs holding a slot now: being processed, waiting for a thread or waiting for STORED.",
                   workers.map { .init(label($0.id), count: $0.status.running) })
        text.gauge("darkroom_worker_jobs_running_max", help: "The most jobs the worker has held at once.",
                   workers.map { .init(label($0.id), count: $0.status.peakRunning) })
        text.gauge("darkroom_worker_credit_target", help: "Jobs held plus credit outstanding the worker aims for now: enough to keep its threads busy across both round trips, within its slots and input budget.",
                   workers.map { .init(label($0.id), count: $0.status.creditTarget) })
        text.gauge("darkroom_worker_credit_target_max", help: "The highest credit target so far.",
                   workers.map { .init(label($0.id), count: $0.status.peakCreditTarget) })
        text.gauge("darkroom_worker_credit_outstanding", help: "Credit granted to the broker that no JOB has used yet.",
                   workers.map { .init(label($0.id), count: $0.status.creditOutstanding) })
        text.gauge("darkroom_worker_input_bytes", help: "Input bytes of the jobs held now.",
                   workers.map { .init(label($0.id), count: $0.status.heldBytes) })
        text.gauge("darkroom_worker_input_bytes_max", help: "The most input bytes held at once.",
                   workers.map { .init(label($0.id), count: $0.status.peakHeldBytes) })
        text.gauge("darkroom_worker_input_budget_bytes", help: "The most input bytes the worker holds (--input-budget).",
                   workers.map { .init(label($0.id), count: $0.status.inputBudget) })
        text.gauge("darkroom_worker_job_seconds", help: "Processing time of one job on one thread, a moving average (absent before the first job).",
                   workers.compactMap { worker in worker.status.jobTime.map { .init(label(worker.id), $0.fractionalSeconds) } })
        text.gauge("darkroom_worker_round_trip_seconds", help: "Round trip the credit target counts on: to the broker (CREDIT to JOB, bounded by PING) and to the storage node (STORE to STORED); the shortest of the last 2 s.",
                   workers.flatMap { worker in
                       [("broker", worker.status.brokerRoundTrip), ("store", worker.status.storeRoundTrip)].compactMap { peer, trip in
                           trip.map { .init(label(worker.id) + [.init("peer", peer)], $0.fractionalSeconds) }
                       }
                   })
        text.counter("darkroom_worker_jobs_done_total", help: "Jobs reported DONE (stored) since the worker started.",
                     workers.map { .init(label($0.id), count: $0.status.done) })
        text.counter("darkroom_worker_jobs_failed_total", help: "Jobs reported FAIL since the worker started, jobs handed back when stopping included.",
                     workers.map { .init(label($0.id), count: $0.status.failed) })
        text.counter("darkroom_worker_jobs_timed_out_total", help: "Of the jobs reported FAIL, those stopped at their time limit (job.timeout: --job-timeout or the job's own).",
                     workers.map { .init(label($0.id), count: $0.status.timedOut) })
        text.counter("darkroom_worker_sessions_total", help: "Broker sessions opened (READY sent); above 1 the worker has reconnected.",
                     workers.map { .init(label($0.id), count: $0.status.sessions) })
        text.gauge("darkroom_worker_connected", help: "1 while a broker connection is open, 0 while the worker waits to reconnect.",
                   workers.map { .init(label($0.id), count: $0.status.connected ? 1 : 0) })
        text.gauge("darkroom_worker_broker_silence_max_seconds", help: "The longest the broker has gone without sending the worker anything, over the worker's life.",
                   workers.map { .init(label($0.id), $0.status.longestBrokerSilence.fractionalSeconds) })
        text.histogram("darkroom_worker_stage_seconds", help: "Seconds per job stage: decode, pipeline (every step), encode_full, encode_thumbnail, store (first STORE sent to STORED).",
                       workers.flatMap { worker in
                           JobStage.allCases.map { stage in
                               (labels: label(worker.id) + [.init("stage", stage.rawValue)], histogram: worker.status.stageTimes[stage])
                           }
                       })
    }
}
