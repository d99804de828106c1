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
    /// How many jobs the worker works on at once, 1…1024: processing them
    /// or waiting for their STORED. A slot stays busy from the JOB until its
    /// DONE or FAIL, which includes the STORE round trip, so for small jobs
    /// more slots than processors keep the processors busy while results
    /// wait for the storage node's commit.
    public var concurrency: Int
    /// How many jobs are processed (decoded, run, encoded) at the same time:
    /// the processing threads. nil means `concurrency`, capped at the number
    /// of processors (CPU-bound threads beyond that add no throughput). Jobs
    /// beyond this wait in the worker for a free thread.
    public var processingThreads: Int?
    /// Jobs the worker takes on top of `concurrency`, so that a processing
    /// thread finds its next job waiting while the previous result is being
    /// stored and the broker is sending the next JOB. nil means one per
    /// processing thread; 0 takes exactly `concurrency` jobs.
    public var prefetch: Int?
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
        limits: DecodeLimits = .default,
        curve: WorkerCurve? = nil,
        processingThreads: Int? = nil,
        prefetch: Int? = nil
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
        self.limits = limits
        self.curve = curve
        self.processingThreads = processingThreads
        self.prefetch = prefetch
    }

    /// The slots declared in READY, the most credit the worker grants:
    /// `concurrency` plus the prefetch, at most the protocol's 1024.
    public var slots: Int {
        let extra = max(0, prefetch ?? effectiveProcessingThreads)
        return min(Int(Wire.Limit.maxSlots), concurrency + extra)
    }

    /// The processing threads actually started: `processingThreads`, or
    /// `concurrency` capped at the processors; never more than `concurrency`.
    public var effectiveProcessingThreads: Int {
        let wanted = processingThreads ?? min(concurrency, ProcessInfo.processInfo.activeProcessorCount)
        return max(1, min(wanted, concurrency))
    }

    /// The number of cores this process may use, within 1…1024.
    public static var defaultConcurrency: Int {
        min(max(ProcessInfo.processInfo.activeProcessorCount, 1), Int(Wire.Limit.maxSlots))
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
        let tail = "-\(getpid())-\(random)"
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
        guard (1...Int(Wire.Limit.maxSlots)).contains(concurrency) else {
            throw WorkerError("concurrency must be 1…\(Wire.Limit.maxSlots), got \(concurrency)")
        }
        if let processingThreads, !(1...Int(Wire.Limit.maxSlots)).contains(processingThreads) {
            throw WorkerError("processing threads must be 1…\(Wire.Limit.maxSlots), got \(processingThreads)")
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
