/// The byte edits the codecs' mutation fuzz tests make to a valid file.
public enum FuzzEdits {
    /// One to six edits of `bytes`, half of them within its first
    /// `headerBytes` (where a format keeps what its decoder plans with):
    /// a bit flipped, a byte replaced by a random or a boundary value, up
    /// to 16 bytes taken out, or the rest cut off.
    public static func apply(to bytes: inout [UInt8], headerBytes: Int, random: inout PNGFixtures.SplitMix64) {
        for _ in 0..<(1 + random.below(6)) where !bytes.isEmpty {
            let at = random.below(2) == 0 ? random.below(min(headerBytes, bytes.count)) : random.below(bytes.count)
            switch random.below(5) {
            case 0: bytes[at] ^= UInt8(1 << random.below(8))
            case 1: bytes[at] = UInt8(truncatingIfNeeded: random.next())
            case 2: bytes[at] = [0x00, 0xFF, 0x7F, 0x80][random.below(4)]
            case 3: bytes.removeSubrange(at..<min(bytes.count, at + 1 + random.below(16)))
            default: bytes.removeSubrange(at...)
            }
        }
    }
}
