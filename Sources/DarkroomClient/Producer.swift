import Foundation
import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ

/// Where a job's JPEG bytes come from. Files and providers are read only when
/// the job is about to be sent (and again if it must be resent), so a batch
/// of ten thousand files never sits in memory at once.
public enum ImageSource: Sendable {
    /// Bytes already in memory.
    case bytes([UInt8])
    /// A file, read when the job is sent.
    case file(String)
    /// A closure called when the job is sent; it may be called again for a resend.
    case provider(@Sendable () throws -> [UInt8])

    func load() throws(ClientError) -> [UInt8] {
        switch self {
        case .bytes(let bytes):
            return bytes
        case .file(let path):
            return try Self.read(path)
        case .provider(let provide):
            do {
                return try provide()
            } catch {
                throw ClientError(.input, "cannot read the image: \(error)")
            }
        }
    }

    /// Reads a whole file with a handful of system calls (open, fstat,
    /// read, close): a producer reads thousands of small files a second.
    static func read(_ path: String) throws(ClientError) -> [UInt8] {
        let file: Posix.File
        do {
            file = try Posix.openForReading(path)
        } catch {
            throw ClientError(.input, "cannot read \(path): \(error.reason)")
        }
        defer { try? file.close() }
        do {
            let info = try file.info()
            if info.isDirectory { throw ClientError(.input, "\(path) is a directory, not a JPEG file") }
            // Checked before reading: a huge file is refused without loading it.
            guard info.size <= Wire.maxImageBytes else {
                throw ClientError(.invalidArgument, "\(path) is \(info.size) bytes; DRK1 carries images of at most \(Wire.maxImageBytes) bytes")
            }
            return try file.readAll(limit: Wire.maxImageBytes)
        } catch let error as ClientError {
            throw error
        } catch let error as PosixError where error.code == EFBIG {
            throw ClientError(.invalidArgument, "\(path) grew past \(Wire.maxImageBytes) bytes while being read; DRK1 carries images of at most \(Wire.maxImageBytes) bytes")
        } catch let error as PosixError {
            throw ClientError(.input, "cannot read \(path): \(error.reason)")
        } catch {
            throw ClientError(.input, "cannot read \(path): \(error)")
        }
    }
}

/// One job to submit: a JPEG, the pipeline to run on it and its options.
public struct SubmitRequest: Sendable {
    /// The priority used when none is given: the middle of 0…9, so callers
    /// can submit both below and above it.
    public static let defaultPriority: UInt8 = 5

    /// A name for people, usually the file name (0…1024 bytes, one line).
    public var sourceName: String
    public var image: ImageSource
    /// The pipeline in canonical text form (`Pipeline.canonical`).
    public var pipeline: String
    public var options: JobOptions
    /// 0…9; 9 runs first.
    public var priority: UInt8
    /// The job's submit key (1–64 printable ASCII bytes): the broker queues
    /// one job per key, so a SUBMIT sent again with the same key returns
    /// the first job. `Producer` gives a job without one a fresh ULID, so
    /// its own resends are safe; set it to make submits safe to repeat
    /// across runs (a key from your own database, say).
    public var submitKey: String?
    /// When the job may run (Unix ms, by the broker's clock); nil: at once.
    public var notBefore: UInt64?
    /// The job's most counted attempts (1…1000); nil for the broker's setting.
    public var maxAttempts: UInt16?
    /// The job's deadline (Unix ms, by the broker's clock): not started by
    /// then, it is not run and ends cancelled (`job.expired`); nil: none.
    public var expires: UInt64?
    /// The longest an attempt may run on a worker, in seconds (1…604800):
    /// past it the worker stops it and it fails `job.timeout`; nil: the
    /// worker's own limit alone.
    public var timeLimit: UInt32?

    public init(sourceName: String, image: ImageSource, pipeline: String, options: JobOptions = .default,
                priority: UInt8 = SubmitRequest.defaultPriority, submitKey: String? = nil, notBefore: UInt64? = nil,
                maxAttempts: UInt16? = nil, expires: UInt64? = nil, timeLimit: UInt32? = nil) {
        self.sourceName = sourceName
        self.image = image
        self.pipeline = pipeline
        self.options = options
        self.priority = priority
        self.submitKey = submitKey
        self.notBefore = notBefore
        self.maxAttempts = maxAttempts
        self.expires = expires
        self.timeLimit = timeLimit
    }

