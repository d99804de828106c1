import Foundation
import Testing

@Suite struct SecurityCommandTests {
    @Test func keygenWritesAPublicFileAndAPrivateSecretFile() throws {
        let dir = try TemporaryDirectory()
        let run = try DarkroomProcess.run(["keygen", "alice", "--role", "producer", "--dir", dir.path("keys")])
        #expect(run.status == 0, "\(run.stderr)")
        let publicPath = dir.path("keys/alice.key")
        let secretPath = dir.path("keys/alice.key_secret")
        let publicText = try String(contentsOfFile: publicPath, encoding: .utf8)
        let secretText = try String(contentsOfFile: secretPath, encoding: .utf8)
        #expect(publicText.contains("public-key = \"") && publicText.contains("role = producer"))
        #expect(!publicText.contains("secret-key"))
        #expect(secretText.contains("secret-key = \""))
        let mode = try FileManager.default.attributesOfItem(atPath: secretPath)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // The printed public key is the one in the file.
        let printed = try #require(run.stdoutLines.last?.split(separator: " ").first)
        #expect(publicText.contains("\"\(printed)\""))

        // An existing key is never replaced; an unknown role is a usage error.
        let again = try DarkroomProcess.run(["keygen", "alice", "--dir", dir.path("keys")])
        #expect(again.status == 1 && again.stderr.contains("already exists"))
        let badRole = try DarkroomProcess.run(["keygen", "bob", "--role", "janitor", "--dir", dir.path("keys")])
        #expect(badRole.status == 64 && badRole.stderr.contains("--role"))
    }

    @Test func aNonLoopbackBindNeedsCurveOrInsecure() throws {
        let dir = try TemporaryDirectory()
        let clear = try DarkroomProcess.run(["broker", "--frontend", "tcp://0.0.0.0:*", "--data", dir.path("data")])
        #expect(clear.status == 64)
        #expect(clear.stderr.contains("--insecure"))
        let store = try DarkroomProcess.run(["store", "--bind", "tcp://0.0.0.0:*", "--data", dir.path("data")])
        #expect(store.status == 64 && store.stderr.contains("--insecure"))

        // With keys the bind is allowed: the broker gets past the check and
        // fails later, on a data directory that cannot exist.
        #expect(try DarkroomProcess.run(["keygen", "server", "--dir", dir.path("keys")]).status == 0)
        #expect(try DarkroomProcess.run(["keygen", "alice", "--role", "producer", "--dir", dir.path("allow")]).status == 0)
        let keyed = try DarkroomProcess.run(["broker", "--frontend", "tcp://0.0.0.0:*", "--curve-key", dir.path("keys/server.key_secret"),
                                              "--allow", dir.path("allow"), "--data", "/dev/null/darkroom"])
        #expect(keyed.status == 1, "\(keyed.stderr)")
        #expect(!keyed.stderr.contains("--insecure"))

        // Keys without an allowlist, or a public file as the secret, are usage errors.
        let noAllow = try DarkroomProcess.run(["broker", "--curve-key", dir.path("keys/server.key_secret"), "--data", dir.path("data")])
        #expect(noAllow.status == 64 && noAllow.stderr.contains("--allow"))
        let publicAsSecret = try DarkroomProcess.run(["broker", "--curve-key", dir.path("keys/server.key"), "--allow", dir.path("allow"), "--data", dir.path("data")])
        #expect(publicAsSecret.status == 64 && publicAsSecret.stderr.contains("holds no secret key"))
        let clientWithoutServer = try DarkroomProcess.run(["status", "--curve-key", dir.path("allow/alice.key_secret")])
        #expect(clientWithoutServer.status == 64 && clientWithoutServer.stderr.contains("--server-key"))
    }

    /// A server started on a key mounted the Kubernetes way (links into
    /// `..data`) is quiet about a private key and warns about an exposed
    /// one; a malformed key file is refused without a piece of its secret
    /// on the terminal.
    @Test func keyFilesBehindLinksAndMalformedKeysOnTheCommandLine() throws {
        let dir = try TemporaryDirectory()
        #expect(try DarkroomProcess.run(["keygen", "server", "--dir", dir.path("made")]).status == 0)
        #expect(try DarkroomProcess.run(["keygen", "alice", "--role", "producer", "--dir", dir.path("allow")]).status == 0)
        let stamped = dir.path("keys/..2026_11_29_12_34_56.1")
        try FileManager.default.createDirectory(atPath: stamped, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: dir.path("made/server.key_secret"), toPath: stamped + "/server.key_secret")
        try FileManager.default.createSymbolicLink(atPath: dir.path("keys/..data"), withDestinationPath: "..2026_11_29_12_34_56.1")
        try FileManager.default.createSymbolicLink(atPath: dir.path("keys/server.key_secret"), withDestinationPath: "..data/server.key_secret")

        // The broker gets past its keys and fails on a data directory that
        // cannot exist.
        let args = ["broker", "--curve-key", dir.path("keys/server.key_secret"), "--allow", dir.path("allow"), "--data", "/dev/null/darkroom"]
        let quiet = try DarkroomProcess.run(args)
        #expect(quiet.status == 1, "\(quiet.stderr)")
        #expect(!quiet.stderr.contains("Warning"), "\(quiet.stderr)")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: stamped + "/server.key_secret")
        let warned = try DarkroomProcess.run(args)
        #expect(warned.stderr.contains("Warning: ") && warned.stderr.contains("is readable by other users (mode 644)"), "\(warned.stderr)")
        // A client that loads it for two servers (status: broker and store) warns once.
        let client = try DarkroomProcess.run(["status", "--broker", "tcp://127.0.0.1:1", "--store", "tcp://127.0.0.1:1", "--timeout", "1",
                                              "--curve-key", stamped + "/server.key_secret", "--server-key", stamped + "/server.key"])
        #expect(client.stderr.components(separatedBy: "Warning: ").count == 2, "\(client.stderr)")

        // The secret on a line of its own, and cut short: neither is shown.
        let secretText = try String(contentsOfFile: stamped + "/server.key_secret", encoding: .utf8)
        let secretLine = try #require(secretText.split(separator: "\n").first { $0.hasPrefix("secret-key") })
        let secret = String(secretLine.split(separator: "\"")[1])
        for (name, text) in [("bare", "\(secret)\n"), ("short", "secret-key = \"\(secret.dropLast())\"\n")] {
            let path = dir.path("\(name).key_secret")
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            for command in [["broker", "--curve-key", path, "--allow", dir.path("allow")],
                            ["status", "--curve-key", path, "--server-key", dir.path("made/server.key")]] {
                let run = try DarkroomProcess.run(command)
                #expect(run.status == 64, "\(name) \(command[0]): \(run.stderr)")
                #expect(run.stderr.contains("\(name).key_secret line 1"), "\(name) \(command[0]): \(run.stderr)")
                #expect(!run.stderr.contains(secret.prefix(20)) && !run.stderr.contains(secret.suffix(20)), "\(name) \(command[0]): \(run.stderr)")
            }
        }
    }
}
