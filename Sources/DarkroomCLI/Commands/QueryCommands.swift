import DarkroomClient
import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Synchronization

/// `darkroom watch`: follows the event stream without gaps.
///
/// One cursor, the follower's, says which event is printed next; it moves
/// as each event is printed and survives every timeout, reconnect and
/// replay, so each seq is printed once and in order whatever the broker or
/// the network does. A broker that does not answer is asked again with
/// backoff for as long as --duration allows, and said so once on stderr
/// per outage, and once more when it is back.
enum WatchCommand {
    static let spec = CommandSpec(
        name: "watch",
        abstract: "Follow job events (accepted, started, stored, retrying, failed, dead).",
        discussion: """
        Prints events as they happen. With --from SEQ it first replays every event
        from that sequence number, then continues live; without it, it starts after
        the broker's newest event. Missed events (a dropped connection, a full
        buffer) are fetched again, so none is ever skipped or printed twice. When
        the broker stops answering, watch says so on stderr and keeps asking (with
        backoff) until it is back, then replays from the first event not printed.

        --kind and --job keep only some events: --kind dead,retrying shows what
        goes wrong, --job ID (given more than once for several) one job's life.
        Events left out are not printed or counted (--count counts those shown).
        Kinds: accepted, started, stored, retrying, failed, dead, revived,
        discarded, cancelled.
        """,
        options: [
            .value("from", "SEQ", help: "Replay from this event sequence number (0 or 1 = from the first event kept).", default: "only new events"),
            .value("kind", "KINDS", help: "Only events of these kinds, comma-separated (say dead,retrying)."),
            .value("job", "JOB_ID", help: "Only this job's events; give it more than once for several.", repeatable: true),
            .value("count", "N", help: "Exit after N events."),
            .value("duration", "SECONDS", help: "Exit after this many seconds."),
            ClientOptions.json,
            ClientOptions.broker,
            ClientOptions.events,
            ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey,
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        var start = FollowStart.latest
        if let text = args.value("from") {
            // Sequence numbers start at 1; 0 reads as "from the first".
            guard let seq = UInt64(text) else { throw UsageError("--from must be an event sequence number (0 or 1 for the first), not \"\(text)\"") }
            start = .seq(max(1, seq))
        }
        let limit = args.value("count") == nil ? nil : try args.int("count", default: 0, range: 1...Int.max)
        let duration: Duration? = args.value("duration") == nil ? nil : .seconds(try args.int("duration", default: 0, range: 1...1_000_000))
        let json = args.flag("json")
        let kinds = try args.value("kind").map(Self.kinds)
        let jobs = Set(try (args.values["job"] ?? []).map { try ClientOptions.id($0, what: "job id") })
        let context = try Context()
        do {
            let follower = try EventFollower(frontend: ClientOptions.brokerEndpoint(args), events: ClientOptions.eventsEndpoint(args), context: context, timeout: try ClientOptions.timeout(args), curve: try ClientOptions.brokerCurve(args))
            // Kinds not wanted are passed over as they are read, never decoded whole.
            if let kinds { follower.skippedKinds = Set(EventKind.allCases).subtracting(kinds) }
            follower.onPruned = { range in
                Console.err("watch: events \(range.lowerBound)-\(range.upperBound) are no longer kept (the broker's --retention pruned them); going on from \(range.upperBound + 1)")
            }
            let endpoint = follower.frontendEndpoint
            follower.onBrokerContact = { contact in
                switch contact {
                case let .lost(error, resumeSeq):
                    let problem = error.kind == .timeout ? "not answering" : "failing (\(error.message))"
                    let next = resumeSeq.map { "events are replayed from seq \($0) once it is back" } ?? "watch starts after its newest event once it is back"
                    Console.err("watch: broker at \(endpoint) \(problem); still trying (\(next))")
                case let .regained(silence, resumeSeq):
                    Console.err("watch: broker back after \(seconds(silence)); replaying from seq \(resumeSeq)")
                }
            }
            var seen = 0
            _ = try follower.follow(from: start, for: duration, retry: .standard) { event in
                if !jobs.isEmpty && !jobs.contains(event.jobID) { return .continue }
                Console.out(json ? Format.eventJSON(event) : Format.eventLine(event))
                seen += 1
                if let limit, seen >= limit { return .stop }
                return .continue
            }
            return 0
        } catch {
            throw error.runtime
        }
    }

    /// The kinds named in a --kind list.
    static func kinds(_ text: String) throws -> Set<EventKind> {
        let names = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        var kinds: Set<EventKind> = []
        for name in names {
            guard let kind = EventKind(name: name) else {
                let known = EventKind.allCases.map(\.description).joined(separator: ", ")
                throw UsageError("--kind: unknown event kind \"\(name)\"; the kinds are \(known)")
            }
            kinds.insert(kind)
        }
        return kinds
    }

    /// "12 s", "2.5 s": how long the broker was silent, as people read it.
    static func seconds(_ duration: Duration) -> String {
        let tenths = Int((duration.fractionalSeconds * 10).rounded())
        return tenths >= 100 || tenths % 10 == 0 ? "\((tenths + 5) / 10) s" : "\(tenths / 10).\(tenths % 10) s"
    }
}

/// `darkroom status`: the broker's view of the queue and workers.
enum StatusCommand {
    static let spec = CommandSpec(
        name: "status",
        abstract: "Show queue depth, jobs in flight, dead jobs, workers, rates and what the storage node holds.",
        discussion: """
        With --check, prints nothing on success and exits 0 when the broker and
        the storage node answer (only the one named by --only, if given), 1
        otherwise: an exec probe for readiness and liveness. --only worker
        checks what a worker reaches, with a worker's key: the broker's
        backend (--broker names it then, by default tcp://127.0.0.1:7701) and
        the storage node. A server can check itself with its own key pair:
        --curve-key its secret key file, --server-key its public one.
        """,
        options: [
            ClientOptions.json,
            .flag("check", help: "Exit 0 if the services answer, 1 if not."),
            .value("only", "broker|store|worker", help: "With --check, check only this service; worker: the broker's backend and the storage node, as a worker reaches them."),
            ClientOptions.broker,
            ClientOptions.store,
            ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey,
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let context = try Context()
        let timeout = try ClientOptions.timeout(args)
        if args.value("only") != nil, !args.flag("check") {
            throw UsageError("--only goes with --check (without it, status shows the broker and the storage node)")
        }
        let only = args.value("only")
        if let only, only != "broker", only != "store", only != "worker" {
            throw UsageError("--only must be broker, store or worker, not \"\(only)\"")
        }
        // Keys only for the servers checked: a storage node's probe gives
        // the store's key alone (--store-key), the broker's --server-key.
        let brokerCurve = only == "store" ? nil : try ClientOptions.brokerCurve(args)
        let storeCurve = only == "broker" ? nil : try ClientOptions.storeCurve(args)
        if args.flag("check") {
            // Each server is asked on a thread of its own (a client's socket
            // belongs to the thread that makes it), so one that is down
            // costs its own wait, not the sum of both.
            var probes: [(name: String, ping: @Sendable () throws(ClientError) -> Void)] = []
            let brokerEndpoint = ClientOptions.brokerEndpoint(args), storeEndpoint = ClientOptions.storeEndpoint(args)
            if only == "worker" {
                let backend = args.value("broker") ?? Wire.Endpoint.backend
                probes.append(("broker backend", { () throws(ClientError) in
                    try BackendProbe(endpoint: backend, context: context, timeout: timeout, curve: brokerCurve).ping()
                }))
            } else if only != "store" {
                probes.append(("broker", { () throws(ClientError) in
                    _ = try Admin(endpoint: brokerEndpoint, context: context, timeout: timeout, curve: brokerCurve).ping()
                }))
            }
            if only != "broker" {
                probes.append(("store", { () throws(ClientError) in
                    _ = try StoreClient(endpoint: storeEndpoint, context: context, timeout: timeout, curve: storeCurve).ping()
                }))
            }
            let failures = Mutex<[Int: String]>([:])
            let done = DispatchGroup()
            for (index, probe) in probes.enumerated() {
                done.enter()
                Thread {
                    do throws(ClientError) { try probe.ping() } catch { failures.withLock { $0[index] = error.message } }
                    done.leave()
                }.start()
            }
            done.wait()
            let failed = failures.withLock { $0 }
            for (index, probe) in probes.enumerated() {
                if let message = failed[index] { Console.err("\(probe.name): \(message)") }
            }
            return failed.isEmpty ? 0 : 1
        }
        let status: BrokerStatus
        do {
            status = try Admin(endpoint: ClientOptions.brokerEndpoint(args), context: context, timeout: timeout, curve: brokerCurve).status()
        } catch {
            throw error.runtime
        }
        // The storage node's totals, when it answers soon: a broker on its
        // own still gets its status.
        let storeEndpoint = ClientOptions.storeEndpoint(args)
        let store: Result<StoreStats, ClientError>
        do {
            let client = try StoreClient(endpoint: storeEndpoint, context: context, timeout: min(timeout, .seconds(2)), curve: storeCurve)
            store = .success(try client.stats())
        } catch {
            store = .failure(error)
        }
        if args.flag("json") {
            // The broker's status object, plus "store": its totals or null
            // and "storeError" when it did not answer.
            var object = (try? JSONSerialization.jsonObject(with: Data(JSONPayload.encode(status)))) as? [String: Any] ?? [:]
            switch store {
            case .success(let stats):
                object["store"] = try? JSONSerialization.jsonObject(with: Data(JSONPayload.encode(stats)))
            case .failure(let error):
                object["store"] = NSNull()
                object["storeError"] = error.message
            }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data(JSONPayload.encode(status))
            Console.out(String(decoding: data, as: UTF8.self))
            return 0
        }
        let q = status.queue
        let readyTotal = q.ready.reduce(0, +)
        var out = "queue: \(readyTotal) ready, \(q.delayed) delayed (retry backoff or scheduled), \(q.inFlight) in flight, \(q.dead) dead (limit \(q.limit))\n"
        if let since = q.pausedSince {
            out += "dispatch: PAUSED \(PauseCommand.held(since: since))\n"
        }
        let byPriority = q.ready.enumerated().filter { $0.element > 0 }.map { "p\($0.offset)=\($0.element)" }
        if !byPriority.isEmpty { out += "ready by priority: " + byPriority.joined(separator: " ") + "\n" }
        out += String(format: "rates (last %ds): %.1f accepted/s, %.1f stored/s, %.1f failed/s\n", status.rates.windowSeconds, status.rates.accepted, status.rates.stored, status.rates.failed)
        out += "events: last seq \(status.eventSeq)\n"
        out += "workers: \(status.workers.count)\n"
        for w in status.workers {
            out += "  \(w.id.padded(to: 28))host \(w.host) pid \(w.pid)  slots \(w.slots) busy \(w.busy)  heartbeat \(Format.age(w.lastHeartbeat, now: status.time))\n"
        }
        switch store {
        case .success(let stats):
            out += "store: \(stats.records) record(s), \(Format.bytes(stats.fullBytes)) full-resolution + \(Format.bytes(stats.thumbBytes)) thumbnails; "
            out += "\(Format.bytes(stats.inlineBytes)) inside the database (\(Format.bytes(stats.databaseBytes)) on disk), "
            out += "\(Format.bytes(stats.externalBytes)) in \(stats.externalFiles) external file(s)\n"
        case .failure(let error):
            out += "store: no answer from \(storeEndpoint) (\(error.message))\n"
        }
        Console.out(String(out.dropLast()))
        return 0
    }
}

/// `darkroom ls`: the records on the storage node, newest first, as many
/// as asked for: pages of LIST are read one after another (DRK1 caps a page
/// at `Wire.Limit.maxListLimit` records) and printed as they come.
enum ListCommand {
    static let spec = CommandSpec(
        name: "ls",
        abstract: "List stored records (newest first): each a full-resolution image and its thumbnail.",
        discussion: """
        Reads as many pages from the storage node as --limit asks (or all of
        them with --all), newest first. --before RECORD_ID continues after
        the last record of an earlier listing: without --json, a listing cut
        short by --limit ends with the command that continues it.
        """,
        options: [
            .value("limit", short: "n", "N", help: "How many records (any number).", default: "20"),
            .flag("all", help: "Every record, however many."),
            .value("before", "RECORD_ID", help: "Only records older than this one (to continue a listing)."),
            ClientOptions.json,
            ClientOptions.store,
            ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.storeServerKey, ClientOptions.storeKey,
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        if args.flag("all"), args.value("limit") != nil { throw UsageError("--all lists every record; leave out --limit") }
        let limit: Int? = args.flag("all") ? nil : try args.int("limit", default: 20, range: 1...Int.max)
        let before = try args.value("before").map { try ClientOptions.id($0, what: "--before record id") }
        let json = args.flag("json")
        let context = try Context()
        var printed = 0
        var last: RecordInfo?
        do {
            let client = try StoreClient(endpoint: ClientOptions.storeEndpoint(args), context: context, timeout: try ClientOptions.timeout(args), curve: try ClientOptions.storeCurve(args))
            try client.listPages(limit: limit, before: before) { page in
                for record in page {
                    Console.out(json ? jsonLine(record) : line(record))
                }
                printed += page.count
                last = page.last ?? last
            }
        } catch {
            throw error.runtime
        }
        if !json {
            if printed == 0 {
                Console.err(before == nil ? "no records yet" : "no records older than \(before!)")
            } else if let limit, printed == limit, let last {
                // The next page as this one was asked for: the same node.
                let store = args.value("store").map { " --store \($0)" } ?? ""
                Console.err("(first \(printed); more may follow: darkroom ls\(store) --limit \(limit) --before \(last.id))")
            }
        }
        return 0
    }

    static func line(_ r: RecordInfo) -> String {
        "\(r.id)  job \(r.jobID)  \(r.full.width)x\(r.full.height) \(formatted(r.full))  thumb \(r.thumb.width)x\(r.thumb.height) \(formatted(r.thumb))  \(Format.time(r.created))  \(r.source)"
    }

    /// An image's size in bytes, and its format when it is not a JPEG.
    private static func formatted(_ image: ImageInfo) -> String {
        image.format == "jpeg" ? formatBytes(Int(image.bytes)) : "\(image.format) \(formatBytes(Int(image.bytes)))"
    }
}

/// `darkroom get`: writes a stored image to a file, byte for byte.
enum GetCommand {
    static let spec = CommandSpec(
        name: "get",
        abstract: "Write a stored image (full resolution or thumbnail) to a file.",
        discussion: "ID is a record id or a job id. The bytes are checked against the stored sha256.",
        arguments: [ArgumentSpec(name: "id", help: "Record id or job id.")],
        options: [
            .value("output", short: "o", "FILE", help: "(required) Where to write the image, JPEG, WebP, PNG or AVIF as stored ('-' for stdout)."),
            .flag("thumb", help: "Get the thumbnail instead of the full-resolution image."),
            ClientOptions.store,
            ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.storeServerKey, ClientOptions.storeKey,
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let id = try ClientOptions.id(args.positionals[0], what: "id")
        guard let output = args.value("output") else { throw UsageError("missing expected option '-o <FILE>'") }
        let context = try Context()
        let result: (record: RecordInfo, image: [UInt8])
        do {
            result = try StoreClient(endpoint: ClientOptions.storeEndpoint(args), context: context, timeout: try ClientOptions.timeout(args), curve: try ClientOptions.storeCurve(args)).get(id, variant: args.flag("thumb") ? .thumbnail : .full)
        } catch {
            throw error.runtime
        }
        if output == "-" {
            FileHandle.standardOutput.write(Data(result.image))
            return 0
        }
        try OutputFile.write(result.image, to: output)
        let info = args.flag("thumb") ? result.record.thumb : result.record.full
        Console.err("wrote \(output): \(info.format) \(info.width)x\(info.height), \(formatBytes(result.image.count)), sha256 \(info.sha256)")
        let named = (output as NSString).pathExtension.lowercased()
        let expected = info.fileExtension == "jpg" ? ["jpg", "jpeg"] : [info.fileExtension]
        if !named.isEmpty, !expected.contains(named) {
            Console.err("note: the image is a \(info.formatName) file; \(output) ends in .\(named), not .\(info.fileExtension)")
        }
        return 0
    }
}

/// `darkroom rm`: deletes a record and its thumbnail.
enum RemoveCommand {
    static let spec = CommandSpec(
        name: "rm",
        abstract: "Delete a stored record and its linked thumbnail.",
        discussion: """
        Deletes each id in turn (a record id, or the id of the job that made
        it) and says so on stderr. When the storage node stops answering, rm
        stops there: the id whose delete went unanswered may or may not be
        deleted, and the ids after it are named as not sent. Exit status 1
        when any id was not deleted.

        With --json, one object per id on stdout, in the order given: "id",
        and "status" deleted, failed, unanswered (it may or may not be
        deleted) or not_sent; all but deleted with a "reason".
        """,
        arguments: [ArgumentSpec(name: "id", help: "Record id or job id.", variadic: true)],
        options: [ClientOptions.json, ClientOptions.store, ClientOptions.timeout, ClientOptions.curveKey, ClientOptions.storeServerKey, ClientOptions.storeKey]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let ids = try args.positionals.map { try ClientOptions.id($0, what: "id") }
        let context = try Context()
        let client: StoreClient
        do {
            client = try StoreClient(endpoint: ClientOptions.storeEndpoint(args), context: context, timeout: try ClientOptions.timeout(args), curve: try ClientOptions.storeCurve(args))
        } catch {
            throw error.runtime
        }
        let json = args.flag("json")
        var failed = 0
        for (position, id) in ids.enumerated() {
            do {
                _ = try client.delete(id)
                if json {
                    Console.out(JSONObject.outcome("id", id, status: "deleted").text)
                } else {
                    Console.err("deleted \(id)")
                }
            } catch where error.kind == .timeout {
                Unanswered.report(error, ids: ids, at: position, done: "deleted", server: "the storage node", check: "darkroom ls",
                                  json: json ? "id" : nil)
                return 1
            } catch {
                failed += 1
                if json {
                    Console.out(JSONObject.outcome("id", id, status: "failed", reason: error.message).text)
                } else {
                    Console.err("\(id): \(error.message)")
                }
            }
        }
        return failed == 0 ? 0 : 1
    }
}

/// `darkroom dead`: the dead-letter set.
enum DeadCommand {
    static let spec = CommandSpec(
        name: "dead",
        abstract: "List, retry or discard jobs in the dead-letter set.",
        discussion: """
        darkroom dead                 list dead jobs with their failing step and reason
        darkroom dead retry ID|all    queue them again
        darkroom dead discard ID|all  drop them for good

        With --json, list prints one object per dead job, and retry and
        discard one object: {"requeued": N} or {"discarded": N}.
        """,
        arguments: [ArgumentSpec(name: "action", help: "list (default), retry or discard, then a job id or 'all'.", variadic: true, optional: true)],
        options: [ClientOptions.json, ClientOptions.broker, ClientOptions.timeout, ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let action = args.positionals.first ?? "list"
        // The arguments are checked before the broker is asked: a mistake
        // is a usage error with or without a broker, and an argument too
        // many is named rather than left out.
        let target: DeadTarget?
        switch action {
        case "list":
            target = nil
        case "retry", "discard":
            guard args.positionals.count >= 2 else { throw UsageError("dead \(action) needs a job id or 'all'") }
            target = args.positionals[1] == "all" ? .all : .job(try ClientOptions.id(args.positionals[1], what: "job id"))
        default:
            throw UsageError("unknown action '\(action)'; expected list, retry or discard")
        }
        let extra = args.positionals.dropFirst(target == nil ? 1 : 2)
        if !extra.isEmpty {
            let takes = target == nil ? "takes no arguments" : "takes one job id or 'all'"
            throw UsageError("unexpected argument\(extra.count == 1 ? "" : "s") \(extra.map { "'\($0)'" }.joined(separator: " ")) (dead \(action) \(takes))")
        }
        let context = try Context()
        do {
            let admin = try ClientOptions.admin(args, context: context)
            if let target {
                let n = action == "retry" ? try admin.deadRetry(target) : try admin.deadDiscard(target)
                let done = action == "retry" ? "requeued" : "discarded"
                if args.flag("json") {
                    var o = JSONObject()
                    o.set(done, Int(clamping: n))
                    Console.out(o.text)
                } else {
                    Console.err("\(done) \(n) job(s)")
                }
                return 0
            }
            let jobs = try admin.deadListAll()
            if args.flag("json") {
                for job in jobs { Console.out(jsonLine(job)) }
            } else if jobs.isEmpty {
                Console.err("the dead-letter set is empty")
            } else {
                for job in jobs {
                    let step = job.stepIndex >= 1 ? "step \(job.stepIndex) \(job.step): " : ""
                    // A job that ran out of retries has a reason that already
                    // says so ("gave up after 3 attempt(s): ..."): not twice.
                    let count = job.reason.hasPrefix("gave up after ") ? "" : " after \(job.attempts) attempt(s)"
                    Console.out("\(job.jobID) \(job.source)\(count): \(step)\(job.reason)")
                }
            }
            return 0
        } catch let error as ClientError {
            throw error.runtime
        }
    }
}
