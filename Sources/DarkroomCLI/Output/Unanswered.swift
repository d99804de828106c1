import DarkroomClient
import DarkroomProtocol

/// What a command that sends one request per id (`rm`, `cancel`) says
/// when the server stops answering, and why it stops there.
///
/// A request is handed to its connection only once the handshake is done
/// (`ClientError.requestNotSent` when that never happened in time): such a
/// request cannot have reached the server. One handed over and left
/// unanswered may have, or may still be on its way. Sending the next one
/// would keep the connection open for a server that comes back meanwhile
/// to take the unanswered request after it was reported, so the command
/// sends nothing more and names the ids it did not send.
enum Unanswered {
    /// Reports the request for `ids[position]` left without an answer
    /// (`error`, a `.timeout`), and the ids not sent.
    /// - Parameters:
    ///   - done: the request's effect as a past participle ("deleted").
    ///   - server: who did not answer ("the storage node").
    ///   - check: the command that shows where an id stands.
    static func report(_ error: ClientError, ids: [ULID], at position: Int, done: String, server: String, check: String) {
        let id = ids[position]
        let unsent: ArraySlice<ULID>
        if error.requestNotSent {
            Console.err("\(id): not \(done): \(error.message)")
            unsent = ids[position...]
        } else {
            Console.err("\(id): \(error.message); it may or may not have been \(done) (`\(check)` shows it)")
            unsent = ids[(position + 1)...]
        }
        notSent(unsent, server: server)
    }

    /// Names the ids not sent because `server` stopped answering.
    static func notSent(_ unsent: ArraySlice<ULID>, server: String) {
        guard !unsent.isEmpty else { return }
        Console.err("\(unsent.count) not sent, \(server) not answering: \(unsent.map(\.description).joined(separator: " "))")
    }
}
