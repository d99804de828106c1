import DarkroomCore

/// Builds a page in Prometheus's text exposition format, version 0.0.4
/// (what `GET /metrics` answers, as `text/plain; version=0.0.4`):
///
///     # HELP darkroom_broker_jobs_ready Jobs waiting to run, by priority.
///     # TYPE darkroom_broker_jobs_ready gauge
///     darkroom_broker_jobs_ready{priority="0"} 12
///
/// Each metric is written once, as a family: its HELP and TYPE lines, then
/// every sample of it (one per label set). The format wants a family's
/// samples together, so a caller with several workers writes each family
/// for all of them rather than all families per worker.
///
/// Label values and help text are escaped as the format asks (a backslash,
/// a newline and, in label values, a double quote), so a worker id or a
/// host name can hold anything. Names are the project's own constants;
/// any character the format does not allow in them becomes `_`.
public struct MetricsText: Sendable {
    /// The page so far.
    public private(set) var text = ""

    public init() {}

    /// A label: `worker="w-1"`.
    public struct Label: Sendable, Equatable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// One value of a counter or a gauge, with its labels.
    public struct Sample: Sendable {
        public var labels: [Label]
        /// The value as the page shows it.
        var value: String

        public init(_ labels: [Label] = [], _ value: Double) {
            self.labels = labels
            self.value = MetricsText.format(value)
        }

        /// A count, written exactly (a Double holds integers only up to 2^53).
        public init(_ labels: [Label] = [], count: UInt64) {
            self.labels = labels
            self.value = String(count)
        }

        public init(_ labels: [Label] = [], count: Int) {
            self.init(labels, count: UInt64(max(0, count)))
        }
    }

    /// A counter: a total since the process started, which only goes up.
    /// The name should end in `_total`.
    public mutating func counter(_ name: String, help: String, _ samples: [Sample]) {
        family(name, type: "counter", help: help, samples)
    }

    /// A gauge: a value that goes up and down (a queue's length).
    public mutating func gauge(_ name: String, help: String, _ samples: [Sample]) {
        family(name, type: "gauge", help: help, samples)
    }

    /// A histogram, one per label set: for each, its cumulative buckets
    /// (`name_bucket{le="…"}`, ending with `le="+Inf"`, which equals the
    /// count), then `name_sum` and `name_count`.
    public mutating func histogram(_ name: String, help: String, _ samples: [(labels: [Label], histogram: Histogram)]) {
        let name = MetricsText.metricName(name)
        header(name, type: "histogram", help: help)
        for (labels, histogram) in samples {
            let base = MetricsText.labelPairs(labels)
            for (bound, count) in zip(histogram.bounds, histogram.cumulativeCounts) {
                line(name + "_bucket", base + [("le", MetricsText.format(bound))], String(count))
            }
            line(name + "_bucket", base + [("le", "+Inf")], String(histogram.count))
            line(name + "_sum", base, MetricsText.format(histogram.sum))
            line(name + "_count", base, String(histogram.count))
        }
    }

    private mutating func family(_ name: String, type: String, help: String, _ samples: [Sample]) {
        let name = MetricsText.metricName(name)
        header(name, type: type, help: help)
        for sample in samples {
            line(name, MetricsText.labelPairs(sample.labels), sample.value)
        }
    }

    private mutating func header(_ name: String, type: String, help: String) {
        text += "# HELP \(name) \(MetricsText.escapeHelp(help))\n"
        text += "# TYPE \(name) \(type)\n"
    }

    private mutating func line(_ name: String, _ labels: [(String, String)], _ value: String) {
        text += name
        if !labels.isEmpty {
            text += "{"
            for (i, (label, labelValue)) in labels.enumerated() {
                if i > 0 { text += "," }
                text += label + "=\"" + MetricsText.escapeLabelValue(labelValue) + "\""
            }
            text += "}"
        }
        text += " " + value + "\n"
    }

    private static func labelPairs(_ labels: [Label]) -> [(String, String)] {
        labels.map { (labelName($0.name), $0.value) }
    }

    // MARK: The format's rules

    /// A value as the format writes it: integers without a fraction,
    /// `+Inf`, `-Inf` and `NaN` spelled as Prometheus reads them.
    public static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value == .infinity { return "+Inf" }
        if value == -.infinity { return "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    /// A label value with `\`, `"` and newlines escaped. Scalars, not
    /// characters: Swift reads "\r\n" as one character, which is not "\n".
    public static func escapeLabelValue(_ value: String) -> String {
        escape(value, quotes: true)
    }

    /// Help text with `\` and newlines escaped (quotes are left alone there).
    public static func escapeHelp(_ help: String) -> String {
        escape(help, quotes: false)
    }

    private static func escape(_ text: String, quotes: Bool) -> String {
        let scalars = text.unicodeScalars
        guard scalars.contains(where: { $0 == "\\" || $0 == "\n" || (quotes && $0 == "\"") }) else { return text }
        var escaped = String.UnicodeScalarView()
        for scalar in scalars {
            switch scalar {
            case "\\": escaped.append(contentsOf: "\\\\".unicodeScalars)
            case "\n": escaped.append(contentsOf: "\\n".unicodeScalars)
            case "\"" where quotes: escaped.append(contentsOf: "\\\"".unicodeScalars)
            default: escaped.append(scalar)
            }
        }
        return String(escaped)
    }

    /// A metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    static func metricName(_ name: String) -> String {
        sanitized(name, allowColon: true)
    }

    /// A label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
    static func labelName(_ name: String) -> String {
        sanitized(name, allowColon: false)
    }

    private static func sanitized(_ name: String, allowColon: Bool) -> String {
        var out = ""
        for (i, unit) in name.unicodeScalars.enumerated() {
            let letter = ("a"..."z").contains(unit) || ("A"..."Z").contains(unit) || unit == "_" || (allowColon && unit == ":")
            let digit = ("0"..."9").contains(unit)
            out.unicodeScalars.append(letter || (digit && i > 0) ? unit : "_")
        }
        return out.isEmpty ? "_" : out
    }
}
