/// How often and how soon a job that failed retryably runs again.
struct RetryPolicy: Sendable, Equatable {
    /// Counted dispatches before a retryable failure makes the job dead.
    var maxAttempts: Int
    /// Backoff after the first counted failure (ms); doubles with each.
    var backoffBase: UInt64
    /// The longest backoff (ms).
    var backoffCap: UInt64
    /// Each backoff is multiplied by a random factor in 1 ± jitter.
    var jitter: Double

    /// Whether a job that has used `used` counted attempts may run again:
    /// by its own limit when it has one, else by this policy's.
    func allowsRetry(afterUsing used: Int, jobLimit: UInt16? = nil) -> Bool { used < jobLimit.map(Int.init) ?? maxAttempts }

    /// The backoff in ms after `used` counted attempts: base × 2^(used−1),
    /// capped, times 1 ± jitter, where `unit` is a random number in 0...1
    /// (0.5 gives no jitter).
    func backoff(afterUsing used: Int, unit: Double) -> UInt64 {
        let exponent = max(0, min(used - 1, 40))
        let raw = min(Double(backoffCap), Double(backoffBase) * Double(UInt64(1) << UInt64(exponent)))
        let spread = max(0, min(1, jitter))
        let factor = 1 + spread * (2 * max(0, min(1, unit)) - 1)
        return UInt64(max(0, raw * factor))
    }
}
