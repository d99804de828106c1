import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// What the event handler wants next.
public enum FollowDecision: Sendable, Hashable {
    case `continue`
    case stop
}

/// Where a `follow` call starts.
public enum FollowStart: Sendable, Hashable {
    /// From this seq, inclusive (1 is the first event ever).
    case seq(UInt64)
    /// Only events newer than the broker's head when the call starts.
    case latest
    /// Where this follower stands (`nextSeq`): right after the last event
    /// it delivered, or skipped as pruned, in any earlier call, including
    /// one that threw midway. A follower that has no position yet (no call
    /// ever learned where to start) starts from `latest`.
    case resume
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
    /// The seq of the last event delivered or skipped; when this call
    /// delivered none, the seq before where it started (the broker's head
    /// at the start, for `latest`), and 0 when it never learned where to
    /// start (the broker did not answer for the whole duration).
    public var lastSeq: UInt64
    /// Events delivered by this call.
    public var delivered: Int
    /// Ranges of seqs the broker no longer had when asked (pruned by its
    /// retention); they were skipped. Empty unless following from far back.
    public var pruned: [ClosedRange<UInt64>]
}

/// What a follower that retries (`follow(from:for:retry:handler:)`) tells
/// about its contact with the broker: once when it loses it, once when it
/// has it again, however many attempts lie between.
public enum BrokerContact: Sendable, Equatable {
    /// The broker stopped answering (or answered with a refusal that may go
    /// away). `error` is the first failure; delivery will go on at
    /// `resumeSeq` once the broker is back (nil: at the broker's head then,
    /// because the follower never learned where to start).
    case lost(ClientError, resumeSeq: UInt64?)
    /// The broker answered again, `silence` after it was last heard from
    /// (an answer or a published event); delivery goes on at `resumeSeq`.
    case regained(silence: Duration, resumeSeq: UInt64)
}

