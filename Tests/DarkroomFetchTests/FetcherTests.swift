import DarkroomFetch
import Foundation
import Testing

/// Fetcher without a web server: the failures that need none, each
/// reported once, for its own request, while the others go on.
@Suite("Fetcher")
struct FetcherTests {
    @Test("only http:// and https:// are web URLs, in any case")
    func webURLs() {
        #expect(FetchRequest.isWebURL("http://example.com/a.jpg"))
        #expect(FetchRequest.isWebURL("HTTPS://example.com/a.jpg"))
        #expect(!FetchRequest.isWebURL("ftp://example.com/a.jpg"))
        #expect(!FetchRequest.isWebURL("photos/http/a.jpg"))
        #expect(!FetchRequest.isWebURL("file:///tmp/a.jpg"))
    }

    @Test("a refused connection, an unwritable file and a bad URL each end once with their reason")
    func failuresWithoutAServer() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("fetch-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let port = try Self.closedPort()
        let requests = [
            FetchRequest(url: "http://127.0.0.1:\(port)/a.jpg", destination: dir.appendingPathComponent("0").path),
            FetchRequest(url: "http://127.0.0.1:\(port)/b.jpg", destination: dir.appendingPathComponent("no/such/dir/1").path),
            FetchRequest(url: "http://127.0.0.1:\(port)/c\nd.jpg", destination: dir.appendingPathComponent("2").path),
            FetchRequest(url: "http://127.0.0.1:\(port)/e.jpg", destination: dir.appendingPathComponent("3").path),
        ]
        var results: [Int: Result<Fetched, FetchFailure>] = [:]
        var calls = 0
        Fetcher.download(requests, limits: FetchLimits(maxBytes: 1000, timeout: .seconds(5), parallel: 2)) { index, result in
            calls += 1
            results[index] = result
        }
        #expect(calls == 4 && results.count == 4)
        for index in [0, 3] {
            guard case .failure(let failure)? = results[index], case .cannotConnect = failure.reason else {
                Issue.record("request \(index): \(String(describing: results[index]))")
                continue
            }
            #expect(failure.url == requests[index].url)
            #expect(failure.message.hasPrefix("download failed: cannot connect"))
            #expect(!FileManager.default.fileExists(atPath: requests[index].destination), "a failed download leaves no file")
        }
        guard case .failure(let unwritable)? = results[1], case .cannotWrite = unwritable.reason else {
            Issue.record("request 1: \(String(describing: results[1]))")
            return
        }
        guard case .failure(let badURL)? = results[2], case .unsupportedURL = badURL.reason else {
            Issue.record("request 2: \(String(describing: results[2]))")
            return
        }
    }

    @Test("the messages people read")
    func messages() {
        func message(_ reason: FetchFailure.Reason) -> String { FetchFailure(url: "http://h/a.jpg", reason: reason).message }
        #expect(message(.httpStatus(404)) == "download failed: HTTP status 404 Not Found")
        #expect(message(.httpStatus(599)) == "download failed: HTTP status 599")
        #expect(message(.timedOut(connecting: false, after: .seconds(30))) == "download timed out after 30 s")
        #expect(message(.timedOut(connecting: true, after: .milliseconds(1500))) == "download failed: could not connect within 1.5 s")
        #expect(message(.tooLarge(limit: 100, announced: true)) == "too large: the server announced more than the 100-byte input limit (not downloaded)")
        #expect(message(.tooLarge(limit: 100, announced: false)) == "too large: more than the 100-byte input limit (download stopped there)")
        #expect(message(.tooManyRedirects(5)) == "download failed: more than 5 redirects")
    }

    /// A loopback port nothing listens on: one the kernel just handed out, released.
    static func closedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
