import CMalloc
import Dispatch
import Foundation
import Synchronization

/// How a server gives back to the system the memory it has freed.
///
/// glibc's malloc keeps what a process frees for its next allocations, and
/// by default it learns from the process: once a block of tens of MiB (a
/// large image frame) is freed, blocks up to 32 MiB come from the heap
/// instead of a mapping of their own, and up to twice that may stay free at
/// the heap's top. Each thread that allocates has a heap of its own, and
/// free memory inside a heap, between blocks still in use, is not given
/// back at all. A server that took a burst of large or many messages (70
/// MiB of frames, a thousand connections) then kept tens of MiB it no longer
/// used, for as long as it ran.
///
/// `keepLargeBlocksOutOfTheHeap` fixes the thresholds, and
/// `FreedMemoryReturner` gives back the free pages inside the heaps after
/// such a burst.
public enum FreedMemory {
    /// Blocks of this size and more are mapped on their own, and unmapped
    /// as soon as they are freed.
    public static let mappedBlockBytes = 1 << 20
    /// Free memory at the top of a heap above this is given back at once.
    /// (glibc's own starting value, kept from then on.)
    public static let topBytes = 128 << 10

    /// Fixes malloc's thresholds for this process. Call it once, before the
    /// services start their threads.
    public static func keepLargeBlocksOutOfTheHeap() {
        _ = mallopt(M_MMAP_THRESHOLD, Int32(mappedBlockBytes))
        _ = mallopt(M_TRIM_THRESHOLD, Int32(topBytes))
    }

    /// Gives back every whole free page of every heap (`malloc_trim`).
    /// Returns whether any was given back.
    @discardableResult
    public static func giveBack() -> Bool {
        malloc_trim(0) == 1
    }

    /// Bytes of malloc's heaps that hold live blocks (`mallinfo2`'s
    /// `uordblks`; blocks mapped on their own are not counted: they go
    /// back when freed).
    public static func heapBytesInUse() -> Int {
        Int(mallinfo2().uordblks)
    }

    /// The process's resident memory in bytes, from /proc/self/statm; nil
    /// where there is no such file.
    public static func residentBytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// When to give memory back, from looks at malloc's heaps and the
/// process's resident memory: when either has moved by `step` or more
/// since memory was last given back. Either the bytes in use in the heaps
/// fell that far from their highest (a burst has passed: freeing memory
/// changes no resident size), or the resident memory grew that far (a
/// burst came and went between two looks). Under steady load neither moves
/// much, and nothing is done.
public struct GiveBackRule: Sendable, Equatable {
    public let step: Int
    /// The most bytes in use in the heaps since memory was last given back.
    public private(set) var highestInUse: Int
    /// The resident size just after memory was last given back, or lower.
    public private(set) var resident: Int

    public init(step: Int, inUse: Int, resident: Int) {
        self.step = step
        highestInUse = inUse
        self.resident = resident
    }

    /// Whether to give memory back now.
    public mutating func look(inUse: Int, resident now: Int) -> Bool {
        if inUse + step <= highestInUse || now >= resident + step { return true }
        highestInUse = max(highestInUse, inUse)
        resident = min(resident, now)
        return false
    }

    /// Memory was given back, leaving these.
    public mutating func gaveBack(inUse: Int, resident now: Int) {
        highestInUse = inUse
        resident = now
    }
}

/// A service that gives back the free pages of malloc's heaps
/// (`FreedMemory.giveBack`) when `GiveBackRule` says so, looking every
/// `interval`: within an interval of a burst of large or many messages,
/// the memory it used goes back to the system.
public final class FreedMemoryReturner: RunnableService {
    public let interval: Duration
    public let step: Int
    private let stopping = Mutex(false)
    private let wake = DispatchSemaphore(value: 0)
    private let ended = DispatchSemaphore(value: 0)

    public init(interval: Duration = .seconds(2), step: Int = 1 << 20) {
        self.interval = interval
        self.step = step
    }

    public func start() throws {
        let thread = Thread { [self] in
            var rule = GiveBackRule(step: step, inUse: FreedMemory.heapBytesInUse(), resident: FreedMemory.residentBytes() ?? 0)
            let seconds = interval.fractionalSeconds
            while !stopping.withLock({ $0 }) {
                _ = wake.wait(timeout: .now() + seconds)
                if stopping.withLock({ $0 }) { break }
                guard let resident = FreedMemory.residentBytes() else { continue }
                if rule.look(inUse: FreedMemory.heapBytesInUse(), resident: resident) {
                    FreedMemory.giveBack()
                    rule.gaveBack(inUse: FreedMemory.heapBytesInUse(), resident: FreedMemory.residentBytes() ?? resident)
                }
            }
            ended.signal()
        }
        thread.name = "darkroom-memory"
        thread.start()
    }

    public func stop(grace: Duration) {
        stopping.withLock { $0 = true }
        wake.signal()
    }

    public func wait() {
        ended.wait()
        // For any other waiter.
        ended.signal()
    }
}
