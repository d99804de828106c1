import DarkroomCore
import DarkroomProtocol
import DarkroomSQLite
import DarkroomZMQ

/// Why writing a transition failed, and what the caller must do about it.
enum JobStoreError: Error, CustomStringConvertible {
    /// The transition's writes were undone (its savepoint rolled back); the
    /// turn's earlier work stands and the turn goes on.
    case rejected(String)
    /// A job could not be leased because its input cannot be read; the
    /// transition was undone like `rejected`.
    case unreadableInput(ULID, String)
    /// The turn's transaction is gone (SQLite rolled it back by itself, a
    /// rollback failed, or COMMIT failed): nothing of the turn was written.
    case turnLost(String)

    var description: String {
        switch self {
        case .rejected(let reason): reason
        case .unreadableInput(let id, let reason): "input of job \(id) cannot be read: \(reason)"
        case .turnLost(let reason): reason
        }
    }

}

/// The broker's durable queue: one SQLite database (WAL, synchronous=FULL)
/// and the external input files, owned by the broker's core thread.
///
/// Work is grouped in turns. The first write of a turn opens a transaction
/// (`BEGIN IMMEDIATE`); a transition either writes all of its rows and
/// events or none (`persist`); `commit` ends the turn. A turn's transitions
/// are written as they come, with no savepoint each: a savepoint copies
/// every page a transition changes first into its journal, and that was a
/// quarter of the queue thread's work. Should a transition fail with the
/// transaction still open, the turn is undone and written again, its
/// earlier transitions each in a savepoint of its own, then the failed one
/// in its own, as is the rest of that turn: the failed transition alone is
/// undone, as if every transition had had its savepoint. If SQLite rolls the whole transaction back
/// by itself (it may on SQLITE_FULL, IOERR, BUSY or NOMEM, in any statement
/// of the turn, a read included), or the commit fails, the turn is lost:
/// `persist` or `commit` throws `turnLost`, nothing of the turn is written
/// (not even what would follow outside the transaction), the store is back
/// at the last commit, and the caller rebuilds its state from `load()`.
///
/// Tables (`schemaVersion`; each `migrate…` step says what its version added):
/// - `jobs`: one row per queued, leased or dead job (a stored job's row is
///   deleted; its events keep its history). `attempt` is the number of the
///   latest dispatch; `attempt_base` is `attempt` when the job's budget last
///   started again. Its rowid is assigned by the broker's state. The
///   SUBMIT's terms are columns too: `not_before`, `max_attempts`,
///   `expires` and `time_limit` (each JOB carries the last).
/// - `job_input`: each unfinished job's inline input, keyed by the job's rowid.
/// - `events`: the lifecycle events, `seq` gapless from 1 (older ones are
///   pruned past the retention; the newest always stays).
/// - `submit_keys`: each accepted SUBMIT's key with its job and `accepted` seq.
///
/// A leased job's `cancel_requested` (Unix ms) says CANCEL asked its
/// worker to stop it: the broker asks again after a restart. `settings`
/// holds `paused_since` while PAUSE holds dispatch.
final class JobStore {
    let db: Connection
    let inputs: InputFiles
    /// The claim on the directory, held until `close`.
    private let lock: DirectoryLock
    /// The newest event seq committed.
    private(set) var committedSeq: UInt64 = 0

    /// The schema this broker writes; a newer database is refused.
    static let schemaVersion: Int64 = 9

    /// WAL with `synchronous=FULL` (an accepted job survives power loss).
    /// With `secure_delete` on (Debian's default) each deleted input is
    /// zeroed and logged a second time; `fast` zeroes only what is written
    /// anyway. A log of 8,000 pages (32 MB) between checkpoints lets a page
    /// that later jobs reuse be copied back once rather than once per job.
    /// A turn whose transition failed writes the rest in savepoints
    /// (`isolateTurn`), and a savepoint journal on disk cost the busiest
    /// thread a system call per page it first changed (some 20 KB a job,
    /// when every transition had one): it is kept in memory, where it
    /// holds the pages one transition changes. A cache of 16 MiB rather
    /// than SQLite's 2 MB holds the pages of the jobs in flight (an input
    /// takes a page of its own): with 1,000 tiny jobs in flight the
    /// smaller one read a page a job back from the log, 5.4 KB a job
    /// against 1.2 KB now (`/proc` counters over 20,000 jobs).
    static func connectionOptions(maxPages: Int?) -> Connection.Options {
        var options = Connection.Options()
        options.secureDelete = .fast
        options.walAutocheckpointPages = 8_000
        options.tempStore = .memory
        options.cacheKiB = 16_384
        return options
    }

    // Statements every job runs, prepared once (the connection's cache
    // finalizes them on close).
    private let insertJob: Statement
    private let insertInput: Statement
    private let insertSubmitKey: Statement
    private let insertEvent: Statement
    private let selectPayload: Statement
    private let updateLeased: Statement
    private let deleteInput: Statement
    private let deleteJob: Statement
    private let updateRequeued: Statement
    private let updateDead: Statement
    private let updateRevived: Statement
    private let updateCancelRequested: Statement
    private let selectSubmitKey: Statement

    // The open turn.
    private var turnOpen = false
    /// Whether the open turn writes each transition in a savepoint of its
    /// own (once one of its transitions failed).
    private var turnIsolated = false
    /// The transitions written so far in the open turn, without savepoints:
    /// written again, each in its savepoint, if a later one fails.
    private var turnWritten: [Transition] = []
    private var turnSeq: UInt64 = 0
    private var turnNewFiles: [String] = []
    private var turnReleasedFiles: [String] = []

