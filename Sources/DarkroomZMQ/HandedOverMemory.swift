import CZeroMQ
import Synchronization

/// Memory a frame is sent from without another copy (a `MappedFile`'s
/// mapping, a `CopiedFrame`'s copy): owned here until `Socket.send` hands
/// it to libzmq, which calls `release` with it and its length (as the
/// hint) once the frame has left or been dropped. Memory never sent, or
/// refused by libzmq, is released here with the same function, so each
/// kind counts and frees its memory in one place.
///
/// Threading: `Sendable`. The address is behind a lock, so the memory is
/// taken (or read, by `withUnsafeBytes`) by one thread at a time; `release`
/// is a C function, which carries no state.
final class HandedOverMemory: Sendable {
    private let base: Mutex<UnsafeMutableRawPointer?>
    let count: Int
    private let release: darkroom_zmq_release_fn

    init(_ base: sending UnsafeMutableRawPointer, count: Int, release: darkroom_zmq_release_fn) {
        self.base = Mutex(base)
        self.count = count
        self.release = release
    }

    deinit {
        if let memory = base.withLock({ $0 }) { release(memory, hint) }
    }

    /// The length as libzmq's release function gets it.
    private var hint: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(bitPattern: count) }

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
        if !send(memory, count, release, hint) { release(memory, hint) }
    }
}
