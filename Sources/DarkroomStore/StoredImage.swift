import DarkroomCore
import DarkroomZMQ

/// One stored image as a GET answers it: the bytes of a row (small images
/// are kept inline in SQLite) or a blob file mapped into memory, which
/// GET-REPLY sends without copying (see `MappedFile`).
enum StoredImage {
    case inline([UInt8])
    case file(MappedFile)

    var count: Int {
        switch self {
        case .inline(let bytes): bytes.count
        case .file(let file): file.count
        }
    }

    /// The SHA-256 of the bytes, as 64 lowercase hex digits.
    var sha256: String {
        switch self {
        case .inline(let bytes): SHA256.hex(bytes)
        case .file(let file): file.withUnsafeBytes { SHA256.hex($0) }
        }
    }
}