    /// The inputs of accepted jobs not yet leased, by job id, so that the
    /// first lease need not read back the row the accept just wrote. Most
    /// jobs are leased soon after they are accepted; the bytes held are
    /// bounded by `warmLimit`, and a job not held here is read from the
    /// database or its file. Emptied when a turn is lost.
    private var warm: [ULID: JobPayload] = [:]
    private var warmBytes = 0
    let warmLimit: Int
    /// The largest input file the store reads back.
    let maxInputBytes: Int
    /// Input files mapped at most for JOBs sent or waiting to be (16,384
    /// by default: a quarter of the kernel's default map table,
    /// `vm.max_map_count`, 65,530, which `malloc` needs too). Many workers
    /// each holding thousands of jobs could pass it; inputs past it are
    /// read into memory instead.
    let maxMappedInputs: Int
    /// The broker's input files mapped and not yet unmapped (by libzmq,
    /// once a JOB has left), bounded by `maxMappedInputs`. The broker's
    /// own: a storage node in the same process counts its mappings apart.
    let mappedInputs: FrameTally

    /// The cap on the database's size in pages (SQLite's own, which may be
    /// above the one asked for when the database was already larger), and
    /// the page size; nil without a cap.
    private let pageLimit: (pages: Int, size: Int)?
    /// Pages an accept must leave free under the cap (see `roomRefusal`).
    var reservedPages: Int { pageLimit.map { max(16, $0.pages / 100) } ?? 0 }

    /// Opens (creating if needed) the queue in `directory`, brings its
    /// schema up to date, and refuses a database written by a newer broker.
    /// `maxPages` caps the database's size in pages (`PRAGMA max_page_count`);
    /// under the cap, accepts that would not leave room to dispatch and store
    /// the jobs already queued are refused (`rejected`).
    init(directory: String, maxInputBytes: Int, maxPages: Int? = nil, warmLimit: Int = 64 << 20, maxMappedInputs: Int = 16_384,
         mappedInputs: FrameTally = FrameTally()) throws {
        self.maxMappedInputs = maxMappedInputs
        self.mappedInputs = mappedInputs
        self.warmLimit = warmLimit
        self.maxInputBytes = maxInputBytes
        do {
            try Posix.makeDirectories(directory)
        } catch {
            throw BrokerError.storage("\(error)")
        }
        // Before anything in the directory is read or swept.
        do {
            lock = try DirectoryLock(directory: directory, holder: "broker")
        } catch {
            throw BrokerError.storage(error.message)
        }
        db = try Connection(path: directory + "/queue.sqlite", options: JobStore.connectionOptions(maxPages: maxPages))
        inputs = try InputFiles(directory: directory + "/inputs")
        try JobStore.createTables(db)
        try db.migrate(to: JobStore.schemaVersion, steps: [(1, JobStore.migrateStepIndexes), (2, JobStore.migrateInputs), (3, JobStore.migrateJobStories),
                                                         (4, JobStore.migrateCancelRequests), (5, JobStore.migrateOutputFlags),
                                                         (6, JobStore.migrateMaxAttempts), (7, JobStore.migrateSettings),
                                                         (8, JobStore.migrateDeadlines), (9, JobStore.migrateTimeLimits)])
        if let maxPages {
            let pages = Int(try db.pragma("max_page_count = \(max(1, maxPages))") ?? "") ?? maxPages
            pageLimit = (pages, Int(try db.pragma("page_size") ?? "") ?? 4_096)
        } else {
            pageLimit = nil
        }
        committedSeq = try db.query("SELECT COALESCE(MAX(seq), 0) AS head FROM events") { try $0.integer("head", as: UInt64.self) }.first ?? 0

        insertJob = try db.prepare("""
            INSERT INTO jobs (rowid, id, priority, state, pipeline, thumb_width, thumb_height, quality, thumb_quality,
                              output_flags, source, input, input_file, input_bytes, created, not_before, max_attempts, expires,
                              time_limit)
            VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)
            """)
        insertInput = try db.prepare("INSERT INTO job_input (job, input) VALUES (?, ?)")
        insertSubmitKey = try db.prepare("INSERT INTO submit_keys (key, job_id, event_seq, created) VALUES (?, ?, ?, ?)")
        insertEvent = try db.prepare("""
            INSERT INTO events (seq, time, kind, job_id, attempt, source, worker, record_id, step_index, step, error_code, reason,
                                pipeline, priority)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        selectPayload = try db.prepare("""
            SELECT j.id AS id, j.state AS state, j.thumb_width AS thumb_width, j.thumb_height AS thumb_height,
                   j.quality AS quality, j.thumb_quality AS thumb_quality, j.output_flags AS output_flags, j.pipeline AS pipeline,
                   COALESCE(i.input, j.input) AS input, j.input_file AS input_file, j.time_limit AS time_limit
            FROM jobs j LEFT JOIN job_input i ON i.job = j.rowid WHERE j.rowid = ?
            """)
        updateLeased = try db.prepare("UPDATE jobs SET state = 'leased', attempt = ?, worker = ?, not_before = 0 WHERE rowid = ? AND state = 'queued'")
        deleteInput = try db.prepare("DELETE FROM job_input WHERE job = ?")
        deleteJob = try db.prepare("DELETE FROM jobs WHERE rowid = ?")
        updateRequeued = try db.prepare("""
            UPDATE jobs SET state = 'queued', not_before = ?, worker = NULL, attempt_base = ?, cancel_requested = NULL,
                error_step_index = ?, error_step = ?, error_code = ?, error_reason = ?
            WHERE rowid = ? AND state IN ('queued', 'leased')
            """)
        updateDead = try db.prepare("""
            UPDATE jobs SET state = 'dead', finished = ?, worker = NULL, cancel_requested = NULL,
                error_step_index = ?, error_step = ?, error_code = ?, error_reason = ?
            WHERE rowid = ? AND state IN ('queued', 'leased')
            """)
        updateRevived = try db.prepare("""
            UPDATE jobs SET state = 'queued', attempt_base = ?, not_before = 0, finished = NULL, expires = 0
            WHERE rowid = ? AND state = 'dead'
            """)
        updateCancelRequested = try db.prepare("UPDATE jobs SET cancel_requested = ? WHERE rowid = ? AND state = 'leased'")
        selectSubmitKey = try db.prepare("SELECT job_id, event_seq FROM submit_keys WHERE key = ?")
    }

    func close() {
        try? db.close()
        lock.release()
    }

    // MARK: Schema

    private static func createTables(_ db: Connection) throws {
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
            );
            CREATE INDEX IF NOT EXISTS jobs_input_file ON jobs (input_file) WHERE input_file IS NOT NULL;
            CREATE TABLE IF NOT EXISTS job_input (job INTEGER PRIMARY KEY, input BLOB NOT NULL);
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
            );
            CREATE TABLE IF NOT EXISTS submit_keys (
                key TEXT NOT NULL UNIQUE,
                job_id TEXT NOT NULL,
                event_seq INTEGER NOT NULL,
                created INTEGER NOT NULL
            );
            """)
    }

