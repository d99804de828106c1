import DarkroomProtocol

/// Jobs accepted, stored and failed per second over a sliding window of whole seconds.
struct RateCounter {
    let windowSeconds: Int
    private var buckets: [(second: UInt64, accepted: Int, stored: Int, failed: Int)]

    init(windowSeconds: Int) {
        self.windowSeconds = max(1, windowSeconds)
        buckets = Array(repeating: (0, 0, 0, 0), count: self.windowSeconds)
    }

    mutating func add(accepted: Int, stored: Int, failed: Int, now: UInt64) {
        guard accepted + stored + failed > 0 else { return }
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
