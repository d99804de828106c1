/// DRK1: the Darkroom wire protocol. The normative text is `protocol/drk1.md`;
/// this module encodes and decodes every DRK1 message to and from ZeroMQ frames
/// (`[[UInt8]]`, one array per frame) without depending on ZeroMQ itself.
///
/// Every message, after the ROUTER identity frame if any (and after the topic
/// frame on the event PUB socket), is:
///
///     frame 0   "DRK1"        4 ASCII bytes, the protocol id
///     frame 1   command       1 byte, see `Command`
///     frame 2…  the command's fields, one field per frame
///
/// Integers are big-endian and fixed width. Text is UTF-8. Ids are ULIDs.
public enum Wire {
    /// The protocol id, frame 0 of every message: ASCII "DRK1".
    public static let protocolID: [UInt8] = [0x44, 0x52, 0x4B, 0x31]
    /// The protocol id as text, for messages and help output.
    public static let version = "DRK1"
    /// Frame 0 of an EVENT published on the events socket: one event per
    /// message. Subscribers subscribe to exactly this prefix, or to
    /// `eventBatchTopic`, or to both.
    public static let eventTopic: [UInt8] = [0x65, 0x76]  // "ev"
    /// Frame 0 of an EVENTS message on the events socket: the events of one
    /// broker commit, many per message.
    public static let eventBatchTopic: [UInt8] = [0x65, 0x62]  // "eb"

    /// Peers send a HEARTBEAT (or any other message) at least this often.
    public static let heartbeatIntervalMilliseconds: UInt64 = 1_000
    /// A peer that has sent nothing for this many intervals is dead.
    public static let heartbeatLiveness: UInt64 = 3
    /// The largest message a DRK1 peer must accept: 64 MiB of image plus
    /// 1 MiB for the other frames. Set as ZMQ_MAXMSGSIZE on every socket.
    public static let maxMessageSize: Int64 = 65 * 1024 * 1024
    /// The largest image a SUBMIT may carry by default.
    public static let maxImageBytes = 64 * 1024 * 1024
    /// Priorities run from 0 (lowest) to this value (highest).
    public static let maxPriority: UInt8 = 9

    /// Default endpoints. On loopback every role agrees on these with no flags.
    public enum Endpoint {
        /// Broker ROUTER for producers and admin clients (SUBMIT, STATUS, REPLAY…).
        public static let frontend = "tcp://127.0.0.1:7700"
        /// Broker ROUTER for workers (READY, CREDIT, JOB, DONE, FAIL…).
        public static let backend = "tcp://127.0.0.1:7701"
        /// Broker XPUB (a PUB to subscribers) for lifecycle events, EVENT under "ev" and EVENTS under "eb".
        public static let events = "tcp://127.0.0.1:7702"
        /// Storage node ROUTER (STORE from workers; LIST, GET, DELETE, STATS from clients).
        public static let store = "tcp://127.0.0.1:7703"
    }

    /// Size limits on fields, in bytes (text) or values. A field over its
    /// limit makes the message malformed.
    public enum Limit {
        public static let pipelineBytes = 4_096
        public static let sourceNameBytes = 1_024
        public static let workerIDBytes = 64
        public static let submitKeyBytes = 64
        public static let hostBytes = 255
        public static let stepBytes = 1_024
        public static let errorCodeBytes = 64
        public static let reasonBytes = 4_096
        public static let maxSlots: UInt32 = 4_096
        /// The messages a darkroom socket queues for one peer (ZeroMQ's
        /// high-water mark) where a peer may have a message in flight for
        /// each slot: a worker's JOBs, STOREs and their STOREDs, with
        /// resends and the rest besides. ZeroMQ's default, 1,000, is below
        /// the slots; past the mark a send fails with EAGAIN.
        public static let queuedPerPeer = 4 * Int(maxSlots)
        /// A job's own most counted attempts (SUBMIT frame 10).
        public static let maxAttempts: ClosedRange<UInt16> = 1...1_000
        /// A job's time limit (SUBMIT frame 12, JOB frame 8), in seconds: up to a week.
        public static let timeLimitSeconds: ClosedRange<UInt32> = 1...604_800
        public static let maxThumbnailSide: UInt16 = 4_096
        public static let maxListLimit: UInt32 = 1_000
        public static let maxImageSide: UInt32 = 65_535
    }

