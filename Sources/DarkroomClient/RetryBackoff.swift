/// How long a client waits between attempts to reach a server that does not
/// answer: the first pause is `initial`, each next one twice the last, up
/// to `maximum`, and each is shortened by a random part of up to `jitter`
/// of it, so that many clients that lost the same broker at the same moment
/// do not all come back in the same instant.
///
/// The pause is only the time between attempts: an attempt itself waits up
/// to the client's `timeout` for the server, and a server that comes back
/// during that wait is heard at once. So the cap bounds how long a client
/// can be deaf to a returning server, not how long it waits for it.
public struct RetryBackoff: Sendable, Hashable {
    /// The pause after the first failure.
    public var initial: Duration
    /// The longest pause.
    public var maximum: Duration
    /// The part of each pause (0...1) that may be taken off at random.
    public var jitter: Double

    public init(initial: Duration, maximum: Duration, jitter: Double = 0.5) {
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
    }

    /// A quarter second, doubling up to 4 s, less up to half of each at
    /// random: quick to notice a short blip, and a returning broker is heard
    /// within a few seconds even after a long outage.
    public static let standard = RetryBackoff(initial: .milliseconds(250), maximum: .seconds(4))

    /// The pause after `failures` failures in a row (1 for the first),
    /// where `unit` is a random number in 0...1 (0 takes nothing off).
    public func delay(afterFailures failures: Int, unit: Double) -> Duration {
        let doublings = min(max(0, failures - 1), 30)
        let full = min(maximum, initial * (1 << doublings))
        let cut = max(0, min(1, jitter)) * max(0, min(1, unit))
        return full * (1 - cut)
    }

    /// The pause after `failures` failures in a row, with fresh jitter.
    public func delay(afterFailures failures: Int) -> Duration {
        delay(afterFailures: failures, unit: Double.random(in: 0...1))
    }
}
