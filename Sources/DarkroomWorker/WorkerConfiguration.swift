import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// Everything a `Worker` needs to know. Every field has a default, so
/// `WorkerConfiguration()` finds the broker and the storage node of
/// `darkroom up` on loopback with no flags.
public struct WorkerConfiguration: Sendable {
    /// The broker's backend ROUTER (READY, CREDIT, JOB, DONE, FAIL…).
    public var backendEndpoint: String
    /// The storage node's ROUTER (STORE, STORED).
    public var storeEndpoint: String
    /// How many jobs are processed (decoded, run, encoded) at the same
    /// time, 1…1024: the processing threads. The number of processors by
    /// default (CPU-bound threads beyond them add no throughput). The jobs
    /// the worker holds beyond these wait for a thread, or for their STORED.
    public var concurrency: Int
    /// A fixed cap on the jobs held beyond the `concurrency` being
    /// processed: the slots declared in READY are then `concurrency +
    /// prefetch`, and the credit never exceeds them. nil (the default) sets
    /// no cap but the protocol's 4096 slots: how many jobs the worker holds
    /// is then up to its credit target (`CreditPlanner`), which follows the
    /// measured job time and round trips within `inputBudget`.
    public var prefetch: Int?
    /// The most input bytes the worker holds: the sum of the inputs of the
    /// jobs it holds, each counted from its JOB to its DONE or FAIL. The
    /// credit it grants counts each job still to come as large as the
    /// average input so far. nil means `defaultInputBudget`. A single job
    /// larger than the budget is still taken when the worker holds none.
    public var inputBudget: Int?
    /// The worker id sent in READY: 1…64 bytes of printable ASCII, no spaces.
    /// New for each process by default: `<host>-<pid>-<random>`.
    public var workerID: String
    /// The host name sent in READY, one line of 1…255 bytes.
    public var host: String
    /// How long `stop` waits for running jobs before handing them back.
    public var shutdownGrace: Duration
    /// A HEARTBEAT goes to the broker when nothing else was sent for this long.
    public var heartbeatInterval: Duration
    /// The broker is treated as gone after this many silent intervals.
    public var heartbeatLiveness: Int
    /// The first wait before reconnecting to a silent broker; it doubles on
    /// each further silence up to `reconnectMaximum`.
    public var reconnectInitial: Duration
    public var reconnectMaximum: Duration
    /// A job whose STORE got no STORED within this time fails, retryable
    /// (`store.unreachable`).
    public var storeTimeout: Duration
    /// While waiting for STORED, the STORE is sent again this often (the
    /// storage node is idempotent per job, so a repeat is harmless).
    public var storeRetryInterval: Duration
    /// The longest a job may run on a processing thread, from when the
    /// thread takes it up (not from its JOB: a job waiting for a thread is
    /// not running). Past it the worker stops the job in the step it is in
    /// and fails it with `job.timeout`, not retryable. nil sets no limit.
    /// Ten minutes by default: far beyond any input within the decode
    /// limits (a 50-megapixel photo through a long pipeline takes seconds),
    /// so it only ends a job that would otherwise hold a thread for good.
    public var jobTimeout: Duration?
    /// Input limits, checked from each JPEG's header before decoding.
    public var limits: DecodeLimits
    /// CURVE keys; nil for plain TCP.
    public var curve: WorkerCurve?

    public init(
        backendEndpoint: String = Wire.Endpoint.backend,
        storeEndpoint: String = Wire.Endpoint.store,
        concurrency: Int = WorkerConfiguration.defaultConcurrency,
        workerID: String? = nil,
        host: String = WorkerConfiguration.defaultHost,
        shutdownGrace: Duration = .seconds(30),
        heartbeatInterval: Duration = .milliseconds(Int64(Wire.heartbeatIntervalMilliseconds)),
        heartbeatLiveness: Int = Int(Wire.heartbeatLiveness),
        reconnectInitial: Duration = .milliseconds(100),
        reconnectMaximum: Duration = .seconds(5),
        storeTimeout: Duration = .seconds(10),
        storeRetryInterval: Duration = .milliseconds(2_500),
        jobTimeout: Duration? = WorkerConfiguration.defaultJobTimeout,
        limits: DecodeLimits = .default,
        curve: WorkerCurve? = nil,
        prefetch: Int? = nil,
        inputBudget: Int? = nil
    ) {
        self.backendEndpoint = backendEndpoint
        self.storeEndpoint = storeEndpoint
        self.concurrency = concurrency
        self.workerID = workerID ?? WorkerConfiguration.makeWorkerID(host: host)
        self.host = host
        self.shutdownGrace = shutdownGrace
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatLiveness = heartbeatLiveness
        self.reconnectInitial = reconnectInitial
        self.reconnectMaximum = reconnectMaximum
        self.storeTimeout = storeTimeout
        self.storeRetryInterval = storeRetryInterval
        self.jobTimeout = jobTimeout
        self.limits = limits
        self.curve = curve
        self.prefetch = prefetch
        self.inputBudget = inputBudget
    }

