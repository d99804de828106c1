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

    /// Every element for which `isDue` holds, without taking any out,
    /// when `isDue` holds for an element only if it holds for every
    /// element ordered before it (such as "at or before a time"): a
    /// subtree whose root fails is not visited.
    func prefix(while isDue: (Element) -> Bool) -> [Element] {
        var found: [Element] = []
        var stack = items.isEmpty ? [] : [0]
        while let index = stack.popLast() {
            guard isDue(items[index]) else { continue }
            found.append(items[index])
            if 2 * index + 1 < items.count { stack.append(2 * index + 1) }
            if 2 * index + 2 < items.count { stack.append(2 * index + 2) }
        }
        return found
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

/// The jobs waiting to run, in memory: handles only, never input bytes.
/// Rebuilt from the queue database on start.
///
/// Ready jobs are taken highest priority first and, within a priority, in
/// job id order (submission order: ids are ULIDs from one generator).
/// Delayed jobs (a retry's backoff) wait in a heap keyed by their
/// `notBefore` time and join the ready heaps once it has passed.
///
/// Any waiting job can also be taken out by id (a DONE for a job that was
/// requeued meanwhile). The heaps hold only ids with a generation number;
/// the job itself lives in `members`, and a heap entry whose job left (or
/// came back with a newer generation) is skipped. Every mutation trims such
/// entries off the top of the heaps, so `peek` never sees one.
struct ReadyQueue {
    private struct Member {
        var job: JobHandle
        var notBefore: UInt64
        var generation: UInt64
        var delayed: Bool
    }

    private struct Entry {
        var id: ULID
        var generation: UInt64
    }

    private var members: [ULID: Member] = [:]
    private var ready: [Heap<Entry>] = (0...Int(Wire.maxPriority)).map { _ in Heap(less: { $0.id < $1.id }) }
    private var delayed = Heap<(notBefore: UInt64, entry: Entry)>(less: { ($0.notBefore, $0.entry.id) < ($1.notBefore, $1.entry.id) })
    /// The waiting jobs that have a deadline, by it (ready or delayed alike).
    private var deadlines = Heap<(expires: UInt64, entry: Entry)>(less: { ($0.expires, $0.entry.id) < ($1.expires, $1.entry.id) })
    private var readyPerPriority = [Int](repeating: 0, count: Int(Wire.maxPriority) + 1)
    private(set) var delayedCount = 0
    private var nextGeneration: UInt64 = 1

    /// Waiting jobs per priority (index = priority).
    var readyCounts: [UInt64] { readyPerPriority.map { UInt64($0) } }
    /// Ready plus delayed: the depth compared with the queue limit.
    var depth: Int { members.count }
    var hasReady: Bool { depth > delayedCount }

    /// The waiting job with this id, if any.
    func job(_ id: ULID) -> JobHandle? { members[id]?.job }

    /// Every waiting job, ready or delayed, in job id order.
    var allJobs: [JobHandle] { members.values.map(\.job).sorted { $0.id < $1.id } }

    /// When a delayed job becomes ready (Unix ms); nil for a job that is
    /// ready now or not here.
    func notBefore(_ id: ULID) -> UInt64? {
        guard let member = members[id], member.delayed else { return nil }
        return member.notBefore
    }

    /// Adds a job, ready at once or after `notBefore` (Unix ms). Replaces a
    /// waiting job with the same id.
    mutating func add(_ job: JobHandle, notBefore: UInt64 = 0, now: UInt64) {
        if members[job.id] != nil { _ = remove(job.id) }
        let generation = nextGeneration
        nextGeneration += 1
        let entry = Entry(id: job.id, generation: generation)
        let isDelayed = notBefore > now
        members[job.id] = Member(job: job, notBefore: notBefore, generation: generation, delayed: isDelayed)
        if job.expires != 0 { deadlines.push((job.expires, entry)) }
        if isDelayed {
            delayed.push((notBefore, entry))
            delayedCount += 1
        } else {
            let priority = Self.slot(job.priority)
            ready[priority].push(entry)
            readyPerPriority[priority] += 1
        }
    }

    /// Takes a waiting job out by id.
    @discardableResult
    mutating func remove(_ id: ULID) -> JobHandle? {
        guard let member = members.removeValue(forKey: id) else { return nil }
        if member.job.expires != 0 { trimDeadlines() }
        if member.delayed {
            delayedCount -= 1
            trimDelayed()
        } else {
            let priority = Self.slot(member.job.priority)
            readyPerPriority[priority] -= 1
            trim(priority)
        }
        return member.job
    }

    /// Moves delayed jobs whose time has come to the ready heaps.
    mutating func promote(now: UInt64) {
        while let next = delayed.first, next.notBefore <= now {
            _ = delayed.pop()
            guard var member = members[next.entry.id], member.generation == next.entry.generation else { continue }
            member.delayed = false
            members[next.entry.id] = member
            delayedCount -= 1
            let priority = Self.slot(member.job.priority)
            ready[priority].push(next.entry)
            readyPerPriority[priority] += 1
        }
        trimDelayed()
    }

    /// When the next delayed job becomes ready, if any.
    var nextDelayedTime: UInt64? { delayed.first?.notBefore }

    /// The waiting jobs whose deadline has passed by `now` (Unix ms), in
    /// deadline order; they stay waiting until taken out.
    func expired(by now: UInt64) -> [JobHandle] {
        // Every turn asks: most find no deadline due, and look no further.
        guard let next = deadlines.first, next.expires <= now else { return [] }
        return deadlines.prefix { $0.expires <= now }
            .sorted { ($0.expires, $0.entry.id) < ($1.expires, $1.entry.id) }
            .compactMap { entry in members[entry.entry.id].flatMap { $0.generation == entry.entry.generation ? $0.job : nil } }
    }

    /// The earliest deadline of a waiting job, if any.
    var nextDeadline: UInt64? { deadlines.first?.expires }

    /// The job `pop` would take, without taking it.
    func peek() -> JobHandle? {
        for priority in ready.indices.reversed() {
            if let top = ready[priority].first, let member = members[top.id] { return member.job }
        }
        return nil
    }

    /// Takes the next job to dispatch.
    mutating func pop() -> JobHandle? {
        guard let job = peek() else { return nil }
        return remove(job.id)
    }

    /// The first `count` ready jobs in the order they will be dispatched
    /// (highest priority first, then job id), without sorting them all:
    /// a heap keeps the `count` earliest seen, the latest of them on top.
    /// It holds plain keys (no handle, whose strings would be retained and
    /// released at every move); the page's handles are looked up at the end.
    func readyInOrder(first count: Int, after cursor: (priority: UInt8, id: ULID)? = nil) -> (jobs: [JobHandle], before: Int) {
        let order: ((priority: UInt8, id: ULID), (priority: UInt8, id: ULID)) -> Bool = {
            $0.priority != $1.priority ? $0.priority > $1.priority : $0.id < $1.id
        }
        let page = Self.first(count, of: members.values.lazy.filter { !$0.delayed }.map { (priority: $0.job.priority, id: $0.job.id) },
                              by: order, after: cursor)
        return (page.elements.compactMap { members[$0.id]?.job }, page.before)
    }

    /// Where a ready job stands in the dispatch order (1: next), counting
    /// the ready jobs that go before it; nil for a job not ready. One pass
    /// over the waiting jobs.
    func position(of id: ULID) -> Int? {
        guard let member = members[id], !member.delayed else { return nil }
        let job = member.job
        var ahead = 0
        for other in members.values where !other.delayed
            && (other.job.priority > job.priority || (other.job.priority == job.priority && other.job.id < job.id)) {
            ahead += 1
        }
        return ahead + 1
    }

    /// The first `count` delayed jobs, soonest first (then job id), with
    /// their times; after `cursor`'s place when given, with how many come
    /// at or before it.
    func delayedInOrder(first count: Int, after cursor: (notBefore: UInt64, id: ULID)? = nil)
        -> (jobs: [(job: JobHandle, notBefore: UInt64)], before: Int) {
        let page = Self.first(count, of: members.values.lazy.filter(\.delayed).map { (notBefore: $0.notBefore, id: $0.job.id) },
                              by: { ($0.notBefore, $0.id) < ($1.notBefore, $1.id) }, after: cursor)
        return (page.elements.compactMap { key in members[key.id].map { ($0.job, key.notBefore) } }, page.before)
    }

    /// The `count` first elements of `elements` by `precedes`, in order;
    /// with `after`, only those that come after it, and `before` counts the
    /// others.
    private static func first<Element>(_ count: Int, of elements: some Sequence<Element>, by precedes: @escaping (Element, Element) -> Bool,
                                       after cursor: Element? = nil) -> (elements: [Element], before: Int) {
        var kept = Heap<Element>(less: { precedes($1, $0) })
        var skipped = 0
        for element in elements {
            if let cursor, !precedes(cursor, element) {
                skipped += 1
            } else if kept.count < count {
                kept.push(element)
            } else if let latest = kept.first, precedes(element, latest) {
                _ = kept.pop()
                kept.push(element)
            }
        }
        var out: [Element] = []
        out.reserveCapacity(kept.count)
        while let element = kept.pop() { out.append(element) }
        return (out.reversed(), skipped)
    }

    /// Every waiting job with the time it becomes ready (0: ready now).
    var all: [(job: JobHandle, notBefore: UInt64)] {
        members.values.map { ($0.job, $0.delayed ? $0.notBefore : 0) }
    }

    private static func slot(_ priority: UInt8) -> Int { Int(min(priority, Wire.maxPriority)) }

    /// Drops entries of jobs that left (or were added again) off the top of a ready heap.
    private mutating func trim(_ priority: Int) {
        while let top = ready[priority].first, !isCurrent(top, delayed: false) {
            _ = ready[priority].pop()
        }
    }

    private mutating func trimDelayed() {
        while let top = delayed.first, !isCurrent(top.entry, delayed: true) {
            _ = delayed.pop()
        }
    }

    private mutating func trimDeadlines() {
        while let top = deadlines.first, members[top.entry.id]?.generation != top.entry.generation {
            _ = deadlines.pop()
        }
    }

    private func isCurrent(_ entry: Entry, delayed: Bool) -> Bool {
        guard let member = members[entry.id] else { return false }
        return member.generation == entry.generation && member.delayed == delayed
    }
}

extension ReadyQueue: Equatable {
    /// Two queues are equal when they hold the same jobs, each ready, or
    /// delayed until the same time: they hand out the same jobs in the same
    /// order. How the heaps are laid out, the entries they still hold for
    /// jobs that left, and the generation numbers do not count.
    static func == (lhs: ReadyQueue, rhs: ReadyQueue) -> Bool {
        guard lhs.members.count == rhs.members.count, lhs.delayedCount == rhs.delayedCount else { return false }
        for (id, member) in lhs.members {
            guard let other = rhs.members[id], other.job == member.job, other.delayed == member.delayed,
                  !member.delayed || other.notBefore == member.notBefore else { return false }
        }
        return true
    }
}
