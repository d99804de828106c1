import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// The parts of a fuzz run against a running system, each drawing from its
/// own random stream of the run's seed, so that a part sends the same
/// messages whatever the others did.
final class FuzzRun {
    let seed: UInt64
    let h: SystemHarness
    let context: Context
    let corpus: FuzzCorpus
    let report: FuzzReport
    let monitor: EventMonitor

    init(seed: UInt64, harness: SystemHarness, context: Context, corpus: FuzzCorpus, report: FuzzReport) throws {
        self.seed = seed
        h = harness
        self.context = context
        self.corpus = corpus
        self.report = report
        monitor = try EventMonitor(context: context, endpoint: harness.events)
    }

    func maker(_ stream: UInt64) -> FuzzMaker {
        FuzzMaker(random: .stream(seed, stream), corpus: corpus, idTag: stream)
    }

    func item(_ socket: FuzzSocket, _ message: FuzzMessage, _ expectation: Expectation) -> FuzzItem {
        FuzzItem(index: report.count(socket, message.kind), message: message, expectation: expectation)
    }

    // MARK: Frontend

    /// Batches of hostile messages on the broker frontend, each batch on a
    /// connection of its own and closed by a PING.
    func frontend(messages: Int) throws {
        var maker = maker(1)
        let driver = DealerDriver(context: context, endpoint: h.frontend, socket: .frontend, report: report)
        var sent = 0
        while sent < messages {
            var items: [FuzzItem] = []
            for _ in 0..<maker.random.int(in: 10...30) {
                let message = maker.hostile(.frontend)
                items.append(item(.frontend, message, FrontendOracle.expect(message)))
            }
            let ping = Ping(requestID: maker.requestID()).frames()
            items.append(item(.frontend, FuzzMessage(frames: ping, kind: .valid, note: "PING closing the batch"), FrontendOracle.expect(ping)))
            try driver.run(items)
            sent += items.count
            monitor.drain(report)
        }
        driver.drain()
    }

    // MARK: Backend

    /// Sessions on the broker backend, each on a connection of its own: a
    /// stranger that never sends READY (every CREDIT, DONE, FAIL, HEARTBEAT
    /// or HOLDING gets DISCONNECT), or a worker that sends READY and then
    /// reports jobs it was never sent. Each session ends with a message
    /// the broker's queue answers (HEARTBEAT from a stranger, a late
    /// HOLDING from a worker) and one its socket thread answers (an unknown
    /// command, 0x7E), so that every earlier answer has come when those have.
    func backend(sessions: Int) throws {
        var maker = maker(2)
        let driver = DealerDriver(context: context, endpoint: h.backend, socket: .backend, report: report)
        for _ in 0..<sessions {
            var session = BackendSession()
            var items: [FuzzItem] = []
            func add(_ message: FuzzMessage) {
                let expectation = session.expect(message)
                items.append(item(.backend, message, expectation))
            }
            if maker.random.percent(40) {
                let ready = Ready(workerID: "fz-" + maker.ulid().description, host: "fuzz", pid: 4242, slots: UInt32(maker.random.int(in: 1...4)))
                add(FuzzMessage(frames: ready.frames(), kind: .valid, note: "READY of a worker that sends no CREDIT"))
                if maker.random.percent(50) {
                    add(FuzzMessage(frames: Holding(jobs: [.init(jobID: maker.ulid(), attempt: 1)]).frames(), kind: .valid,
                                    note: "HOLDING directly after READY, of a job never sent"))
                }
            }
            let hostile = maker.random.int(in: 4...14)
            let semantic = Set((0..<maker.random.int(in: 1...3)).map { _ in maker.random.below(hostile) })
            for position in 0..<hostile {
                if semantic.contains(position) { add(wellFormedWrongBackend(&maker, session)) }
                var message = maker.hostile(.backend)
                while session.grantsCredit(message.frames) { message = maker.hostile(.backend) }
                add(message)
            }
            if session.known {
                if session.justReady {
                    add(FuzzMessage(frames: Done(jobID: maker.ulid(), attempt: 1, recordID: maker.ulid()).frames(), kind: .wellFormedWrong,
                                    note: "DONE of a job never sent"))
                }
                add(FuzzMessage(frames: Holding(jobs: []).frames(), kind: .wellFormedWrong, note: "HOLDING not directly after READY (closing the session)"))
            } else {
                add(FuzzMessage(frames: Heartbeat().frames(), kind: .wellFormedWrong, note: "HEARTBEAT from a connection that never sent READY (closing the session)"))
            }
            add(FuzzMessage(frames: [Wire.protocolID, [0x7E]], kind: .unknownCommand, note: "command byte 0x7e (closing the session)"))
            let heartbeats = session.everKnown
            if session.known { add(FuzzMessage(frames: Disconnect().frames(), kind: .valid, note: "DISCONNECT ending the session")) }
            try driver.run(items, heartbeats: heartbeats)
        }
        driver.drain()
        monitor.drain(report)
    }

