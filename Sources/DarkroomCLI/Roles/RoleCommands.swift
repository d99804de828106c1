import DarkroomBroker
import DarkroomCore
import DarkroomProtocol
import DarkroomSecurity
import DarkroomStore
import DarkroomWorker
import DarkroomZMQ
import Synchronization
import Foundation

// The service modules know nothing of the group that runs them; the
// command line, which puts them together, declares that they fit it.
extension Broker: RunnableService {}
extension StoreNode: RunnableService {}
extension Worker: RunnableService {}
extension ZAPAuthenticator: RunnableService {}

/// Options and checks shared by the long-running roles.
enum RoleOptions {
    static let data = OptionSpec.value("data", "DIR", help: "Directory for the role's durable files.", default: "darkroom-data")
    static let insecure = OptionSpec.flag("insecure", help: "Allow binding a non-loopback address without CURVE encryption.")
    static let grace = OptionSpec.value("grace", "SECONDS", help: "How long to finish work in hand after SIGTERM.", default: "30")

    /// Refuses to bind a non-loopback TCP address in the clear unless asked
    /// to; with CURVE keys every address is allowed.
    static func checkBind(_ endpoint: String, insecure: Bool, curve: Bool = false, role: String) throws {
        if curve { return }
        if !isLoopback(endpoint) && !insecure {
            throw UsageError("the \(role) would listen on \(endpoint), which is not loopback, without CURVE encryption; pass --curve-key and --allow to encrypt it, or --insecure to allow it")
        }
    }

    static func grace(_ args: ParsedArguments) throws -> Duration {
        .seconds(try args.int("grace", default: 30, range: 0...3600))
    }

    static let jobTimeout = OptionSpec.value(
        "job-timeout", "SECONDS",
        help: "The longest a job may run on a processing thread; past it the job is stopped in the step it is in and fails with job.timeout (not retried). 0 for no limit.",
        default: "600")

    /// `--job-timeout`: nil for no limit.
    static func jobTimeout(_ args: ParsedArguments) throws -> Duration? {
        let seconds = try args.int("job-timeout", default: 600, range: 0...604_800)
        return seconds == 0 ? nil : .seconds(seconds)
    }

    static let retention = OptionSpec.value(
        "retention", "AGE", help: "Delete events and submit keys older than this: 30m, 12h, 1d12h, 7d, or forever.", default: "7d")

    /// `--retention`: nil keeps everything.
    static func retention(_ args: ParsedArguments) throws(UsageError) -> Duration? {
        guard let text = args.value("retention") else { return .seconds(7 * 86_400) }
        return try parseRetention(text)
    }

    static let keepRecords = OptionSpec.value(
        "keep-records", "AGE",
        help: "Delete records (each with its thumbnail and blob files) stored longer ago than this: 30m, 12h, 1h30m, 30d, or forever.",
        default: "forever")

    static let keepBytes = OptionSpec.value(
        "keep-bytes", "SIZE",
        help: "Keep the stored images (full-resolution and thumbnails) within SIZE, deleting the oldest records past it: 50G, 800M or a byte count.",
        default: "no cap")

    /// `--keep-bytes`: nil for no cap.
    static func keepBytes(_ args: ParsedArguments) throws(UsageError) -> UInt64? {
        guard let text = args.value("keep-bytes") else { return nil }
        guard let bytes = WorkerConfiguration.parseByteCount(text), bytes > 0 else {
            throw UsageError("--keep-bytes takes a size such as 50G, 800M or a byte count, not \"\(text)\"")
        }
        return UInt64(bytes)
    }

    /// `--keep-records`: nil keeps records until `darkroom rm`.
    static func keepRecords(_ args: ParsedArguments) throws(UsageError) -> Duration? {
        guard let text = args.value("keep-records") else { return nil }
        return try parseRetention(text, option: "--keep-records")
    }

    /// A duration as `submit --in` takes it (`12h`, `1h30m`), at least a
    /// second; a single count and unit (s, m, h, d) up to 100 years; or
    /// `forever`.
    static func parseRetention(_ text: String, option: String = "--retention") throws(UsageError) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if trimmed == "forever" { return nil }
        if let milliseconds = Schedule.milliseconds(trimmed), milliseconds >= 1_000 { return .milliseconds(Int64(milliseconds)) }
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        guard let unit = trimmed.last, let seconds = units[unit], let count = Int64(trimmed.dropLast()),
              count >= 1, count <= 36_500 * 86_400 / seconds else {
            throw UsageError("\(option) takes a duration of at least 1s, like 7d, 12h or 1h30m, or forever; got '\(text)'")
        }
        return .seconds(count * seconds)
    }
}

