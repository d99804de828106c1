import DarkroomProtocol
import Testing
@testable import DarkroomWorker

/// The credit a worker grants: enough jobs to cover its threads across both
/// round trips, within its slots and its input budget. The planner is pure,
/// so every case feeds it samples at chosen moments.
@Suite struct CreditPlannerTests {
    static let mib = 1 << 20

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// A planner for `threads` threads, with `slots` and `budget`, that has
    /// seen jobs of `job`, inputs of `input` bytes, PINGs and CREDIT-to-JOB
    /// waits of `broker` (the second a little longer, as a dispatch is) and
    /// STORE round trips of `store`, all at moment 0.
    static func planner(threads: Int = 2, slots: Int = Int(Wire.Limit.maxSlots), budget: Int = 256 << 20, job: Duration, input: Int = 2_000,
                        broker: Duration, store: Duration) -> CreditPlanner {
        var planner = CreditPlanner(.init(threads: threads, slots: slots, inputBudget: budget))
        planner.noteJob(job)
        planner.noteInput(bytes: input)
        planner.notePing(broker, at: .zero)
        planner.noteCreditToJob(broker + .microseconds(100), at: .zero)
        planner.noteStore(store, at: .zero)
        return planner
    }

    // MARK: Near and far

    @Test func nearTheBrokerAFewJobsPerThreadAreEnough() {
        let planner = Self.planner(job: .milliseconds(10), broker: .microseconds(200), store: .milliseconds(1))
        // 2 × (10 + 0.3 + 1) / 10 × 1.25 + 2 = 4.8
        #expect(planner.target(at: .zero) == 5)
        #expect(planner.brokerRoundTrip(at: .zero) == .microseconds(300))
    }

    @Test func farFromTheBrokerTheRoundTripsAreCoveredToo() {
        let planner = Self.planner(job: .milliseconds(10), broker: .milliseconds(100), store: .milliseconds(101))
        // 2 × (10 + 100.1 + 101) / 10 × 1.25 + 2 = 54.8
        #expect(planner.target(at: .zero) == 55)
    }

    @Test func tinyJobsFarAwayAskForManyAndStopAtTheSlots() {
        let near = Self.planner(job: .microseconds(200), broker: .microseconds(200), store: .milliseconds(1))
        let far = Self.planner(job: .microseconds(200), broker: .milliseconds(100), store: .milliseconds(101))
        // Near: 2 × (0.2 + 0.3 + 1) / 0.2 × 1.25 + 2 = 20.75.
        #expect(near.target(at: .zero) == 21)
        // Far: 2 × (0.2 + 100.1 + 101) / 0.2 × 1.25 + 2 = 2,518.25, within
        // the 4096 slots DRK1 allows.
        #expect(far.target(at: .zero) == 2519)
        // Farther, the slots are the most.
        let farther = Self.planner(job: .microseconds(200), broker: .milliseconds(200), store: .milliseconds(201))
        #expect(farther.target(at: .zero) == Int(Wire.Limit.maxSlots))
        let capped = Self.planner(slots: 300, job: .microseconds(200), broker: .milliseconds(100), store: .milliseconds(101))
        #expect(capped.target(at: .zero) == 300)
    }

    @Test func largeJobsNeedLittleMoreThanTheThreadsNearOrFar() {
        let near = Self.planner(job: .seconds(2), input: 8 << 20, broker: .microseconds(200), store: .milliseconds(1))
        let far = Self.planner(job: .seconds(2), input: 8 << 20, broker: .milliseconds(100), store: .milliseconds(101))
        // 2 × 1.0007 × 1.25 + 2 = 4.5, and 2 × 1.1 × 1.25 + 2 = 4.75.
        #expect(near.target(at: .zero) == 5)
        #expect(far.target(at: .zero) == 5)
    }

