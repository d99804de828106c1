import DarkroomSecurity
import DarkroomZMQ
import Foundation
import Testing

@Suite struct KeyFileTests {
    @Test func savedKeysLoadBackAndTheSecretIsPrivate() throws {
        let dir = try TemporaryDirectory()
        let file = try KeyFile.generate(name: "alice", role: .producer)
        let paths = try file.save(directory: dir.path("keys"))
        #expect(paths.public.hasSuffix("keys/alice.key"))
        #expect(paths.secret.hasSuffix("keys/alice.key_secret"))

        let secretMode = try FileManager.default.attributesOfItem(atPath: paths.secret)[.posixPermissions] as? Int
        #expect(secretMode == 0o600)

        let publicFile = try KeyFile.load(paths.public)
        #expect(publicFile.publicKey == file.publicKey)
        #expect(publicFile.secretKey == nil)
        #expect(publicFile.role == .producer)
        #expect(publicFile.name == "alice")
        #expect(!(try String(contentsOfFile: paths.public, encoding: .utf8)).contains(file.secretKey?.z85 ?? "?"))

        #expect(KeyFile.exposureWarning(secretPath: paths.secret) == nil)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: paths.secret)
        #expect(KeyFile.exposureWarning(secretPath: paths.secret)?.contains("chmod 600") == true)
        let secretFile = try KeyFile.loadSecret(paths.secret)
        #expect(secretFile.keyPair == file.keyPair)
        #expect(secretFile.role == .producer)

        // A second save never replaces a key.
        #expect(throws: SecurityError.self) { try file.save(directory: dir.path("keys")) }
        // A public file is not a secret key.
        let error = try #require(throws: SecurityError.self) { try KeyFile.loadSecret(paths.public) }
        #expect(error.message.contains("holds no secret key"))
    }

    @Test(arguments: [
        ("public-key = \"short\"\n", "not a CURVE key"),
        ("name = x\n", "no public-key line"),
        ("just some words\n", "expected 'field = value'"),
        ("public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\nrole = janitor\n", "role is not one of"),
        ("public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\nrole = worker\nrole = admin\n", "role is given twice"),
    ])
    func malformedFilesAreRefusedWithTheirReason(text: String, reason: String) throws {
        let error = try #require(throws: SecurityError.self) { try KeyFile(parsing: text, source: "bad.key") }
        #expect(error.message.contains(reason), "\(error.message)")
        #expect(error.message.hasPrefix("bad.key"))
    }

    @Test func aSecretFileWhosePublicKeyBelongsToAnotherPairIsRefused() throws {
        let one = try CurveKeyPair.generate()
        let other = try CurveKeyPair.generate()
        let text = "public-key = \"\(other.publicKey.z85)\"\nsecret-key = \"\(one.secretKey.z85)\"\n"
        let error = try #require(throws: SecurityError.self) { try KeyFile(parsing: text, source: "mixed.key_secret") }
        #expect(error.message.contains("does not belong"))
        // Without the public line, it is derived from the secret key.
        let derived = try KeyFile(parsing: "secret-key = \"\(one.secretKey.z85)\"\n", source: "s")
        #expect(derived.publicKey == one.publicKey)
    }

    @Test func missingFilesAndDirectoriesNameThePath() throws {
        let dir = try TemporaryDirectory()
        let missing = try #require(throws: SecurityError.self) { try KeyFile.load(dir.path("nope.key")) }
        #expect(missing.message.contains("nope.key") && missing.message.contains("no such file"))
        let noDir = try #require(throws: SecurityError.self) { try Allowlist(directory: dir.path("absent")) }
        #expect(noDir.message.contains("absent"))
    }

    @Test func theAllowlistGivesEachKeyItsRolesDomains() throws {
        let dir = try TemporaryDirectory()
        let keys = dir.path("allow")
        let producer = try KeyFile.generate(name: "alice", role: .producer)
        let worker = try KeyFile.generate(name: "w1", role: .worker)
        let admin = try KeyFile.generate(name: "ops", role: .admin)
        let server = try KeyFile.generate(name: "broker", role: nil)
        for file in [producer, worker, admin, server] { try file.save(directory: keys) }

        let allowlist = try Allowlist(directory: keys)
        #expect(allowlist.count == 3)
        #expect(allowlist.skipped.count == 1 && allowlist.skipped[0].hasSuffix("broker.key"))

        func allowed(_ file: KeyFile, _ domain: String) -> Bool {
            if case .allowed = allowlist.decide(key: file.publicKey, domain: domain) { return true }
            return false
        }
        let table: [(KeyFile, [String: Bool])] = [
            (producer, ["frontend": true, "events": true, "backend": false, "store": true]),
            (worker, ["frontend": false, "events": false, "backend": true, "store": true]),
            (admin, ["frontend": true, "events": true, "backend": true, "store": true]),
            (server, ["frontend": false, "events": false, "backend": false, "store": false]),
        ]
        for (file, expected) in table {
            for (domain, verdict) in expected {
                #expect(allowed(file, domain) == verdict, "\(file.name ?? "?") on \(domain)")
            }
        }
        #expect(allowlist.decide(key: nil, domain: "frontend") == .denied(reason: "not a CURVE client"))

        // One key cannot hold two roles.
        var twice = producer
        twice.metadata["role"] = "worker"
        twice.metadata["name"] = "alice2"
        try Data(twice.publicText.utf8).write(to: URL(fileURLWithPath: dir.path("allow/alice2.key")))
        let error = try #require(throws: SecurityError.self) { try Allowlist(directory: keys) }
        #expect(error.message.contains("already allowed as producer"))
    }
}

/// A fresh temporary directory, removed when the value goes away.
final class TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("darkroom-security-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}
