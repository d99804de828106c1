#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file's bytes mapped read-only into memory, to be sent as the last frame
/// of a message without being copied (`Socket.send(_:file:at:dontWait:)`).
///
/// Why: a server that reads a file into its heap to send it holds that copy
/// for as long as the message waits in ZeroMQ's queue for a slow peer, or a
/// peer that never reads. Mapped, the bytes are the kernel's page cache:
/// pages that can be dropped and read again, shared by every message that
/// sends the same file, and never counted as the process's own memory.
///
/// The file must not shrink while it is mapped (reading a page past its new
/// end raises SIGBUS); it may be renamed or unlinked, which leaves the
/// mapped bytes as they were. Darkroom maps only files written once under
/// their final name and never changed after (the storage node's blob files).
///
/// Threading: `Sendable`, so that one thread can map a file and another
/// send it (the broker maps a job's input where it reads the job's row,
/// and sends it from the thread that owns the backend socket). The mapping
/// it owns is a `HandedOverMemory`, behind a lock; the mapped bytes are
/// read-only.
/// Once sent, the mapping belongs to libzmq, which unmaps it from its I/O
/// thread when the frame has left (`munmap` may be called from any thread).
public final class MappedFile: Sendable {
    let memory: HandedOverMemory
    /// The file's size, the frame's length.
    public var count: Int { memory.count }

    /// A file that could not be mapped: the step, the path and the reason.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let operation: String
        public let path: String
        public let reason: String
        public var description: String { "\(operation) \(path): \(reason)" }
    }

    /// Maps the whole of the file at `path`, which must hold 1 to `maxBytes`
    /// bytes, counted as one on `tally` until it is unmapped. (Each mapping
    /// holds one entry of the kernel's per-process map table,
    /// `vm.max_map_count`, 65,530 by default, which `malloc` needs too, so
    /// a server bounds its tally.)
    public init(path: String, maxBytes: Int, tally: FrameTally) throws(Failure) {
        func failure(_ operation: String, _ reason: String? = nil) -> Failure {
            Failure(operation: operation, path: path, reason: reason ?? String(cString: strerror(errno)))
        }
        var descriptor: Int32
        repeat { descriptor = open(path, O_RDONLY | O_CLOEXEC) } while descriptor < 0 && errno == EINTR
        guard descriptor >= 0 else { throw failure("open") }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw failure("fstat") }
        let size = Int(status.st_size)
        guard size > 0 else { throw failure("map", "the file is empty") }
        guard size <= maxBytes else { throw failure("map", "the file holds \(size) bytes, over the limit of \(maxBytes)") }
        guard let mapped = mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0), mapped != MAP_FAILED else {
            throw failure("mmap")
        }
        memory = HandedOverMemory(mapped, count: size, kind: .unmap, tally: tally, amount: 1)
    }

    /// Calls `body` with the mapped bytes (none once the file has been
    /// sent) and returns what it makes of them, such as a digest. The lock
    /// is held meanwhile, so the file cannot be sent, and unmapped, while
    /// `body` reads it.
    public func withUnsafeBytes<Result: Sendable>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        memory.withUnsafeBytes(body)
    }
}
