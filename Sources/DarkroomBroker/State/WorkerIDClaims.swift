/// Which processes said READY under each worker id: tells two workers that
/// share an id apart from one that reconnected or restarted.
///
/// A READY under an id the broker knows takes the id over: the earlier
/// connection is sent DISCONNECT and its leases are held for the new one.
/// That is right for a worker that reconnects (same process) or restarts
/// (a new one, for good). Two live workers started with the same `--id`
/// instead take the id from each other at every reconnect, without end, and
/// each side only saw "broker sent DISCONNECT". Their READYs alternate
/// between two processes (A, B, A), which a restart never does: then the
/// broker says so, at most once a minute for an id, and the process that
/// holds the id then keeps it (`holder`): the other's READYs are refused
/// while the holder is registered, so one of the two works instead of
/// neither.
struct WorkerIDClaims {
    /// For each contested id, the process that keeps it.
    private var holders: [String: String] = [:]

    /// The process that keeps `workerID` after a clash, if there was one.
    func holder(of workerID: String) -> String? { holders[workerID] }

    /// The holder of `workerID` is gone (its worker left the registry):
    /// the next READY under the id takes it, as any READY would.
    mutating func release(_ workerID: String) { holders[workerID] = nil }

    /// For each id, the process of its latest READY and the one before it
    /// (as "host H pid P").
    private var recent: [String: (earlier: String?, last: String)] = [:]
    /// When the clash of an id was last reported (monotonic ms).
    private var reported: [String: UInt64] = [:]
    /// How often one id's clash is reported.
    static let reportEvery: UInt64 = 60_000
    /// The ids remembered: past it, the memory starts again (a broker that
    /// saw this many ids has workers that name themselves afresh at each
    /// start, and old ids do not come back).
    static let capacity = 4_096

    /// Notes a READY under `workerID` from `process`; returns the other
    /// process when this READY takes the id back from it (A, B, A) and the
    /// clash was not reported in the last minute.
    mutating func note(_ workerID: String, process: String, now: UInt64) -> String? {
        let before = recent[workerID]
        if before?.last == process { return nil }
        if before == nil, recent.count >= Self.capacity {
            recent.removeAll()
            reported.removeAll()
        }
        recent[workerID] = (before?.last, process)
        guard let before, before.earlier == process else { return nil }
        if holders.count >= Self.capacity { holders.removeAll() }
        holders[workerID] = process
        if let last = reported[workerID], now &- last < Self.reportEvery { return nil }
        reported[workerID] = now
        return before.last
    }
}
