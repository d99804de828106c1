import DarkroomProtocol

/// Jobs accepted, stored and failed per second over a sliding window of
/// whole seconds, and in all since the broker started (for the metrics'
/// counters, which Prometheus turns into rates over any window it likes).
struct RateCounter {
    let windowSeconds: Int
    private var buckets: [(second: UInt64, accepted: Int, stored: Int, failed: Int)]
    private(set) var totals = JobTotals()

    init(windowSeconds: Int) {
        self.windowSeconds = max(1, windowSeconds)
        buckets = Array(repeating: (0, 0, 0, 0), count: self.windowSeconds)
    }

    /// Counts a committed turn's jobs (`turn`, counted from zero) at `now`.
    mutating func add(_ turn: JobTotals, now: UInt64) {
        totals.add(turn)
        guard turn.accepted + turn.stored + turn.failed > 0 else { return }
        let second = now / 1_000
        let slot = Int(second % UInt64(windowSeconds))
        if buckets[slot].second != second { buckets[slot] = (second, 0, 0, 0) }
        buckets[slot].accepted += Int(turn.accepted)
        buckets[slot].stored += Int(turn.stored)
        buckets[slot].failed += Int(turn.failed)
    }

    func rates(now: UInt64) -> Rates {
        let second = now / 1_000
        var totals = (0, 0, 0)
        for bucket in buckets where bucket.second + UInt64(windowSeconds) > second && bucket.second <= second {
            totals.0 += bucket.accepted
            totals.1 += bucket.stored
            totals.2 += bucket.failed
        }
        let window = Double(windowSeconds)
        return Rates(windowSeconds: UInt32(windowSeconds), accepted: Double(totals.0) / window,
                     stored: Double(totals.1) / window, failed: Double(totals.2) / window)
    }
}

/// Jobs accepted, stored and failed (attempts that failed, each counted)
/// since the broker started; only committed turns count.
struct JobTotals: Sendable, Equatable {
    var accepted: UInt64 = 0
    var stored: UInt64 = 0
    var failed: UInt64 = 0
    /// Jobs ended `cancelled`, those whose deadline passed among them.
    var cancelled: UInt64 = 0
    var expired: UInt64 = 0

    mutating func add(_ other: JobTotals) {
        accepted += other.accepted
        stored += other.stored
        failed += other.failed
        cancelled += other.cancelled
        expired += other.expired
    }

    /// Counts what a transition accepts, stores, fails, cancels and expires.
    mutating func add(_ t: Transition) {
        add(JobTotals(accepted: UInt64(t.accepted), stored: UInt64(t.stored), failed: UInt64(t.failed),
                      cancelled: UInt64(t.cancelled), expired: UInt64(t.expired)))
    }
}
