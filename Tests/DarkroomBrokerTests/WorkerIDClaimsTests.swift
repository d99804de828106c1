@testable import DarkroomBroker
import Testing

struct WorkerIDClaimsTests {
    @Test func readiesAlternatingBetweenTwoProcessesAreAClashReportedOnceAMinute() {
        var claims = WorkerIDClaims()
        #expect(claims.note("w", process: "host a pid 1", now: 0) == nil)
        // The same process again (a reconnect), then a new one (a restart): no clash.
        #expect(claims.note("w", process: "host a pid 1", now: 10) == nil)
        #expect(claims.note("w", process: "host a pid 2", now: 20) == nil)
        #expect(claims.note("w", process: "host a pid 3", now: 30) == nil)
        // pid 2 takes the id back from pid 3: two live workers share it.
        #expect(claims.note("w", process: "host a pid 2", now: 40) == "host a pid 3")
        #expect(claims.note("w", process: "host a pid 3", now: 50) == nil, "reported at most once a minute")
        #expect(claims.note("w", process: "host a pid 2", now: 60) == nil)
        #expect(claims.note("w", process: "host a pid 3", now: 40 + WorkerIDClaims.reportEvery) == "host a pid 2")
        // Another id is its own story.
        #expect(claims.note("v", process: "host a pid 2", now: 70) == nil)
        #expect(claims.note("v", process: "host b pid 2", now: 80) == nil)
        #expect(claims.note("v", process: "host a pid 2", now: 90) == "host b pid 2")
    }

    @Test func theMemoryOfIdsIsBounded() {
        var claims = WorkerIDClaims()
        for n in 0..<WorkerIDClaims.capacity {
            _ = claims.note("worker-\(n)", process: "host h pid \(n)", now: 0)
        }
        _ = claims.note("w", process: "host a pid 1", now: 0)  // past the capacity: starts again
        _ = claims.note("w", process: "host a pid 2", now: 0)
        #expect(claims.note("w", process: "host a pid 1", now: 0) == "host a pid 2")
        // worker-0 was forgotten: its next process is a first READY.
        #expect(claims.note("worker-0", process: "host h pid 99", now: 0) == nil)
        #expect(claims.note("worker-0", process: "host h pid 0", now: 0) == nil)
    }

    @Test func afterAClashTheIdStaysWithTheProcessThatTookItBackUntilReleased() {
        var claims = WorkerIDClaims()
        _ = claims.note("w", process: "host a pid 1", now: 0)
        #expect(claims.holder(of: "w") == nil, "a first READY is no clash")
        _ = claims.note("w", process: "host a pid 2", now: 10)
        #expect(claims.holder(of: "w") == nil, "a restart is no clash")
        _ = claims.note("w", process: "host a pid 1", now: 20)
        #expect(claims.holder(of: "w") == "host a pid 1")
        // Still held past the once-a-minute report.
        _ = claims.note("w", process: "host a pid 1", now: 30)
        #expect(claims.holder(of: "w") == "host a pid 1")
        claims.release("w")
        #expect(claims.holder(of: "w") == nil)
        #expect(claims.holder(of: "v") == nil)
    }
}