/// CURVE options of the servers (broker, store, up): their own key and the
/// allowlist of client keys.
extension RoleOptions {
    static let curveKey = OptionSpec.value("curve-key", "FILE", help: "This server's secret key file (NAME.key_secret); turns on CURVE. Needs --allow.")
    static let allow = OptionSpec.value("allow", "DIR", help: "Directory of client public key files (NAME.key) with their roles.")

    struct Security {
        var curve: ServerCurve
        /// The allowlist, reloaded on SIGHUP and when its directory changes.
        var allowlist: LiveAllowlist

        /// What SIGHUP does: reload the allowlist and log what changed.
        func hangUpHandler(logger: Logger) -> @Sendable () -> Void {
            let allowlist = self.allowlist
            return {
                let (ok, line) = allowlist.reloadNow(because: "SIGHUP")
                if ok { logger.info(line) } else { logger.error(line) }
            }
        }

        /// Asks the live allowlist about a connection's key: whether the
        /// key it was admitted with is still admitted with that role.
        var admission: @Sendable (ConnectionIdentity) -> Bool {
            let allowlist = self.allowlist
            return { identity in
                guard let key = identity.key else { return true }
                return allowlist.admits(keyText: key, role: identity.role)
            }
        }
    }

    /// The server's CURVE key and allowlist, or nil when neither is given.
    static func security(_ args: ParsedArguments) throws -> Security? {
        switch (args.value("curve-key"), args.value("allow")) {
        case (nil, nil):
            return nil
        case (_?, nil):
            throw UsageError("--curve-key needs --allow DIR: without an allowlist any client with the server's public key could connect")
        case (nil, _?):
            throw UsageError("--allow needs --curve-key FILE, the server's own secret key")
        case (let key?, let dir?):
            guard Curve.isAvailable else { throw RuntimeError("this libzmq was built without CURVE support") }
            let pair = try ClientOptions.secretKeyPair(key, option: "curve-key")
            do {
                return Security(curve: ServerCurve(keyPair: pair), allowlist: try LiveAllowlist(directory: dir, serverKey: pair.publicKey))
            } catch {
                throw UsageError("--allow: \(error.message)")
            }
        }
    }

    /// The ZAP handler for `security`, as the first service to start (and
    /// so the last to stop), with a note on what it allows.
    static func authenticator(_ security: Security?, context: Context, logger: Logger) -> [ServiceGroup.Entry] {
        guard let security else { return [] }
        for path in security.allowlist.current.skipped {
            logger.info("allowlist: \(path) names no role; it admits nothing")
        }
        // The server's own key is always in it.
        if security.allowlist.current.count <= 1 { logger.warn("the allowlist holds no client key: no client can connect") }
        return [.init(name: "ZAP handler", service: ZAPAuthenticator(allowlist: security.allowlist, context: context, logger: Logger("zap")))]
    }

    /// Runs one server role (the broker or the storage node) until SIGTERM:
    /// its ZAP handler first when it has keys, then the service; logs
    /// `ready` once both listen. A server gives back the memory a burst of
    /// large or many messages made it allocate (`FreedMemory`).
    /// Runs a server's start. When a bind fails (the commonest failure of
    /// a first start: the port is taken), the databases are already made
    /// under the data directory: the role directories in `owned` that the
    /// start created are removed, and `parent` too when it is left empty
    /// and the start made it. A directory that was there before stays,
    /// and so does everything after any other failure (another process's
    /// lock on it, say).
    static func removingCreated<T>(_ owned: [String], parent: String, _ start: () throws -> T) throws -> T {
        let existed = Set((owned + [parent]).filter { FileManager.default.fileExists(atPath: $0) })
        do {
            return try start()
        } catch let error as RuntimeError where error.bindFailed {
            for directory in owned where !existed.contains(directory) { try? FileManager.default.removeItem(atPath: directory) }
            if !existed.contains(parent) { rmdir(parent) }
            throw error
        }
    }

