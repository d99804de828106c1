import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Foundation
import Synchronization

/// Submits jobs and follows each accepted one to its end, both at once.
///
/// What to submit comes from a `SubmitSource` (a list of checked files, or
/// anything that hands out prepared `SubmitRequest`s); the engine only
/// moves them: a `Producer` on the calling thread keeps an adaptive window
/// of SUBMITs in flight (`SubmitWindow`) and resends through outages, while
/// an `EventFollower` on a thread of its own reads the broker's event
/// batches from the moment the first job is accepted, so that a job's end
/// is seen as it happens instead of being replayed after the last submit.
///
/// Everything the caller hears (`Update`) comes on the calling thread, in
/// an order that makes sense per job: its submit result first, then its
/// events. An event that arrives before its job's ACCEPTED waits for it.
///
/// Threading: the engine owns sockets and belongs to the thread that made
/// it; `run` blocks that thread until every job has its result (and, when
/// following, its end) or following failed for good.
public final class SubmitEngine {
    /// What `run` tells its caller, on the calling thread.
    public enum Update {
        /// The final answer to one job's SUBMIT (as `Producer.submit` gives it).
        case replied(SubmitRequest, SubmitResult)
        /// An event of an accepted job after `accepted`: retrying, failed,
        /// stored or dead (the last two end it), revived or discarded.
        case event(Event)
        /// The broker went away or came back while jobs were being submitted.
        case notice(SubmitNotice)
        /// Submitting failed in a way no retry mends; the jobs not answered
        /// were reported `.unanswered` with this error, and the accepted
        /// ones are still followed.
        case submitFailed(ClientError)
        /// After the last submit, while only following: the broker stopped
        /// answering, or answered again.
        case contact(BrokerContact)
    }

    /// How a run ended.
    public struct Outcome {
        /// Counts of the submit results.
        public var summary: SubmitSummary
        /// Accepted jobs not seen to end, in the order they were accepted;
        /// empty when not following.
        public var unfinished: [ULID]
        /// Why following stopped before every job ended, if it did.
        public var followError: ClientError?
    }

    /// Whether a `stored` event may reach `onUpdate` in brief: its seq,
    /// time, kind, job id, attempt and record id, with no source name or
    /// worker id (`EventMessage.decode`'s `brief`). Only events from live
    /// batches come so; those fetched again with REPLAY come whole. For a
    /// caller that names each job by its own input, as `submit`'s text
    /// output does: decoding the rest was about a quarter of the follower's
    /// work a job. Set before the first run that follows.
    public var briefStoredEvents = false

    private let producer: Producer
    private let context: Context
    private let eventsEndpoint: String
    private let curve: CurveClientKeys?
    /// Where the follower thread reports, made by the first run that
    /// follows and kept: the producer's waits watch it.
    private var reports: MailboxInbox<FollowerReport>?

    /// While events keep coming, the follower thread reads them and this
    /// thread takes them at most this often: a job's end is seen at most
    /// this much later, and a stream of small event batches costs a few
    /// wake-ups a second instead of one per batch on each thread.
    static let reportInterval = Duration.milliseconds(10)

    /// Once only following is left and no more jobs than this are open,
    /// each report is taken as it comes: the end of the run (or of a small
    /// one) is not held back for wake-ups that cost little at that rate.
    static let promptAtMost = 256

    /// Connects (in the background) to the broker's frontend, and to its
    /// events when `run` follows.
    public init(frontend: String = Wire.Endpoint.frontend, events: String = Wire.Endpoint.events, context: Context,
                timeout: Duration = .seconds(5), deadline: Duration = .seconds(300), backoff: Backoff = Backoff(),
                curve: CurveClientKeys? = nil) throws(ClientError) {
        producer = try Producer(endpoint: frontend, context: context, timeout: timeout, deadline: deadline, backoff: backoff,
                                curve: curve)
        self.context = context
        self.eventsEndpoint = events
        self.curve = curve
    }

    /// The broker frontend jobs go to.
    public var endpoint: String { producer.endpoint }

