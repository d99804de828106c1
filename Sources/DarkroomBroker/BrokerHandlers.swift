import DarkroomCore
import DarkroomPipeline
import DarkroomProtocol
import DarkroomZMQ

// The loop's message handlers. Each runs inside the turn's open transaction;
// replies that depend on a write are queued in `pending…` and sent by
// `finishTurn()` after the commit. Replies that depend on nothing durable
// (ERROR, PONG, REJECTED) go out at once.

extension BrokerLoop {
    // MARK: Frontend

    /// `role` is the ZAP user id of the client's connection: its key's role,
    /// nil when the frontend runs without keys.
    func handleFrontend(_ frames: [[UInt8]], role: String? = nil) {
        guard let identity = frames.first, frames.count >= 1 else { return }
        let body = Array(frames.dropFirst())
        let message: FrontendMessage
        do {
            message = try FrontendMessage.decode(body)
        } catch {
            rejectMalformed(body, error, socket: "frontend", identity: identity) { self.sendFrontendNow(identity, $0) }
            return
        }
        if let role, Permissions.requests.contains(message.command), !Permissions.allows(role: role, message.command) {
            let reason = Permissions.refusal(role: role, message.command)
            logger.warn("frontend: client \(peerName(identity)) refused: \(reason)")
            if case .submit(let submit) = message {
                reject(submit, identity, .forbidden, reason)
            } else {
                sendFrontendNow(identity, ErrorReply(requestID: message.requestIDForError ?? 0, code: .forbidden, reason: reason).frames())
            }
            return
        }
        switch message {
        case .submit(let submit):
            handleSubmit(submit, from: identity)
        case .ping(let ping):
            sendFrontendNow(identity, Pong(requestID: ping.requestID).frames())
        case .status, .replay, .deadList:
            pendingReads.append((identity, message))
        case .deadRetry(let request):
            handleDeadRetry(request, from: identity)
        case .deadDiscard(let request):
            handleDeadDiscard(request, from: identity)
        case .error(let error):
            logger.warn("frontend: client \(peerName(identity)) sent ERROR \(error.code) for request \(error.requestID): \(error.reason)")
        case .accepted, .rejected, .statusReply, .replayEnd, .event, .deadListReply, .pong, .ok:
            let reason = "\(message.command.name) is sent by the broker, not to it"
            logger.warn("frontend: client \(peerName(identity)) command 0x\(String(message.command.rawValue, radix: 16)): \(reason)")
            sendFrontendNow(identity, ErrorReply(requestID: 0, code: .unexpectedCommand, reason: reason).frames())
        }
    }

    /// Logs a message that did not decode and answers it with ERROR (never an ERROR with an ERROR).
    func rejectMalformed(_ body: [[UInt8]], _ error: ProtocolError, socket: String, identity: [UInt8], send: ([[UInt8]]) -> Void) {
        let commandByte = body.count > 1 && body[1].count == 1 ? "0x" + String(body[1][0], radix: 16) : "none"
        logger.warn("\(socket): bad message from \(peerName(identity)), command \(commandByte): \(error.code): \(error.reason)")
        if body.count > 1, body[1] == [Command.error.rawValue] { return }
        send(Wire.errorReply(to: body, for: error).frames())
    }

    func sendFrontendNow(_ identity: [UInt8], _ frames: [[UInt8]]) {
        do {
            try frontend.send([identity] + frames, dontWait: true)
        } catch {
            logger.warn("reply to client \(peerName(identity)) not sent: \(error)")
        }
    }

    private func reject(_ submit: Submit, _ identity: [UInt8], _ code: ErrorCode, _ reason: String) {
        logger.debug("rejected submit \(submit.requestID) from \(peerName(identity)): \(code): \(reason)")
        sendFrontendNow(identity, Rejected(requestID: submit.requestID, code: code, reason: reason).frames())
    }