    /// A job for a file, named by its path, read when it is sent.
    public static func file(_ path: String, pipeline: String, options: JobOptions = .default,
                            priority: UInt8 = SubmitRequest.defaultPriority) -> SubmitRequest {
        SubmitRequest(sourceName: path, image: .file(path), pipeline: pipeline, options: options, priority: priority)
    }

    /// The SUBMIT message's frames and its image's size, after the checks a
    /// broker would make on it, so a bad field is reported here instead of
    /// as a malformed message.
    func message(requestID: UInt64) throws(ClientError) -> (frames: [[UInt8]], imageBytes: Int) {
        let bytes = try image.load()
        guard !bytes.isEmpty else {
            throw ClientError(.invalidArgument, "\(sourceName): the image is empty")
        }
        guard bytes.count <= Wire.maxImageBytes else {
            throw ClientError(.invalidArgument, "\(sourceName): the image is \(bytes.count) bytes; DRK1 carries at most \(Wire.maxImageBytes)")
        }
        // Every other field is checked by the receiver's own decoder, on
        // the frames that will be sent (the image frame is shared, not
        // copied, by the frames and the decoded message).
        let frames = Submit(requestID: requestID, priority: priority, options: options, pipeline: pipeline, sourceName: sourceName, image: bytes,
                            submitKey: submitKey, notBefore: notBefore, maxAttempts: maxAttempts, expires: expires,
                            timeLimit: timeLimit).frames()
        do {
            _ = try Submit.decode(frames)
        } catch {
            throw ClientError(.invalidArgument, "\(sourceName.isEmpty ? "job" : sourceName): \(error.reason)")
        }
        return (frames, bytes.count)
    }
}

/// The outcome of one submit.
public enum SubmitResult: Sendable, Equatable {
    /// The job is on the broker's disk and will run. `eventSeq` is the
    /// sequence number of its `accepted` event: follow events from there.
    case accepted(jobID: ULID, eventSeq: UInt64)
    /// The broker refused the job (REJECTED, or ERROR for a request it found
    /// malformed or forbidden). A refusal is final at once unless its code
    /// is retryable (`code.isRetryable`: queue-full, shutting-down,
    /// internal); such a job is sent again and only ends here, with the
    /// broker's last answer, when the deadline passes.
    case rejected(code: ErrorCode, reason: String)
    /// The job was never sent, and is not queued: its image could not be
    /// read, or a field was one DRK1 cannot carry.
    case failed(ClientError)
    /// No answer came before the deadline, or before a failure that ended
    /// `submit`. `sends` copies of the SUBMIT went out: with none, the job
    /// is not queued; with one or more it may or may not be, and sending it
    /// again with the same submit key (the request handed to `onReply`
    /// carries it) finds out without queueing it twice.
    case unanswered(sends: Int, error: ClientError)

    public var jobID: ULID? {
        if case .accepted(let id, _) = self { return id }
        return nil
    }
}

/// Counts for one `submit` call: every job lands in exactly one of the
/// first four.
public struct SubmitSummary: Sendable, Equatable {
    public var accepted = 0
    /// Refused by the broker (REJECTED or ERROR, with its code).
    public var rejected = 0
    /// Not sent: the input could not be read or carried.
    public var failed = 0
    /// Never answered before the deadline (or a failure that ended the call).
    public var unanswered = 0
    /// The smallest `eventSeq` among accepted jobs: following events from
    /// here sees every accepted job's later events.
    public var firstEventSeq: UInt64?
    /// SUBMITs sent again: after a silence, a lost connection or a
    /// retryable refusal.
    public var resent = 0

    public init() {}
}

/// What `submit` says about the broker while it keeps trying: once when
/// an outage begins and once when it ends, however many rounds of resends
/// happen in between, so a caller can tell a person without flooding them.
public enum SubmitNotice: Sendable, Equatable {
    /// The broker stopped answering: silent for `timeout` while SUBMITs
    /// waited, or not even reachable (a SUBMIT could not be queued).
    /// `waiting` jobs are being resent until it answers or the deadline
    /// passes, `giveUpIn` from now.
    case brokerSilent(waiting: Int, giveUpIn: Duration)
    /// The broker refuses submits for now with a retryable code (queue-full,
    /// shutting-down, internal, such as a full disk). The `waiting` jobs
    /// are sent again with backoff until it accepts or the deadline passes.
    case brokerRefusing(code: ErrorCode, reason: String, waiting: Int, giveUpIn: Duration)
    /// The broker answers for good again (accepts, or refuses for good), `after`
    /// its last answer before the outage.
    case brokerBack(after: Duration)
}

