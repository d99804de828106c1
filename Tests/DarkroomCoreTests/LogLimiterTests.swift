import DarkroomCore
import Testing

@Suite("Log limiter")
struct LogLimiterTests {
    @Test("each kind writes its burst per interval; the next line after the interval says how many were left out")
    func burstThenCount() {
        var limiter = LogLimiter(burst: 3, interval: .seconds(10))
        let start = ContinuousClock.now
        var written = 0
        for index in 0..<1_000 {
            if let note = limiter.admit("bad messages", now: start + .milliseconds(index)) {
                #expect(note.isEmpty)
                written += 1
            }
        }
        #expect(written == 3)
        #expect(limiter.leftOut("bad messages") == 997)
        // Another kind has its own lines.
        #expect(limiter.admit("refused STOREs", now: start + .seconds(1)) == "")
        // Still within the interval: left out.
        #expect(limiter.admit("bad messages", now: start + .seconds(9)) == nil)
        // The interval has passed: written, with the count of the last one.
        let note = limiter.admit("bad messages", now: start + .seconds(10))
        #expect(note == " (998 similar line(s) left out over the last 10 s)")
        #expect(limiter.leftOut("bad messages") == 0)
        // A fresh interval: the burst again, less the line just written.
        #expect(limiter.admit("bad messages", now: start + .seconds(10)) == "")
        #expect(limiter.admit("bad messages", now: start + .seconds(10)) == "")
        #expect(limiter.admit("bad messages", now: start + .seconds(10)) == nil)
    }

    @Test("a flood that stops is reported by due once its interval is over, and only then")
    func dueAfterTheInterval() {
        var limiter = LogLimiter(burst: 2, interval: .seconds(10))
        let start = ContinuousClock.now
        for _ in 0..<50 { _ = limiter.admit("bad messages", now: start) }
        for _ in 0..<2 { _ = limiter.admit("oversized messages", now: start) }
        #expect(limiter.untilFlush(now: start + .seconds(4)) == .seconds(6))
        #expect(limiter.due(now: start + .seconds(9)).isEmpty)
        #expect(limiter.due(now: start + .seconds(12)) == ["bad messages: 48 similar line(s) left out over the last 12 s"])
        // Reported once; the kinds start afresh.
        #expect(limiter.due(now: start + .seconds(30)).isEmpty)
        #expect(limiter.untilFlush(now: start + .seconds(30)) == nil)
        #expect(limiter.admit("bad messages", now: start + .seconds(30)) == "")
    }
}
