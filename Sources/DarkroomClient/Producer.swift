import Foundation
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

    static func read(_ path: String) throws(ClientError) -> [UInt8] {
        let size: Int
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            if let type = attributes[.type] as? FileAttributeType, type == .typeDirectory {
                throw ClientError(.input, "\(path) is a directory, not a JPEG file")
            }
            size = (attributes[.size] as? NSNumber)?.intValue ?? 0
        } catch let error as ClientError {
            throw error
        } catch {
            throw ClientError(.input, "cannot read \(path): \(Self.explain(error))")
        }
        // Checked before reading: a huge file is refused without loading it.
        guard size <= Wire.maxImageBytes else {
            throw ClientError(.invalidArgument, "\(path) is \(size) bytes; DRK1 carries images of at most \(Wire.maxImageBytes) bytes")
        }
        do {
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw ClientError(.input, "cannot read \(path): \(Self.explain(error))")
        }
    }

    private static func explain(_ error: any Error) -> String {
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain,
           let code = POSIXErrorCode(rawValue: Int32(underlying.code)) {
            return String(cString: strerror(code.rawValue))
        }
        switch ns.code {
        case NSFileNoSuchFileError, NSFileReadNoSuchFileError: return "no such file"
        case NSFileReadNoPermissionError: return "permission denied"
        default: return ns.localizedDescription
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

    public init(sourceName: String, image: ImageSource, pipeline: String, options: JobOptions = .default,
                priority: UInt8 = SubmitRequest.defaultPriority, submitKey: String? = nil) {
        self.sourceName = sourceName
        self.image = image
        self.pipeline = pipeline
        self.options = options
        self.priority = priority
        self.submitKey = submitKey
    }

    /// A job for a file, named by its path, read when it is sent.
    public static func file(_ path: String, pipeline: String, options: JobOptions = .default,
                            priority: UInt8 = SubmitRequest.defaultPriority) -> SubmitRequest {
        SubmitRequest(sourceName: path, image: .file(path), pipeline: pipeline, options: options, priority: priority)
    }

    /// The SUBMIT message, after the checks a broker would make on it, so a
    /// bad field is reported here instead of as a malformed message.
    func message(requestID: UInt64) throws(ClientError) -> (Submit, Int) {
        let bytes = try image.load()
        guard !bytes.isEmpty else {
            throw ClientError(.invalidArgument, "\(sourceName): the image is empty")
        }
        guard bytes.count <= Wire.maxImageBytes else {
            throw ClientError(.invalidArgument, "\(sourceName): the image is \(bytes.count) bytes; DRK1 carries at most \(Wire.maxImageBytes)")
        }
        // Check every other field with the receiver's own decoder, on a
        // one-byte stand-in for the image so the image is not copied.
        let probe = Submit(requestID: requestID, priority: priority, options: options, pipeline: pipeline, sourceName: sourceName, image: [0xFF],
                           submitKey: submitKey)
        do {
            _ = try Submit.decode(probe.frames())
        } catch {
            throw ClientError(.invalidArgument, "\(sourceName.isEmpty ? "job" : sourceName): \(error.reason)")
        }
        let submit = Submit(requestID: requestID, priority: priority, options: options, pipeline: pipeline, sourceName: sourceName, image: bytes,
                            submitKey: submitKey)
        return (submit, bytes.count)
    }
}

/// The outcome of one submit.
public enum SubmitResult: Sendable, Equatable {
    /// The job is on the broker's disk and will run. `eventSeq` is the
    /// sequence number of its `accepted` event: follow events from there.
    case accepted(jobID: ULID, eventSeq: UInt64)
    /// The broker refused the job (REJECTED, or ERROR for a request it found
    /// malformed or forbidden). `code.isRetryable` says whether to try later
    /// (queue-full, shutting-down).
    case rejected(code: ErrorCode, reason: String)
    /// The job was not sent, or its fate is unknown: the image could not be
    /// read, a field was invalid, or the broker never answered.
    case failed(ClientError)

    public var jobID: ULID? {
        if case .accepted(let id, _) = self { return id }
        return nil
    }
}

/// Counts for one `submit` call.
public struct SubmitSummary: Sendable, Equatable {
    public var accepted = 0
    public var rejected = 0
    public var failed = 0
    /// The smallest `eventSeq` among accepted jobs: following events from
    /// here sees every accepted job's later events.
    public var firstEventSeq: UInt64?
    /// SUBMITs sent again after the broker went quiet.
    public var resent = 0

    public init() {}
}

/// Submits jobs to the broker frontend, many at a time.
///
/// Blocking: `submit` returns when every job has its answer. Threading: a
/// `Producer` owns a ZeroMQ socket, so it belongs to the thread that created
/// it and is not `Sendable`; make one per thread.
public final class Producer {
    let channel: Channel
    /// How many times a SUBMIT is sent again when the broker goes quiet.
    public var resubmits: Int
    /// The most image bytes in flight at once (at least one job is always
    /// allowed), so a window of large images does not fill memory.
    public var windowBytes: Int

    /// Connects (in the background) to the broker frontend.
    /// - Parameters:
    ///   - endpoint: the broker frontend, `Wire.Endpoint.frontend` by default.
    ///   - timeout: how long the broker may stay silent while SUBMITs are
    ///     outstanding before they are resent, then given up.
    ///   - resubmits: how many times to resend after a silence (see `submit`).
    ///   - curve: keys when the broker requires CURVE.
    public init(endpoint: String = Wire.Endpoint.frontend, context: Context, timeout: Duration = .seconds(5),
                resubmits: Int = 1, windowBytes: Int = 256 << 20, curve: CurveClientKeys? = nil) throws(ClientError) {
        channel = try Channel(context: context, endpoint: endpoint, role: .broker, timeout: timeout, curve: curve)
        self.resubmits = max(0, resubmits)
        self.windowBytes = max(1, windowBytes)
    }

    /// The broker frontend this producer talks to.
    public var endpoint: String { channel.endpoint }

    private struct Pending {
        var request: SubmitRequest
        var bytes: Int
    }

    /// Submits jobs, keeping up to `window` SUBMITs unanswered at once
    /// (pipelining), and calls `onReply` once for each job as its answer
    /// arrives. Answers are matched by request id, so they may come in any
    /// order; `onReply` runs on the calling thread.
    ///
    /// A job whose image cannot be read, or whose fields DRK1 cannot carry,
    /// gets `.failed` without being sent; the others go on.
    ///
    /// When the broker sends nothing for `timeout` while SUBMITs are
    /// outstanding, they are sent again with the same request ids and
    /// submit keys (up to `resubmits` times); the first answer for an id
    /// counts. A job without a submit key gets a fresh ULID as its key
    /// before it is first sent, so a resent job that the broker had in fact
    /// received is answered with the same job, not queued twice. After the last resend, every
    /// outstanding job gets `.failed` (kind `.timeout`), and `submit` throws
    /// the timeout. The same happens when a SUBMIT cannot even be queued
    /// within `timeout` (no broker listening). Jobs not yet taken from
    /// `jobs` are not reported.
    ///
    /// - Returns: counts, and the first accepted event seq for `EventFollower`.
    @discardableResult
    public func submit(
        _ jobs: some Sequence<SubmitRequest>,
        window: Int = 256,
        onReply: (SubmitRequest, SubmitResult) -> Void
    ) throws(ClientError) -> SubmitSummary {
        guard window >= 1 else {
            throw ClientError(.invalidArgument, "the submit window must be at least 1, got \(window)")
        }
        var summary = SubmitSummary()
        var outstanding: [UInt64: Pending] = [:]
        var order: [UInt64] = []  // send order, for reporting abandoned jobs in order
        var bytesInFlight = 0
        var silentSince = ContinuousClock.now
        var resendsLeft = resubmits
        var iterator = jobs.makeIterator()
        var exhausted = false

        func report(_ request: SubmitRequest, _ result: SubmitResult) {
            switch result {
            case .accepted(_, let seq):
                summary.accepted += 1
                summary.firstEventSeq = min(summary.firstEventSeq ?? seq, seq)
            case .rejected: summary.rejected += 1
            case .failed: summary.failed += 1
            }
            onReply(request, result)
        }

        func abandon(_ error: ClientError) -> ClientError {
            for id in order {
                if let pending = outstanding.removeValue(forKey: id) { report(pending.request, .failed(error)) }
            }
            return error
        }

        func handle(_ frames: [[UInt8]]) throws(ClientError) {
            let message: FrontendMessage
            do {
                message = try FrontendMessage.decode(frames)
            } catch {
                let id = channel.rejectMalformed(frames, error)
                if let pending = outstanding.removeValue(forKey: id) {
                    bytesInFlight -= pending.bytes
                    silentSince = ContinuousClock.now
                    report(pending.request, .failed(ClientError(.protocolViolation,
                        "the broker at \(channel.endpoint) sent a malformed answer to SUBMIT: \(error.reason)")))
                }
                return
            }
            let result: SubmitResult
            switch message {
            case .accepted(let m): result = .accepted(jobID: m.jobID, eventSeq: m.eventSeq)
            case .rejected(let m): result = .rejected(code: m.code, reason: m.reason)
            case .error(let m) where m.requestID == 0:
                // The broker could not even tell which request it was: every
                // outstanding SUBMIT is in doubt.
                throw abandon(ClientError.server(m, from: .broker, doing: "a SUBMIT"))
            case .error(let m): result = .rejected(code: m.code, reason: m.reason)
            default:
                return  // an answer to something else, or stray: not ours to act on
            }
            guard let id = message.requestID, let pending = outstanding.removeValue(forKey: id) else {
                return  // a second answer to a resent SUBMIT, or a stale one
            }
            bytesInFlight -= pending.bytes
            silentSince = ContinuousClock.now
            report(pending.request, result)
        }

        while true {
            // Fill the window.
            while !exhausted, outstanding.count < window, outstanding.isEmpty || bytesInFlight < windowBytes {
                guard var request = iterator.next() else {
                    exhausted = true
                    break
                }
                if request.submitKey == nil { request.submitKey = ULIDGenerator.shared.next().description }
                let id = channel.nextRequestID()
                let submit: Submit
                let size: Int
                do {
                    (submit, size) = try request.message(requestID: id)
                } catch {
                    report(request, .failed(error))
                    continue
                }
                do {
                    try channel.send(submit.frames(), what: "SUBMIT")
                } catch {
                    report(request, .failed(error))  // not queued: ZeroMQ refused it
                    throw abandon(error)
                }
                if outstanding.isEmpty { silentSince = ContinuousClock.now }
                outstanding[id] = Pending(request: request, bytes: size)
                order.append(id)
                bytesInFlight += size
                // Take answers that are already here before sending more.
                while let frames = try channel.receiveNow() {
                    try handle(frames)
                }
            }
            if outstanding.isEmpty {
                if exhausted { return summary }
                continue
            }
            if order.count > 4 * outstanding.count + 64 {
                order.removeAll { outstanding[$0] == nil }
            }

            // Wait for answers, at most until the broker has been silent for `timeout`.
            if let frames = try channel.receive(until: silentSince + channel.timeout) {
                try handle(frames)
                while let more = try channel.receiveNow() {
                    try handle(more)
                }
                continue
            }
            guard resendsLeft > 0 else {
                let error = ClientError.noAnswer(
                    from: .broker, at: channel.endpoint, within: channel.timeout,
                    detail: "\(outstanding.count) submit(s) unanswered; their jobs may or may not be queued")
                throw abandon(error)
            }
            resendsLeft -= 1
            order.removeAll { outstanding[$0] == nil }
            for id in order {
                guard let pending = outstanding[id] else { continue }
                do {
                    let (submit, _) = try pending.request.message(requestID: id)
                    try channel.send(submit.frames(), what: "SUBMIT")
                    summary.resent += 1
                } catch {
                    if error.kind == .timeout { throw abandon(error) }
                    outstanding[id] = nil
                    bytesInFlight -= pending.bytes
                    report(pending.request, .failed(error))
                }
            }
            silentSince = ContinuousClock.now
        }

    }

    /// Submits one job and waits for its answer.
    public func submit(_ job: SubmitRequest) throws(ClientError) -> SubmitResult {
        var result: SubmitResult = .failed(ClientError(.protocolViolation, "no answer recorded"))
        try submit(CollectionOfOne(job), window: 1) { _, r in result = r }
        return result
    }
}

@available(*, unavailable, message: "a client owns a ZeroMQ socket and belongs to one thread; make one per thread")
extension Producer: Sendable {}