    /// A backend command that decodes but that the broker must refuse in
    /// this state: reports and credit from a connection it does not know,
    /// or, from a known worker, reports of jobs never sent, a second
    /// HOLDING, a JOB (which only the broker sends).
    func wellFormedWrongBackend(_ maker: inout FuzzMaker, _ session: BackendSession) -> FuzzMessage {
        let job = maker.ulid()
        let fail = Fail(jobID: job, attempt: UInt32(maker.random.int(in: 1...3)), retryable: maker.random.percent(50),
                        failure: FailureDetail(stepIndex: 0, step: "", code: maker.random.pick(["image.corrupt", "worker.shutdown", "internal"]), reason: "made up"))
        let done = Done(jobID: job, attempt: 1, recordID: maker.ulid())
        if session.known {
            switch maker.random.below(4) {
            case 0: return FuzzMessage(frames: done.frames(), kind: .wellFormedWrong, note: "DONE of a job never sent")
            case 1: return FuzzMessage(frames: fail.frames(), kind: .wellFormedWrong, note: "FAIL of a job never sent")
            case 2: return FuzzMessage(frames: Holding(jobs: [.init(jobID: job, attempt: 2)]).frames(), kind: .wellFormedWrong, note: "HOLDING again")
            default:
                return FuzzMessage(frames: JobDispatch(jobID: job, attempt: 1, options: .default, pipeline: "grayscale", sourceName: "a.jpg", image: corpus.photo).frames(),
                                   kind: .wellFormedWrong, note: "JOB sent to the broker")
            }
        }
        switch maker.random.below(5) {
        case 0: return FuzzMessage(frames: done.frames(), kind: .wellFormedWrong, note: "DONE from a connection that never sent READY")
        case 1: return FuzzMessage(frames: fail.frames(), kind: .wellFormedWrong, note: "FAIL from a connection that never sent READY")
        case 2: return FuzzMessage(frames: Credit(count: UInt32(maker.random.int(in: 1...100))).frames(), kind: .wellFormedWrong, note: "CREDIT before READY")
        case 3: return FuzzMessage(frames: Holding(jobs: [.init(jobID: job, attempt: 1)]).frames(), kind: .wellFormedWrong, note: "HOLDING before READY")
        default: return FuzzMessage(frames: Heartbeat().frames(), kind: .wellFormedWrong, note: "HEARTBEAT before READY")
        }
    }

    // MARK: Store

    /// Batches of hostile messages on the storage node, each on a
    /// connection of its own and closed by a PING. The oracle keeps the
    /// records stored for made-up job ids, so that a STORE again, a GET or
    /// a DELETE of one is answered as section 11 says.
    func store(messages: Int) throws {
        var maker = maker(3)
        var oracle = StoreOracle()
        let driver = DealerDriver(context: context, endpoint: h.store, socket: .store, report: report)
        var sent = 0
        while sent < messages {
            var items: [FuzzItem] = []
            for _ in 0..<maker.random.int(in: 10...30) {
                let message = maker.random.percent(20) ? wellFormedWrongStore(&maker, oracle) : maker.hostile(.store)
                items.append(item(.store, message, oracle.expect(message)))
            }
            let ping = Ping(requestID: maker.requestID()).frames()
            items.append(item(.store, FuzzMessage(frames: ping, kind: .valid, note: "PING closing the batch"), oracle.expect(ping)))
            try driver.run(items)
            sent += items.count
        }
        driver.drain()
    }

    /// A store request that decodes, aimed at section 11's rules: images
    /// that are not JPEGs or not of the declared size, a header over the
    /// limits, STORE for made-up job ids (again: created 0), GET and
    /// DELETE of those.
    func wellFormedWrongStore(_ maker: inout FuzzMaker, _ oracle: StoreOracle) -> FuzzMessage {
        let id = maker.requestID()
        func store(_ job: ULID, fullSize: ImageSize? = nil, full: [UInt8]? = nil, thumbnail: [UInt8]? = nil) -> [[UInt8]] {
            StoreRequest(requestID: id, jobID: job, sourceName: maker.sourceName(), pipeline: "grayscale",
                         fullSize: fullSize ?? corpus.photoSize, thumbnailSize: corpus.thumbnailSize,
                         full: full ?? corpus.photo, thumbnail: thumbnail ?? corpus.thumbnail).frames()
        }
        if let job = oracle.order.isEmpty ? nil : oracle.order[maker.random.below(oracle.order.count)], maker.random.percent(60) {
            switch maker.random.below(10) {
            case 0...3: return FuzzMessage(frames: store(job), kind: .wellFormedWrong, note: "STORE again for made-up job \(job)")
            case 4: return FuzzMessage(frames: store(job, full: maker.random.bytes(64)), kind: .wellFormedWrong, note: "STORE again for \(job), full image random bytes")
            case 5...8:
                let variant: Variant = maker.random.percent(50) ? .full : .thumbnail
                return FuzzMessage(frames: GetRequest(requestID: id, id: job, variant: variant).frames(), kind: .wellFormedWrong, note: "GET of made-up job \(job)")
            default: return FuzzMessage(frames: DeleteRequest(requestID: id, id: job).frames(), kind: .wellFormedWrong, note: "DELETE of made-up job \(job)")
            }
        }
        let job = maker.ulid()
        switch maker.random.below(7) {
        case 0: return FuzzMessage(frames: store(job, full: maker.random.bytes(maker.random.int(in: 1...500))), kind: .wellFormedWrong, note: "STORE, full image random bytes")
        case 1: return FuzzMessage(frames: store(job, thumbnail: [0xFF, 0xD8, 0xFF] + maker.random.bytes(40)), kind: .wellFormedWrong, note: "STORE, thumbnail FF D8 FF and garbage")
        case 2:
            let size = ImageSize(width: corpus.photoSize.width + UInt32(maker.random.int(in: 1...3)), height: corpus.photoSize.height)
            return FuzzMessage(frames: store(job, fullSize: size), kind: .wellFormedWrong, note: "STORE, full size declared \(size.width)x\(size.height) for a 48x32 JPEG")
        case 3:
            return FuzzMessage(frames: store(job, fullSize: ImageSize(width: 20_000, height: 1), full: corpus.wide), kind: .wellFormedWrong,
                               note: "STORE, full image 20000x1 (over the side limit)")
        case 4: return FuzzMessage(frames: store(job, full: corpus.thumbnail), kind: .wellFormedWrong, note: "STORE, the thumbnail sent as the full image")
        default: return FuzzMessage(frames: store(job), kind: .wellFormedWrong, note: "STORE for made-up job \(job)")
        }
    }

