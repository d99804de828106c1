import DarkroomCore
import DarkroomImage
import DarkroomProtocol
import DarkroomSQLite
import DarkroomZMQ

/// Why one request failed: the DRK1 error code for the ERROR reply and a
/// one-line reason that names the record or job.
struct StoreFailure: Error, CustomStringConvertible {
    let code: ErrorCode
    let reason: String

    init(_ code: ErrorCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    static func notFound(_ id: ULID) -> StoreFailure {
        StoreFailure(.notFound, "no record or job with id \(id) (a record is removed by `rm`, or by the storage node's --keep-records or --keep-bytes)")
    }

    var description: String { "\(code): \(reason)" }
}

/// The storage node's records: one SQLite database (`store.db`, WAL,
/// synchronous=FULL, foreign keys on) and the blob files next to it.
///
/// Schema (version 2, kept in `PRAGMA user_version`):
///
/// - `full_res`: one row per record, the record id (ULID) as primary key and
///   the job id UNIQUE, which makes STORE idempotent per job.
/// - `thumbnails`: one row per record, linked one-to-one to its `full_res`
///   row by `full_res_id` (a foreign key, UNIQUE, ON DELETE CASCADE).
///
/// Both keep the job id, source name, pipeline, width, height, byte size,
/// SHA-256 (lower-case hex), creation time (Unix ms) and file format
/// (`jpeg`, `webp`, `png` or `avif`; version 2, older rows are JPEGs). The image bytes are
/// either inline (`blob`) or, above the threshold, in a content-addressed
/// file named by `blob_path` (relative to the blob directory); exactly one of
/// the two is set.
///
/// Writes happen in batches: `begin()`, any number of requests (each in its
/// own savepoint, so one failing request does not undo the others), then
/// `commit()`, which first makes new blob files durable, then commits, then
/// removes the files no committed row names any more. If SQLite rolls back
/// the batch's transaction by itself (a full disk, an I/O error), the
/// requests after it are refused and the commit fails, so nothing of the
/// batch is reported stored.
///
/// Owned by the storage node's service thread, like the `Connection` inside it.
final class RecordStore {
    static let schemaVersion: Int64 = 2

    /// Each migration takes the schema from the previous version to `version`.
    /// A new schema version appends one; existing entries never change.
    static let migrations: [(version: Int64, sql: String)] = [
        (1, """
            CREATE TABLE full_res (
                id        TEXT PRIMARY KEY NOT NULL,
                job_id    TEXT NOT NULL UNIQUE,
                source    TEXT NOT NULL,
                pipeline  TEXT NOT NULL,
                width     INTEGER NOT NULL,
                height    INTEGER NOT NULL,
                bytes     INTEGER NOT NULL,
                sha256    TEXT NOT NULL,
                created   INTEGER NOT NULL,
                blob      BLOB,
                blob_path TEXT,
                CHECK ((blob IS NULL) <> (blob_path IS NULL))
            );
            CREATE TABLE thumbnails (
                id          TEXT PRIMARY KEY NOT NULL,
                full_res_id TEXT NOT NULL UNIQUE REFERENCES full_res(id) ON DELETE CASCADE,
                job_id      TEXT NOT NULL,
                source      TEXT NOT NULL,
                pipeline    TEXT NOT NULL,
                width       INTEGER NOT NULL,
                height      INTEGER NOT NULL,
                bytes       INTEGER NOT NULL,
                sha256      TEXT NOT NULL,
                created     INTEGER NOT NULL,
                blob        BLOB,
                blob_path   TEXT,
                CHECK ((blob IS NULL) <> (blob_path IS NULL))
            );
            CREATE INDEX full_res_blob_path ON full_res(blob_path) WHERE blob_path IS NOT NULL;
            CREATE INDEX thumbnails_blob_path ON thumbnails(blob_path) WHERE blob_path IS NOT NULL;
            """),
        (2, """
            ALTER TABLE full_res ADD COLUMN format TEXT NOT NULL DEFAULT 'jpeg';
            ALTER TABLE thumbnails ADD COLUMN format TEXT NOT NULL DEFAULT 'jpeg';
            """),
    ]

