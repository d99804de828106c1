import DarkroomCore
import DarkroomProtocol

// What the core does with each input: SUBMITs (queued at once, or parked
// while their input is written to a file), the dead-letter requests, the
// reads answered after the commit, and the workers' messages. Each change
// goes through `apply`, one transition at a time.

extension BrokerCore {
    // MARK: Inputs

    func handle(_ input: CoreInput, now: Moment) {
        switch input {
        case let .submit(submit, pipeline, client):
            if !handleSubmit(submit, pipeline: pipeline, client: client, now: now) {
                backlog.remove(submit.image.count)
            }
        case let .deadRetry(request, client):
            handleDead(request.target, requestID: request.requestID, client: client, revive: true, now: now)
        case let .deadDiscard(request, client):
            handleDead(request.target, requestID: request.requestID, client: client, revive: false, now: now)
        case let .cancel(request, client):
            handleCancel(request, client: client, now: now)
        case let .pause(paused, requestID, client):
            handlePause(paused, requestID: requestID, client: client, now: now)
        case let .read(message, client):
            reads.append((client, message))
        case let .backend(message, connection):
            turnFacts.append(input)
            handleBackend(message, connection: connection, now: now)
        case let .silent(connection, silence):
            turnFacts.append(input)
            guard let worker = state.workerID(for: connection) else { return }
            logger.warn("worker \(worker) silent for \(silence) ms; declared dead, requeuing its \(state.workers[worker]?.jobs.count ?? 0) job(s)")
            loseWorker(worker, reason: "worker \(worker) stopped answering (no message for \(silence) ms)", now: now)
        case let .revoked(connection):
            turnFacts.append(input)
            guard let worker = state.workerID(for: connection) else { return }
            // Nothing about its jobs failed: they go back uncounted.
            logger.warn("worker \(worker) dropped: its key was revoked; requeuing its \(state.workers[worker]?.jobs.count ?? 0) job(s), uncounted")
            loseWorker(worker, reason: "worker \(worker) was dropped: its key was revoked", counted: false, now: now)
        case let .written(job, failure):
            finishParked(job, failure: failure, now: now)
        }
    }

    // MARK: Submits

    func refuse(_ client: [UInt8], _ requestID: UInt64, _ code: ErrorCode, _ reason: String) {
        logger.debug("refused submit \(requestID): \(code): \(reason)")
        delivery.frontend.append((client, Rejected(requestID: requestID, code: code, reason: Wire.line(reason)).frames()))
    }

    /// Queues a SUBMIT, or parks it while its input is written to a file.
    /// Returns true when it was parked (its bytes are still held).
    func handleSubmit(_ submit: Submit, pipeline: String, client: [UInt8], now: Moment) -> Bool {
        if stopDeadline != nil {
            refuse(client, submit.requestID, .shuttingDown, "the broker is shutting down; submit again when it is back")
            return false
        }
        if let key = submit.submitKey {
            if let job = parkedKeys[key] {
                parked[job]?.clients.append((client, submit.requestID))
                return false
            }
            do {
                if let (job, seq) = try store.acceptedJob(forKey: key) {
                    // A resend of a SUBMIT already accepted: the same job again.
                    awaiting.append((client, submit.requestID, Accepted(requestID: submit.requestID, jobID: job, eventSeq: seq).frames(), true))
                    return false
                }
            } catch {
                logger.error("cannot look up the submit key of request \(submit.requestID): \(error)")
                refuse(client, submit.requestID, .internal, "the broker could not check the submit key: \(error)")
                return false
            }
        }
        let depth = state.depth + parked.count
        if depth >= config.maxQueueDepth {
            refuse(client, submit.requestID, .queueFull,
                   "queue is full: \(depth) jobs waiting, the limit is \(config.maxQueueDepth); submit again later")
            return false
        }
        let id = ids.next()
        let bytes = submit.image.count
        if bytes > config.inputBlobThreshold {
            var header = submit
            header.image = []
            parked[id] = Parked(submit: header, pipeline: pipeline, bytes: bytes, clients: [(client, submit.requestID)])
            if let key = submit.submitKey { parkedKeys[key] = id }
            writer.write(submit.image, for: id)
            return true
        }
        accept(submit, id: id, pipeline: pipeline, inline: submit.image, file: nil, bytes: bytes,
               clients: [(client, submit.requestID)], now: now)
        return false
    }

