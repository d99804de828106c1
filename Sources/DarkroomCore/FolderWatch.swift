#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Names of files that appear, complete, in one directory: Linux inotify's
/// close-after-write (a file written in place, once its writer closes it)
/// and moved-in (a file renamed into the directory, the usual way to drop
/// a finished file). A file still being written is not named until it is
/// closed.
///
/// Owned by one thread: it holds a file descriptor and a read buffer.
public final class FolderWatch {
    /// What one wait found.
    public enum Change: Equatable, Sendable {
        /// These names (not paths) were closed after writing or moved in,
        /// in the order the kernel reported them, each once.
        case files([String])
        /// The kernel's queue overflowed and events were lost: list the
        /// directory again.
        case rescan
    }

    public let directory: String
    private let descriptor: Int32
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    public init(_ directory: String) throws(PosixError) {
        self.directory = directory
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw PosixError("inotify_init1", directory, errno: errno) }
        let mask = UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_TO) | UInt32(IN_ONLYDIR)
        guard inotify_add_watch(fd, directory, mask) >= 0 else {
            let code = errno
            close(fd)
            throw PosixError("watch", directory, errno: code)
        }
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// Waits up to `milliseconds` for changes; `.files([])` when none came.
    public func wait(milliseconds: Int32) throws(PosixError) -> Change {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let ready = poll(&entry, 1, milliseconds)
        if ready < 0 {
            if errno == EINTR { return .files([]) }
            throw PosixError("poll", directory, errno: errno)
        }
        guard ready > 0 else { return .files([]) }
        var names: [String] = []
        var seen = Set<String>()
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EAGAIN || errno == EINTR { break }
                throw PosixError("read events of", directory, errno: errno)
            }
            guard count > 0 else { break }
            let parsed = FolderWatch.parse(buffer[0..<count])
            if parsed.overflowed { return .rescan }
            for name in parsed.names where seen.insert(name).inserted { names.append(name) }
        }
        return .files(names)
    }

    /// Whether some process holds the file open for writing, asked the way
    /// Linux allows without scanning every process: a read lease is granted
    /// only when no one has the file open for writing. A close-after-write
    /// event is about a close that has happened; by the time it is read the
    /// file may be open again (created empty, then written), and then its
    /// last close is still to come. Nil when the lease cannot be asked for
    /// (a file of another user without CAP_LEASE): the caller trusts the
    /// event.
    public static func isOpenForWriting(_ path: String) -> Bool? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // F_SETLEASE and F_GETLEASE (fcntl.h, Linux only; not exported to Swift).
        let setLease: Int32 = 1024
        if fcntl(fd, setLease, Int32(F_RDLCK)) == 0 {
            _ = fcntl(fd, setLease, Int32(F_UNLCK))
            return false
        }
        return errno == EAGAIN ? true : nil
    }

    /// Reads the kernel's records: each a 16-byte header (watch, mask,
    /// cookie, name length, in the machine's byte order) and a name padded
    /// with NULs to that length.
    static func parse(_ bytes: ArraySlice<UInt8>) -> (names: [String], overflowed: Bool) {
        var names: [String] = []
        var offset = bytes.startIndex
        let header = 16
        func u32(_ at: Int) -> UInt32 {
            bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at - bytes.startIndex, as: UInt32.self) }
        }
        while offset + header <= bytes.endIndex {
            let mask = u32(offset + 4)
            let length = Int(u32(offset + 12))
            guard offset + header + length <= bytes.endIndex else { break }
            if mask & UInt32(IN_Q_OVERFLOW) != 0 { return (names, true) }
            let raw = bytes[(offset + header)..<(offset + header + length)]
            let name = String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            if !name.isEmpty, mask & UInt32(IN_ISDIR) == 0 { names.append(name) }
            offset += header + length
        }
        return (names, false)
    }
}

@available(*, unavailable, message: "a FolderWatch owns a descriptor and a buffer; keep it on one thread")
extension FolderWatch: Sendable {}
