import DarkroomProtocol
import Testing

@Suite struct PermissionsTests {
    @Test func producersReadAndSubmitWorkersRunJobsAdminsDoEverything() {
        for command in [Command.submit, .status, .replay, .deadList, .jobList, .list, .get, .stats, .ping] {
            #expect(Permissions.allows(role: "producer", command), "\(command)")
        }
        for command in [Command.deadRetry, .deadDiscard, .pause, .resume, .delete, .store, .ready, .done] {
            #expect(!Permissions.allows(role: "producer", command), "\(command)")
        }
        for command in [Command.ready, .holding, .credit, .done, .fail, .heartbeat, .disconnect, .store, .ping] {
            #expect(Permissions.allows(role: "worker", command), "\(command)")
        }
        for command in [Command.submit, .delete, .deadRetry, .pause, .list] {
            #expect(!Permissions.allows(role: "worker", command), "\(command)")
        }
        #expect(Permissions.requests.allSatisfy { Permissions.allows(role: "admin", $0) })
        #expect(!Permissions.allows(role: "store", .ping))
        #expect(!Permissions.allows(role: "", .ping))
        #expect(!Permissions.requests.contains(.accepted) && !Permissions.requests.contains(.event))
        #expect(Permissions.refusal(role: "producer", .delete).contains("admin"))
    }
}
