import Testing
import DarkroomClient
import DarkroomCore
import DarkroomProtocol
import DarkroomZMQ

@Suite struct AdminTests {
    @Test func statusDecodesTheBrokersJSON() throws {
        let context = try Context()
        // Written by hand, keys in another order, with a key this client
        // does not know: receivers must ignore it.
        let json = """
        {"workers": [{"id": "w-01JBX3", "host": "node-a", "pid": 4242, "slots": 2, "busy": 2, "credit": 0,
          "lastHeartbeat": 1730000000001, "future": true}],
         "time": 1730000000123, "protocolVersion": "DRK1", "eventSeq": 5000, "uptimeSeconds": 12,
         "queue": {"ready": [0,0,0,0,0,12,0,0,0,3], "delayed": 1, "inFlight": 4, "dead": 2, "limit": 100000},
         "rates": {"windowSeconds": 10, "accepted": 812.5, "stored": 790.25, "failed": 1.5}}
        """
        let server = try TestServer(context: context) { io, identity, frames in
            guard case .status(let request)? = try? FrontendMessage.decode(frames) else { return }
            var id: [UInt8] = []
            for shift in stride(from: 56, through: 0, by: -8) { id.append(UInt8(truncatingIfNeeded: request.requestID >> UInt64(shift))) }
            io.reply(identity, [Wire.protocolID, [Command.statusReply.rawValue], id, Array(json.utf8)])
        }
        defer { server.stop() }

        let admin = try Admin(endpoint: server.endpoint, context: context, timeout: .seconds(20))
        let status = try admin.status()
        #expect(status.eventSeq == 5000)
        #expect(status.time == 1_730_000_000_123)
        #expect(status.queue.ready[5] == 12 && status.queue.ready[9] == 3)
        #expect(status.queue.depth == 16)
        #expect(status.queue.limit == 100_000)
        #expect(status.workers == [WorkerStatus(id: "w-01JBX3", host: "node-a", pid: 4242, slots: 2, busy: 2, credit: 0, lastHeartbeat: 1_730_000_000_001)])
        #expect(status.rates.stored == 790.25)
    }

    @Test func deadLetterCommandsAndPing() throws {
        let context = try Context()
        let deadJob = DeadJob(jobID: ulid(), source: "bad.jpg", pipeline: "crop:600x600+0+0", priority: 0, attempts: 1,
                              submitted: 1_730_000_000_000, died: 1_730_000_000_500, stepIndex: 1, step: "crop:600x600+0+0",
                              errorCode: "image.invalid-argument", reason: "rectangle exceeds image 500x400")
        let afters = Shared<[ULID?]>([])
        let server = try TestServer(context: context) { io, identity, frames in
            guard let message = try? FrontendMessage.decode(frames) else { return }
            switch message {
            case .deadList(let r):
                afters.with { $0.append(r.after) }
                io.reply(identity, DeadListReply(requestID: r.requestID, list: DeadList(total: 1, jobs: [deadJob])).frames())
            case .deadRetry(let r):
                io.reply(identity, OKReply(requestID: r.requestID, count: r.target == .all ? 3 : 1).frames())
            case .deadDiscard(let r):
                io.reply(identity, ErrorReply(requestID: r.requestID, code: .notFound, reason: "job \(r.target) is not dead").frames())
            case .ping(let r):
                io.reply(identity, Pong(requestID: r.requestID).frames())
            default:
                break
            }
        }
        defer { server.stop() }

        let admin = try Admin(endpoint: server.endpoint, context: context, timeout: .seconds(20))
        let after = ulid()
        #expect(try admin.deadList(limit: 10, after: after) == DeadList(total: 1, jobs: [deadJob]))
        #expect(afters.current == [after])
        #expect(try admin.deadRetry(.all) == 3)
        #expect(try admin.deadRetry(.job(deadJob.jobID)) == 1)
        let missing = ulid()
        let error = #expect(throws: ClientError.self) { try admin.deadDiscard(.job(missing)) }
        #expect(error?.kind == .server(.notFound))
        #expect(error?.message == "the broker refused DEAD-DISCARD \(missing): not-found: job \(missing) is not dead")
        _ = try admin.ping()
        #expect(throws: ClientError.self) { try admin.deadList(limit: 0) }
    }
}

@Suite struct StoreClientTests {
    static func info(_ bytes: [UInt8], _ side: UInt32) -> ImageInfo {
        ImageInfo(width: side, height: side, bytes: UInt64(bytes.count), sha256: SHA256.hex(bytes))
    }

