/// Why one URL was not downloaded.
public struct FetchFailure: Error, Sendable, Equatable {
    public enum Reason: Sendable, Equatable {
        /// The server answered with this status (4xx, 5xx, or a final 3xx).
        case httpStatus(Int)
        /// Time ran out: while connecting (the connect timeout) or during
        /// the transfer (the whole timeout), after `after`.
        case timedOut(connecting: Bool, after: Duration)
        /// The body is over `limit` bytes: announced so in its
        /// Content-Length (nothing was downloaded), or found so while
        /// downloading (stopped there).
        case tooLarge(limit: Int, announced: Bool)
        /// The host name has no address (libcurl's detail).
        case cannotResolve(String)
        /// No connection could be made (libcurl's detail).
        case cannotConnect(String)
        /// More redirects than the limit.
        case tooManyRedirects(Int)
        /// Not an http:// or https:// URL that libcurl can parse, or a
        /// redirect to another scheme.
        case unsupportedURL(String)
        /// The body could not be written to its file.
        case cannotWrite(String)
        /// Anything else libcurl reports (TLS, a reset connection...).
        case transfer(String)
    }

    public var url: String
    public var reason: Reason

    public init(url: String, reason: Reason) {
        self.url = url
        self.reason = reason
    }

    /// One sentence for people, without the URL.
    public var message: String {
        switch reason {
        case .httpStatus(let status):
            let phrase = Self.phrases[status].map { " \($0)" } ?? ""
            return "download failed: HTTP status \(status)\(phrase)"
        case let .timedOut(connecting, after):
            return connecting
                ? "download failed: could not connect within \(Self.seconds(after))"
                : "download timed out after \(Self.seconds(after))"
        case let .tooLarge(limit, announced):
            return announced
                ? "too large: the server announced more than the \(limit)-byte input limit (not downloaded)"
                : "too large: more than the \(limit)-byte input limit (download stopped there)"
        case .cannotResolve(let detail):
            return "download failed: cannot resolve the host (\(detail))"
        case .cannotConnect(let detail):
            return "download failed: cannot connect (\(detail))"
        case .tooManyRedirects(let limit):
            return "download failed: more than \(limit) redirects"
        case .unsupportedURL(let detail):
            return "cannot download: not an http:// or https:// URL (\(detail))"
        case .cannotWrite(let detail):
            return "cannot save the download: \(detail)"
        case .transfer(let detail):
            return "download failed: \(detail)"
        }
    }

    /// `1 s`, `1.5 s`.
    static func seconds(_ duration: Duration) -> String {
        let ms = duration.wholeMilliseconds
        return ms % 1000 == 0 ? "\(ms / 1000) s" : "\(Double(ms) / 1000) s"
    }

    /// The reason phrases of the statuses people meet most.
    static let phrases: [Int: String] = [
        300: "Multiple Choices", 304: "Not Modified",
        400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
        406: "Not Acceptable", 408: "Request Timeout", 410: "Gone", 429: "Too Many Requests", 451: "Unavailable For Legal Reasons",
        500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
    ]
}

extension Duration {
    /// Whole milliseconds, rounded down (what libcurl's timeouts take).
    var wholeMilliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(clamping: seconds * 1_000 + attoseconds / 1_000_000_000_000_000)
    }
}
