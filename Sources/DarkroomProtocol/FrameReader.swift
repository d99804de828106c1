/// Bounds-checked big-endian reads from one frame. Every read checks the
/// remaining length first and throws instead of trapping, so hostile input
/// can never crash the reader.
public struct FrameReader: Sendable {
    public struct OutOfBytes: Error, Sendable, Equatable {
        public let needed: Int
        public let available: Int
    }

    public let bytes: [UInt8]
    public private(set) var position: Int = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var remaining: Int { bytes.count - position }
    public var isAtEnd: Bool { position >= bytes.count }

    mutating func take(_ n: Int) throws(OutOfBytes) -> ArraySlice<UInt8> {
        guard n >= 0, remaining >= n else { throw OutOfBytes(needed: n, available: remaining) }
        defer { position += n }
        return bytes[position..<(position + n)]
    }

    mutating func unsigned(_ width: Int) throws(OutOfBytes) -> UInt64 {
        FrameReader.bigEndian(try take(width))
    }

    /// Up to eight bytes as a big-endian unsigned integer.
    static func bigEndian(_ bytes: some Collection<UInt8>) -> UInt64 {
        bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    public mutating func u8() throws(OutOfBytes) -> UInt8 { UInt8(truncatingIfNeeded: try unsigned(1)) }
    public mutating func u16() throws(OutOfBytes) -> UInt16 { UInt16(truncatingIfNeeded: try unsigned(2)) }
    public mutating func u32() throws(OutOfBytes) -> UInt32 { UInt32(truncatingIfNeeded: try unsigned(4)) }
    public mutating func u64() throws(OutOfBytes) -> UInt64 { try unsigned(8) }
    public mutating func i8() throws(OutOfBytes) -> Int8 { Int8(bitPattern: try u8()) }
    public mutating func bytes(_ n: Int) throws(OutOfBytes) -> [UInt8] { Array(try take(n)) }
}

/// Appends big-endian integers to a byte array.
extension Array where Element == UInt8 {
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        let width = T.bitWidth / 8
        for i in stride(from: width - 1, through: 0, by: -1) {
            append(UInt8(truncatingIfNeeded: value >> (i * 8)))
        }
    }

    static func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(T.bitWidth / 8)
        out.appendBigEndian(value)
        return out
    }
}

/// Reads the field frames of one message in order, checking each against the
/// specification. Errors name the command, the frame index (counted from the
/// start of the frames handed to the decoder) and the field.
public struct MessageReader: Sendable {
    public let command: Command
    let frames: [[UInt8]]
    public private(set) var index: Int

    /// Checks the header and the exact frame count. `offset` is the index of
    /// the "DRK1" frame (1 on the events socket, after the topic).
    /// `context` completes the sentence "X is not valid …" for a command
    /// outside `allowed`, e.g. "on the frontend" (made only then).
    ///
    /// The checks run in the order of section 3.2: protocol id, command
    /// byte, the command on this socket, then (given `receiver`) the
    /// command in this direction, then the frame count. Fields come after.
    public init(_ frames: [[UInt8]], offset: Int = 0, expecting allowed: Set<Command>, context: @autoclosure () -> String,
                receiving: (commands: Set<Command>, receiver: String)? = nil) throws(ProtocolError) {
        try self.init(frames, offset: offset, allowing: { allowed.contains($0) }, context: context, receiving: receiving)
    }

    /// The same checks for a message that must be `command`: what a
    /// decoder of one message reads with, without a set to build for it.
    public init(_ frames: [[UInt8]], offset: Int = 0, expecting command: Command, context: @autoclosure () -> String) throws(ProtocolError) {
        try self.init(frames, offset: offset, allowing: { $0 == command }, context: context, receiving: nil)
    }

    private init(_ frames: [[UInt8]], offset: Int, allowing isAllowed: (Command) -> Bool, context: () -> String,
                 receiving: (commands: Set<Command>, receiver: String)?) throws(ProtocolError) {
        let command = try Wire.command(of: frames, at: offset)
        guard isAllowed(command) else {
            throw ProtocolError(.unexpectedCommand, "\(command.name) is not valid \(context())")
        }
        if let receiving, !receiving.commands.contains(command) {
            throw ProtocolError(.unexpectedCommand, "\(command.name) is not sent to \(receiving.receiver)")
        }
        let count = frames.count - offset
        let fewest = command.frameCount - command.optionalFrames
        guard count >= fewest, count <= command.frameCount else {
            let expected = switch command.frameCount - fewest {
            case 0: "\(fewest)"
            case 1: "\(fewest) or \(command.frameCount)"
            default: "\(fewest) to \(command.frameCount)"
            }
            throw ProtocolError(.malformed, "\(command.name): expected \(expected) frames, got \(count)")
        }
        self.command = command
        self.frames = frames
        self.index = offset + 2
    }

