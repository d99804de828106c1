import Foundation

/// A server's claim on its data directory: an exclusive `flock` on the file
/// `lock` in it, held from before the server reads anything there until it
/// closes its data.
///
/// Two brokers (or two storage nodes) on one directory each took the
/// other's work for their own: the second one's start-up recovery removes
/// files the first is writing, and each keeps in memory a queue the other
/// changes under it (a broker dispatched jobs the other had already stored,
/// and refused every SUBMIT with a constraint error). The second one now
/// stops before it starts, naming the process that holds the directory.
///
/// The kernel drops the lock when its holder exits, however it exits, so a
/// SIGKILLed server never leaves a stale claim behind; the file itself
/// stays, and only its lock means anything. The lock belongs to the open
/// file, not the process: a second claim from the same process is refused
/// as well, until the first is released.
public final class DirectoryLock {
    /// The file whose lock is the claim.
    public let path: String
    /// The open lock file; nil once released.
    private var file: Posix.File?

    /// Why a directory cannot be claimed.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// Claims `directory` (which must exist) for `holder` (a role name, as
    /// "broker"); throws `Failure` naming the holder when another process,
    /// or another claim of this one, has it.
    public init(directory: String, holder: String) throws(Failure) {
        path = directory + "/lock"
        let file: Posix.File
        do {
            file = try Posix.open(path, flags: O_RDWR | O_CREAT, mode: 0o644)
        } catch {
            throw Failure(message: "cannot open \(path) to claim the data directory: \(error.reason)")
        }
        var result: Int32
        repeat { result = flock(file.descriptor, LOCK_EX | LOCK_NB) } while result == -1 && errno == EINTR
        guard result == 0 else {
            let code = errno
            let other = DirectoryLock.holder(file.descriptor)
            try? file.close()
            guard code == EWOULDBLOCK else {
                throw Failure(message: "cannot lock \(path) to claim the data directory: \(PosixError("flock", path, errno: code).reason)")
            }
            throw Failure(message: "\(directory) is in use by another \(other ?? holder): one data directory serves one \(holder) at a time (its lock is \(path))")
        }
        self.file = file
        // Who holds it, for the message of the next one that tries: a
        // courtesy only; the lock decides.
        let text = Array("\(holder) (pid \(Posix.processID))\n".utf8)
        if ftruncate(file.descriptor, 0) == 0 {
            _ = text.withUnsafeBytes { pwrite(file.descriptor, $0.baseAddress, $0.count, 0) }
        }
    }

    /// What the holder wrote in the lock file ("broker (pid 1234)"), if
    /// anything readable.
    private static func holder(_ descriptor: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        return text
    }

    /// Gives the directory up (closing the file drops the lock). Idempotent.
    public func release() {
        try? file?.close()
        file = nil
    }

    deinit { release() }
}