/// How a job ended, for `waitForJobs`.
public enum JobOutcome: Sendable, Equatable {
    /// The result is on the storage node (the record id from the event).
    case stored(recordID: ULID?)
    /// The job is in the dead-letter set, with its last failure.
    case dead(FailureDetail?)
    /// CANCEL stopped it for good.
    case cancelled
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
/// The cursor: the follower keeps where it stands, `nextSeq`, across calls,
/// and moves it with each event as the event is handed to the handler (and
/// past each range the broker pruned), not when a call returns. A call that
/// throws halfway through a REPLAY has still moved it past every event it
/// delivered, so `follow(from: .resume)` goes on with the next one: no event
/// is delivered twice and none is skipped, however often the broker goes
/// away.
///
/// Outages: when the broker stays silent for `timeout` during a REPLAY (or
/// the STATUS that finds its head), `follow` throws `.timeout`, unless it was
/// given a `retry` backoff: then it waits and asks again, from the cursor,
/// for as long as its duration allows, and tells `onBrokerContact` once when
/// it loses the broker and once when it hears from it again. Only failures
/// that may go away are retried (`ClientError.isRetryable`: timeouts, lost
/// connections, 2xx and 5xx refusals); any other ends the call at once.
///
/// Blocking: `follow` runs the handler on the calling thread until the
/// handler stops it or the duration passes. Threading: an `EventFollower`
/// owns ZeroMQ sockets, so it belongs to the thread that created it and is
/// not `Sendable`; make one per thread.
public final class EventFollower {
    private let context: Context
    private let curve: CurveClientKeys?
    private var channel: Channel
    private let subscriber: Socket
    /// The events socket's handshakes: a key the broker refuses there is
    /// told at once, as on the frontend (`Channel`).
    private let subscriberMonitor: SocketMonitor
    private var subscriberHandshake: HandshakeGuard
    private var poller = Poller()
    /// Whether the frontend socket may still receive the rest of an
    /// abandoned REPLAY (the handler stopped in the middle of one, or the
    /// broker went silent during one).
    private var replayAbandoned = false
    /// When the broker last answered on the frontend or published an event,
    /// before the current outage if there is one.
    private var lastHeard = ContinuousClock.now
    /// Set while a retrying `follow` has told `onBrokerContact` the broker is
    /// lost and has not heard from it since.
    private var contactLost = false
    /// How long to wait, with nothing arriving, before asking the broker
    /// whether events were missed.
    public var idleCheck: Duration = .seconds(1)
    /// Kinds of event passed over: their seqs move the cursor, but they are
    /// neither delivered nor counted, and in a live batch they are read
    /// only as far as their seq, kind and job id (`EventMessage.decode`).
    /// `submit` passes over `accepted` and `started`, two of every job's
    /// three events.
    public var skippedKinds: Set<EventKind> = [] {
        didSet { skipped = EventKindMask(skippedKinds) }
    }
    /// `skippedKinds`, asked of every event delivered.
    private var skipped = EventKindMask([])
    /// Kinds of event delivered in brief from a live batch: without their
    /// source name, worker id and failure, which are not read
    /// (`EventMessage.decode`). For a handler that knows its jobs by id.
    public var briefKinds: Set<EventKind> = []
    /// The most events to ask for in one REPLAY; 0 lets the broker choose.
    /// Kept under ZeroMQ's default high-water mark (1000 messages), which a
    /// ROUTER silently drops beyond: a page that fits arrives whole.
    public var replayPageLimit: UInt32 = 500
    /// Messages the frontend socket may queue: replay pages arrive in bursts.
    static let replayQueueDepth = 100_000
    /// The cursor: the next seq this follower delivers, one past the last
    /// event it delivered or skipped as pruned, by any `follow` call. Set as
    /// soon as a call knows where it starts (at once for `.seq`, after the
    /// broker's STATUS for `.latest`) and moved per event, so it is right
    /// even after a call that threw. nil until then. `.resume` goes on here.
    public private(set) var nextSeq: UInt64?
    /// The seq of the last event delivered, by any `follow` call; updated as
    /// each event is handed to the handler.
    public private(set) var lastDeliveredSeq: UInt64?
    /// Called (on the calling thread, before the events that follow) with
    /// each range of seqs the broker no longer has: pruned by its retention.
    public var onPruned: ((ClosedRange<UInt64>) -> Void)?
    /// Called (on the calling thread) by a retrying `follow` when it loses
    /// the broker and when it hears from it again: once each per outage.
    public var onBrokerContact: ((BrokerContact) -> Void)?
    /// A mailbox whose messages also end every wait here, and what decides,
    /// when it has some, whether `follow` stops (`SubmitEngine`'s thread
    /// takes its instructions so). The poller item is added to each poller.
    private var interruption: (watch: (Poller) -> Int, stopRequested: () -> Bool)?
    private var interruptionItem: Int?
    /// Called before each wait for the broker, after the events that came
    /// were delivered: where a caller that batches them sends them on.
    var beforeWait: (() -> Void)?

    /// Ends waits as soon as `inbox` has messages and asks `stopRequested`
    /// (on this thread) whether to stop: `follow` then returns `.stopped`
    /// after the event it is delivering.
    func interrupt<Message>(by inbox: MailboxInbox<Message>, stopRequested: @escaping () -> Bool) {
        interruption = ({ $0.add(inbox) }, stopRequested)
        interruptionItem = poller.add(inbox)
    }

    /// Whether the interrupting mailbox (if any) asks to stop; `ready` is
    /// the poll that just returned, nil to ask regardless.
    private func stopRequested(_ ready: PollResult?) -> Bool {
        guard let interruption, let item = interruptionItem else { return false }
        if let ready, !ready.isReadable(item) { return false }
        return interruption.stopRequested()
    }