/// Exponential backoff with jitter: the n-th wait is `initial × 2^(n−1)`,
/// capped at `maximum`, then drawn at random from the upper half of that,
/// so producers that lost the same broker do not all come back in step.
public struct Backoff: Sendable, Equatable {
    public var initial: Duration
    public var maximum: Duration

    public init(initial: Duration = .milliseconds(500), maximum: Duration = .seconds(10)) {
        self.initial = max(.milliseconds(1), initial)
        self.maximum = max(self.initial, maximum)
    }

    /// The wait before try `n` (1 is the first retry), where `unit` is a
    /// random number in 0...1: 0 gives half the capped wait, 1 all of it.
    public func delay(_ n: Int, unit: Double) -> Duration {
        let exponent = max(0, min(n - 1, 30))
        let full = min(maximum, initial * (1 << exponent))
        return full * (0.5 + 0.5 * max(0, min(1, unit)))
    }

    func delay(_ n: Int) -> Duration { delay(n, unit: .random(in: 0...1)) }
}

/// Submits jobs to the broker frontend, many at a time, and keeps trying
/// through outages.
///
/// Blocking: `submit` returns when every job has its final result. Threading: a
/// `Producer` owns a ZeroMQ socket, so it belongs to the thread that created
/// it and is not `Sendable`; make one per thread.
public final class Producer {
    let channel: Channel
    /// How long `submit` keeps trying while no job gets a final answer:
    /// when the broker has accepted nothing (and refused nothing for good)
    /// for this long, the jobs still waiting are reported as unanswered.
    /// Measured from the last final answer, not from the start, so a long
    /// batch that makes progress is never cut short, while a broker that is
    /// gone ends the call this long after it last answered. A deadline no
    /// longer than `timeout` leaves no time for a resend.
    public var deadline: Duration
    /// The waits between resend rounds beyond the first, between attempts
    /// to reach a broker that is not listening, and before a job refused
    /// for now is sent again.
    public var backoff: Backoff
    /// The most image bytes in flight at once (at least one job is always
    /// allowed), so a window of large images does not fill memory.
    public var windowBytes: Int

    /// Connects (in the background) to the broker frontend.
    /// - Parameters:
    ///   - endpoint: the broker frontend, `Wire.Endpoint.frontend` by default.
    ///   - timeout: how long the broker may stay silent while SUBMITs are
    ///     outstanding before they are sent again; also how long a send waits
    ///     for a connection.
    ///   - deadline: how long to keep trying while the broker answers nothing
    ///     for good (see `deadline`). Five minutes by default: a broker
    ///     restarted by its supervisor is back within seconds, a host reboot
    ///     within a minute or two, and a broker that is really gone still
    ///     ends the call in bounded time.
    ///   - backoff: the waits between retries (see `backoff`).
    ///   - curve: keys when the broker requires CURVE.
    public init(endpoint: String = Wire.Endpoint.frontend, context: Context, timeout: Duration = .seconds(5),
                deadline: Duration = .seconds(300), backoff: Backoff = Backoff(), windowBytes: Int = SubmitWindow.defaultMaxBytes,
                curve: CurveClientKeys? = nil) throws(ClientError) {
        channel = try Channel(context: context, endpoint: endpoint, role: .broker, timeout: timeout, curve: curve)
        self.deadline = deadline
        self.backoff = backoff
        self.windowBytes = max(1, windowBytes)
    }

    /// The broker frontend this producer talks to.
    public var endpoint: String { channel.endpoint }

    /// How long the broker may be silent before unanswered SUBMITs are resent.
    public var timeout: Duration { channel.timeout }

    /// Where one job taken from the source and not yet finished stands.
    /// Its request is kept apart (`requests`), so that this, read and
    /// changed several times a job, is copied without reference counting.
    private struct Pending {
        var bytes: Int
        /// Copies handed to ZeroMQ so far.
        var sends = 0
        /// When the last copy was handed to ZeroMQ.
        var lastSent: ClockReading?
        /// When to send (again); nil while a copy awaits its answer.
        var due: ClockReading?
        /// How many times the broker refused it for now (the last refusal
        /// is in `refusals`: nothing here needs reference counting).
        var refusalCount = 0

        var awaited: Bool { due == nil && lastSent != nil }
    }