    static func serve(_ name: String, _ service: any RunnableService, directory: String, security: Security?, context: Context, logger: Logger,
                      ready: String, args: ParsedArguments, metrics: MetricsService? = nil) throws -> Int32 {
        FreedMemory.keepLargeBlocksOutOfTheHeap()
        let zap = authenticator(security, context: context, logger: logger)
        ServiceRunner.holdTerminationSignals()
        metrics?.serve([service])
        let memory = ServiceGroup.Entry(name: "memory returner", service: FreedMemoryReturner())
        let started = try removingCreated([directory], parent: args.value("data") ?? "darkroom-data") {
            try ServiceRunner.start(zap + (metrics?.entries ?? []) + [memory, .init(name: name, service: service)], logger: logger)
        }
        logger.info(ready)
        return ServiceRunner.runUntilSignalled(started, logger: logger, grace: try grace(args),
                                               onHangUp: security?.hangUpHandler(logger: logger))
    }
}

/// `darkroom broker`
enum BrokerCommand {
    static let spec = CommandSpec(
        name: "broker",
        abstract: "Run the broker: the durable job queue, leases, retries and events.",
        discussion: """
        Binds the frontend (producers and clients), the backend (workers) and the
        events PUB endpoint. Jobs are committed to SQLite in DIR/broker before a
        producer gets its job id. SIGTERM stops dispatching, lets workers finish
        within the grace period, commits and exits. Jobs still running then (or
        when the broker is killed) are held for their workers when it starts
        again: a worker that reconnects keeps its jobs, and no attempt is charged.
        """,
        options: [
            RoleOptions.data,
            .value("frontend", "ENDPOINT", help: "Where producers and clients connect.", default: Wire.Endpoint.frontend),
            .value("backend", "ENDPOINT", help: "Where workers connect.", default: Wire.Endpoint.backend),
            .value("events", "ENDPOINT", help: "Where event subscribers connect.", default: Wire.Endpoint.events),
            .value("max-depth", "N", help: "Queued jobs above which submits are refused.", default: "100000"),
            .value("max-attempts", "N", help: "Attempts before a job goes to the dead-letter set.", default: "5"),
            RoleOptions.retention,
            RoleOptions.grace,
            RoleOptions.insecure,
            RoleOptions.curveKey,
            RoleOptions.allow,
            RoleOptions.metrics,
        ]
    )

    static func configuration(_ args: ParsedArguments, curve: ServerCurve? = nil) throws -> BrokerConfiguration {
        var config = BrokerConfiguration(dataDirectory: (args.value("data") ?? "darkroom-data") + "/broker")
        config.frontendEndpoint = args.value("frontend") ?? Wire.Endpoint.frontend
        config.backendEndpoint = args.value("backend") ?? Wire.Endpoint.backend
        config.eventsEndpoint = args.value("events") ?? Wire.Endpoint.events
        config.maxQueueDepth = try args.int("max-depth", default: 100_000, range: 1...100_000_000)
        config.maxAttempts = try args.int("max-attempts", default: 5, range: 1...1000)
        config.retention = try RoleOptions.retention(args)
        config.curve = curve
        for endpoint in [config.frontendEndpoint, config.backendEndpoint, config.eventsEndpoint] {
            try RoleOptions.checkBind(endpoint, insecure: args.flag("insecure"), curve: curve != nil, role: "broker")
        }
        return config
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let security = try RoleOptions.security(args)
        var config = try configuration(args, curve: security?.curve)
        config.admission = security?.admission
        let logger = Logger("broker")
        let metrics = try RoleOptions.metrics(args, logger: logger)
        RoleOptions.noteInsecure(args, curve: security != nil, listeners: [.frontend(config.frontendEndpoint), .backend(config.backendEndpoint), .events(config.eventsEndpoint)], logger: logger)
        let context = try Context()
        let broker = Broker(config, context: context, logger: logger)
        security?.allowlist.onChange { change in if !change.revoked.isEmpty { broker.keysRevoked() } }
        return try RoleOptions.serve("broker", broker, directory: config.dataDirectory, security: security, context: context, logger: logger,
                                     ready: "broker ready: frontend \(config.frontendEndpoint), backend \(config.backendEndpoint), events \(config.eventsEndpoint), data \(config.dataDirectory)",
                                     args: args, metrics: metrics)
    }
}