    /// A parked SUBMIT's file is written: the job is accepted (its row
    /// names the file), or refused with the reason the file could not be written.
    func finishParked(_ id: ULID, failure: DurableFile.Failure?, now: Moment) {
        guard let job = parked.removeValue(forKey: id) else { return }
        if let key = job.submit.submitKey { parkedKeys[key] = nil }
        backlog.remove(job.bytes)
        if let failure {
            logger.error("cannot write the input of submit \(job.submit.requestID): \(failure)")
            let reason = failure.isNoSpace ? "the broker's disk is full (\(failure)); submit again later"
                                           : "the broker could not store the input: \(failure)"
            for waiter in job.clients { refuse(waiter.client, waiter.requestID, .internal, reason) }
            return
        }
        accept(job.submit, id: id, pipeline: job.pipeline, inline: nil, file: id.description, bytes: job.bytes,
               clients: job.clients, now: now)
    }

    func accept(_ submit: Submit, id: ULID, pipeline: String, inline: [UInt8]?, file: String?, bytes: Int,
                        clients: [(client: [UInt8], requestID: UInt64)], now: Moment) {
        let transition = state.planAccept(id: id, priority: submit.priority, source: submit.sourceName, options: submit.options,
                                          pipeline: pipeline, inlineInput: inline, inputFile: file, inputBytes: bytes,
                                          submitKey: submit.submitKey, notBefore: submit.notBefore ?? 0, maxAttempts: submit.maxAttempts,
                                          expires: submit.expires ?? 0, timeLimit: submit.timeLimit ?? 0, now: now)
        switch apply(transition, now: now) {
        case .applied:
            let seq = transition.events.first?.seq ?? 0
            for waiter in clients {
                awaiting.append((waiter.client, waiter.requestID, Accepted(requestID: waiter.requestID, jobID: id, eventSeq: seq).frames(), true))
            }
        case .rejected(let reason), .unreadableInput(_, let reason):
            logger.error("cannot queue submit \(submit.requestID): \(reason)")
            for waiter in clients { refuse(waiter.client, waiter.requestID, .internal, "the broker could not store the job: \(reason)") }
        case .lost:
            // The turn is lost: `abandonTurn` answers every reply awaiting the
            // commit with the reason, this one included.
            for waiter in clients {
                awaiting.append((waiter.client, waiter.requestID, [], true))
            }
        }
    }

    // MARK: Dead-letter set

    func handleDead(_ target: DeadTarget, requestID: UInt64, client: [UInt8], revive: Bool, now: Moment) {
        let command = revive ? "DEAD-RETRY" : "DEAD-DISCARD"
        let jobs: [JobHandle]
        do {
            jobs = try store.deadJobs(target)
        } catch {
            logger.error("\(command) failed: \(error)")
            delivery.frontend.append((client, ErrorReply(requestID: requestID, code: .internal, reason: Wire.line("\(error)")).frames()))
            return
        }
        if case .job(let id) = target, jobs.isEmpty {
            delivery.frontend.append((client, ErrorReply(requestID: requestID, code: .notFound, reason: Wire.line("job \(id) is not dead")).frames()))
            return
        }
        let transition = revive ? state.planRevive(jobs, now: now) : state.planDiscard(jobs, now: now)
        commit(transition, answering: requestID, of: client, count: jobs.count, what: command, refusal: { $0 }, now: now)
    }