    let connection: Connection
    let blobs: BlobFiles
    let databasePath: String
    /// The claim on the directory, held until `close`.
    private let lock: DirectoryLock
    /// Blobs larger than this many bytes go to files.
    let threshold: Int
    /// The largest blob file `image` will read.
    let maxBlobBytes: Int
    private let ids: ULIDGenerator
    private let logger: Logger
    // The statements every STORE runs, prepared once (they also stay in the
    // connection's cache, which finalizes them on close).
    private let selectByJob: Statement
    private let insertFull: Statement
    private let insertThumb: Statement

    /// Blob files written or released in the open batch; after it ends, those
    /// no committed row names are removed.
    private var touchedFiles: Set<String> = []
    /// Blob files written in the open batch whose directory is not yet synced.
    private var unsyncedFiles: Set<String> = []

    /// Opens (creating if needed) the store in `directory`, brings its schema
    /// up to date and recovers from a crash: leftover temporary files and blob
    /// files no committed row names are removed.
    init(directory: String, threshold: Int, maxBlobBytes: Int, logger: Logger) throws {
        // Claimed before the recovery below removes anything from it.
        try Posix.makeDirectories(directory)
        do {
            lock = try DirectoryLock(directory: directory, holder: "storage node")
        } catch {
            throw StoreFailure(.internal, error.message)
        }
        self.blobs = BlobFiles(root: directory + "/blobs")
        self.databasePath = directory + "/store.db"
        self.threshold = threshold
        self.maxBlobBytes = maxBlobBytes
        self.logger = logger
        try blobs.prepare()
        // Checkpoints every 8,000 pages of log (32 MB) rather than 1,000:
        // each one copies the pages back and syncs twice, and the index
        // pages every STORE ends on are copied once per checkpoint. Each
        // request's savepoint journal stays in memory (`tempStore`): on
        // disk it costs a system call per page a request first changes.
        var options = Connection.Options()
        options.walAutocheckpointPages = 8_000
        options.tempStore = .memory
        connection = try Connection(path: databasePath, options: options)
        guard try connection.pragma("journal_mode")?.lowercased() == "wal" else {
            throw StoreFailure(.internal, "\(databasePath): cannot switch the database to WAL mode")
        }
        try RecordStore.migrate(connection, logger: logger)

        // Record ids keep increasing across restarts even if the clock went
        // back: the generator never goes below the newest id on disk.
        let newest = try connection.query(
            "SELECT max(id) AS id FROM (SELECT max(id) AS id FROM full_res UNION ALL SELECT max(id) FROM thumbnails)"
        ) { try $0.optionalString("id") }.first.flatMap { $0 }.flatMap { ULID($0) }
        let floor = newest.map { $0.milliseconds + 1 } ?? 0
        ids = ULIDGenerator(clock: { max(ULIDGenerator.systemMilliseconds(), floor) })
        selectByJob = try connection.prepare("SELECT id FROM full_res WHERE job_id = ?1")
        insertFull = try connection.prepare("""
            INSERT INTO full_res (id, job_id, source, pipeline, width, height, bytes, sha256, created, blob, blob_path, format)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
            """)
        insertThumb = try connection.prepare("""
            INSERT INTO thumbnails (id, full_res_id, job_id, source, pipeline, width, height, bytes, sha256, created, blob, blob_path, format)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
            """)

        try recover()
    }

    /// Runs the migrations the database has not had yet, each in its own
    /// transaction; a database from a newer darkroom is refused.
    static func migrate(_ connection: Connection, logger: Logger) throws {
        let steps = migrations.map { migration in
            (version: migration.version, apply: { (db: Connection) throws in try db.execute(migration.sql) })
        }
        let applied = try connection.migrate(to: schemaVersion, steps: steps)
        // A new database goes through every step: one line says it was made.
        if let last = applied.last, applied.count == migrations.count {
            logger.info("store schema created (version \(last))")
        } else {
            for version in applied { logger.info("store schema migrated to version \(version)") }
        }
    }

