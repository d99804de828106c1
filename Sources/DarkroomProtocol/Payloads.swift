// JSON payloads: STATUS-REPLY, DEAD-LIST-REPLY, LIST-REPLY, GET-REPLY and
// STATS-REPLY. Keys are camelCase; times are Unix milliseconds; ids are
// ULID text. Receivers ignore keys they do not know.

/// The broker's state, answered to STATUS.
public struct BrokerStatus: Codable, Sendable, Equatable {
    /// "DRK1".
    public var protocolVersion: String
    /// The broker's clock, Unix ms, when the status was taken. Compare worker
    /// heartbeat times with this, not with the client's clock.
    public var time: UInt64
    /// Newest event sequence number (0 before the first event).
    public var eventSeq: UInt64
    public var queue: QueueStatus
    public var workers: [WorkerStatus]
    public var rates: Rates

    public init(protocolVersion: String = Wire.version, time: UInt64, eventSeq: UInt64, queue: QueueStatus, workers: [WorkerStatus], rates: Rates) {
        self.protocolVersion = protocolVersion
        self.time = time
        self.eventSeq = eventSeq
        self.queue = queue
        self.workers = workers
        self.rates = rates
    }
}

public struct QueueStatus: Codable, Sendable, Equatable {
    /// Jobs waiting to run, by priority: element i is priority i (10 elements).
    public var ready: [UInt64]
    /// Jobs waiting out a retry backoff.
    public var delayed: UInt64
    /// Jobs dispatched to a worker and not yet DONE or FAIL.
    public var inFlight: UInt64
    /// Jobs in the dead-letter set.
    public var dead: UInt64
    /// The depth limit over which SUBMIT is rejected with queue-full.
    public var limit: UInt64
    /// When PAUSE stopped dispatch (Unix ms); absent while jobs are sent.
    public var pausedSince: UInt64?

    public init(ready: [UInt64], delayed: UInt64, inFlight: UInt64, dead: UInt64, limit: UInt64, pausedSince: UInt64? = nil) {
        self.ready = ready
        self.delayed = delayed
        self.inFlight = inFlight
        self.dead = dead
        self.limit = limit
        self.pausedSince = pausedSince
    }

    /// All jobs waiting to run, whatever their priority.
    public var depth: UInt64 { ready.reduce(0, +) + delayed }
}

public struct WorkerStatus: Codable, Sendable, Equatable {
    public var id: String
    public var host: String
    public var pid: UInt32
    public var slots: UInt32
    /// Jobs the worker holds now.
    public var busy: UInt32
    /// Credit the broker has not yet used.
    public var credit: UInt32
    /// Broker time (Unix ms) of the last message from the worker.
    public var lastHeartbeat: UInt64

    public init(id: String, host: String, pid: UInt32, slots: UInt32, busy: UInt32, credit: UInt32, lastHeartbeat: UInt64) {
        self.id = id
        self.host = host
        self.pid = pid
        self.slots = slots
        self.busy = busy
        self.credit = credit
        self.lastHeartbeat = lastHeartbeat
    }
}

/// Jobs per second over the last `windowSeconds`.
public struct Rates: Codable, Sendable, Equatable {
    public var windowSeconds: UInt32
    public var accepted: Double
    public var stored: Double
    public var failed: Double

    public init(windowSeconds: UInt32, accepted: Double, stored: Double, failed: Double) {
        self.windowSeconds = windowSeconds
        self.accepted = accepted
        self.stored = stored
        self.failed = failed
    }
}

/// The dead-letter set, answered to DEAD-LIST.
public struct DeadList: Codable, Sendable, Equatable {
    /// How many jobs are dead in all (the page may hold fewer).
    public var total: UInt64
    public var jobs: [DeadJob]

    public init(total: UInt64, jobs: [DeadJob]) {
        self.total = total
        self.jobs = jobs
    }
}