    /// Applies the transition of an admin request (DEAD-RETRY,
    /// DEAD-DISCARD, CANCEL, PAUSE, RESUME) and answers it: OK with `count`
    /// once the turn is committed, ERROR internal (`refusal` of the reason,
    /// logged under `what`) when it could not be written, and nothing
    /// when the turn was lost.
    func commit(_ transition: Transition, answering requestID: UInt64, of client: [UInt8], count: Int, what: String,
                refusal: (String) -> String, now: Moment) {
        switch apply(transition, now: now) {
        case .applied:
            awaiting.append((client, requestID, OKReply(requestID: requestID, count: UInt64(count)).frames(), false))
        case .rejected(let reason), .unreadableInput(_, let reason):
            logger.error("\(what) failed: \(reason)")
            delivery.frontend.append((client, ErrorReply(requestID: requestID, code: .internal, reason: Wire.line(refusal(reason))).frames()))
        case .lost:
            awaiting.append((client, requestID, [], false))
        }
    }

    // MARK: Cancel

    func handleCancel(_ request: CancelRequest, client: [UInt8], now: Moment) {
        let id = request.requestID
        func fail(_ code: ErrorCode, _ reason: String) {
            delivery.frontend.append((client, ErrorReply(requestID: id, code: code, reason: Wire.line(reason)).frames()))
        }
        func commit(_ transition: Transition, count: Int) {
            self.commit(transition, answering: id, of: client, count: count, what: "CANCEL \(request.target)",
                        refusal: { "the broker could not record the cancel: \($0)" }, now: now)
        }
        switch request.target {
        case .queued:
            let transition = state.planCancelQueued(now: now)
            commit(transition, count: transition.cancelled)
        case .job(let job):
            switch state.planCancel(job, now: now) {
            case .cancelled(let transition):
                commit(transition, count: 1)
            case let .stopping(transition, lease, connection):
                if let connection {
                    delivery.backend.append(.init(connection, CancelJob(jobID: job, attempt: lease.job.attempt).frames()))
                }
                logger.info("job \(job) attempt \(lease.job.attempt): asking worker \(lease.worker) to stop it")
                commit(transition, count: 1)
            case nil:
                fail(.notFound, whyNotCancellable(job))
            }
        }
    }

    // MARK: Pause

    /// PAUSE or RESUME: OK with 1 when dispatch changed, 0 when it already
    /// was that way. The change is committed before the OK leaves.
    func handlePause(_ paused: Bool, requestID: UInt64, client: [UInt8], now: Moment) {
        guard let transition = state.planPause(paused, now: now) else {
            delivery.frontend.append((client, OKReply(requestID: requestID, count: 0).frames()))
            return
        }
        commit(transition, answering: requestID, of: client, count: 1, what: paused ? "PAUSE" : "RESUME",
               refusal: { "the broker could not record it: \($0)" }, now: now)
    }

    /// Why CANCEL cannot act on a job that is not unfinished in memory.
    func whyNotCancellable(_ job: ULID) -> String {
        let last = (try? store.lastEvent(of: job)) ?? nil
        switch last?.kind {
        case .stored:
            return "job \(job) is already stored\(last?.recordID.map { " (record \($0))" } ?? ""): a stored job cannot be cancelled"
        case .dead:
            return "job \(job) is dead, not queued or running: `darkroom dead discard \(job)` removes it"
        case .cancelled:
            return "job \(job) is already cancelled"
        case .discarded:
            return "job \(job) was discarded from the dead-letter set"
        default:
            return "no job \(job): neither the queue nor its event log knows it (events older than the broker's --retention are pruned)"
        }
    }

    // MARK: Reads

