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
/// Threading: `Sendable`. The memory it owns until it is sent is a
/// `HandedOverMemory`, behind a lock; once sent, the memory is libzmq's,
/// which frees it from whichever thread drops the message.
public final class CopiedFrame: Sendable {
    let memory: HandedOverMemory
    /// The frame's length.
    public var count: Int { memory.count }

    /// Bytes of every `CopiedFrame` in this process not yet freed: made and
    /// not sent, or sent and still in libzmq's queues.
    public static var liveBytes: Int { liveCopiedBytes.load(ordering: .relaxed) }

    /// A copy of `bytes` (of an empty array, a frame of no bytes).
    public init(copying bytes: [UInt8]) {
        guard let copy = malloc(max(1, bytes.count)) else { fatalError("out of memory for a frame of \(bytes.count) bytes") }
        bytes.withUnsafeBytes { if let source = $0.baseAddress { copy.copyMemory(from: source, byteCount: bytes.count) } }
        memory = HandedOverMemory(copy, count: bytes.count, release: freeCopy)
        liveCopiedBytes.add(bytes.count, ordering: .relaxed)
    }
}

/// Counted by `CopiedFrame.liveBytes`. An atomic because libzmq's I/O
/// thread frees sent frames.
private let liveCopiedBytes = Atomic<Int>(0)

/// Frees a copy, sent (called by libzmq, from whichever thread drops the
/// message) or not: the hint is its length.
private let freeCopy: darkroom_zmq_release_fn = { data, hint in
    guard let data else { return }
    free(data)
    liveCopiedBytes.subtract(Int(bitPattern: hint), ordering: .relaxed)
}