    /// Removes temporary files a crash left behind and blob files no committed
    /// row names (written, then the commit did not happen). Reports rows whose
    /// file is missing, which the write order makes impossible short of
    /// outside damage.
    private func recover() throws {
        let (files, temporary) = blobs.scan()
        for file in temporary {
            do { try blobs.remove(file) } catch { logger.warn("store cannot remove temporary file: \(error)") }
        }
        let referenced = try referencedFiles()
        let orphans = files.filter { !referenced.contains($0) }
        for file in orphans {
            do { try blobs.remove(file) } catch { logger.warn("store cannot remove unreferenced blob: \(error)") }
        }
        let present = Set(files)
        let missing = referenced.filter { !present.contains($0) }
        if !temporary.isEmpty || !orphans.isEmpty {
            logger.info("store recovery removed \(temporary.count) temporary and \(orphans.count) unreferenced blob file(s)")
        }
        for file in missing.sorted() {
            logger.error("store blob file \(blobs.path(file)) is missing; GET of its record will fail")
        }
    }

    private func referencedFiles() throws -> Set<String> {
        Set(try connection.query(
            "SELECT blob_path FROM full_res WHERE blob_path IS NOT NULL UNION SELECT blob_path FROM thumbnails WHERE blob_path IS NOT NULL"
        ) { try $0.string("blob_path") })
    }

    func close() {
        do { try connection.close() } catch { logger.warn("store database close: \(error)") }
        lock.release()
    }

    // MARK: Batches

    func begin() throws {
        touchedFiles = []
        unsyncedFiles = []
        try connection.prepare("BEGIN IMMEDIATE").execute()
    }

    /// Makes new blob files durable, commits, then removes released files.
    /// Fails if SQLite has rolled back the batch's transaction by itself.
    func commit() throws {
        try requireBatch()
        var synced: Set<String> = []
        for file in unsyncedFiles {
            let directory = String(file.prefix(2))
            guard synced.insert(directory).inserted else { continue }
            try blobs.syncDirectory(of: file)
        }
        unsyncedFiles = []
        try connection.prepare("COMMIT").execute()
        removeUnreferencedTouchedFiles()
    }

    /// Undoes the open batch and removes the files it wrote.
    func rollback() {
        if connection.isInTransaction {
            do { try connection.prepare("ROLLBACK").execute() } catch { logger.error("store rollback: \(error)") }
        }
        unsyncedFiles = []
        removeUnreferencedTouchedFiles()
    }

    private func removeUnreferencedTouchedFiles() {
        let touched = touchedFiles
        touchedFiles = []
        for file in touched.sorted() {
            do {
                guard try !isReferenced(file) else { continue }
                try blobs.remove(file)
            } catch {
                // Left for the startup sweep, which removes unreferenced files.
                logger.warn("store cannot remove released blob \(file): \(error)")
            }
        }
    }

    private func isReferenced(_ file: String) throws -> Bool {
        let rows = try connection.query(
            "SELECT 1 FROM full_res WHERE blob_path = ?1 UNION ALL SELECT 1 FROM thumbnails WHERE blob_path = ?1 LIMIT 1", file
        ) { _ in 1 }
        return !rows.isEmpty
    }

    /// Runs one write request in a savepoint of the open batch: if it throws,
    /// only its own changes are undone. Refused once the batch's transaction
    /// is gone: outside it, each statement would commit on its own.
    func inSavepoint<T>(_ body: () throws -> T) throws -> T {
        try requireBatch()
        return try connection.withSavepoint("request", body)
    }

    /// Throws unless the batch's transaction is open. SQLite rolls a
    /// transaction back by itself on some errors (a full disk, an I/O
    /// error), even in a read; the batch's earlier requests are then undone,
    /// and what follows must not be written outside a transaction, where
    /// each statement would commit on its own.
    private func requireBatch() throws {
        guard connection.isInTransaction else {
            throw StoreFailure(.internal, "the batch's transaction was rolled back by SQLite after an earlier error")
        }
    }

    // MARK: Requests