    func answer(_ message: FrontendMessage, client: [UInt8]) {
        switch message {
        case .replay(let request):
            let limit = request.limit == 0 ? config.replayBatchLimit : min(Int(request.limit), config.replayBatchLimit)
            let from = max(request.fromSeq, 1)
            do {
                let replayed = try store.events(from: from, limit: max(1, limit))
                for event in replayed { delivery.frontend.append((client, event.frames())) }
                // With none sent: the seq before `from`, never past the head.
                let last = replayed.last?.seq ?? min(from - 1, store.committedSeq)
                delivery.frontend.append((client, ReplayEnd(requestID: request.requestID, lastSeq: last, headSeq: store.committedSeq).frames()))
            } catch {
                logger.error("REPLAY failed: \(error)")
                delivery.frontend.append((client, ErrorReply(requestID: request.requestID, code: .internal, reason: Wire.line("\(error)")).frames()))
            }
        case .deadList(let request):
            do {
                let list = try store.deadList(limit: Int(request.limit), after: request.after)
                delivery.frontend.append((client, DeadListReply(requestID: request.requestID, list: list).frames()))
            } catch {
                logger.error("DEAD-LIST failed: \(error)")
                delivery.frontend.append((client, ErrorReply(requestID: request.requestID, code: .internal, reason: Wire.line("\(error)")).frames()))
            }
        case .jobInfo(let request):
            do {
                let (events, facts) = try store.story(of: request.jobID)
                let live = JobStories.live(state.place(of: request.jobID), notBefore: state.notBefore(of: request.jobID),
                                           cancelling: state.cancelling.contains(request.jobID), position: state.ready.position(of: request.jobID),
                                           now: BrokerCore.now().wall)
                if let story = JobStories.story(of: request.jobID, events: events, facts: facts, live: live) {
                    delivery.frontend.append((client, JobInfoReply(requestID: request.requestID, story: story).frames()))
                } else {
                    let reason = "no job \(request.jobID): neither the queue nor its event log knows it (events older than the broker's --retention are pruned)"
                    delivery.frontend.append((client, ErrorReply(requestID: request.requestID, code: .notFound, reason: reason).frames()))
                }
            } catch {
                logger.error("JOB-INFO failed: \(error)")
                delivery.frontend.append((client, ErrorReply(requestID: request.requestID, code: .internal, reason: Wire.line("\(error)")).frames()))
            }
        case .jobList(let request):
            let list = state.list(request.state, offset: Int(request.offset), limit: Int(request.limit), after: request.after)
            delivery.frontend.append((client, JobListReply(requestID: request.requestID, list: list).frames()))
        default:
            break
        }
    }

    // MARK: Workers

