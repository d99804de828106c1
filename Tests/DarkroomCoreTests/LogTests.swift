import DarkroomCore
import Foundation
import Testing

@Suite struct LogTimestampTests {
    @Test func formatsUTCWithMilliseconds() {
        // 2026-11-29T14:05:09.042Z
        let date = Date(timeIntervalSince1970: 1_795_961_109.042)
        #expect(Logger.timestamp(date) == "2026-11-29T14:05:09.042Z")
    }

    @Test func padsEveryField() {
        // 2001-02-03T04:05:06.007Z
        let date = Date(timeIntervalSince1970: 981_173_106.0075)
        #expect(Logger.timestamp(date) == "2001-02-03T04:05:06.007Z")
    }

    @Test func epochStart() {
        #expect(Logger.timestamp(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
    }
}
