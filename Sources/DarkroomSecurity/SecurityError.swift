/// A key file or allowlist that cannot be used, with a one-line reason that
/// names the file.
public struct SecurityError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