/// `darkroom store`
enum StoreCommand {
    static let spec = CommandSpec(
        name: "store",
        abstract: "Run the storage node: linked full-resolution and thumbnail records.",
        discussion: """
        Keeps each job's full-resolution image and thumbnail as two linked records
        in SQLite (DIR/store); large images go to content-addressed files written
        crash-safely. Storing the same job twice returns the first record.
        With --keep-records AGE, records stored longer ago than AGE are deleted
        with their thumbnails and blob files (looked for every 30 s, at most
        500 in a transaction, the requests waiting served between two). With
        --keep-bytes SIZE, once the images held pass SIZE the oldest records
        go the same way, right after the requests that passed it.
        """,
        options: [
            RoleOptions.data,
            .value("bind", "ENDPOINT", help: "Where workers and clients connect.", default: Wire.Endpoint.store),
            RoleOptions.keepRecords,
            RoleOptions.keepBytes,
            RoleOptions.grace,
            RoleOptions.insecure,
            RoleOptions.curveKey,
            RoleOptions.allow,
            RoleOptions.metrics,
        ]
    )

    static func configuration(_ args: ParsedArguments, curve: ServerCurve? = nil) throws -> StoreConfiguration {
        let endpoint = args.value("bind") ?? Wire.Endpoint.store
        try RoleOptions.checkBind(endpoint, insecure: args.flag("insecure"), curve: curve != nil, role: "storage node")
        var config = StoreConfiguration(endpoint: endpoint, dataDirectory: (args.value("data") ?? "darkroom-data") + "/store", curve: curve)
        config.recordLifetime = try RoleOptions.keepRecords(args)
        config.maxImageBytes = try RoleOptions.keepBytes(args)
        return config
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let security = try RoleOptions.security(args)
        var config = try configuration(args, curve: security?.curve)
        config.admission = security?.admission
        let logger = Logger("store")
        let metrics = try RoleOptions.metrics(args, logger: logger)
        RoleOptions.noteInsecure(args, curve: security != nil, listeners: [.store(config.endpoint)], logger: logger)
        let context = try Context()
        let store = StoreNode(config, context: context, logger: logger)
        return try RoleOptions.serve("storage node", store, directory: config.dataDirectory, security: security, context: context, logger: logger,
                                     ready: "storage node ready: \(config.endpoint), data \(config.dataDirectory)", args: args, metrics: metrics)
    }
}

/// `darkroom worker`
enum WorkerCommand {
    static let spec = CommandSpec(
        name: "worker",
        abstract: "Run a worker: pull jobs, process them, send results to the storage node.",
        discussion: """
        Holds nothing durable: it can be killed at any moment and the broker
        requeues its jobs. On SIGTERM it takes no new jobs, finishes the ones it
        holds within the grace period, and hands the rest back.

        Credit: it asks the broker for as many jobs as keep its threads busy
        across the round trips to the broker and to the storage node, measured
        as it works (job time from its own jobs, round trips from PING to PONG,
        CREDIT to JOB and STORE to STORED):
          threads x (job time + broker round trip + store round trip) / job time,
        plus a quarter, plus one job per thread; at least one job per thread.
        Tiny jobs far from the broker get many jobs in flight, large ones near
        it a few. The worker logs this credit target when it moves; status and
        --metrics show it. Two bounds hold whatever the target: the input bytes
        of the jobs it holds stay within --input-budget (counting each job to
        come as large as the average so far; one job is taken even if larger),
        and the jobs it holds stay within the slots it announces to the broker:
        4096 (the protocol's most) by default, concurrency + prefetch when
        --prefetch is given. No flag needs tuning, near the broker or far from
        it.
        """,
        options: [
            .value("broker", "ENDPOINT", help: "The broker's backend endpoint.", default: Wire.Endpoint.backend),
            .value("store", "ENDPOINT", help: "The storage node's endpoint.", default: Wire.Endpoint.store),
            .value("concurrency", short: "c", "N", help: "Jobs processed (decoded, run, encoded) at the same time: the processing threads, 1-1024. Jobs held beyond these wait for a thread or for STORED; how many is up to the credit target.", default: "number of cores"),
            .value("threads", "N", help: "The same as --concurrency (an older name).", default: "number of cores"),
            .value("prefetch", "N", help: "A fixed cap on the jobs held beyond the running ones: the slots announced to the broker become concurrency + prefetch (at most 4096), and the credit target stays within them. 0 holds exactly --concurrency jobs, each slot busy until its STORED.", default: "no cap but the 4096 slots"),
            .value("input-budget", "BYTES", help: "The most input bytes of the jobs held at once, each counted from JOB to DONE: large inputs mean fewer jobs held. 512M, 64MiB, 1G or a byte count.", default: "256M, or a quarter of the memory limit if less"),
            .value("id", "ID", help: "Worker id shown in status.", default: "HOST-PID-RANDOM"),
            RoleOptions.jobTimeout,
            RoleOptions.grace,
            ClientOptions.curveKey,
            ClientOptions.serverKey,
            ClientOptions.storeKey,
            RoleOptions.metrics,
        ]
    )

