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

    mutating func add(accepted: Int, stored: Int, failed: Int, cancelled: Int = 0, expired: Int = 0, now: UInt64) {
        totals.cancelled += UInt64(max(0, cancelled))
        totals.expired += UInt64(max(0, expired))
        guard accepted + stored + failed > 0 else { return }
        totals.accepted += UInt64(max(0, accepted))
        totals.stored += UInt64(max(0, stored))
        totals.failed += UInt64(max(0, failed))
        let second = now / 1_000
        let slot = Int(second % UInt64(windowSeconds))
        if buckets[slot].second != second { buckets[slot] = (second, 0, 0, 0) }
        buckets[slot].accepted += accepted
        buckets[slot].stored += stored
        buckets[slot].failed += failed
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
}