    /// Submits jobs, keeping up to `window` SUBMITs unanswered at once
    /// (pipelining), and calls `onReply` exactly once for each job of
    /// `jobs`, with its final result. Answers are matched by request id,
    /// so they may come in any order; `onReply` and `onNotice` run on the
    /// calling thread.
    ///
    /// The window adapts (`SubmitWindow`): it starts at up to 1,024 SUBMITs,
    /// grows towards `window` while the broker answers quickly, shrinks when
    /// its answers slow down or it pushes back, and never holds more than
    /// `windowBytes` of images (one job always goes, however large).
    ///
    /// A job whose image cannot be read, or whose fields DRK1 cannot carry,
    /// gets `.failed` without being sent; the others go on. A job without a
    /// submit key gets a fresh ULID as its key before it is first sent, and
    /// every resend carries the same request id and key: the broker queues
    /// one job per key and answers a repeat with the first job, so no resend
    /// ever queues a job twice.
    ///
    /// Nothing short of the deadline ends the call, whatever the broker does:
    /// - silent for `timeout` while SUBMITs await answers: they are sent
    ///   again, and again after each further silence of `timeout` plus a
    ///   growing, jittered `backoff`;
    /// - not reachable (a SUBMIT cannot be queued within `timeout`, as with
    ///   no broker listening): sending pauses for a `backoff` wait and then
    ///   starts again with every job still waiting;
    /// - answering others but not one SUBMIT for four times `timeout`
    ///   (its copy was lost with a connection that dropped and came back):
    ///   that one is sent again;
    /// - refusing with a retryable code (queue-full, shutting-down,
    ///   internal): that job is sent again after a `backoff` wait that grows
    ///   with each refusal. Any other refusal is final.
    /// `onNotice` hears once when such an outage begins and once when the
    /// broker answers for good again. When `deadline` passes with no final
    /// answer, every job still waiting, and every job not yet taken from
    /// `jobs`, gets `.unanswered` (or its last refusal), and the call returns.
    ///
    /// - Throws: only for a failure no retry can mend (a `ClientError`
    ///   whose `isRetryable` is false, such as an ERROR the broker could not
    ///   match to any request), after reporting every job not yet finished
    ///   as `.unanswered` with that error; and for a window below 1, before
    ///   anything is sent.
    /// - Returns: counts, and the first accepted event seq for `EventFollower`.
    @discardableResult
    public func submit(
        _ jobs: some Sequence<SubmitRequest>,
        window: Int = 256,
        onNotice: (SubmitNotice) -> Void = { _ in },
        onReply: (SubmitRequest, SubmitResult) -> Void
    ) throws(ClientError) -> SubmitSummary {
        guard window >= 1 else {
            throw ClientError(.invalidArgument, "the submit window must be at least 1, got \(window)")
        }
        var source = SequenceSource(jobs)
        return try submit(from: &source, window: SubmitWindow(maximum: window, maxBytes: windowBytes),
                          onNotice: onNotice, onReply: onReply)
    }

    /// Submits the jobs `source` hands out, as `submit(_:window:onNotice:onReply:)`
    /// does, with the window `window` starts from. A source that has no job
    /// ready yet (`.notYet`) is asked again when it says; the call returns
    /// once the source has ended and every job taken from it has its result.
    @discardableResult
    public func submit(
        from source: inout some SubmitSource,
        window: SubmitWindow,
        onNotice: (SubmitNotice) -> Void = { _ in },
        onReply: (SubmitRequest, SubmitResult) -> Void
    ) throws(ClientError) -> SubmitSummary {
        try submit(from: &source, window: window, turn: { _ in }, taken: { _ in }, onNotice: onNotice, onReply: onReply)
    }