    /// Waits `pause` between attempts, or less when asked to stop.
    private func pauseBetweenAttempts(_ pause: Duration) -> Bool {
        guard let interruption else {
            Thread.sleep(forTimeInterval: pause.fractionalSeconds)
            return false
        }
        let end = ContinuousClock.now + pause
        let waiter = Poller()
        let item = interruption.watch(waiter)
        while true {
            let left = end - ContinuousClock.now
            if left <= .zero { return false }
            guard let ready = try? waiter.poll(timeoutMilliseconds: max(1, milliseconds(left))) else { return false }
            if ready.isReadable(item), interruption.stopRequested() { return true }
        }
    }

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
            // ZMTP heartbeats: a connection whose link died quietly (no FIN,
            // no RST) is dropped after 3 s and made again, instead of
            // waiting for events that can no longer come.
            try subscriber.setHeartbeat(interval: 1_000, timeToLive: 3_000, timeout: 3_000)
            try subscriber.setConnectTimeout(milliseconds: 2_000)
            if let curve {
                try subscriber.setCurveClient(serverKey: curve.serverKey, keyPair: curve.keyPair)
            }
            // EVENTS carry a whole broker commit per message: far cheaper
            // to receive than one EVENT per event, with the same seqs.
            try subscriber.subscribe(Wire.eventBatchTopic)
        } catch {
            throw ClientError.zmq(error, "cannot configure the socket for the broker's events")
        }
        subscriberHandshake = HandshakeGuard(usesCurve: curve != nil, endpoint: events)
        do {
            subscriberMonitor = try SocketMonitor(watching: subscriber)
        } catch {
            throw ClientError.zmq(error, "cannot watch the socket for the broker's events")
        }
        do {
            try subscriber.connect(events)
        } catch {
            throw ClientError(.connection, "cannot connect to the broker's events at \(events): \(error)")
        }
        poller.add(subscriber)
        poller.add(channel.socket)
        poller.add(channel.monitorSocket)
        poller.add(subscriberMonitor.socket)
    }

    deinit {
        subscriberMonitor.close()
        subscriber.close()
    }

    /// The broker frontend used for REPLAY.
    public var frontendEndpoint: String { channel.endpoint }

    /// How long the broker has been silent, while a retrying `follow` counts
    /// it as lost; nil while in contact.
    public var silence: Duration? { contactLost ? ContinuousClock.now - lastHeard : nil }

    /// Delivers events to `handler` in seq order, each exactly once, until
    /// it returns `.stop` or `duration` passes.
    ///
    /// - Parameters:
    ///   - start: where to start; `.resume` goes on from the cursor.
    ///   - duration: how long to follow, outages included; nil follows until
    ///     the handler stops.
    ///   - retry: nil: a broker silent for `timeout` ends the call with
    ///     `.timeout` (call again with `.resume` to go on). A backoff: the
    ///     call waits and asks again, from the cursor, until the broker
    ///     answers or `duration` passes; failures that cannot go away
    ///     (`isRetryable` false) still end it at once.
    public func follow(from start: FollowStart, for duration: Duration? = nil, retry: RetryBackoff? = nil,
                       giveUpAfterSilence silenceLimit: Duration? = nil,
                       handler: (Event) -> FollowDecision) throws(ClientError) -> FollowResult {
        let deadline = duration.map { ContinuousClock.now + $0 }
        let tally = Tally()
        var start = start
        var failures = 0
        while true {
            do {
                let ending = try followOnce(from: start, until: deadline, tally: tally, handler)
                return FollowResult(ending: ending, lastSeq: (nextSeq ?? 1) - 1, delivered: tally.delivered, pruned: tally.pruned)
            } catch {
                guard let retry, error.isRetryable else { throw error }
                if let silenceLimit, let silence, silence >= silenceLimit { throw error }
                // Everything delivered so far moved the cursor: go on from it.
                start = .resume
                failures = contactLost ? failures + 1 : 1
                if !contactLost {
                    contactLost = true
                    onBrokerContact?(.lost(error, resumeSeq: nextSeq))
                }
                var pause = retry.delay(afterFailures: failures)
                if let deadline {
                    let left = deadline - ContinuousClock.now
                    if left <= .zero {
                        return FollowResult(ending: .durationElapsed, lastSeq: (nextSeq ?? 1) - 1, delivered: tally.delivered, pruned: tally.pruned)
                    }
                    pause = min(pause, left)
                }
                if pauseBetweenAttempts(pause) {
                    return FollowResult(ending: .stopped, lastSeq: (nextSeq ?? 1) - 1, delivered: tally.delivered, pruned: tally.pruned)
                }
            }
        }
    }

    /// Delivers events to `handler` in seq order, each exactly once, until
    /// it returns `.stop` or `duration` passes; throws `.timeout` when the
    /// broker stays silent for `timeout` (see `follow(from:for:retry:handler:)`).
    ///
    /// - Parameters:
    ///   - seq: the first seq wanted (inclusive; 1 is the first event ever).
    ///     nil means "latest": only events newer than the broker's head now.
    ///   - duration: how long to follow; nil follows until the handler stops.
    public func follow(from seq: UInt64?, for duration: Duration? = nil,
                       handler: (Event) -> FollowDecision) throws(ClientError) -> FollowResult {
        try follow(from: seq.map(FollowStart.seq) ?? .latest, for: duration, retry: nil, handler: handler)
    }

    /// Follows events from `seq` until every job in `ids` is stored, dead or
    /// cancelled.
    /// `onEvent` sees each event of those jobs (others are skipped). Use the
    /// smallest `eventSeq` of their ACCEPTED replies as `seq`: every later
    /// event of theirs is replayed, whenever this is called.
    ///
    /// A broker that stops answering does not end the wait: with `retry`
    /// (the default) it asks again with backoff, from the last event it
    /// delivered, so no job's ending is lost to an outage, and tells
    /// `onBrokerContact` as `follow` does. Only `timeout`, or a failure that
    /// cannot go away, ends it early.
    ///
    /// - Parameters:
    ///   - timeout: the most time to wait, outages included; when it passes,
    ///     throws `.timeout` naming how many jobs are unfinished. nil waits
    ///     for ever.
    ///   - retry: how to wait between attempts to reach a silent broker; nil
    ///     ends the wait with `.timeout` the first time the broker is silent
    ///     for the follower's `timeout` (calling again from the same `seq`
    ///     then finds every job's ending again).
    public func waitForJobs(_ ids: Set<ULID>, from seq: UInt64, timeout: Duration? = nil, retry: RetryBackoff? = .standard,
                            giveUpAfterSilence silenceLimit: Duration? = nil,
                            onEvent: (Event) -> Void = { _ in }) throws(ClientError) -> [ULID: JobOutcome] {
        var outcomes: [ULID: JobOutcome] = [:]
        if ids.isEmpty { return outcomes }
        let result = try follow(from: .seq(seq), for: timeout, retry: retry, giveUpAfterSilence: silenceLimit) { event in
            guard ids.contains(event.jobID) else { return .continue }
            onEvent(event)
            switch event.kind {
            case .stored: outcomes[event.jobID] = .stored(recordID: event.recordID)
            case .dead: outcomes[event.jobID] = .dead(event.failure)
            case .cancelled: outcomes[event.jobID] = .cancelled
            default: break
            }
            return outcomes.count == ids.count ? .stop : .continue
        }
        if result.ending == .durationElapsed, outcomes.count < ids.count, let timeout {
            let silent = silence.map { "; the broker at \(channel.endpoint) has not answered for \(format($0))" } ?? ""
            throw ClientError(.timeout, "\(ids.count - outcomes.count) of \(ids.count) job(s) still unfinished after \(format(timeout)) (no stored, dead or cancelled event yet)\(silent)")
        }
        return outcomes
    }

    // MARK: - One attempt

    /// What one `follow` call delivered, over all its attempts.
    private final class Tally {
        var delivered = 0
        var pruned: [ClosedRange<UInt64>] = []
    }

    /// Follows from `start` until the handler stops or `deadline` passes;
    /// throws the first failure. Moves the cursor per event as it goes.
    private func followOnce(from start: FollowStart, until deadline: ContinuousClock.Instant?, tally: Tally,
                            _ handler: (Event) -> FollowDecision) throws(ClientError) -> FollowResult.Ending {
        if replayAbandoned { try reopenFrontend() }
        let first: UInt64
        if case .seq(let seq) = start {
            first = max(1, seq)
        } else if start == .resume, let cursor = nextSeq {
            first = cursor
        } else {
            first = try brokerHead() + 1
        }
        nextSeq = first
        var state = State(next: first)
        if case .seq = start { state.asked = first }
        defer { nextSeq = state.next }
        // The cursor moves as each event is handed over (and past each
        // pruned range), so it is right however this call ends.
        let deliver: (Event) -> FollowDecision = { event in
            self.nextSeq = event.seq + 1
            if self.skipped.contains(event.kind) { return .continue }
            self.lastDeliveredSeq = event.seq
            tally.delivered += 1
            return handler(event)
        }
        let prune: (ClosedRange<UInt64>) -> Void = { range in
            self.nextSeq = range.upperBound + 1
            tally.pruned.append(range)
            self.onPruned?(range)
        }

        try catchUp(&state, deliver, prune)
        var lastActivity = ContinuousClock.now
        while !state.stopped {
            let now = ContinuousClock.now
            if let deadline, now >= deadline { return .durationElapsed }
            var wait = lastActivity + idleCheck - now
            if let deadline { wait = min(wait, deadline - now) }
            if wait > .zero {
                beforeWait?()
                let ready: PollResult
                do {
                    ready = try poller.poll(timeoutMilliseconds: max(1, milliseconds(wait)))
                } catch {
                    throw ClientError.zmq(error, "cannot wait for the broker's events")
                }
                if stopRequested(ready) { break }
            }
            if try drainLive(&state, deliver) > 0 { lastActivity = ContinuousClock.now }
            // Stray frontend messages: events of an earlier REPLAY are still
            // events, the rest is not for us.
            while !state.stopped, let frames = try channel.receiveNow() {
                if case .event(let event)? = try? FrontendMessage.decode(frames) { state.offer(event, deliver) }
            }
            if state.stopped { break }
            if state.hasGap || ContinuousClock.now - lastActivity >= idleCheck {
                try catchUp(&state, deliver, prune)
                lastActivity = ContinuousClock.now
            }
        }
        return .stopped
    }

    // MARK: - Ordering

    /// Delivery state of one attempt.
    private struct State {
        /// The next seq to deliver.
        var next: UInt64
        /// The seq the caller asked to start from, when it named one.
        var asked: UInt64?
        /// Events received ahead of `next`, by seq.
        var buffer: [UInt64: Event] = [:]
        var stopped = false

        init(next: UInt64) { self.next = next }

        /// Whether events ahead of `next` are waiting for the ones before them.
        var hasGap: Bool { !buffer.isEmpty }

        /// Takes one event from either socket: drops it if already delivered,
        /// keeps it if early, and delivers everything now in order.
        mutating func offer(_ event: Event, _ handler: (Event) -> FollowDecision) {
            guard !stopped, event.seq >= next else { return }
            guard event.seq == next, buffer.isEmpty else {
                buffer[event.seq] = event
                deliverReady(handler)
                return
            }
            // In order with nothing waiting (nearly every live event):
            // delivered at once, without a trip through the buffer.
            next += 1
            if handler(event) == .stop { stopped = true }
        }

        mutating func deliverReady(_ handler: (Event) -> FollowDecision) {
            while !stopped, let event = buffer.removeValue(forKey: next) {
                next += 1
                if handler(event) == .stop { stopped = true }
            }
        }

        /// Gives up on seqs before `seq` (the broker no longer has them),
        /// telling `announce` which before delivering what follows.
        mutating func skip(to seq: UInt64, _ handler: (Event) -> FollowDecision, announce: (ClosedRange<UInt64>) -> Void) {
            guard seq > next else { return }
            announce(next...(seq - 1))
            buffer = buffer.filter { $0.key >= seq }
            next = seq
            deliverReady(handler)
        }
    }

    /// Throws `.refused` once the events socket's handshakes prove the
    /// broker turns this client away there.
    private func checkSubscriberHandshake() throws(ClientError) {
        while true {
            let next: (event: SocketMonitor.Event, endpoint: String)?
            do {
                next = try subscriberMonitor.next()
            } catch {
                throw ClientError.zmq(error, "cannot read the handshake events of the socket for the broker's events")
            }
            guard let (event, endpoint) = next else { return }
            if let refusal = subscriberHandshake.observe(event) {
                throw ClientError.refused(refusal, by: .broker, at: endpoint.isEmpty ? "its events endpoint" : endpoint)
            }
        }
    }

    /// Reads every waiting live event; returns how many arrived.
    private func drainLive(_ state: inout State, _ handler: (Event) -> FollowDecision) throws(ClientError) -> Int {
        try checkSubscriberHandshake()
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
            noteAlive()
            // A malformed live message is dropped; its seqs show up as a
            // gap and are fetched again with REPLAY.
            guard let message = try? EventMessage.decode(frames, skipping: skippedKinds, brief: briefKinds) else { continue }
            for event in message.events { state.offer(event, handler) }
        }
        return count
    }

    /// REPLAYs from `state.next` until caught up with the broker's head,
    /// taking live events meanwhile.
    private func catchUp(_ state: inout State, _ handler: (Event) -> FollowDecision,
                         _ prune: (ClosedRange<UInt64>) -> Void) throws(ClientError) {
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
                    noteAlive()
                    let message: FrontendMessage
                    do {
                        message = try FrontendMessage.decode(frames, to: .peer)
                    } catch {
                        channel.rejectMalformed(frames, error)
                        if frames.count > 1, frames[1] == [Command.event.rawValue] {
                            throw ClientError(.protocolViolation, "the broker at \(channel.endpoint) replayed a malformed event: \(error.reason)")
                        }
                        continue
                    }
                    switch message {
                    case .event(let event):
                        if firstReplayed == nil {
                            firstReplayed = event.seq
                            // Told before the replayed events are delivered.
                            heard(resumeSeq: from)
                        }
                        state.offer(event, handler)
                    case .replayEnd(let m) where m.requestID == id:
                        if firstReplayed == nil { heard(resumeSeq: from) }
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
                beforeWait?()
                let ready: PollResult
                do {
                    ready = try poller.poll(timeoutMilliseconds: max(1, milliseconds(remaining)))
                } catch {
                    throw ClientError.zmq(error, "cannot wait for the broker")
                }
                if stopRequested(ready) {
                    state.stopped = true
                    return
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
                if from == state.asked {
                    // Nothing seen yet: the start asked for is past the newest event.
                    throw ClientError(.invalidArgument, "the broker at \(channel.endpoint) has no event \(from) to start from: its newest event is \(end.headSeq)")
                }
                throw ClientError(.protocolViolation, "the broker at \(channel.endpoint) says its newest event is \(end.headSeq), but event \(from - 1) was already seen (was the broker's data reset?)")
            }
            if state.next == from {
                // Nothing at `from` came back.
                if end.lastSeq >= from, let first = firstReplayed, first > from {
                    state.skip(to: first, handler, announce: prune)  // pruned before the first it sent
                } else if end.lastSeq < from, end.headSeq >= from {
                    state.skip(to: end.headSeq + 1, handler, announce: prune)  // it has none of them any more
                }
            }
            if state.stopped { return }
            if !state.hasGap && state.next > end.headSeq { return }  // caught up
            if state.next == from { return }  // no progress; the idle check will ask again
        }
    }

    // MARK: - Helpers

    /// Notes an answer from the broker (events or the end of a REPLAY, a
    /// STATUS; not a refusal): the end of an outage, if one was told, after
    /// which delivery goes on at `resumeSeq`.
    private func heard(resumeSeq: UInt64) {
        let now = ContinuousClock.now
        if contactLost {
            contactLost = false
            onBrokerContact?(.regained(silence: now - lastHeard, resumeSeq: resumeSeq))
        }
        lastHeard = now
    }

    /// Notes a sign of life that is not an answer (a published event, a
    /// refusal, a stray message): while in contact it moves `lastHeard`; during an
    /// outage it leaves it at the start of the silence, which `heard` reports.
    private func noteAlive() {
        if !contactLost { lastHeard = ContinuousClock.now }
    }

    /// The broker's newest event seq, from STATUS.
    private func brokerHead() throws(ClientError) -> UInt64 {
        let reply = try channel.call("STATUS", build: { StatusRequest(requestID: $0).frames() },
                                     decode: FrontendMessage.decode, requestID: \.requestID)
        switch reply {
        case .statusReply(let r):
            heard(resumeSeq: r.status.eventSeq + 1)
            return r.status.eventSeq
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
        poller.add(fresh.monitorSocket)
        poller.add(subscriberMonitor.socket)
        if let interruption { interruptionItem = interruption.watch(poller) }
        replayAbandoned = false
    }
}

@available(*, unavailable, message: "a client owns ZeroMQ sockets and belongs to one thread; make one per thread")
extension EventFollower: Sendable {}