    static func configuration(_ args: ParsedArguments) throws -> WorkerConfiguration {
        let threads = args.value("threads") == nil ? nil : try args.int("threads", default: 1, range: 1...WorkerConfiguration.maxConcurrency)
        let concurrency = args.value("concurrency") == nil ? nil : try args.int("concurrency", default: 1, range: 1...WorkerConfiguration.maxConcurrency)
        if let threads, let concurrency, threads != concurrency {
            throw UsageError("--threads is another name for --concurrency: give one, or the same number to both")
        }
        var inputBudget: Int?
        if let text = args.value("input-budget") {
            guard let bytes = WorkerConfiguration.parseByteCount(text) else {
                throw UsageError("--input-budget takes a size such as 512M, 64MiB, 1G or a byte count, not \"\(text)\"")
            }
            inputBudget = bytes
        }
        var config = WorkerConfiguration(
            backendEndpoint: args.value("broker") ?? Wire.Endpoint.backend,
            storeEndpoint: args.value("store") ?? Wire.Endpoint.store,
            concurrency: concurrency ?? threads ?? WorkerConfiguration.defaultConcurrency,
            workerID: args.value("id"),
            shutdownGrace: try RoleOptions.grace(args),
            jobTimeout: try RoleOptions.jobTimeout(args),
            prefetch: args.value("prefetch") == nil ? nil : try args.int("prefetch", default: 0, range: 0...Int(Wire.Limit.maxSlots)),
            inputBudget: inputBudget
        )
        if let broker = try ClientOptions.brokerCurve(args), let store = try ClientOptions.storeCurve(args) {
            config.curve = WorkerCurve(keyPair: broker.keyPair, brokerPublicKey: broker.serverKey, storePublicKey: store.serverKey)
        }
        do {
            try config.validate()
        } catch {
            throw UsageError(error.description)
        }
        return config
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let config = try configuration(args)
        let logger = Logger("worker \(config.workerID)")
        let metrics = try RoleOptions.metrics(args, logger: logger)
        let context = try Context()
        let worker = Worker(config, context: context, logger: logger)
        metrics?.serve([worker])
        ServiceRunner.holdTerminationSignals()
        let started = try ServiceRunner.start((metrics?.entries ?? []) + [.init(name: "worker", service: worker)], logger: logger)
        let cap = config.prefetch == nil ? "the protocol's most; credit follows the measured target" : "concurrency + prefetch"
        logger.info("worker started: \(config.concurrency) thread(s), \(config.slots) slots (\(cap)), input budget \(config.effectiveInputBudget) bytes, \(config.jobTimeout.map { "job time limit \($0.components.seconds) s" } ?? "no job time limit"), broker \(config.backendEndpoint), store \(config.storeEndpoint)")
        return ServiceRunner.runUntilSignalled(started, logger: logger, grace: config.shutdownGrace)
    }
}