    /// `submit(from:window:onNotice:onReply:)` with the submission engine's
    /// hooks: `turn` runs before every wait for the broker (the engine
    /// takes what its mailbox holds and flushes output there), told whether
    /// SUBMITs await answers (whose arrival will end the wait), and
    /// `taken` for each job as it is taken from the source.
    func submit(
        from source: inout some SubmitSource,
        window initialWindow: SubmitWindow,
        turn: (_ answersDue: Bool) throws(ClientError) -> Void,
        taken: (SubmitRequest) -> Void,
        onNotice: (SubmitNotice) -> Void,
        onReply: (SubmitRequest, SubmitResult) -> Void
    ) throws(ClientError) -> SubmitSummary {
        let timeout = channel.timeout
        let patience = max(.zero, deadline)
        // A copy is taken for lost when the broker answers others but not
        // it for this long: long enough that a broker busy writing a window
        // of large images is not sent them twice.
        let staleAfter = timeout * 4
        let start = ClockReading.now

        var window = initialWindow
        var summary = SubmitSummary()
        var pending: [UInt64: Pending] = [:]
        pending.reserveCapacity(min(window.maximum, 4096))
        /// The request of every job in `pending`, by the same id.
        var requests: [UInt64: SubmitRequest] = [:]
        requests.reserveCapacity(min(window.maximum, 4096))
        /// The broker's last refusal-for-now of a job still pending.
        var refusals: [UInt64: (code: ErrorCode, reason: String)] = [:]
        var order: [UInt64] = []  // send order: resends and reports go in it
        var bytesInFlight = 0
        /// Jobs with a copy out and no answer yet, and jobs due to be sent.
        var awaitedCount = 0
        var dueCount = 0
        /// No job is due before this (a lower bound; nil: none is due).
        var nextDue: ClockReading?
        /// Every copy sent, oldest first: the front one still awaited is the
        /// oldest copy out, the first that may be lost. Entries whose job
        /// was answered or sent again since are skipped when they reach the front.
        var sent: [(id: UInt64, at: ClockReading)] = []
        var sentHead = 0
        var exhausted = false
        /// The source had nothing ready: asked again from this instant on.
        var sourceRetryAt: ClockReading?
        /// The last final answer; the deadline counts from here.
        var lastProgress = start
        /// The last message of any kind from the broker.
        var lastHeard = start
        /// Since when awaited SUBMITs have had no answer.
        var silentSince = start
        /// Rounds of silence (or of failed sends) since the broker last spoke.
        var silentRounds = 0
        var silenceLimit = timeout
        /// After a SUBMIT could not be queued, nothing is sent before this.
        var sendsPausedUntil: ClockReading?
        /// When the current outage began (the broker's last answer before
        /// it); nil when there is none.
        var outageSince: ClockReading?

        func report(_ request: SubmitRequest, _ result: SubmitResult) {
            switch result {
            case .accepted(_, let seq):
                summary.accepted += 1
                summary.firstEventSeq = min(summary.firstEventSeq ?? seq, seq)
            case .rejected: summary.rejected += 1
            case .failed: summary.failed += 1
            case .unanswered: summary.unanswered += 1
            }
            onReply(request, result)
        }

        /// Changes a pending job in place, keeping the counts of awaited and due jobs.
        func update(_ id: UInt64, _ change: (inout Pending) -> Void) {
            guard let index = pending.index(forKey: id) else { return }
            let wasAwaited = pending.values[index].awaited, wasDue = pending.values[index].due != nil
            change(&pending.values[index])
            let job = pending.values[index]
            awaitedCount += (job.awaited ? 1 : 0) - (wasAwaited ? 1 : 0)
            dueCount += (job.due != nil ? 1 : 0) - (wasDue ? 1 : 0)
            if let due = job.due { nextDue = min(nextDue ?? due, due) }
        }

        func finish(_ id: UInt64, _ result: SubmitResult) {
            guard let job = pending.removeValue(forKey: id), let request = requests.removeValue(forKey: id) else { return }
            if job.refusalCount > 0 { refusals[id] = nil }
            if job.awaited { awaitedCount -= 1 }
            if job.due != nil { dueCount -= 1 }
            bytesInFlight -= job.bytes
            report(request, result)
        }

        /// Every job with a copy out is due again now.
        func resendAwaited(_ now: ClockReading) {
            guard awaitedCount > 0 else { return }
            for id in order where pending[id]?.awaited == true { update(id) { $0.due = now } }
        }

        func giveUpIn() -> Duration { max(.zero, lastProgress + patience - ClockReading.now) }

        /// A final answer: the deadline starts again, and an outage is over.
        func progressed() {
            let now = ClockReading.now
            lastProgress = now
            if let since = outageSince {
                outageSince = nil
                onNotice(.brokerBack(after: now - since))
            }
        }

        func heard() {
            let now = ClockReading.now
            lastHeard = now
            silentSince = now
            silentRounds = 0
            silenceLimit = timeout
            sendsPausedUntil = nil
        }

        func outage(_ notice: SubmitNotice) {
            guard outageSince == nil else { return }
            outageSince = lastHeard
            onNotice(notice)
        }

        /// Ends every job not yet finished, in order, then the ones never
        /// taken that the source has ready.
        func endAll(_ error: (Int) -> ClientError) {
            for id in order {
                guard let job = pending[id] else { continue }
                if let refusal = refusals[id] {
                    finish(id, .rejected(code: refusal.code, reason: refusal.reason))
                } else {
                    finish(id, .unanswered(sends: job.sends, error: error(job.sends)))
                }
            }
            order.removeAll()
            while case .job(var request) = source.next() {
                if request.submitKey == nil { request.submitKey = ULIDGenerator.shared.next().description }
                taken(request)
                report(request, .unanswered(sends: 0, error: error(0)))
            }
            exhausted = true
        }

        func fatal(_ error: ClientError) -> ClientError {
            endAll { _ in error }
            return error
        }

        func refused(_ id: UInt64, _ code: ErrorCode, _ reason: String) {
            guard let job = pending[id] else { return }
            guard code.isRetryable else {
                if job.sends == 1, let sentAt = job.lastSent {
                    window.answered(after: ClockReading.now - sentAt, inFlight: pending.count)
                }
                finish(id, .rejected(code: code, reason: reason))
                progressed()
                return
            }
            window.backOff()
            refusals[id] = (code, reason)
            update(id) { job in
                job.refusalCount += 1
                job.due = ClockReading.now + backoff.delay(job.refusalCount)
            }
            outage(.brokerRefusing(code: code, reason: reason, waiting: pending.count, giveUpIn: giveUpIn()))
        }

        func handle(_ frames: [[UInt8]]) throws(ClientError) {
            let message: FrontendMessage
            do {
                message = try FrontendMessage.decode(frames, to: .peer)
            } catch {
                heard()
                let id = channel.rejectMalformed(frames, error)
                if let job = pending[id] {
                    // Whether the job was queued cannot be told from an answer
                    // that does not decode.
                    finish(id, .unanswered(sends: job.sends, error: ClientError(.protocolViolation,
                        "the broker at \(channel.endpoint) sent a malformed answer to SUBMIT: \(error.reason)")))
                    progressed()
                }
                return
            }
            heard()
            switch message {
            case .accepted(let m):
                guard let job = pending[m.requestID] else { return }  // a second answer to a resent SUBMIT
                // Only a job sent once tells how long an answer takes: with
                // two copies out, which one it answers is unknown.
                if job.sends == 1, let sentAt = job.lastSent {
                    window.answered(after: ClockReading.now - sentAt, inFlight: pending.count)
                }
                finish(m.requestID, .accepted(jobID: m.jobID, eventSeq: m.eventSeq))
                progressed()
            case .rejected(let m):
                refused(m.requestID, m.code, m.reason)
            case .error(let m) where m.requestID == 0:
                // The broker could not tell which request it was. When its
                // code says a retry may help, the SUBMITs it concerns stay
                // unanswered and are resent like any other.
                let error = ClientError.server(m, from: .broker, doing: "a SUBMIT")
                if !error.isRetryable { throw fatal(error) }
            case .error(let m):
                refused(m.requestID, m.code, m.reason)
            default:
                return  // an answer to something else, or stray: not ours to act on
            }
        }

        /// Takes every answer already waiting (the handshake events looked
        /// at once, before the first).
        func drain() throws(ClientError) {
            guard var frames = try receive(until: nil) else { return }
            while true {
                try handle(frames)
                guard let next = try receive(until: nil, checkingHandshake: false) else { return }
                frames = next
            }
        }

        /// Receives one message (waiting until `deadline`, or not at all
        /// when nil). A failure a retry may mend is waited out, not thrown.
        func receive(until deadline: ClockReading?, checkingHandshake: Bool = true) throws(ClientError) -> [[UInt8]]? {
            do {
                if let deadline { return try channel.receive(until: deadline.instant) }
                return try channel.receiveNow(checkingHandshake: checkingHandshake)
            } catch {
                guard error.isRetryable else { throw fatal(error) }
                let now = ClockReading.now
                let pause = min(.milliseconds(100), max(.zero, (deadline ?? now) - now))
                if pause > .zero { Thread.sleep(forTimeInterval: pause.fractionalSeconds) }
                return nil
            }
        }

        /// Sends one copy of a job (`built`, or read again from its source).
        /// Returns false when it could not be queued (no connection): the
        /// job is then due again after a pause.
        func send(_ id: UInt64, built: [[UInt8]]? = nil) throws(ClientError) -> Bool {
            guard let job = pending[id] else { return true }
            let frames: [[UInt8]]
            if let built {
                frames = built
            } else {
                do {
                    guard let request = requests[id] else { return true }
                    (frames, _) = try request.message(requestID: id)
                } catch {
                    // The input went away since it was first read; a copy
                    // sent before may have been queued.
                    finish(id, job.sends == 0 ? .failed(error) : .unanswered(sends: job.sends, error: error))
                    return true
                }
            }
            let noneAwaited = awaitedCount == 0
            do {
                // No longer than the deadline leaves, so that with no
                // broker at all the run ends when it says it will.
                try channel.send(frames, what: "SUBMIT", within: max(.milliseconds(50), giveUpIn()))
            } catch {
                guard error.isRetryable else { throw fatal(error) }
                // Not even queued: the broker is not reachable. Whatever went
                // out before may have been lost with the connection, so every
                // job goes again once sending starts again.
                let now = ClockReading.now
                silentRounds += 1
                sendsPausedUntil = now + backoff.delay(silentRounds)
                resendAwaited(now)
                update(id) { $0.due = now }
                window.backOff()
                outage(.brokerSilent(waiting: pending.count, giveUpIn: giveUpIn()))
                return false
            }
            let now = ClockReading.now
            if noneAwaited { silentSince = now }
            if job.sends > 0 { summary.resent += 1 }
            update(id) { job in
                job.sends += 1
                job.lastSent = now
                job.due = nil
            }
            sent.append((id, now))
            return true
        }

        /// Sends every job that is due, in the order they were first sent.
        /// Returns false when the broker could not be reached.
        func sendDue() throws(ClientError) -> Bool {
            guard dueCount > 0, let earliest = nextDue else { return true }
            let now = ClockReading.now
            guard earliest <= now else { return true }
            // Rebuilt as the scan goes: a job made due meanwhile (refused
            // again, say) lowers it through `update`.
            nextDue = nil
            var later: ClockReading?
            for id in order {
                guard let due = pending[id]?.due else { continue }
                guard due <= now else {
                    later = min(later ?? due, due)
                    continue
                }
                if !(try send(id)) {
                    nextDue = now  // the rest were not looked at: look again
                    return false
                }
                try drain()
            }
            if let later { nextDue = min(nextDue ?? later, later) }
            return true
        }

        /// The oldest copy still awaited, dropping entries that no longer are.
        func oldestAwaited() -> ClockReading? {
            while sentHead < sent.count {
                let (id, at) = sent[sentHead]
                if let job = pending[id], job.awaited, job.lastSent == at { return at }
                sentHead += 1
            }
            sent.removeAll(keepingCapacity: true)
            sentHead = 0
            return nil
        }

        var sendsSinceDrain = 0
        while true {
            if let pause = sendsPausedUntil, ClockReading.now >= pause { sendsPausedUntil = nil }
            if sendsPausedUntil == nil {
                // Jobs due again first, in the order they were first sent.
                var reachable = try sendDue()
                // Then fill the window.
                fill: while reachable, !exhausted, window.hasRoom(inFlight: pending.count, bytesInFlight: bytesInFlight) {
                    if let retryAt = sourceRetryAt {
                        guard ClockReading.now >= retryAt else { break }
                        sourceRetryAt = nil
                    }
                    var request: SubmitRequest
                    switch source.next() {
                    case .job(let next):
                        request = next
                    case .notYet(let retryAt):
                        sourceRetryAt = ClockReading(retryAt)
                        break fill
                    case .end:
                        exhausted = true
                        break fill
                    }
                    if request.submitKey == nil { request.submitKey = ULIDGenerator.shared.next().description }
                    taken(request)
                    let id = channel.nextRequestID()
                    let frames: [[UInt8]]
                    let size: Int
                    do {
                        (frames, size) = try request.message(requestID: id)
                    } catch {
                        report(request, .failed(error))
                        continue
                    }
                    if pending.isEmpty { lastProgress = .now }  // the deadline counts from here for this job
                    pending[id] = Pending(bytes: size, due: .now)
                    requests[id] = request
                    dueCount += 1
                    order.append(id)
                    bytesInFlight += size
                    if !(try send(id, built: frames)) { reachable = false }
                    // Take answers that are already here every few sends.
                    sendsSinceDrain += 1
                    if sendsSinceDrain >= 16 {
                        sendsSinceDrain = 0
                        try drain()
                    }
                }
            }
            if pending.isEmpty {
                if exhausted { return summary }
                guard let retryAt = sendsPausedUntil ?? sourceRetryAt else { continue }
                // Nothing out and nothing ready: wait for the source. No one
                // waits for the broker, so the deadline does not run.
                try turn(false)
                if let frames = try receive(until: retryAt) {
                    try handle(frames)
                    try drain()
                }
                lastProgress = .now
                continue
            }
            if order.count > 4 * pending.count + 64 {
                order.removeAll { pending[$0] == nil }
            }
            if sentHead > 1024, sentHead * 2 > sent.count {
                sent.removeFirst(sentHead)
                sentHead = 0
            }

            // Wait for answers, at most until something is due: the deadline,
            // the end of a silence or a pause, a job's backoff, a lost copy,
            // the source's next try.
            let giveUpAt = lastProgress + patience
            var wake = giveUpAt
            let oldest = oldestAwaited()
            if let oldest, lastHeard > oldest { wake = min(wake, oldest + staleAfter) }
            if dueCount > 0, sendsPausedUntil == nil, let due = nextDue { wake = min(wake, due) }
            if awaitedCount > 0 { wake = min(wake, silentSince + silenceLimit) }
            if let pause = sendsPausedUntil { wake = min(wake, pause) }
            if let retryAt = sourceRetryAt, window.hasRoom(inFlight: pending.count, bytesInFlight: bytesInFlight) {
                wake = min(wake, retryAt)
            }
            try turn(awaitedCount > 0)
            if let frames = try receive(until: wake) {
                try handle(frames)
                try drain()
                sendsSinceDrain = 0
                if pending.isEmpty { continue }
            }

            // The clocks are checked whether or not answers came: a broker
            // that keeps refusing for now, or answers others while a copy is
            // lost, never lets the wait above run out.
            let now = ClockReading.now
            if now >= lastProgress + patience {
                let endpoint = channel.endpoint
                endAll { sends in
                    ClientError.noAnswer(from: .broker, at: endpoint, within: patience,
                                         detail: sends == 0 ? "never sent; the job is not queued"
                                                            : "sent \(sends) time(s); the job may or may not be queued")
                }
                return summary
            }
            if awaitedCount > 0, now >= silentSince + silenceLimit {
                // Silent for the whole limit: every awaited SUBMIT goes again,
                // and the next round waits longer.
                silentRounds += 1
                silenceLimit = timeout + backoff.delay(silentRounds)
                silentSince = now
                resendAwaited(now)
                window.backOff()
                outage(.brokerSilent(waiting: pending.count, giveUpIn: giveUpIn()))
            } else {
                // The broker answers others: a copy unanswered for long was lost.
                while let oldest = oldestAwaited(), lastHeard > oldest, now >= oldest + staleAfter {
                    let id = sent[sentHead].id
                    update(id) { $0.due = now }
                }
            }
        }
    }

