import Foundation

/// The fuzz's only source of randomness: SplitMix64 (Steele, Lea and Flood,
/// "Fast splittable pseudorandom number generators", 2014). Small, fast,
/// and the same sequence from the same seed on every machine and toolchain,
/// which the standard library's generators do not promise. Every choice the
/// fuzz makes comes from one of these, so a seed names a whole run.
struct FuzzRandom {
    private(set) var state: UInt64

    init(seed: UInt64) { state = seed }

    /// A generator for one part of the run (a socket, a session), seeded
    /// from this one's seed and `stream`: the messages of one part do not
    /// change when another part draws more or fewer numbers.
    static func stream(_ seed: UInt64, _ stream: UInt64) -> FuzzRandom {
        var mixer = FuzzRandom(seed: seed ^ (stream &* 0xD134_2543_DE82_EF95))
        return FuzzRandom(seed: mixer.next())
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// 0 ..< `bound` (`bound` > 0), by multiply-and-shift (Lemire): the bias
    /// is below 2^-32 for the bounds used here.
    mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0)
        return Int(UInt64(bound).multipliedFullWidth(by: next()).high)
    }

    mutating func int(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + below(range.upperBound - range.lowerBound + 1)
    }

    /// True `percent` times in a hundred.
    mutating func percent(_ percent: Int) -> Bool { below(100) < percent }

    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: next()) }

    mutating func bytes(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count {
            var word = next()
            for _ in 0..<min(8, count - out.count) {
                out.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return out
    }

    /// Index of a weighted choice: `weights[i]` out of their sum.
    mutating func weighted(_ weights: [Int]) -> Int {
        var roll = below(weights.reduce(0, +))
        for (index, weight) in weights.enumerated() {
            if roll < weight { return index }
            roll -= weight
        }
        return weights.count - 1
    }
}

/// The seed of a fuzz run: `DARKROOM_FUZZ_SEED` (decimal, or hex with 0x)
/// when set, to explore; else the fixed seed every ordinary run uses.
enum FuzzSeed {
    static let fixed: UInt64 = 0xDA2C_2000_F022_0001

    static var current: UInt64 {
        guard let text = ProcessInfo.processInfo.environment["DARKROOM_FUZZ_SEED"]?.trimmingCharacters(in: .whitespaces),
              !text.isEmpty else { return fixed }
        if text.lowercased().hasPrefix("0x") { return UInt64(text.dropFirst(2), radix: 16) ?? fixed }
        return UInt64(text) ?? fixed
    }

    static func hex(_ seed: UInt64) -> String { "0x" + String(seed, radix: 16, uppercase: true) }

    /// `DARKROOM_FUZZ_SCALE`: how many times the ordinary number of small
    /// messages to send (1 when unset), to explore further.
    static var scale: Int {
        max(1, Int(ProcessInfo.processInfo.environment["DARKROOM_FUZZ_SCALE"] ?? "") ?? 1)
    }
}

/// A process's resident memory, from Linux's /proc.
enum ProcessMemory {
    /// VmRSS of process `pid` in KiB, nil if it cannot be read.
    static func residentKiB(_ pid: Int32) -> Int? { fields(pid)["VmRSS"] }

    /// VmRSS and its parts (RssAnon, RssFile, RssShmem) in KiB.
    static func fields(_ pid: Int32) -> [String: Int] {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return [:] }
        var out: [String: Int] = [:]
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") || line.hasPrefix("Rss") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            out[String(parts[0])] = Int(parts[1].trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        return out
    }
}
