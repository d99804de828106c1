/// Keeps a connection problem to two log lines: one when it starts, and one
/// when it ends with how long it lasted and how many tries it took. Every
/// try in between is counted, not logged, so a worker whose broker is gone
/// for an hour (or refuses its key) writes two lines, not thousands.
struct ConnectionTrouble {
    /// When the problem started, nil while there is none.
    private(set) var since: ContinuousClock.Instant?
    /// Tries since it started.
    private(set) var tries = 0

    var isOngoing: Bool { since != nil }

    /// Counts a try that failed; true for the first, which the caller logs.
    mutating func failed(at now: ContinuousClock.Instant) -> Bool {
        tries += 1
        guard since == nil else { return false }
        since = now
        return true
    }

    /// Ends the problem, if there was one: how long it lasted and the tries
    /// it took, for the caller to log.
    mutating func ended(at now: ContinuousClock.Instant) -> (lasted: Duration, tries: Int)? {
        guard let since else { return nil }
        defer {
            self.since = nil
            tries = 0
        }
        return (now - since, tries)
    }
}