    /// Submits one job and waits for its answer.
    public func submit(_ job: SubmitRequest) throws(ClientError) -> SubmitResult {
        var result: SubmitResult = .failed(ClientError(.protocolViolation, "no answer recorded"))
        try submit(CollectionOfOne(job), window: 1) { _, r in result = r }
        return result
    }
}

/// Where a producer takes its jobs from, one at a time, as the window has
/// room: a list of files, or a source that learns of inputs as it goes (a
/// watched directory) and says when to ask again.
public protocol SubmitSource {
    /// The next job, `.notYet` when none is ready now, or `.end`.
    mutating func next() -> SubmitSourceItem
}

/// What a `SubmitSource` has next.
public enum SubmitSourceItem {
    /// A job to submit.
    case job(SubmitRequest)
    /// Nothing ready now: ask again at `retryAt` (sooner if an answer comes).
    case notYet(retryAt: ContinuousClock.Instant)
    /// No more jobs.
    case end
}

/// The jobs of a sequence, in order.
public struct SequenceSource<Base: Sequence<SubmitRequest>>: SubmitSource {
    private var iterator: Base.Iterator

    public init(_ jobs: Base) { iterator = jobs.makeIterator() }

    public mutating func next() -> SubmitSourceItem {
        iterator.next().map(SubmitSourceItem.job) ?? .end
    }
}

@available(*, unavailable, message: "a client owns a ZeroMQ socket and belongs to one thread; make one per thread")
extension Producer: Sendable {}
