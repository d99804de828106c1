import CZeroMQ
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A ZeroMQ context: the I/O threads and the registry of `inproc://` endpoints
/// that sockets share.
///
/// Threading: a context may be used from any thread. It creates sockets, and
/// `shutdown()` from any thread makes every blocking call on its sockets
/// return `ETERM` (`ZMQError.isTerminated`) at once; each socket's owner then
/// closes its socket. The context is terminated (`zmq_ctx_term`) by `close()`
/// or, failing that, when the last reference goes away. Every `Socket` keeps
/// its context alive, so the context is never terminated under an open socket
/// by this module.
///
/// `@unchecked Sendable` is safe: libzmq documents the context object as
/// thread-safe (`zmq_ctx_new`, `zmq_socket`, `zmq_ctx_set`, `zmq_ctx_shutdown`
/// and `zmq_ctx_term` may be called concurrently), the handle itself is an
/// immutable `let`, and the only mutable Swift state, whether the context is
/// already terminated, lives in an `Atomic`.
public final class Context: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    private let terminated = Atomic<Bool>(false)

    /// Creates a context.
    /// - Parameters:
    ///   - ioThreads: the number of background I/O threads (libzmq's default is 1;
    ///     one thread handles about a gigabyte per second).
    ///   - maxSockets: an optional limit on open sockets.
    ///   - blocky: when false, terminating the context ignores unsent messages
    ///     (as if every socket had linger 0) instead of waiting for them.
    public init(ioThreads: Int = 1, maxSockets: Int? = nil, blocky: Bool = true) throws {
        guard let handle = zmq_ctx_new() else { throw ZMQError.last("zmq_ctx_new") }
        self.handle = handle
        do {
            try zmqCall("zmq_ctx_set(ZMQ_IO_THREADS)") { zmq_ctx_set(handle, ZMQ_IO_THREADS, Int32(clamping: ioThreads)) }
            if let maxSockets {
                try zmqCall("zmq_ctx_set(ZMQ_MAX_SOCKETS)") { zmq_ctx_set(handle, ZMQ_MAX_SOCKETS, Int32(clamping: maxSockets)) }
            }
            try zmqCall("zmq_ctx_set(ZMQ_BLOCKY)") { zmq_ctx_set(handle, ZMQ_BLOCKY, blocky ? 1 : 0) }
        } catch {
            _ = zmq_ctx_term(handle)
            terminated.store(true, ordering: .relaxed)
            throw error
        }
    }

    /// Makes every blocking operation on this context's sockets, current and
    /// future, fail with `ETERM`, and refuses new sockets. Callable from any
    /// thread; does not block. Sockets must still be closed by their owners.
    public func shutdown() {
        guard !terminated.load(ordering: .acquiring) else { return }
        _ = zmq_ctx_shutdown(handle)
    }

    /// Terminates the context. Blocks until every socket of this context is
    /// closed and, for sockets with a linger period, their pending messages
    /// are sent or dropped. Calling it again does nothing.
    ///
    /// Because every `Socket` holds its context, callers normally just shut
    /// down, let their sockets close and drop the context; use `close()` when
    /// the moment of termination matters.
    public func close() {
        guard !terminated.exchange(true, ordering: .acquiringAndReleasing) else { return }
        while zmq_ctx_term(handle) == -1 && zmq_errno() == EINTR {}
    }

    deinit {
        close()
    }

    /// Creates a socket of the given kind. The calling thread becomes its
    /// owner; see `Socket` for the rules.
    public func socket(_ kind: SocketKind) throws -> Socket {
        try Socket(context: self, kind: kind)
    }
}

/// The libzmq version this process is linked against.
public struct ZMQVersion: Sendable, Hashable, CustomStringConvertible, Comparable {
    public let major: Int
    public let minor: Int
    public let patch: Int

    /// The version of the loaded libzmq (`zmq_version`).
    public static var current: ZMQVersion {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return ZMQVersion(major: Int(major), minor: Int(minor), patch: Int(patch))
    }

    public init(major: Int, minor: Int, patch: Int) {
        self.major = major
        self.minor = minor
        self.patch = patch
    }

    public var description: String { "\(major).\(minor).\(patch)" }

    public static func < (lhs: ZMQVersion, rhs: ZMQVersion) -> Bool {
        (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
    }
}

/// Whether libzmq was built with a capability, such as `"curve"` or `"ipc"` (`zmq_has`).
public func zmqHas(_ capability: String) -> Bool {
    zmq_has(capability) == 1
}