    /// Whether frames are left to read (for a command's optional last frames).
    public var hasMoreFrames: Bool { index < frames.count }

    /// Passes over the next frame when it is empty and another follows it
    /// (SUBMIT's empty submit key before its not-before time).
    mutating func skipEmptyFrameFollowedByMore() -> Bool {
        guard index + 1 < frames.count, frames[index].isEmpty else { return false }
        index += 1
        return true
    }

    /// Throws if a decoder read fewer frames than the message has.
    public func finish() throws(ProtocolError) {
        guard index == frames.count else {
            throw ProtocolError(.malformed, "\(command.name): \(frames.count - index) unread frame(s)")
        }
    }

    public func error(_ code: ErrorCode = .malformed, frame: Int, _ field: String, _ problem: String) -> ProtocolError {
        ProtocolError(code, "\(command.name): frame \(frame) (\(field)) \(problem)")
    }

    mutating func next() -> (Int, [UInt8]) {
        // The frame count was checked in init and readers read exactly that many.
        let i = index
        index += 1
        return i < frames.count ? (i, frames[i]) : (i, [])
    }

    /// A field of `range` bytes of printable ASCII without spaces (submit
    /// keys, worker ids). The bytes are checked as they are, not through a
    /// String's UTF-8 view: about a tenth of the work, on a field every
    /// SUBMIT and every worker message carries. Anything else is read as
    /// text, which says what is wrong with it when it can.
    mutating func token(_ field: String, bytes range: ClosedRange<Int>) throws(ProtocolError) -> String {
        func isTokenByte(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x7F }
        if index < frames.count, range.contains(frames[index].count), frames[index].allSatisfy(isTokenByte) {
            defer { index += 1 }
            return String(decoding: frames[index], as: UTF8.self)
        }
        let i = index
        let token = try text(field, bytes: range)
        guard token.utf8.allSatisfy(isTokenByte) else {
            throw error(frame: i, field, "must be printable ASCII without spaces")
        }
        return token
    }

    /// The next frame, which must be exactly `width` bytes.
    private mutating func frame(_ field: String, width: Int) throws(ProtocolError) -> (Int, [UInt8]) {
        let (i, frame) = next()
        guard frame.count == width else {
            throw error(frame: i, field, "must be \(width) byte\(width == 1 ? "" : "s"), got \(frame.count)")
        }
        return (i, frame)
    }

    mutating func fixed(_ field: String, _ width: Int) throws(ProtocolError) -> (Int, FrameReader) {
        let (i, frame) = try frame(field, width: width)
        return (i, FrameReader(frame))
    }

    /// A frame of exactly `width` bytes (at most eight) as a big-endian
    /// unsigned integer, read in place.
    mutating func integer(_ field: String, _ width: Int) throws(ProtocolError) -> (Int, UInt64) {
        let (i, frame) = try frame(field, width: width)
        return (i, FrameReader.bigEndian(frame))
    }

    public mutating func u8(_ field: String, _ range: ClosedRange<UInt8> = 0...UInt8.max) throws(ProtocolError) -> UInt8 {
        let (i, raw) = try integer(field, 1)
        let v = UInt8(truncatingIfNeeded: raw)
        guard range.contains(v) else { throw error(frame: i, field, "is \(v), must be \(range.lowerBound)…\(range.upperBound)") }
        return v
    }

    public mutating func u16(_ field: String, _ range: ClosedRange<UInt16> = 0...UInt16.max) throws(ProtocolError) -> UInt16 {
        let (i, raw) = try integer(field, 2)
        let v = UInt16(truncatingIfNeeded: raw)
        guard range.contains(v) else { throw error(frame: i, field, "is \(v), must be \(range.lowerBound)…\(range.upperBound)") }
        return v
    }

    public mutating func u32(_ field: String, _ range: ClosedRange<UInt32> = 0...UInt32.max) throws(ProtocolError) -> UInt32 {
        let (i, raw) = try integer(field, 4)
        let v = UInt32(truncatingIfNeeded: raw)
        guard range.contains(v) else { throw error(frame: i, field, "is \(v), must be \(range.lowerBound)…\(range.upperBound)") }
        return v
    }

    public mutating func i32(_ field: String, _ range: ClosedRange<Int32>) throws(ProtocolError) -> Int32 {
        let (i, raw) = try integer(field, 4)
        let v = Int32(bitPattern: UInt32(truncatingIfNeeded: raw))
        guard range.contains(v) else { throw error(frame: i, field, "is \(v), must be \(range.lowerBound)…\(range.upperBound)") }
        return v
    }

    public mutating func u64(_ field: String) throws(ProtocolError) -> UInt64 {
        try integer(field, 8).1
    }

