import Foundation
import Testing
import DarkroomClient
import DarkroomProtocol
import DarkroomZMQ

@Suite struct ProducerTests {
    @Test func keepsAtMostTheWindowInFlightAndMatchesRepliesOutOfOrder() throws {
        let context = try Context()
        let total = 11
        let window = 3
        struct State: Sendable {
            var pending: [([UInt8], Submit)] = []
            var received = 0
            var maxPending = 0
            var jobBySource: [String: ULID] = [:]
            var imageBySource: [String: [UInt8]] = [:]
        }
        let state = Shared(State())
        // Holds SUBMITs until it has `window` of them (or all), then answers
        // them newest first: a producer that waited for each answer before
        // sending the next would never get one.
        let server = try TestServer(context: context) { io, identity, frames in
            guard case .submit(let submit)? = try? FrontendMessage.decode(frames) else { return }
            let batch: [([UInt8], Submit)] = state.with { s in
                s.received += 1
                s.pending.append((identity, submit))
                s.maxPending = max(s.maxPending, s.pending.count)
                s.imageBySource[submit.sourceName] = submit.image
                guard s.pending.count == window || s.received == total else { return [] }
                defer { s.pending = [] }
                return s.pending
            }
            for (peer, submit) in batch.reversed() {
                let job = ulid()
                let seq = state.with { s in
                    s.jobBySource[submit.sourceName] = job
                    return UInt64(s.jobBySource.count)
                }
                io.reply(peer, Accepted(requestID: submit.requestID, jobID: job, eventSeq: seq).frames())
            }
        }
        defer { server.stop() }

        let producer = try Producer(endpoint: server.endpoint, context: context, timeout: .seconds(20))
        let loads = Shared(0)
        let jobs = (0..<total).map { i in
            SubmitRequest(sourceName: "photo-\(i).jpg",
                          image: .provider { loads.with { $0 += 1 }; return fakeJPEG(100 + i, seed: UInt8(i)) },
                          pipeline: "scale:256x256,mode=fill | crop:square", priority: UInt8(i % 10))
        }
        var results: [String: SubmitResult] = [:]
        var replies = 0
        let summary = try producer.submit(jobs, window: window) { request, result in
            replies += 1
            results[request.sourceName] = result
        }

        let seen = state.current
        #expect(seen.received == total)
        #expect(seen.maxPending == window)
        #expect(replies == total)
        #expect(summary.accepted == total)
        #expect(summary.rejected == 0 && summary.failed == 0 && summary.resent == 0)
        #expect(summary.firstEventSeq == 1)
        #expect(loads.current == total)
        for i in 0..<total {
            let name = "photo-\(i).jpg"
            #expect(results[name]?.jobID == seen.jobBySource[name], "\(name) got another job's answer")
            #expect(seen.imageBySource[name] == fakeJPEG(100 + i, seed: UInt8(i)))
        }
    }