    // MARK: Messages over the size limits

    /// A few big messages: one per server socket over 65 MiB in all its
    /// frames, each frame under the limit (dropped unanswered, section 9.2);
    /// a SUBMIT and a STORE whose image is just over 64 MiB in a message
    /// under 65 MiB (REJECTED and ERROR too-large); and, on a raw ZMTP
    /// connection, one frame over 65 MiB (ZeroMQ drops the peer).
    func bigMessages() throws {
        var maker = maker(4)
        let big = 40 << 20, second = 30 << 20
        let filler = [UInt8](repeating: 0x42, count: second)
        var image = [UInt8](repeating: 0x41, count: big)
        image[0] = 0xFF
        image[1] = 0xD8

        // Frontend: a SUBMIT of 70 MiB (a 40 MiB image and a 30 MiB submit key).
        let frontend = DealerDriver(context: context, endpoint: h.frontend, socket: .frontend, report: report)
        var submit = Submit(requestID: maker.requestID(), priority: 5, options: .default, pipeline: "grayscale", sourceName: "big.jpg", image: image).frames()
        submit.append(filler)
        var justOver = [UInt8](repeating: 0x41, count: Wire.maxImageBytes + 1)
        justOver[0] = 0xFF
        justOver[1] = 0xD8
        let overImage = Submit(requestID: maker.requestID(), priority: 5, options: .default, pipeline: "grayscale", sourceName: "huge.jpg", image: justOver).frames()
        justOver = []
        let ping = Ping(requestID: maker.requestID()).frames()
        try frontend.run([
            item(.frontend, FuzzMessage(frames: submit, kind: .oversized, note: "SUBMIT of 70 MiB in all frames"), .silence),
            item(.frontend, FuzzMessage(frames: overImage, kind: .oversized, note: "SUBMIT with an image of 64 MiB + 1 byte"), FrontendOracle.expect(overImage)),
            item(.frontend, FuzzMessage(frames: ping, kind: .valid, note: "PING after the big messages"), FrontendOracle.expect(ping)),
        ])
        frontend.drain()

        // Backend: a HOLDING-like message of 70 MiB in two frames.
        let backend = DealerDriver(context: context, endpoint: h.backend, socket: .backend, report: report)
        let holding: [[UInt8]] = [Wire.protocolID, [Command.holding.rawValue], image, filler]
        try backend.run([
            item(.backend, FuzzMessage(frames: holding, kind: .oversized, note: "HOLDING of 70 MiB in all frames"), .silence),
            item(.backend, FuzzMessage(frames: [Wire.protocolID, [0x7E]], kind: .unknownCommand, note: "command byte 0x7e after the big message"),
                 BackendSession().expectUnknown()),
        ])
        backend.drain()

        // Store: a STORE of 70 MiB, and one whose full image is 64 MiB + 1 byte.
        var oracle = StoreOracle()
        let store = DealerDriver(context: context, endpoint: h.store, socket: .store, report: report)
        let job = maker.ulid()
        let storeBig = StoreRequest(requestID: maker.requestID(), jobID: job, sourceName: "big.jpg", pipeline: "grayscale", fullSize: corpus.photoSize,
                                    thumbnailSize: corpus.thumbnailSize, full: image, thumbnail: filler).frames()
        var padded = corpus.photo
        padded += [UInt8](repeating: 0, count: Wire.maxImageBytes + 1 - padded.count)
        let storeOver = StoreRequest(requestID: maker.requestID(), jobID: maker.ulid(), sourceName: "huge.jpg", pipeline: "grayscale", fullSize: corpus.photoSize,
                                     thumbnailSize: corpus.thumbnailSize, full: padded, thumbnail: corpus.thumbnail).frames()
        padded = []
        let storePing = Ping(requestID: maker.requestID()).frames()
        try store.run([
            item(.store, FuzzMessage(frames: storeBig, kind: .oversized, note: "STORE of 70 MiB in all frames"), .silence),
            item(.store, FuzzMessage(frames: storeOver, kind: .oversized, note: "STORE with a full image of 64 MiB + 1 byte"), oracle.expect(storeOver)),
            item(.store, FuzzMessage(frames: storePing, kind: .valid, note: "PING after the big messages"), oracle.expect(storePing)),
        ])
        store.drain()

        // One frame over ZMQ_MAXMSGSIZE, on each server socket: the peer is dropped.
        for (socket, endpoint) in [(FuzzSocket.frontend, h.frontend), (.backend, h.backend), (.store, h.store)] {
            let index = report.count(socket, .oversized)
            let peer = try ZMTPPeer(port: SystemHarness.port(of: endpoint))
            try peer.handshake(socketType: "DEALER")
            let size = Int(Wire.maxMessageSize) + 1
            var sentAll = peer.write(ZMTPPeer.longFrameHeader(size: UInt64(size)))
            let chunk = [UInt8](repeating: 0x43, count: 1 << 20)
            var left = size
            while sentAll, left > 0 {
                sentAll = peer.write(left >= chunk.count ? chunk : Array(chunk.prefix(left)))
                left -= chunk.count
            }
            if !peer.waitForClose(timeout: 5) {
                report.record(index: index, socket: socket, note: "one frame of 65 MiB + 1 byte on a raw ZMTP connection",
                              problem: "the server did not drop the connection (ZMQ_MAXMSGSIZE, section 9.2)")
            }
            peer.close()
        }
    }

    // MARK: Events

