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
    ///   - json: the key that names an id in a JSON object ("job"), to
    ///     print one object per id on stdout instead of lines on stderr:
    ///     status "unanswered" (it may or may not have been done) or
    ///     "not_sent" (it was not), each with its reason.
    static func report(_ error: ClientError, ids: [ULID], at position: Int, done: String, server: String, check: String,
                       json: String? = nil) {
        let id = ids[position]
        let unsent: ArraySlice<ULID>
        if error.requestNotSent {
            if let json {
                Console.out(JSONObject.outcome(json, id, status: "not_sent", reason: error.message).text)
                unsent = ids[(position + 1)...]
            } else {
                // The line names it once more among the ids not sent.
                Console.err("\(id): not \(done): \(error.message)")
                unsent = ids[position...]
            }
        } else {
            if let json {
                Console.out(JSONObject.outcome(json, id, status: "unanswered",
                                               reason: "\(error.message); it may or may not have been \(done)").text)
            } else {
                Console.err("\(id): \(error.message); it may or may not have been \(done) (`\(check)` shows it)")
            }
            unsent = ids[(position + 1)...]
        }
        notSent(unsent, server: server, json: json)
    }

    /// Names the ids not sent because `server` stopped answering: on one
    /// stderr line, or (with `json`, the key naming an id) one object each.
    static func notSent(_ unsent: ArraySlice<ULID>, server: String, json: String? = nil) {
        guard !unsent.isEmpty else { return }
        if let json {
            for id in unsent { Console.out(JSONObject.outcome(json, id, status: "not_sent", reason: "\(server) is not answering").text) }
        } else {
            Console.err("\(unsent.count) not sent, \(server) not answering: \(unsent.map(\.description).joined(separator: " "))")
        }
    }
}
