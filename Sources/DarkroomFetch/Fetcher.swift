import CCurl

// Why libcurl: the Swift toolchain has no HTTP client on Linux that this
// project can rely on (FoundationNetworking's URLSession is a separate,
// optional library whose behaviour has long differed from Apple's, and is
// itself a layer over libcurl), and parsing HTTP by hand is not something
// the project does. libcurl
// is the client every Debian system already trusts: it brings redirects,
// TLS through OpenSSL, connect and transfer timeouts, and proxies from the
// usual environment variables. Every libcurl call of the project is made
// from this module, through CCurl's darkroom_curl_* functions (CCurl loads
// the library on first use).

/// The limits of one batch of downloads.
public struct FetchLimits: Sendable, Equatable {
    /// The most bytes one body may have. A server that announces more is
    /// refused before the body comes; one that sends more is cut off as
    /// soon as the limit is passed, so no more than this reaches the disk.
    public var maxBytes: Int
    /// How long to wait for each connection (DNS, TCP, TLS).
    public var connectTimeout: Duration
    /// How long one download may take from start to end, redirects included.
    public var timeout: Duration
    /// How many redirects to follow (a loop ends here).
    public var maxRedirects: Int
    /// Downloads at once.
    public var parallel: Int
    /// The User-Agent header.
    public var userAgent: String

    public init(maxBytes: Int, connectTimeout: Duration = .seconds(10), timeout: Duration = .seconds(30),
                maxRedirects: Int = 5, parallel: Int = 4, userAgent: String = "darkroom") {
        self.maxBytes = maxBytes
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.maxRedirects = maxRedirects
        self.parallel = parallel
        self.userAgent = userAgent
    }
}

/// One URL to download, and the file to write its body to.
public struct FetchRequest: Sendable, Equatable {
    public var url: String
    /// Created (or truncated) with mode 0600; removed again if the download fails.
    public var destination: String

    public init(url: String, destination: String) {
        self.url = url
        self.destination = destination
    }

    /// Whether `text` is a URL this module downloads: http:// or https://.
    public static func isWebURL(_ text: String) -> Bool {
        let lower = text.prefix(8).lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }
}

/// A finished download: its body is in the request's destination.
public struct Fetched: Sendable, Equatable {
    /// Bytes written to the destination.
    public var bytes: Int
    /// The final HTTP status (2xx).
    public var status: Int
    /// Redirects followed on the way.
    public var redirects: Int
    /// The URL the body came from, after redirects.
    public var finalURL: String
}

/// Downloads URLs with libcurl's multi interface, `parallel` at a time.
///
/// Threading: libcurl handles may be used by one thread at a time. Here
/// the multi handle and every easy handle are made, driven and freed on
/// the thread that calls `download`, which waits in `curl_multi_poll`
/// until one of its transfers can move: one thread carries every
/// download at once, with no locks and nothing shared across threads.
/// That is why this is a blocking call and none of its state is Sendable.
public enum Fetcher {
    /// Downloads every request, at most `limits.parallel` at a time, in
    /// order of the array, and calls `finished` on this thread as each one
    /// ends, with its index in `requests`. Returns when all have ended.
    /// A failure is reported for its request and the others go on.
    public static func download(_ requests: [FetchRequest], limits: FetchLimits,
                                finished: (Int, Result<Fetched, FetchFailure>) -> Void) {
        guard !requests.isEmpty else { return }
        // libcurl is loaded here, the first time a download is asked for.
        let unusable = darkroom_curl_load().map { String(cString: $0) }
        guard unusable == nil, let multi = darkroom_curl_multi_init() else {
            let why = unusable ?? "libcurl could not start"
            for (index, request) in requests.enumerated() {
                finished(index, .failure(FetchFailure(url: request.url, reason: .transfer(why))))
            }
            return
        }
        defer { darkroom_curl_multi_cleanup(multi) }

        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        var next = 0

        /// Starts requests until `parallel` are running; a request that
        /// cannot start (its file cannot be created) ends at once.
        func fill() {
            while active.count < max(1, limits.parallel), next < requests.count {
                let index = next
                next += 1
                switch Transfer.start(index: index, request: requests[index], limits: limits) {
                case .success(let transfer):
                    if darkroom_curl_multi_add_handle(multi, transfer.handle) == CURLM_OK {
                        active[transfer.handle] = transfer
                    } else {
                        finished(index, transfer.end(CURLE_FAILED_INIT))
                    }
                case .failure(let failure):
                    finished(index, .failure(failure))
                }
            }
        }

        fill()
        while !active.isEmpty {
            var running: Int32 = 0
            let performed = darkroom_curl_multi_perform(multi, &running)
            // Copy out each finished transfer first: a message does not
            // outlive the removal of its handle.
            var done: [(UnsafeMutableRawPointer, CURLcode)] = []
            var left: Int32 = 0
            while let message = darkroom_curl_multi_info_read(multi, &left) {
                if message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle {
                    done.append((handle, darkroom_curl_message_result(message)))
                }
            }
            if performed != CURLM_OK {
                // The multi handle itself failed: nothing more can move.
                for (handle, transfer) in active where !done.contains(where: { $0.0 == handle }) {
                    done.append((handle, CURLE_FAILED_INIT))
                    transfer.note(String(cString: darkroom_curl_multi_strerror(performed)))
                }
            }
            for (handle, code) in done {
                guard let transfer = active.removeValue(forKey: handle) else { continue }
                darkroom_curl_multi_remove_handle(multi, handle)
                finished(transfer.index, transfer.end(code))
            }
            if performed != CURLM_OK {
                // Whatever was not started fails the same way.
                while next < requests.count {
                    finished(next, .failure(FetchFailure(url: requests[next].url,
                                                         reason: .transfer(String(cString: darkroom_curl_multi_strerror(performed))))))
                    next += 1
                }
                return
            }
            fill()
            if active.isEmpty { break }
            // Sleeps until a socket is ready or one of libcurl's own timers
            // (a timeout) is due, whichever is first; a second at most.
            _ = darkroom_curl_multi_poll(multi, 1000)
        }
    }
}
