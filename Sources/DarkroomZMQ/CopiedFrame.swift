import CZeroMQ
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A frame's bytes copied once into memory that libzmq takes over when the
/// message is sent (`Socket.send(_:copied:at:)`), and frees once the frame
/// has left or been dropped.
///
/// Why: a frame sent the usual way (`zmq_send`) is copied into libzmq's own
/// memory, and nothing tells the sender when that copy is gone. A server
/// that answers with images can then hold any number of them for peers
/// that ask and never read (ZeroMQ keeps 1,000 messages per connection,
/// and a peer can open many connections). Sent from a `CopiedFrame`, every
/// such byte is counted in `liveBytes` until libzmq frees it, so the server
/// can refuse more work past a bound it chooses.
///
/// Threading: `Sendable`. Its one mutable state, the memory it owns until
/// it is sent, is behind a lock; once sent, the memory is libzmq's, which
/// frees it from whichever thread drops the message.
public final class CopiedFrame: Sendable {
    private let base: Mutex<UnsafeMutableRawPointer?>
    /// The frame's length.
    public let count: Int

    /// Bytes of every `CopiedFrame` in this process not yet freed: made and
    /// not sent, or sent and still in libzmq's queues.
    public static var liveBytes: Int { liveCopiedBytes.load(ordering: .relaxed) }

    /// A copy of `bytes`, which must not be empty.
    public init(copying bytes: [UInt8]) {
        precondition(!bytes.isEmpty, "a copied frame holds at least one byte")
        guard let memory = malloc(bytes.count) else { fatalError("out of memory for a frame of \(bytes.count) bytes") }
        bytes.withUnsafeBytes { memory.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        base = Mutex(memory)
        count = bytes.count
        liveCopiedBytes.add(bytes.count, ordering: .relaxed)
    }

    deinit {
        if let memory = base.withLock({ $0 }) {
            free(memory)
            liveCopiedBytes.subtract(count, ordering: .relaxed)
        }
    }
}

extension CopiedFrame: HandedOverFrame {
    func handOver(_ send: (UnsafeMutableRawPointer, Int, darkroom_zmq_release_fn, UnsafeMutableRawPointer?) -> Bool) {
        guard let memory = base.withLock({ value -> UnsafeMutableRawPointer? in
            defer { value = nil }
            return value
        }) else { return }
        if !send(memory, count, freeWhenSent, UnsafeMutableRawPointer(bitPattern: count)) {
            free(memory)
            liveCopiedBytes.subtract(count, ordering: .relaxed)
        }
    }
}

/// Counted by `CopiedFrame.liveBytes`. An atomic because libzmq's I/O
/// thread frees sent frames.
private let liveCopiedBytes = Atomic<Int>(0)

/// libzmq's release function for a frame sent from a `CopiedFrame`: the
/// hint is its length. Runs on whichever thread drops the message.
private let freeWhenSent: darkroom_zmq_release_fn = { data, hint in
    guard let data else { return }
    free(data)
    liveCopiedBytes.subtract(Int(bitPattern: hint), ordering: .relaxed)
}

/// Memory a frame is sent from without another copy: it hands itself to
/// `send` (its address, its length, the function libzmq calls to release
/// it and that function's hint) and owns it no longer, whether or not
/// libzmq took it (`send` returns false when it did not: then it is
/// released here at once).
protocol HandedOverFrame: AnyObject {
    func handOver(_ send: (UnsafeMutableRawPointer, Int, darkroom_zmq_release_fn, UnsafeMutableRawPointer?) -> Bool)
}