    /// Stores a job's two images, or returns the record the job already has
    /// (`created` false) without changing anything. A `StoreFailure` is only
    /// thrown before any row is written; other errors may come after the
    /// first insert (the caller then undoes the request).
    func store(_ request: StoreRequest, now: UInt64) throws -> (recordID: ULID, created: Bool) {
        try requireBatch()
        let job = request.jobID.description
        let existing = try selectByJob.query([job]) { try $0.string("id") }
        if let text = existing.first {
            guard let id = ULID(text) else {
                throw StoreFailure(.internal, "record of job \(request.jobID) has a damaged id")
            }
            return (id, false)
        }
        let fullSHA = SHA256.hex(request.full)
        let thumbSHA = SHA256.hex(request.thumbnail)
        let full = try place(request.full, sha256: fullSHA)
        let thumb = try place(request.thumbnail, sha256: thumbSHA)
        let id = ids.next()
        let idText = id.description
        let thumbID = ids.next()
        try insertFull.execute(values: [
            .text(idText), .text(job), .text(request.sourceName), .text(request.pipeline),
            .integer(Int64(request.fullSize.width)), .integer(Int64(request.fullSize.height)), .integer(Int64(request.full.count)),
            .text(fullSHA), .integer(Int64(clamping: now)), full.blob, full.path, .text(RecordStore.format(of: request.full)),
        ])
        try insertThumb.execute(values: [
            .text(thumbID.description), .text(idText), .text(job), .text(request.sourceName), .text(request.pipeline),
            .integer(Int64(request.thumbnailSize.width)), .integer(Int64(request.thumbnailSize.height)),
            .integer(Int64(request.thumbnail.count)), .text(thumbSHA), .integer(Int64(clamping: now)), thumb.blob, thumb.path,
            .text(RecordStore.format(of: request.thumbnail)),
        ])
        return (id, true)
    }


    /// The format of an image that passed `ImageCheck`, which takes
    /// anything that starts like none of the others for a JPEG (and only
    /// an AVIF among HEIF files).
    static func format(of bytes: [UInt8]) -> String {
        if WebP.isWebP(bytes) { return ImageFormat.webp.rawValue }
        if PNG.isPNG(bytes) { return ImageFormat.png.rawValue }
        if HEIF.isHEIF(bytes) { return ImageFormat.avif.rawValue }
        return ImageFormat.jpeg.rawValue
    }

    /// Where a blob goes: inline up to the threshold, else a content-addressed
    /// file, written (crash-safely) unless the same bytes are already stored.
    private func place(_ bytes: [UInt8], sha256: String) throws -> (blob: SQLiteValue, path: SQLiteValue) {
        guard bytes.count > threshold else { return (.blob(bytes), .null) }
        let relative = BlobFiles.relativePath(sha256: sha256)
        if !blobs.exists(relative) {
            touchedFiles.insert(relative)
            try blobs.write(bytes, to: relative)
            unsyncedFiles.insert(relative)
        }
        return (.null, .text(relative))
    }

    private static let selectRecord = """
        SELECT f.id, f.job_id, f.source, f.pipeline, f.created,
               f.width AS full_width, f.height AS full_height, f.bytes AS full_bytes, f.sha256 AS full_sha256, f.format AS full_format,
               t.width AS thumb_width, t.height AS thumb_height, t.bytes AS thumb_bytes, t.sha256 AS thumb_sha256, t.format AS thumb_format
        FROM full_res f JOIN thumbnails t ON t.full_res_id = f.id
        """

