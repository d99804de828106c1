import DarkroomCore
@testable import DarkroomMetrics
import Testing

@Suite struct MetricsTextTests {
    @Test func counterAndGaugeFamilies() {
        var text = MetricsText()
        text.counter("darkroom_x_total", help: "Things done.", [.init(count: 42)])
        text.gauge("darkroom_ready", help: "Ready, by priority.", [
            .init([.init("priority", "0")], count: 3),
            .init([.init("priority", "1")], 0.5),
        ])
        #expect(text.text == """
        # HELP darkroom_x_total Things done.
        # TYPE darkroom_x_total counter
        darkroom_x_total 42
        # HELP darkroom_ready Ready, by priority.
        # TYPE darkroom_ready gauge
        darkroom_ready{priority="0"} 3
        darkroom_ready{priority="1"} 0.5

        """)
    }

    @Test func familyWithoutSamplesKeepsItsHeader() {
        var text = MetricsText()
        text.gauge("darkroom_broker_worker_slots", help: "Slots.", [])
        #expect(text.text == "# HELP darkroom_broker_worker_slots Slots.\n# TYPE darkroom_broker_worker_slots gauge\n")
    }

    @Test func labelValuesAreEscaped() {
        #expect(MetricsText.escapeLabelValue(#"a\b"#) == #"a\\b"#)
        #expect(MetricsText.escapeLabelValue(#"say "hi""#) == #"say \"hi\""#)
        #expect(MetricsText.escapeLabelValue("one\ntwo") == #"one\ntwo"#)
        // "\r\n" is one Character in Swift; its newline is still escaped.
        #expect(MetricsText.escapeLabelValue("one\r\ntwo") == "one\r\\ntwo")
        #expect(MetricsText.escapeLabelValue("plain-w1.host") == "plain-w1.host")
        #expect(MetricsText.escapeLabelValue("ünïcødé ✓") == "ünïcødé ✓")
        var text = MetricsText()
        text.gauge("m", help: "h", [.init([.init("worker", "w\"1\\\n")], 1)])
        #expect(text.text.hasSuffix("m{worker=\"w\\\"1\\\\\\n\"} 1\n"))
    }

    @Test func helpIsEscapedButKeepsQuotes() {
        #expect(MetricsText.escapeHelp("a \"quoted\" \\ line\nnext") == "a \"quoted\" \\\\ line\\nnext")
        var text = MetricsText()
        text.counter("m_total", help: "two\nlines", [])
        #expect(text.text.hasPrefix("# HELP m_total two\\nlines\n"))
    }

    @Test func namesAreSanitized() {
        #expect(MetricsText.metricName("darkroom_ok:sub") == "darkroom_ok:sub")
        #expect(MetricsText.metricName("9lives-and.dots") == "_lives_and_dots")
        #expect(MetricsText.labelName("le:x") == "le_x")
        #expect(MetricsText.labelName("") == "_")
    }

    @Test func valuesAsPrometheusReadsThem() {
        #expect(MetricsText.format(0) == "0")
        #expect(MetricsText.format(-0.0) == "0")
        #expect(MetricsText.format(12) == "12")
        #expect(MetricsText.format(0.25) == "0.25")
        #expect(MetricsText.format(1e-05) == "1e-05")
        #expect(MetricsText.format(1e20) == "1e+20")
        #expect(MetricsText.format(.infinity) == "+Inf")
        #expect(MetricsText.format(-.infinity) == "-Inf")
        #expect(MetricsText.format(.nan) == "NaN")
        #expect(MetricsText.Sample(count: UInt64.max).value == "18446744073709551615")
    }

    @Test func histogramBucketsAreCumulativeAndEndWithInf() {
        var histogram = Histogram(bounds: [0.125, 1, 0.5])
        for value in [0.0625, 0.125, 0.25, 0.75, 0.875, 5] { histogram.record(value) }
        var text = MetricsText()
        text.histogram("darkroom_t_seconds", help: "Time.", [([.init("stage", "decode")], histogram)])
        let lines = text.text.split(separator: "\n").map(String.init)
        #expect(lines == [
            "# HELP darkroom_t_seconds Time.",
            "# TYPE darkroom_t_seconds histogram",
            #"darkroom_t_seconds_bucket{stage="decode",le="0.125"} 2"#,
            #"darkroom_t_seconds_bucket{stage="decode",le="0.5"} 3"#,
            #"darkroom_t_seconds_bucket{stage="decode",le="1"} 5"#,
            #"darkroom_t_seconds_bucket{stage="decode",le="+Inf"} 6"#,
            #"darkroom_t_seconds_sum{stage="decode"} 7.0625"#,
            #"darkroom_t_seconds_count{stage="decode"} 6"#,
        ])
    }

    @Test func emptyHistogramStillListsEveryBucket() {
        var text = MetricsText()
        text.histogram("h_seconds", help: "x", [([], Histogram(bounds: [1, 2]))])
        #expect(text.text.contains("h_seconds_bucket{le=\"1\"} 0\n"))
        #expect(text.text.contains("h_seconds_bucket{le=\"+Inf\"} 0\n"))
        #expect(text.text.contains("h_seconds_sum 0\nh_seconds_count 0\n"))
    }
}

@Suite struct HistogramTests {
    @Test func boundsAreSortedAndDeduplicated() {
        let histogram = Histogram(bounds: [5, 1, 1, .infinity, .nan, 2])
        #expect(histogram.bounds == [1, 2, 5])
        #expect(histogram.bucketCounts == [0, 0, 0, 0])
    }

    @Test func valueOnABoundCountsInThatBucket() {
        var histogram = Histogram(bounds: [1, 2])
        histogram.record(1)
        histogram.record(2)
        histogram.record(2.000001)
        histogram.record(.nan)
        #expect(histogram.bucketCounts == [1, 1, 1])
        #expect(histogram.cumulativeCounts == [1, 2])
        #expect(histogram.count == 3)
    }
}

@Suite struct MetricsAddressTests {
    @Test func parsesHostsAndPorts() throws {
        #expect(try MetricsAddress(parsing: "127.0.0.1:9464") == MetricsAddress(host: "127.0.0.1", port: 9464))
        #expect(try MetricsAddress(parsing: "0.0.0.0:0") == MetricsAddress(host: "0.0.0.0", port: 0))
        #expect(try MetricsAddress(parsing: "[::1]:80") == MetricsAddress(host: "::1", port: 80))
        #expect(try MetricsAddress(parsing: "localhost:65535").host == "localhost")
        #expect(try MetricsAddress(parsing: "[::]:9464").description == "[::]:9464")
    }

    @Test func refusesWhatCannotBeBound() {
        for text in ["9464", ":9464", "host:", "host:65536", "host:-1", "host:9x", "::1:80", "[::1:80", "[::1]80", "a b:1", "host:٣"] {
            #expect(throws: MetricsAddressError.self, "\(text)") { try MetricsAddress(parsing: text) }
        }
    }

    @Test func loopbackOrNot() throws {
        #expect(try MetricsAddress(parsing: "127.0.0.1:1").isLoopback)
        #expect(try MetricsAddress(parsing: "localhost:1").isLoopback)
        #expect(try MetricsAddress(parsing: "[::1]:1").isLoopback)
        #expect(try !MetricsAddress(parsing: "0.0.0.0:1").isLoopback)
        #expect(try !MetricsAddress(parsing: "[::]:1").isLoopback)
        #expect(try !MetricsAddress(parsing: "10.0.0.5:1").isLoopback)
    }
}

@Suite struct MetricsRoutingTests {
    @Test func answersByMethodAndPath() {
        let page = { "m 1\n" }
        let metrics = MetricsResponse.answer(method: "GET", path: "/metrics", render: page)
        #expect(metrics.status == 200)
        #expect(metrics.contentType == "text/plain; version=0.0.4; charset=utf-8")
        #expect(metrics.body == "m 1\n")
        #expect(MetricsResponse.answer(method: "HEAD", path: "/metrics", render: page).status == 200)
        #expect(MetricsResponse.answer(method: "GET", path: "/", render: page).body.contains("/metrics"))
        let post = MetricsResponse.answer(method: "POST", path: "/metrics", render: page)
        #expect(post.status == 405)
        #expect(post.allow == "GET, HEAD")
        #expect(MetricsResponse.answer(method: "DELETE", path: "/", render: page).status == 405)
        #expect(MetricsResponse.answer(method: "GET", path: "/metrics/", render: page).status == 404)
        #expect(MetricsResponse.answer(method: "GET", path: "/jobs", render: page).status == 404)
    }

    @Test func rendersOnlyForMetrics() {
        let rendered = Counter()
        _ = MetricsResponse.answer(method: "GET", path: "/", render: { rendered.bump(); return "" })
        _ = MetricsResponse.answer(method: "POST", path: "/metrics", render: { rendered.bump(); return "" })
        #expect(rendered.value == 0)
    }
}

import Synchronization

private final class Counter: Sendable {
    private let count = Mutex(0)
    func bump() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
