import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ

/// A client of the storage node: list, fetch, delete records, read totals.
///
/// Blocking: every call sends one request and waits for its answer, at most
/// `timeout`, then throws `ClientError` of kind `.timeout`; when nothing
/// listens at the endpoint, once connection attempts have failed for
/// `Channel.askersGrace` instead. Threading: a
/// `StoreClient` owns a ZeroMQ socket, so it belongs to the thread that
/// created it and is not `Sendable`; make one per thread.
public final class StoreClient {
    let channel: Channel

    /// Connects (in the background) to the storage node.
    /// - Parameters:
    ///   - endpoint: the storage node, `Wire.Endpoint.store` by default.
    ///   - timeout: how long each call waits for its answer. Fetching a large
    ///     full-resolution image over a slow link may need more.
    ///   - curve: keys when the storage node requires CURVE.
    public init(endpoint: String = Wire.Endpoint.store, context: Context, timeout: Duration = .seconds(5),
                curve: CurveClientKeys? = nil) throws(ClientError) {
        channel = try Channel(context: context, endpoint: endpoint, role: .store, timeout: timeout, curve: curve,
                              refusedGrace: Channel.askersGrace)
    }

    /// The storage node this client talks to.
    public var endpoint: String { channel.endpoint }

    private func call(_ what: String, _ build: (UInt64) -> [[UInt8]]) throws(ClientError) -> StoreMessage {
        let reply = try channel.call(what, build: build, decode: StoreMessage.decode, requestID: \.requestID)
        if case .error(let e) = reply { throw ClientError.server(e, from: .store, doing: what) }
        return reply
    }

    private func unexpected(_ reply: StoreMessage, to what: String) -> ClientError {
        ClientError(.protocolViolation, "the storage node at \(endpoint) answered \(what) with \(reply.command.name)")
    }

    /// Records, newest first (LIST).
    /// - Parameters:
    ///   - limit: 1…1000 records.
    ///   - before: only records older than this record id (the last id of the
    ///     previous page); nil starts at the newest.
    public func list(limit: Int = 100, before: ULID? = nil) throws(ClientError) -> [RecordInfo] {
        guard limit >= 1, limit <= Int(Wire.Limit.maxListLimit) else {
            throw ClientError(.invalidArgument, "a list page holds 1…\(Wire.Limit.maxListLimit) records, got \(limit)")
        }
        let reply = try call("LIST") { ListRequest(requestID: $0, limit: UInt32(limit), before: before).frames() }
        guard case .listReply(let r) = reply else { throw unexpected(reply, to: "LIST") }
        return r.records
    }

    /// Records newest first, `limit` of them (nil: all), older than
    /// `before` if given, read page by page (a LIST answers at most
    /// `Wire.Limit.maxListLimit`); `page` gets each page as it arrives, so
    /// a listing of any length holds one page in memory. Records created
    /// while it runs are not listed (the pages go back in time from the
    /// first), and none is listed twice: each page starts below the last.
    public func listPages(limit: Int? = nil, before: ULID? = nil, pageSize: Int = Int(Wire.Limit.maxListLimit),
                          _ page: ([RecordInfo]) throws -> Void) throws {
        var cursor = before
        var remaining = limit ?? Int.max
        while remaining > 0 {
            let size = min(remaining, pageSize)
            let records = try list(limit: size, before: cursor)
            if !records.isEmpty { try page(records) }
            remaining -= records.count
            guard records.count == size, let last = records.last else { return }
            cursor = last.id
        }
    }

    /// One image of a record (GET), by record id or job id. The bytes are
    /// checked against the record's size and SHA-256 before they are
    /// returned; a mismatch throws `ClientError` of kind `.integrity`.
    public func get(_ id: ULID, variant: Variant = .full) throws(ClientError) -> (record: RecordInfo, image: [UInt8]) {
        let what = "GET \(id) (\(variant))"
        let reply = try call(what) { GetRequest(requestID: $0, id: id, variant: variant).frames() }
        guard case .getReply(let r) = reply else { throw unexpected(reply, to: "GET") }
        guard r.variant == variant else {
            throw ClientError(.protocolViolation, "the storage node at \(endpoint) answered \(what) with the \(r.variant) image")
        }
        guard r.record.id == id || r.record.jobID == id else {
            throw ClientError(.protocolViolation, "the storage node at \(endpoint) answered \(what) with record \(r.record.id) of job \(r.record.jobID)")
        }
        let info = variant == .full ? r.record.full : r.record.thumb
        guard UInt64(r.image.count) == info.bytes else {
            throw ClientError(.integrity, "record \(r.record.id) (\(variant)): received \(r.image.count) bytes, the record says \(info.bytes)")
        }
        let digest = SHA256.hex(r.image)
        guard digest == info.sha256.lowercased() else {
            throw ClientError(.integrity, "record \(r.record.id) (\(variant)): sha256 of the received bytes is \(digest), the record says \(info.sha256)")
        }
        return (r.record, r.image)
    }

    /// Deletes a record, by record id or job id (DELETE). Returns the number
    /// of records deleted (1); a missing one throws `.server(.notFound)`.
    @discardableResult
    public func delete(_ id: ULID) throws(ClientError) -> UInt64 {
        let reply = try call("DELETE \(id)") { DeleteRequest(requestID: $0, id: id).frames() }
        guard case .ok(let r) = reply else { throw unexpected(reply, to: "DELETE") }
        return r.count
    }

    /// The storage node's totals (STATS).
    public func stats() throws(ClientError) -> StoreStats {
        let reply = try call("STATS") { StatsRequest(requestID: $0).frames() }
        guard case .statsReply(let r) = reply else { throw unexpected(reply, to: "STATS") }
        return r.stats
    }

    /// Checks that the storage node answers (PING) and returns the round-trip time.
    @discardableResult
    public func ping() throws(ClientError) -> Duration {
        let start = ContinuousClock.now
        let reply = try call("PING") { Ping(requestID: $0).frames() }
        guard case .pong = reply else { throw unexpected(reply, to: "PING") }
        return ContinuousClock.now - start
    }
}

@available(*, unavailable, message: "a client owns a ZeroMQ socket and belongs to one thread; make one per thread")
extension StoreClient: Sendable {}