public struct DeadJob: Codable, Sendable, Equatable {
    public var jobID: ULID
    public var source: String
    public var pipeline: String
    public var priority: UInt8
    /// The job's attempt number: that of its last dispatch (0 if never
    /// dispatched), not the counted attempts of its retry budget, which a
    /// DEAD-RETRY restarts while the number goes on.
    public var attempts: UInt32
    /// Unix ms when the job was accepted.
    public var submitted: UInt64
    /// Unix ms when it became dead.
    public var died: UInt64
    /// The failing pipeline step, numbered from 1; 0 when the failure was not in a step.
    public var stepIndex: Int32
    public var step: String
    public var errorCode: String
    public var reason: String

    public init(jobID: ULID, source: String, pipeline: String, priority: UInt8, attempts: UInt32, submitted: UInt64, died: UInt64,
                stepIndex: Int32, step: String, errorCode: String, reason: String) {
        self.jobID = jobID
        self.source = source
        self.pipeline = pipeline
        self.priority = priority
        self.attempts = attempts
        self.submitted = submitted
        self.died = died
        self.stepIndex = stepIndex
        self.step = step
        self.errorCode = errorCode
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId", source, pipeline, priority, attempts, submitted, died, stepIndex, step, errorCode, reason
    }
}

/// A page of the jobs waiting or running (JOB-LIST-REPLY).
public struct JobList: Codable, Sendable, Equatable {
    /// The jobs listed: `queued`, `delayed` or `running`.
    public var state: String
    /// How many jobs are in that state in all.
    public var total: UInt64
    /// How many of them come before this page.
    public var offset: UInt64
    public var jobs: [ListedJob]

    public init(state: String, total: UInt64, offset: UInt64, jobs: [ListedJob]) {
        self.state = state
        self.total = total
        self.offset = offset
        self.jobs = jobs
    }
}

/// One job of a JOB-LIST page, as the broker holds it in memory.
public struct ListedJob: Codable, Sendable, Equatable {
    public var jobID: ULID
    public var priority: UInt8
    public var source: String
    /// Its attempt number: that of its last dispatch (of this one, when running; 0 if never).
    public var attempt: UInt32
    /// The worker running it (running jobs).
    public var worker: String?
    /// When it becomes ready, Unix ms (delayed jobs).
    public var notBefore: UInt64?
    /// Its deadline (SUBMIT frame 11), Unix ms, when it has one.
    public var expires: UInt64?
    /// A running job whose worker was asked to stop it (CANCEL).
    public var cancelling: Bool?
    /// Its place in its state's order, to list the jobs after it
    /// (JOB-LIST frame 6; `JobListCursor`'s text).
    public var cursor: String?

    public init(jobID: ULID, priority: UInt8, source: String, attempt: UInt32, worker: String? = nil, notBefore: UInt64? = nil,
                expires: UInt64? = nil, cancelling: Bool? = nil, cursor: String? = nil) {
        self.jobID = jobID
        self.priority = priority
        self.source = source
        self.attempt = attempt
        self.worker = worker
        self.notBefore = notBefore
        self.expires = expires
        self.cancelling = cancelling
        self.cursor = cursor
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId", priority, source, attempt, worker, notBefore, expires, cancelling, cursor
    }
}

/// One stored result: the full-resolution image and its thumbnail.
public struct RecordInfo: Codable, Sendable, Equatable {
    public var id: ULID
    public var jobID: ULID
    public var source: String
    public var pipeline: String
    /// Unix ms when the record was committed.
    public var created: UInt64
    public var full: ImageInfo
    public var thumb: ImageInfo

    public init(id: ULID, jobID: ULID, source: String, pipeline: String, created: UInt64, full: ImageInfo, thumb: ImageInfo) {
        self.id = id
        self.jobID = jobID
        self.source = source
        self.pipeline = pipeline
        self.created = created
        self.full = full
        self.thumb = thumb
    }