    /// Whether `frames` is a DRK1 ERROR (frame 0 "DRK1", frame 1 the ERROR
    /// byte), which a receiver never answers with another ERROR (section
    /// 9.2). A message with another protocol id is not one, whatever its
    /// frame 1: it gets ERROR `bad-version` like any other.
    public static func isError(_ frames: [[UInt8]]) -> Bool {
        frames.count > 1 && frames[0] == protocolID && frames[1] == [Command.error.rawValue]
    }

    /// A ROUTER identity (or any bytes) as logs name a peer: `0x` and the
    /// first eight bytes in hex.
    public static func peerName(_ identity: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        var text = "0x"
        for byte in identity.prefix(8) {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 15)])
        }
        return text
    }

    /// `text` as a DRK1 line (section 2.4) of at most `maxBytes` bytes of
    /// UTF-8: each run of control characters (a line break with the
    /// indentation after it, as in the SQL an error quotes) becomes one
    /// space, and the text is cut at a character boundary. For reasons and
    /// other text made from errors, whose content the sender does not choose.
    public static func line(_ text: String, maxBytes: Int = Limit.reasonBytes) -> String {
        var out = String.UnicodeScalarView()
        var used = 0
        var afterBreak = false
        for scalar in text.unicodeScalars {
            let clean: Unicode.Scalar
            if scalar.value < 0x20 || scalar.value == 0x7F {
                if afterBreak { continue }
                afterBreak = true
                clean = " "
            } else if afterBreak && scalar == " " {
                continue
            } else {
                afterBreak = false
                clean = scalar
            }
            let size = UTF8.width(clean)
            if used + size > maxBytes { break }
            out.append(clean)
            used += size
        }
        return String(out)
    }

    /// Reads frames 0 and 1 of a message that starts at `offset` and returns
    /// its command. Throws `bad-version` if frame 0 is not "DRK1",
    /// `unknown-command` for a command byte DRK1 does not define, and
    /// `malformed` for anything else.
    public static func command(of frames: [[UInt8]], at offset: Int = 0) throws(ProtocolError) -> Command {
        guard frames.count >= offset + 2 else {
            if frames.count > offset, frames[offset] != protocolID {
                throw ProtocolError(.badVersion, "expected protocol \(version), got \(quoted(frames[offset]))")
            }
            throw ProtocolError(.malformed, "message has \(frames.count - offset) frame(s); a \(version) message has at least 2")
        }
        guard frames[offset] == protocolID else {
            throw ProtocolError(.badVersion, "expected protocol \(version), got \(quoted(frames[offset]))")
        }
        let commandFrame = frames[offset + 1]
        guard commandFrame.count == 1 else {
            throw ProtocolError(.malformed, "frame \(offset + 1) (command) must be 1 byte, got \(commandFrame.count)")
        }
        guard let command = Command(rawValue: commandFrame[0]) else {
            throw ProtocolError(.unknownCommand, "unknown command 0x\(hex(commandFrame[0]))")
        }
        return command
    }

    /// The ERROR to send back for a message that failed to decode. The request
    /// id is copied from frame 2 when the message is a well-versioned request
    /// that carries one (so the client can match the error), and is 0 otherwise.
    public static func errorReply(to frames: [[UInt8]], for error: ProtocolError) -> ErrorReply {
        var requestID: UInt64 = 0
        if error.code != .badVersion, frames.count > 2, frames[0] == protocolID,
           frames[1].count == 1, let command = Command(rawValue: frames[1][0]),
           command.carriesRequestID, frames[2].count == 8 {
            var reader = FrameReader(frames[2])
            requestID = (try? reader.u64()) ?? 0
        }
        return ErrorReply(requestID: requestID, code: error.code, reason: error.reason)
    }

    /// Frame bytes shown to a person: printable ASCII in quotes, else hex.
    static func quoted(_ bytes: [UInt8]) -> String {
        let shown = bytes.prefix(16)
        if !shown.isEmpty, shown.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            return "'" + String(decoding: shown, as: UTF8.self) + (bytes.count > 16 ? "…'" : "'")
        }
        return "0x" + shown.map(hex).joined() + (bytes.count > 16 ? "…" : "") + " (\(bytes.count) bytes)"
    }

    static func hex(_ byte: UInt8) -> String {
        let digits: [Character] = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