    /// Submits every job of `source` with a window starting as `window`,
    /// and with `follow` waits for each accepted job's stored or dead event.
    ///
    /// A broker that stops answering never ends the run early: submits are
    /// resent until `deadline` passes with no answer, and following asks
    /// again until the broker has been silent that long. `beforeWait` is
    /// called whenever the engine is about to wait for the broker (the
    /// place to flush buffered output).
    public func run(_ source: inout some SubmitSource, window: SubmitWindow, follow: Bool,
                    beforeWait: () -> Void = {}, onUpdate: (Update) -> Void) -> Outcome {
        guard follow else { return submitOnly(&source, window: window, beforeWait: beforeWait, onUpdate: onUpdate) }

        var tracker = JobTracker()
        let inbox: MailboxInbox<FollowerReport>
        if let reports {
            inbox = reports
            _ = try? inbox.drain()  // anything a follower of an earlier run left
        } else {
            do {
                (_, inbox) = try Mailbox<FollowerReport>.make(context: context)
            } catch {
                // Without a mailbox there is no following: submit, and report
                // every accepted job as not seen to end.
                return submitOnly(&source, window: window, beforeWait: beforeWait, onUpdate: onUpdate,
                                  followError: ClientError.zmq(error, "cannot open a mailbox for the event follower"))
            }
            reports = inbox
            producer.channel.watch(inbox)
        }
        let thread = ServiceThread<FollowerInstruction>(name: "darkroom-follow")
        let reports = inbox.mailbox
        let (frontend, events, context, curve) = (producer.endpoint, eventsEndpoint, self.context, self.curve)
        let (timeout, silenceLimit, brief) = (producer.timeout, producer.deadline, briefStoredEvents)
        do {
            try thread.start {
                try FollowerLoop(frontend: frontend, events: events, context: context, timeout: timeout, curve: curve,
                                 silenceLimit: silenceLimit, briefStored: brief, reports: reports)
            }
        } catch {
            let cause: ClientError
            if case .failed(let failure) = error, let failure = failure as? ClientError { cause = failure } else {
                cause = ClientError(.connection, "cannot start following the broker's events: \(error)")
            }
            return submitOnly(&source, window: window, beforeWait: beforeWait, onUpdate: onUpdate, followError: cause)
        }
        defer {
            thread.post(.stop)
            thread.wait()
        }

        /// Hands what the follower sent to the tracker.
        func takeReports(submitting: Bool) {
            let messages: [FollowerReport]
            do { messages = try inbox.drain() } catch { return }
            for message in messages {
                switch message {
                case .events(let batch):
                    for event in batch { tracker.offer(event, onUpdate) }
                case .contact(let contact):
                    tracker.contact(contact, submitting: submitting, onUpdate)
                case .ended(let error):
                    tracker.followError = error
                }
            }
        }

        var summary = SubmitSummary()
        do {
            summary = try producer.submit(from: &source, window: window,
                                          turn: { answersDue in
                                              // While answers are due they end the wait soon
                                              // enough; reports wait for them instead of waking
                                              // this thread once each.
                                              producer.channel.watching(!answersDue)
                                              takeReports(submitting: true)
                                              beforeWait()
                                          },
                                          taken: { _ in tracker.taken += 1 },
                                          onNotice: { onUpdate(.notice($0)) }) { request, result in
                tracker.answered += 1
                onUpdate(.replied(request, result))
                if case let .accepted(job, seq) = result {
                    if let from = tracker.accepted(job, seq: seq, onUpdate) { thread.post(.follow(from: from)) }
                }
                tracker.dropEarlyIfIdle()
            }
        } catch {
            onUpdate(.submitFailed(error))
        }
        tracker.submitted(onUpdate)

        // Only following is left: wait for the follower's reports, taking
        // them at most every `SubmitEngine.reportInterval` while they keep
        // coming, so that a slow stream of small event batches does not
        // wake this thread once each; near the end, as they come.
        let poller = Poller()
        poller.add(inbox)
        var lastTaken = ContinuousClock.now - SubmitEngine.reportInterval
        var promptAsked = false
        while !tracker.open.isEmpty, tracker.followError == nil {
            let nearTheEnd = tracker.open.count <= SubmitEngine.promptAtMost
            if nearTheEnd, !promptAsked {
                // The follower's naps would hold back the last events too.
                thread.post(.prompt)
                promptAsked = true
            }
            beforeWait()
            let since = ContinuousClock.now - lastTaken
            if !nearTheEnd, since < SubmitEngine.reportInterval {
                Thread.sleep(forTimeInterval: (SubmitEngine.reportInterval - since).fractionalSeconds)
            }
            _ = try? poller.poll(timeoutMilliseconds: 1_000)
            lastTaken = .now
            takeReports(submitting: false)
        }
        beforeWait()
        return Outcome(summary: summary, unfinished: tracker.unfinished, followError: tracker.open.isEmpty ? nil : tracker.followError)
    }

