import DarkroomProtocol
import DarkroomZMQ

/// Administration of the broker over its frontend: status, the dead-letter
/// set, liveness.
///
/// Blocking: every call sends one request and waits for its answer, at most
/// `timeout`, then throws `ClientError` of kind `.timeout`; when nothing
/// listens at the endpoint, once connection attempts have failed for
/// `Channel.askersGrace` instead. Threading: an
/// `Admin` owns a ZeroMQ socket, so it belongs to the thread that created it
/// and is not `Sendable`; make one per thread.
public final class Admin {
    let channel: Channel

    /// Connects (in the background) to the broker frontend.
    /// - Parameters:
    ///   - endpoint: the broker frontend, `Wire.Endpoint.frontend` by default.
    ///   - timeout: how long each call waits for its answer.
    ///   - curve: keys when the broker requires CURVE.
    public init(endpoint: String = Wire.Endpoint.frontend, context: Context, timeout: Duration = .seconds(5),
                curve: CurveClientKeys? = nil) throws(ClientError) {
        channel = try Channel(context: context, endpoint: endpoint, role: .broker, timeout: timeout, curve: curve,
                              refusedGrace: Channel.askersGrace)
    }

    /// The broker frontend this client talks to.
    public var endpoint: String { channel.endpoint }

    private func call(_ what: String, _ build: (UInt64) -> [[UInt8]]) throws(ClientError) -> FrontendMessage {
        let reply = try channel.call(what, build: build, decode: FrontendMessage.decode, requestID: \.requestID)
        if case .error(let e) = reply { throw ClientError.server(e, from: .broker, doing: what) }
        return reply
    }

    private func unexpected(_ reply: FrontendMessage, to what: String) -> ClientError {
        ClientError(.protocolViolation, "the broker at \(endpoint) answered \(what) with \(reply.command.name)")
    }

    /// The broker's queue, workers and rates (STATUS).
    public func status() throws(ClientError) -> BrokerStatus {
        let reply = try call("STATUS") { StatusRequest(requestID: $0).frames() }
        guard case .statusReply(let r) = reply else { throw unexpected(reply, to: "STATUS") }
        return r.status
    }

    /// One page of the dead-letter set, oldest job first (DEAD-LIST).
    /// - Parameters:
    ///   - limit: 1…1000 jobs.
    ///   - after: the last job id of the previous page, nil for the first page.
    public func deadList(limit: Int = 100, after: ULID? = nil) throws(ClientError) -> DeadList {
        guard limit >= 1, limit <= Int(Wire.Limit.maxListLimit) else {
            throw ClientError(.invalidArgument, "a dead-list page holds 1…\(Wire.Limit.maxListLimit) jobs, got \(limit)")
        }
        let reply = try call("DEAD-LIST") { DeadListRequest(requestID: $0, limit: UInt32(limit), after: after).frames() }
        guard case .deadListReply(let r) = reply else { throw unexpected(reply, to: "DEAD-LIST") }
        return r.list
    }

    /// A page of the jobs waiting or running (JOB-LIST): `limit` jobs in
    /// `state` after the first `offset`, from the broker's memory.
    public func jobList(_ state: JobListState, offset: Int = 0, limit: Int = 100, after: JobListCursor? = nil) throws(ClientError) -> JobList {
        guard limit >= 1, limit <= Int(Wire.Limit.maxListLimit), offset >= 0, offset <= Int(UInt32.max) else {
            throw ClientError(.invalidArgument, "a job-list page holds 1…\(Wire.Limit.maxListLimit) jobs after an offset of 0…\(UInt32.max)")
        }
        let reply = try call("JOB-LIST") { JobListRequest(requestID: $0, state: state, offset: UInt32(offset), limit: UInt32(limit), after: after).frames() }
        guard case .jobListReply(let r) = reply else { throw unexpected(reply, to: "JOB-LIST") }
        return r.list
    }

    /// Every dead job, page by page.
    public func deadListAll(pageSize: Int = 1000) throws(ClientError) -> [DeadJob] {
        var jobs: [DeadJob] = []
        var after: ULID? = nil
        while true {
            let page = try deadList(limit: pageSize, after: after)
            jobs += page.jobs
            guard let last = page.jobs.last, page.jobs.count >= pageSize else { return jobs }
            if let previous = after, last.jobID <= previous {
                throw ClientError(.protocolViolation, "the broker at \(endpoint) returned a dead-list page that does not advance past \(previous)")
            }
            after = last.jobID
        }
    }

    /// Queues dead jobs again (DEAD-RETRY); returns how many were requeued.
    /// A single job that is not dead throws `.server(.notFound)`.
    @discardableResult
    public func deadRetry(_ target: DeadTarget) throws(ClientError) -> UInt64 {
        let reply = try call("DEAD-RETRY \(target)") { DeadRetry(requestID: $0, target: target).frames() }
        guard case .ok(let r) = reply else { throw unexpected(reply, to: "DEAD-RETRY") }
        return r.count
    }

    /// Deletes dead jobs for good (DEAD-DISCARD); returns how many.
    /// A single job that is not dead throws `.server(.notFound)`.
    @discardableResult
    public func deadDiscard(_ target: DeadTarget) throws(ClientError) -> UInt64 {
        let reply = try call("DEAD-DISCARD \(target)") { DeadDiscard(requestID: $0, target: target).frames() }
        guard case .ok(let r) = reply else { throw unexpected(reply, to: "DEAD-DISCARD") }
        return r.count
    }

    /// One job's story (JOB-INFO): its state, attempts and events. A job
    /// the broker does not know throws `.server(.notFound)`.
    public func jobStory(_ id: ULID) throws(ClientError) -> JobStory {
        let reply = try call("JOB-INFO \(id)") { JobInfoRequest(requestID: $0, jobID: id).frames() }
        guard case .jobInfoReply(let r) = reply else { throw unexpected(reply, to: "JOB-INFO") }
        return r.story
    }

    /// Cancels jobs (CANCEL): every queued job, or one job. Returns how many
    /// were cancelled, or (a running job) asked to stop; the job's
    /// `cancelled` event, or its story, tells when it has. A job that is
    /// finished, dead or unknown throws `.server(.notFound)` saying which.
    @discardableResult
    public func cancel(_ target: CancelTarget) throws(ClientError) -> UInt64 {
        let reply = try call("CANCEL \(target)") { CancelRequest(requestID: $0, target: target).frames() }
        guard case .ok(let r) = reply else { throw unexpected(reply, to: "CANCEL") }
        return r.count
    }

    /// Pauses dispatch (PAUSE, `paused`) or resumes it (RESUME). Returns
    /// whether it changed: false when dispatch already was that way.
    @discardableResult
    public func setPaused(_ paused: Bool) throws(ClientError) -> Bool {
        let name = paused ? "PAUSE" : "RESUME"
        let reply = try call(name) { id in paused ? PauseRequest(requestID: id).frames() : ResumeRequest(requestID: id).frames() }
        guard case .ok(let r) = reply else { throw unexpected(reply, to: name) }
        return r.count > 0
    }

    /// Checks that the broker answers (PING) and returns the round-trip time.
    @discardableResult
    public func ping() throws(ClientError) -> Duration {
        let start = ContinuousClock.now
        let reply = try call("PING") { Ping(requestID: $0).frames() }
        guard case .pong = reply else { throw unexpected(reply, to: "PING") }
        return ContinuousClock.now - start
    }
}

@available(*, unavailable, message: "a client owns a ZeroMQ socket and belongs to one thread; make one per thread")
extension Admin: Sendable {}