    /// A raw ZMTP SUB on the events socket, and what it asked for.
    struct Subscriber {
        var peer: ZMTPPeer
        /// Every topic it holds, as the socket holds a connection's
        /// subscriptions: once each, whatever the topic, until it
        /// unsubscribes.
        var topics: [[UInt8]] = []
        /// It sent a subscription message over the events socket's 4096
        /// bytes (`EventSubscriptions.maxMessageBytes`), which the broker
        /// drops the peer for (section 9.2 allows it).
        var tooLong = false
        var first: Int
        var notes: [String] = []

        mutating func subscribe(_ topic: [UInt8]) {
            if !topics.contains(topic) { topics.append(topic) }
        }

        mutating func unsubscribe(_ topic: [UInt8]) {
            topics.removeAll { $0 == topic }
        }

        /// The forms of the event stream it must receive (section 8): the
        /// broker publishes under `ev` and `eb`, and a subscription is a
        /// prefix, so `ev` for `ev`, `e` or everything, and the same for
        /// `eb`; any other topic matches nothing.
        var wanted: Set<[UInt8]> {
            guard !tooLong else { return [] }
            return Set([Wire.eventTopic, Wire.eventBatchTopic].filter { form in topics.contains { form.starts(with: $0) } })
        }
    }

    /// Hundreds of subscribers on the events socket, each a raw ZMTP SUB
    /// sending subscribe and unsubscribe messages only: most to topics DRK1
    /// does not define, some to `ev`, `eb` or everything, some of kilobytes,
    /// some longer than the socket's 4096 bytes. Then one job: every
    /// subscriber to a DRK1 topic
    /// gets its form of the job's events, every other gets nothing, and
    /// every one whose subscription was too long was dropped.
    func eventSubscribers(peers count: Int) throws {
        var random = FuzzRandom.stream(seed, 5)
        let port = SystemHarness.port(of: h.events)
        let topics: [[UInt8]] = [[], Wire.eventTopic, Wire.eventBatchTopic]
        let nearly: [[UInt8]] = [Array("e".utf8), Array("evx".utf8), Array("EV".utf8), Array("eb".utf8) + [0], Array("ev ".utf8), [0] + Array("ev".utf8),
                                 Array("DRK1".utf8), Array("ebb".utf8)]
        func notDRK1(_ bytes: [UInt8]) -> [UInt8] { topics.contains(bytes) ? bytes + [0x21] : bytes }
        var subscribers: [Subscriber] = []
        for _ in 0..<count {
            let peer = try ZMTPPeer(port: port)
            try peer.handshake(socketType: "SUB")
            var subscriber = Subscriber(peer: peer, first: report.nextIndex)
            if random.percent(4) {
                // Alone on its connection: ZeroMQ drops the peer.
                let index = report.count(.events, .subscription)
                // The message is the topic and one byte more.
                let topic = random.bytes(random.int(in: EventLimits.subscriptionBytes...9_000))
                peer.write(ZMTPPeer.subscription(topic))
                subscriber.tooLong = true
                subscriber.notes.append("#\(index) subscribe a topic of \(topic.count) bytes (over the events socket's \(EventLimits.subscriptionBytes))")
                subscribers.append(subscriber)
                continue
            }
            for _ in 0..<random.int(in: 1...4) {
                let index = report.count(.events, .subscription)
                let note: String
                switch random.weighted([14, 6, 40, 12, 12, 5]) {
                case 0:
                    // Each DRK1 topic at most once per subscriber: what a
                    // second subscription to the same topic means is ZeroMQ's
                    // business, not DRK1's.
                    let topic = random.pick(topics)
                    if !subscriber.topics.contains(topic) {
                        subscriber.subscribe(topic)
                        peer.write(ZMTPPeer.subscription(topic))
                    }
                    note = "subscribe '\(String(decoding: topic, as: UTF8.self))'"
                case 1 where !subscriber.topics.isEmpty:
                    let topic = subscriber.topics[random.below(subscriber.topics.count)]
                    subscriber.unsubscribe(topic)
                    peer.write(ZMTPPeer.frame([0x00] + topic))
                    note = "unsubscribe its own \(FuzzReport.show([topic]))"
                case 1, 2:
                    let topic = notDRK1(random.bytes(random.below(64)))
                    subscriber.subscribe(topic)
                    peer.write(ZMTPPeer.subscription(topic))
                    note = "subscribe a random topic of \(topic.count) bytes"
                case 3:
                    let topic = random.pick(nearly)
                    subscriber.subscribe(topic)
                    peer.write(ZMTPPeer.subscription(topic))
                    note = "subscribe \(FuzzReport.show([topic]))"
                case 4:
                    let topic = notDRK1(random.bytes(random.below(64)))
                    subscriber.unsubscribe(topic)
                    peer.write(ZMTPPeer.frame([0x00] + topic))
                    note = "unsubscribe a topic never subscribed (\(topic.count) bytes)"
                default:
                    // Within the events socket's limit; it matches nothing.
                    let topic = random.bytes(random.int(in: 64...600))
                    subscriber.subscribe(topic)
                    peer.write(ZMTPPeer.subscription(topic))
                    note = "subscribe a topic of \(topic.count) bytes"
                }
                subscriber.notes.append("#\(index) \(note)")
            }
            subscribers.append(subscriber)
        }
        try expectEvents(subscribers, after: "the job the subscribers wait for")
    }