    func handleBackend(_ message: BackendMessage, connection: [UInt8], now: Moment) {
        if case .ready(let ready) = message {
            let process = "host \(ready.host) pid \(ready.pid)"
            // After a clash, the id stays with its holder while the holder
            // is registered: the other process is told why and turned away.
            if let holder = workerClaims.holder(of: ready.workerID), holder != process {
                if let entry = state.workers[ready.workerID], "host \(entry.host) pid \(entry.pid)" == holder {
                    let reason = "worker id \(ready.workerID) is held by \(holder); \(process) is turned away while it is: give each worker its own --id"
                    delivery.backend.append(.init(connection, ErrorReply(requestID: 0, code: .conflict, reason: reason).frames()))
                    delivery.backend.append(.init(connection, BackendMessage.disconnect.frames()))
                    return
                }
                workerClaims.release(ready.workerID)
            }
            var clash: String?
            if let other = workerClaims.note(ready.workerID, process: process, now: now.monotonic) {
                clash = "worker id \(ready.workerID) is used by two processes, \(other) and \(process): each READY takes the id, "
                    + "and the jobs leased under it, from the other; give each worker its own --id"
                logger.warn(clash!)
            }
            let forgotten = state.register(ready, identity: connection, now: now)
            delivery.forget += forgotten
            // Each side only sees DISCONNECT otherwise: both are told why.
            if let clash {
                let error = ErrorReply(requestID: 0, code: .conflict, reason: clash).frames()
                for side in [connection] + forgotten { delivery.backend.append(.init(side, error)) }
            }
            logger.info("worker \(ready.workerID) ready: host \(ready.host), pid \(ready.pid), \(ready.slots) slot(s)\(forgotten.isEmpty ? "" : " (a new connection)")")
            return
        }
        if let worker = state.unsettledWorker(for: connection) {
            var holding: [Holding.Entry] = []
            if case .holding(let held) = message { holding = held.jobs }
            if case .rejected(let reason) = apply(state.planSettle(worker, holding: holding, now: now), now: now) {
                logger.error("cannot settle the held jobs of worker \(worker): \(reason)")
            }
            for lease in state.cancellingLeases(of: worker) {
                delivery.backend.append(.init(connection, CancelJob(jobID: lease.job.id, attempt: lease.job.attempt).frames()))
                logger.info("job \(lease.job.id) attempt \(lease.job.attempt): asking worker \(worker) again to stop it (it came back holding the job)")
            }
            if case .holding = message { return }
        }
        let worker = state.workerID(for: connection)
        switch message {
        case .ready, .job, .error, .heartbeat, .ping, .pong, .cancelJob:
            break
        case .holding:
            guard let worker else { break }
            logger.warn("worker \(worker) sent HOLDING other than right after READY; ignored")
            delivery.backend.append(.init(connection, ErrorReply(requestID: 0, code: .unexpectedCommand,
                                                                 reason: "HOLDING must follow READY directly").frames()))
        case .credit(let credit):
            if let worker, let warning = state.grant(credit.count, worker: worker) { logger.warn(warning) }
        case .done(let done):
            let dead = state.place(of: done.jobID) == nil ? (try? store.deadJob(done.jobID)) ?? nil : nil
            if let transition = state.planDone(done, from: connection, dead: dead, now: now) {
                if case .rejected(let reason) = apply(transition, now: now) {
                    logger.error("DONE for job \(done.jobID) could not be recorded: \(reason)")
                }
            } else {
                logger.debug("ignored DONE for job \(done.jobID) attempt \(done.attempt): the job is finished or unknown")
            }
        case .fail(let fail):
            if let worker, fail.failure.code == FailureDetail.Code.workerShutdown, state.workers[worker]?.stopping == false {
                logger.info("worker \(worker) is stopping; it gets no more jobs")
                state.markStopping(worker)
            }
            if let transition = state.planFail(fail, from: connection, now: now) {
                if case .rejected(let reason) = apply(transition, now: now) {
                    logger.error("FAIL for job \(fail.jobID) could not be recorded: \(reason)")
                }
            } else {
                logger.debug("ignored stale FAIL for job \(fail.jobID) attempt \(fail.attempt)")
            }
        case .disconnect:
            guard let worker else { return }
            logger.info("worker \(worker) disconnected")
            loseWorker(worker, reason: "worker \(worker) disconnected", now: now)
            return
        }
        if worker == nil {
            switch message {
            case .credit, .done, .fail, .heartbeat, .holding:
                // A connection the broker does not know (from before a
                // restart, or declared dead): its results count, then it
                // is asked to start afresh.
                delivery.backend.append(.init(connection, BackendMessage.disconnect.frames()))
            default:
                break
            }
        }
    }

    /// A worker is gone: its jobs are requeued (counted). If that cannot be
    /// written, the jobs are held and requeued by the next turn's timers.
    func loseWorker(_ worker: String, reason: String, counted: Bool = true, now: Moment) {
        switch apply(state.planLost(worker, reason: reason, counted: counted, now: now), now: now) {
        case .applied, .lost:
            break
        case .rejected(let failure), .unreadableInput(_, let failure):
            logger.error("cannot requeue the jobs of worker \(worker): \(failure); they are held and retried")
            state.retire(worker, deadline: now.monotonic)
        }
    }
}
