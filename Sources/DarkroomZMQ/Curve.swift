import CZeroMQ

/// Z85, the ZeroMQ text encoding of binary data (RFC 32/Z85): every 4 bytes
/// become 5 printable characters.
public enum Z85 {
    /// Encodes `bytes`, whose count must be a multiple of 4.
    public static func encode(_ bytes: [UInt8]) throws -> String {
        guard bytes.count % 4 == 0 else {
            throw ZMQError.invalid("zmq_z85_encode", "Z85 input must be a multiple of 4 bytes, got \(bytes.count)")
        }
        if bytes.isEmpty { return "" }
        var text = [CChar](repeating: 0, count: bytes.count / 4 * 5 + 1)
        let ok = bytes.withUnsafeBufferPointer { input in
            text.withUnsafeMutableBufferPointer { output in
                zmq_z85_encode(output.baseAddress, input.baseAddress, input.count) != nil
            }
        }
        guard ok else { throw ZMQError.invalid("zmq_z85_encode", "Z85 encoding failed") }
        return String(decoding: text.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Decodes Z85 text, whose length must be a multiple of 5 and whose
    /// characters must all be in the Z85 alphabet.
    public static func decode(_ text: String) throws -> [UInt8] {
        let characters = Array(text.utf8)
        guard characters.count % 5 == 0 else {
            throw ZMQError.invalid("zmq_z85_decode", "Z85 text must be a multiple of 5 characters, got \(characters.count)")
        }
        guard characters.allSatisfy({ alphabet.contains($0) }) else {
            throw ZMQError.invalid("zmq_z85_decode", "text contains a character outside the Z85 alphabet")
        }
        if characters.isEmpty { return [] }
        var bytes = [UInt8](repeating: 0, count: characters.count / 5 * 4)
        let cString = characters.map { CChar(bitPattern: $0) } + [0]
        let ok = cString.withUnsafeBufferPointer { input in
            bytes.withUnsafeMutableBufferPointer { output in
                zmq_z85_decode(output.baseAddress, input.baseAddress) != nil
            }
        }
        guard ok else { throw ZMQError.invalid("zmq_z85_decode", "text is not valid Z85") }
        return bytes
    }

    private static let alphabet: Set<UInt8> = Set(
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8
    )
}

/// A 32-byte CURVE key (public or secret), printable as 40 characters of Z85.
public struct CurveKey: Sendable, Hashable, CustomStringConvertible {
    /// The 32 raw key bytes.
    public let bytes: [UInt8]

    /// Wraps 32 raw bytes.
    public init(bytes: [UInt8]) throws {
        guard bytes.count == 32 else {
            throw ZMQError.invalid("CurveKey", "a CURVE key is 32 bytes, got \(bytes.count)")
        }
        self.bytes = bytes
    }

    /// Parses the 40-character Z85 form (surrounding whitespace is ignored).
    public init(z85 text: String) throws {
        let scalars = Array(text.unicodeScalars)
        var start = 0
        var end = scalars.count
        while start < end && scalars[start].properties.isWhitespace { start += 1 }
        while end > start && scalars[end - 1].properties.isWhitespace { end -= 1 }
        var trimmed = ""
        trimmed.unicodeScalars.append(contentsOf: scalars[start..<end])
        guard trimmed.utf8.count == 40 else {
            throw ZMQError.invalid("CurveKey", "a Z85 CURVE key is 40 characters, got \(trimmed.utf8.count)")
        }
        try self.init(bytes: Z85.decode(trimmed))
    }

    /// The 40-character Z85 form.
    public var z85: String {
        // 32 bytes is always a multiple of 4, so encoding cannot fail.
        (try? Z85.encode(bytes)) ?? ""
    }

    /// The Z85 form; a secret key prints its secret, so log public keys only.
    public var description: String { z85 }
}

/// A CURVE key pair.
public struct CurveKeyPair: Sendable, Hashable {
    public let publicKey: CurveKey
    public let secretKey: CurveKey

    public init(publicKey: CurveKey, secretKey: CurveKey) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// Rebuilds a pair from its secret key alone (`zmq_curve_public`).
    public init(secretKey: CurveKey) throws {
        let secretText = secretKey.z85.utf8.map { CChar(bitPattern: $0) } + [0]
        var publicText = [CChar](repeating: 0, count: 41)
        try zmqCall("zmq_curve_public") {
            secretText.withUnsafeBufferPointer { secret in
                publicText.withUnsafeMutableBufferPointer { zmq_curve_public($0.baseAddress, secret.baseAddress) }
            }
        }
        self.publicKey = try CurveKey(z85: String(decoding: publicText.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        self.secretKey = secretKey
    }

    /// Generates a fresh key pair (`zmq_curve_keypair`). Throws `ENOTSUP`
    /// when libzmq was built without CURVE.
    public static func generate() throws -> CurveKeyPair {
        var publicText = [CChar](repeating: 0, count: 41)
        var secretText = [CChar](repeating: 0, count: 41)
        try zmqCall("zmq_curve_keypair") {
            publicText.withUnsafeMutableBufferPointer { p in
                secretText.withUnsafeMutableBufferPointer { s in zmq_curve_keypair(p.baseAddress, s.baseAddress) }
            }
        }
        func text(_ c: [CChar]) -> String { String(decoding: c.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return CurveKeyPair(publicKey: try CurveKey(z85: text(publicText)), secretKey: try CurveKey(z85: text(secretText)))
    }
}

/// CURVE support in the loaded libzmq.
public enum Curve {
    /// Whether libzmq was built with CURVE security (`zmq_has("curve")`).
    public static var isAvailable: Bool { zmqHas("curve") }
}