    enum CodingKeys: String, CodingKey {
        case id, jobID = "jobId", source, pipeline, created, full, thumb
    }
}

public struct ImageInfo: Codable, Sendable, Equatable {
    public var width: UInt32
    public var height: UInt32
    public var bytes: UInt64
    /// Lower-case hex SHA-256 of the file's bytes.
    public var sha256: String
    /// The file's format: "jpeg", "webp", "png" or "avif".
    public var format: String

    public init(width: UInt32, height: UInt32, bytes: UInt64, sha256: String, format: String = "jpeg") {
        self.width = width
        self.height = height
        self.bytes = bytes
        self.sha256 = sha256
        self.format = format
    }

    enum CodingKeys: String, CodingKey {
        case width, height, bytes, sha256, format
    }

    /// A record from a storage node from before WebP outputs has no
    /// `format`: its images are JPEGs.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        width = try container.decode(UInt32.self, forKey: .width)
        height = try container.decode(UInt32.self, forKey: .height)
        bytes = try container.decode(UInt64.self, forKey: .bytes)
        sha256 = try container.decode(String.self, forKey: .sha256)
        format = try container.decodeIfPresent(String.self, forKey: .format) ?? "jpeg"
    }

    /// The extension of a file holding this image: "jpg", "webp", "png" or "avif".
    public var fileExtension: String {
        switch format {
        case "webp", "png", "avif": format
        default: "jpg"
        }
    }

    /// The format's name as people write it: "JPEG", "WebP", "PNG" or "AVIF".
    public var formatName: String {
        switch format {
        case "webp": "WebP"
        case "png": "PNG"
        case "avif": "AVIF"
        default: "JPEG"
        }
    }
}

/// The storage node's totals, answered to STATS.
public struct StoreStats: Codable, Sendable, Equatable {
    public var records: UInt64
    public var fullBytes: UInt64
    public var thumbBytes: UInt64
    /// Blobs kept as external files (over the inline threshold).
    public var externalFiles: UInt64
    /// Size of the database files (main file plus WAL).
    public var databaseBytes: UInt64
    /// Image bytes (full and thumbnail) kept inside the database.
    public var inlineBytes: UInt64
    /// Image bytes kept in external files (shared files counted per record).
    public var externalBytes: UInt64

    public init(records: UInt64, fullBytes: UInt64, thumbBytes: UInt64, externalFiles: UInt64, databaseBytes: UInt64,
                inlineBytes: UInt64 = 0, externalBytes: UInt64 = 0) {
        self.records = records
        self.fullBytes = fullBytes
        self.thumbBytes = thumbBytes
        self.externalFiles = externalFiles
        self.databaseBytes = databaseBytes
        self.inlineBytes = inlineBytes
        self.externalBytes = externalBytes
    }

    private enum CodingKeys: String, CodingKey {
        case records, fullBytes, thumbBytes, externalFiles, databaseBytes, inlineBytes, externalBytes
    }

    /// `inlineBytes` and `externalBytes` came later: a reply without them
    /// reads as 0.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        records = try c.decode(UInt64.self, forKey: .records)
        fullBytes = try c.decode(UInt64.self, forKey: .fullBytes)
        thumbBytes = try c.decode(UInt64.self, forKey: .thumbBytes)
        externalFiles = try c.decode(UInt64.self, forKey: .externalFiles)
        databaseBytes = try c.decode(UInt64.self, forKey: .databaseBytes)
        inlineBytes = try c.decodeIfPresent(UInt64.self, forKey: .inlineBytes) ?? 0
        externalBytes = try c.decodeIfPresent(UInt64.self, forKey: .externalBytes) ?? 0
    }
}