    /// Peers that send the events socket messages that are neither a
    /// subscription nor an unsubscription: a first byte other than 0 and 1,
    /// an empty message, messages of several frames, DRK1 requests. The
    /// broker ignores them: the peers stay connected and, having
    /// subscribed to nothing, get nothing. (libzmq takes any frame of a
    /// message that starts with 0 or 1 for an unsubscription or a
    /// subscription, the later frames too, and so does the broker: a peer
    /// whose message has a later frame 01 'ev' gets EVENTs.) What each
    /// peer receives is a known issue: see `subscriptionsAfterNoise`.
    func eventNoise(peers count: Int) throws {
        var random = FuzzRandom.stream(seed, 6)
        let port = SystemHarness.port(of: h.events)
        var subscribers: [Subscriber] = []
        for _ in 0..<count {
            let peer = try ZMTPPeer(port: port)
            try peer.handshake(socketType: "SUB")
            var subscriber = Subscriber(peer: peer, first: report.nextIndex)
            for _ in 0..<random.int(in: 1...4) {
                let index = report.count(.events, .subscription)
                let note: String
                switch random.below(5) {
                case 0:
                    let body = [UInt8(random.int(in: 2...255))] + random.bytes(random.below(63))
                    peer.write(ZMTPPeer.frame(body))
                    note = "a message whose first byte is \(body[0]), neither subscribe nor unsubscribe"
                case 1:
                    peer.write(ZMTPPeer.frame([]))
                    note = "an empty message"
                case 2:
                    let frames = (0..<random.int(in: 2...3)).map { _ in [UInt8(random.int(in: 2...255))] + random.bytes(random.below(40)) }
                    peer.write(ZMTPPeer.message(frames))
                    note = "a message of \(frames.count) frames"
                case 3:
                    // A subscription to 'ev' in frame 2, and an unsubscription from 'eb',
                    // which this peer never held, in frame 3.
                    peer.write(ZMTPPeer.message([[0x02], [0x01] + Wire.eventTopic, [0x00] + Wire.eventBatchTopic]))
                    subscriber.subscribe(Wire.eventTopic)
                    subscriber.unsubscribe(Wire.eventBatchTopic)
                    note = "a message of 3 frames, the later ones 01 'ev' (a subscription) and 00 'eb'"
                default:
                    peer.write(ZMTPPeer.message(Ping(requestID: 1).frames()))
                    note = "a DRK1 PING"
                }
                subscriber.notes.append("#\(index) \(note)")
            }
            subscribers.append(subscriber)
        }
        try expectEvents(subscribers, after: "the job after the noise")
    }

    /// Waits for the subscriptions to be read, submits one job, and checks
    /// what each subscriber got (`Subscriber.wanted`), then closes them.
    func expectEvents(_ subscribers: [Subscriber], after note: String, known: String? = nil) throws {
        Thread.sleep(forTimeInterval: 0.5)
        let job = try submitOne(note: note)
        Thread.sleep(forTimeInterval: 1.5)
        func names(_ set: Set<[UInt8]>) -> String {
            set.isEmpty ? "nothing" : set.map { "'\(String(decoding: $0, as: UTF8.self))'" }.sorted().joined(separator: " and ")
        }
        for subscriber in subscribers {
            var seen: Set<[UInt8]> = []
            while let frames = subscriber.peer.readMessage(timeout: 0.005) {
                guard let topic = frames.first else { continue }
                seen.insert(topic)
                if (try? EventMessage.decode(frames)) == nil {
                    report.record(index: subscriber.first, socket: .events, note: subscriber.notes.joined(separator: "; "), frames: frames,
                                  problem: "a published message that does not decode")
                }
            }
            let open = subscriber.peer.isOpen
            if subscriber.tooLong == open {
                report.record(index: subscriber.first, socket: .events, note: subscriber.notes.joined(separator: "; "),
                              problem: subscriber.tooLong ? "a subscription over \(EventLimits.subscriptionBytes) bytes did not get the peer dropped"
                                                          : "the broker dropped the peer")
            }
            if seen != subscriber.wanted {
                report.record(index: subscriber.first, socket: .events, note: subscriber.notes.joined(separator: "; "),
                              problem: "after job \(job) this subscriber should get \(names(subscriber.wanted)), got \(names(seen))", known: known)
            }
            subscriber.peer.close()
        }
        monitor.drain(report)
    }

    /// Subscriptions from many peers that the broker reads together with a
    /// message that is not a subscription, from one more peer: each
    /// subscription still counts for the peer that sent it. The broker is
    /// held (SIGSTOP) while they are sent, so that it reads them all at once.
    func subscriptionsAfterNoise(subscribers count: Int) throws {
        let port = SystemHarness.port(of: h.events)
        let noisy = try ZMTPPeer(port: port)
        try noisy.handshake(socketType: "SUB")
        var subscribers: [Subscriber] = []
        for n in 0..<count {
            let peer = try ZMTPPeer(port: port)
            try peer.handshake(socketType: "SUB")
            subscribers.append(Subscriber(peer: peer, topics: [n % 2 == 0 ? Wire.eventTopic : Wire.eventBatchTopic], first: 0))
        }
        h.pause("broker")
        let noise = report.count(.events, .subscription)
        noisy.write(ZMTPPeer.frame([0x02] + Array("not a subscription".utf8)))
        for index in subscribers.indices {
            subscribers[index].first = report.count(.events, .subscription)
            subscribers[index].notes = ["#\(subscribers[index].first) subscribe '\(String(decoding: subscribers[index].topics[0], as: UTF8.self))', read together with message #\(noise) from another peer, 02 'not a subscription'"]
            subscribers[index].peer.write(ZMTPPeer.subscription(subscribers[index].topics[0]))
        }
        Thread.sleep(forTimeInterval: 0.2)
        h.resume("broker")
        try expectEvents(subscribers, after: "the job after subscriptions read with noise")
        noisy.close()
    }

