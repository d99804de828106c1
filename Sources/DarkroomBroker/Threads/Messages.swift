import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ
import Synchronization

// What the broker's threads hand each other. The switchboard thread owns
// the sockets; the core thread owns the queue (state and database); the
// input writer's threads write large inputs. Values travel through
// mailboxes, never shared.

/// One request or fact for the core, in the order the switchboard read it.
enum CoreInput: Sendable {
    /// A SUBMIT that passed the checks that need no state, with its
    /// pipeline's canonical text.
    case submit(Submit, canonicalPipeline: String, client: [UInt8])
    case deadRetry(DeadRetry, client: [UInt8])
    case deadDiscard(DeadDiscard, client: [UInt8])
    case cancel(CancelRequest, client: [UInt8])
    /// PAUSE (`paused`) or RESUME.
    case pause(paused: Bool, requestID: UInt64, client: [UInt8])
    /// REPLAY or DEAD-LIST: answered from the database after the turn's commit.
    case read(FrontendMessage, client: [UInt8])
    /// A worker's READY, HOLDING, CREDIT, DONE, FAIL or DISCONNECT (and
    /// HEARTBEAT from a connection the switchboard does not know).
    case backend(BackendMessage, connection: [UInt8])
    /// A worker's connection sent nothing for `silence` ms.
    case silent(connection: [UInt8], silence: UInt64)
    /// A worker's connection uses a key the allowlist no longer holds: it
    /// was told DISCONNECT, and its next connection is refused.
    case revoked(connection: [UInt8])
    /// A large input's file is written (or failed to be).
    case written(job: ULID, failure: DurableFile.Failure?)
}

extension CoreInput {
    /// Taken first in a turn, and alone while the queue cannot be written:
    /// a worker's message, or a worker's silence.
    var isFromWorkers: Bool {
        switch self {
        case .backend, .silent, .revoked: return true
        case .submit, .deadRetry, .deadDiscard, .cancel, .pause, .read, .written: return false
        }
    }
}

/// The core's mailbox.
enum CoreMessage: Sendable {
    case inputs([CoreInput])
    /// How the core reaches the switchboard (posted once, at start).
    case attach(@Sendable (SwitchboardInstruction) -> Void)
    /// Stop taking jobs, wait up to the grace for jobs in flight, commit, end.
    case stop(graceMilliseconds: Int64)
    /// The switchboard ended on its own: commit and end.
    case switchboardEnded(String)
}

/// What the core sends out after a turn: replies, JOBs and events that
/// waited on the turn's commit, in that order.
struct Delivery: Sendable {
    var frontend: [(client: [UInt8], frames: [[UInt8]])] = []
    var backend: [BackendDelivery] = []
    var events: [Event] = []
    /// Connections that are no longer a worker's (it opened a new one).
    var forget: [[UInt8]] = []

    var isEmpty: Bool { frontend.isEmpty && backend.isEmpty && events.isEmpty && forget.isEmpty }
}

/// A message for a worker's connection. A JOB whose input is kept in a
/// file carries that file mapped, sent without being copied in place of
/// its image frame (`JobDispatch.imageFrame`), left empty (see `MappedFile`).
struct BackendDelivery: Sendable {
    let connection: [UInt8]
    let frames: [[UInt8]]
    let jobInput: MappedFile?

    init(_ connection: [UInt8], _ frames: [[UInt8]], jobInput: MappedFile? = nil) {
        self.connection = connection
        self.frames = frames
        self.jobInput = jobInput
    }
}

/// The switchboard's mailbox.
enum SwitchboardInstruction: Sendable {
    case deliver(Delivery)
    /// Keys were revoked: drop the events socket's connections (it cannot
    /// close one subscriber's alone); subscribers reconnect and the ZAP
    /// handler admits them again, or not.
    case keysRevoked
    /// The core has ended: send what is queued and close.
    case finish
}

/// The latest STATUS as the core last committed it, for the switchboard to
/// answer STATUS at once whatever the core is doing. The core writes it
/// after each commit, before it hands over the turn's replies, so a client
/// that got an ACCEPTED sees its job in the next STATUS.
///
/// The metrics listener reads it too (`Broker.metrics`), from a thread of
/// its own, with a copy of when the switchboard last heard each worker:
/// neither thread ever waits for a scrape longer than a copy takes.
final class StatusBoard: Sendable {
    struct Snapshot: Sendable {
        var status: BrokerStatus
        /// Each worker's connection, to fill in when it was last heard.
        var connections: [String: [UInt8]]
        /// Jobs accepted, stored and failed since the broker started, as committed.
        var totals = JobTotals()
    }

    private let latest = Mutex<Snapshot?>(nil)
    /// Input files the queue has mapped for JOBs, counted until libzmq has
    /// sent them (`JobStore.mappedInputs`): lowered by its I/O thread, so
    /// read live rather than published.
    let mappedInputs = FrameTally()
    /// The switchboard's last copy of when it heard each connection
    /// (monotonic ms), and when it made it.
    private let heard = Mutex<(at: UInt64, connections: [[UInt8]: UInt64])>((0, [:]))

    /// How often the switchboard copies when it heard each connection: a
    /// worker's silence as the metrics show it is late by at most this
    /// (its heartbeats come every second).
    static let heardInterval: UInt64 = 250

    func publish(_ snapshot: Snapshot) { latest.withLock { $0 = snapshot } }
    var current: Snapshot? { latest.withLock { $0 } }

    /// Called by the switchboard every lap; takes a copy of `lastReceived`
    /// only when the last one is `heardInterval` old.
    func hear(now: UInt64, _ lastReceived: () -> [[UInt8]: UInt64]) {
        heard.withLock { heard in
            guard now >= heard.at + StatusBoard.heardInterval || now < heard.at else { return }
            heard = (now, lastReceived())
        }
    }

    /// The status as STATUS would answer it now, from the copies (each
    /// worker's last message as of the switchboard's last copy), with the
    /// totals since start; nil before the core's first snapshot.
    func metrics(wall: UInt64, monotonic: UInt64) -> BrokerMetrics? {
        guard let snapshot = current else { return nil }
        let heard = self.heard.withLock { $0.connections }
        var status = snapshot.status
        status.time = wall
        for index in status.workers.indices {
            guard let connection = snapshot.connections[status.workers[index].id], let last = heard[connection] else { continue }
            let age = monotonic > last ? monotonic - last : 0
            status.workers[index].lastHeartbeat = wall > age ? wall - age : 0
        }
        return BrokerMetrics(status: status, accepted: snapshot.totals.accepted, stored: snapshot.totals.stored,
                             failed: snapshot.totals.failed, cancelled: snapshot.totals.cancelled, expired: snapshot.totals.expired,
                             mappedInputs: UInt64(max(0, mappedInputs.current)))
    }
}

/// Input bytes the switchboard has handed to the core that the core has
/// not yet finished with (queued for a turn, or being written to a file).
/// Above a limit the switchboard stops reading SUBMITs, so a burst waits
/// in the producers' sockets rather than in the broker's memory.
final class Backlog: Sendable {
    private let bytes = Atomic<Int>(0)

    func add(_ count: Int) { _ = bytes.add(count, ordering: .relaxed) }
    func remove(_ count: Int) { _ = bytes.subtract(count, ordering: .relaxed) }
    var current: Int { bytes.load(ordering: .relaxed) }
}
