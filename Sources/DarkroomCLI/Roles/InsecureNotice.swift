import DarkroomCore

/// What `--insecure` opens up, told once when a server starts.
///
/// The flag lets a server listen beyond loopback without CURVE, and then
/// nothing is checked: no key, no role. Whoever can reach such an endpoint
/// can do everything it offers, which the operator should read in the log
/// rather than work out from the protocol. When the flag allows nothing (every
/// endpoint on loopback, or keys given), it says so once, quietly, so the
/// flag left over in a unit file or a manifest is noticed and dropped.
extension RoleOptions {
    /// An endpoint a server listens on, and what a client connecting to it
    /// may do when no key is asked for (see protocol/drk1.md section 12).
    struct Listener {
        var name: String
        var endpoint: String
        var grants: String

        static func frontend(_ endpoint: String) -> Listener {
            Listener(name: "the frontend", endpoint: endpoint, grants: "submit jobs, read the queue and retry or discard dead jobs")
        }

        static func backend(_ endpoint: String) -> Listener {
            Listener(name: "the backend", endpoint: endpoint, grants: "take jobs, with their input images, and report results")
        }

        static func events(_ endpoint: String) -> Listener {
            Listener(name: "the events endpoint", endpoint: endpoint, grants: "follow every job's events, which name its source file")
        }

        static func store(_ endpoint: String) -> Listener {
            Listener(name: "the storage node", endpoint: endpoint, grants: "read, store and delete records")
        }
    }

    /// Whether only this host can reach `endpoint`: TCP on a loopback
    /// address, or a transport that never leaves the host (ipc, inproc).
    static func isLoopback(_ endpoint: String) -> Bool {
        guard endpoint.hasPrefix("tcp://") else { return true }
        let host = endpoint.dropFirst("tcp://".count).split(separator: ":").dropLast().joined(separator: ":")
        return host.hasPrefix("127.") || host == "localhost" || host == "[::1]" || host == "::1"
    }

    /// The one line `--insecure` is worth for a server about to listen on
    /// `listeners`: a warning naming each endpoint it leaves open and what
    /// anyone can do there, or a note that it changes nothing. Nil without
    /// the flag.
    static func insecureNotice(_ listeners: [Listener], insecure: Bool, curve: Bool) -> (level: Logger.Level, message: String)? {
        guard insecure else { return nil }
        if curve {
            return (.info, "--insecure changes nothing: CURVE and the allowlist guard every endpoint")
        }
        let open = listeners.filter { !isLoopback($0.endpoint) }
        if open.isEmpty {
            return (.info, "--insecure changes nothing: every endpoint is on loopback")
        }
        let exposed = open.map { "\($0.name) listens on \($0.endpoint) without CURVE, so anyone who can reach it can \($0.grants)" }
        let keep = open.count == 1 ? "keep that port" : "keep these ports"
        return (.warn, "--insecure: \(exposed.joined(separator: "; ")); \(keep) on a private network, or start with --curve-key and --allow")
    }

    /// Logs `insecureNotice` for a server's start.
    static func noteInsecure(_ args: ParsedArguments, curve: Bool, listeners: [Listener], logger: Logger) {
        if let notice = insecureNotice(listeners, insecure: args.flag("insecure"), curve: curve) {
            logger.log(notice.level, notice.message)
        }
    }
}