    /// Version 1 numbers failing steps from 1 with 0 for "not in a step",
    /// as DRK1 does; version 0 counted from 0 with -1 for "not in a step".
    private static func migrateStepIndexes(_ db: Connection) throws {
        for (table, index, step) in [("jobs", "error_step_index", "error_step"), ("events", "step_index", "step")] {
            try db.execute("UPDATE \(table) SET \(index) = \(index) + 1 WHERE \(index) >= 0 AND \(step) <> ''")
            try db.execute("UPDATE \(table) SET \(index) = 0 WHERE \(index) < 0")
        }
    }

    /// Version 2: inline inputs keyed by the job's rowid (`job_input`
    /// replaces `job_inputs`), partial indexes instead of one over
    /// (state, priority, id), and no rows for stored jobs.
    private static func migrateInputs(_ db: Connection) throws {
        let old = try db.query("SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'job_inputs'") { try $0.int64("n") }
        if old.first == 1 {
            try db.execute("INSERT INTO job_input (job, input) SELECT j.rowid, i.input FROM job_inputs i JOIN jobs j ON j.id = i.id")
            try db.execute("DROP TABLE job_inputs")
        }
        try db.execute("DROP INDEX IF EXISTS jobs_dispatch")
        try db.execute("DELETE FROM jobs WHERE state = 'done'")
        try db.execute("CREATE INDEX IF NOT EXISTS jobs_open ON jobs (priority DESC, id) WHERE finished IS NULL")
        try db.execute("CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (id) WHERE state = 'dead'")
    }

    /// Version 3: a job's story (JOB-INFO) is read from the log by job id,
    /// and its `accepted` event keeps the pipeline and priority, which
    /// outlive the job's row (a stored job has none).
    private static func migrateJobStories(_ db: Connection) throws {
        try addColumn(db, "events", "pipeline TEXT")
        try addColumn(db, "events", "priority INTEGER")
        try db.execute("CREATE INDEX IF NOT EXISTS events_job ON events (job_id, seq)")
    }

    /// Version 4: a cancel asked of a running job outlives a restart.
    private static func migrateCancelRequests(_ db: Connection) throws {
        try addColumn(db, "jobs", "cancel_requested INTEGER")
    }

    /// Version 5: a job's output options beyond the columns above: DRK1's
    /// options byte 6 (subsampling, progressive) in bits 0–7 and byte 7
    /// (thumbnail gravity) in bits 8–15; 0 for jobs queued before it.
    private static func migrateOutputFlags(_ db: Connection) throws {
        try addColumn(db, "jobs", "output_flags INTEGER NOT NULL DEFAULT 0")
    }

    /// Version 6: a job's own most counted attempts (SUBMIT frame 10);
    /// NULL for the broker's setting, as every job queued before it has.
    private static func migrateMaxAttempts(_ db: Connection) throws {
        try addColumn(db, "jobs", "max_attempts INTEGER")
    }

