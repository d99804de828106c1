import Foundation
import Synchronization

/// A ULID: 48 bits of Unix time in milliseconds followed by 80 random bits,
/// written as 26 characters of Crockford base32 (`0-9A-Z` without I, L, O, U).
/// Job ids and record ids are ULIDs. They sort by creation time, both as
/// values and as text.
///
/// On the wire a ULID is its canonical text: exactly 26 upper-case
/// characters, the first of which is `0`…`7`.
public struct ULID: Sendable, Hashable, Comparable, CustomStringConvertible, LosslessStringConvertible, Codable {
    /// The upper 64 bits: 48 bits of time, then the top 16 random bits.
    public let high: UInt64
    /// The lower 64 random bits.
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A ULID from its parts. `randomHigh` holds the top 16 of the 80 random bits.
    public init(milliseconds: UInt64, randomHigh: UInt16, randomLow: UInt64) {
        self.high = (milliseconds & 0xFFFF_FFFF_FFFF) << 16 | UInt64(randomHigh)
        self.low = randomLow
    }

    /// Milliseconds since the Unix epoch at which the ULID was made.
    public var milliseconds: UInt64 { high >> 16 }

    /// Crockford's base32 alphabet, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", as a
    /// value made where it is read: writing an id reads it 26 times, and a
    /// stored array would cost a lazy-global check, a reference count and a
    /// bounds check each time.
    static var digits: InlineArray<32, UInt8> {
        [
            0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,  // 0-9
            0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x4A, 0x4B,  // A-H J K
            0x4D, 0x4E, 0x50, 0x51, 0x52, 0x53, 0x54, 0x56, 0x57, 0x58,  // M N P-T V W X
            0x59, 0x5A,                                                  // Y Z
        ]
    }

    /// The same alphabet as an array, for building the parse tables.
    static let alphabet: [UInt8] = {
        let digits = ULID.digits
        return (0..<32).map { digits[$0] }
    }()

