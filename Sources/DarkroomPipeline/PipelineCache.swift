import Synchronization

/// Pipelines already parsed, by the text they were parsed from.
///
/// Producers send the same few pipelines over and over, so the broker (for
/// every SUBMIT) and the worker (for every JOB) would otherwise parse the
/// same text thousands of times a second. Only texts that parse are kept;
/// a text that does not is parsed again each time, so its error is always
/// the parser's. At most `limit` texts are kept: when full, the cache starts
/// afresh, which costs one parse per pipeline still in use.
///
/// Safe to share between threads: the entries are behind a mutex.
public final class PipelineCache: Sendable {
    /// A parsed pipeline with its canonical text, computed once.
    public struct Entry: Sendable {
        public let pipeline: Pipeline
        public let canonical: String
    }

    private let entries = Mutex<[String: Entry]>([:])
    public let limit: Int

    public init(limit: Int = 256) {
        self.limit = max(1, limit)
    }

    /// The pipeline `text` describes, from the cache or freshly parsed.
    public func parse(_ text: String) throws(PipelineSyntaxError) -> Entry {
        if let found = entries.withLock({ $0[text] }) { return found }
        let pipeline = try Pipeline(parsing: text)
        let entry = Entry(pipeline: pipeline, canonical: pipeline.canonical)
        entries.withLock { entries in
            if entries.count >= limit { entries.removeAll(keepingCapacity: true) }
            entries[text] = entry
        }
        return entry
    }
}
