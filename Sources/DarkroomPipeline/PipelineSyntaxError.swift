/// A pipeline that could not be parsed, pointing at the token at fault.
///
/// `description` renders the pipeline with a caret line under the bad token:
///
///     invalid pipeline: unknown operation "crpo" (did you mean "crop"?)
///       scale:2048x2048 | crpo:square
///                         ^^^^
///
/// `summary` is the same on one line, for logs, JSON and the wire.
public struct PipelineSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong and what was expected.
    public var message: String
    /// The whole pipeline text as given.
    public var input: String
    /// Offset of the bad token, in characters from the start of `input`.
    public var column: Int
    /// Length of the bad token in characters (at least 1).
    public var length: Int

    public init(_ message: String, input: String, column: Int, length: Int) {
        self.message = message
        self.input = input
        self.column = column
        self.length = max(1, length)
    }

    /// One line: the message and the 1-based column.
    public var summary: String {
        "invalid pipeline: \(message) (at column \(column + 1))"
    }

    public var description: String {
        let caretLine = String(repeating: " ", count: column) + String(repeating: "^", count: length)
        return "invalid pipeline: \(message)\n  \(input)\n  \(caretLine)"
    }
}
