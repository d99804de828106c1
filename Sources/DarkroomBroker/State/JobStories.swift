import DarkroomProtocol

/// A job's story for JOB-INFO, told from the events the log holds for it
/// and from where the broker's state has it now. Pure: the job store reads
/// the events, the core looks the job up, and this puts them together.
enum JobStories {
    /// Where the broker's memory has an unfinished job.
    struct Live: Equatable {
        var state: String
        var worker: String?
        var notBefore: UInt64?
        var source: String
        var priority: UInt8
        /// The deadline of a waiting job.
        var expires: UInt64?
        /// A queued job's place in the dispatch order.
        var position: Int?
    }

    /// What the queue's rows hold about the job beyond its events: the
    /// pipeline and priority from its `accepted` event, or from its row
    /// while the queue keeps one.
    struct Facts: Equatable {
        var pipeline: String?
        var priority: UInt8?
        /// Its own time limit (seconds), from its row; nil without one.
        var timeLimit: UInt32?
    }

    /// The job's place in the state, as JOB-INFO names it.
    static func live(_ place: BrokerState.Place?, notBefore: UInt64?, cancelling: Bool = false, position: Int? = nil, now wall: UInt64) -> Live? {
        switch place {
        case .waiting(let job):
            let expires = job.expires == 0 ? nil : job.expires
            if let notBefore, notBefore > wall {
                return Live(state: "delayed", notBefore: notBefore, source: job.source, priority: job.priority, expires: expires)
            }
            return Live(state: "queued", source: job.source, priority: job.priority, expires: expires, position: position)
        case .leased(let lease):
            return Live(state: cancelling ? "cancelling" : "running", worker: lease.worker, source: lease.job.source, priority: lease.job.priority)
        case .held(let hold):
            // Its worker is reconnecting (or the broker restarted): the
            // worker still runs it until the hold ends.
            return Live(state: cancelling ? "cancelling" : "running", worker: hold.lease.worker, source: hold.lease.job.source, priority: hold.lease.job.priority)
        case nil:
            return nil
        }
    }

    /// The story; nil when neither the log nor the state knows the job.
    static func story(of id: ULID, events: [Event], facts: Facts, live: Live?) -> JobStory? {
        guard live != nil || !events.isEmpty else { return nil }
        var attempts: [JobAttempt] = []
        var open: Int?  // index in `attempts` of the attempt not yet ended
        var state = "queued"
        var finished: UInt64?
        var record: ULID?
        func close(_ time: UInt64, _ outcome: String, _ failure: FailureDetail?) {
            guard let index = open else { return }
            attempts[index].ended = time
            attempts[index].outcome = outcome
            attempts[index].failure = failure
            open = nil
        }
        for event in events {
            switch event.kind {
            case .accepted:
                state = "queued"
            case .started:
                close(event.time, "requeued", nil)
                attempts.append(JobAttempt(attempt: event.attempt, worker: event.workerID, started: event.time, outcome: "running"))
                open = attempts.count - 1
                state = "running"
            case .failed:
                close(event.time, "failed", event.failure)
            case .retrying:
                // Without a `failed` first, the attempt did not fail: its
                // worker stopped or came back without it.
                close(event.time, "requeued", event.failure)
                state = "queued"
            case .stored:
                close(event.time, "stored", nil)
                state = "stored"
                finished = event.time
                record = event.recordID
            case .dead:
                close(event.time, "failed", event.failure)
                state = "dead"
                finished = event.time
            case .revived:
                state = "queued"
                finished = nil
            case .discarded:
                state = "discarded"
                finished = event.time
            case .cancelled:
                close(event.time, "cancelled", nil)
                state = "cancelled"
                finished = event.time
            }
        }
        let first = events.first
        var story = JobStory(jobID: id, state: state, source: live?.source ?? first?.sourceName ?? "",
                             pipeline: facts.pipeline, priority: facts.priority ?? live?.priority,
                             submitted: first?.kind == .accepted ? first?.time : nil, finished: finished,
                             recordID: record, attempts: attempts, events: events.map(JobEvent.init),
                             complete: first?.kind == .accepted)
        story.timeLimit = facts.timeLimit
        if let live {
            // The state is the authority on an unfinished job: the log may
            // not yet hold the turn that leased or requeued it.
            story.state = live.state
            story.worker = live.worker
            story.notBefore = live.notBefore
            story.expires = live.expires
            story.position = live.position.map(UInt64.init)
            story.finished = nil
        }
        return story
    }
}
