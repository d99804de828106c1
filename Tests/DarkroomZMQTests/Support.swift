import Dispatch
import Foundation
import Synchronization
import DarkroomZMQ

/// The outcome of work run on a dedicated thread, waited for with a generous
/// limit so a broken build fails instead of hanging.
final class Spawned<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> T) {
        Thread.detachNewThread { [self] in
            let result = body()
            value.withLock { $0 = result }
            finished.signal()
        }
    }

    /// The result, or nil if the thread did not finish within `seconds`.
    func wait(seconds: Double = 20) -> T? {
        guard finished.wait(timeout: .now() + seconds) == .success else { return nil }
        return value.withLock { $0 }
    }
}

/// A one-shot value handed from one thread to another.
final class Handoff<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    func put(_ newValue: T) {
        value.withLock { $0 = newValue }
        ready.signal()
    }

    func take(seconds: Double = 20) -> T? {
        guard ready.wait(timeout: .now() + seconds) == .success else { return nil }
        return value.withLock { $0 }
    }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

extension Socket {
    /// A socket with linger 0 and a receive timeout, so a failing test ends
    /// instead of blocking; tests never assert on the timeout itself.
    static func make(_ context: Context, _ kind: SocketKind, timeout: Int = 10_000) throws -> Socket {
        let socket = try context.socket(kind)
        try socket.setLinger(milliseconds: 0)
        try socket.setReceiveTimeout(milliseconds: timeout)
        return socket
    }

    /// Binds to an ephemeral loopback port and returns the resolved endpoint.
    func bindLoopback() throws -> String {
        try bind("tcp://127.0.0.1:*")
        return try lastEndpoint()
    }
}
