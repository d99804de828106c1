import DarkroomProtocol
import DarkroomZMQ

/// What the event handler wants next.
public enum FollowDecision: Sendable, Hashable {
    case `continue`
    case stop
}

/// How a `follow` call ended.
public struct FollowResult: Sendable, Equatable {
    public enum Ending: Sendable, Hashable {
        /// The handler returned `.stop`.
        case stopped
        /// The `for` duration passed.
        case durationElapsed
    }

    public var ending: Ending
    /// The seq of the last event delivered by this call; `from − 1` (the
    /// broker's head at the start, for "latest") when none was.
    public var lastSeq: UInt64
    /// Events delivered by this call.
    public var delivered: Int
    /// Ranges of seqs the broker no longer had when asked (pruned by its
    /// retention); they were skipped. Empty unless following from far back.
    public var pruned: [ClosedRange<UInt64>]
}

/// How a job ended, for `waitForJobs`.
public enum JobOutcome: Sendable, Equatable {
    /// The result is on the storage node (the record id from the event).
    case stored(recordID: ULID?)
    /// The job is in the dead-letter set, with its last failure.
    case dead(FailureDetail?)
}

/// Follows the broker's event stream and delivers every event exactly once,
/// in seq order, with no gaps.
///
/// It subscribes to the events socket (SUB, the batched EVENTS form) and holds a DEALER on the
/// frontend for REPLAY. `follow` first catches up with REPLAY (page by page)
/// while buffering live events, then delivers live events; whenever a live
/// event's seq skips ahead (a high-water-mark drop or a reconnect) it fills
/// the gap with REPLAY before delivering. When nothing arrives for
/// `idleCheck`, it asks the broker with a REPLAY whether anything was
/// missed, so a lost last event is still delivered.
///
/// Blocking: `follow` runs the handler on the calling thread until the
/// handler stops it or the duration passes. When the broker stays silent
/// for `timeout` during a REPLAY, `follow` throws `.timeout`; resume with
/// `follow(from: lastDeliveredSeq + 1)`. Threading: an `EventFollower` owns
/// ZeroMQ sockets, so it belongs to the thread that created it and is not
/// `Sendable`; make one per thread.
public final class EventFollower {
    private let context: Context
    private let curve: CurveClientKeys?
    private var channel: Channel
    private let subscriber: Socket
    private var poller = Poller()
    /// Whether the frontend socket may still receive the rest of an
    /// abandoned REPLAY (the handler stopped in the middle of one).
    private var replayAbandoned = false
    /// How long to wait, with nothing arriving, before asking the broker
    /// whether events were missed.
    public var idleCheck: Duration = .seconds(1)
    /// The most events to ask for in one REPLAY; 0 lets the broker choose.
    /// Kept under ZeroMQ's default high-water mark (1000 messages), which a
    /// ROUTER silently drops beyond: a page that fits arrives whole.
    public var replayPageLimit: UInt32 = 500
    /// Messages the frontend socket may queue: replay pages arrive in bursts.
    static let replayQueueDepth = 100_000
    /// The seq of the last event delivered, by any `follow` call.
    public private(set) var lastDeliveredSeq: UInt64?
    /// Called (on the calling thread, before the events that follow) with
    /// each range of seqs the broker no longer has: pruned by its retention.
    public var onPruned: ((ClosedRange<UInt64>) -> Void)?

