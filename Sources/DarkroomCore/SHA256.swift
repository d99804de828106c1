import CCrypto

/// SHA-256 (FIPS 180-4), used to fingerprint stored images and to verify that
/// `darkroom get` returns exactly the bytes that were stored.
///
/// The hashing is libcrypto's (OpenSSL), through the CCrypto shim: it runs
/// on the CPU's SHA instructions where there are any (SHA-NI on x86, the
/// SHA2 extension on ARMv8), several times faster than any Swift code
/// can be, and the storage node hashes every blob it stores. The state is a
/// plain C struct kept by value, so a copy of a hasher is an independent
/// hasher, as with any Swift value.
public struct SHA256: Sendable {
    private var context = SHA256_CTX()

    public init() {
        darkroom_sha256_init(&context)
    }

    /// The digest of `bytes` in one call.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var h = SHA256()
        h.update(bytes)
        return h.finalize()
    }

    /// The digest of `bytes` as 64 lowercase hex characters.
    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { hex($0) }
    }

    /// The digest of bytes in memory, such as a mapped file, as 64
    /// lowercase hex characters.
    public static func hex(_ buffer: UnsafeRawBufferPointer) -> String {
        var h = SHA256()
        h.update(buffer)
        return hexDigits(h.finalize())
    }

    private static func hexDigits(_ digest: [UInt8]) -> String {
        let digits: InlineArray<16, UInt8> = [
            0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66,
        ]
        var text = [UInt8](repeating: 0, count: 64)
        for i in 0..<32 {
            let byte = digest[i]
            text[2 * i] = digits[Int(byte >> 4)]
            text[2 * i + 1] = digits[Int(byte & 15)]
        }
        return String(decoding: text, as: UTF8.self)
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        _ = darkroom_sha256_update(&context, buffer.baseAddress, buffer.count)
    }

    /// The digest of everything passed to `update`. The hasher is then reset,
    /// ready for a new message.
    public mutating func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBufferPointer { out in
            _ = darkroom_sha256_final(&context, out.baseAddress)
        }
        darkroom_sha256_init(&context)
        return digest
    }
}
