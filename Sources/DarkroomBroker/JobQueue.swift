import DarkroomProtocol
import DarkroomSQLite
import Foundation

/// A job's state in the `jobs` table. (A stored job has no row; schema 1
/// kept such rows as `done`, and its migration deletes them.)
enum JobState: String {
    case queued, leased, dead
}

/// What the loop keeps in memory about a job that is waiting or in flight:
/// enough to order it and to write its events without reading the row.
struct JobHandle: Sendable, Hashable {
    var id: ULID
    var priority: UInt8
    var source: String
    /// `id` as text, the key of the job's rows: made once per job rather
    /// than for every statement that names it.
    let idText: String

    init(id: ULID, priority: UInt8, source: String) {
        self.id = id
        self.priority = priority
        self.source = source
        idText = id.description
    }
}

/// A job read for dispatch.
struct DispatchRow {
    var handle: JobHandle
    var attempt: UInt32
    var attemptBase: UInt32
    var options: JobOptions
    var pipeline: String
    var image: [UInt8]
    /// The external input file, nil when the input is inline.
    var inputFile: String?
    /// The job's rowid in `jobs`, so later updates skip the lookup by id.
    var rowID: Int64
}

/// What a just-accepted job needs for its first dispatch, as it was written.
private struct WarmInput {
    var rowID: Int64
    var options: JobOptions
    var pipeline: String
    var image: [UInt8]
    var inputFile: String?
}

/// The durable queue: one SQLite database (WAL, synchronous=FULL) owned by
/// the broker's service thread, plus the external input files.
///
/// Tables:
/// - `jobs`: one row per job. `attempt` is the number of the latest dispatch
///   (0 before the first); `attempt_base` is `attempt` when the job was last
///   revived, so a revived job gets `maxAttempts` more dispatches. The input
///   image is either inline (in `job_inputs`) or in a file (`input_file`);
///   both are dropped when the job is done or discarded, so finished rows
///   stay small. (`jobs.input` holds the inline input of jobs queued by
///   earlier versions; new jobs leave it NULL.)
/// - `job_input`: the inline input of each unfinished job, keyed by the
///   job's rowid in `jobs` (no index of its own). Apart from the jobs rows,
///   so that the updates a job goes through (leased, done) rewrite a small
///   row instead of one that fills a page with the image: fewer pages per
///   commit in the WAL.
///
/// A stored job's row is deleted with its input: the events keep its
/// history (accepted, started, stored with the record id) and the storage
/// node its record, so `jobs` holds only queued, leased and dead jobs and
/// stays small however long the broker runs.
///
/// Indexes on `jobs`: `id` (unique); `jobs_open` (priority, id) over the
/// unfinished jobs (`finished IS NULL`: queued or leased), which a lease
/// does not touch; `jobs_dead` over the dead-letter set.
/// - `events`: the lifecycle event log, `seq` gapless from 1 (older
///   events are pruned past the retention; the newest always stays).
/// - `submit_keys`: each accepted SUBMIT's key with its job and `accepted`
///   seq, so a resent SUBMIT gets the same job (pruned like the events).
///
/// Writes happen inside the transaction the loop opens with `begin()` for one
/// turn and closes with `commit()` (group commit).
final class JobQueue {
    let db: Connection
    let inputs: InputFiles
    let blobThreshold: Int
    /// The newest event seq assigned (committed, or pending in the open transaction).
    private(set) var headSeq: UInt64 = 0
    /// `headSeq` as of the last commit.
    private(set) var committedSeq: UInt64 = 0

    // The statements every job runs, prepared once. They stay in the
    // connection's statement cache too, which finalizes them on close.
    private let insertJob: Statement
    private let insertEvent: Statement
    private let selectForLease: Statement
    private let deleteJob: Statement
    private let updateRequeued: Statement
    private let insertInput: Statement
    private let deleteInput: Statement
    private let selectSubmitKey: Statement
    private let insertSubmitKey: Statement
    private let updateLeased: Statement