/// One job's story, answered to JOB-INFO (section 10.5): where it is now,
/// each attempt, and every event the broker's log still holds for it.
public struct JobStory: Codable, Sendable, Equatable {
    public var jobID: ULID
    /// `queued`, `delayed` (waiting out a retry backoff until `notBefore`),
    /// `running`, `cancelling` (its worker was asked to stop it), `stored`,
    /// `dead`, `discarded` or `cancelled`.
    public var state: String
    public var source: String
    /// The canonical pipeline and the priority; nil when the log no longer
    /// holds the job's `accepted` event and the queue no longer holds it.
    public var pipeline: String?
    public var priority: UInt8?
    /// Unix ms of `accepted`, and of the event that finished the job.
    public var submitted: UInt64?
    public var finished: UInt64?
    /// Unix ms until which a delayed job waits.
    public var notBefore: UInt64?
    /// The deadline of a job still waiting (SUBMIT frame 11), Unix ms.
    public var expires: UInt64?
    /// Where a queued job stands in the dispatch order (1: the next to go).
    public var position: UInt64?
    /// The job's own time limit on a worker, in seconds (SUBMIT frame 12),
    /// while the queue holds the job (waiting, running or dead).
    public var timeLimit: UInt32?
    /// The worker running it now.
    public var worker: String?
    /// The stored record.
    public var recordID: ULID?
    public var attempts: [JobAttempt]
    public var events: [JobEvent]
    /// False when the log's first events for the job were pruned (the
    /// broker's `--retention`): the story starts later than the job.
    public var complete: Bool

    public init(jobID: ULID, state: String, source: String, pipeline: String? = nil, priority: UInt8? = nil,
                submitted: UInt64? = nil, finished: UInt64? = nil, notBefore: UInt64? = nil, worker: String? = nil,
                recordID: ULID? = nil, attempts: [JobAttempt] = [], events: [JobEvent] = [], complete: Bool = true) {
        self.jobID = jobID
        self.state = state
        self.source = source
        self.pipeline = pipeline
        self.priority = priority
        self.submitted = submitted
        self.finished = finished
        self.notBefore = notBefore
        self.worker = worker
        self.recordID = recordID
        self.attempts = attempts
        self.events = events
        self.complete = complete
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId", state, source, pipeline, priority, submitted, finished, notBefore, expires, position, timeLimit, worker
        case recordID = "recordId", attempts, events, complete
    }
}

/// One dispatch of a job to a worker.
public struct JobAttempt: Codable, Sendable, Equatable {
    public var attempt: UInt32
    public var worker: String
    /// Unix ms of `started`, and of the event that ended the attempt.
    public var started: UInt64
    public var ended: UInt64?
    /// `running`, `stored`, `failed`, `cancelled`, or `requeued` (the job
    /// went back to the queue without a failure of its own: its worker
    /// stopped, or reconnected without it).
    public var outcome: String
    /// Why it failed or was requeued.
    public var failure: FailureDetail?

    public init(attempt: UInt32, worker: String, started: UInt64, ended: UInt64? = nil, outcome: String, failure: FailureDetail? = nil) {
        self.attempt = attempt
        self.worker = worker
        self.started = started
        self.ended = ended
        self.outcome = outcome
        self.failure = failure
    }
}

/// One event of a job's story (drk1.md section 10.5): an EVENT's fields
/// without its job id and source name (the story's own), `kind` as its
/// name, `worker`, `recordId` and `failure` absent when the EVENT has none,
/// and the failure's error code under `code`.
public struct JobEvent: Codable, Sendable, Equatable {
    public var seq: UInt64
    public var time: UInt64
    public var kind: String
    public var attempt: UInt32
    public var worker: String?
    public var recordID: ULID?
    public var failure: FailureDetail?

    public init(_ event: Event) {
        seq = event.seq
        time = event.time
        kind = event.kind.description
        attempt = event.attempt
        worker = event.workerID.isEmpty ? nil : event.workerID
        recordID = event.recordID
        failure = event.failure
    }

    enum CodingKeys: String, CodingKey {
        case seq, time, kind, attempt, worker, recordID = "recordId", failure
    }
}