    private func handleSubmit(_ submit: Submit, from identity: [UInt8]) {
        if stopDeadline != nil {
            return reject(submit, identity, .shuttingDown, "the broker is shutting down; submit again when it is back")
        }
        if submit.image.count > config.maxImageBytes {
            return reject(submit, identity, .tooLarge, "image is \(submit.image.count) bytes; the limit is \(config.maxImageBytes)")
        }
        guard submit.image.count >= 2, submit.image[0] == 0xFF, submit.image[1] == 0xD8 else {
            return reject(submit, identity, .invalidImage, "image is not a JPEG (it does not start with the FF D8 marker)")
        }
        let canonical: String
        do {
            canonical = try pipelines.parse(submit.pipeline).canonical
        } catch {
            return reject(submit, identity, .invalidPipeline, error.summary)
        }
        if let key = submit.submitKey {
            do {
                if let (job, seq) = try queue.acceptedJob(forKey: key) {
                    // A resend of a SUBMIT already accepted: the same job again.
                    pendingAccepted.append((identity, Accepted(requestID: submit.requestID, jobID: job, eventSeq: seq)))
                    return
                }
            } catch {
                logger.error("cannot look up submit key of request \(submit.requestID): \(error)")
                return reject(submit, identity, .internal, "the broker could not check the submit key: \(error)")
            }
        }
        let depth = ready.depth
        if depth >= config.maxQueueDepth {
            return reject(submit, identity, .queueFull,
                          "queue is full: \(depth) jobs waiting, the limit is \(config.maxQueueDepth); submit again later")
        }
        let now = wallNow()
        let id = ids.next()
        let job = JobHandle(id: id, priority: submit.priority, source: submit.sourceName)
        do {
            try queue.insert(job, options: submit.options, pipeline: canonical, image: submit.image, created: now)
            let event = try record(.accepted, job, attempt: 0, now: now)
            if let key = submit.submitKey {
                try queue.recordSubmitKey(key, job: job, eventSeq: event.seq, time: now)
            }
            ready.add(job, now: now)
            pendingAccepted.append((identity, Accepted(requestID: submit.requestID, jobID: id, eventSeq: event.seq)))
            pendingRates.accepted += 1
        } catch {
            logger.error("cannot queue submit \(submit.requestID): \(error)")
            reject(submit, identity, .internal, "the broker could not store the job: \(error)")
        }
    }

    private func handleDeadRetry(_ request: DeadRetry, from identity: [UInt8]) {
        handleDead(request.target, requestID: request.requestID, from: identity, command: "DEAD-RETRY", verb: "revived") { job, attempt, now in
            try queue.revive(job.id)
            try record(.revived, job, attempt: attempt + 1, now: now)
            ready.add(job, now: now)
        }
    }

    private func handleDeadDiscard(_ request: DeadDiscard, from identity: [UInt8]) {
        handleDead(request.target, requestID: request.requestID, from: identity, command: "DEAD-DISCARD", verb: "discarded") { job, attempt, now in
            if let file = try queue.discard(job.id) { pendingFileRemovals.append(file) }
            try record(.discarded, job, attempt: attempt, now: now)
        }
    }

    /// What DEAD-RETRY and DEAD-DISCARD share: finds the dead jobs `target`
    /// names, applies `each` to every one (with its last attempt), and
    /// answers OK with their count after the commit; ERROR `not-found` when
    /// a single job was named and it is not dead.
    private func handleDead(_ target: DeadTarget, requestID: UInt64, from identity: [UInt8], command: String, verb: String,
                            _ each: (JobHandle, UInt32, UInt64) throws -> Void) {
        do {
            let targets = try queue.deadHandles(target)
            if case .job(let id) = target, targets.isEmpty {
                sendFrontendNow(identity, ErrorReply(requestID: requestID, code: .notFound, reason: "job \(id) is not dead").frames())
                return
            }
            let now = wallNow()
            for (job, attempt) in targets {
                try each(job, attempt, now)
            }
            deadCount = max(0, deadCount - targets.count)
            if !targets.isEmpty { logger.info("\(verb) \(targets.count) dead job(s)") }
            pendingReplies.append((identity, requestID, OKReply(requestID: requestID, count: UInt64(targets.count)).frames()))
        } catch {
            logger.error("\(command) failed: \(error)")
            sendFrontendNow(identity, ErrorReply(requestID: requestID, code: .internal, reason: "\(error)").frames())
        }
    }