    /// Version 7: the broker's own durable settings, one row each:
    /// `paused_since` (Unix ms) while PAUSE holds dispatch.
    private static func migrateSettings(_ db: Connection) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    }

    /// Version 8: a job's deadline (SUBMIT frame 11, Unix ms); 0 for none,
    /// as every job queued before it has.
    private static func migrateDeadlines(_ db: Connection) throws {
        try addColumn(db, "jobs", "expires INTEGER NOT NULL DEFAULT 0")
    }

    /// Version 9: a job's time limit on a worker (SUBMIT frame 12,
    /// seconds); 0 for none, as every job queued before it has.
    private static func migrateTimeLimits(_ db: Connection) throws {
        try addColumn(db, "jobs", "time_limit INTEGER NOT NULL DEFAULT 0")
    }

    /// Adds a column (`definition` is its name and type) unless the table
    /// has it: a database brought back to an earlier layout by hand may.
    private static func addColumn(_ db: Connection, _ table: String, _ definition: String) throws {
        let name = String(definition.prefix { $0 != " " })
        let columns = Set(try db.query("PRAGMA table_info(\(table))") { try $0.string("name") })
        if !columns.contains(name) { try db.execute("ALTER TABLE \(table) ADD COLUMN \(definition)") }
    }

    /// `output_flags` of a job's options (see `migrateOutputFlags`).
    static func storedFlags(_ options: JobOptions) -> Int64 {
        Int64(options.flags) | Int64(options.thumbnailGravity.rawValue) << 8
    }

    /// `options` with the flags and gravity `storedFlags` wrote; nil when
    /// the stored value holds one DRK1 does not define.
    static func options(_ options: JobOptions, storedFlags stored: UInt16) -> JobOptions? {
        guard var read = options.with(flags: UInt8(stored & 0xFF)),
              let gravity = JobOptions.ThumbnailGravity(rawValue: UInt8(stored >> 8)) else { return nil }
        read.thumbnailGravity = gravity
        return read
    }

    /// A stored step index as DRK1 carries it: 0 when absent, never negative.
    static func wireStepIndex(_ stored: Int64?) -> Int32 {
        Int32(clamping: max(stored ?? 0, 0))
    }

    // MARK: Loading

    /// Everything the broker's state is built from.
    func load() throws -> BrokerState.Loaded {
        var loaded = BrokerState.Loaded()
        try db.query("""
            SELECT rowid, id, priority, source, state, not_before, attempt, attempt_base, worker, input_file, cancel_requested, max_attempts,
                   expires
            FROM jobs WHERE finished IS NULL AND state IN ('queued', 'leased') ORDER BY priority DESC, id
            """) { row in
            let job = try JobStore.handle(row)
            if try row.string("state") == JobState.leased.rawValue {
                loaded.leased.append(Lease(job: job, worker: try row.string("worker")))
                if try row.optionalInt64("cancel_requested") != nil { loaded.cancelling.insert(job.id) }
            } else {
                loaded.queued.append((job, try row.integer("not_before", as: UInt64.self)))
            }
        }
        loaded.deadCount = try deadCount()
        loaded.pausedSince = try db.query("SELECT value FROM settings WHERE name = 'paused_since'") {
            try $0.integer("value", as: UInt64.self)
        }.first
        loaded.eventSeq = committedSeq
        loaded.lastRowID = try db.query("SELECT COALESCE(MAX(rowid), 0) AS last FROM jobs") { try $0.int64("last") }.first ?? 0
        return loaded
    }

    /// A job handle from a row with rowid, id, priority, source, attempt, attempt_base and input_file.
    private static func handle(_ row: Row) throws -> JobHandle {
        let text = try row.string("id")
        guard let id = ULID(text) else { throw BrokerError.storage("jobs row holds a malformed job id '\(text)'") }
        return JobHandle(id: id, priority: try row.integer("priority", as: UInt8.self), source: try row.string("source"),
                         rowID: try row.int64("rowid"), attempt: try row.integer("attempt", as: UInt32.self),
                         attemptBase: try row.integer("attempt_base", as: UInt32.self), inputFile: try row.optionalString("input_file"),
                         maxAttempts: try row.optionalInteger("max_attempts", as: UInt16.self),
                         expires: try row.integer("expires", as: UInt64.self))
    }

    // MARK: Turns

    /// Whether the open turn has written anything.
    var turnHasWrites: Bool { turnOpen }

    /// Writes a transition in the turn's transaction (opened by the turn's
    /// first write), all of its writes or none. Returns the payload of the
    /// job it leases, if any.
    func persist(_ t: Transition) throws(JobStoreError) -> JobPayload? {
        if turnOpen && !db.isInTransaction {
            // SQLite ended the turn's transaction by itself after an error
            // in an earlier statement, a read included. Outside it, this
            // transition's statements would commit on their own while the
            // rest of the turn is gone.
            removeNewFiles(of: t)
            abandonTurn()
            throw .turnLost("SQLite rolled back the turn's transaction after an earlier error")
        }
        do {
            if !turnOpen {
                try db.execute("BEGIN IMMEDIATE")
                turnOpen = true
                turnIsolated = false
                turnSeq = committedSeq
            }
        } catch {
            removeNewFiles(of: t)
            abandonTurn()
            throw .turnLost(Wire.line("cannot begin a transaction: \(error)"))
        }
        if let refusal = roomRefusal(t) {
            removeNewFiles(of: t)
            throw .rejected(refusal)
        }
        if turnIsolated { return try persistInSavepoint(t) }
        var warmed: [ULID] = []
        var files: (new: [String], released: [String]) = ([], [])
        let payload: JobPayload?
        do {
            payload = try write(t, warmed: &warmed, files: &files)
        } catch {
            for id in warmed { dropWarm(id) }
            guard db.isInTransaction else {
                // SQLite ended the transaction: the turn is lost, as it
                // would be with a savepoint.
                for file in files.new { inputs.remove(file) }
                abandonTurn()
                throw .turnLost(Wire.line("\(error)"))
            }
            // Its input files stay: written again below, in a savepoint,
            // the transition removes them if it fails again.
            do throws(JobStoreError) {
                try isolateTurn()
            } catch {
                for file in files.new { inputs.remove(file) }
                throw error
            }
            return try persistInSavepoint(t)
        }
        turnWritten.append(t)
        noteWritten(t, files: files)
        return payload
    }

    /// Writes a transition in its own savepoint: a failure undoes it alone,
    /// and the turn goes on.
    private func persistInSavepoint(_ t: Transition) throws(JobStoreError) -> JobPayload? {
        var payload: JobPayload?
        var warmed: [ULID] = []
        var files: (new: [String], released: [String]) = ([], [])
        do {
            payload = try db.withSavepoint("transition") { try self.write(t, warmed: &warmed, files: &files) }
        } catch {
            for id in warmed { dropWarm(id) }
            for file in files.new { inputs.remove(file) }
            if let failure = error as? TransactionError {
                abandonTurn()
                throw .turnLost(Wire.line("\(failure)"))
            }
            if !db.isInTransaction {
                abandonTurn()
                throw .turnLost(Wire.line("\(error)"))
            }
            if case let .unreadable(id, reason) = error as? LeaseFailure {
                throw .unreadableInput(id, Wire.line(reason))
            }
            throw .rejected(Wire.line("\(error)"))
        }
        noteWritten(t, files: files)
        return payload
    }

    /// A transition's rows and events.
    private func write(_ t: Transition, warmed: inout [ULID], files: inout (new: [String], released: [String])) throws -> JobPayload? {
        var payload: JobPayload?
        for write in t.writes {
            if let leased = try apply(write, warmed: &warmed, files: &files) { payload = leased }
        }
        var accepted: [UInt64: NewJob] = [:]
        for case let .insert(job, seq, _) in t.writes { accepted[seq] = job }
        for event in t.events { try append(event, job: event.kind == .accepted ? accepted[event.seq] : nil) }
        return payload
    }

    private func noteWritten(_ t: Transition, files: (new: [String], released: [String])) {
        if let last = t.events.last { turnSeq = last.seq }
        turnNewFiles += files.new
        turnReleasedFiles += files.released
    }

    /// A transition of a turn written without savepoints failed, and the
    /// transaction is still open: undoes the turn and writes its earlier
    /// transitions again, each in a savepoint of its own, as the rest of
    /// the turn will be. The database is then as if every transition had
    /// had its savepoint. Should that fail, the turn is lost.
    private func isolateTurn() throws(JobStoreError) {
        let earlier = turnWritten
        // The turn's files so far, noted again as each transition is
        // written again; all of them go should that fail midway.
        let newFiles = turnNewFiles
        turnWritten.removeAll()
        turnNewFiles.removeAll()
        turnReleasedFiles.removeAll()
        turnIsolated = true
        turnSeq = committedSeq
        do throws(JobStoreError) {
            do {
                try db.execute("ROLLBACK")
                try db.execute("BEGIN IMMEDIATE")
            } catch {
                throw .turnLost(Wire.line("\(error)"))
            }
            for t in earlier { _ = try persistInSavepoint(t) }
        } catch {
            for file in newFiles { inputs.remove(file) }
            abandonTurn()
            throw .turnLost(Wire.line("cannot write the turn again after a transition failed: \(error)"))
        }
    }

    /// Commits the turn: first makes the names of the turn's new input
    /// files durable (one fsync of the directory for all of them), then
    /// COMMIT. Input files of jobs the turn finished are removed afterwards.
    func commit() throws(JobStoreError) {
        guard turnOpen else { return }
        guard db.isInTransaction else {
            abandonTurn()
            throw .turnLost("SQLite rolled back the turn's transaction after an earlier error")
        }
        do {
            if !turnNewFiles.isEmpty { try inputs.syncDirectory() }
            try db.execute("COMMIT")
        } catch {
            abandonTurn()
            throw .turnLost(Wire.line("the turn could not be committed: \(error)"))
        }
        turnOpen = false
        turnWritten.removeAll(keepingCapacity: true)
        committedSeq = turnSeq
        let released = turnReleasedFiles
        turnNewFiles.removeAll(keepingCapacity: true)
        turnReleasedFiles.removeAll(keepingCapacity: true)
        for file in released { removeInputIfUnused(file) }
    }

    /// Rolls the open turn back (if SQLite has not already) and forgets
    /// what it wrote: its new input files are removed, the warm inputs
    /// dropped.
    func abandonTurn() {
        if db.isInTransaction {
            do { try db.execute("ROLLBACK") } catch { /* the connection rolls back on close; nothing commits without COMMIT */ }
        }
        for file in turnNewFiles { inputs.remove(file) }
        turnNewFiles.removeAll()
        turnReleasedFiles.removeAll()
        turnWritten.removeAll()
        turnOpen = false
        turnSeq = committedSeq
        warm.removeAll()
        warmBytes = 0
    }

    /// Under a cap on the database's size, refuses a transition that
    /// accepts jobs unless, by a generous estimate, they fit and still
    /// leave `reservedPages` free. Without this, the insert that finds the
    /// database full makes SQLite roll back the turn's whole transaction
    /// (a one-row insert has no statement journal to undo alone), taking
    /// the turn's leases and DONEs with it; and a database filled to the
    /// last page by accepts leaves no room for the leases and events that
    /// would dispatch its jobs and, once they are stored, free it. Refused
    /// here, the accept alone is undone and the turn goes on. Nil when the
    /// transition may be written.
    private func roomRefusal(_ t: Transition) -> String? {
        guard let limit = pageLimit else { return nil }
        var needed = 0
        var bytes = 0
        let usable = max(512, limit.size - 64)
        for case let .insert(job, _, _) in t.writes {
            // The input's overflow pages, the rows the job adds (job,
            // accepted event, submit key, index entries) at a generous
            // size, and a page split or two in the trees they join.
            let inline = job.inlineInput?.count ?? 0
            let rows = job.pipeline.utf8.count + 2 * job.handle.source.utf8.count + 1_024
            needed += (inline + rows + usable - 1) / usable + 2
            bytes += inline
        }
        guard needed > 0 else { return nil }
        guard let used = try? db.query("PRAGMA page_count", map: { try $0.int("page_count") }).first,
              let unused = try? db.query("PRAGMA freelist_count", map: { try $0.int("freelist_count") }).first else { return nil }
        let free = limit.pages - used + unused
        guard needed + reservedPages > free else { return nil }
        return "the queue database is full: \(free) of its \(limit.pages) pages of \(limit.size) bytes are free, "
            + "\(reservedPages) of them kept for dispatching and storing jobs, and a job with \(bytes) bytes of input needs about \(needed); "
            + "submit again once jobs have been stored"
    }

    /// Removes the input files a transition that was never written names:
    /// they were written for it, and no row will name them.
    private func removeNewFiles(of t: Transition) {
        for case let .insert(job, _, _) in t.writes {
            if let file = job.handle.inputFile { inputs.remove(file) }
        }
    }

    private enum LeaseFailure: Error {
        case unreadable(ULID, String)
    }

    /// Runs one write. Returns the JOB payload for a lease.
    private func apply(_ write: QueueWrite, warmed: inout [ULID], files: inout (new: [String], released: [String])) throws -> JobPayload? {
        switch write {
        case let .insert(job, seq, time):
            let handle = job.handle
            try insertJob.execute(values: [
                .integer(handle.rowID), .text(handle.idText), .integer(Int64(handle.priority)), .text(job.pipeline),
                .integer(Int64(job.options.thumbnailWidth)), .integer(Int64(job.options.thumbnailHeight)),
                .integer(Int64(job.options.quality)), .integer(Int64(job.options.thumbnailQuality)),
                .integer(JobStore.storedFlags(job.options)), .text(handle.source),
                handle.inputFile.map { .text($0) } ?? .null, .integer(Int64(job.inputBytes)), .integer(Int64(clamping: time)),
                .integer(Int64(clamping: job.notBefore)), handle.maxAttempts.map { .integer(Int64($0)) } ?? .null,
                .integer(Int64(clamping: handle.expires)), .integer(Int64(job.timeLimit)),
            ])
            if let inline = job.inlineInput {
                try insertInput.execute(values: [.integer(handle.rowID), .blob(inline)])
            }
            if let file = handle.inputFile { files.new.append(file) }
            if let key = job.submitKey {
                try insertSubmitKey.execute(values: [.text(key), .text(handle.idText), .integer(Int64(clamping: seq)), .integer(Int64(clamping: time))])
            }
            // Already warm when the turn is written again (`isolateTurn`).
            if let inline = job.inlineInput, warm[handle.id] == nil, warmBytes + inline.count <= warmLimit {
                warm[handle.id] = JobPayload(options: job.options, pipeline: job.pipeline, image: inline, timeLimit: job.timeLimit)
                warmBytes += inline.count
                warmed.append(handle.id)
            }
            return nil
        case let .lease(job, worker):
            let payload: JobPayload
            if let kept = takeWarm(job.id) {
                payload = kept
            } else {
                payload = try readPayload(job)
            }
            try updateLeased.execute(values: [.integer(Int64(job.attempt)), .text(worker), .integer(job.rowID)])
            try expectOneRow("lease", job)
            return payload
        case .delete(let job):
            dropWarm(job.id)
            if job.inputFile == nil { try deleteInput.execute(values: [.integer(job.rowID)]) }
            try deleteJob.execute(values: [.integer(job.rowID)])
            try expectOneRow("delete", job)
            if let file = job.inputFile { files.released.append(file) }
            return nil
        case let .requeue(job, notBefore, failure):
            try updateRequeued.execute(values: [
                .integer(Int64(clamping: notBefore)), .integer(Int64(job.attemptBase)),
                failure.map { .integer(Int64($0.stepIndex)) } ?? .null, failure.map { .text($0.step) } ?? .null,
                failure.map { .text($0.code) } ?? .null, failure.map { .text($0.reason) } ?? .null, .integer(job.rowID),
            ])
            try expectOneRow("requeue", job)
            return nil
        case let .bury(job, failure, time):
            dropWarm(job.id)
            try updateDead.execute(values: [
                .integer(Int64(clamping: time)), .integer(Int64(failure.stepIndex)), .text(failure.step), .text(failure.code),
                .text(failure.reason), .integer(job.rowID),
            ])
            try expectOneRow("bury", job)
            return nil
        case .revive(let job):
            try updateRevived.execute(values: [.integer(Int64(job.attemptBase)), .integer(job.rowID)])
            try expectOneRow("revive", job)
            return nil
        case let .requestCancel(job, time):
            try updateCancelRequested.execute(values: [.integer(Int64(clamping: time)), .integer(job.rowID)])
            try expectOneRow("cancel request", job)
            return nil
        case .pause(let since):
            if let since {
                try db.execute("INSERT OR REPLACE INTO settings (name, value) VALUES ('paused_since', ?)", Int64(clamping: since))
            } else {
                try db.execute("DELETE FROM settings WHERE name = 'paused_since'")
            }
            return nil
        }
    }

    /// An update that should have changed exactly one row and did not means
    /// the database and the broker's state disagree: the transition is
    /// refused rather than half applied.
    private func expectOneRow(_ what: String, _ job: JobHandle) throws {
        let changed = db.changes
        guard changed == 1 else {
            throw BrokerError.storage("\(what) of job \(job.id) changed \(changed) rows of the queue database, not 1")
        }
    }

    /// Appends an event; an `accepted` event keeps its job's pipeline and
    /// priority (`job`), for the job's story.
    private func append(_ event: Event, job: NewJob?) throws {
        let f = event.failure ?? FailureDetail(stepIndex: 0, step: "", code: "", reason: "")
        try insertEvent.execute(values: [
            .integer(Int64(clamping: event.seq)), .integer(Int64(clamping: event.time)), .integer(Int64(event.kind.rawValue)),
            .text(event.jobID.description), .integer(Int64(event.attempt)), .text(event.sourceName), .text(event.workerID),
            event.recordID.map { .text($0.description) } ?? .null,
            .integer(Int64(f.stepIndex)), .text(f.step), .text(f.code), .text(f.reason),
            job.map { .text($0.pipeline) } ?? .null, job.map { .integer(Int64($0.handle.priority)) } ?? .null,
        ])
    }

    private func takeWarm(_ id: ULID) -> JobPayload? {
        guard let payload = warm.removeValue(forKey: id) else { return nil }
        warmBytes -= payload.image.count
        return payload
    }

    private func dropWarm(_ id: ULID) {
        _ = takeWarm(id)
    }

    /// What a JOB carries, read from the job's row and its input.
    private func readPayload(_ job: JobHandle) throws -> JobPayload {
        let rows = try selectPayload.query([job.rowID]) { row -> (JobPayload?, String, String) in
            let id = try row.string("id")
            let state = try row.string("state")
            let stored = try row.integer("output_flags", as: UInt16.self)
            guard let options = JobStore.options(JobOptions(thumbnailWidth: try row.integer("thumb_width", as: UInt16.self),
                                                            thumbnailHeight: try row.integer("thumb_height", as: UInt16.self),
                                                            quality: try row.integer("quality", as: UInt8.self),
                                                            thumbnailQuality: try row.integer("thumb_quality", as: UInt8.self)),
                                                 storedFlags: stored) else {
                throw LeaseFailure.unreadable(job.id, "its stored output flags \(stored) are not defined")
            }
            let pipeline = try row.string("pipeline")
            var image: [UInt8] = []
            var mapped: MappedFile?
            if let file = try row.optionalString("input_file") {
                do {
                    // Mapped while the broker has map entries to spare;
                    // else, or when mapping fails, read as before.
                    if mappedInputs.current < maxMappedInputs, let mappedFile = try? inputs.map(file, limit: maxInputBytes, tally: mappedInputs) {
                        mapped = mappedFile
                    } else {
                        image = try inputs.read(file, limit: maxInputBytes)
                    }
                } catch {
                    throw LeaseFailure.unreadable(job.id, "\(error)")
                }
            } else {
                guard let inline = try row.optionalBlob("input") else {
                    throw LeaseFailure.unreadable(job.id, "its row has neither an inline input nor an input file")
                }
                image = inline
            }
            let timeLimit = try row.integer("time_limit", as: UInt32.self)
            return (JobPayload(options: options, pipeline: pipeline, image: image, file: mapped, timeLimit: timeLimit), id, state)
        }
        guard let (payload, id, state) = rows.first, let payload else {
            throw BrokerError.storage("job \(job.id) has no row (rowid \(job.rowID)) in the queue database")
        }
        guard id == job.idText, state == JobState.queued.rawValue else {
            throw BrokerError.storage("rowid \(job.rowID) holds job \(id) (\(state)), not queued job \(job.id)")
        }
        return payload
    }

    // MARK: Outside turns

    /// Deletes events and submit keys from before `cutoff` (Unix ms), at
    /// most `limit` of each, oldest first, in a transaction of its own. The
    /// newest event is never deleted, so the next seq is still known after a
    /// restart. Returns how many of each went.
    func prune(before cutoff: UInt64, limit: Int) throws -> (events: Int, keys: Int) {
        precondition(!turnOpen, "pruning runs between turns")
        let limit = Int64(max(1, limit))
        return try db.transaction {
            // Seqs follow time; stop at the first event inside the
            // retention even if a clock step put an older time after it.
            let window = try db.query("SELECT seq, time FROM events WHERE seq < ? ORDER BY seq LIMIT ?",
                                      Int64(clamping: committedSeq), limit) { row in
                (seq: try row.int64("seq"), time: try row.int64("time"))
            }
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
            let oldest = try db.query("SELECT rowid, created FROM submit_keys ORDER BY rowid LIMIT ?", limit) { row in
                (rowid: try row.int64("rowid"), created: try row.int64("created"))
            }
            var keys = 0
            if let lastOld = oldest.prefix(while: { UInt64(clamping: $0.created) < cutoff }).last {
                try db.execute("DELETE FROM submit_keys WHERE rowid <= ?", lastOld.rowid)
                keys = db.changes
            }
            return (events, keys)
        }
    }

    /// Removes an input file no job names any more (after the commit that released it).
    private func removeInputIfUnused(_ file: String) {
        let users = (try? db.query("SELECT COUNT(*) AS n FROM jobs WHERE input_file = ?", file) { try $0.int64("n") }.first) ?? 1
        if users == 0 { inputs.remove(file) }
    }

    /// Removes input files that no committed job names (left by a crash
    /// between writing a file and the commit naming it). Returns how many went.
    func sweepInputs() throws -> Int {
        let referenced = Set(try db.query("SELECT DISTINCT input_file AS f FROM jobs WHERE input_file IS NOT NULL") { try $0.string("f") })
        return inputs.sweep(keeping: referenced)
    }

    // MARK: Reads (see the committed state, and what the open turn wrote)

    /// The job a submit key was accepted as, with its `accepted` event's
    /// seq, or nil when the key is new (or was pruned).
    func acceptedJob(forKey key: String) throws -> (job: ULID, eventSeq: UInt64)? {
        try selectSubmitKey.query([key]) { row -> (ULID, UInt64) in
            let text = try row.string("job_id")
            guard let id = ULID(text) else { throw BrokerError.storage("submit key \(key) names a malformed job id '\(text)'") }
            return (id, try row.integer("event_seq", as: UInt64.self))
        }.first
    }

    /// Jobs in the dead-letter set. (The state is written into the SQL so
    /// that SQLite counts them from the `jobs_dead` index.)
    func deadCount() throws -> Int {
        try db.query("SELECT COUNT(*) AS n FROM jobs WHERE state = 'dead'") { try $0.int("n") }.first ?? 0
    }

    /// A dead job's handle, or nil when the job is not dead.
    func deadJob(_ id: ULID) throws -> JobHandle? {
        try deadJobs(.job(id)).first
    }

    /// Dead jobs matching the target: one id, or every dead job.
    func deadJobs(_ target: DeadTarget) throws -> [JobHandle] {
        let columns = "rowid, id, priority, source, attempt, attempt_base, input_file, max_attempts, expires"
        switch target {
        case .all:
            return try db.query("SELECT \(columns) FROM jobs WHERE state = 'dead' ORDER BY id") { try JobStore.handle($0) }
        case .job(let id):
            return try db.query("SELECT \(columns) FROM jobs WHERE state = 'dead' AND id = ?", id.description) { try JobStore.handle($0) }
        }
    }

    func deadList(limit: Int, after: ULID?) throws -> DeadList {
        let total = try deadCount()
        let jobs = try db.query("""
            SELECT id, source, pipeline, priority, attempt, created, finished, error_step_index, error_step, error_code, error_reason
            FROM jobs WHERE state = 'dead' AND id > ? ORDER BY id LIMIT ?
            """, after?.description ?? "", Int64(limit)) { row -> DeadJob in
            let text = try row.string("id")
            guard let id = ULID(text) else { throw BrokerError.storage("jobs row holds a malformed job id '\(text)'") }
            return DeadJob(jobID: id, source: try row.string("source"), pipeline: try row.string("pipeline"),
                           priority: try row.integer("priority", as: UInt8.self), attempts: try row.integer("attempt", as: UInt32.self),
                           submitted: try row.integer("created", as: UInt64.self), died: try row.optionalInteger("finished", as: UInt64.self) ?? 0,
                           stepIndex: Self.wireStepIndex(try row.optionalInt64("error_step_index")),
                           step: try row.optionalString("error_step") ?? "", errorCode: try row.optionalString("error_code") ?? "",
                           reason: try row.optionalString("error_reason") ?? "")
        }
        return DeadList(total: UInt64(total), jobs: jobs)
    }

    /// The oldest event kept, or nil when there is none.
    func oldestEventSeq() throws -> UInt64? {
        try db.query("SELECT MIN(seq) AS first FROM events") { try $0.optionalInteger("first", as: UInt64.self) }.first ?? nil
    }

    /// Committed events from `from` on, at most `limit`.
    func events(from: UInt64, limit: Int) throws -> [Event] {
        let start = Int64(clamping: max(from, 1))
        return try db.query("""
            SELECT \(JobStore.eventColumns)
            FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?
            """, start, Int64(clamping: committedSeq), Int64(limit), map: JobStore.decodeEvent)
    }

    /// A job's last committed event (one seek in the index on job id,
    /// however long its story), nil when the log has none.
    func lastEvent(of id: ULID) throws -> Event? {
        try db.query("""
            SELECT \(JobStore.eventColumns)
            FROM events WHERE job_id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1
            """, id.description, Int64(clamping: committedSeq), map: JobStore.decodeEvent).first
    }

    /// Everything the log and the queue's rows hold about one job: its
    /// committed events in order (by the index on job id, however long the
    /// log), and its pipeline and priority. At most `limit` events (the
    /// first ones).
    func story(of id: ULID, limit: Int = 10_000) throws -> (events: [Event], facts: JobStories.Facts) {
        let idText = id.description
        let events = try db.query("""
            SELECT \(JobStore.eventColumns)
            FROM events WHERE job_id = ? AND seq <= ? ORDER BY seq LIMIT ?
            """, idText, Int64(clamping: committedSeq), Int64(limit), map: JobStore.decodeEvent)
        var facts = JobStories.Facts()
        let accepted = try db.query("""
            SELECT pipeline, priority FROM events WHERE job_id = ? AND kind = ? AND pipeline IS NOT NULL ORDER BY seq LIMIT 1
            """, idText, Int64(EventKind.accepted.rawValue)) { row in (try row.optionalString("pipeline"), try row.optionalInt64("priority")) }
        // The job's row, while the queue keeps it: its time limit, and its
        // pipeline and priority when the log has no `accepted` event with
        // them (accepted before the log kept pipelines, or pruned).
        let row = try db.query("SELECT pipeline, priority, time_limit FROM jobs WHERE id = ?", idText) { row in
            (try row.string("pipeline"), try row.int64("priority"), try row.integer("time_limit", as: UInt32.self))
        }.first
        if let (pipeline, priority) = accepted.first {
            facts.pipeline = pipeline
            facts.priority = priority.map { UInt8(clamping: $0) }
        } else if let row {
            facts.pipeline = row.0
            facts.priority = UInt8(clamping: row.1)
        }
        if let limit = row?.2, limit > 0 { facts.timeLimit = limit }
        return (events, facts)
    }

    /// The columns `decodeEvent` reads, in a SELECT of events.
    private static let eventColumns = "seq, time, kind, job_id, attempt, source, worker, record_id, step_index, step, error_code, reason"

    private static func decodeEvent(_ row: Row) throws -> Event {
        let seq = try row.integer("seq", as: UInt64.self)
        let kindValue = try row.integer("kind", as: UInt8.self)
        guard let kind = EventKind(rawValue: kindValue) else { throw BrokerError.storage("event \(seq) has unknown kind \(kindValue)") }
        let jobText = try row.string("job_id")
        guard let jobID = ULID(jobText) else { throw BrokerError.storage("event \(seq) names a malformed job id '\(jobText)'") }
        let recordText = try row.optionalString("record_id")
        let recordID = try recordText.map { text -> ULID in
            guard let id = ULID(text) else { throw BrokerError.storage("event \(seq) names a malformed record id '\(text)'") }
            return id
        }
        let failure = FailureDetail(stepIndex: Self.wireStepIndex(try row.int64("step_index")), step: try row.string("step"),
                                    code: try row.string("error_code"), reason: try row.string("reason"))
        let hasFailure = !failure.code.isEmpty || !failure.reason.isEmpty || failure.stepIndex > 0 || !failure.step.isEmpty
        return Event(seq: seq, time: try row.integer("time", as: UInt64.self), kind: kind, jobID: jobID,
                     attempt: try row.integer("attempt", as: UInt32.self), sourceName: try row.string("source"),
                     workerID: try row.string("worker"), recordID: recordID, failure: hasFailure ? failure : nil)
    }
}

/// A job's state in the `jobs` table. (A stored job has no row.)
enum JobState: String {
    case queued, leased, dead
}

/// What a job's JOB message carries besides its handle, as read (or kept)
/// by the job store when the job is leased.
struct JobPayload: Sendable {
    var options: JobOptions
    var pipeline: String
    /// The input, when it is inline in the queue database or kept in
    /// memory since its submit; empty when it is `file`.
    var image: [UInt8]
    /// The input file mapped, when the input is kept in a file: sent in
    /// place of the JOB's image frame without being read into memory.
    var file: MappedFile? = nil
    /// Seconds, 0 for none (see `NewJob.timeLimit`).
    var timeLimit: UInt32 = 0
}
