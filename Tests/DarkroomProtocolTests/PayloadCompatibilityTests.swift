import DarkroomProtocol
import Testing

@Suite struct PayloadCompatibilityTests {
    @Test func storeStatsWithoutTheByteSplitReadAsZero() throws {
        let older = Array(#"{"records":3,"fullBytes":300,"thumbBytes":30,"externalFiles":1,"databaseBytes":4096}"#.utf8)
        let stats = try JSONPayload.decode(StoreStats.self, from: older)
        #expect(stats == StoreStats(records: 3, fullBytes: 300, thumbBytes: 30, externalFiles: 1, databaseBytes: 4096))
        #expect(stats.inlineBytes == 0 && stats.externalBytes == 0)
    }
}
