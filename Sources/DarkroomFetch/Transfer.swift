import CCurl
import Foundation

/// One download: its easy handle, the file its body goes to, and what the
/// body callback saw. Made, driven and ended on the thread of
/// `Fetcher.download` only (see there), so it is deliberately not Sendable.
final class Transfer {
    let index: Int
    let request: FetchRequest
    let handle: UnsafeMutableRawPointer
    private let limits: FetchLimits
    private var fd: Int32
    /// libcurl writes the detail of a failure here (CURLOPT_ERRORBUFFER).
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var received = 0
    private var overLimit = false
    private var writeErrno: Int32?
    private var extraDetail: String?

    private init(index: Int, request: FetchRequest, handle: UnsafeMutableRawPointer, fd: Int32, limits: FetchLimits) {
        self.index = index
        self.request = request
        self.handle = handle
        self.fd = fd
        self.limits = limits
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        darkroom_curl_easy_cleanup(handle)
        if fd >= 0 { close(fd) }
        errorBuffer.deallocate()
    }

    /// Creates the destination file and an easy handle set up for the
    /// request, or says why not.
    static func start(index: Int, request: FetchRequest, limits: FetchLimits) -> Result<Transfer, FetchFailure> {
        // A URL with a line break or NUL would not name one resource.
        guard !request.url.contains(where: { $0.isNewline || $0 == "\0" }) else {
            return .failure(FetchFailure(url: request.url, reason: .unsupportedURL("it contains a line break")))
        }
        let fd = open(request.destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            return .failure(FetchFailure(url: request.url, reason: .cannotWrite(String(cString: strerror(errno)))))
        }
        guard let handle = darkroom_curl_easy_init() else {
            close(fd)
            unlink(request.destination)
            return .failure(FetchFailure(url: request.url, reason: .transfer("libcurl could not make a handle")))
        }
        let transfer = Transfer(index: index, request: request, handle: handle, fd: fd, limits: limits)
        let code = transfer.configure()
        guard code == CURLE_OK else {
            // Ending it removes the file again; a code other than OK always ends in a failure.
            if case .failure(let failure) = transfer.end(code) { return .failure(failure) }
            return .failure(FetchFailure(url: request.url, reason: .transfer(String(cString: darkroom_curl_easy_strerror(code)))))
        }
        return .success(transfer)
    }

