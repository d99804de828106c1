import DarkroomProtocol

/// A binary min-heap ordered by `less`.
struct Heap<Element> {
    private(set) var items: [Element] = []
    let less: (Element, Element) -> Bool

    init(less: @escaping (Element, Element) -> Bool) { self.less = less }

    var count: Int { items.count }
    var isEmpty: Bool { items.isEmpty }
    var first: Element? { items.first }

    mutating func push(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard less(items[child], items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count, less(items[left], items[smallest]) { smallest = left }
            if right < items.count, less(items[right], items[smallest]) { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}

/// The jobs waiting to run, in memory: ids, priorities and backoff times only
/// (never input bytes). Rebuilt from the `jobs` table on start.
///
/// Ready jobs are taken highest priority first and, within a priority, in job
/// id order (which is submission order, since ids are ULIDs from one
/// generator). Delayed jobs wait in a heap keyed by their `not_before` time
/// and join the ready heaps once it has passed.
struct ReadyQueue {
    private var ready: [Heap<JobHandle>] = (0...Int(Wire.maxPriority)).map { _ in Heap(less: { $0.id < $1.id }) }
    private var delayed = Heap<(notBefore: UInt64, job: JobHandle)>(less: { ($0.notBefore, $0.job.id) < ($1.notBefore, $1.job.id) })

    /// Waiting jobs per priority (index = priority).
    var readyCounts: [UInt64] { ready.map { UInt64($0.count) } }
    var delayedCount: Int { delayed.count }
    /// Ready plus delayed: the depth compared with the queue limit.
    var depth: Int { ready.reduce(0) { $0 + $1.count } + delayed.count }

    mutating func add(_ job: JobHandle, notBefore: UInt64 = 0, now: UInt64) {
        if notBefore > now {
            delayed.push((notBefore, job))
        } else {
            ready[Int(min(job.priority, Wire.maxPriority))].push(job)
        }
    }

    /// Moves delayed jobs whose time has come to the ready heaps.
    mutating func promote(now: UInt64) {
        while let next = delayed.first, next.notBefore <= now {
            _ = delayed.pop()
            ready[Int(min(next.job.priority, Wire.maxPriority))].push(next.job)
        }
    }

    /// When the next delayed job becomes ready, if any.
    var nextDelayedTime: UInt64? { delayed.first?.notBefore }

    var hasReady: Bool { ready.contains { !$0.isEmpty } }

    /// Takes the next job to dispatch.
    mutating func pop() -> JobHandle? {
        for priority in ready.indices.reversed() where !ready[priority].isEmpty {
            return ready[priority].pop()
        }
        return nil
    }
}
