/// Counts of observed values in fixed buckets, with their sum: what a
/// Prometheus histogram reports. A role records into one as things happen
/// (a worker, each job's stage times) and publishes copies; whoever renders
/// the metrics reads a copy and never waits for the role.
///
/// The buckets are set once, so that every copy, and every process of a
/// deployment, reports the same `le` boundaries and their counts can be
/// added up across processes.
public struct Histogram: Sendable, Equatable {
    /// Upper bounds of the buckets, ascending and finite. A value above the
    /// last one is counted only in the implied `+Inf` bucket.
    public let bounds: [Double]
    /// Values counted in each bucket alone, not cumulative: element i is
    /// the values in (bounds[i-1], bounds[i]]; the last element, one past
    /// `bounds`, the values above every bound.
    public private(set) var bucketCounts: [UInt64]
    /// The sum of every value recorded.
    public private(set) var sum: Double = 0
    /// How many values were recorded.
    public private(set) var count: UInt64 = 0

    /// A histogram with these upper bounds; they are sorted, and duplicates
    /// and non-finite values dropped (`+Inf` is always implied).
    public init(bounds: [Double]) {
        var kept: [Double] = []
        for bound in bounds.filter(\.isFinite).sorted() where kept.last != bound {
            kept.append(bound)
        }
        self.bounds = kept
        bucketCounts = Array(repeating: 0, count: kept.count + 1)
    }

    /// Counts `value` in the first bucket whose bound is at least `value`
    /// (Prometheus's `le`: less than or equal). NaN is ignored: it would
    /// make the sum NaN for good.
    public mutating func record(_ value: Double) {
        guard !value.isNaN else { return }
        var index = bounds.count
        for (i, bound) in bounds.enumerated() where value <= bound {
            index = i
            break
        }
        bucketCounts[index] += 1
        sum += value
        count += 1
    }

    /// The count of values at or below each bound, in order, as the
    /// exposition format lists its `le` buckets; the `+Inf` bucket is `count`.
    public var cumulativeCounts: [UInt64] {
        var running: UInt64 = 0
        return bounds.indices.map { i in
            running += bucketCounts[i]
            return running
        }
    }
}