    /// Crockford digit values for canonical (upper-case) input; 0xFF = invalid.
    static let strictValues: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, char) in alphabet.enumerated() { table[Int(char)] = UInt8(value) }
        return table
    }()

    /// Digit values for text typed by people: lower case, and I/L as 1, O as 0.
    static let lenientValues: [UInt8] = {
        var table = strictValues
        for (value, char) in alphabet.enumerated() where char >= 0x41 {
            table[Int(char) + 0x20] = UInt8(value)
        }
        let aliases: [(Unicode.Scalar, UInt8)] = [("I", 1), ("L", 1), ("O", 0), ("i", 1), ("l", 1), ("o", 0)]
        for (char, value) in aliases { table[Int(UInt8(ascii: char))] = value }
        return table
    }()

    /// The ULID in `chars` (26 characters), with digit values from `values`
    /// (`strictValues` or `lenientValues`); nil for anything else. Read in
    /// place: a frame's slice, an array or a string's UTF-8, as a span.
    static func parse(_ chars: Span<UInt8>, values table: [UInt8]) -> ULID? {
        guard chars.count == 26 else { return nil }
        let values = table.span
        // The first digit carries only 3 bits: 26 × 5 = 130 > 128 (an
        // invalid character's 0xFF is over 7 too).
        let first = values[Int(chars[0])]
        if first > 7 { return nil }
        var high: UInt64 = 0
        var low = UInt64(first)
        for position in 1..<26 {
            let digit = values[Int(chars[position])]
            if digit == 0xFF { return nil }
            high = high << 5 | low >> 59
            low = low << 5 | UInt64(digit)
        }
        return ULID(high: high, low: low)
    }

    /// What is wrong with `bytes` that did not parse as the wire form, for
    /// a decoder's message after the field's name.
    static func notWireForm(_ bytes: some Collection<UInt8>) -> String {
        "is not a ULID (26 characters of Crockford base32), got \(Wire.quoted(Array(bytes)))"
    }

    /// Parses the canonical wire form (26 upper-case characters). Returns nil
    /// for anything else.
    public init?(bytes: [UInt8]) {
        guard let id = ULID.parse(bytes.span, values: ULID.strictValues) else { return nil }
        self = id
    }

    /// Parses the canonical form.
    public init?(_ description: String) {
        guard let id = ULID.parse(description.utf8.span, values: ULID.strictValues) else { return nil }
        self = id
    }

    /// Parses text typed by a person: accepts lower case and Crockford's
    /// aliases (I and L for 1, O for 0). Use for command-line arguments only.
    public init?(lenient text: String) {
        guard let id = ULID.parse(text.utf8.span, values: ULID.lenientValues) else { return nil }
        self = id
    }

    /// The 26 ASCII bytes of the canonical form.
    public var asciiBytes: [UInt8] {
        var out: [UInt8] = []
        appendASCII(to: &out)
        return out
    }

    /// Appends the 26 ASCII bytes of the canonical form to `out`.
    public func appendASCII(to out: inout [UInt8]) {
        let characters = self.characters
        out.append(addingCapacity: 26) { more in
            for position in 0..<26 { more.append(characters[position]) }
        }
    }

    /// The canonical form, worked out on the stack: every id that goes on
    /// the wire, into a database or into a line of output passes through
    /// here, and it allocates nothing.
    private var characters: InlineArray<26, UInt8> {
        let alphabet = ULID.digits
        var out = InlineArray<26, UInt8>(repeating: 0)
        // Character p holds bits 129-5p … 125-5p of the 130 (the first has
        // only 3): the first 13 lie in `high`, the 14th straddles the two
        // words, the last 12 lie in `low`. Constant shifts, no branches.
        for position in 0..<13 {
            out[position] = alphabet[Int(truncatingIfNeeded: (high >> UInt64(61 - 5 * position)) & 31)]
        }
        out[13] = alphabet[Int(truncatingIfNeeded: (high & 1) << 4 | low >> 60)]
        for position in 14..<26 {
            out[position] = alphabet[Int(truncatingIfNeeded: (low >> UInt64(125 - 5 * position)) & 31)]
        }
        return out
    }

    public var description: String {
        let characters = self.characters
        // The characters are ASCII, so the check cannot fail; were it to,
        // the slower way gives the same text.
        guard let text = try? UTF8Span(validating: characters.span) else { return String(decoding: asciiBytes, as: UTF8.self) }
        return String(copying: text)
    }

    public static func < (a: ULID, b: ULID) -> Bool { (a.high, a.low) < (b.high, b.low) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = ULID(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a ULID: \(text)"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// Makes ULIDs that increase strictly within one generator, even within one
/// millisecond and even if the clock steps back:
///
/// - in a new, later millisecond, the 80 random bits are fresh;
/// - otherwise the time stays at the last ULID's and the random part is the
///   last one plus 1; if that overflows 80 bits, the time advances by 1 ms.
///
/// Thread-safe: the last ULID is kept under a `Mutex`.
public final class ULIDGenerator: Sendable {
    private struct State {
        var last = ULID(high: 0, low: 0)
        var bits = RandomBits()
    }

    private let state = Mutex(State())
    private let clock: @Sendable () -> UInt64
    private let random: (@Sendable () -> UInt64)?

    /// - Parameters:
    ///   - clock: milliseconds since the Unix epoch; the system clock by default.
    ///   - random: 64 random bits per call. By default a xoshiro256** stream
    ///     seeded from the system generator and reseeded every 65,536 draws:
    ///     the system generator costs a system call per draw, and a busy
    ///     broker or storage node makes ids by the thousand every second.
    public init(
        clock: @escaping @Sendable () -> UInt64 = ULIDGenerator.systemMilliseconds,
        random: (@Sendable () -> UInt64)? = nil
    ) {
        self.clock = clock
        self.random = random
    }

    /// Milliseconds since the Unix epoch from the system clock.
    @Sendable public static func systemMilliseconds() -> UInt64 {
        UInt64(max(0, Date().timeIntervalSince1970 * 1000))
    }

    /// A process-wide generator.
    public static let shared = ULIDGenerator()

    public func next() -> ULID {
        let now = clock() & 0xFFFF_FFFF_FFFF
        return state.withLock { state in
            let last = state.last
            let id: ULID
            if now > last.milliseconds {
                let high = random?() ?? state.bits.next()
                let low = random?() ?? state.bits.next()
                id = ULID(milliseconds: now, randomHigh: UInt16(truncatingIfNeeded: high), randomLow: low)
            } else {
                // Same millisecond (or the clock went back): add 1 to the
                // 80-bit random part, carrying into the time on overflow.
                let (low, carry) = last.low.addingReportingOverflow(1)
                id = ULID(high: last.high &+ (carry ? 1 : 0), low: low)
            }
            state.last = id
            return id
        }
    }
}

/// xoshiro256** (Blackman and Vigna), seeded from the system generator and
/// reseeded every 65,536 outputs.
struct RandomBits {
    private var s0: UInt64 = 0, s1: UInt64 = 0, s2: UInt64 = 0, s3: UInt64 = 0
    private var left = 0

    mutating func next() -> UInt64 {
        if left == 0 { reseed() }
        left -= 1
        let result = rotl(s1 &* 5, 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = rotl(s3, 45)
        return result
    }

    private mutating func reseed() {
        var system = SystemRandomNumberGenerator()
        repeat {
            (s0, s1, s2, s3) = (system.next(), system.next(), system.next(), system.next())
        } while s0 | s1 | s2 | s3 == 0
        left = 65_536
    }

    private func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }
}