    /// Unsubscriptions from a peer that never subscribed: section 8 says a
    /// subscriber's own subscriptions decide what it receives, so another
    /// peer's unsubscribe must not stop the events of a subscriber that
    /// still wants them.
    func strangersUnsubscribing() throws {
        let port = SystemHarness.port(of: h.events)
        var listeners: [(ZMTPPeer, [UInt8])] = []
        for topic in [Wire.eventTopic, Wire.eventBatchTopic] {
            let peer = try ZMTPPeer(port: port)
            try peer.handshake(socketType: "SUB")
            peer.write(ZMTPPeer.subscription(topic))
            listeners.append((peer, topic))
        }
        Thread.sleep(forTimeInterval: 0.3)
        let stranger = try ZMTPPeer(port: port)
        try stranger.handshake(socketType: "SUB")
        let first = report.nextIndex
        for _ in 0..<64 {
            for topic in [[], Wire.eventTopic, Wire.eventBatchTopic] {
                _ = report.count(.events, .subscription)
                stranger.write(ZMTPPeer.frame([0x00] + topic))
            }
        }
        Thread.sleep(forTimeInterval: 0.3)
        let job = try submitOne(note: "the job after a stranger's unsubscriptions")
        for (peer, topic) in listeners {
            var got = false
            let deadline = Date().addingTimeInterval(2)
            while !got, Date() < deadline {
                if let frames = peer.readMessage(timeout: 0.1) { got = frames.first == topic }
            }
            if !got {
                report.record(index: first, socket: .events,
                              note: "a peer that never subscribed unsubscribes '', 'ev' and 'eb', 64 times each (messages #\(first)…#\(report.nextIndex - 1))",
                              problem: "a subscriber to '\(String(decoding: topic, as: UTF8.self))' got no event of job \(job)")
            }
            peer.close()
        }
        stranger.close()
        monitor.drain(report)
    }

    /// Subscriptions of megabytes, as a SUB would send them: the events
    /// socket reads at most 4096 bytes of one, so ZeroMQ drops the peer
    /// before it reads the rest (section 9.2).
    func hugeSubscriptions(sizes: [Int]) throws {
        let port = SystemHarness.port(of: h.events)
        for (n, size) in sizes.enumerated() {
            let index = report.count(.events, .hugeSubscription)
            let peer = try ZMTPPeer(port: port)
            try peer.handshake(socketType: "SUB")
            if n % 2 == 1 { peer.write(ZMTPPeer.subscription(Wire.eventTopic)) }
            var topic = [UInt8](repeating: 0x65, count: size)
            topic[1] = 0x76
            peer.write(ZMTPPeer.subscription(topic))
            topic = []
            if !peer.waitForClose(timeout: 5) {
                report.record(index: index, socket: .events, note: "a subscription of \(size) bytes\(n % 2 == 1 ? " after one to 'ev'" : "")",
                              problem: "the broker did not drop the peer")
            }
            peer.close()
        }
    }