    @Test func rejectionsCarryTheReasonAndBadInputIsReportedWithoutSending() throws {
        let context = try Context()
        let received = Shared<[String]>([])
        let server = try TestServer(context: context) { io, identity, frames in
            guard case .submit(let submit)? = try? FrontendMessage.decode(frames) else { return }
            received.with { $0.append(submit.sourceName) }
            if submit.sourceName.hasPrefix("full") {
                io.reply(identity, Rejected(requestID: submit.requestID, code: .queueFull,
                                            reason: "queue is full: 100000 jobs waiting, limit 100000").frames())
            } else if submit.sourceName.hasPrefix("forbidden") {
                io.reply(identity, ErrorReply(requestID: submit.requestID, code: .forbidden,
                                              reason: "SUBMIT is not allowed for role worker").frames())
            } else {
                io.reply(identity, Accepted(requestID: submit.requestID, jobID: ulid(), eventSeq: 7).frames())
            }
        }
        defer { server.stop() }

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("darkroom-client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let okPath = directory.appendingPathComponent("ok.jpg").path
        try Data(fakeJPEG(500)).write(to: URL(fileURLWithPath: okPath))
        let missingPath = directory.appendingPathComponent("missing.jpg").path

        let pipeline = "crop:square"
        let jobs = [
            SubmitRequest.file(okPath, pipeline: pipeline),
            SubmitRequest(sourceName: "full.jpg", image: .bytes(fakeJPEG()), pipeline: pipeline),
            SubmitRequest(sourceName: "forbidden.jpg", image: .bytes(fakeJPEG()), pipeline: pipeline),
            SubmitRequest.file(missingPath, pipeline: pipeline),
            SubmitRequest(sourceName: "two-lines.jpg", image: .bytes(fakeJPEG()), pipeline: "crop:square\ninvert"),
            SubmitRequest(sourceName: "empty.jpg", image: .bytes([]), pipeline: pipeline),
            SubmitRequest(sourceName: "priority.jpg", image: .bytes(fakeJPEG()), pipeline: pipeline, priority: 12),
        ]
        // queue-full is retried until the deadline, then reported with the broker's reason.
        let producer = try Producer(endpoint: server.endpoint, context: context, timeout: .milliseconds(500), deadline: .seconds(1),
                                    backoff: Backoff(initial: .milliseconds(100), maximum: .milliseconds(200)))
        var results: [String: SubmitResult] = [:]
        let summary = try producer.submit(jobs) { request, result in results[request.sourceName] = result }

        #expect(summary.accepted == 1 && summary.rejected == 2 && summary.failed == 4)
        #expect(results[okPath]?.jobID != nil)
        #expect(results["full.jpg"] == .rejected(code: .queueFull, reason: "queue is full: 100000 jobs waiting, limit 100000"))
        #expect(results["forbidden.jpg"] == .rejected(code: .forbidden, reason: "SUBMIT is not allowed for role worker"))
        guard case .failed(let missing)? = results[missingPath] else { Issue.record("missing file not reported"); return }
        #expect(missing.kind == .input)
        #expect(missing.message.contains(missingPath))
        for name in ["two-lines.jpg", "empty.jpg", "priority.jpg"] {
            guard case .failed(let error)? = results[name] else { Issue.record("\(name) not reported as failed"); continue }
            #expect(error.kind == .invalidArgument)
            #expect(error.message.hasPrefix(name))
        }
        // Only the jobs DRK1 can carry were sent; only the refusal for now was sent again.
        let sent = received.current
        #expect(Set(sent) == [okPath, "full.jpg", "forbidden.jpg"])
        #expect(sent.filter { $0 == okPath }.count == 1 && sent.filter { $0 == "forbidden.jpg" }.count == 1)
        #expect(sent.filter { $0 == "full.jpg" }.count >= 3, "\(sent)")
    }

    @Test func brokerNotRunningTimesOutWithAHint() throws {
        let context = try Context()
        let endpoint = try unusedEndpoint(context)
        let admin = try Admin(endpoint: endpoint, context: context, timeout: .milliseconds(300))
        let error = #expect(throws: ClientError.self) { try admin.status() }
        #expect(error?.kind == .timeout)
        #expect(error?.message.hasPrefix("no answer from the broker at \(endpoint) within 300 ms (is `darkroom up` or `darkroom broker` running?)") == true)

        let store = try StoreClient(endpoint: endpoint, context: context, timeout: .milliseconds(300))
        let storeError = #expect(throws: ClientError.self) { try store.ping() }
        #expect(storeError?.message.contains("the storage node") == true)
        #expect(storeError?.message.contains("`darkroom store`") == true)
    }

    @Test func invalidWindowIsRefused() throws {
        let context = try Context()
        let producer = try Producer(endpoint: try unusedEndpoint(context), context: context, timeout: .milliseconds(100))
        let error = #expect(throws: ClientError.self) {
            try producer.submit([SubmitRequest](), window: 0) { _, _ in }
        }
        #expect(error?.kind == .invalidArgument)
    }
}

/// An endpoint nothing listens on (a port bound, read back and released).
func unusedEndpoint(_ context: Context) throws -> String {
    let socket = try context.socket(.router)
    try socket.setLinger(milliseconds: 0)
    try socket.bind("tcp://127.0.0.1:*")
    let endpoint = try socket.lastEndpoint()
    socket.close()
    return endpoint
}

struct TimedOut: Error {}

/// Polls `condition` until it returns a value, for at most `seconds`.
func waitFor<T>(seconds: Double = 15, _ condition: () -> T?) throws -> T {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if let value = condition() { return value }
        Thread.sleep(forTimeInterval: 0.01)
    }
    throw TimedOut()
}
