extension Duration {
    /// Whole milliseconds, rounded down.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }

    /// Milliseconds with their fraction, for reports and timings.
    public var fractionalMilliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }

    /// Seconds with their fraction.
    public var fractionalSeconds: Double { fractionalMilliseconds / 1_000 }
}