    /// One peer sends `count` subscriptions of random topics just under the
    /// events socket's limit: they match nothing the broker publishes, but
    /// the socket holds each while the peer stays, some 35 bytes per byte
    /// of topic. The broker bounds them (`EventSubscriptions.strayLimitBytes`):
    /// past the bound it drops every events connection, so the peer must be
    /// dropped, and the memory must then go back to within 10% of where it
    /// was. What it reached meanwhile is printed: ZeroMQ reads what a
    /// connection sent in one go, before the broker can count it.
    func subscriptionFlood(count: Int, pid: Int32) throws {
        var random = FuzzRandom.stream(seed, 7)
        let first = report.nextIndex
        let before = ProcessMemory.residentKiB(pid) ?? 0
        let peer = try ZMTPPeer(port: SystemHarness.port(of: h.events))
        try peer.handshake(socketType: "SUB")
        var peak = before
        for n in 0..<count {
            _ = report.count(.events, .subscription)
            peer.write(ZMTPPeer.subscription(random.bytes(4_000)))
            if n % 20 == 19 { peak = max(peak, ProcessMemory.residentKiB(pid) ?? 0) }
        }
        let dropped = peer.waitForClose(timeout: 5)
        peak = max(peak, ProcessMemory.residentKiB(pid) ?? 0)
        peer.close()
        let note = "one peer's \(count) subscriptions of 4000 random bytes (messages #\(first)…#\(report.nextIndex - 1))"
        if !dropped {
            report.record(index: first, socket: .events, note: note, problem: "the broker did not drop the peer (section 9.2: stray subscriptions are bounded)")
        }
        // The broker hands freed memory back every 2 s.
        var after = ProcessMemory.residentKiB(pid) ?? 0
        let deadline = Date().addingTimeInterval(8)
        while Double(after) > Double(before) * 1.10, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.5)
            after = ProcessMemory.residentKiB(pid) ?? 0
        }
        print("fuzz: subscription flood: broker \(before) KiB before, \(peak) KiB at most, \(after) KiB after the drop")
        if Double(after) > Double(before) * 1.10 {
            report.record(index: first, socket: .events, note: note, problem: "the broker held \(after) KiB after dropping the peer, \(before) KiB before")
        }
    }

    /// After everything: a new subscriber to each form still gets events.
    func eventsStillPublished() throws {
        let port = SystemHarness.port(of: h.events)
        var peers: [(ZMTPPeer, [UInt8])] = []
        for topic in [Wire.eventTopic, Wire.eventBatchTopic] {
            let peer = try ZMTPPeer(port: port)
            try peer.handshake(socketType: "SUB")
            peer.write(ZMTPPeer.subscription(topic))
            peers.append((peer, topic))
        }
        Thread.sleep(forTimeInterval: 0.3)
        let job = try submitOne(note: "the job after the events fuzz")
        for (peer, topic) in peers {
            var got = false
            let deadline = Date().addingTimeInterval(3)
            while !got, Date() < deadline {
                if let frames = peer.readMessage(timeout: 0.1), frames.first == topic { got = (try? EventMessage.decode(frames)) != nil }
            }
            if !got {
                report.record(index: nil, socket: .events, note: "a new subscriber to '\(String(decoding: topic, as: UTF8.self))' after the fuzz",
                              problem: "got no event of job \(job)")
            }
            peer.close()
        }
    }

    /// Submits one small job on a connection of its own and returns its id.
    func submitOne(note: String) throws -> String {
        let dealer = try context.socket(.dealer)
        defer { dealer.close() }
        try dealer.setLinger(milliseconds: 0)
        try dealer.setReceiveTimeout(milliseconds: 10_000)
        try dealer.connect(h.frontend)
        try dealer.send(Submit(requestID: 1, priority: 9, options: JobOptions(thumbnailWidth: 16, thumbnailHeight: 16, quality: 80, thumbnailQuality: 70),
                               pipeline: "grayscale", sourceName: "trigger.jpg", image: corpus.photo).frames())
        guard let frames = try dealer.receive(), case .accepted(let accepted)? = try? FrontendMessage.decode(frames) else {
            throw HarnessError("\(note): the broker did not accept it")
        }
        return accepted.jobID.description
    }

    // MARK: Raw ZMTP

    /// One raw ZMTP case: what it sends, and whether the server must close
    /// the connection for it.
    struct ZMTPCase {
        var name: String
        var mustClose: Bool
        var send: (ZMTPPeer, String) -> Void
    }

    static var zmtpCases: [ZMTPCase] {
        func handshake(_ peer: ZMTPPeer, _ type: String) {
            peer.write(ZMTPPeer.greeting() + ZMTPPeer.ready([("Socket-Type", Array(type.utf8))]))
        }
        return [
            ZMTPCase(name: "greeting with mechanism PLAIN", mustClose: true) { peer, type in
                peer.write(ZMTPPeer.greeting(mechanism: "PLAIN") + ZMTPPeer.ready([("Socket-Type", Array(type.utf8))]))
            },
            ZMTPCase(name: "greeting with mechanism CURVE", mustClose: true) { peer, _ in peer.write(ZMTPPeer.greeting(mechanism: "CURVE")) },
            ZMTPCase(name: "greeting with mechanism 'null' in lower case", mustClose: true) { peer, _ in peer.write(ZMTPPeer.greeting(mechanism: "null")) },
            ZMTPCase(name: "an HTTP request", mustClose: false) { peer, _ in
                peer.write(Array("GET / HTTP/1.1\r\nHost: darkroom\r\nUpgrade: websocket\r\n\r\n".utf8))
            },
            ZMTPCase(name: "64 bytes of 0xFF", mustClose: false) { peer, _ in peer.write([UInt8](repeating: 0xFF, count: 64)) },
            ZMTPCase(name: "greeting of version 3.1", mustClose: false) { peer, type in
                peer.write(ZMTPPeer.greeting(minor: 1) + ZMTPPeer.ready([("Socket-Type", Array(type.utf8))]))
            },
            ZMTPCase(name: "greeting of version 9.9", mustClose: false) { peer, type in
                peer.write(ZMTPPeer.greeting(major: 9, minor: 9) + ZMTPPeer.ready([("Socket-Type", Array(type.utf8))]))
            },
            ZMTPCase(name: "greeting of version 2.0", mustClose: false) { peer, _ in peer.write(ZMTPPeer.greeting(major: 2)) },
            ZMTPCase(name: "greeting cut after 11 bytes", mustClose: false) { peer, _ in peer.write(Array(ZMTPPeer.greeting().prefix(11))) },
            ZMTPCase(name: "greeting with as-server 1", mustClose: false) { peer, type in
                peer.write(ZMTPPeer.greeting(asServer: 1) + ZMTPPeer.ready([("Socket-Type", Array(type.utf8))]))
            },
            ZMTPCase(name: "READY with Socket-Type PUB", mustClose: true) { peer, _ in
                peer.write(ZMTPPeer.greeting() + ZMTPPeer.ready([("Socket-Type", Array("PUB".utf8))]))
            },
            ZMTPCase(name: "READY whose property length runs past the command", mustClose: true) { peer, _ in
                let data: [UInt8] = [11] + Array("Socket-Type".utf8) + [0xFF, 0xFF, 0xFF, 0xF0] + Array("DEALER".utf8)
                peer.write(ZMTPPeer.greeting() + ZMTPPeer.command("READY", data))
            },
            ZMTPCase(name: "READY without properties", mustClose: false) { peer, _ in peer.write(ZMTPPeer.greeting() + ZMTPPeer.ready([])) },
            ZMTPCase(name: "a message frame where READY belongs", mustClose: false) { peer, _ in
                peer.write(ZMTPPeer.greeting() + ZMTPPeer.message([Wire.protocolID, [0x02], .bigEndian64(1)]))
            },
            ZMTPCase(name: "a frame with the reserved flag bits set", mustClose: false) { peer, type in
                handshake(peer, type)
                peer.write([0xF0, 4] + Wire.protocolID)
            },
            ZMTPCase(name: "a long frame claiming 2^62 bytes", mustClose: true) { peer, type in
                handshake(peer, type)
                peer.write(ZMTPPeer.longFrameHeader(size: 1 << 62) + [1, 2, 3])
            },
            ZMTPCase(name: "a frame claiming 1000 bytes, 10 sent, then the connection closed", mustClose: false) { peer, type in
                handshake(peer, type)
                peer.write(ZMTPPeer.longFrameHeader(size: 1000) + [UInt8](repeating: 7, count: 10))
            },
            ZMTPCase(name: "frames with MORE, then the connection closed mid-message", mustClose: false) { peer, type in
                handshake(peer, type)
                peer.write(ZMTPPeer.frame(Wire.protocolID, more: true) + ZMTPPeer.frame([0x10], more: true) + ZMTPPeer.frame(.bigEndian64(9), more: true))
            },
            ZMTPCase(name: "an unknown command XYZZY", mustClose: false) { peer, type in
                handshake(peer, type)
                peer.write(ZMTPPeer.command("XYZZY", [1, 2, 3]))
            },
            ZMTPCase(name: "a command frame with MORE set", mustClose: false) { peer, type in
                handshake(peer, type)
                peer.write([0x05, 6, 5] + Array("READY".utf8))
            },
            ZMTPCase(name: "a second READY", mustClose: false) { peer, type in
                handshake(peer, type)
                peer.write(ZMTPPeer.ready([("Socket-Type", Array(type.utf8))]))
            },
        ]
    }

    /// Every raw ZMTP case against every server socket; each server must
    /// close the connection where ZMTP says it must, and go on serving.
    func rawZMTP() throws {
        let endpoints: [(FuzzSocket, String, String)] = [(.frontend, h.frontend, "DEALER"), (.backend, h.backend, "DEALER"),
                                                         (.store, h.store, "DEALER"), (.events, h.events, "SUB")]
        for (socket, endpoint, type) in endpoints {
            for entry in FuzzRun.zmtpCases {
                let index = report.count(socket, .zmtp)
                let peer = try ZMTPPeer(port: SystemHarness.port(of: endpoint))
                entry.send(peer, type)
                if entry.mustClose {
                    if !peer.waitForClose(timeout: 5) {
                        report.record(index: index, socket: socket, note: "raw ZMTP: \(entry.name)", problem: "the server did not close the connection")
                    }
                } else {
                    _ = peer.waitForClose(timeout: 0.05)
                }
                peer.close()
            }
            // The raw peer itself speaks ZMTP correctly: a PING gets its PONG.
            if socket == .frontend || socket == .store {
                let index = report.count(socket, .zmtp)
                let peer = try ZMTPPeer(port: SystemHarness.port(of: endpoint))
                try peer.handshake(socketType: "DEALER")
                peer.write(ZMTPPeer.message(Ping(requestID: 77).frames()))
                let reply = peer.readMessage(timeout: 5)
                if reply != Pong(requestID: 77).frames() {
                    report.record(index: index, socket: socket, note: "raw ZMTP: a PING after a correct handshake",
                                  problem: "expected PONG id 77, got \(reply.map { FuzzReport.show($0) } ?? "nothing")")
                }
                peer.close()
            }
        }
    }

    /// Each server still answers: PING on the frontend and the store, an
    /// unknown command on the backend.
    func serversAnswer(_ when: String, sockets: Set<FuzzSocket> = [.frontend, .backend, .store]) throws {
        for (socket, endpoint) in [(FuzzSocket.frontend, h.frontend), (.store, h.store)] where sockets.contains(socket) {
            let driver = DealerDriver(context: context, endpoint: endpoint, socket: socket, report: report)
            driver.patience = 5
            let ping = Ping(requestID: 0xA11_7E).frames()
            try driver.run([item(socket, FuzzMessage(frames: ping, kind: .valid, note: "PING \(when)"), Expectation(.reply(.pong, requestID: 0xA11_7E)))])
            driver.drain()
        }
        guard sockets.contains(.backend) else { return }
        let backend = DealerDriver(context: context, endpoint: h.backend, socket: .backend, report: report)
        backend.patience = 5
        try backend.run([item(.backend, FuzzMessage(frames: [Wire.protocolID, [0x7E]], kind: .unknownCommand, note: "command byte 0x7e \(when)"),
                              BackendSession().expectUnknown())])
        backend.drain()
    }
}

