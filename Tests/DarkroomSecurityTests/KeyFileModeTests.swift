@testable import DarkroomSecurity
import DarkroomZMQ
import Foundation
import Testing

/// A secret key file's mode is checked on the file itself, behind any
/// symbolic links (Kubernetes mounts a Secret as links into `..data`), and
/// a group read is accepted only where it is how the process gets in.
@Suite struct KeyFileModeTests {
    /// Writes a fresh secret key file with mode 0600; returns its public key.
    @discardableResult
    static func writeSecret(_ path: String) throws -> CurveKey {
        let file = try KeyFile.generate(name: "server", role: nil)
        try Data((file.secretText ?? "").utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        return file.publicKey
    }

    @Test func aPrivateSecretBehindASymlinkLoadsWithoutAWarning() throws {
        let dir = try TemporaryDirectory()
        let publicKey = try Self.writeSecret(dir.path("real.key_secret"))
        try FileManager.default.createSymbolicLink(atPath: dir.path("server.key_secret"), withDestinationPath: "real.key_secret")
        #expect(KeyFile.exposureWarning(secretPath: dir.path("server.key_secret")) == nil)
        #expect(try KeyFile.loadSecret(dir.path("server.key_secret")).publicKey == publicKey)
    }

    /// The layout of a Kubernetes Secret volume: each key a link into
    /// `..data`, itself a link to the timestamped directory that holds the
    /// files, so an update can swap them all at once.
    @Test func aPrivateSecretInAKubernetesStyleVolumeLoadsWithoutAWarning() throws {
        let dir = try TemporaryDirectory()
        let mount = dir.path("keys")
        let stamped = "..2026_11_29_12_34_56.123456789"
        try FileManager.default.createDirectory(atPath: "\(mount)/\(stamped)", withIntermediateDirectories: true)
        let publicKey = try Self.writeSecret("\(mount)/\(stamped)/server.key_secret")
        try FileManager.default.createSymbolicLink(atPath: "\(mount)/..data", withDestinationPath: stamped)
        try FileManager.default.createSymbolicLink(atPath: "\(mount)/server.key_secret", withDestinationPath: "..data/server.key_secret")

        let path = "\(mount)/server.key_secret"
        #expect(KeyFile.exposureWarning(secretPath: path) == nil)
        #expect(try KeyFile.loadSecret(path).publicKey == publicKey)

        // An exposed target still warns, naming the file behind the links.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: "\(mount)/\(stamped)/server.key_secret")
        let warning = try #require(KeyFile.exposureWarning(secretPath: path))
        #expect(warning.contains("readable by other users (mode 644)"), "\(warning)")
        #expect(warning.contains("a link to") && warning.contains("\(stamped)/server.key_secret"), "\(warning)")
    }

    @Test func anExposedTargetBehindASymlinkStillWarns() throws {
        let dir = try TemporaryDirectory()
        let publicKey = try Self.writeSecret(dir.path("real.key_secret"))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: dir.path("real.key_secret"))
        try FileManager.default.createSymbolicLink(atPath: dir.path("server.key_secret"), withDestinationPath: dir.path("real.key_secret"))
        let warning = try #require(KeyFile.exposureWarning(secretPath: dir.path("server.key_secret")))
        #expect(warning.contains("mode 644") && warning.contains("chmod 600"), "\(warning)")
        // Warned about, still loaded: as for a file that is not a link.
        #expect(try KeyFile.loadSecret(dir.path("server.key_secret")).publicKey == publicKey)
    }

    @Test func aSymlinkToAMissingFileSaysSo() throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createSymbolicLink(atPath: dir.path("server.key_secret"), withDestinationPath: "..data/server.key_secret")
        let error = try #require(throws: SecurityError.self) { try KeyFile.loadSecret(dir.path("server.key_secret")) }
        #expect(error.message.contains("server.key_secret: it is a symbolic link to ..data/server.key_secret, which does not exist"), "\(error.message)")

        try FileManager.default.createSymbolicLink(atPath: dir.path("loop"), withDestinationPath: "loop")
        let loop = try #require(throws: SecurityError.self) { try KeyFile.load(dir.path("loop")) }
        #expect(loop.message.contains("symbolic link to loop, which cannot be followed"), "\(loop.message)")
    }

    /// Who may read the file besides its owner, decided from the mode, the
    /// owner and group, and this process's user and groups.
    @Test(arguments: [
        // mode, owner, group, verdict
        (0o600, 1000, 1000, nil),
        (0o400, 1000, 1000, nil),
        (0o640, 1000, 1000, "readable by other users (mode 640); chmod 600"),
        (0o644, 1000, 1000, "readable by other users (mode 644); chmod 600"),
        (0o620, 1000, 1000, "can be changed by other users"),
        (0o604, 1000, 1000, "readable by other users"),
        // Kubernetes: defaultMode 0400 and fsGroup 10001 give 0440 root:10001,
        // which a process running as 10001 reads through its group.
        (0o440, 0, 10001, nil),
        (0o640, 0, 10001, nil),
        // Kubernetes' own default, defaultMode 0644: anyone can read it.
        (0o644, 0, 10001, "readable by other users (mode 644); make it mode 400"),
        (0o460, 0, 10001, "can be changed by other users"),
        // Root's file for a group this process is not in.
        (0o440, 0, 20002, "readable by other users (mode 440)"),
    ] as [(Int, Int, Int, String?)])
    func theModeCheckAllowsOnlyTheOwnerAndTheGroupItReadsThrough(mode: Int, owner: Int, group: Int, verdict: String?) {
        let user: uid_t = owner == 1000 ? 1000 : 10001
        let groups: Set<gid_t> = owner == 1000 ? [1000] : [10001, 10002]
        let problem = KeyFile.exposure(mode: mode_t(mode), owner: uid_t(owner), group: gid_t(group), user: user, groups: groups)
        if let verdict {
            #expect(problem?.contains(verdict) == true, "\(String(mode, radix: 8)): \(problem ?? "no warning")")
        } else {
            #expect(problem == nil, "\(String(mode, radix: 8)): \(problem ?? "")")
        }
    }
}