    /// A record from a `selectRecord` row. A NULL or mistyped column, or an
    /// id that is not a ULID, is damage, reported with the record's id.
    private static func decodeRecord(_ row: Row) throws -> RecordInfo {
        do {
            guard let id = ULID(try row.string("id")), let job = ULID(try row.string("job_id")) else {
                throw StoreFailure(.internal, "a record row (id \(row.string(0) ?? "?")) has a damaged record or job id")
            }
            return RecordInfo(
                id: id, jobID: job, source: try row.string("source"), pipeline: try row.string("pipeline"),
                created: try row.integer("created"),
                full: ImageInfo(width: try row.integer("full_width"), height: try row.integer("full_height"),
                                bytes: try row.integer("full_bytes"), sha256: try row.string("full_sha256"),
                                format: try row.string("full_format")),
                thumb: ImageInfo(width: try row.integer("thumb_width"), height: try row.integer("thumb_height"),
                                 bytes: try row.integer("thumb_bytes"), sha256: try row.string("thumb_sha256"),
                                 format: try row.string("thumb_format")))
        } catch let error as SQLiteError {
            throw StoreFailure(.internal, "a record row (id \(row.string(0) ?? "?")) is damaged: \(error.message)")
        }
    }

    /// The record whose record id, or else whose job id, is `id`.
    func record(matching id: ULID) throws -> RecordInfo? {
        let text = id.description
        if let byID = try connection.query(RecordStore.selectRecord + " WHERE f.id = ?1", text, map: RecordStore.decodeRecord).first {
            return byID
        }
        return try connection.query(RecordStore.selectRecord + " WHERE f.job_id = ?1", text, map: RecordStore.decodeRecord).first
    }

    /// Records newest first; with `before`, only those older than that record id.
    func list(limit: Int, before: ULID?) throws -> [RecordInfo] {
        if let before {
            return try connection.query(RecordStore.selectRecord + " WHERE f.id < ?1 ORDER BY f.id DESC LIMIT ?2",
                                        before.description, limit, map: RecordStore.decodeRecord)
        }
        return try connection.query(RecordStore.selectRecord + " ORDER BY f.id DESC LIMIT ?1", limit, map: RecordStore.decodeRecord)
    }

    /// One image of `record`, checked against the size and SHA-256 recorded
    /// when it was stored: its bytes when they are inline in the row, its
    /// blob file mapped into memory (not read into it) when they are a file,
    /// the mapping counted on `mappings` until it is unmapped.
    func image(of record: RecordInfo, variant: Variant, mappings: FrameTally) throws -> StoredImage {
        let sql = variant == .full
            ? "SELECT blob, blob_path FROM full_res WHERE id = ?1"
            : "SELECT blob, blob_path FROM thumbnails WHERE full_res_id = ?1"
        let rows = try connection.query(sql, record.id.description) { row in
            (blob: try row.optionalBlob("blob"), path: try row.optionalString("blob_path"))
        }
        guard let row = rows.first else { throw StoreFailure.notFound(record.id) }
        let what = "record \(record.id): \(variant) image"
        let image: StoredImage
        if let path = row.path {
            guard BlobFiles.isValidRelativePath(path) else {
                throw StoreFailure(.internal, "\(what) names an invalid blob path '\(path)'")
            }
            do {
                image = .file(try blobs.map(path, limit: maxBlobBytes, tally: mappings))
            } catch {
                throw StoreFailure(.internal, "\(what) cannot be read: \(error)")
            }
        } else if let blob = row.blob {
            image = .inline(blob)
        } else {
            throw StoreFailure(.internal, "\(what) has neither inline bytes nor a file")
        }
        let expected = variant == .full ? record.full : record.thumb
        guard UInt64(image.count) == expected.bytes else {
            throw StoreFailure(.internal, "\(what) is damaged: \(image.count) bytes read, \(expected.bytes) stored")
        }
        let actual = image.sha256
        guard actual == expected.sha256 else {
            throw StoreFailure(.internal, "\(what) is damaged: sha256 \(actual) does not match the stored \(expected.sha256)")
        }
        return image
    }

    /// Deletes the record whose record id or job id is `id` (the thumbnail row
    /// goes with it by the cascade). Returns the record deleted, nil if there
    /// is none. Its blob
    /// files are removed after the batch commits, unless another record
    /// shares them. Like `store`, throws a `StoreFailure` only before
    /// deleting anything.
    func delete(matching id: ULID) throws -> RecordInfo? {
        try requireBatch()
        guard let record = try record(matching: id) else { return nil }
        let key = record.id.description
        let files = try connection.query(
            "SELECT blob_path FROM full_res WHERE id = ?1 AND blob_path IS NOT NULL UNION SELECT blob_path FROM thumbnails WHERE full_res_id = ?1 AND blob_path IS NOT NULL",
            key
        ) { try $0.string("blob_path") }
        try connection.execute("DELETE FROM full_res WHERE id = ?1", key)
        touchedFiles.formUnion(files)
        return record
    }

