@testable import DarkroomBroker
import DarkroomProtocol
import Testing

/// The core's queues of waiting inputs: first in, first out, whatever
/// mixture of taking, prepending and compacting happens between.
@Suite("Input queues")
struct InputQueueTests {
    /// A distinguishable input: a worker's silence of `n` ms.
    static func input(_ n: UInt64) -> CoreInput { .silent(connection: [1], silence: n) }

    static func silence(_ input: CoreInput?) -> UInt64? {
        if case let .silent(_, silence)? = input { return silence }
        return nil
    }

    /// Takes everything, in order.
    static func drain(_ queue: inout InputQueue) -> [UInt64] {
        var taken: [UInt64] = []
        while let first = queue.popFirst() {
            taken.append(silence(first) ?? 0)
        }
        queue.compact()
        return taken
    }

    @Test("inputs come out in the order they went in, across compactions and a prepend")
    func fifoAcrossCompactionAndPrepend() {
        var queue = InputQueue()
        for n in 0..<10_000 { queue.append(Self.input(UInt64(n))) }
        var taken: [UInt64] = []
        // Take in turns of 300, compacting after each, as a core turn does.
        for _ in 0..<20 {
            for _ in 0..<300 {
                guard let first = queue.popFirst() else { break }
                taken.append(Self.silence(first) ?? 0)
            }
            queue.compact()
        }
        #expect(taken == (0..<6_000).map { UInt64($0) })
        #expect(queue.count == 4_000)
        // A lost turn's inputs go back in front, in their order.
        queue.prepend([Self.input(90_001), Self.input(90_002)])
        queue.append(Self.input(99_999))
        #expect(queue.count == 4_003)
        #expect(Self.drain(&queue) == [90_001, 90_002] + (6_000..<10_000).map { UInt64($0) } + [99_999])
        #expect(queue.count == 0 && queue.popFirst() == nil)
        queue.prepend([])
        #expect(queue.count == 0)
    }

    @Test("the core sorts workers' messages from the rest")
    func workersMessagesAreTakenFirst() {
        #expect(Self.input(1).isFromWorkers)
        #expect(!CoreInput.written(job: ULIDGenerator().next(), failure: nil).isFromWorkers)
    }
}
