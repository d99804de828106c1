import DarkroomClient
import DarkroomCore
import DarkroomProtocol
import DarkroomSecurity
import DarkroomZMQ
import Foundation
import Synchronization

/// Endpoint options shared by the client commands, with the fixed defaults
/// `darkroom up` listens on.
enum ClientOptions {
    static let broker = OptionSpec.value("broker", "ENDPOINT", help: "The broker's frontend.", default: Wire.Endpoint.frontend,
                                         environment: "DARKROOM_BROKER")
    static let events = OptionSpec.value("events", "ENDPOINT", help: "The broker's events endpoint.", default: Wire.Endpoint.events,
                                         environment: "DARKROOM_EVENTS")
    static let store = OptionSpec.value("store", "ENDPOINT", help: "The storage node.", default: Wire.Endpoint.store,
                                        environment: "DARKROOM_STORE")
    static let json = OptionSpec.flag("json", help: "Print one JSON object per line.")
    static let timeout = OptionSpec.value("timeout", "SECONDS", help: "How long to wait for an answer.", default: "5")

    static func timeout(_ args: ParsedArguments) throws -> Duration {
        .seconds(try args.int("timeout", default: 5, range: 1...3600))
    }

    static func brokerEndpoint(_ args: ParsedArguments) -> String { args.value("broker") ?? Wire.Endpoint.frontend }
    static func eventsEndpoint(_ args: ParsedArguments) -> String { args.value("events") ?? Wire.Endpoint.events }
    static func storeEndpoint(_ args: ParsedArguments) -> String { args.value("store") ?? Wire.Endpoint.store }

    /// An admin client of the broker that `--broker`, `--timeout` (unless
    /// given) and the CURVE options name; a bad option is a usage error,
    /// a socket that cannot be set up a runtime one.
    static func admin(_ args: ParsedArguments, context: Context, timeout: Duration? = nil) throws -> Admin {
        let timeout = try timeout ?? ClientOptions.timeout(args)
        let curve = try brokerCurve(args)
        do {
            return try Admin(endpoint: brokerEndpoint(args), context: context, timeout: timeout, curve: curve)
        } catch {
            throw error.runtime
        }
    }

    /// A ULID given on the command line (job or record id).
    static func id(_ text: String, what: String) throws -> ULID {
        guard let id = ULID(lenient: text) else {
            throw UsageError("\(what) '\(text)' is not a valid id (26 characters, like 01JD5Z8K3M6V9Q2W4X7Y0A1B2C)")
        }
        return id
    }
}

extension Error {
    /// Client failures are runtime errors: exit 1 with their one-line message.
    var runtime: any Error {
        if let error = self as? ClientError { return RuntimeError(error.message) }
        return self
    }
}

/// Formatting shared by the client commands.
enum Format {
    static func time(_ ms: UInt64) -> String {
        Logger.timestamp(milliseconds: Int64(clamping: ms))
    }

    /// Bytes for people: B, KiB, MiB or GiB with one decimal.
    static func bytes(_ count: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f", value) + " " + units[unit]
    }

    static func age(_ ms: UInt64, now: UInt64) -> String {
        let seconds = Double(Int64(now) - Int64(ms)) / 1000
        return String(format: "%.1fs ago", max(0, seconds))
    }

    static func eventLine(_ event: Event) -> String {
        var line = "#\(event.seq) \(event.kind.description.padded(to: 9))\(event.jobID) \(event.sourceName)"
        if event.attempt > 0 { line += " attempt \(event.attempt)" }
        if !event.workerID.isEmpty { line += " on \(event.workerID)" }
        if let record = event.recordID { line += " record \(record)" }
        if let failure = event.failure { line += ": \(failureText(failure))" }
        return line
    }

    /// A failure as a terminal shows it: the step and the reason (the
    /// code is in the JSON output).
    static func failureText(_ failure: FailureDetail) -> String {
        failure.text(withCode: false)
    }