    /// Deletes, in the open batch, up to `limit` records stored before
    /// `cutoff` (Unix ms), oldest first, as `delete` does. Returns them.
    /// A record's id is a ULID made when it was stored, so the primary
    /// key's range below the cutoff's first id finds them without a scan;
    /// `created` decides.
    func expire(before cutoff: UInt64, limit: Int) throws -> [RecordInfo] {
        try requireBatch()
        let bound = ULID(milliseconds: cutoff, randomHigh: 0, randomLow: 0).description
        let ids = try connection.query(
            "SELECT id FROM full_res WHERE id < ?1 AND created < ?2 ORDER BY id LIMIT ?3", bound, Int64(clamping: cutoff), limit
        ) { try $0.string("id") }
        return try ids.compactMap(deleteRecord)
    }

    /// `delete` of a record by the id text a query gave.
    private func deleteRecord(_ text: String) throws -> RecordInfo? {
        guard let id = ULID(text) else { throw StoreFailure(.internal, "a record has a damaged id '\(text)'") }
        return try delete(matching: id)
    }

    /// Deletes, in the open batch, the oldest records until their images
    /// (full-resolution and thumbnail bytes) add up to `bytes` or more, at
    /// most `limit` of them, as `delete` does. Returns them.
    func evictOldest(freeing bytes: UInt64, limit: Int) throws -> [RecordInfo] {
        try requireBatch()
        let oldest = try connection.query(
            "SELECT f.id AS id, f.bytes + COALESCE(t.bytes, 0) AS size FROM full_res f LEFT JOIN thumbnails t ON t.full_res_id = f.id ORDER BY f.id LIMIT ?1",
            limit
        ) { (try $0.string("id"), try $0.integer("size", as: UInt64.self)) }
        var freed: UInt64 = 0
        var deleted: [RecordInfo] = []
        for (text, size) in oldest where freed < bytes {
            if let record = try deleteRecord(text) {
                deleted.append(record)
                freed += size
            }
        }
        return deleted
    }

    /// Totals for STATS and for the log.
    struct Totals {
        var records: UInt64 = 0
        var fullBytes: UInt64 = 0
        var thumbBytes: UInt64 = 0
        var inlineBytes: UInt64 = 0
        var externalBytes: UInt64 = 0
        var externalFiles: UInt64 = 0
        var databaseBytes: UInt64 = 0

        var stats: StoreStats {
            StoreStats(records: records, fullBytes: fullBytes, thumbBytes: thumbBytes, externalFiles: externalFiles, databaseBytes: databaseBytes,
                       inlineBytes: inlineBytes, externalBytes: externalBytes)
        }
    }

    func totals() throws -> Totals {
        var totals = Totals()
        for table in ["full_res", "thumbnails"] {
            let rows = try connection.query("""
                SELECT count(*) AS count, coalesce(sum(bytes), 0) AS bytes,
                       coalesce(sum(CASE WHEN blob_path IS NULL THEN bytes ELSE 0 END), 0) AS inline FROM \(table)
                """
            ) { row in
                (try row.integer("count", as: UInt64.self), try row.integer("bytes", as: UInt64.self), try row.integer("inline", as: UInt64.self))
            }
            guard let (count, bytes, inline) = rows.first else { continue }
            if table == "full_res" {
                totals.records = count
                totals.fullBytes = bytes
            } else {
                totals.thumbBytes = bytes
            }
            totals.inlineBytes += inline
            totals.externalBytes += bytes - min(bytes, inline)
        }
        totals.externalFiles = UInt64(try referencedFiles().count)
        totals.databaseBytes = BlobFiles.fileSize(databasePath) + BlobFiles.fileSize(databasePath + "-wal")
        return totals
    }
}

