import Testing
import DarkroomClient

@Suite struct SubmitWindowTests {
    @Test("starts at the initial size within its bounds, and one job always fits")
    func bounds() {
        let small = SubmitWindow(maximum: 3)
        #expect(small.limit == 3 && small.minimum == 3)
        let window = SubmitWindow(maximum: 1000, initial: 64, minimum: 8, maxBytes: 1_000)
        #expect(window.limit == 64)
        #expect(window.hasRoom(inFlight: 0, bytesInFlight: 0))
        #expect(window.hasRoom(inFlight: 63, bytesInFlight: 999))
        #expect(!window.hasRoom(inFlight: 64, bytesInFlight: 0))
        #expect(!window.hasRoom(inFlight: 1, bytesInFlight: 1_000), "the byte bound is reached")
        #expect(window.hasRoom(inFlight: 0, bytesInFlight: 5_000), "one job goes however large")
        #expect(SubmitWindow(maximum: 0).limit == 1)
    }

    @Test("fast answers to a full window grow it by one each, up to the maximum")
    func growsWhileFast() {
        var window = SubmitWindow(maximum: 100, initial: 10)
        for _ in 0..<10 { window.answered(after: .milliseconds(2), inFlight: window.limit) }
        #expect(window.limit == 20, "a window's worth of fast answers doubles it")
        for _ in 0..<1_000 { window.answered(after: .milliseconds(2), inFlight: window.limit) }
        #expect(window.limit == 100)
    }

    @Test("a window the source does not fill does not grow")
    func idleWindowDoesNotGrow() {
        var window = SubmitWindow(maximum: 1_000, initial: 64)
        for _ in 0..<500 { window.answered(after: .milliseconds(1), inFlight: 3) }
        #expect(window.limit == 64)
    }

    @Test("answers well beyond the fastest shrink it by a quarter, at most once per window of answers")
    func shrinksWhenSlow() {
        var window = SubmitWindow(maximum: 1_000, initial: 64, minimum: 8, tolerance: .milliseconds(20))
        window.answered(after: .milliseconds(5), inFlight: 64)
        #expect(window.limit == 65 && window.baseLatency == .milliseconds(5))
        // Within the tolerance of the fastest: still fast.
        window.answered(after: .milliseconds(24), inFlight: 65)
        #expect(window.limit == 66)
        // Far slower: the queue at the broker grows, the window gives back a
        // quarter once a window of answers has come since it last shrank.
        for _ in 0..<65 { window.answered(after: .milliseconds(200), inFlight: window.limit) }
        #expect(window.limit == 50)
        for _ in 0..<48 { window.answered(after: .milliseconds(200), inFlight: window.limit) }
        #expect(window.limit == 50, "not twice within one window of answers")
        for _ in 0..<400 { window.answered(after: .seconds(5), inFlight: window.limit) }
        #expect(window.limit >= 8)
    }

    @Test("the fastest answer is forgotten slowly: a broker slower for good lets the window grow again")
    func baseDrifts() {
        var window = SubmitWindow(maximum: 1_000, initial: 16, minimum: 8, tolerance: .milliseconds(1))
        window.answered(after: .milliseconds(1), inFlight: 16)
        for _ in 0..<100 { window.answered(after: .milliseconds(50), inFlight: window.limit) }
        #expect(window.limit == 8, "fifty times the fastest answer: shrunk to the minimum")
        for _ in 0..<500 { window.answered(after: .milliseconds(50), inFlight: window.limit) }
        let base = window.baseLatency ?? .zero
        #expect(base > .milliseconds(25) && base < .milliseconds(50))
        #expect(window.limit > 100, "50 ms is the new normal: the window grows again")
    }

    @Test("a refusal for now or a silence halves it, never below the minimum")
    func backsOff() {
        var window = SubmitWindow(maximum: 1_000, initial: 100, minimum: 8)
        window.backOff()
        #expect(window.limit == 50)
        for _ in 0..<10 { window.backOff() }
        #expect(window.limit == 8)
    }
}