    /// Answers STATUS, REPLAY and DEAD-LIST from committed state (after the turn's commit).
    func answerRead(_ identity: [UInt8], _ message: FrontendMessage) {
        switch message {
        case .status(let request):
            sendFrontendNow(identity, StatusReply(requestID: request.requestID, status: status()).frames())
        case .replay(let request):
            let limit = request.limit == 0 ? config.replayBatchLimit : min(Int(request.limit), config.replayBatchLimit)
            let from = max(request.fromSeq, 1)
            do {
                let replayed = try queue.events(from: from, limit: max(1, limit))
                for event in replayed {
                    sendFrontendNow(identity, event.frames())
                }
                let last = replayed.last?.seq ?? (from - 1)
                sendFrontendNow(identity, ReplayEnd(requestID: request.requestID, lastSeq: last, headSeq: queue.committedSeq).frames())
            } catch {
                logger.error("REPLAY failed: \(error)")
                sendFrontendNow(identity, ErrorReply(requestID: request.requestID, code: .internal, reason: "\(error)").frames())
            }
        case .deadList(let request):
            do {
                let list = try queue.deadList(limit: Int(request.limit), after: request.after)
                sendFrontendNow(identity, DeadListReply(requestID: request.requestID, list: list).frames())
            } catch {
                logger.error("DEAD-LIST failed: \(error)")
                sendFrontendNow(identity, ErrorReply(requestID: request.requestID, code: .internal, reason: "\(error)").frames())
            }
        default:
            break
        }
    }

    func status() -> BrokerStatus {
        let now = wallNow()
        let workerList = workers.values.sorted { $0.id < $1.id }.map { worker in
            WorkerStatus(id: worker.id, host: worker.host, pid: worker.pid, slots: worker.slots,
                         busy: UInt32(clamping: worker.jobs.count), credit: UInt32(clamping: max(0, worker.credit)),
                         lastHeartbeat: worker.lastHeard)
        }
        return BrokerStatus(
            time: now, eventSeq: queue.committedSeq,
            queue: QueueStatus(ready: ready.readyCounts, delayed: UInt64(ready.delayedCount), inFlight: UInt64(leases.count),
                               dead: UInt64(max(0, deadCount)), limit: UInt64(max(0, config.maxQueueDepth))),
            workers: workerList, rates: rates.rates(now: now))
    }

    // MARK: Backend

    func handleBackend(_ frames: [[UInt8]]) {
        guard let identity = frames.first else { return }
        let body = Array(frames.dropFirst())
        let message: BackendMessage
        do {
            message = try BackendMessage.decode(body)
        } catch {
            rejectMalformed(body, error, socket: "backend", identity: identity) { self.sendBackendNow(identity, $0) }
            return
        }
        let workerID = workerByIdentity[identity]
        if let workerID, let worker = workers[workerID] {
            worker.lastReceived = monotonicNow()
            worker.lastHeard = wallNow()
        }
        do {
            switch message {
            case .ready(let ready):
                try handleReady(ready, identity: identity)
            case .disconnect:
                guard let workerID else { return }
                logger.info("worker \(workerID) disconnected")
                try dropWorker(workerID, reason: "worker \(workerID) disconnected")
            case .error(let error):
                logger.warn("backend: worker \(workerID ?? peerName(identity)) sent ERROR \(error.code): \(error.reason)")
            case .job:
                let reason = "JOB is sent by the broker, not to it"
                logger.warn("backend: \(workerID ?? peerName(identity)) command 0x22: \(reason)")
                sendBackendNow(identity, ErrorReply(requestID: 0, code: .unexpectedCommand, reason: reason).frames())
            case .credit, .done, .fail, .heartbeat, .holding:
                guard let workerID else {
                    // A worker the broker does not know (declared dead, or from before a restart).
                    logger.debug("backend: \(message.command.name) from unknown worker \(peerName(identity)); sending DISCONNECT")
                    sendBackendNow(identity, BackendMessage.disconnect.frames())
                    return
                }
                switch message {
                case .credit(let credit): handleCredit(credit, workerID: workerID)
                case .done(let done): try handleDone(done, workerID: workerID)
                case .fail(let fail): try handleFail(fail, workerID: workerID)
                default: break
                }
            }
        } catch {
            logger.error("backend: \(message.command.name) from \(workerID ?? peerName(identity)) failed: \(error)")
        }
    }