/// `darkroom up`
enum UpCommand {
    static let spec = CommandSpec(
        name: "up",
        abstract: "Run the broker, the storage node and workers on this machine.",
        discussion: """
        The embedded default: everything in one process on the default loopback
        endpoints, so submit, watch, status and ls work with no flags. Data goes to
        DIR/broker and DIR/store. Stop with Ctrl-C (SIGINT) or SIGTERM.
        An endpoint given as tcp://127.0.0.1:* binds a free port; the ports
        actually bound are logged in the "darkroom is up" line.
        """,
        options: [
            RoleOptions.data,
            .value("workers", short: "w", "N", help: "Worker services to run.", default: "1"),
            .value("concurrency", short: "c", "N", help: "Jobs each worker processes at the same time.", default: "number of cores"),
            .value("frontend", "ENDPOINT", help: "Where producers and clients connect to the broker.", default: Wire.Endpoint.frontend),
            .value("backend", "ENDPOINT", help: "Where workers connect to the broker.", default: Wire.Endpoint.backend),
            .value("events", "ENDPOINT", help: "Where event subscribers connect.", default: Wire.Endpoint.events),
            .value("store", "ENDPOINT", help: "Where workers and clients connect to the storage node.", default: Wire.Endpoint.store),
            RoleOptions.retention,
            RoleOptions.keepRecords,
            RoleOptions.keepBytes,
            RoleOptions.jobTimeout,
            RoleOptions.grace,
            RoleOptions.insecure,
            RoleOptions.curveKey,
            RoleOptions.allow,
            RoleOptions.metrics,
        ]
    )

    /// ZeroMQ I/O threads for an embedded system. Only the clients' TCP
    /// traffic (SUBMIT, events, store queries) passes through them: the
    /// embedded workers talk to the broker and the store in-process.
    static let ioThreads = 1

    /// The endpoints asked for on the command line, defaults for the rest.
    static func endpoints(_ args: ParsedArguments, curve: Bool) throws -> Endpoints {
        var endpoints = Endpoints()
        endpoints.frontend = args.value("frontend") ?? endpoints.frontend
        endpoints.backend = args.value("backend") ?? endpoints.backend
        endpoints.events = args.value("events") ?? endpoints.events
        endpoints.store = args.value("store") ?? endpoints.store
        for endpoint in [endpoints.frontend, endpoints.backend, endpoints.events, endpoints.store] {
            try RoleOptions.checkBind(endpoint, insecure: args.flag("insecure"), curve: curve, role: "darkroom up")
        }
        return endpoints
    }

    /// Where the embedded roles listen.
    struct Endpoints {
        var frontend = Wire.Endpoint.frontend
        var backend = Wire.Endpoint.backend
        var events = Wire.Endpoint.events
        var store = Wire.Endpoint.store

        /// Every endpoint on a free loopback port, for a private instance.
        static let ephemeral = Endpoints(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*", events: "tcp://127.0.0.1:*", store: "tcp://127.0.0.1:*")
    }

    /// Inproc endpoints for one embedded system, unique within the process
    /// (tests start several systems in one process).
    static func localEndpoints() -> (backend: String, store: String) {
        let n = embeddedSystems.add(1, ordering: .relaxed).newValue
        return ("inproc://darkroom.up.\(n).backend", "inproc://darkroom.up.\(n).store")
    }