    @Test func getVerifiesTheBytesAgainstTheRecord() throws {
        let context = try Context()
        let full = fakeJPEG(4000, seed: 1)
        let thumb = fakeJPEG(300, seed: 2)
        let record = RecordInfo(id: ulid(), jobID: ulid(), source: "photos/IMG_0001.jpg", pipeline: "crop:square",
                                created: 1_730_000_000_900, full: Self.info(full, 2048), thumb: Self.info(thumb, 256))
        let tampered = ulid()
        let server = try TestServer(context: context) { io, identity, frames in
            guard let message = try? StoreMessage.decode(frames) else { return }
            switch message {
            case .get(let r) where r.id == tampered:
                var flipped = full
                flipped[100] ^= 0x01  // same size, different bytes
                var claimed = record
                claimed.id = tampered
                io.reply(identity, GetReply(requestID: r.requestID, variant: .full, record: claimed, image: flipped).frames())
            case .get(let r) where r.id == record.id || r.id == record.jobID:
                let image = r.variant == .full ? full : thumb
                io.reply(identity, GetReply(requestID: r.requestID, variant: r.variant, record: record, image: image).frames())
            case .get(let r):
                io.reply(identity, ErrorReply(requestID: r.requestID, code: .notFound, reason: "no record or job \(r.id)").frames())
            case .list(let r):
                io.reply(identity, ListReply(requestID: r.requestID, records: r.before == nil ? [record] : []).frames())
            case .stats(let r):
                io.reply(identity, StatsReply(requestID: r.requestID, stats: StoreStats(records: 1, fullBytes: 4000, thumbBytes: 300,
                                                                                       externalFiles: 0, databaseBytes: 8192)).frames())
            case .delete(let r):
                io.reply(identity, ErrorReply(requestID: r.requestID, code: .notFound, reason: "no record or job \(r.id)").frames())
            case .ping(let r):
                io.reply(identity, Pong(requestID: r.requestID).frames())
            default:
                break
            }
        }
        defer { server.stop() }

        let store = try StoreClient(endpoint: server.endpoint, context: context, timeout: .seconds(20))
        let (gotRecord, gotFull) = try store.get(record.id, variant: .full)
        #expect(gotRecord == record && gotFull == full)
        #expect(try store.get(record.jobID, variant: .thumbnail).image == thumb)

        let mismatch = #expect(throws: ClientError.self) { try store.get(tampered) }
        #expect(mismatch?.kind == .integrity)
        #expect(mismatch?.message.contains("sha256") == true)

        let missing = ulid()
        #expect(throws: ClientError.self) { try store.get(missing) }
        let deleteError = #expect(throws: ClientError.self) { try store.delete(missing) }
        #expect(deleteError?.kind == .server(.notFound))

        #expect(try store.list(limit: 10) == [record])
        #expect(try store.list(limit: 10, before: record.id).isEmpty)
        #expect(try store.stats().records == 1)
        _ = try store.ping()
    }
}

@Suite(.enabled(if: Curve.isAvailable, "libzmq built without CURVE"))
struct CurveClientTests {
    @Test func clientsSpeakCurveWithTheServerKeyAndAreToldAtOnceWhenTheyHaveAnother() throws {
        let context = try Context()
        let serverKeys = try CurveKeyPair.generate()
        let server = try TestServer(context: context, curveSecret: serverKeys.secretKey) { io, identity, frames in
            if case .ping(let r)? = try? FrontendMessage.decode(frames) {
                io.reply(identity, Pong(requestID: r.requestID).frames())
            }
        }
        defer { server.stop() }

        let keys = CurveClientKeys(serverKey: serverKeys.publicKey, keyPair: try CurveKeyPair.generate())
        let admin = try Admin(endpoint: server.endpoint, context: context, timeout: .seconds(20), curve: keys)
        _ = try admin.ping()

        // A client made for another server key: the server closes every
        // handshake, and the client says so well before its timeout.
        let impostor = CurveClientKeys(serverKey: try CurveKeyPair.generate().publicKey, keyPair: try CurveKeyPair.generate())
        let lost = try Admin(endpoint: server.endpoint, context: context, timeout: .seconds(20), curve: impostor)
        let start = ContinuousClock.now
        let error = #expect(throws: ClientError.self) { try lost.ping() }
        #expect(error?.kind == .refused)
        #expect(error?.message.contains("--server-key is not that server's public key") == true, "\(String(describing: error))")
        #expect(ContinuousClock.now - start < .seconds(5))

        // A client without keys against this CURVE server.
        let plain = try Admin(endpoint: server.endpoint, context: context, timeout: .seconds(20))
        let plainError = #expect(throws: ClientError.self) { try plain.ping() }
        #expect(plainError?.kind == .refused)
        #expect(plainError?.message.contains("requires CURVE keys") == true, "\(String(describing: plainError))")
    }
}
