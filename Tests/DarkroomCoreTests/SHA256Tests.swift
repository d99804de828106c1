import DarkroomCore
import Testing

/// Bytes i * 31 + 7 mod 251 for i in 0..<n: every byte value but the last
/// five, with no period that lines up with the 64-byte block.
private func pattern(_ n: Int) -> [UInt8] {
    (0..<n).map { UInt8(($0 * 31 + 7) % 251) }
}

/// Feeds `data` to a fresh hasher in chunks whose sizes come from a small
/// xorshift generator seeded with `seed`; sizes run from 0 to `maxChunk`.
private func digestInChunks(_ data: [UInt8], seed: UInt64, maxChunk: Int) -> [UInt8] {
    var h = SHA256()
    var state = seed | 1
    var i = 0
    while i < data.count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        let end = min(data.count, i + Int(state % UInt64(maxChunk + 1)))
        h.update(Array(data[i..<end]))
        i = end
    }
    return h.finalize()
}

private func hex(_ digest: [UInt8]) -> String {
    digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

@Suite("SHA-256")
struct SHA256Tests {
    // Vectors from FIPS 180-4's examples and NIST's SHAVS short messages.
    @Test("known digests", arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func known(_ input: String, _ digest: String) {
        #expect(SHA256.hex(Array(input.utf8)) == digest)
        #expect(hex(SHA256.hash(Array(input.utf8))) == digest)
    }

    @Test("one million 'a'")
    func million() {
        #expect(SHA256.hex([UInt8](repeating: 0x61, count: 1_000_000)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    // Expected digests computed independently (Python's hashlib) for pattern(n).
    // The lengths sit on both sides of the padding edges: 55 bytes is the most
    // that pads into one block, 56...63 need a second, 64 is exactly one block.
    @Test("pattern digests around block and padding edges", arguments: [
        (1, "ca358758f6d27e6cf45272937977a748fd88391db679ceda7dc7bf1f005ee879"),
        (3, "647674a296197442f518bcca323ec605dd8d098b2d4f22ee1fdcdd2bb753a189"),
        (55, "e40272620990d5f772101e014a0fe168d9ab13215739a04bdcb4b9cadc303c75"),
        (56, "5b3154594d65c2a11e797576e2b4ece47f48373d8acfc0ae2cc3b87ca7adaedc"),
        (57, "bd73274967a968a1d4353b4096741c1c880d2356d44c63f0e7916c8efe59bccc"),
        (63, "2caeed71c024d190f2f9633bdac2b8f283b1cb86dfe7709023ab70f11f747a1b"),
        (64, "3483dc12a3fea6618642162f88124ea56e797597a97483d5ba597a42d98aaf6b"),
        (65, "3a513663aae909c328f43e2d74265dc5ec35495c99dfde7b8f9dd37f297dfa40"),
        (111, "615aead7800ce6fbb9882c9d6c6693dad39942e7b225f070362a388eb5377572"),
        (112, "86f5f86c605e58525356b9c2ebdd1bfee4e5964e819caae8f37a1f8d5a0529f4"),
        (119, "c06b1fcfb8d206bb4fe8e8cde10de7af236f619ff29c720de0083f7377491fd9"),
        (120, "f425d2567f5c636c99335e5e8bb04669475b3b8b6f7523bbabbd11115cef8550"),
        (127, "2388ace1b8d638348c6720ec543c3dc1a2db3d73bf5c5f029536827b27b9b45f"),
        (128, "43a42610c7b657d1ce21bf0255e86be7ea01aa9dddf0701f596e99a4c6f61001"),
        (129, "35b3c29046f207cfca0f9e23b9ed7f9fd19084699c413286eadbc80833f374b6"),
        (200, "766dfab5b7f4e937312651f12894795699cee3a1a0d79c74980941134d9bf36f"),
        (1000, "008549d94fa71e7a0a483d84380d05a923a4b18e79ba1f8a8ddac923956d32ef"),
        (3071, "a032e276db47e60850d8de9ffbc2c87b7734c7c4229e521f1fac380e468374cb"),
        (65549, "dccac0f61f6fbf610bde2edd38beab1f00459b4c6b43e05266d086d46aff60f8"),
    ])
    func patternDigests(_ length: Int, _ digest: String) {
        let data = pattern(length)
        #expect(SHA256.hex(data) == digest)
        #expect(hex(digestInChunks(data, seed: UInt64(length), maxChunk: 70)) == digest)
        var oneByteAtATime = SHA256()
        for byte in data { oneByteAtATime.update([byte]) }
        #expect(hex(oneByteAtATime.finalize()) == digest)
    }

    // One expected value (hashlib) covering every length 0...200: the digest of
    // the 201 digests of pattern(0) ... pattern(200), concatenated.
    @Test("every length up to 200 matches an independent implementation")
    func everyShortLength() {
        var all: [UInt8] = []
        for n in 0...200 { all += SHA256.hash(pattern(n)) }
        #expect(SHA256.hex(all) == "779a28ff49efa707b82bb80dbb3ee272427808a7ce9d17c4a1c62b2b778d5246")
    }

    @Test("every length up to 200: pieces of random size equal one call")
    func incrementalEqualsOneShot() {
        for n in 0...200 {
            let data = pattern(n)
            let oneShot = SHA256.hash(data)
            for seed in [UInt64(n) &* 2_654_435_761, 0x9E37_79B9, 12345] {
                let pieces = digestInChunks(data, seed: seed, maxChunk: 80)
                #expect(pieces == oneShot, "length \(n), seed \(seed)")
            }
        }
    }

    @Test("streaming in odd pieces equals one call")
    func streaming() {
        let data = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        var h = SHA256()
        var i = 0
        var step = 1
        while i < data.count {
            let end = min(data.count, i + step)
            h.update(Array(data[i..<end]))
            i = end
            step = step * 3 % 97 + 1
        }
        #expect(h.finalize() == SHA256.hash(data))
    }

    @Test("every byte value, four times over")
    func allByteValues() {
        let data = [UInt8]((0..<1024).map { UInt8($0 & 0xff) })
        #expect(SHA256.hex(data) == "785b0751fc2c53dc14a4ce3d800e69ef9ce1009eb327ccf458afe09c242c26c9")
    }

    @Test("a finalized hasher starts a new message")
    func reuseAfterFinalize() {
        var h = SHA256()
        h.update(Array("first message".utf8))
        _ = h.finalize()
        h.update(Array("abc".utf8))
        #expect(hex(h.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test("hex is 64 lowercase hex digits of the digest")
    func hexFormat() {
        let data = pattern(77)
        let text = SHA256.hex(data)
        #expect(text.utf8.count == 64)
        #expect(text.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(text == hex(SHA256.hash(data)))
    }
}
