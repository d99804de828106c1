/// SHA-256 (FIPS 180-4), used to fingerprint stored images and to verify that
/// `darkroom get` returns exactly the bytes that were stored. The toolchain on
/// Linux has no CryptoKit, so this is a small, dependency-free implementation.
///
/// The storage node hashes every blob it stores, so the block function is
/// written for speed in safe Swift: whole blocks are read straight from the
/// caller's bytes through a `Span` (a partial block waits in an `InlineArray`),
/// the message schedule is computed four words at a time in `SIMD4` vectors,
/// and the rounds rename the working variables instead of shifting them.
/// Every index is a constant or masked, so the optimizer drops bounds checks.
public struct SHA256: Sendable {
    private typealias State = (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)

    private static let initial: State =
        (0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19)

    private var state: State = SHA256.initial
    /// Bytes of a partial block waiting for more input; the first `pending` are valid.
    private var buffer = InlineArray<64, UInt8>(repeating: 0)
    private var pending = 0
    private var length: UInt64 = 0

    public init() {}

    /// The digest of `bytes` in one call.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var h = SHA256()
        h.update(bytes)
        return h.finalize()
    }

    /// The digest of `bytes` as 64 lowercase hex characters.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digest = hash(bytes)
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
        let input = bytes.span
        length &+= UInt64(input.count)
        var index = 0
        if pending > 0 {
            let take = min(64 - pending, input.count)
            for i in 0..<take { buffer[(pending + i) & 63] = input[i] }
            pending += take
            index = take
            if pending < 64 { return }
            state = SHA256.compress(state, buffer.span, from: 0, blocks: 1)
            pending = 0
        }
        let blocks = (input.count - index) / 64
        if blocks > 0 {
            state = SHA256.compress(state, input, from: index, blocks: blocks)
            index += blocks * 64
        }
        while index < input.count {
            buffer[pending & 63] = input[index]
            pending += 1
            index += 1
        }
    }

    /// The digest of everything passed to `update`. The hasher is then reset,
    /// ready for a new message.
    public mutating func finalize() -> [UInt8] {
        // Padding: 0x80, zeros up to 56 mod 64, then the bit length big-endian.
        // It fits in one block after the pending bytes, or spills into a second.
        var tail = InlineArray<128, UInt8>(repeating: 0)
        for i in 0..<pending { tail[i & 127] = buffer[i & 63] }
        tail[pending & 127] = 0x80
        let blocks = pending < 56 ? 1 : 2
        let bitLength = length &* 8
        for i in 0..<8 {
            tail[(blocks * 64 - 1 - i) & 127] = UInt8(truncatingIfNeeded: bitLength >> UInt64(8 * i))
        }
        state = SHA256.compress(state, tail.span, from: 0, blocks: blocks)

        var out = [UInt8](repeating: 0, count: 32)
        let words: InlineArray<8, UInt32> = [state.0, state.1, state.2, state.3, state.4, state.5, state.6, state.7]
        for i in 0..<8 {
            let word = words[i]
            out[4 * i] = UInt8(truncatingIfNeeded: word >> 24)
            out[4 * i + 1] = UInt8(truncatingIfNeeded: word >> 16)
            out[4 * i + 2] = UInt8(truncatingIfNeeded: word >> 8)
            out[4 * i + 3] = UInt8(truncatingIfNeeded: word)
        }
        self = SHA256()
        return out
    }

    private static let k: InlineArray<16, SIMD4<UInt32>> = [
        SIMD4(0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5),
        SIMD4(0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5),
        SIMD4(0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3),
        SIMD4(0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174),
        SIMD4(0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc),
        SIMD4(0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da),
        SIMD4(0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7),
        SIMD4(0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967),
        SIMD4(0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13),
        SIMD4(0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85),
        SIMD4(0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3),
        SIMD4(0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070),
        SIMD4(0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5),
        SIMD4(0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3),
        SIMD4(0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208),
        SIMD4(0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2),
    ]

    /// Runs `blocks` 64-byte blocks of `input`, starting at byte `from`, through
    /// the compression function. Callers guarantee the blocks lie inside `input`.
    private static func compress(_ start: State, _ input: Span<UInt8>, from: Int, blocks: Int) -> State {
        let k = SHA256.k
        var state = start
        var offset = from
        for _ in 0..<blocks {
            // The whole schedule, four words per vector, with the round
            // constants already added: wk[t >> 2][t & 3] = w[t] + k[t].
            var wk = InlineArray<16, SIMD4<UInt32>>(repeating: .zero)
            // A 64-element view: the indexes below are constants under 64.
            let block = input.extracting(offset..<offset + 64)
            offset += 64
            var x0 = load(block, 0), x1 = load(block, 16)
            var x2 = load(block, 32), x3 = load(block, 48)
            wk[0] = x0 &+ k[0]
            wk[1] = x1 &+ k[1]
            wk[2] = x2 &+ k[2]
            wk[3] = x3 &+ k[3]
            expandSixteen(&x0, &x1, &x2, &x3, &wk, k, 4)
            expandSixteen(&x0, &x1, &x2, &x3, &wk, k, 8)
            expandSixteen(&x0, &x1, &x2, &x3, &wk, k, 12)

            var (a, b, c, d, e, f, g, h) = state
            var bc = b ^ c
            for t in 0..<8 {
                let lo = wk[(2 * t) & 15], hi = wk[(2 * t + 1) & 15]
                round(a, b, c, &d, e, f, g, &h, &bc, lo[0])
                round(h, a, b, &c, d, e, f, &g, &bc, lo[1])
                round(g, h, a, &b, c, d, e, &f, &bc, lo[2])
                round(f, g, h, &a, b, c, d, &e, &bc, lo[3])
                round(e, f, g, &h, a, b, c, &d, &bc, hi[0])
                round(d, e, f, &g, h, a, b, &c, &bc, hi[1])
                round(c, d, e, &f, g, h, a, &b, &bc, hi[2])
                round(b, c, d, &e, f, g, h, &a, &bc, hi[3])
            }
            state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d,
                     state.4 &+ e, state.5 &+ f, state.6 &+ g, state.7 &+ h)
        }
        return state
    }

    /// Four big-endian words from `input[p..<p + 16]`.
    @inline(__always)
    private static func load(_ input: Span<UInt8>, _ p: Int) -> SIMD4<UInt32> {
        SIMD4(word(input, p), word(input, p + 4), word(input, p + 8), word(input, p + 12))
    }

    @inline(__always)
    private static func word(_ input: Span<UInt8>, _ p: Int) -> UInt32 {
        UInt32(input[p]) << 24 | UInt32(input[p + 1]) << 16 | UInt32(input[p + 2]) << 8 | UInt32(input[p + 3])
    }

    /// Schedule words 4i..<4i+16 into wk[i..<i+4]; each new vector replaces
    /// the oldest, so after four steps the names are back in order.
    @inline(__always)
    private static func expandSixteen(
        _ x0: inout SIMD4<UInt32>, _ x1: inout SIMD4<UInt32>, _ x2: inout SIMD4<UInt32>, _ x3: inout SIMD4<UInt32>,
        _ wk: inout InlineArray<16, SIMD4<UInt32>>, _ k: InlineArray<16, SIMD4<UInt32>>, _ i: Int
    ) {
        x0 = expand(x0, x1, x2, x3)
        wk[i & 15] = x0 &+ k[i & 15]
        x1 = expand(x1, x2, x3, x0)
        wk[(i + 1) & 15] = x1 &+ k[(i + 1) & 15]
        x2 = expand(x2, x3, x0, x1)
        wk[(i + 2) & 15] = x2 &+ k[(i + 2) & 15]
        x3 = expand(x3, x0, x1, x2)
        wk[(i + 3) & 15] = x3 &+ k[(i + 3) & 15]
    }

    /// The next four schedule words w[t+16..<t+20] from x0...x3 = w[t..<t+16]:
    /// w[i] = σ1(w[i-2]) + w[i-7] + σ0(w[i-15]) + w[i-16]. The last two words
    /// need σ1 of the first two, so σ1 runs twice on two lanes.
    @inline(__always)
    private static func expand(
        _ x0: SIMD4<UInt32>, _ x1: SIMD4<UInt32>, _ x2: SIMD4<UInt32>, _ x3: SIMD4<UInt32>
    ) -> SIMD4<UInt32> {
        let w1 = SIMD4(x0[1], x0[2], x0[3], x1[0])  // w[t+1..<t+5]
        let w9 = SIMD4(x2[1], x2[2], x2[3], x3[0])  // w[t+9..<t+13]
        // σ0(x) = rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3), written with plain shifts
        // so the compiler keeps it in vector registers (SSE has no rotate).
        let s0 = ((w1 &>> 11 ^ w1) &>> 7 ^ w1 &>> 3) ^ ((w1 &<< 11 ^ w1) &<< 14)
        let partial = x0 &+ s0 &+ w9
        let low = sigma1(SIMD2(x3[2], x3[3]))
        let first = partial.lowHalf &+ low
        let high = sigma1(first)
        return SIMD4(lowHalf: first, highHalf: partial.highHalf &+ high)
    }

    @inline(__always)
    private static func sigma1(_ x: SIMD2<UInt32>) -> SIMD2<UInt32> {
        // rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10), in plain shifts as for σ0.
        ((x &>> 2 ^ x) &>> 17 ^ x &>> 10) ^ ((x &<< 2 ^ x) &<< 13)
    }

    /// One round. The new a lands in h and the new e in d; the caller renames
    /// the variables instead of shifting them. `bc` carries b ^ c, which is
    /// the previous round's a ^ b, so Maj costs three operations.
    @inline(__always)
    private static func round(
        _ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: inout UInt32,
        _ e: UInt32, _ f: UInt32, _ g: UInt32, _ h: inout UInt32,
        _ bc: inout UInt32, _ kw: UInt32
    ) {
        let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
        let ch = g ^ (e & (f ^ g))
        // Sums grouped so the terms that wait on e are added last.
        let hk = h &+ kw
        let sc = s1 &+ ch
        let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
        let ab = a ^ b
        let maj = b ^ (ab & bc)
        bc = ab
        d = (d &+ hk) &+ sc
        h = (hk &+ sc) &+ (s0 &+ maj)
    }

    @inline(__always)
    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
}
