import DarkroomImage
import DarkroomProtocol
import Foundation
import Testing
@testable import DarkroomWorker

/// The stage times a worker publishes with its status: each job counted in
/// every stage it finished.
@Suite struct StageTimesTests {
    @Test func aStoredJobCountsInEveryStage() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, store, worker, session) = (rig.broker, rig.store, rig.worker, rig.session)
        for stage in JobStage.allCases { #expect(worker.status.stageTimes[stage].count == 0) }

        for _ in 0..<2 {
            try broker.send(.job(Fixture.job()), to: session.identity)
            let (identity, request) = try #require(try store.nextStore())
            Thread.sleep(forTimeInterval: 0.02)
            try store.answer(request, from: identity)
            // The DONE, after the CREDIT of the job before.
            var reply = try #require(try broker.next()).message
            if case .credit = reply { reply = try #require(try broker.next()).message }
            guard case .done = reply else {
                Issue.record("expected DONE, got \(reply)")
                return
            }
        }
        #expect(eventually { worker.status.done == 2 })
        let times = worker.status.stageTimes
        for stage in JobStage.allCases {
            #expect(times[stage].count == 2, "\(stage)")
            #expect(times[stage].bounds == JobStageTimes.bounds)
        }
        // The store round trip includes the 20 ms the test node waited to answer.
        #expect(times[.store].sum >= 0.04)
        #expect(times[.decode].sum > 0 && times[.encodeFull].sum > 0 && times[.encodeThumbnail].sum > 0)
    }

    @Test func aJobThatFailsToDecodeCountsNoStage() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, worker, session) = (rig.broker, rig.worker, rig.session)
        try broker.send(.job(Fixture.job(image: Array(Fixture.jpeg.prefix(Fixture.jpeg.count / 2)))), to: session.identity)
        guard case .fail = try #require(try broker.next()).message else {
            Issue.record("expected FAIL")
            return
        }
        #expect(eventually { worker.status.failed == 1 })
        let times = worker.status.stageTimes
        for stage in JobStage.allCases { #expect(times[stage].count == 0, "\(stage)") }
    }

    @Test func aJobRefusedByItsPlanCountsNoStage() throws {
        let rig = try WorkerRig()
        defer { rig.stop() }
        let (broker, worker, session) = (rig.broker, rig.worker, rig.session)
        try broker.send(.job(Fixture.job(pipeline: "crop:5000x5000+0+0")), to: session.identity)
        guard case .fail = try #require(try broker.next()).message else {
            Issue.record("expected FAIL")
            return
        }
        #expect(eventually { worker.status.failed == 1 })
        let times = worker.status.stageTimes
        for stage in JobStage.allCases { #expect(times[stage].count == 0, "\(stage)") }
    }
}
