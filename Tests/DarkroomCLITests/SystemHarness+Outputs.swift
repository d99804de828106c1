import DarkroomImage
import Foundation
import Testing

/// What the output-format tests do through the CLI: submit a folder and
/// wait for its job, fetch a stored image, and read the formats `ls`
/// reports.
extension SystemHarness {
    /// A folder "tagged" holding photo.jpg, a 160×120 picture at quality 90
    /// carrying `profile`.
    func taggedPhotoFolder(profile: [UInt8]) throws -> URL {
        let folder = dir.url.appendingPathComponent("tagged")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let source = try JPEG.encode(SamplePhoto.render(Size(width: 160, height: 120), seed: 3), options: EncodeOptions(quality: 90, iccProfile: profile))
        try Data(source).write(to: folder.appendingPathComponent("photo.jpg"))
        return folder
    }

    /// Submits `folder` with `flags`, waits, and returns the stored job's id.
    func submitStored(_ folder: URL, _ flags: [String]) throws -> String {
        let run = try self.run(["submit", folder.path, "--wait", "--json"] + flags + clientFlags)
        #expect(run.status == 0, "\(run.stderr)")
        return try #require(SystemHarness.jsonLines(run.stdout).first { $0["status"] as? String == "stored" }?["job"] as? String)
    }

    /// Starts the system, submits `folder` with `flags` to a worker that is
    /// SIGKILLed once it has started a job, and lets a second worker finish:
    /// every one of the `count` jobs must be stored exactly once and the
    /// victim's job retried. Returns the jobs, and each one's source as its
    /// accepted event names it.
    func jobsThroughAKilledWorker(_ folder: URL, _ flags: [String], count: Int) throws -> (jobs: Set<String>, sourceOf: [String: String]) {
        try startSystem()
        try startWorker("victim")
        let submit = try run(["submit", folder.path, "--json"] + flags + clientFlags)
        #expect(submit.status == 0, "submit: \(submit.stderr)")
        let jobs = Set(SystemHarness.jsonLines(submit.stdout).compactMap { $0["job"] as? String })
        #expect(jobs.count == count)

        // Kill the worker without warning once it has started a job.
        try waitUntilAJobStarts("the victim")
        signal("victim", SIGKILL)
        try startWorker("rescuer", concurrency: 2)
        try waitUntil("every job is stored", timeout: .seconds(180)) {
            SystemHarness.jsonLines(try self.run(["ls", "--json", "--limit", "100"] + self.storeFlags).stdout).count == count
        }
        let all = SystemHarness.jsonLines(try run(["watch", "--from", "1", "--duration", "3", "--json"] + clientFlags).stdout)
        let stored = all.filter { $0["kind"] as? String == "stored" }
        #expect(Set(stored.compactMap { $0["job"] as? String }) == jobs)
        #expect(stored.count == count, "each job is stored exactly once")
        #expect(all.contains { $0["kind"] as? String == "retrying" && ($0["attempt"] as? Int ?? 0) >= 2 }, "the victim's job was retried")
        let sourceOf = Dictionary(uniqueKeysWithValues: all.filter { $0["kind"] as? String == "accepted" }
            .compactMap { e in (e["job"] as? String).flatMap { j in (e["source"] as? String).map { (j, $0) } } })
        return (jobs, sourceOf)
    }

    /// `get JOB -o NAME` (the thumbnail with `thumb`): the file's bytes and
    /// what `get` said on stderr.
    func getImage(_ job: String, thumb: Bool, to name: String) throws -> (bytes: [UInt8], stderr: String) {
        let path = dir.path(name)
        let run = try self.run(["get", job, "-o", path] + (thumb ? ["--thumb"] : []) + storeFlags)
        #expect(run.status == 0, "\(run.stderr)")
        return ([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))), run.stderr)
    }

    /// Each record's full-resolution and thumbnail formats, newest first, as
    /// `ls --json` gives them.
    func listedFormats() throws -> (full: [String], thumbnail: [String]) {
        let listed = SystemHarness.jsonLines(try run(["ls", "--json"] + storeFlags).stdout)
        func format(_ record: [String: Any], _ key: String) -> String { (record[key] as? [String: Any])?["format"] as? String ?? "?" }
        return (listed.map { format($0, "full") }, listed.map { format($0, "thumb") })
    }
}