    /// The inputs of accepted jobs not yet leased, by job id, so that the
    /// first lease need not read back the row the accept just wrote. Most
    /// jobs are leased soon after they are accepted; the bytes held are
    /// bounded by `warmLimit`, and a job not held here is read from the
    /// database as usual. Emptied when a transaction is rolled back.
    private var warm: [ULID: WarmInput] = [:]
    private var warmBytes = 0
    let warmLimit: Int

    /// WAL with `synchronous=FULL` (an accepted job survives power loss).
    /// Every job's input is deleted once it is done: with `secure_delete`
    /// on (Debian's default) each delete zeroes the input's page and writes
    /// it to the log a second time; `fast` zeroes only what is written
    /// anyway, which halves the log per job. A log of 8,000 pages (32 MB)
    /// between checkpoints lets a page reused by later jobs be copied back
    /// once rather than once per job.
    static let connectionOptions: Connection.Options = {
        var options = Connection.Options()
        options.secureDelete = .fast
        options.walAutocheckpointPages = 8_000
        return options
    }()

    init(directory: String, blobThreshold: Int, warmLimit: Int = 64 << 20) throws {
        self.warmLimit = warmLimit
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        db = try Connection(path: directory + "/queue.sqlite", options: JobQueue.connectionOptions)
        inputs = try InputFiles(directory: directory + "/inputs")
        self.blobThreshold = blobThreshold
        try db.execute("""
            CREATE TABLE IF NOT EXISTS jobs (
                id TEXT NOT NULL UNIQUE,
                priority INTEGER NOT NULL,
                state TEXT NOT NULL,
                attempt INTEGER NOT NULL DEFAULT 0,
                attempt_base INTEGER NOT NULL DEFAULT 0,
                pipeline TEXT NOT NULL,
                thumb_width INTEGER NOT NULL,
                thumb_height INTEGER NOT NULL,
                quality INTEGER NOT NULL,
                thumb_quality INTEGER NOT NULL,
                source TEXT NOT NULL,
                input BLOB,
                input_file TEXT,
                input_bytes INTEGER NOT NULL,
                created INTEGER NOT NULL,
                not_before INTEGER NOT NULL DEFAULT 0,
                worker TEXT,
                record_id TEXT,
                finished INTEGER,
                error_step_index INTEGER,
                error_step TEXT,
                error_code TEXT,
                error_reason TEXT
            )
            """)
        try db.execute("CREATE INDEX IF NOT EXISTS jobs_input_file ON jobs (input_file) WHERE input_file IS NOT NULL")
        try db.execute("CREATE TABLE IF NOT EXISTS job_input (job INTEGER PRIMARY KEY, input BLOB NOT NULL)")
        try db.execute("""
            CREATE TABLE IF NOT EXISTS events (
                seq INTEGER PRIMARY KEY,
                time INTEGER NOT NULL,
                kind INTEGER NOT NULL,
                job_id TEXT NOT NULL,
                attempt INTEGER NOT NULL,
                source TEXT NOT NULL,
                worker TEXT NOT NULL,
                record_id TEXT,
                step_index INTEGER NOT NULL,
                step TEXT NOT NULL,
                error_code TEXT NOT NULL,
                reason TEXT NOT NULL
            )
            """)
        // Submit keys: a client's name for each job it submitted (SUBMIT
        // frame 8), so a resent SUBMIT finds the job instead of queuing
        // another. The rowid follows acceptance order, for pruning.
        try db.execute("""
            CREATE TABLE IF NOT EXISTS submit_keys (
                key TEXT NOT NULL UNIQUE,
                job_id TEXT NOT NULL,
                event_seq INTEGER NOT NULL,
                created INTEGER NOT NULL
            )
            """)
        let head = try db.query("SELECT COALESCE(MAX(seq), 0) FROM events") { $0.int64(0) ?? 0 }.first ?? 0
        headSeq = UInt64(max(0, head))
        committedSeq = headSeq
        insertJob = try db.prepare("""
            INSERT INTO jobs (id, priority, state, pipeline, thumb_width, thumb_height, quality, thumb_quality,
                              source, input, input_file, input_bytes, created)
            VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        insertEvent = try db.prepare("""
            INSERT INTO events (seq, time, kind, job_id, attempt, source, worker, record_id, step_index, step, error_code, reason)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        try JobQueue.migrate(db)
        selectForLease = try db.prepare("""
            SELECT j.priority, j.attempt, j.attempt_base, j.thumb_width, j.thumb_height, j.quality, j.thumb_quality,
                   j.pipeline, j.source, COALESCE(i.input, j.input), j.input_file, j.state, j.rowid
            FROM jobs j LEFT JOIN job_input i ON i.job = j.rowid WHERE j.id = ?
            """)
        insertInput = try db.prepare("INSERT INTO job_input (job, input) VALUES (?, ?)")
        deleteInput = try db.prepare("DELETE FROM job_input WHERE job = ?")
        selectSubmitKey = try db.prepare("SELECT job_id, event_seq FROM submit_keys WHERE key = ?")
        insertSubmitKey = try db.prepare("INSERT INTO submit_keys (key, job_id, event_seq, created) VALUES (?, ?, ?, ?)")
        updateLeased = try db.prepare("UPDATE jobs SET state = 'leased', attempt = ?, worker = ?, not_before = 0 WHERE rowid = ?")
        deleteJob = try db.prepare("DELETE FROM jobs WHERE rowid = ?")
        updateRequeued = try db.prepare("""
            UPDATE jobs SET state = 'queued', not_before = ?, worker = NULL,
                error_step_index = ?, error_step = ?, error_code = ?, error_reason = ?
            WHERE id = ?
            """)
    }

    func close() {
        try? db.close()
    }

    /// Schema version 1 numbers failing steps from 1 with 0 for "not in a
    /// step", as DRK1 does. Version 0 counted steps from 0 and used -1 for
    /// "not in a step"; a failure in a step always had its step text, so
    /// the rows convert exactly. New, empty databases just get the version.
    private static func migrateStepIndexes(_ db: Connection) throws {
        for (table, index, step) in [("jobs", "error_step_index", "error_step"), ("events", "step_index", "step")] {
            try db.execute("UPDATE \(table) SET \(index) = \(index) + 1 WHERE \(index) >= 0 AND \(step) <> ''")
            try db.execute("UPDATE \(table) SET \(index) = 0 WHERE \(index) < 0")
        }
    }

    /// Schema version 2: inline inputs keyed by the job's rowid instead of
    /// its id (`job_input` replaces `job_inputs`), partial indexes in place
    /// of the one over (state, priority, id), and no rows for stored jobs
    /// (version 1 kept them until the retention). New databases are created
    /// this way and only get the version.
    private static func migrateIndexes(_ db: Connection) throws {
        let old = try db.query("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'job_inputs'") { $0.int64(0) ?? 0 }
        if old.first == 1 {
            try db.execute("INSERT INTO job_input (job, input) SELECT j.rowid, i.input FROM job_inputs i JOIN jobs j ON j.id = i.id")
            try db.execute("DROP TABLE job_inputs")
        }
        try db.execute("DROP INDEX IF EXISTS jobs_dispatch")
        try db.execute("DELETE FROM jobs WHERE state = 'done'")
        // Every finished job has `finished` set (done and dead); queued
        // and leased ones never do.
        try db.execute("CREATE INDEX IF NOT EXISTS jobs_open ON jobs (priority DESC, id) WHERE finished IS NULL")
        try db.execute("CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (id) WHERE state = 'dead'")
    }

    /// Brings the schema up to date: each migration newer than the
    /// database's `user_version` runs in its own transaction, which also
    /// records its version.
    private static func migrate(_ db: Connection) throws {
        let found = try db.query("PRAGMA user_version") { $0.int64(0) ?? 0 }.first ?? 0
        let steps: [(version: Int64, apply: (Connection) throws -> Void)] = [(1, migrateStepIndexes), (2, migrateIndexes)]
        for step in steps where step.version > found {
            try db.transaction {
                try step.apply(db)
                try db.execute("PRAGMA user_version = \(step.version)")
            }
        }
    }

    /// A stored step index as DRK1 carries it: 0 when absent, never negative.
    static func wireStepIndex(_ stored: Int64?) -> Int32 {
        Int32(clamping: max(stored ?? 0, 0))
    }

    // MARK: Transactions

    var inTransaction: Bool { db.isInTransaction }

    func beginIfNeeded() throws {
        if !db.isInTransaction { try db.execute("BEGIN IMMEDIATE") }
    }

    func commit() throws {
        guard db.isInTransaction else { return }
        try db.execute("COMMIT")
        committedSeq = headSeq
    }

    /// Abandons the open transaction; the seq counter returns to the last commit.
    func rollback() {
        if db.isInTransaction { try? db.execute("ROLLBACK") }
        headSeq = committedSeq
        warm.removeAll()
        warmBytes = 0
    }

    // MARK: Writes (inside the open transaction)

    /// Inserts a queued job. A large input is written to its file first.
    func insert(_ job: JobHandle, options: JobOptions, pipeline: String, image: [UInt8], created: UInt64) throws {
        try beginIfNeeded()
        let inline = image.count <= blobThreshold
        let fileName: String? = inline ? nil : try inputs.write(image, name: job.idText)
        let file: SQLiteValue = fileName.map { .text($0) } ?? .null
        try insertJob.execute(values: [
            .text(job.idText), .integer(Int64(job.priority)), .text(pipeline), .integer(Int64(options.thumbnailWidth)),
            .integer(Int64(options.thumbnailHeight)), .integer(Int64(options.quality)), .integer(Int64(options.thumbnailQuality)),
            .text(job.source), .null, file, .integer(Int64(image.count)), .integer(Int64(created)),
        ])
        let rowID = db.lastInsertRowID
        if inline {
            try insertInput.execute(values: [.integer(rowID), .blob(image)])
        }
        if warmBytes + image.count <= warmLimit {
            warm[job.id] = WarmInput(rowID: rowID, options: options, pipeline: pipeline, image: image, inputFile: fileName)
            warmBytes += image.count
        }
    }

    /// The job a submit key was accepted as, with its `accepted` event's
    /// seq, or nil when the key is new (or was pruned).
    func acceptedJob(forKey key: String) throws -> (job: ULID, eventSeq: UInt64)? {
        try selectSubmitKey.query([key]) { row -> (ULID, UInt64)? in
            guard let text = row.string(0), let id = ULID(text) else { return nil }
            return (id, UInt64(clamping: row.int64(1) ?? 0))
        }.first ?? nil
    }

    /// Remembers that `key` was accepted as `job`.
    func recordSubmitKey(_ key: String, job: JobHandle, eventSeq: UInt64, time: UInt64) throws {
        try beginIfNeeded()
        try insertSubmitKey.execute(values: [.text(key), .text(job.idText), .integer(Int64(clamping: eventSeq)), .integer(Int64(clamping: time))])
    }

    /// Appends an event with the next seq and returns it.
    @discardableResult
    func append(_ kind: EventKind, job: JobHandle, attempt: UInt32, time: UInt64, worker: String = "",
                record: ULID? = nil, failure: FailureDetail? = nil) throws -> Event {
        try beginIfNeeded()
        let event = Event(seq: headSeq + 1, time: time, kind: kind, jobID: job.id, attempt: attempt, sourceName: job.source,
                          workerID: worker, recordID: record, failure: failure)
        let f = failure ?? FailureDetail(stepIndex: 0, step: "", code: "", reason: "")
        try insertEvent.execute(values: [
            .integer(Int64(event.seq)), .integer(Int64(time)), .integer(Int64(kind.rawValue)), .text(job.idText),
            .integer(Int64(attempt)), .text(job.source), .text(worker), record.map { .text($0.description) } ?? .null,
            .integer(Int64(f.stepIndex)), .text(f.step), .text(f.code), .text(f.reason),
        ])
        headSeq = event.seq
        return event
    }

    /// Leases a queued job to `worker` with the next attempt and reads what the JOB needs.
    /// Returns nil when the job is no longer queued.
    func lease(_ job: JobHandle, worker: String) throws -> DispatchRow? {
        try beginIfNeeded()
        if let input = warm.removeValue(forKey: job.id) {
            // Accepted and not leased since: queued, attempt 0.
            warmBytes -= input.image.count
            try updateLeased.execute(values: [.integer(1), .text(worker), .integer(input.rowID)])
            return DispatchRow(handle: job, attempt: 1, attemptBase: 0, options: input.options, pipeline: input.pipeline,
                               image: input.image, inputFile: input.inputFile, rowID: input.rowID)
        }
        let id = job.id
        let rows = try selectForLease.query([job.idText]) { row -> DispatchRow? in
            guard row.string(11) == JobState.queued.rawValue else { return nil }
            let image: [UInt8]
            let file = row.string(10)
            if let file {
                image = try inputs.read(file)
            } else {
                image = row.blob(9) ?? []
            }
            let source = row.string(8) ?? ""
            let priority = UInt8(clamping: row.int64(0) ?? 0)
            return DispatchRow(
                handle: source == job.source && priority == job.priority ? job : JobHandle(id: id, priority: priority, source: source),
                attempt: UInt32(clamping: row.int64(1) ?? 0) + 1,
                attemptBase: UInt32(clamping: row.int64(2) ?? 0),
                options: JobOptions(thumbnailWidth: UInt16(clamping: row.int64(3) ?? 256), thumbnailHeight: UInt16(clamping: row.int64(4) ?? 256),
                                    quality: UInt8(clamping: row.int64(5) ?? 95), thumbnailQuality: UInt8(clamping: row.int64(6) ?? 70)),
                pipeline: row.string(7) ?? "",
                image: image,
                inputFile: file,
                rowID: row.int64(12) ?? 0)
        }
        guard let found = rows.first, let row = found else { return nil }
        try updateLeased.execute(values: [.integer(Int64(row.attempt)), .text(worker), .integer(row.rowID)])
        return row
    }

    /// Deletes a stored job and its input (its `stored` event, recorded in
    /// the same transaction, names the record). Returns the input file to
    /// remove after the commit, if any.
    func removeStored(_ lease: Lease) throws -> String? {
        try beginIfNeeded()
        if lease.inputFile == nil { try deleteInput.execute(values: [.integer(lease.rowID)]) }
        try deleteJob.execute(values: [.integer(lease.rowID)])
        return lease.inputFile
    }

    /// Puts a job back in the queue, to run no earlier than `notBefore` (Unix ms; 0 = now).
    func requeue(_ job: JobHandle, notBefore: UInt64, failure: FailureDetail?) throws {
        try beginIfNeeded()
        try updateRequeued.execute(values: [
            .integer(Int64(notBefore)), failure.map { .integer(Int64($0.stepIndex)) } ?? .null,
            failure.map { .text($0.step) } ?? .null, failure.map { .text($0.code) } ?? .null,
            failure.map { .text($0.reason) } ?? .null, .text(job.idText),
        ])
    }


    func markDead(_ id: ULID, failure: FailureDetail, time: UInt64) throws {
        try beginIfNeeded()
        try db.execute("""
            UPDATE jobs SET state = 'dead', finished = ?, worker = NULL,
                error_step_index = ?, error_step = ?, error_code = ?, error_reason = ?
            WHERE id = ?
            """, Int64(time), Int64(failure.stepIndex), failure.step, failure.code, failure.reason, id.description)
    }

    /// Deletes events and submit keys from before `cutoff` (Unix ms), at
    /// most `limit` of each, oldest first. The newest event is never
    /// deleted, so the next seq is still known after a restart. (Stored jobs
    /// have no rows to prune, and dead jobs stay.) Returns how many of each went.
    func prune(before cutoff: UInt64, limit: Int) throws -> (events: Int, keys: Int) {
        try beginIfNeeded()
        let limit = Int64(max(1, limit))
        // Seqs are assigned in time order; stop at the first event inside
        // the retention even if a clock step put an older time after it.
        let window = try db.query("SELECT seq, time FROM events WHERE seq < ? ORDER BY seq LIMIT ?",
                                  Int64(clamping: committedSeq), limit) { (seq: $0.int64(0) ?? 0, time: $0.int64(1) ?? 0) }
        var last: Int64?
        for row in window {
            guard UInt64(clamping: row.time) < cutoff else { break }
            last = row.seq
        }
        var events = 0
        if let last {
            try db.execute("DELETE FROM events WHERE seq <= ?", last)
            events = db.changes
        }
        // Keys go with the same age, in acceptance order.
        let oldest = try db.query("SELECT rowid, created FROM submit_keys ORDER BY rowid LIMIT ?", limit) {
            (rowid: $0.int64(0) ?? 0, created: $0.int64(1) ?? 0)
        }
        var keys = 0
        if let lastOld = oldest.prefix(while: { UInt64(clamping: $0.created) < cutoff }).last {
            try db.execute("DELETE FROM submit_keys WHERE rowid <= ?", lastOld.rowid)
            keys = db.changes
        }
        return (events, keys)
    }

    /// The oldest event kept, or nil when there is none.
    func oldestEventSeq() throws -> UInt64? {
        try db.query("SELECT MIN(seq) FROM events") { $0.int64(0) }.first?.map { UInt64(clamping: $0) }
    }

    /// Dead jobs matching the target: one id, or every dead job.
    func deadHandles(_ target: DeadTarget) throws -> [(handle: JobHandle, attempt: UInt32)] {
        let map: (Row) -> (handle: JobHandle, attempt: UInt32)? = { row in
            guard let text = row.string(0), let id = ULID(text) else { return nil }
            return (JobHandle(id: id, priority: UInt8(clamping: row.int64(1) ?? 0), source: row.string(2) ?? ""),
                    UInt32(clamping: row.int64(3) ?? 0))
        }
        switch target {
        case .all:
            return try db.query("SELECT id, priority, source, attempt FROM jobs WHERE state = 'dead' ORDER BY id", map: map).compactMap { $0 }
        case .job(let id):
            return try db.query("SELECT id, priority, source, attempt FROM jobs WHERE state = 'dead' AND id = ?", id.description, map: map).compactMap { $0 }
        }
    }

    /// Moves a dead job back to the queue; its attempt counter is kept and
    /// its retry budget starts again from there.
    func revive(_ id: ULID) throws {
        try beginIfNeeded()
        try db.execute("""
            UPDATE jobs SET state = 'queued', attempt_base = attempt, not_before = 0, finished = NULL
            WHERE id = ? AND state = 'dead'
            """, id.description)
    }

    /// Deletes a dead job. Returns its input file to remove after the commit, if any.
    func discard(_ id: ULID) throws -> String? {
        try beginIfNeeded()
        let file = try inputFile(of: id)
        try db.execute("DELETE FROM job_input WHERE job IN (SELECT rowid FROM jobs WHERE id = ? AND state = 'dead')", id.description)
        try db.execute("DELETE FROM jobs WHERE id = ? AND state = 'dead'", id.description)
        return file
    }

    private func inputFile(of id: ULID) throws -> String? {
        try db.query("SELECT input_file FROM jobs WHERE id = ?", id.description) { $0.string(0) }.first ?? nil
    }

    /// Removes an input file no job still needs. Call after the commit that released it.
    func removeInputIfUnused(_ file: String) {
        let users = (try? db.query("SELECT COUNT(*) FROM jobs WHERE input_file = ?", file) { $0.int64(0) ?? 1 }.first) ?? 1
        if users == 0 { inputs.remove(file) }
    }

    // MARK: Reads

    /// Every queued job (for the in-memory ready queue) and every leased one (to requeue after a restart).
    func unfinished() throws -> (queued: [(JobHandle, UInt64)], leased: [Lease]) {
        var queued: [(JobHandle, UInt64)] = []
        var leased: [Lease] = []
        try db.query("""
            SELECT id, priority, source, state, not_before, attempt, attempt_base, worker, input_file, rowid
            FROM jobs WHERE finished IS NULL AND state IN ('queued', 'leased') ORDER BY priority DESC, id
            """) { row in
            guard let text = row.string(0), let id = ULID(text) else { return }
            let handle = JobHandle(id: id, priority: UInt8(clamping: row.int64(1) ?? 0), source: row.string(2) ?? "")
            if row.string(3) == JobState.leased.rawValue {
                leased.append(Lease(job: handle, attempt: UInt32(clamping: row.int64(5) ?? 0), attemptBase: UInt32(clamping: row.int64(6) ?? 0),
                                    worker: row.string(7) ?? "", inputFile: row.string(8), rowID: row.int64(9) ?? 0))
            } else {
                queued.append((handle, UInt64(clamping: row.int64(4) ?? 0)))
            }
        }
        return (queued, leased)
    }

    /// Jobs in the dead-letter set. (The state is written into the SQL, not
    /// bound, so that SQLite can count them from the `jobs_dead` index.)
    func deadCount() throws -> Int {
        try db.query("SELECT COUNT(*) FROM jobs WHERE state = 'dead'") { Int($0.int64(0) ?? 0) }.first ?? 0
    }

    /// Input files named by any job.
    func referencedInputFiles() throws -> Set<String> {
        Set(try db.query("SELECT DISTINCT input_file FROM jobs WHERE input_file IS NOT NULL") { $0.string(0) }.compactMap { $0 })
    }

    func deadList(limit: Int, after: ULID?) throws -> DeadList {
        let total = try deadCount()
        let jobs = try db.query("""
            SELECT id, source, pipeline, priority, attempt, created, finished, error_step_index, error_step, error_code, error_reason
            FROM jobs WHERE state = 'dead' AND id > ? ORDER BY id LIMIT ?
            """, after?.description ?? "", Int64(limit)) { row -> DeadJob? in
            guard let text = row.string(0), let id = ULID(text) else { return nil }
            return DeadJob(jobID: id, source: row.string(1) ?? "", pipeline: row.string(2) ?? "",
                           priority: UInt8(clamping: row.int64(3) ?? 0), attempts: UInt32(clamping: row.int64(4) ?? 0),
                           submitted: UInt64(clamping: row.int64(5) ?? 0), died: UInt64(clamping: row.int64(6) ?? 0),
                           stepIndex: Self.wireStepIndex(row.int64(7)), step: row.string(8) ?? "",
                           errorCode: row.string(9) ?? "", reason: row.string(10) ?? "")
        }.compactMap { $0 }
        return DeadList(total: UInt64(total), jobs: jobs)
    }

    /// Committed events from `from` on, at most `limit`.
    func events(from: UInt64, limit: Int) throws -> [Event] {
        let start = Int64(clamping: max(from, 1))
        return try db.query("""
            SELECT seq, time, kind, job_id, attempt, source, worker, record_id, step_index, step, error_code, reason
            FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?
            """, start, Int64(clamping: committedSeq), Int64(limit)) { row -> Event? in
            guard let kind = EventKind(rawValue: UInt8(clamping: row.int64(2) ?? 0)),
                  let jobText = row.string(3), let jobID = ULID(jobText) else { return nil }
            let code = row.string(10) ?? ""
            let failure = FailureDetail(stepIndex: Self.wireStepIndex(row.int64(8)), step: row.string(9) ?? "",
                                        code: code, reason: row.string(11) ?? "")
            let hasFailure = !code.isEmpty || !failure.reason.isEmpty || failure.stepIndex > 0 || !failure.step.isEmpty
            return Event(seq: UInt64(clamping: row.int64(0) ?? 0), time: UInt64(clamping: row.int64(1) ?? 0), kind: kind,
                         jobID: jobID, attempt: UInt32(clamping: row.int64(4) ?? 0), sourceName: row.string(5) ?? "",
                         workerID: row.string(6) ?? "", recordID: row.string(7).flatMap { ULID($0) },
                         failure: hasFailure ? failure : nil)
        }.compactMap { $0 }
    }
}
