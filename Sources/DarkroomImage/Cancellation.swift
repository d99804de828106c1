import Synchronization

/// A request to stop a computation, shared between the thread that runs it and
/// any thread that may want it stopped.
///
/// Setting it is final: a flag never goes back to not cancelled. The engine's
/// long loops (resampling, filters, the glitch, JPEG decoding and encoding
/// band by band) look at it every so often, about once per
/// `CancellationFlag.workPerPoll` units of work, and stop; the operation then
/// throws `ImageError.cancelled` instead of returning a partial result.
///
/// Reading it is one relaxed atomic load: the flag publishes nothing but
/// itself, so no ordering with other memory is needed.
public final class CancellationFlag: Sendable {
    private let state = Atomic<Bool>(false)
    /// How many times the engine's loops have looked at the flag.
    private let polls = Atomic<Int>(0)
    /// False only for `never`, which is shared by every run that nobody can
    /// cancel and so must never be set (nor counted on, from many threads).
    private let cancellable: Bool
    /// The look that sets the flag itself, or 0 (see `init(cancellingAtPoll:)`).
    private let tripwire: Int

    /// A flag that is not set.
    public init() {
        cancellable = true
        tripwire = 0
    }

    private init(cancellable: Bool) {
        self.cancellable = cancellable
        tripwire = 0
    }

    /// A flag that sets itself at the `poll`-th look of the engine's loops
    /// (counting from 1), as if another thread had cancelled right then: a
    /// test stops a computation at a chosen point of its work this way,
    /// without depending on timing.
    package init(cancellingAtPoll poll: Int) {
        precondition(poll > 0, "the first look is look 1")
        cancellable = true
        tripwire = poll
    }

    /// The flag of a run that cannot be cancelled, the default everywhere.
    /// `cancel()` does nothing to it.
    public static let never = CancellationFlag(cancellable: false)

    /// Asks the computations that hold this flag to stop. Safe from any
    /// thread, any number of times.
    public func cancel() {
        guard cancellable else { return }
        state.store(true, ordering: .relaxed)
    }

    /// Whether `cancel()` has been called.
    public var isCancelled: Bool {
        state.load(ordering: .relaxed)
    }

    /// `isCancelled`, as the engine's loops ask it: the look is counted
    /// (`pollCount`), so a test can tell how far a computation went.
    @inline(__always)
    package func poll() -> Bool {
        guard cancellable else { return false }
        if polls.wrappingAdd(1, ordering: .relaxed).newValue == tripwire { cancel() }
        return state.load(ordering: .relaxed)
    }

    /// A C shim's stop question (PNG, WebP, GIF, HEIF, TIFF), asked with the flag as its
    /// context, unretained (the decode or encode that passed it keeps it
    /// alive): 1 to stop, as `poll` answers, which counts the look.
    static func shimShouldStop(_ context: UnsafeMutableRawPointer?) -> Int32 {
        guard let context else { return 0 }
        return Unmanaged<CancellationFlag>.fromOpaque(context).takeUnretainedValue().poll() ? 1 : 0
    }

    /// How many times the engine's loops have looked at this flag (always 0
    /// for `never`).
    package var pollCount: Int {
        polls.load(ordering: .relaxed)
    }

    /// About how much work the engine does between two looks at the flag, in
    /// units of one byte streamed or one multiply-add. Measured in thread CPU
    /// time on an 8000x6000 image, no loop goes 5 ms without a look (most
    /// under 2 ms), so a cancelled operation stops within a few milliseconds,
    /// while the looks cost nothing measurable.
    package static let workPerPoll = 1 << 20

    /// Throws `ImageError.cancelled` if the flag is set.
    @inline(__always)
    package func check() throws(ImageError) {
        if isCancelled { throw ImageError.cancelled }
    }

    /// `result`, unless the flag is set. The engine's loops stop early once
    /// the flag is set and leave their output unfinished, so every result
    /// computed under a flag goes through this before anyone sees it. The
    /// flag never goes back, so a flag still clear here was clear throughout.
    @inline(__always)
    package func checked<T>(_ result: T) throws(ImageError) -> T {
        if isCancelled { throw ImageError.cancelled }
        return result
    }
}

/// Looks at a cancellation flag from a loop over rows, once every so many
/// rows: a power of two of them, as many as make about
/// `CancellationFlag.workPerPoll` units of work, and at least one.
struct RowPoll {
    let flag: CancellationFlag
    /// The rows between two looks, minus one.
    let mask: Int

    init(_ flag: CancellationFlag, workPerRow: Int) {
        let rows = max(1, CancellationFlag.workPerPoll / max(1, workPerRow))
        self.flag = flag
        mask = (1 << (Int.bitWidth - 1 - rows.leadingZeroBitCount)) - 1
    }

    /// Whether the loop should stop before row `row` (counted from the
    /// loop's first row, where it always looks).
    @inline(__always)
    func stop(at row: Int) -> Bool {
        row & mask == 0 && flag.poll()
    }
}

// A new image-sized buffer costs about as much as a pass over it: the kernel
// maps each page the first time it is written. The loops only start after it
// exists, so its making looks at the flag too. (Passes that write every byte
// from a source, such as sharpen or the rotations, take an unfilled buffer
// instead, `Image.unfilled(count:)`, and fill it as they go.)
extension Array where Element == UInt8 {
    /// `count` bytes of `value`, as `init(repeating:count:)` makes them,
    /// written a megabyte at a time with a look at `cancel` before each.
    /// Once `cancel` is set the bytes not yet written are left as they are,
    /// never read: the caller's loop stops at its first look, and its result
    /// is thrown away.
    init(repeating value: UInt8, count: Int, _ cancel: CancellationFlag) {
        self.init(unsafeUninitializedCapacity: count) { buffer, initialized in
            var start = 0
            while start < count {
                if cancel.poll() { break }
                let end = Swift.min(count, start + CancellationFlag.workPerPoll)
                buffer.baseAddress!.advanced(by: start).initialize(repeating: value, count: end - start)
                start = end
            }
            initialized = count
        }
    }
}