    private func configure() -> CURLcode {
        let total = max(1, limits.timeout.wholeMilliseconds)
        // The transfer's context for the body callback: this object, which
        // the caller keeps alive for as long as the handle can call back.
        let context = Unmanaged.passUnretained(self).toOpaque()
        let settings: [CURLcode] = [
            darkroom_curl_set_string(handle, CURLOPT_URL, request.url),
            // No signals: libcurl must not use SIGALRM for DNS timeouts in a
            // process with other threads.
            darkroom_curl_set_long(handle, CURLOPT_NOSIGNAL, 1),
            darkroom_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"),
            darkroom_curl_set_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"),
            darkroom_curl_set_long(handle, CURLOPT_FOLLOWLOCATION, 1),
            darkroom_curl_set_long(handle, CURLOPT_MAXREDIRS, limits.maxRedirects),
            darkroom_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, min(max(1, limits.connectTimeout.wholeMilliseconds), total)),
            darkroom_curl_set_long(handle, CURLOPT_TIMEOUT_MS, total),
            // Refuses a body whose announced length is over the limit before
            // it comes; the callback below stops one that runs over.
            darkroom_curl_set_offset(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limits.maxBytes)),
            // An HTTP status of 400 or more ends the transfer before its body.
            darkroom_curl_set_long(handle, CURLOPT_FAILONERROR, 1),
            darkroom_curl_set_string(handle, CURLOPT_USERAGENT, limits.userAgent),
            darkroom_curl_set_pointer(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errorBuffer)),
            darkroom_curl_set_pointer(handle, CURLOPT_WRITEDATA, context),
            darkroom_curl_set_write_function(handle) { data, size, count, context in
                guard let context else { return 0 }
                let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
                return transfer.append(data, size * count)
            },
        ]
        return settings.first { $0 != CURLE_OK } ?? CURLE_OK
    }

    /// The body callback: appends to the file, and stops the transfer (by
    /// taking fewer bytes than given) once the body passes the limit or
    /// the file cannot be written.
    private func append(_ data: UnsafeMutablePointer<CChar>?, _ count: Int) -> Int {
        guard count > 0 else { return 0 }
        guard let data else { return 0 }
        guard received + count <= limits.maxBytes else {
            overLimit = true
            return 0
        }
        var written = 0
        while written < count {
            let n = write(fd, data + written, count - written)
            if n < 0 {
                if errno == EINTR { continue }
                writeErrno = errno
                return 0
            }
            written += n
        }
        received += count
        return count
    }

    /// A detail to report if the transfer fails for a reason of the loop.
    func note(_ detail: String) { extraDetail = detail }

    /// Ends the transfer with libcurl's result: closes the file, keeps it
    /// on success and removes it on failure.
    func end(_ code: CURLcode) -> Result<Fetched, FetchFailure> {
        if fd >= 0 {
            if close(fd) != 0, code == CURLE_OK {
                writeErrno = errno
            }
            fd = -1
        }
        var status = 0
        _ = darkroom_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        if code == CURLE_OK, writeErrno == nil, (200..<300).contains(status) {
            var redirects = 0
            _ = darkroom_curl_get_long(handle, CURLINFO_REDIRECT_COUNT, &redirects)
            var effective: UnsafeMutableRawPointer?
            _ = darkroom_curl_get_pointer(handle, CURLINFO_EFFECTIVE_URL, &effective)
            let finalURL = effective.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? request.url
            return .success(Fetched(bytes: received, status: status, redirects: redirects, finalURL: finalURL))
        }
        unlink(request.destination)
        if code == CURLE_OK {
            if let writeErrno { return .failure(FetchFailure(url: request.url, reason: .cannotWrite(String(cString: strerror(writeErrno))))) }
            // A final status that is neither a success nor an error, such as
            // a 304 or a 3xx with no Location.
            return .failure(FetchFailure(url: request.url, reason: .httpStatus(status)))
        }
        return .failure(failure(code, status: status))
    }

    /// What libcurl's code (and what was seen on the way) says went wrong.
    private func failure(_ code: CURLcode, status: Int = 0) -> FetchFailure {
        let detail = extraDetail ?? {
            let text = String(cString: errorBuffer)
            return text.isEmpty ? String(cString: darkroom_curl_easy_strerror(code)) : text
        }()
        let reason: FetchFailure.Reason
        switch code {
        case CURLE_WRITE_ERROR where overLimit:
            reason = .tooLarge(limit: limits.maxBytes, announced: false)
        case CURLE_WRITE_ERROR where writeErrno != nil:
            reason = .cannotWrite(String(cString: strerror(writeErrno!)))
        case CURLE_FILESIZE_EXCEEDED:
            // libcurl refuses an announced length before the body; later
            // versions also stop a body that runs over, after some bytes.
            reason = .tooLarge(limit: limits.maxBytes, announced: received == 0)
        case CURLE_HTTP_RETURNED_ERROR where status > 0:
            reason = .httpStatus(status)
        case CURLE_OPERATION_TIMEDOUT:
            // Not yet connected when time ran out: the connect timeout, or
            // the whole timeout if that is the shorter.
            var connectTime: curl_off_t = 0
            _ = darkroom_curl_get_offset(handle, CURLINFO_CONNECT_TIME_T, &connectTime)
            let connecting = connectTime == 0 && limits.connectTimeout < limits.timeout
            reason = .timedOut(connecting: connecting, after: connecting ? limits.connectTimeout : limits.timeout)
        case CURLE_COULDNT_RESOLVE_HOST:
            reason = .cannotResolve(detail)
        case CURLE_COULDNT_CONNECT:
            reason = .cannotConnect(detail)
        case CURLE_TOO_MANY_REDIRECTS:
            reason = .tooManyRedirects(limits.maxRedirects)
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            reason = .unsupportedURL(detail)
        default:
            reason = .transfer(detail)
        }
        return FetchFailure(url: request.url, reason: reason)
    }
}