    /// Submits without following; with `followError` (following was asked
    /// for and could not start), every accepted job is left unfinished.
    private func submitOnly(_ source: inout some SubmitSource, window: SubmitWindow, beforeWait: () -> Void,
                            onUpdate: (Update) -> Void, followError: ClientError? = nil) -> Outcome {
        var summary = SubmitSummary()
        var accepted: [ULID] = []
        // A mailbox from an earlier run that followed still wakes the
        // producer's waits: whatever lands there is not for this run.
        let leftovers = reports
        do {
            summary = try producer.submit(from: &source, window: window,
                                          turn: { _ in
                                              _ = try? leftovers?.drain()
                                              beforeWait()
                                          },
                                          taken: { _ in },
                                          onNotice: { onUpdate(.notice($0)) }) { request, result in
                if followError != nil, let job = result.jobID { accepted.append(job) }
                onUpdate(.replied(request, result))
            }
        } catch {
            onUpdate(.submitFailed(error))
        }
        beforeWait()
        return Outcome(summary: summary, unfinished: accepted, followError: accepted.isEmpty ? nil : followError)
    }
}

@available(*, unavailable, message: "an engine owns ZeroMQ sockets and belongs to one thread; make one per thread")
extension SubmitEngine: Sendable {}

// MARK: - The calling thread's side

/// Which accepted jobs are still open, and the events that came before
/// their job's ACCEPTED.
private struct JobTracker {
    /// Accepted jobs not yet stored or dead, with the order they were accepted in.
    var open: [ULID: Int] = [:]
    private var acceptedCount = 0
    /// Events of jobs not (yet) known to be ours, while SUBMITs are out:
    /// a job's events may overtake its ACCEPTED.
    private var early: [ULID: [Event]] = [:]
    /// Jobs taken from the source, and jobs whose submit has its result.
    var taken = 0
    var answered = 0
    /// The seq the follower was told to start from (the lowest accepted so far).
    private var followFrom: UInt64?
    var followError: ClientError?
    /// Whether the follower has lost the broker, and whether the caller was told.
    private var contactLost = false
    private var lossTold = false
    private var submitting = true

    /// A job was accepted; returns the seq to follow from when the follower
    /// must start (or go back) there.
    mutating func accepted(_ job: ULID, seq: UInt64, _ onUpdate: (SubmitEngine.Update) -> Void) -> UInt64? {
        acceptedCount += 1
        open[job] = acceptedCount
        if let events = early.removeValue(forKey: job) {
            for event in events { offer(event, onUpdate) }
        }
        // The job's later events all come after its `accepted` event.
        guard followFrom.map({ seq < $0 }) ?? true else { return nil }
        followFrom = seq
        return seq
    }

    /// Once no SUBMIT is out, events of unknown jobs are not ours: some
    /// other producer's, or a job already ended.
    mutating func dropEarlyIfIdle() {
        if taken == answered, !early.isEmpty { early.removeAll() }
    }

    mutating func offer(_ event: Event, _ onUpdate: (SubmitEngine.Update) -> Void) {
        guard open[event.jobID] != nil else {
            if submitting, taken > answered { early[event.jobID, default: []].append(event) }
            return
        }
        if event.kind == .stored || event.kind == .dead || event.kind == .cancelled { open[event.jobID] = nil }
        onUpdate(.event(event))
    }

    /// The follower's contact with the broker. While jobs are being
    /// submitted the producer's notices speak for the broker; after that
    /// the follower's do, each loss told once and each return only after
    /// a loss that was told.
    mutating func contact(_ contact: BrokerContact, submitting: Bool, _ onUpdate: (SubmitEngine.Update) -> Void) {
        switch contact {
        case .lost:
            contactLost = true
            if !submitting, !lossTold {
                lossTold = true
                onUpdate(.contact(contact))
            }
        case .regained:
            contactLost = false
            if lossTold {
                lossTold = false
                onUpdate(.contact(contact))
            }
        }
    }

    /// Submitting is over: a loss of contact that happened meanwhile is told now.
    mutating func submitted(_ onUpdate: (SubmitEngine.Update) -> Void) {
        submitting = false
        early.removeAll()
        if contactLost, !lossTold, !open.isEmpty {
            lossTold = true
            onUpdate(.contact(.lost(followError ?? ClientError(.timeout, "the broker is not answering"), resumeSeq: nil)))
        }
    }

    var unfinished: [ULID] { open.sorted { $0.value < $1.value }.map(\.key) }
}

