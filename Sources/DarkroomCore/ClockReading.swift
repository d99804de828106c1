/// A reading of the continuous clock, kept as the time since a fixed
/// origin (the first reading in the process).
///
/// `ContinuousClock.Instant` is not a frozen type: outside the standard
/// library its size is not known when compiling, so a struct, optional or
/// array element that holds one is copied and compared through the
/// runtime's value witnesses. This holds a `Duration`, which is frozen, and
/// is copied as plain bytes. For times kept for every job and read several
/// times a job (a producer's pending SUBMITs); it converts to and from
/// `Instant` where an API takes one.
public struct ClockReading: Comparable, Hashable, Sendable {
    private static let origin = ContinuousClock.now
    private let sinceOrigin: Duration

    public init(_ instant: ContinuousClock.Instant) {
        sinceOrigin = instant - ClockReading.origin
    }

    private init(sinceOrigin: Duration) {
        self.sinceOrigin = sinceOrigin
    }

    public static var now: ClockReading { ClockReading(ContinuousClock.now) }

    public var instant: ContinuousClock.Instant { ClockReading.origin + sinceOrigin }

    public static func < (a: ClockReading, b: ClockReading) -> Bool { a.sinceOrigin < b.sinceOrigin }

    public static func + (reading: ClockReading, duration: Duration) -> ClockReading {
        ClockReading(sinceOrigin: reading.sinceOrigin + duration)
    }

    public static func - (a: ClockReading, b: ClockReading) -> Duration { a.sinceOrigin - b.sinceOrigin }
}