    func sendBackendNow(_ identity: [UInt8], _ frames: [[UInt8]]) {
        do {
            try backend.send([identity] + frames, dontWait: true)
        } catch {
            logger.warn("message to worker \(peerName(identity)) not sent: \(error)")
        }
    }

    private func handleReady(_ ready: Ready, identity: [UInt8]) throws {
        if let previous = workerByIdentity[identity] {
            logger.warn("worker \(previous) sent READY again on the same connection; starting it afresh")
            try dropWorker(previous, reason: "worker \(previous) sent READY again")
        }
        if workers[ready.workerID] != nil {
            logger.info("worker \(ready.workerID) reconnected; its earlier jobs are requeued")
            try dropWorker(ready.workerID, reason: "worker \(ready.workerID) reconnected")
        }
        let now = monotonicNow()
        workers[ready.workerID] = WorkerState(id: ready.workerID, identity: identity, host: ready.host, pid: ready.pid,
                                              slots: ready.slots, lastReceived: now, lastSent: now, lastHeard: wallNow())
        workerByIdentity[identity] = ready.workerID
        logger.info("worker \(ready.workerID) ready: host \(ready.host), pid \(ready.pid), \(ready.slots) slot(s)")
    }

    private func handleCredit(_ credit: Credit, workerID: String) {
        guard let worker = workers[workerID] else { return }
        let room = max(0, Int(worker.slots) - worker.jobs.count)
        let granted = worker.credit + Int(credit.count)
        if granted > room {
            logger.warn("worker \(workerID) granted credit \(granted) with \(worker.jobs.count) of \(worker.slots) slot(s) busy; using \(room)")
        }
        worker.credit = min(granted, room)
    }

    /// The lease a DONE or FAIL refers to, if it is the job's current one and held by this worker.
    private func currentLease(_ jobID: ULID, attempt: UInt32, workerID: String, command: String) -> Lease? {
        guard let lease = leases[jobID], lease.worker == workerID, lease.attempt == attempt else {
            let current = leases[jobID].map { "attempt \($0.attempt) on \($0.worker)" } ?? "not leased"
            logger.debug("ignored stale \(command) for job \(jobID) attempt \(attempt) from \(workerID) (\(current))")
            return nil
        }
        return lease
    }

    private func release(_ lease: Lease) {
        leases[lease.job.id] = nil
        if let worker = workers[lease.worker] {
            worker.jobs.remove(lease.job.id)
        }
    }

    private func handleDone(_ done: Done, workerID: String) throws {
        guard let lease = currentLease(done.jobID, attempt: done.attempt, workerID: workerID, command: "DONE") else { return }
        let now = wallNow()
        if let file = try queue.removeStored(lease) {
            pendingFileRemovals.append(file)
        }
        try record(.stored, lease.job, attempt: lease.attempt, now: now, worker: workerID, record: done.recordID)
        release(lease)
        pendingRates.stored += 1
    }

    private func handleFail(_ fail: Fail, workerID: String) throws {
        guard let lease = currentLease(fail.jobID, attempt: fail.attempt, workerID: workerID, command: "FAIL") else { return }
        release(lease)
        let immediate = fail.failure.code == FailureDetail.Code.workerShutdown
        try retryOrBury(lease, failure: fail.failure, retryable: fail.retryable, immediate: immediate, now: wallNow())
    }

    /// Requeues every job leased to the worker at once and forgets the worker.
    func dropWorker(_ workerID: String, reason: String) throws {
        guard let worker = workers.removeValue(forKey: workerID) else { return }
        if workerByIdentity[worker.identity] == workerID { workerByIdentity[worker.identity] = nil }
        let now = wallNow()
        for jobID in worker.jobs.sorted() {
            guard let lease = leases.removeValue(forKey: jobID) else { continue }
            try retryOrBury(lease, failure: FailureDetail(code: FailureDetail.Code.workerLost, reason: reason),
                            retryable: true, immediate: true, now: now)
        }
    }

