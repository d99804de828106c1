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
/// such byte is counted on the sender's `FrameTally` until libzmq frees it,
/// so the server can refuse more work past a bound it chooses.
///
/// Threading: `Sendable`. The memory it owns until it is sent is a
/// `HandedOverMemory`, behind a lock; once sent, the memory is libzmq's,
/// which frees it from whichever thread drops the message.
public final class CopiedFrame: Sendable {
    let memory: HandedOverMemory
    /// The frame's length.
    public var count: Int { memory.count }

    /// A copy of `bytes` (of an empty array, a frame of no bytes), its
    /// length counted on `tally` until it is freed.
    public init(copying bytes: [UInt8], tally: FrameTally) {
        guard let copy = malloc(max(1, bytes.count)) else { fatalError("out of memory for a frame of \(bytes.count) bytes") }
        bytes.withUnsafeBytes { if let source = $0.baseAddress { copy.copyMemory(from: source, byteCount: bytes.count) } }
        memory = HandedOverMemory(copy, count: bytes.count, kind: .free, tally: tally, amount: bytes.count)
    }
}
