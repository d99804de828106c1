import DarkroomCore
import Testing

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
    }

    @Test("one million 'a'")
    func million() {
        #expect(SHA256.hex([UInt8](repeating: 0x61, count: 1_000_000)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
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
}
