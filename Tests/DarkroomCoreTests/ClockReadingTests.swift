import DarkroomCore
import Testing

@Suite("Clock readings")
struct ClockReadingTests {
    @Test("a reading orders, adds and subtracts as the instant it stands for, and gives that instant back")
    func readingsFollowTheirInstants() {
        let instant = ContinuousClock.now
        let reading = ClockReading(instant)
        #expect(reading.instant == instant)
        let later = reading + .milliseconds(250)
        #expect(later.instant == instant + .milliseconds(250))
        #expect(later - reading == .milliseconds(250))
        #expect(reading - later == .milliseconds(-250))
        #expect(reading < later && !(later < reading))
        #expect(ClockReading(instant) == reading)
        #expect(max(reading, later) == later)
        // Before the first reading of the process, too.
        let earlier = ClockReading(instant - .seconds(3_600))
        #expect(earlier < reading && reading - earlier == .seconds(3_600))
        #expect(ClockReading.now >= reading)
    }
}