    /// The slots declared in READY, the most jobs the worker ever holds
    /// (processing them, waiting for a thread or for STORED):
    /// `concurrency + prefetch` when `prefetch` is set, else the protocol's
    /// 4096. The credit the worker grants follows its target
    /// (`CreditPlanner`), which never exceeds them.
    public var slots: Int {
        guard let prefetch else { return Int(Wire.Limit.maxSlots) }
        return min(Int(Wire.Limit.maxSlots), concurrency + max(0, prefetch))
    }

    /// Ten minutes (see `jobTimeout`).
    public static let defaultJobTimeout: Duration? = .seconds(600)

    /// `inputBudget`, or `defaultInputBudget`.
    public var effectiveInputBudget: Int {
        inputBudget ?? WorkerConfiguration.defaultInputBudget
    }

    /// 256 MiB, or a quarter of the memory this process may use (its
    /// cgroup's limit, else the machine's memory) when that is less; at
    /// least 16 MiB.
    public static var defaultInputBudget: Int {
        let quarter = (memoryLimit ?? Int(clamping: ProcessInfo.processInfo.physicalMemory)) / 4
        return max(16 << 20, min(256 << 20, quarter))
    }

    /// The memory limit of this process's cgroup (v2 `memory.max`, v1
    /// `memory.limit_in_bytes`, in its own cgroup directory or at the
    /// mount's root), or nil when there is none.
    static var memoryLimit: Int? {
        var paths: [String] = []
        let membership = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) ?? ""
        for line in membership.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let path = fields[2] == "/" ? "" : String(fields[2])
            if fields[1].isEmpty { paths.append("/sys/fs/cgroup\(path)/memory.max") }
            if fields[1].split(separator: ",").contains("memory") { paths.append("/sys/fs/cgroup/memory\(path)/memory.limit_in_bytes") }
        }
        paths += ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        let limits = paths.compactMap { path -> Int? in
            guard let text = try? String(contentsOfFile: path, encoding: .utf8),
                  let limit = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
            // v2 says "max" for no limit (no number), v1 a number near Int64.max.
            return limit > 0 && limit < 1 << 50 ? limit : nil
        }
        return limits.min()
    }

    /// A byte count as people write it: `268435456`, `256MiB`, `256M`,
    /// `64KiB`, `1G`. K, M and G are powers of 1024, with or without
    /// `iB` or `B`. Nil when the text is none of these or is not positive.
    public static func parseByteCount(_ text: String) -> Int? {
        var digits = Substring(text.trimmingCharacters(in: .whitespaces))
        var unit = 1
        for (suffix, factor) in [("kib", 1 << 10), ("mib", 1 << 20), ("gib", 1 << 30), ("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30),
                                 ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("b", 1)] where digits.lowercased().hasSuffix(suffix) {
            digits = digits.dropLast(suffix.count)
            unit = factor
            break
        }
        guard let count = Int(digits.trimmingCharacters(in: .whitespaces)), count > 0 else { return nil }
        let (bytes, overflow) = count.multipliedReportingOverflow(by: unit)
        return overflow ? nil : bytes
    }

    /// The most processing threads a worker runs. Fewer than the slots
    /// DRK1 allows: slots also count the jobs waiting for a thread or for
    /// STORED, which a worker far from the broker needs many of.
    public static let maxConcurrency = 1024

    /// The number of cores this process may use, within 1…`maxConcurrency`.
    public static var defaultConcurrency: Int {
        min(max(ProcessInfo.processInfo.activeProcessorCount, 1), maxConcurrency)
    }

    /// This machine's host name as one wire line, or `localhost`.
    public static var defaultHost: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        let name = Wire.line(String(decoding: bytes, as: UTF8.self), maxBytes: Wire.Limit.hostBytes)
        return name.isEmpty ? "localhost" : name
    }

    /// `<host>-<pid>-<random>`, printable ASCII without spaces, at most 64 bytes.
    public static func makeWorkerID(host: String) -> String {
        let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz")
        var generator = SystemRandomNumberGenerator()
        let random = String((0..<6).map { _ in alphabet[Int(generator.next(upperBound: UInt32(alphabet.count)))] })
        return idWithHost(host, tail: "-\(getpid())-\(random)")
    }

    /// `<host>-up-<index>`: the id of `darkroom up`'s embedded worker
    /// `index`, the same at every start. Only one `up` serves a data
    /// directory (its lock), and its broker is that directory's, so the id
    /// is one process's at a time; a restarted `up` (after a crash, say)
    /// comes back under the ids its broker holds leases for, which settles
    /// them at once (requeued, no attempt charged) instead of after the
    /// wait for a worker that cannot return.
    public static func embeddedWorkerID(host: String, index: Int) -> String {
        idWithHost(host, tail: "-up-\(index)")
    }

    /// The host name cut down to the characters an id keeps (others become
    /// `_`) and to the room `tail` leaves in 64 bytes, then `tail`.
    private static func idWithHost(_ host: String, tail: String) -> String {
        var hostPart = String(host.unicodeScalars.map { scalar -> Character in
            let v = scalar.value
            let keep = (v >= 0x30 && v <= 0x39) || (v >= 0x41 && v <= 0x5A) || (v >= 0x61 && v <= 0x7A) || v == 0x2E || v == 0x2D || v == 0x5F
            return keep ? Character(scalar) : "_"
        })
        if hostPart.isEmpty { hostPart = "worker" }
        return String(hostPart.prefix(Wire.Limit.workerIDBytes - tail.utf8.count)) + tail
    }

    /// Checks every field against the protocol's ranges; `Worker.start` calls it.
    public func validate() throws(WorkerError) {
        guard (1...WorkerConfiguration.maxConcurrency).contains(concurrency) else {
            throw WorkerError("concurrency must be 1…\(WorkerConfiguration.maxConcurrency), got \(concurrency)")
        }
        if let inputBudget, inputBudget < 1 {
            throw WorkerError("input budget must be at least 1 byte, got \(inputBudget)")
        }
        if let prefetch, !(0...Int(Wire.Limit.maxSlots)).contains(prefetch) {
            throw WorkerError("prefetch must be 0…\(Wire.Limit.maxSlots), got \(prefetch)")
        }

        guard (1...Wire.Limit.workerIDBytes).contains(workerID.utf8.count),
              !workerID.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) else {
            throw WorkerError("worker id must be 1…\(Wire.Limit.workerIDBytes) bytes of printable ASCII without spaces, got '\(workerID)'")
        }
        guard (1...Wire.Limit.hostBytes).contains(host.utf8.count), Wire.line(host, maxBytes: Wire.Limit.hostBytes) == host else {
            throw WorkerError("host must be one line of 1…\(Wire.Limit.hostBytes) bytes, got '\(host)'")
        }
        for (name, value) in [("heartbeat interval", heartbeatInterval), ("reconnect delay", reconnectInitial),
                              ("reconnect maximum", reconnectMaximum), ("store timeout", storeTimeout),
                              ("store retry interval", storeRetryInterval)] where value <= .zero {
            throw WorkerError("\(name) must be positive, got \(value)")
        }
        if let jobTimeout, jobTimeout <= .zero { throw WorkerError("job timeout must be positive, got \(jobTimeout)") }
        guard heartbeatLiveness >= 1 else { throw WorkerError("heartbeat liveness must be at least 1, got \(heartbeatLiveness)") }
        guard shutdownGrace >= .zero else { throw WorkerError("shutdown grace must not be negative, got \(shutdownGrace)") }
    }
}

/// CURVE keys for a worker: its own key pair, and the public keys of the
/// broker and the storage node it connects to.
public struct WorkerCurve: Sendable {
    public var keyPair: CurveKeyPair
    public var brokerPublicKey: CurveKey
    public var storePublicKey: CurveKey

    public init(keyPair: CurveKeyPair, brokerPublicKey: CurveKey, storePublicKey: CurveKey) {
        self.keyPair = keyPair
        self.brokerPublicKey = brokerPublicKey
        self.storePublicKey = storePublicKey
    }
}

/// A worker that could not start: a bad configuration or a socket that could
/// not be set up.
public struct WorkerError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