    /// Subscribes (in the background) to the broker's events socket and
    /// connects to its frontend.
    /// - Parameters:
    ///   - frontend: the broker frontend, for REPLAY and STATUS.
    ///   - events: the broker events socket.
    ///   - timeout: how long the broker may take to answer a REPLAY or STATUS.
    ///   - curve: keys when the broker requires CURVE (used on both sockets).
    public init(frontend: String = Wire.Endpoint.frontend, events: String = Wire.Endpoint.events, context: Context,
                timeout: Duration = .seconds(5), curve: CurveClientKeys? = nil) throws(ClientError) {
        self.context = context
        self.curve = curve
        channel = try Channel(context: context, endpoint: frontend, role: .broker, timeout: timeout, curve: curve,
                              receiveHighWaterMark: Self.replayQueueDepth)
        do {
            subscriber = try context.socket(.sub)
        } catch {
            throw ClientError.zmq(error, "cannot open a socket for the broker's events")
        }
        do {
            try subscriber.setLinger(milliseconds: 0)
            try subscriber.setMaxMessageSize(Wire.maxMessageSize)
            // Events are small; a deep queue makes drops (and replays) rare.
            try subscriber.setReceiveHighWaterMark(100_000)
            try subscriber.setReconnectInterval(100, maximum: 1000)
            if let curve {
                try subscriber.setCurveClient(serverKey: curve.serverKey, keyPair: curve.keyPair)
            }
            // EVENTS carry a whole broker commit per message: far cheaper
            // to receive than one EVENT per event, with the same seqs.
            try subscriber.subscribe(Wire.eventBatchTopic)
        } catch {
            throw ClientError.zmq(error, "cannot configure the socket for the broker's events")
        }
        do {
            try subscriber.connect(events)
        } catch {
            throw ClientError(.connection, "cannot connect to the broker's events at \(events): \(error)")
        }
        poller.add(subscriber)
        poller.add(channel.socket)
    }

    deinit { subscriber.close() }

    /// The broker frontend used for REPLAY.
    public var frontendEndpoint: String { channel.endpoint }

    /// Delivers events to `handler` in seq order, each exactly once, until
    /// it returns `.stop` or `duration` passes.
    ///
    /// - Parameters:
    ///   - seq: the first seq wanted (inclusive; 1 is the first event ever).
    ///     nil means "latest": only events newer than the broker's head now.
    ///   - duration: how long to follow; nil follows until the handler stops.
    public func follow(from seq: UInt64?, for duration: Duration? = nil,
                       handler: (Event) -> FollowDecision) throws(ClientError) -> FollowResult {
        if replayAbandoned { try reopenFrontend() }
        let deadline = duration.map { ContinuousClock.now + $0 }
        var state: State
        if let seq {
            state = State(next: max(1, seq))
        } else {
            let head = try brokerHead()
            state = State(next: head + 1)
        }

        var ending: FollowResult.Ending = .stopped
        try catchUp(&state, handler)
        var lastActivity = ContinuousClock.now
        while !state.stopped {
            let now = ContinuousClock.now
            if let deadline, now >= deadline {
                ending = .durationElapsed
                break
            }
            var wait = lastActivity + idleCheck - now
            if let deadline { wait = min(wait, deadline - now) }
            if wait > .zero {
                do {
                    _ = try poller.poll(timeoutMilliseconds: max(1, milliseconds(wait)))
                } catch {
                    throw ClientError.zmq(error, "cannot wait for the broker's events")
                }
            }
            if try drainLive(&state, handler) > 0 { lastActivity = ContinuousClock.now }
            // Stray frontend messages: events of an earlier REPLAY are still
            // events, the rest is not for us.
            while !state.stopped, let frames = try channel.receiveNow() {
                if case .event(let event)? = try? FrontendMessage.decode(frames) { state.offer(event, handler) }
            }
            if state.stopped { break }
            if state.hasGap || ContinuousClock.now - lastActivity >= idleCheck {
                try catchUp(&state, handler)
                lastActivity = ContinuousClock.now
            }
        }
        if let last = state.lastDelivered { lastDeliveredSeq = last }
        return FollowResult(ending: ending, lastSeq: state.next - 1, delivered: state.delivered, pruned: state.pruned)
    }

