/// The DRK1 command byte, frame 1 of every message. Values are unique across
/// all sockets, so a logged message names its command without context.
///
/// 0x0_ common to several sockets, 0x1_ frontend, 0x2_ backend, 0x3_ store,
/// 0x4_ events, 0x5_ frontend again (0x1_ is full).
public enum Command: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case error = 0x01
    case ping = 0x02
    case pong = 0x03
    case ok = 0x04

    case submit = 0x10
    case accepted = 0x11
    case rejected = 0x12
    case status = 0x13
    case statusReply = 0x14
    case replay = 0x15
    case replayEnd = 0x16
    case deadList = 0x17
    case deadListReply = 0x18
    case deadRetry = 0x19
    case deadDiscard = 0x1A
    case jobInfo = 0x1B
    case jobInfoReply = 0x1C
    case cancel = 0x1D
    case pause = 0x1E
    case resume = 0x1F

    case ready = 0x20
    case credit = 0x21
    case job = 0x22
    case done = 0x23
    case fail = 0x24
    case heartbeat = 0x25
    case disconnect = 0x26
    case holding = 0x27
    case cancelJob = 0x28

    case store = 0x30
    case stored = 0x31
    case list = 0x32
    case listReply = 0x33
    case get = 0x34
    case getReply = 0x35
    case delete = 0x36
    case stats = 0x37
    case statsReply = 0x38

    case event = 0x40
    case events = 0x41

    case jobList = 0x50
    case jobListReply = 0x51

    /// The command's name as the specification writes it.
    public var name: String {
        switch self {
        case .error: "ERROR"
        case .ping: "PING"
        case .pong: "PONG"
        case .ok: "OK"
        case .submit: "SUBMIT"
        case .accepted: "ACCEPTED"
        case .rejected: "REJECTED"
        case .status: "STATUS"
        case .statusReply: "STATUS-REPLY"
        case .replay: "REPLAY"
        case .replayEnd: "REPLAY-END"
        case .deadList: "DEAD-LIST"
        case .deadListReply: "DEAD-LIST-REPLY"
        case .deadRetry: "DEAD-RETRY"
        case .deadDiscard: "DEAD-DISCARD"
        case .jobInfo: "JOB-INFO"
        case .jobInfoReply: "JOB-INFO-REPLY"
        case .cancel: "CANCEL"
        case .pause: "PAUSE"
        case .resume: "RESUME"
        case .cancelJob: "CANCEL-JOB"
        case .ready: "READY"
        case .credit: "CREDIT"
        case .job: "JOB"
        case .done: "DONE"
        case .fail: "FAIL"
        case .heartbeat: "HEARTBEAT"
        case .disconnect: "DISCONNECT"
        case .holding: "HOLDING"
        case .store: "STORE"
        case .stored: "STORED"
        case .list: "LIST"
        case .listReply: "LIST-REPLY"
        case .get: "GET"
        case .getReply: "GET-REPLY"
        case .delete: "DELETE"
        case .stats: "STATS"
        case .statsReply: "STATS-REPLY"
        case .event: "EVENT"
        case .events: "EVENTS"
        case .jobList: "JOB-LIST"
        case .jobListReply: "JOB-LIST-REPLY"
        }
    }

    public var description: String { name }

    /// How many of the last frames a peer may leave out: SUBMIT's submit
    /// key (frame 8), not-before time (frame 9), most attempts (frame 10),
    /// deadline (frame 11) and time limit (frame 12) are optional, so
    /// SUBMIT has 8 to 13 frames; JOB's time limit (frame 8), so JOB has 8
    /// or 9; JOB-LIST's cursor (frame 6), so it has 6 or 7.
    public var optionalFrames: Int {
        switch self {
        case .submit: 5
        case .job, .jobList: 1
        default: 0
        }
    }

    /// The most frames this command's message has, counting the protocol
    /// id and command frames (and not the ROUTER identity or the event
    /// topic). Every command has this fixed count, or one of the counts
    /// it lists (`optionalFrames`).
    public var frameCount: Int {
        switch self {
        case .heartbeat, .disconnect: 2
        case .ping, .pong, .status, .stats, .credit, .holding, .pause, .resume: 3
        case .ok, .statusReply, .deadListReply, .deadRetry, .deadDiscard, .listReply, .delete, .statsReply, .events, .jobListReply,
             .jobInfo, .jobInfoReply, .cancel, .cancelJob: 4
        case .error, .accepted, .rejected, .replay, .replayEnd, .deadList, .done, .list, .get: 5
        case .ready, .stored, .getReply: 6
        case .jobList: 7
        case .job: 9
        case .submit: 13
        case .fail: 9
        case .store: 10
        case .event: 14
        }
    }

    /// Whether frame 2 is a client-chosen request id (u64) echoed by the reply.
    public var carriesRequestID: Bool {
        switch self {
        case .ready, .credit, .job, .done, .fail, .heartbeat, .disconnect, .holding, .cancelJob, .event, .events: false
        default: true
        }
    }

    /// Commands valid on the broker frontend (either direction).
    public static let frontend: Set<Command> = [
        .error, .ping, .pong, .ok, .submit, .accepted, .rejected, .status, .statusReply,
        .replay, .replayEnd, .deadList, .deadListReply, .deadRetry, .deadDiscard, .event,
        .jobInfo, .jobInfoReply, .cancel, .pause, .resume, .jobList, .jobListReply,
    ]
    /// Commands valid on the broker backend (either direction).
    public static let backend: Set<Command> = [
        .error, .ready, .credit, .job, .done, .fail, .heartbeat, .disconnect, .holding, .ping, .pong, .cancelJob,
    ]
    /// Commands published on the broker's events socket (after their topic).
    public static let eventsSocket: Set<Command> = [.event, .events]
    /// Commands valid on the storage node socket (either direction).
    public static let storage: Set<Command> = [
        .error, .ping, .pong, .ok, .store, .stored, .list, .listReply, .get, .getReply,
        .delete, .stats, .statsReply,
    ]

    /// The commands of `socket` that travel to `receiver` (section 3.2):
    /// the requests a server reads, or the replies, JOBs and events a
    /// connecting peer reads. ERROR, HEARTBEAT and DISCONNECT go both ways,
    /// and on the backend PING and PONG too (a worker's probe pings the
    /// broker; a worker answers a PING).
    public static func sent(to receiver: Receiver, on socket: WireSocket) -> Set<Command> {
        switch (socket, receiver) {
        case (.frontend, .server): frontendToServer
        case (.frontend, .peer): frontendToPeer
        case (.backend, .server): backendToServer
        case (.backend, .peer): backendToPeer
        case (.store, .server): storeToServer
        case (.store, .peer): storeToPeer
        }
    }

    // Built once: every decode of a received message asks for one of these.
    private static let frontendToServer: Set<Command> = [
        .error, .ping, .submit, .status, .replay, .deadList, .deadRetry, .deadDiscard, .jobInfo, .cancel, .pause, .resume, .jobList,
    ]
    private static let frontendToPeer: Set<Command> = [
        .error, .pong, .ok, .accepted, .rejected, .statusReply, .replayEnd, .deadListReply, .event, .jobInfoReply, .jobListReply,
    ]
    private static let backendToServer: Set<Command> = [.error, .ready, .credit, .done, .fail, .heartbeat, .disconnect, .holding, .ping, .pong]
    private static let backendToPeer: Set<Command> = [.error, .job, .cancelJob, .heartbeat, .disconnect, .ping, .pong]
    private static let storeToServer: Set<Command> = [.error, .ping, .store, .list, .get, .delete, .stats]
    private static let storeToPeer: Set<Command> = [.error, .pong, .ok, .stored, .listReply, .getReply, .statsReply]
}

/// The three DRK1 sockets that carry requests and replies (the events
/// socket only publishes).
public enum WireSocket: Sendable, CaseIterable {
    case frontend, backend, store

    /// Who reads a message sent to `receiver` on this socket, for reasons.
    func name(of receiver: Receiver) -> String {
        switch (self, receiver) {
        case (.frontend, .server), (.backend, .server): "the broker"
        case (.store, .server): "the storage node"
        case (.frontend, .peer), (.store, .peer): "a client"
        case (.backend, .peer): "a worker"
        }
    }
}

/// Which end of a socket reads a message: the server that binds it (the
/// broker on the frontend and backend, the storage node on the store
/// socket), or a peer that connects to it (a producer, client or worker).
public enum Receiver: Sendable, CaseIterable {
    case server, peer
}