extension BackendSession {
    /// The answer to the unknown command 0x7E, the socket thread's delimiter.
    func expectUnknown() -> Expectation {
        var copy = self
        return copy.expect([Wire.protocolID, [0x7E]])
    }
}

/// The darkroom broker's limit on a subscription message (section 9.2:
/// the broker MAY drop a peer whose subscription message is longer than
/// 4096 bytes; the darkroom broker does, through ZMQ_MAXMSGSIZE).
enum EventLimits {
    static let subscriptionBytes = 4_096
}

/// A subscriber to both forms of the event stream for the whole run, with
/// a libzmq SUB (its topics are two bytes): every message the broker
/// publishes must decode, and seqs must increase in each form.
final class EventMonitor {
    let socket: Socket
    private(set) var messages = 0
    private var lastEvent: UInt64 = 0
    private var lastBatch: UInt64 = 0

    init(context: Context, endpoint: String) throws {
        socket = try context.socket(.sub)
        try socket.setLinger(milliseconds: 0)
        try socket.setReceiveHighWaterMark(1_000_000)
        try socket.subscribe(Wire.eventTopic)
        try socket.subscribe(Wire.eventBatchTopic)
        try socket.connect(endpoint)
    }

    func drain(_ report: FuzzReport) {
        while let frames = (try? socket.receive(dontWait: true)) ?? nil {
            messages += 1
            do {
                let message = try EventMessage.decode(frames)
                let seqs = message.events.map(\.seq)
                let last = message.command == .event ? lastEvent : lastBatch
                if let first = seqs.first, first <= last {
                    report.record(index: nil, socket: .events, note: "the event stream", frames: frames,
                                  problem: "\(message.command.name) seq \(first) after seq \(last)")
                }
                if message.command == .event { lastEvent = seqs.last ?? lastEvent } else { lastBatch = seqs.last ?? lastBatch }
            } catch {
                report.record(index: nil, socket: .events, note: "the event stream", frames: frames, problem: "a published message that does not decode: \(error)")
            }
        }
    }

    func close() { socket.close() }
}