    /// Follows events from `seq` until every job in `ids` is stored or dead.
    /// `onEvent` sees each event of those jobs (others are skipped). Use the
    /// smallest `eventSeq` of their ACCEPTED replies as `seq`: every later
    /// event of theirs is replayed, whenever this is called.
    ///
    /// - Parameter timeout: the most time to wait; when it passes, throws
    ///   `.timeout` naming how many jobs are unfinished. nil waits for ever.
    public func waitForJobs(_ ids: Set<ULID>, from seq: UInt64, timeout: Duration? = nil,
                            onEvent: (Event) -> Void = { _ in }) throws(ClientError) -> [ULID: JobOutcome] {
        var outcomes: [ULID: JobOutcome] = [:]
        if ids.isEmpty { return outcomes }
        let result = try follow(from: seq, for: timeout) { event in
            guard ids.contains(event.jobID) else { return .continue }
            onEvent(event)
            switch event.kind {
            case .stored: outcomes[event.jobID] = .stored(recordID: event.recordID)
            case .dead: outcomes[event.jobID] = .dead(event.failure)
            default: break
            }
            return outcomes.count == ids.count ? .stop : .continue
        }
        if result.ending == .durationElapsed, outcomes.count < ids.count, let timeout {
            throw ClientError(.timeout, "\(ids.count - outcomes.count) of \(ids.count) job(s) still unfinished after \(format(timeout)) (no stored or dead event yet)")
        }
        return outcomes
    }

    // MARK: - Ordering

    /// Delivery state of one `follow` call.
    private struct State {
        /// The next seq to deliver.
        var next: UInt64
        /// Events received ahead of `next`, by seq.
        var buffer: [UInt64: Event] = [:]
        var delivered = 0
        var lastDelivered: UInt64?
        var pruned: [ClosedRange<UInt64>] = []
        var stopped = false

        init(next: UInt64) { self.next = next }

        /// Whether events ahead of `next` are waiting for the ones before them.
        var hasGap: Bool { !buffer.isEmpty }

        /// Takes one event from either socket: drops it if already delivered,
        /// keeps it if early, and delivers everything now in order.
        mutating func offer(_ event: Event, _ handler: (Event) -> FollowDecision) {
            guard !stopped, event.seq >= next else { return }
            buffer[event.seq] = event
            deliverReady(handler)
        }

        mutating func deliverReady(_ handler: (Event) -> FollowDecision) {
            while !stopped, let event = buffer.removeValue(forKey: next) {
                next += 1
                delivered += 1
                lastDelivered = event.seq
                if handler(event) == .stop { stopped = true }
            }
        }

        /// Gives up on seqs before `seq` (the broker no longer has them),
        /// telling `announce` which before delivering what follows.
        mutating func skip(to seq: UInt64, _ handler: (Event) -> FollowDecision, announce: ((ClosedRange<UInt64>) -> Void)? = nil) {
            guard seq > next else { return }
            pruned.append(next...(seq - 1))
            announce?(next...(seq - 1))
            buffer = buffer.filter { $0.key >= seq }
            next = seq
            deliverReady(handler)
        }
    }

    /// Reads every waiting live event; returns how many arrived.
    private func drainLive(_ state: inout State, _ handler: (Event) -> FollowDecision) throws(ClientError) -> Int {
        var count = 0
        while !state.stopped {
            let frames: [[UInt8]]?
            do {
                frames = try subscriber.receive(dontWait: true)
            } catch {
                throw ClientError.zmq(error, "cannot receive the broker's events")
            }
            guard let frames else { break }
            count += 1
            // A malformed live message is dropped; its seqs show up as a
            // gap and are fetched again with REPLAY.
            guard let message = try? EventMessage.decode(frames) else { continue }
            for event in message.events { state.offer(event, handler) }
        }
        return count
    }

