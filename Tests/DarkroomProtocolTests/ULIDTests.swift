import Synchronization
import Testing
@testable import DarkroomProtocol

@Suite("ULID")
struct ULIDTests {
    @Test func extremesRoundTrip() throws {
        let zero = ULID(high: 0, low: 0)
        #expect(zero.description == "00000000000000000000000000")
        let max = ULID(high: .max, low: .max)
        #expect(max.description == "7ZZZZZZZZZZZZZZZZZZZZZZZZZ")
        #expect(ULID(max.description) == max)
        #expect(ULID(zero.description) == zero)
    }

    @Test func everyDigitWritesItsCharacterAndReadsBack() throws {
        // Digit d in every position of the last 25, and in the first (3 bits).
        for digit in 0..<32 {
            var low: UInt64 = 0
            var high: UInt64 = 0
            for _ in 0..<25 {
                high = high << 5 | low >> 59
                low = low << 5 | UInt64(digit)
            }
            high |= UInt64(digit & 7) << 61
            let id = ULID(high: high, low: low)
            let character = ULID.alphabet[digit]
            #expect(Array(id.description.utf8.dropFirst()) == Array(repeating: character, count: 25))
            #expect(id.description.utf8.first == ULID.alphabet[digit & 7])
            #expect(id.asciiBytes == Array(id.description.utf8))
            #expect(ULID(id.description) == id)
        }
    }

    @Test func timeIsTheFirstTenCharacters() throws {
        // 1730000000000 ms = 0x192_CD8D_9000, ten base32 digits.
        let id = ULID(milliseconds: 1_730_000_000_000, randomHigh: 0, randomLow: 0)
        #expect(id.milliseconds == 1_730_000_000_000)
        #expect(id.description.hasSuffix("0000000000000000"))
        let parsed = try #require(ULID(id.description))
        #expect(parsed.milliseconds == 1_730_000_000_000)
    }

    @Test func parsesOnlyCanonicalTextOnTheWire() {
        #expect(ULID("01JBX3Z7Q8M4N6P2R5T9V0W1XY") != nil)
        #expect(ULID("01jbx3z7q8m4n6p2r5t9v0w1xy") == nil)
        #expect(ULID("01JBX3Z7Q8M4N6P2R5T9V0W1X") == nil)  // 25 characters
        #expect(ULID("01JBX3Z7Q8M4N6P2R5T9V0W1XYZ") == nil)  // 27
        #expect(ULID("8ZZZZZZZZZZZZZZZZZZZZZZZZZ") == nil)  // over 128 bits
        #expect(ULID("01JBX3Z7Q8M4N6P2R5T9V0W1XU") == nil)  // U is not Crockford
        #expect(ULID(bytes: [0xFF] + Array(repeating: 0x30, count: 25)) == nil)
    }

    @Test func lenientParsingIsForPeople() {
        let canonical = ULID("01JBX3Z7Q8M4N6P2R5T9V0W1XY")
        #expect(ULID(lenient: "01jbx3z7q8m4n6p2r5t9v0w1xy") == canonical)
        #expect(ULID(lenient: "O1JBX3Z7Q8M4N6P2R5T9V0WIXY") == canonical)
    }

    @Test func textOrderIsValueOrder() {
        let a = ULID(milliseconds: 5, randomHigh: 0xFFFF, randomLow: .max)
        let b = ULID(milliseconds: 6, randomHigh: 0, randomLow: 0)
        #expect(a < b)
        #expect(a.description < b.description)
    }

    @Test func jsonIsTheCanonicalString() throws {
        let id = ULID(milliseconds: 1, randomHigh: 2, randomLow: 3)
        let bytes = JSONPayload.encode([id])
        #expect(String(decoding: bytes, as: UTF8.self) == "[\"\(id)\"]")
        #expect(try JSONPayload.decode([ULID].self, from: bytes) == [id])
        #expect(throws: (any Error).self) { try JSONPayload.decode([ULID].self, from: Array("[\"nope\"]".utf8)) }
    }

    @Test func monotonicWithinOneMillisecond() {
        let generator = ULIDGenerator(clock: { 1_000 }, random: { 42 })
        let ids = (0..<1000).map { _ in generator.next() }
        #expect(ids.allSatisfy { $0.milliseconds == 1_000 })
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 })
        #expect(ids[1].low == ids[0].low + 1)
    }

    @Test func monotonicWhenTheClockStepsBack() {
        let now = Mutex<UInt64>(2_000)
        let generator = ULIDGenerator(clock: { now.withLock { $0 } }, random: { 7 })
        let first = generator.next()
        now.withLock { $0 = 1_500 }
        let second = generator.next()
        #expect(first < second)
        #expect(second.milliseconds == 2_000)
        now.withLock { $0 = 2_001 }
        let third = generator.next()
        #expect(third.milliseconds == 2_001)
        #expect(third.low == 7)
    }

    @Test func randomOverflowCarriesIntoTime() {
        let generator = ULIDGenerator(clock: { 3_000 }, random: { .max })
        let first = generator.next()
        #expect(first.description.hasSuffix("ZZZZZZZZZZZZZZZZ"))
        let second = generator.next()
        #expect(first < second)
        #expect(second.milliseconds == 3_001)
    }

    @Test func defaultRandomPartIsFreshEveryMillisecond() {
        // A new millisecond draws 80 new bits; across 200 000 milliseconds
        // (past the generator's reseed every 65 536 draws) none repeats.
        let now = Mutex<UInt64>(10_000)
        let generator = ULIDGenerator(clock: { now.withLock { $0 += 1; return $0 } })
        var seen = Set<UInt64>()
        var high = Set<UInt16>()
        for _ in 0..<200_000 {
            let id = generator.next()
            seen.insert(id.low)
            high.insert(UInt16(truncatingIfNeeded: id.high))
        }
        #expect(seen.count == 200_000)
        #expect(high.count > 60_000)
    }

    @Test func uniqueAcrossThreads() async {
        let generator = ULIDGenerator()
        let ids = await withTaskGroup(of: [ULID].self) { group in
            for _ in 0..<8 { group.addTask { (0..<500).map { _ in generator.next() } } }
            var all: [ULID] = []
            for await chunk in group { all += chunk }
            return all
        }
        #expect(Set(ids).count == 4000)
    }
}
