/// How many SUBMITs a producer keeps unanswered at once: a window that
/// grows while the broker answers quickly and shrinks when it slows down or
/// pushes back, always within a job count and a byte count.
///
/// The broker commits SUBMITs in groups and answers each group at once, so
/// an answer's latency is the time to reach the broker plus the time its
/// SUBMIT waited in the broker's queue. While answers come back about as
/// fast as the fastest one seen (`baseLatency`), the broker has room: each
/// such answer lets one more SUBMIT out, which doubles the window every
/// round trip. Once answers take clearly longer than that, SUBMITs are
/// queueing at the broker without making it any faster, and the window
/// gives back a quarter, at most once per window of answers. A refusal for
/// now (queue full) or a silent broker halves it.
///
/// A pure value: the producer feeds it the latencies it measures, so the
/// same inputs always give the same window.
public struct SubmitWindow: Sendable, Equatable {
    /// The window never shrinks below this (nor below 1).
    public let minimum: Int
    /// The window never grows beyond this.
    public let maximum: Int
    /// The most image bytes in flight; one job is always allowed, however large.
    public let maxBytes: Int
    /// How much slower than `baseLatency` an answer may be and still count
    /// as fast: the larger of this and `baseLatency` itself.
    public let tolerance: Duration
    /// The current limit on SUBMITs in flight, from `minimum` to `maximum`.
    public private(set) var limit: Int
    /// The fastest answer seen, drifting slowly towards later ones (over
    /// some sixteen windows of answers) so that a broker that got slower
    /// for good is not compared for ever with one lucky early answer; nil
    /// before the first answer.
    public private(set) var baseLatency: Duration?
    /// Answers since the window last shrank.
    private var answersSinceShrink = 0

    /// The window a producer starts with, when its maximum and the byte
    /// bound allow it. A thousand small SUBMITs are a few broker turns; a
    /// start at 64 took half of a 5,000-job run to grow (answers queued
    /// behind a turn seldom count as fast), in broker turns too small to
    /// share their commit: 17% fewer jobs a second than a start at 1,024,
    /// and more broker CPU a job (5 interleaved pairs of the README path).
    /// Photos are held to the byte bound from the first SUBMIT either way.
    public static let defaultInitial = 1024
    /// The default byte bound: a window of large images stays within this.
    public static let defaultMaxBytes = 64 << 20

    public init(maximum: Int, initial: Int = SubmitWindow.defaultInitial, minimum: Int = 8,
                maxBytes: Int = SubmitWindow.defaultMaxBytes, tolerance: Duration = .milliseconds(20)) {
        self.maximum = max(1, maximum)
        self.minimum = max(1, min(minimum, self.maximum))
        self.limit = max(self.minimum, min(initial, self.maximum))
        self.maxBytes = max(1, maxBytes)
        self.tolerance = max(.zero, tolerance)
    }

    /// Whether one more SUBMIT of `nextBytes` may go out while `inFlight`
    /// SUBMITs of `bytesInFlight` bytes await answers.
    public func admits(inFlight: Int, bytesInFlight: Int, nextBytes: Int) -> Bool {
        if inFlight == 0 { return true }
        return inFlight < limit && bytesInFlight + nextBytes <= maxBytes
    }

    /// Whether the window has room for another SUBMIT before its size is
    /// known (a cheap test before taking the next input).
    public func hasRoom(inFlight: Int, bytesInFlight: Int) -> Bool {
        inFlight == 0 || (inFlight < limit && bytesInFlight < maxBytes)
    }

    /// An answer (accepted, or refused for good) came `latency` after its
    /// SUBMIT was sent, with `inFlight` SUBMITs (this one included) out.
    public mutating func answered(after latency: Duration, inFlight: Int) {
        let latency = max(.zero, latency)
        let base: Duration
        if let current = baseLatency, current <= latency {
            // Drift up by a sixteenth of the gap per window of answers: a
            // minimum forgotten over some sixteen round trips.
            base = current + (latency - current) / (16 * limit)
        } else {
            base = latency
        }
        baseLatency = base
        answersSinceShrink += 1
        if latency <= base + max(base, tolerance) {
            // Grow only a window that is being used: a source that is slower
            // than the broker never fills it, and says nothing about the broker.
            if inFlight * 2 >= limit { limit = min(maximum, limit + 1) }
        } else if answersSinceShrink >= limit {
            limit = max(minimum, limit - limit / 4)
            answersSinceShrink = 0
        }
    }

    /// The broker pushed back: refused a SUBMIT for now (queue full, shutting
    /// down) or went silent. Halves the window.
    public mutating func backOff() {
        limit = max(minimum, limit / 2)
        answersSinceShrink = 0
    }
}
