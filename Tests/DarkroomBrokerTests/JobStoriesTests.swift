@testable import DarkroomBroker
import DarkroomProtocol
import Testing

/// JOB-INFO's story built from a job's events and its place in the queue,
/// without a broker: each kind of event moves the state and closes or opens
/// an attempt as section 10.5 says.
@Suite struct JobStoriesTests {
    let id = ULID(milliseconds: 1_730_000_000_000, randomHigh: 1, randomLow: 2)
    let record = ULID(milliseconds: 1_730_000_000_900, randomHigh: 3, randomLow: 4)
    let lost = FailureDetail(code: FailureDetail.Code.workerLost, reason: "worker w-1 stopped answering (no message for 9012 ms)")

    func event(_ seq: UInt64, _ kind: EventKind, attempt: UInt32 = 0, worker: String = "",
               record: ULID? = nil, failure: FailureDetail? = nil) -> Event {
        Event(seq: seq, time: 1_730_000_000_000 + seq * 100, kind: kind, jobID: id, attempt: attempt,
              sourceName: "cat.jpg", workerID: worker, recordID: record, failure: failure)
    }

    @Test func unknownToBothIsNoStory() {
        #expect(JobStories.story(of: id, events: [], facts: .init(), live: nil) == nil)
    }

    @Test func aLostWorkerFailsItsAttemptAndTheNextOneStores() throws {
        let events = [
            event(1, .accepted),
            event(2, .started, attempt: 1, worker: "w-1"),
            event(3, .failed, attempt: 1, worker: "w-1", failure: lost),
            event(4, .retrying, attempt: 1, failure: lost),
            event(5, .started, attempt: 2, worker: "w-2"),
            event(6, .stored, attempt: 2, worker: "w-2", record: record),
        ]
        let story = try #require(JobStories.story(of: id, events: events, facts: .init(pipeline: "grayscale", priority: 3), live: nil))
        #expect(story.state == "stored")
        #expect(story.source == "cat.jpg")
        #expect(story.pipeline == "grayscale" && story.priority == 3)
        #expect(story.submitted == events[0].time && story.finished == events[5].time)
        #expect(story.recordID == record)
        #expect(story.complete)
        #expect(story.attempts == [
            JobAttempt(attempt: 1, worker: "w-1", started: events[1].time, ended: events[2].time, outcome: "failed", failure: lost),
            JobAttempt(attempt: 2, worker: "w-2", started: events[4].time, ended: events[5].time, outcome: "stored"),
        ])
        #expect(story.events.map(\.seq) == [1, 2, 3, 4, 5, 6])
    }

    @Test func aRequeueWithoutAFailureIsRequeuedAndTheQueueDecidesAnUnfinishedJob() throws {
        let back = FailureDetail(code: FailureDetail.Code.workerReconnected, reason: "worker came back without it")
        let events = [event(1, .accepted), event(2, .started, attempt: 1, worker: "w-1"), event(3, .retrying, attempt: 1, failure: back)]
        let live = JobStories.Live(state: "running", worker: "w-3", source: "cat.jpg", priority: 5)
        let story = try #require(JobStories.story(of: id, events: events, facts: .init(), live: live))
        #expect(story.attempts.first?.outcome == "requeued")
        #expect(story.attempts.first?.failure == back)
        // The log has not caught up with the lease: the queue's word wins.
        #expect(story.state == "running" && story.worker == "w-3")
        #expect(story.priority == 5)
        #expect(story.finished == nil)
    }

    @Test func deadThenRevivedThenDiscarded() throws {
        let bad = FailureDetail(stepIndex: 0, code: "image.corrupt", reason: "decode: corrupt JPEG data")
        var events = [event(1, .accepted), event(2, .started, attempt: 1, worker: "w"), event(3, .dead, attempt: 1, worker: "w", failure: bad)]
        let dead = try #require(JobStories.story(of: id, events: events, facts: .init(), live: nil))
        #expect(dead.state == "dead" && dead.finished == events[2].time)
        #expect(dead.attempts.first?.outcome == "failed" && dead.attempts.first?.failure == bad)
        events.append(event(4, .revived))
        let revived = try #require(JobStories.story(of: id, events: events, facts: .init(),
                                                    live: JobStories.live(nil, notBefore: nil, now: 0) ?? .init(state: "queued", source: "cat.jpg", priority: 0)))
        #expect(revived.state == "queued" && revived.finished == nil)
        events.append(event(5, .discarded))
        let discarded = try #require(JobStories.story(of: id, events: events, facts: .init(), live: nil))
        #expect(discarded.state == "discarded" && discarded.finished == events[4].time)
    }

    @Test func aStoryWhoseFirstEventsWerePrunedIsIncomplete() throws {
        let story = try #require(JobStories.story(of: id, events: [event(7, .started, attempt: 1, worker: "w")], facts: .init(), live: nil))
        #expect(!story.complete)
        #expect(story.submitted == nil)
        #expect(story.state == "running" && story.attempts.first?.outcome == "running")
    }
}
