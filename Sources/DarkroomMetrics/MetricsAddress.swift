/// Where a metrics listener listens: `HOST:PORT`, the form `--metrics`
/// takes. HOST is an IPv4 address, an IPv6 address in brackets (`[::1]`)
/// or a name the resolver knows (`localhost`); PORT 0 asks the system for
/// any free port, which the listener reports once bound.
///
/// A host is required: `:9464` would bind every interface, and a
/// listener that shows queue sizes and worker names to the network should
/// be asked for by name (`0.0.0.0:9464`).
public struct MetricsAddress: Sendable, Equatable, CustomStringConvertible {
    /// The host as given, without brackets.
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`. The error says what is wrong in a sentence that
    /// can follow the option's name.
    public init(parsing text: String) throws(MetricsAddressError) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw MetricsAddressError("'\(text)' opens an IPv6 address with [ but never closes it")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.first == ":" else {
                throw MetricsAddressError("'\(text)' has no port; write it as [ADDRESS]:PORT, like [::1]:9464")
            }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw MetricsAddressError("'\(text)' has no port; write it as HOST:PORT, like 127.0.0.1:9464")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") {
                throw MetricsAddressError("'\(text)': put an IPv6 address in brackets, like [::1]:9464")
            }
        }
        guard !host.isEmpty else {
            throw MetricsAddressError("'\(text)' has no host; give 127.0.0.1:PORT for this machine only, or 0.0.0.0:PORT for every interface")
        }
        guard !host.contains(where: { $0 == " " || $0 == "/" || $0 == "[" || $0 == "]" }) else {
            throw MetricsAddressError("'\(text)': '\(host)' is not a host name or address")
        }
        guard !portText.isEmpty, portText.allSatisfy(\.isASCII), portText.allSatisfy(\.isNumber),
              let port = UInt16(portText) else {
            throw MetricsAddressError("'\(text)': the port must be a number from 0 to 65535 (0 picks a free port)")
        }
        self.host = String(host)
        self.port = port
    }

    /// `HOST:PORT`, with an IPv6 address in brackets again.
    public var description: String {
        "\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }

    /// Whether only this machine can reach the address: a loopback address
    /// or `localhost`.
    public var isLoopback: Bool {
        host.hasPrefix("127.") || host == "localhost" || host == "::1"
    }
}

/// A `--metrics` address that cannot be used.
public struct MetricsAddressError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