    /// Whatever the job time and round trips, the target (when no cap cuts
    /// it) keeps every thread busy through a whole cycle: the bandwidth-
    /// delay product in jobs, plus room.
    @Test func theTargetCoversTheCycleOfEveryThread() {
        for threads in [1, 2, 8] {
            for jobMicroseconds in [50, 300, 5_000, 80_000, 2_000_000] {
                for tripMicroseconds in [100, 2_000, 50_000, 150_000] {
                    let job = Duration.microseconds(jobMicroseconds)
                    let trip = Duration.microseconds(tripMicroseconds)
                    let planner = Self.planner(threads: threads, slots: 1024, budget: 1 << 40, job: job, broker: trip, store: trip)
                    let cycle = job + (trip + .microseconds(100)) + trip
                    let needed = Double(threads) * Self.seconds(cycle) / Self.seconds(job)
                    let target = planner.target(at: .zero)
                    #expect(target == 1024 || Double(target) >= needed * 1.25 + Double(threads) - 1e-6,
                            "threads \(threads), job \(job), trip \(trip): target \(target), needed \(needed)")
                    #expect(target >= threads)
                }
            }
        }
    }

    // MARK: Round trips

    @Test func aCreditTheBrokerHadNoJobForCountsAsAPingAndALittleMore() {
        var planner = CreditPlanner(.init(threads: 1, slots: 1024, inputBudget: 1 << 30))
        planner.notePing(.milliseconds(100), at: .zero)
        // The JOB came 3 s after its CREDIT: the queue was empty, the link
        // is no slower.
        planner.noteCreditToJob(.seconds(3), at: .zero)
        #expect(planner.brokerRoundTrip(at: .zero) == .milliseconds(100) + CreditPlanner.dispatchAllowance)
        // A CREDIT answered at once is no faster than the link.
        var quick = CreditPlanner(.init(threads: 1, slots: 1024, inputBudget: 1 << 30))
        quick.notePing(.milliseconds(100), at: .zero)
        quick.noteCreditToJob(.milliseconds(20), at: .zero)
        #expect(quick.brokerRoundTrip(at: .zero) == .milliseconds(100))
        // Without PING answers (a broker that refuses them) CREDIT to JOB alone counts.
        var unpinged = CreditPlanner(.init(threads: 1, slots: 1024, inputBudget: 1 << 30))
        unpinged.noteCreditToJob(.milliseconds(120), at: .zero)
        #expect(unpinged.brokerRoundTrip(at: .zero) == .milliseconds(120))
        #expect(unpinged.storeRoundTrip(at: .zero) == nil)
    }

    @Test func roundTripsAreTheShortestOfTheLastWindowAndTheLatestWhenAllAreOlder() {
        var planner = CreditPlanner(.init(threads: 1, slots: 1024, inputBudget: 1 << 30))
        planner.noteStore(.milliseconds(100), at: .zero)
        planner.noteStore(.milliseconds(300), at: .seconds(1))
        // A STORED that waited behind others is not a longer link.
        #expect(planner.storeRoundTrip(at: .milliseconds(1_500)) == .milliseconds(100))
        // Once the short sample is out of the window, the link has changed.
        #expect(planner.storeRoundTrip(at: .milliseconds(2_500)) == .milliseconds(300))
        // With nothing new for long, the latest sample still stands.
        #expect(planner.storeRoundTrip(at: .seconds(60)) == .milliseconds(300))
        // A shorter sample replaces every longer one before it.
        planner.noteStore(.milliseconds(50), at: .seconds(61))
        #expect(planner.storeRoundTrip(at: .seconds(61)) == .milliseconds(50))
        #expect(planner.storeRoundTrip(at: .seconds(64)) == .milliseconds(50))
    }

    @Test func theTargetFollowsTheJobsAsTheyChange() {
        // Slots below the tiny jobs' wish, so that their target is exact.
        var planner = Self.planner(slots: 1024, job: .microseconds(200), broker: .milliseconds(100), store: .milliseconds(101))
        #expect(planner.target(at: .zero) == 1024)
        for _ in 0..<12 { planner.noteJob(.seconds(2)) }
        // Large jobs now: a handful is enough (the average still remembers
        // a little of the tiny ones).
        #expect(planner.target(at: .zero) <= 6)
        for _ in 0..<40 { planner.noteJob(.microseconds(200)) }
        #expect(planner.target(at: .zero) == 1024)
    }

    // MARK: Before anything is measured

    @Test func beforeAnyMeasurementTwoJobsPerThread() {
        var planner = CreditPlanner(.init(threads: 3, slots: 1024, inputBudget: 256 << 20))
        #expect(planner.startingTarget == 6)
        #expect(planner.target(at: .zero) == 6)
        #expect(planner.creditToGrant(held: 0, heldBytes: 0, outstanding: 0, at: .zero) == 6)
        // A job time alone, with the round trips not yet known, counts
        // them as nothing: 3 × 1.25 + 3 = 6.75, still above the start.
        planner.noteJob(.seconds(5))
        #expect(planner.target(at: .zero) == 7)
    }

    @Test func aSmallBudgetTakesOneJobUntilItsSizeIsKnown() {
        // Inputs count as 16 MiB before the first JOB shows one: a budget of
        // 24 MiB asks for one job, whatever its size turns out to be.
        var planner = CreditPlanner(.init(threads: 2, slots: 1024, inputBudget: 24 * Self.mib))
        #expect(planner.creditToGrant(held: 0, heldBytes: 0, outstanding: 0, at: .zero) == 1)
        planner.noteInput(bytes: 5 * Self.mib)
        // Then 4 of 5 MiB fit (2 × 2 wanted before anything is timed).
        #expect(planner.jobsInBudget == 4)
        #expect(planner.creditToGrant(held: 1, heldBytes: 5 * Self.mib, outstanding: 0, at: .zero) == 3)
    }

    // MARK: The input budget

    @Test func largeInputsHoldFewerJobs() {
        let budget = 256 * Self.mib
        let planner = Self.planner(budget: budget, job: .milliseconds(50), input: 32 * Self.mib,
                                   broker: .milliseconds(100), store: .milliseconds(101))
        // The round trips ask for 2 × (50 + 201.1) / 50 × 1.25 + 2 = 14.6; 8 fit.
        #expect(planner.jobsInBudget == 8)
        #expect(planner.target(at: .zero) == 8)
        #expect(planner.creditToGrant(held: 6, heldBytes: 6 * 32 * Self.mib, outstanding: 0, at: .zero) == 2)
        // Credit outstanding counts at the average input size.
        #expect(planner.creditToGrant(held: 6, heldBytes: 6 * 32 * Self.mib, outstanding: 1, at: .zero) == 1)
        // Held jobs larger than the average leave less room than their count says.
        #expect(planner.creditToGrant(held: 6, heldBytes: 240 * Self.mib, outstanding: 0, at: .zero) == 0)
    }

    @Test func aJobLargerThanTheBudgetIsStillTakenAlone() {
        var planner = CreditPlanner(.init(threads: 2, slots: 1024, inputBudget: 64 * Self.mib))
        planner.noteInput(bytes: 100 * Self.mib)
        #expect(planner.target(at: .zero) == 1)
        // Holding nothing, it asks for one job rather than none: a worker
        // that grants no credit would never take anything again.
        #expect(planner.creditToGrant(held: 0, heldBytes: 0, outstanding: 0, at: .zero) == 1)
        #expect(planner.creditToGrant(held: 0, heldBytes: 0, outstanding: 1, at: .zero) == 0)
        #expect(planner.creditToGrant(held: 1, heldBytes: 100 * Self.mib, outstanding: 0, at: .zero) == 0)
    }

    // MARK: Caps

    @Test func theSlotsCapEverythingAndTheThreadsAreTheFloor() {
        // --concurrency 2 --prefetch 0: two slots, two threads.
        let exact = Self.planner(threads: 2, slots: 2, job: .microseconds(200), broker: .milliseconds(100), store: .milliseconds(101))
        #expect(exact.target(at: .zero) == 2)
        #expect(exact.creditToGrant(held: 1, heldBytes: 2_000, outstanding: 0, at: .zero) == 1)
        #expect(exact.creditToGrant(held: 1, heldBytes: 2_000, outstanding: 1, at: .zero) == 0)
        // A grant never takes held plus outstanding beyond the slots.
        let six = Self.planner(threads: 2, slots: 6, job: .microseconds(200), broker: .milliseconds(100), store: .milliseconds(101))
        #expect(six.target(at: .zero) == 6)
        #expect(six.creditToGrant(held: 4, heldBytes: 8_000, outstanding: 1, at: .zero) == 1)
        #expect(six.creditToGrant(held: 7, heldBytes: 14_000, outstanding: 0, at: .zero) == 0)
        // However quick the jobs are locally, every thread gets a job.
        let quick = Self.planner(threads: 8, job: .seconds(10), broker: .microseconds(10), store: .microseconds(10))
        #expect(quick.target(at: .zero) >= 8)
    }

    @Test func nothingMoreIsGrantedWhileTheTargetIsMet() {
        let planner = Self.planner(job: .milliseconds(10), broker: .milliseconds(100), store: .milliseconds(101))
        let target = planner.target(at: .zero)
        #expect(planner.creditToGrant(held: 10, heldBytes: 20_000, outstanding: target - 10, at: .zero) == 0)
        #expect(planner.creditToGrant(held: 10, heldBytes: 20_000, outstanding: target - 13, at: .zero) == 3)
        #expect(planner.creditToGrant(held: target + 5, heldBytes: 0, outstanding: 0, at: .zero) == 0)
    }

    @Test func outstandingCreditIsUsedOldestGrantFirst() {
        var credit = OutstandingCredit()
        let start = ContinuousClock.now
        #expect(credit.use() == nil)
        credit.grant(2, at: start)
        credit.grant(0, at: start + .seconds(1))
        credit.grant(1, at: start + .seconds(2))
        #expect(credit.count == 3)
        // Each unit tells when its grant was sent: the broker's round trip.
        #expect(credit.use() == start)
        #expect(credit.use() == start)
        #expect(credit.count == 1)
        #expect(credit.use() == start + .seconds(2))
        #expect(credit.count == 0)
        #expect(credit.use() == nil)
        #expect(credit.count == 0)
        // A new session: the broker forgot the grants.
        credit.grant(4, at: start)
        credit.reset()
        #expect(credit.count == 0)
        #expect(credit.use() == nil)
    }

    @Test func badLimitsAreRaisedToOne() {
        let planner = CreditPlanner(.init(threads: 0, slots: 0, inputBudget: 0))
        #expect(planner.limits == .init(threads: 1, slots: 1, inputBudget: 1))
        #expect(planner.creditToGrant(held: 0, heldBytes: 0, outstanding: 0, at: .zero) == 1)
    }
}