    /// Starts the broker and the storage node, then the workers, connected
    /// to them in-process. Returns the started services and the TCP
    /// endpoints the broker and the store actually bound.
    static func startAll(data: String, workers: Int, concurrency: Int, context: Context, grace: Duration, endpoints requested: Endpoints = Endpoints(), security: RoleOptions.Security? = nil, retention: Duration? = BrokerConfiguration().retention, keepRecords: Duration? = nil, keepBytes: UInt64? = nil, jobTimeout: Duration? = WorkerConfiguration.defaultJobTimeout, logLevel: Logger.Level = Logger.levelFromEnvironment) throws -> (entries: [ServiceGroup.Entry], endpoints: Endpoints) {
        // With keys, the broker and the store share one key pair and one ZAP
        // handler. The embedded workers need no key: they reach the broker
        // and the store over inproc endpoints of this context, which never
        // leave the process; workers on other hosts use TCP (and CURVE).
        let local = localEndpoints()
        var brokerConfig = BrokerConfiguration(dataDirectory: data + "/broker")
        brokerConfig.curve = security?.curve
        brokerConfig.admission = security?.admission
        brokerConfig.frontendEndpoint = requested.frontend
        brokerConfig.backendEndpoint = requested.backend
        brokerConfig.eventsEndpoint = requested.events
        brokerConfig.localBackendEndpoint = local.backend
        brokerConfig.retention = retention
        let broker = Broker(brokerConfig, context: context, logger: Logger("broker", minimum: logLevel))
        var storeConfig = StoreConfiguration(endpoint: requested.store, dataDirectory: data + "/store", curve: security?.curve, localEndpoint: local.store)
        storeConfig.admission = security?.admission
        storeConfig.recordLifetime = keepRecords
        storeConfig.maxImageBytes = keepBytes
        let store = StoreNode(storeConfig, context: context, logger: Logger("store", minimum: logLevel))
        security?.allowlist.onChange { change in if !change.revoked.isEmpty { broker.keysRevoked() } }
        let zap = RoleOptions.authenticator(security, context: context, logger: Logger("up", minimum: logLevel))
        var started = try ServiceRunner.start(zap + [.init(name: "broker", service: broker), .init(name: "storage node", service: store)], logger: Logger("up", minimum: logLevel))
        var bound = requested
        bound.frontend = broker.boundEndpoints["frontend"] ?? requested.frontend
        bound.backend = broker.boundEndpoints["backend"] ?? requested.backend
        bound.events = broker.boundEndpoints["events"] ?? requested.events
        bound.store = store.boundEndpoints["store"] ?? requested.store
        var workerEntries: [ServiceGroup.Entry] = []
        for i in 1...workers {
            let config = WorkerConfiguration(
                backendEndpoint: local.backend, storeEndpoint: local.store, concurrency: concurrency,
                workerID: WorkerConfiguration.embeddedWorkerID(host: WorkerConfiguration.defaultHost, index: i), shutdownGrace: grace,
                jobTimeout: jobTimeout
            )
            workerEntries.append(.init(name: "worker \(i)", service: Worker(config, context: context, logger: Logger("worker\(i)", minimum: logLevel))))
        }
        do {
            started += try ServiceRunner.start(workerEntries, logger: Logger("up", minimum: logLevel))
        } catch {
            for entry in started.reversed() { entry.service.stop(grace: .seconds(5)) }
            throw error
        }
        return (started, bound)
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let data = args.value("data") ?? "darkroom-data"
        let workers = try args.int("workers", default: 1, range: 1...64)
        let concurrency = try args.int("concurrency", default: WorkerConfiguration.defaultConcurrency, range: 1...WorkerConfiguration.maxConcurrency)
        let grace = try RoleOptions.grace(args)
        let security = try RoleOptions.security(args)
        let requested = try endpoints(args, curve: security != nil)
        let retention = try RoleOptions.retention(args)
        let keepRecords = try RoleOptions.keepRecords(args)
        let keepBytes = try RoleOptions.keepBytes(args)
        let jobTimeout = try RoleOptions.jobTimeout(args)
        let logger = Logger("up")
        let metrics = try RoleOptions.metrics(args, logger: logger)
        RoleOptions.noteInsecure(args, curve: security != nil, listeners: [.frontend(requested.frontend), .backend(requested.backend), .events(requested.events), .store(requested.store)], logger: logger)
        let context = try Context(ioThreads: UpCommand.ioThreads)
        ServiceRunner.holdTerminationSignals()
        let listening = try ServiceRunner.start(metrics?.entries ?? [], logger: logger)
        let (started, bound) = try RoleOptions.removingCreated([data + "/broker", data + "/store"], parent: data) {
            try startAll(data: data, workers: workers, concurrency: concurrency, context: context, grace: grace, endpoints: requested,
                         security: security, retention: retention, keepRecords: keepRecords, keepBytes: keepBytes,
                         jobTimeout: jobTimeout)
        }
        metrics?.serve(started.map(\.service))
        logger.info("darkroom is up: frontend \(bound.frontend), backend \(bound.backend), events \(bound.events), store \(bound.store), \(workers) worker(s) x \(concurrency) concurrent jobs, data in \(data)/")
        // The hint reaches this `up` as typed, on other endpoints too.
        var reach = bound.frontend == Wire.Endpoint.frontend ? "" : " --broker \(bound.frontend)"
        if bound.events != Wire.Endpoint.events { reach += " --events \(bound.events)" }
        logger.info("try: darkroom submit PHOTOS/ --ops 'scale:1024x1024,mode=fill | crop:square' --wait\(reach)")
        return ServiceRunner.runUntilSignalled(listening + started, logger: logger, grace: grace, onHangUp: security?.hangUpHandler(logger: logger))
    }
}

/// Embedded systems started in this process, to name their inproc endpoints.
private let embeddedSystems = Atomic<Int>(0)