    /// Records a failed attempt, then requeues the job (retryable, attempts
    /// left) or moves it to the dead-letter set. The lease must already be released.
    func retryOrBury(_ lease: Lease, failure: FailureDetail, retryable: Bool, immediate: Bool, now: UInt64) throws {
        try record(.failed, lease.job, attempt: lease.attempt, now: now, worker: lease.worker, failure: failure)
        pendingRates.failed += 1
        let used = Int(lease.attempt) - Int(lease.attemptBase)
        if retryable && used < config.maxAttempts {
            let delay = immediate ? 0 : backoff(afterAttempt: used)
            let notBefore = delay > 0 ? now + delay : 0
            try queue.requeue(lease.job, notBefore: notBefore, failure: failure)
            let when = delay > 0 ? "attempt \(lease.attempt + 1) in \(Double(delay) / 1_000) s" : "attempt \(lease.attempt + 1) now"
            let retry = FailureDetail(stepIndex: failure.stepIndex, step: failure.step, code: failure.code, reason: "\(when): \(failure.reason)")
            try record(.retrying, lease.job, attempt: lease.attempt + 1, now: now, failure: retry)
            ready.add(lease.job, notBefore: notBefore, now: now)
        } else {
            var last = failure
            if retryable {
                last.reason = "gave up after \(used) attempt(s): \(failure.reason)"
            }
            try queue.markDead(lease.job.id, failure: last, time: now)
            try record(.dead, lease.job, attempt: lease.attempt, now: now, worker: lease.worker, failure: last)
            deadCount += 1
            logger.info("job \(lease.job.id) is dead: \(last.summary)")
        }
    }

    /// Exponential backoff in ms: base × 2^(n−1), capped, times 1 ± jitter.
    func backoff(afterAttempt attempts: Int) -> UInt64 {
        let base = Double(config.retryBackoffBase.milliseconds)
        let cap = Double(config.retryBackoffCap.milliseconds)
        let exponent = Double(max(0, min(attempts - 1, 40)))
        let raw = min(cap, base * pow2(exponent))
        let jitter = max(0, min(1, config.retryJitter))
        let factor = jitter > 0 ? Double.random(in: (1 - jitter)...(1 + jitter)) : 1
        return UInt64(max(0, raw * factor))
    }

    private func pow2(_ exponent: Double) -> Double {
        var value = 1.0
        var n = Int(exponent)
        while n > 0 { value *= 2; n -= 1 }
        return value
    }

    // MARK: Liveness and dispatch

    /// Declares dead every worker silent for the liveness period.
    func checkWorkers(now: UInt64) throws {
        let monotonic = monotonicNow()
        let limit = UInt64(config.livenessMilliseconds)
        let silent = workers.values.filter { monotonic &- $0.lastReceived > limit }.map(\.id)
        for id in silent.sorted() {
            logger.warn("worker \(id) silent for over \(limit) ms; declared dead, requeuing its \(workers[id]?.jobs.count ?? 0) job(s)")
            try dropWorker(id, reason: "worker \(id) stopped answering (no message for \(limit) ms)")
        }
    }

    /// Hands ready jobs to workers with credit, one per worker per round.
    func dispatch(now: UInt64) throws {
        guard ready.hasReady else { return }
        var candidates = workers.values.filter { $0.credit > 0 }.map(\.id).sorted()
        guard !candidates.isEmpty else { return }
        dispatchRotation = (dispatchRotation + 1) % candidates.count
        candidates = Array(candidates[dispatchRotation...] + candidates[..<dispatchRotation])
        while ready.hasReady && !candidates.isEmpty {
            var stillHungry: [String] = []
            for workerID in candidates {
                guard let worker = workers[workerID], worker.credit > 0 else { continue }
                guard let next = ready.pop() else { break }
                guard let row = try queue.lease(next, worker: workerID) else { continue }
                worker.credit -= 1
                worker.jobs.insert(next.id)
                leases[next.id] = Lease(job: row.handle, attempt: row.attempt, attemptBase: row.attemptBase, worker: workerID,
                                        inputFile: row.inputFile, rowID: row.rowID)

                try record(.started, row.handle, attempt: row.attempt, now: now, worker: workerID)
                pendingJobs.append((workerID, JobDispatch(jobID: next.id, attempt: row.attempt, options: row.options,
                                                          pipeline: row.pipeline, sourceName: row.handle.source, image: row.image)))
                if worker.credit > 0 { stillHungry.append(workerID) }
            }
            candidates = stillHungry
        }
    }
}