    public mutating func bool(_ field: String) throws(ProtocolError) -> Bool {
        try u8(field, 0...1) == 1
    }

    /// A UTF-8 text frame of `range` bytes. Single-line text (the default)
    /// may not contain control characters (U+0000–U+001F, U+007F).
    public mutating func text(_ field: String, bytes range: ClosedRange<Int>, singleLine: Bool = true) throws(ProtocolError) -> String {
        let (i, frame) = next()
        guard range.contains(frame.count) else {
            if frame.isEmpty { throw error(frame: i, field, "is empty") }
            throw error(frame: i, field, "is \(frame.count) bytes, must be \(range.lowerBound)…\(range.upperBound)")
        }
        // Validated as a span: about twice as fast as the generic
        // `String(validating:as:)`, and every text field of every message
        // goes through here.
        guard let valid = try? UTF8Span(validating: frame.span) else {
            throw error(frame: i, field, "is not valid UTF-8")
        }
        // DRK1 text carries no byte-order mark (section 2.4): one would be
        // echoed in events, and refused there by every strict receiver.
        guard !frame.starts(with: [0xEF, 0xBB, 0xBF]) else {
            throw error(frame: i, field, "starts with a byte-order mark (U+FEFF)")
        }
        // In UTF-8 these scalars are single bytes and no byte of another
        // scalar is below 0x80, so the bytes are looked at, not the scalars.
        if singleLine, let bad = frame.first(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw error(frame: i, field, "contains control character U+\(String(bad, radix: 16, uppercase: true).leftPadded(to: 4))")
        }
        return String(copying: valid)
    }

    /// A ULID in its canonical 26-character form.
    public mutating func ulid(_ field: String) throws(ProtocolError) -> ULID {
        let (i, frame) = next()
        guard let id = ULID(bytes: frame) else {
            throw error(frame: i, field, ULID.notWireForm(frame))
        }
        return id
    }

    /// An empty frame (nil) or a ULID.
    public mutating func optionalULID(_ field: String) throws(ProtocolError) -> ULID? {
        let (i, frame) = next()
        if frame.isEmpty { return nil }
        guard let id = ULID(bytes: frame) else {
            throw error(frame: i, field, "is neither empty nor a ULID, got \(Wire.quoted(frame))")
        }
        return id
    }

    /// An opaque binary frame of at least `minimum` bytes.
    public mutating func blob(_ field: String, minimum: Int = 0) throws(ProtocolError) -> [UInt8] {
        let (i, frame) = next()
        guard frame.count >= minimum else {
            throw error(frame: i, field, frame.isEmpty ? "is empty" : "is \(frame.count) bytes, must be at least \(minimum)")
        }
        return frame
    }

    /// A JSON frame decoded as `T`.
    public mutating func json<T: Decodable>(_ field: String, as type: T.Type) throws(ProtocolError) -> T {
        let (i, frame) = next()
        do {
            return try JSONPayload.decode(type, from: frame)
        } catch let problem {
            throw error(frame: i, field, "is not a valid \(field) JSON object: \(problem)")
        }
    }

    /// Reads a custom fixed-size binary frame with `parse`.
    mutating func structure<T>(_ field: String, width: Int, _ parse: (inout FrameReader) throws(FrameReader.OutOfBytes) -> T) throws(ProtocolError) -> (Int, T) {
        var (i, r) = try fixed(field, width)
        do { return (i, try parse(&r)) } catch { throw self.error(frame: i, field, "is truncated") }
    }
}

/// Builds the frames of one message.
public struct MessageWriter: Sendable {
    public private(set) var frames: [[UInt8]]

    public init(_ command: Command) {
        frames = [Wire.protocolID, [command.rawValue]]
        frames.reserveCapacity(command.frameCount)
    }

    public mutating func u8(_ v: UInt8) { frames.append([v]) }
    public mutating func u16(_ v: UInt16) { frames.append(.bigEndian(v)) }
    public mutating func u32(_ v: UInt32) { frames.append(.bigEndian(v)) }
    public mutating func i32(_ v: Int32) { frames.append(.bigEndian(v)) }
    public mutating func u64(_ v: UInt64) { frames.append(.bigEndian(v)) }
    public mutating func bool(_ v: Bool) { frames.append([v ? 1 : 0]) }
    public mutating func text(_ s: String) { frames.append(Array(s.utf8)) }
    public mutating func ulid(_ id: ULID) { frames.append(id.asciiBytes) }
    public mutating func optionalULID(_ id: ULID?) { frames.append(id?.asciiBytes ?? []) }
    public mutating func blob(_ b: [UInt8]) { frames.append(b) }
    public mutating func json<T: Encodable>(_ value: T) { frames.append(JSONPayload.encode(value)) }
    public mutating func raw(_ frame: [UInt8]) { frames.append(frame) }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
