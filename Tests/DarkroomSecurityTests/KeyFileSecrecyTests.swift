@testable import DarkroomSecurity
import DarkroomZMQ
import Foundation
import Testing

/// Nothing a key file holds beyond its public key ever reaches an error
/// message or a printed `KeyFile`: not the secret key, not a piece of it.
@Suite struct KeyFileSecrecyTests {
    /// libzmq's test server key pair: fixed, so the searches below for pieces
    /// of the secret in error text are the same on every run.
    static let secret = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
    static let publicKey = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"

    /// Whether `message` holds the secret or any 6 characters of it in a row,
    /// in any case.
    static func leaks(_ message: String) -> Bool {
        let text = message.lowercased()
        let characters = Array(secret.lowercased())
        return (0...(characters.count - 6)).contains { text.contains(String(characters[$0..<($0 + 6)])) }
    }

    static var withoutFirst: String { String(secret.dropFirst()) }
    static var tilde: String { String(secret.prefix(20)) + "~" + String(secret.dropFirst(21)) }
    /// Split where the text before '=' is no field name ("JTKVSB%%)w").
    static var splitAtEquals: String { String(secret.prefix(10)) + "=" + String(secret.dropFirst(10)) }
    /// Split where it reads as the field name "jtkvsb".
    static var splitAsField: String { String(secret.prefix(6)) + "=" + String(secret.dropFirst(6)) }

    @Test(arguments: [
        ("a line without '='", "secret-key \"\(secret)\"\n", "expected 'field = value'"),
        ("the key alone", "\(secret)\n", "expected 'field = value'"),
        ("a key split at '='", "\(splitAtEquals)\n", "is not a field name"),
        ("a field named by a piece of the key, twice", "\(splitAsField)\n\(splitAsField)\n", "the field is given twice (first on line 1)"),
        ("a key one character short", "secret-key = \"\(withoutFirst)\"\n", "secret-key is not a CURVE key: it has 39 characters"),
        ("a key one character long", "secret-key = \"\(secret)x\"\n", "it has 41 characters"),
        ("a key with a character outside Z85", "secret-key = \"\(tilde)\"\n", "outside the Z85 alphabet"),
        ("an unquoted key with a stray quote", "secret-key = \(secret)\"\n", "it has 41 characters"),
        ("the key given twice", "secret-key = \"\(secret)\"\nsecret-key = \"\(secret)\"\n", "secret-key is given twice"),
        ("the key as the role", "public-key = \"\(publicKey)\"\nrole = \(secret)\n", "role is not one of"),
        ("a colon for '='", "secret-key: \"\(secret)\"\n", "expected 'field = value'"),
        ("a field named by a piece of the key, once", "\(splitAsField)\n",
         "server.key_secret line 1: the text before '=' is not a field of a key file, and the file has no public-key line"),
    ] as [(String, String, String)])
    func aMalformedSecretFileNeverShowsTheSecret(what: String, text: String, reason: String) throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("server.key_secret")
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let error = try #require(throws: SecurityError.self, "\(what)") { try KeyFile.loadSecret(path) }
        #expect(error.message.contains(reason), "\(what): \(error.message)")
        #expect(!Self.leaks(error.message), "\(what): \(error.message)")
        #expect(!Self.leaks(error.description), "\(what)")
    }

    @Test func aPublicFileGivenAsSecretOrASecretFromAnotherPairShowsNoSecret() throws {
        let dir = try TemporaryDirectory()
        try Data("public-key = \"\(Self.publicKey)\"\nname = server\n".utf8).write(to: URL(fileURLWithPath: dir.path("server.key")))
        let publicAsSecret = try #require(throws: SecurityError.self) { try KeyFile.loadSecret(dir.path("server.key")) }
        #expect(publicAsSecret.message.contains("holds no secret key"))
        #expect(!Self.leaks(publicAsSecret.message))

        let other = try CurveKeyPair.generate()
        try Data("public-key = \"\(other.publicKey.z85)\"\nsecret-key = \"\(Self.secret)\"\n".utf8).write(to: URL(fileURLWithPath: dir.path("mixed.key_secret")))
        let mixed = try #require(throws: SecurityError.self) { try KeyFile.loadSecret(dir.path("mixed.key_secret")) }
        #expect(mixed.message.contains("does not belong"))
        #expect(!Self.leaks(mixed.message))
    }

    @Test func aSecretFileInTheAllowlistDirectoryUnderAPublicNameShowsNoSecret() throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.path("allow"), withIntermediateDirectories: true)
        try Data("secret-key \"\(Self.secret)\"\nrole = producer\n".utf8).write(to: URL(fileURLWithPath: dir.path("allow/alice.key")))
        let error = try #require(throws: SecurityError.self) { try Allowlist(directory: dir.path("allow")) }
        #expect(error.message.contains("alice.key line 1"), "\(error.message)")
        #expect(!Self.leaks(error.message), "\(error.message)")
    }

    @Test func aKeyFilePrintsItsPublicKeyButNeverItsSecret() throws {
        let file = try KeyFile(parsing: "secret-key = \"\(Self.secret)\"\nname = server\nsecret_key = \"\(Self.secret)\"\n", source: "s")
        #expect(file.publicKey.z85 == Self.publicKey)
        var dumped = ""
        dump(file, to: &dumped)
        for text in ["\(file)", String(reflecting: file), dumped, "\([file])"] {
            #expect(!Self.leaks(text), "\(text)")
            #expect(text.contains(Self.publicKey), "\(text)")
        }
    }
}