// MARK: - The follower's thread

/// What the engine tells its follower thread.
enum FollowerInstruction: Sendable {
    /// Follow from this seq (or go back to it, if already further on).
    case follow(from: UInt64)
    /// Few jobs are left open and only following remains: hand on events
    /// as they come, with no nap to gather them first.
    case prompt
    case stop
}

/// What the follower thread tells the engine.
enum FollowerReport: Sendable {
    /// Events that may end or concern a job (not `accepted` or `started`), in seq order.
    case events([Event])
    case contact(BrokerContact)
    /// Following failed for good (a silence past the limit, a refused key).
    case ended(ClientError)
}

/// The follower thread: an `EventFollower` that starts when told where,
/// goes back when told to, and sends on every event that may end a job.
private final class FollowerLoop: ServiceLoop {
    let mailbox: Mailbox<FollowerInstruction>
    var boundEndpoints: [String: String] { [:] }
    private let inbox: MailboxInbox<FollowerInstruction>
    private let follower: EventFollower
    private let reports: Mailbox<FollowerReport>
    private let silenceLimit: Duration
    private var from: UInt64?
    private var stopping = false
    /// Events not yet posted: posted in one message per wake-up of the follower.
    private var batch: [Event] = []
    /// Whether events are handed on as they come (`FollowerInstruction.prompt`).
    private var prompt = false

    init(frontend: String, events: String, context: Context, timeout: Duration, curve: CurveClientKeys?,
         silenceLimit: Duration, briefStored: Bool, reports: Mailbox<FollowerReport>) throws {
        (mailbox, inbox) = try Mailbox<FollowerInstruction>.make(context: context)
        follower = try EventFollower(frontend: frontend, events: events, context: context, timeout: timeout, curve: curve)
        // Only a job's later events are reported; these two of its three
        // are passed over without being decoded in full.
        follower.skippedKinds = [.accepted, .started]
        if briefStored { follower.briefKinds = [.stored] }
        self.reports = reports
        self.silenceLimit = silenceLimit
        follower.onBrokerContact = { [reports] contact in reports.post(.contact(contact)) }
        follower.interrupt(by: inbox) { [unowned self] in self.takeInstructions() }
        follower.beforeWait = { [unowned self] in
            self.flush()
            self.nap()
        }
    }

    /// Takes the instructions waiting; true when the current `follow` must
    /// end (to stop, or to start again further back).
    private func takeInstructions() -> Bool {
        guard let instructions = try? inbox.drain() else {
            stopping = true
            return true
        }
        var restart = false
        for instruction in instructions {
            switch instruction {
            case .stop:
                stopping = true
            case .prompt:
                prompt = true
            case .follow(let seq):
                // Where following stands, or is about to start.
                let cursor = from ?? follower.nextSeq
                if cursor.map({ seq < $0 }) ?? true {
                    from = seq
                    restart = true
                }
            }
        }
        return stopping || restart
    }

    /// When the last wait began: a wait that ended at once (events keep
    /// coming) is followed by a short nap, so that they are read in batches.
    private var lastWait = ContinuousClock.now

    private func nap() {
        if prompt { return }
        let now = ContinuousClock.now
        let since = now - lastWait
        if since < SubmitEngine.reportInterval / 2 {
            Thread.sleep(forTimeInterval: (SubmitEngine.reportInterval / 2 - since).fractionalSeconds)
        }
        lastWait = .now
    }

    private func flush() {
        guard !batch.isEmpty else { return }
        reports.post(.events(batch))
        batch.removeAll(keepingCapacity: true)
    }

    func run() {
        defer { inbox.close() }
        let waiter = Poller()
        waiter.add(inbox)
        while !stopping {
            guard let start = from else {
                _ = try? waiter.poll(timeoutMilliseconds: -1)
                _ = takeInstructions()
                continue
            }
            from = nil
            do {
                _ = try follower.follow(from: .seq(start), retry: .standard, giveUpAfterSilence: silenceLimit) { event in
                    batch.append(event)
                    if batch.count >= 256 { flush() }
                    return .continue
                }
                flush()
                // Stopped: to stop for good, or to go back to `from`.
                if from == nil, !stopping { from = follower.nextSeq }
            } catch {
                flush()
                reports.post(.ended(error))
                // Nothing more to follow; wait to be stopped.
                while !stopping {
                    _ = try? waiter.poll(timeoutMilliseconds: -1)
                    _ = takeInstructions()
                }
            }
        }
    }
}
