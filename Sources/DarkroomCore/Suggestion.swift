/// "Did you mean …?" for misspelt names: operation names, options, subcommands.
public enum Suggestion {
    /// The candidate closest to `word`, if it is within `maxDistance` edits
    /// (insertions, deletions, substitutions, and swaps of neighbours).
    public static func closest(to word: String, in candidates: [String], maxDistance: Int = 2) -> String? {
        let a = Array(word.lowercased())
        let scored = candidates.map { ($0, distance(a, Array($0.lowercased()))) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= maxDistance else { return nil }
        return best.0
    }

    /// Optimal-string-alignment distance: Levenshtein plus transposition of two
    /// adjacent characters as one edit ("crpo" is one edit from "crop").
    public static func distance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
