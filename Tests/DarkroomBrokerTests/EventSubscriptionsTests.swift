@testable import DarkroomBroker
import DarkroomProtocol
import Testing

/// The broker's account of the events socket's subscriptions, fed the
/// messages an XPUB passes up with `ZMQ_XPUB_VERBOSER`.
@Suite("Event subscriptions")
struct EventSubscriptionsTests {
    let ev = Wire.eventTopic
    let eb = Wire.eventBatchTopic

    @Test("a form is published while a connection holds a prefix of its topic")
    func prefixes() {
        var subscriptions = EventSubscriptions()
        #expect(!subscriptions.wants(ev) && !subscriptions.wants(eb))
        #expect(subscriptions.take([1] + ev, fromConnection: true) == .noted)
        #expect(subscriptions.wants(ev) && !subscriptions.wants(eb))
        _ = subscriptions.take([1] + Array("e".utf8), fromConnection: true)
        #expect(subscriptions.wants(eb))
        // The connection holding 'e' goes: the socket gives it up.
        _ = subscriptions.take([0] + Array("e".utf8), fromConnection: false)
        #expect(subscriptions.wants(ev) && !subscriptions.wants(eb))
        _ = subscriptions.take([1], fromConnection: true)
        #expect(subscriptions.wants(eb))
        #expect(subscriptions.strayBytes == 0)
    }

    @Test("a peer's own unsubscribe, which may come from a stranger, takes nothing away")
    func strangers() {
        var subscriptions = EventSubscriptions()
        _ = subscriptions.take([1] + eb, fromConnection: true)
        for topic in [[], ev, eb] { _ = subscriptions.take([0] + topic, fromConnection: true) }
        #expect(subscriptions.wants(eb))
        _ = subscriptions.take([0] + eb, fromConnection: false)
        #expect(!subscriptions.wants(eb))
        // Two departures for one subscription do not go below nothing.
        _ = subscriptions.take([0] + eb, fromConnection: false)
        _ = subscriptions.take([1] + eb, fromConnection: true)
        #expect(subscriptions.wants(eb))
    }

    @Test("subscriptions that match nothing are charged until the bound, and messages that are not subscriptions cost nothing")
    func strays() {
        var subscriptions = EventSubscriptions()
        #expect(subscriptions.take([2] + ev, fromConnection: true) == .noted)
        #expect(subscriptions.take([], fromConnection: true) == .noted)
        #expect(subscriptions.strayBytes == 0 && !subscriptions.wants(ev))
        let topic = [UInt8](repeating: 0x41, count: 1000)
        #expect(subscriptions.take([1] + topic, fromConnection: true) == .noted)
        #expect(subscriptions.strayBytes == 1000 + EventSubscriptions.overheadBytes)
        _ = subscriptions.take([0] + topic, fromConnection: false)
        #expect(subscriptions.strayBytes == 0)
        var outcomes: [EventSubscriptions.Outcome] = []
        for _ in 0..<(EventSubscriptions.strayLimitBytes / 1064 + 1) {
            outcomes.append(subscriptions.take([1] + topic, fromConnection: true))
        }
        #expect(outcomes.dropLast().allSatisfy { $0 == .noted })
        #expect(outcomes.last == .overLimit)
        #expect(!subscriptions.wants(ev))
    }
}
