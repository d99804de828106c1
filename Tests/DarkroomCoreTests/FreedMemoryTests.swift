import DarkroomCore
import Testing

@Suite struct FreedMemoryTests {
    static let mib = 1 << 20

    /// `rule.look`, outside `#expect`, which cannot call a mutating method.
    func look(_ rule: inout GiveBackRule, inUse: Int, resident: Int) -> Bool {
        rule.look(inUse: inUse, resident: resident)
    }

    @Test func steadyUseGivesNothingBack() {
        var rule = GiveBackRule(step: Self.mib, inUse: 10 * Self.mib, resident: 40 * Self.mib)
        for wobble in [0, 300_000, -200_000, 500_000, -400_000] {
            #expect(!look(&rule, inUse: 10 * Self.mib + wobble, resident: 40 * Self.mib + wobble))
        }
    }

    /// The fuzz's burst of connections: the heaps grew while they were open
    /// and their use fell when they closed, with no change of resident size.
    @Test func aBurstThatPassedIsGivenBackOnce() {
        var rule = GiveBackRule(step: Self.mib, inUse: 2 * Self.mib, resident: 32 * Self.mib)
        // Looked at during the burst, after an earlier give-back at its height.
        #expect(look(&rule, inUse: 11 * Self.mib, resident: 41 * Self.mib))
        rule.gaveBack(inUse: 11 * Self.mib, resident: 41 * Self.mib)
        // The burst ends: its memory is free but still resident.
        #expect(look(&rule, inUse: 2 * Self.mib, resident: 41 * Self.mib))
        rule.gaveBack(inUse: 2 * Self.mib, resident: 33 * Self.mib)
        #expect(!look(&rule, inUse: 2 * Self.mib, resident: 33 * Self.mib))
    }

    /// A burst between two looks shows only as resident memory that grew.
    @Test func aBurstBetweenTwoLooksIsGivenBack() {
        var rule = GiveBackRule(step: Self.mib, inUse: 2 * Self.mib, resident: 32 * Self.mib)
        #expect(!look(&rule, inUse: 2 * Self.mib, resident: 32 * Self.mib + 100_000))
        #expect(look(&rule, inUse: 2 * Self.mib, resident: 38 * Self.mib))
    }

    /// A resident size that fell (blocks mapped on their own were unmapped)
    /// is the level growth counts from.
    @Test func growthCountsFromTheLowestResidentSize() {
        var rule = GiveBackRule(step: Self.mib, inUse: 2 * Self.mib, resident: 40 * Self.mib)
        #expect(!look(&rule, inUse: 2 * Self.mib, resident: 33 * Self.mib))
        #expect(look(&rule, inUse: 2 * Self.mib, resident: 34 * Self.mib))
    }

    @Test func theReturnerStopsWhenAsked() throws {
        let returner = FreedMemoryReturner(interval: .milliseconds(20))
        try returner.start()
        returner.stop(grace: .seconds(1))
        returner.wait()
        returner.wait()
    }
}
