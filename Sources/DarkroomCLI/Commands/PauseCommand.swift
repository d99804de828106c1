import DarkroomClient
import DarkroomProtocol
import DarkroomZMQ

/// `darkroom pause` and `darkroom resume`: hold the broker's dispatch, and
/// let it go again (DRK1 PAUSE and RESUME).
enum PauseCommand {
    static let pauseSpec = CommandSpec(
        name: "pause",
        abstract: "Stop sending jobs to workers (submits are still queued) until resume.",
        discussion: """
        The broker stops handing jobs to workers. It still accepts and queues
        submits, scheduled jobs still come due, and the jobs already running
        finish and are stored; workers stay connected and idle. The pause is
        written to the queue's database before this command returns, so it
        holds through a restart or a crash of the broker until `darkroom
        resume`. `darkroom status` shows since when dispatch is paused. Use it
        to drain the workers before maintenance, or to hold a backlog while
        the storage node is down.

        Pausing a paused broker changes nothing and says so. With --json:
        {"paused": true, "changed": BOOL, "ready": N, "inFlight": N}. Needs
        an admin key when the broker requires keys.
        """,
        options: [
            ClientOptions.json, ClientOptions.broker, ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey,
        ]
    )

    static let resumeSpec = CommandSpec(
        name: "resume",
        abstract: "Send jobs to workers again after pause.",
        discussion: """
        The broker hands the queued jobs to its workers again, highest
        priority first. Resuming a broker that is not paused changes nothing
        and says so. With --json: {"paused": false, "changed": BOOL, "ready":
        N, "inFlight": N}.
        """,
        options: [
            ClientOptions.json, ClientOptions.broker, ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.serverKey, ClientOptions.storeKey,
        ]
    )

    /// What every command that meets a paused broker says of it, after
    /// its own words for "dispatch is paused".
    static func held(since: UInt64) -> String {
        "since \(JobCommand.time(since)): no job goes to a worker until `darkroom resume`"
    }

    static func pause(_ args: ParsedArguments) throws -> Int32 { try run(args, paused: true) }
    static func resume(_ args: ParsedArguments) throws -> Int32 { try run(args, paused: false) }

    private static func run(_ args: ParsedArguments, paused: Bool) throws -> Int32 {
        let context = try Context()
        let admin = try ClientOptions.admin(args, context: context)
        let changed: Bool
        let status: BrokerStatus
        do {
            // The queue as it stood just before: what the change holds or lets go.
            status = try admin.status()
            changed = try admin.setPaused(paused)
        } catch {
            throw error.runtime
        }
        let ready = status.queue.ready.reduce(0, +)
        if args.flag("json") {
            var o = JSONObject()
            o.set("paused", paused)
            o.set("changed", changed)
            o.set("ready", Int(clamping: ready))
            o.set("inFlight", Int(clamping: status.queue.inFlight))
            Console.out(o.text)
            return 0
        }
        if paused {
            let since = status.queue.pausedSince.map { " since \(JobCommand.time($0))" } ?? ""
            Console.out(changed ? "dispatch paused: \(ready) ready job(s) stay queued, \(status.queue.inFlight) running job(s) finish"
                                : "dispatch was already paused\(since); \(ready) ready job(s) queued")
            Console.err("`darkroom resume` sends jobs to workers again")
        } else {
            Console.out(changed ? "dispatch resumed: \(ready) ready job(s) go to workers"
                                : "dispatch was not paused; \(ready) ready job(s), \(status.queue.inFlight) running")
        }
        return 0
    }
}