    /// REPLAYs from `state.next` until caught up with the broker's head,
    /// taking live events meanwhile.
    private func catchUp(_ state: inout State, _ handler: (Event) -> FollowDecision) throws(ClientError) {
        // A broker whose frontend queue overflows drops messages, REPLAY-END
        // included; a REPLAY that went unanswered while the broker was
        // visibly alive is asked once more before giving up.
        var retriedSilence = false
        while !state.stopped {
            let from = state.next
            let id = channel.nextRequestID()
            try channel.send(ReplayRequest(requestID: id, fromSeq: from, limit: replayPageLimit).frames(), what: "REPLAY")
            replayAbandoned = true
            var firstReplayed: UInt64?
            var end: ReplayEnd?
            let deadline = ContinuousClock.now + channel.timeout
            var heardFromBroker = false
            while end == nil {
                _ = try drainLive(&state, handler)
                while end == nil, !state.stopped, let frames = try channel.receiveNow() {
                    heardFromBroker = true
                    let message: FrontendMessage
                    do {
                        message = try FrontendMessage.decode(frames)
                    } catch {
                        channel.rejectMalformed(frames, error)
                        if frames.count > 1, frames[1] == [Command.event.rawValue] {
                            throw ClientError(.protocolViolation, "the broker at \(channel.endpoint) replayed a malformed event: \(error.reason)")
                        }
                        continue
                    }
                    switch message {
                    case .event(let event):
                        if firstReplayed == nil { firstReplayed = event.seq }
                        state.offer(event, handler)
                    case .replayEnd(let m) where m.requestID == id:
                        end = m
                    case .error(let m) where m.requestID == id || m.requestID == 0:
                        replayAbandoned = false
                        throw ClientError.server(m, from: .broker, doing: "REPLAY from \(from)")
                    default:
                        break
                    }
                }
                if state.stopped { return }
                if end != nil { break }
                let remaining = deadline - ContinuousClock.now
                if remaining <= .zero {
                    if heardFromBroker && !retriedSilence { break }
                    throw ClientError.noAnswer(from: .broker, at: channel.endpoint, within: channel.timeout,
                                               detail: "REPLAY from seq \(from) unanswered")
                }
                do {
                    _ = try poller.poll(timeoutMilliseconds: max(1, milliseconds(remaining)))
                } catch {
                    throw ClientError.zmq(error, "cannot wait for the broker")
                }
            }
            guard let end else {
                // The answer was cut short: ask again from where delivery stands.
                retriedSilence = true
                try reopenFrontend()
                continue
            }
            replayAbandoned = false
            if end.headSeq < from - 1 {
                throw ClientError(.protocolViolation, "the broker at \(channel.endpoint) says its newest event is \(end.headSeq), but event \(from - 1) was already seen (was the broker's data reset?)")
            }
            if state.next == from {
                // Nothing at `from` came back.
                if end.lastSeq >= from, let first = firstReplayed, first > from {
                    state.skip(to: first, handler, announce: onPruned)  // pruned before the first it sent
                } else if end.lastSeq < from, end.headSeq >= from {
                    state.skip(to: end.headSeq + 1, handler, announce: onPruned)  // it has none of them any more
                }
            }
            if state.stopped { return }
            if !state.hasGap && state.next > end.headSeq { return }  // caught up
            if state.next == from { return }  // no progress; the idle check will ask again
        }
    }

    // MARK: - Helpers

    /// The broker's newest event seq, from STATUS.
    private func brokerHead() throws(ClientError) -> UInt64 {
        let reply = try channel.call("STATUS", build: { StatusRequest(requestID: $0).frames() },
                                     decode: FrontendMessage.decode, requestID: \.replyRequestID)
        switch reply {
        case .statusReply(let r): return r.status.eventSeq
        case .error(let e): throw ClientError.server(e, from: .broker, doing: "STATUS")
        default:
            throw ClientError(.protocolViolation, "the broker at \(channel.endpoint) answered STATUS with \(reply.command.name)")
        }
    }

    /// Replaces the frontend socket, dropping what is left of an abandoned REPLAY.
    private func reopenFrontend() throws(ClientError) {
        let fresh = try Channel(context: context, endpoint: channel.endpoint, role: .broker, timeout: channel.timeout, curve: curve,
                                receiveHighWaterMark: Self.replayQueueDepth)
        channel = fresh
        poller = Poller()
        poller.add(subscriber)
        poller.add(fresh.socket)
        replayAbandoned = false
    }
}

@available(*, unavailable, message: "a client owns ZeroMQ sockets and belongs to one thread; make one per thread")
extension EventFollower: Sendable {}
