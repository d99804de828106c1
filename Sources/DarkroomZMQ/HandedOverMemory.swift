import CZeroMQ
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Memory a frame is sent from without another copy (a `MappedFile`'s
/// mapping, a `CopiedFrame`'s copy): owned here until `Socket.send` hands
/// it to libzmq, which releases it once the frame has left or been dropped.
/// Memory never sent, or refused by libzmq, is released here the same way,
/// so each piece is freed, and taken off its owner's `FrameTally`, once.
///
/// Threading: `Sendable`. The address is behind a lock, so the memory is
/// taken (or read, by `withUnsafeBytes`) by one thread at a time. What the
/// release needs is a `Release`, immutable, which travels as libzmq's hint.
final class HandedOverMemory: Sendable {
    /// How the memory is given back.
    enum Kind: Sendable {
        /// `munmap` of the whole mapping.
        case unmap
        /// `free`, of memory from `malloc`.
        case free
    }

    private let base: Mutex<UnsafeMutableRawPointer?>
    let count: Int
    /// How to release it, and whose tally to lower.
    private let release: Release

    /// Takes `base` (`count` bytes), counted on `tally` as `amount` until released.
    init(_ base: sending UnsafeMutableRawPointer, count: Int, kind: Kind, tally: FrameTally, amount: Int) {
        self.base = Mutex(base)
        self.count = count
        tally.add(amount)
        release = Release(count: count, kind: kind, tally: tally, amount: amount)
    }

    deinit {
        if let memory = base.withLock({ $0 }) { release.giveBack(memory) }
    }

    /// Calls `body` with the bytes (none once they have been sent), under
    /// the lock, so they cannot be sent and released meanwhile.
    func withUnsafeBytes<Result: Sendable>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let count = self.count
        return base.withLock { memory in
            body(UnsafeRawBufferPointer(start: memory.map { UnsafeRawPointer($0) }, count: memory == nil ? 0 : count))
        }
    }

    /// Gives the memory to `send` (its address, length, release function
    /// and hint), which returns whether libzmq took it. It is no longer
    /// owned here either way: what libzmq did not take is released now.
    func handOver(_ send: (UnsafeMutableRawPointer, Int, darkroom_zmq_release_fn, UnsafeMutableRawPointer?) -> Bool) {
        guard let memory = base.withLock({ value -> UnsafeMutableRawPointer? in
            defer { value = nil }
            return value
        }) else { return }
        // A reference for libzmq's hint, let go by the one call of `releaseFrame`.
        let hint = Unmanaged.passRetained(release).toOpaque()
        if !send(memory, count, releaseFrame, hint) { releaseFrame(memory, hint) }
    }
}

/// What releasing one piece of handed-over memory needs, carried as
/// libzmq's hint. Immutable, so `Sendable`.
final class Release: Sendable {
    let count: Int
    let kind: HandedOverMemory.Kind
    let tally: FrameTally
    let amount: Int

    init(count: Int, kind: HandedOverMemory.Kind, tally: FrameTally, amount: Int) {
        (self.count, self.kind, self.tally, self.amount) = (count, kind, tally, amount)
    }

    /// Unmaps or frees `memory` and takes it off the tally.
    func giveBack(_ memory: UnsafeMutableRawPointer) {
        switch kind {
        case .unmap: munmap(memory, count)
        case .free: free(memory)
        }
        tally.subtract(amount)
    }
}

/// Releases handed-over memory, sent (called by libzmq, from whichever
/// thread drops the message) or not, and lets go of its `Release`.
private let releaseFrame: darkroom_zmq_release_fn = { data, hint in
    guard let hint else { return }
    let release = Unmanaged<Release>.fromOpaque(hint).takeRetainedValue()
    if let data { release.giveBack(data) }
}