    /// An event as one JSON object, after the members already in `head`
    /// (submit's results put the input and its status first).
    static func eventJSON(_ event: Event, after head: JSONObject = JSONObject()) -> String {
        var o = head
        o.set("seq", Int(event.seq))
        o.set("time", Int(event.time))
        o.set("kind", event.kind.description)
        o.set("job", event.jobID.description)
        o.set("source", event.sourceName)
        o.set("attempt", Int(event.attempt))
        o.set("worker", event.workerID.isEmpty ? nil : event.workerID)
        o.set("record", event.recordID?.description)
        if let failure = event.failure {
            var f = JSONObject()
            f.set("step", Int(failure.stepIndex))
            f.set("step_text", failure.step)
            f.set("code", failure.code)
            f.set("reason", failure.reason)
            o.set("error", object: f)
        }
        return o.text
    }
}


/// A protocol payload as one JSON line (sorted keys, as on the wire).
func jsonLine<T: Encodable>(_ value: T) -> String {
    String(decoding: JSONPayload.encode(value), as: UTF8.self)
}

/// CURVE options shared by the client commands and the worker: this
/// client's secret key and the servers' public keys (files from
/// `darkroom keygen`).
extension ClientOptions {
    static let curveKey = OptionSpec.value("curve-key", "FILE", help: "This client's secret key file (NAME.key_secret); turns on CURVE.",
                                           environment: "DARKROOM_CURVE_KEY")
    static let serverKey = OptionSpec.value("server-key", "FILE", help: "The broker's public key file, with --curve-key.",
                                            environment: "DARKROOM_SERVER_KEY")
    /// `--server-key` of the commands that talk to the storage node alone.
    static let storeServerKey = OptionSpec.value("server-key", "FILE", help: "The storage node's public key file, with --curve-key (under `darkroom up`, the one key of the broker and the storage node).",
                                                 environment: "DARKROOM_SERVER_KEY")
    static let storeKey = OptionSpec.value("store-key", "FILE", help: "The storage node's public key file, with --curve-key.", default: "--server-key",
                                           environment: "DARKROOM_STORE_KEY")

    /// The keys for talking to the broker, or nil without --curve-key.
    static func brokerCurve(_ args: ParsedArguments) throws(UsageError) -> CurveClientKeys? {
        try curve(args, serverOption: "server-key", what: "the broker's public key")
    }

    /// The keys for talking to the storage node (its key defaults to --server-key).
    static func storeCurve(_ args: ParsedArguments) throws(UsageError) -> CurveClientKeys? {
        try curve(args, serverOption: args.value("store-key") != nil ? "store-key" : "server-key", what: "the storage node's public key")
    }

    private static func curve(_ args: ParsedArguments, serverOption: String, what: String) throws(UsageError) -> CurveClientKeys? {
        guard let own = args.value("curve-key") else {
            for option in ["server-key", "store-key"] where args.value(option) != nil {
                throw UsageError("--\(option) needs --curve-key FILE, this client's own secret key")
            }
            return nil
        }
        guard let serverPath = args.value(serverOption) else {
            throw UsageError("--curve-key needs --\(serverOption) FILE, \(what)")
        }
        let pair = try secretKeyPair(own, option: "curve-key")
        return CurveClientKeys(serverKey: try publicKey(serverPath, option: serverOption), keyPair: pair)
    }

    /// The secret key files whose exposure this run has warned of.
    private static let warnedKeyFiles = Mutex(Set<String>())

    /// The key pair in a secret key file given with --OPTION.
    static func secretKeyPair(_ path: String, option: String) throws(UsageError) -> CurveKeyPair {
        do throws(SecurityError) {
            guard let pair = try KeyFile.loadSecret(path).keyPair else { throw SecurityError("\(path) holds no secret key") }
            // Once a run: a command that talks to two servers loads it twice.
            if let warning = KeyFile.exposureWarning(secretPath: path), warnedKeyFiles.withLock({ $0.insert(path).inserted }) {
                Console.err("Warning: \(warning)")
            }
            return pair
        } catch {
            throw UsageError("--\(option): \(error.message)")
        }
    }

    /// The public key in a key file (public or secret) given with --OPTION.
    static func publicKey(_ path: String, option: String) throws(UsageError) -> CurveKey {
        do {
            return try KeyFile.load(path).publicKey
        } catch {
            throw UsageError("--\(option): \(error.message)")
        }
    }
}
