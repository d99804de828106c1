import DarkroomCore
import DarkroomImage

/// Parses the one-line pipeline syntax:
///
///     pipeline  = step *( "|" step )
///     step      = name [ ":" argument *( "," argument ) ]
///     argument  = value / key "=" value
///
/// Whitespace around `|`, `:`, `,` and `=` is ignored. Each operation takes at
/// most one positional argument (its primary one, such as the size of `scale`)
/// and named parameters; see `Pipeline.reference` for the full list.
/// `protocol/pipeline.md` is the specification; names, keys and keywords
/// match without regard to ASCII case.
struct PipelineParser {
    /// A piece of the input with its position, so errors can point at it.
    struct Token {
        var text: String
        var column: Int
        var length: Int { max(1, text.count) }
    }

    let input: String
    private let characters: [Character]

    init(_ input: String) {
        self.input = input
        self.characters = Array(input)
    }

    func parse() throws(PipelineSyntaxError) -> [Operation] {
        let stepTokens = split(Token(text: input, column: 0), on: "|")
        if stepTokens.count == 1, stepTokens[0].text.isEmpty {
            throw fail("the pipeline is empty; expected a step such as scale:1024x1024", at: Token(text: "", column: 0))
        }
        var operations: [Operation] = []
        for token in stepTokens {
            operations.append(try parseStep(token))
        }
        let canonical = operations.map(\.canonical).joined(separator: " | ").utf8.count
        if canonical > PipelineParser.maxCanonicalBytes {
            throw fail("the canonical form of this pipeline is \(canonical) bytes, over the limit of \(PipelineParser.maxCanonicalBytes); use fewer steps",
                       at: Token(text: input, column: 0))
        }
        return operations
    }

    /// The longest canonical text a pipeline may have: what DRK1 carries
    /// in a JOB or a STORE (4096 bytes of UTF-8).
    static let maxCanonicalBytes = 4_096

    // MARK: - Tokens

    /// Splits a token on a separator character, trimming each piece and keeping
    /// its column.
    private func split(_ token: Token, on separator: Character) -> [Token] {
        var pieces: [Token] = []
        var start = 0
        let chars = Array(token.text)
        for (i, ch) in chars.enumerated() where ch == separator {
            pieces.append(trimmed(chars[start..<i], column: token.column + start))
            start = i + 1
        }
        pieces.append(trimmed(chars[start..<chars.count], column: token.column + start))
        return pieces
    }

    private func trimmed(_ slice: ArraySlice<Character>, column: Int) -> Token {
        var lo = slice.startIndex
        var hi = slice.endIndex
        while lo < hi, slice[lo].isWhitespace { lo += 1 }
        while hi > lo, slice[hi - 1].isWhitespace { hi -= 1 }
        let leading = lo - slice.startIndex
        return Token(text: String(slice[lo..<hi]), column: column + leading)
    }

    func fail(_ message: String, at token: Token) -> PipelineSyntaxError {
        // An empty token (e.g. between two bars) is shown as one caret where it would be.
        let column = min(token.column, max(0, characters.count))
        return PipelineSyntaxError(message, input: input, column: column, length: token.length)
    }

    // MARK: - Steps

    struct Arguments {
        var positional: Token?
        var named: [(key: Token, value: Token)] = []
    }

    private func parseStep(_ token: Token) throws(PipelineSyntaxError) -> Operation {
        if token.text.isEmpty {
            throw fail("empty step; expected an operation between the bars", at: token)
        }
        let nameToken: Token
        var arguments = Arguments()
        if let colon = token.text.firstIndex(of: ":") {
            let offset = token.text.distance(from: token.text.startIndex, to: colon)
            let chars = Array(token.text)
            nameToken = trimmed(chars[0..<offset], column: token.column)
            let argsToken = Token(text: String(chars[(offset + 1)...]), column: token.column + offset + 1)
            arguments = try parseArguments(argsToken, step: nameToken.text)
        } else {
            nameToken = token
        }
        let name = nameToken.text.asciiLowercased
        guard let kind = OperationKind(rawValue: name) else {
            var message = "unknown operation \"\(nameToken.text)\""
            if let guess = OperationKind.closest(to: name) {
                message += " (did you mean \"\(guess.rawValue)\"?)"
            } else {
                message += "; expected one of \(OperationKind.allCases.map(\.rawValue).joined(separator: ", "))"
            }
            throw fail(message, at: nameToken)
        }
        return try build(kind, nameToken: nameToken, arguments: arguments)
    }

    private func parseArguments(_ token: Token, step: String) throws(PipelineSyntaxError) -> Arguments {
        var arguments = Arguments()
        for piece in split(token, on: ",") {
            if piece.text.isEmpty {
                throw fail("empty argument to \(step); expected a value or key=value", at: piece)
            }
            if let eq = piece.text.firstIndex(of: "=") {
                let offset = piece.text.distance(from: piece.text.startIndex, to: eq)
                let chars = Array(piece.text)
                let key = trimmed(chars[0..<offset], column: piece.column)
                let value = trimmed(chars[(offset + 1)...], column: piece.column + offset + 1)
                if key.text.isEmpty {
                    throw fail("missing parameter name before \"=\"", at: piece)
                }
                if value.text.isEmpty {
                    throw fail("missing value for \(key.text)", at: piece)
                }
                if arguments.named.contains(where: { $0.key.text.asciiLowercased == key.text.asciiLowercased }) {
                    throw fail("\(key.text) is given twice", at: key)
                }
                arguments.named.append((key, value))
            } else {
                if arguments.positional != nil {
                    throw fail("\(step) takes one unnamed argument; name the others as key=value", at: piece)
                }
                arguments.positional = piece
            }
        }
        return arguments
    }

    // MARK: - Operations

    private func build(_ kind: OperationKind, nameToken: Token, arguments: Arguments) throws(PipelineSyntaxError) -> Operation {
        var reader = ArgumentReader(parser: self, kind: kind, nameToken: nameToken, arguments: arguments)
        let operation: Operation
        switch kind {
        case .scale:
            let sizeToken = try reader.requirePositional("a size WxH, e.g. scale:1024x1024")
            let size = try parseSize(sizeToken, what: "scale size", oneSideAuto: true)
            let mode: ScaleMode = try reader.named("mode", default: .fit)
            let kernel: ResampleKernel = try reader.named("kernel", default: .lanczos3)
            let enlarge: YesNo = try reader.named("enlarge", default: .yes)
            operation = .scale(size, mode: mode, kernel: kernel, enlarge: enlarge == .yes)
        case .crop:
            let spec = try reader.requirePositional("square, WxH or WxH+X+Y, e.g. crop:square")
            if spec.text.asciiLowercased == "square" {
                let gravity: Gravity = try reader.named("gravity", default: .center)
                operation = .crop(.square(gravity))
            } else if spec.text.contains("+") {
                operation = .crop(.rect(try parseRect(spec)))
            } else {
                let size = try parseSize(spec, what: "crop size")
                let gravity: Gravity = try reader.named("gravity", default: .center)
                operation = .crop(.size(size, gravity))
            }
        case .glitch:
            let seed: UInt64 = try reader.named("seed", default: 0)
            let amount = try reader.number("amount", default: 0.5, range: 0...1)
            operation = .glitch(seed: seed, amount: amount)
        case .grayscale:
            operation = .grayscale
        case .sepia:
            operation = .sepia
        case .invert:
            operation = .invert
        case .srgb:
            operation = .srgb
        case .blur:
            let sigma = try reader.primaryNumber("sigma", default: nil, range: 0.01...100, example: "blur:2")
            operation = .blur(sigma: sigma)
        case .sharpen:
            let sigma = try reader.primaryNumber("sigma", default: 1, range: 0.01...100, example: "sharpen:1")
            let amount = try reader.number("amount", default: 1, range: 0...10)
            operation = .sharpen(sigma: sigma, amount: amount)
        case .brightness:
            operation = .brightness(try reader.primaryNumber("factor", default: nil, range: 0...10, example: "brightness:1.2"))
        case .contrast:
            operation = .contrast(try reader.primaryNumber("factor", default: nil, range: 0...10, example: "contrast:1.2"))
        case .saturation:
            operation = .saturation(try reader.primaryNumber("factor", default: nil, range: 0...10, example: "saturation:0.5"))
        case .pixelate:
            let n = try reader.primaryNumber("size", default: nil, range: 1...4096, example: "pixelate:8")
            guard n == n.rounded() else {
                throw fail("pixelate size must be a whole number of pixels", at: reader.primaryToken ?? nameToken)
            }
            operation = .pixelate(Int(n))
        case .rotate:
            let token = try reader.requirePositional("90, 180 or 270, e.g. rotate:90")
            guard let degrees = Int(token.text), [90, 180, 270].contains(degrees) else {
                throw fail("rotate takes 90, 180 or 270 (degrees clockwise), not \"\(token.text)\"", at: token)
            }
            operation = .rotate(degrees)
        case .flip:
            let token = try reader.requirePositional("h or v, e.g. flip:h")
            switch token.text.asciiLowercased {
            case "h", "horizontal": operation = .flip(horizontal: true)
            case "v", "vertical": operation = .flip(horizontal: false)
            default: throw fail("flip takes h (left-right) or v (top-bottom), not \"\(token.text)\"", at: token)
            }
        case .pad:
            let size = try parseSize(try reader.requirePositional("a size WxH, e.g. pad:1024x1024"), what: "pad size")
            var background: RGBColor? = RGBColor.black
            if let token = reader.value("background") {
                if token.text.asciiLowercased == "transparent" {
                    background = nil
                } else if let color = RGBColor(hex: token.text) {
                    // Alpha 0 is a clear margin, whatever the colour; written
                    // `transparent`, as its canonical form.
                    background = color.alpha == 0 ? nil : color
                } else {
                    throw fail("background must be hex digits RRGGBB or RRGGBBAA, e.g. ffffff or ffffff80, or transparent, not \"\(token.text)\"",
                               at: token)
                }
            }
            // Every gravity but smart, which looks for detail to keep in a crop.
            let places = Gravity.allCases.filter { $0 != .smart }
            var gravity = Gravity.center
            if let token = reader.value("gravity") {
                guard let place = places.first(where: { $0.rawValue == token.text.asciiLowercased }) else {
                    throw fail("pad's gravity must be one of \(places.map(\.rawValue).joined(separator: ", ")), not \"\(token.text)\"", at: token)
                }
                gravity = place
            }
            operation = .pad(size, background: background, gravity: gravity)
        }
        try reader.finish()
        return operation
    }

    /// `WxH`, each side 1 to 65500 (libjpeg's limit).
    /// `WxH`, each side 1 to 65500; with `oneSideAuto` (scale) one side may
    /// be 0, to follow the aspect ratio.
    func parseSize(_ token: Token, what: String, oneSideAuto: Bool = false) throws(PipelineSyntaxError) -> Size {
        guard let size = Size(parsing: token.text) else {
            throw fail("\(what) must be WxH, e.g. 1024x768, not \"\(token.text)\"", at: token)
        }
        let sides = 1...65500
        let valid = sides.contains(size.width) && sides.contains(size.height)
            || oneSideAuto && (size.width == 0 && sides.contains(size.height) || size.height == 0 && sides.contains(size.width))
        guard valid else {
            let rule = oneSideAuto ? "each side must be 1 to 65500, or 0 for one side to follow the aspect ratio" : "each side must be 1 to 65500"
            throw fail("\(what) \(token.text) is out of range; \(rule)", at: token)
        }
        return size
    }

    /// `WxH+X+Y`.
    func parseRect(_ token: Token) throws(PipelineSyntaxError) -> Rect {
        let parts = token.text.asciiLowercased.split(separator: "+", omittingEmptySubsequences: false)
        let sizePart = parts.first.map(String.init) ?? ""
        guard parts.count == 3, let x = Int(parts[1]), let y = Int(parts[2]), x >= 0, y >= 0 else {
            throw fail("crop rectangle must be WxH+X+Y with X, Y >= 0, e.g. 600x400+10+20, not \"\(token.text)\"", at: token)
        }
        let size = try parseSize(Token(text: sizePart, column: token.column), what: "crop rectangle size")
        return Rect(x: x, y: y, width: size.width, height: size.height)
    }

    /// Reads named and positional arguments for one step, and reports any left unused.
    struct ArgumentReader {
        let parser: PipelineParser
        let kind: OperationKind
        let nameToken: Token
        var arguments: Arguments
        var usedPositional = false
        var usedKeys: Set<String> = []

        init(parser: PipelineParser, kind: OperationKind, nameToken: Token, arguments: Arguments) {
            self.parser = parser
            self.kind = kind
            self.nameToken = nameToken
            self.arguments = arguments
        }

        var primaryToken: Token? { arguments.positional }

        mutating func requirePositional(_ expected: String) throws(PipelineSyntaxError) -> Token {
            guard let token = arguments.positional else {
                throw parser.fail("\(kind.rawValue) needs \(expected)", at: nameToken)
            }
            usedPositional = true
            return token
        }

        mutating func value(_ key: String) -> Token? {
            usedKeys.insert(key)
            return arguments.named.first(where: { $0.key.text.asciiLowercased == key })?.value
        }

        mutating func named<T: RawRepresentable & CaseIterable>(_ key: String, default def: T) throws(PipelineSyntaxError) -> T where T.RawValue == String {
            guard let token = value(key) else { return def }
            guard let v = T(rawValue: token.text.asciiLowercased) else {
                let options = T.allCases.map(\.rawValue).joined(separator: ", ")
                throw parser.fail("\(key) must be one of \(options), not \"\(token.text)\"", at: token)
            }
            return v
        }

        mutating func named(_ key: String, default def: UInt64) throws(PipelineSyntaxError) -> UInt64 {
            guard let token = value(key) else { return def }
            guard let v = UInt64(token.text) else {
                throw parser.fail("\(key) must be a whole number from 0 to \(UInt64.max), not \"\(token.text)\"", at: token)
            }
            return v
        }

        mutating func number(_ key: String, default def: Double, range: ClosedRange<Double>) throws(PipelineSyntaxError) -> Double {
            guard let token = value(key) else { return def }
            return try parseNumber(token, key: key, range: range)
        }

        /// The operation's main number, given unnamed (`blur:2`) or by name (`blur:sigma=2`).
        mutating func primaryNumber(_ key: String, default def: Double?, range: ClosedRange<Double>, example: String) throws(PipelineSyntaxError) -> Double {
            let named = value(key)
            if let positional = arguments.positional {
                usedPositional = true
                if named != nil {
                    throw parser.fail("\(key) is given twice", at: positional)
                }
                return try parseNumber(positional, key: key, range: range)
            }
            if let named { return try parseNumber(named, key: key, range: range) }
            if let def { return def }
            throw parser.fail("\(kind.rawValue) needs a \(key), e.g. \(example)", at: nameToken)
        }

        func parseNumber(_ token: Token, key: String, range: ClosedRange<Double>) throws(PipelineSyntaxError) -> Double {
            guard token.text.isDecimalNumber, let v = Double(token.text), v.isFinite else {
                throw parser.fail("\(kind.rawValue) \(key) must be a number, not \"\(token.text)\"", at: token)
            }
            guard range.contains(v) else {
                throw parser.fail("\(kind.rawValue) \(key) \(token.text) is out of range \(formatNumber(range.lowerBound))...\(formatNumber(range.upperBound))", at: token)
            }
            return v
        }

        /// Fails on any argument the operation did not read.
        func finish() throws(PipelineSyntaxError) {
            if let positional = arguments.positional, !usedPositional {
                throw parser.fail("\(kind.rawValue) takes no unnamed argument; \(kind.parameterHelp)", at: positional)
            }
            for (key, _) in arguments.named where !usedKeys.contains(key.text.asciiLowercased) {
                throw parser.fail("\(kind.rawValue) has no parameter \"\(key.text)\"; \(kind.parameterHelp)", at: key)
            }
        }
    }
}

/// A switch key's value (`enlarge=no`).
enum YesNo: String, CaseIterable {
    case yes, no
}

/// The operation names the parser knows, with a line of help for each.
enum OperationKind: String, CaseIterable {
    case scale, crop, glitch, grayscale, sepia, invert, blur, sharpen, brightness, contrast, saturation, pixelate, rotate, flip, pad, srgb

    var parameterHelp: String {
        switch self {
        case .scale: "usage: scale:WxH[,mode=fit|fill|force][,kernel=lanczos3|bilinear|nearest][,enlarge=yes|no]"
        case .crop: "usage: crop:square[,gravity=G] | crop:WxH[,gravity=G] | crop:WxH+X+Y"
        case .glitch: "usage: glitch[:seed=N][,amount=0..1]"
        case .grayscale, .sepia, .invert, .srgb: "usage: \(rawValue) (no arguments)"
        case .blur: "usage: blur:SIGMA"
        case .sharpen: "usage: sharpen[:SIGMA][,amount=A]"
        case .brightness, .contrast, .saturation: "usage: \(rawValue):FACTOR (1 = unchanged)"
        case .pixelate: "usage: pixelate:BLOCK"
        case .rotate: "usage: rotate:90|180|270"
        case .flip: "usage: flip:h|v"
        case .pad: "usage: pad:WxH[,background=RRGGBB|RRGGBBAA|transparent][,gravity=G]"
        }
    }

    /// The known name closest to a misspelling, if one is close enough.
    static func closest(to name: String) -> OperationKind? {
        let names = allCases.map(\.rawValue)
        let limit = max(1, name.count / 3)
        return Suggestion.closest(to: name, in: names, maxDistance: limit).flatMap(OperationKind.init(rawValue:))
    }
}

extension String {
    /// The text with A–Z made a–z and nothing else changed: names, keys
    /// and keywords match without regard to ASCII case only.
    var asciiLowercased: String {
        String(decoding: utf8.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    /// Whether the text is a decimal number as pipelines write them: an
    /// optional sign, digits with an optional point (at least one digit),
    /// and an optional exponent (`e` or `E`, an optional sign, digits).
    /// Not hexadecimal, not `inf` or `nan`.
    var isDecimalNumber: Bool {
        var bytes = utf8[...]
        func digits() -> Int {
            let count = bytes.prefix(while: { (0x30...0x39).contains($0) }).count
            bytes = bytes.dropFirst(count)
            return count
        }
        if let sign = bytes.first, sign == 0x2B || sign == 0x2D { bytes = bytes.dropFirst() }
        var mantissa = digits()
        if bytes.first == 0x2E {
            bytes = bytes.dropFirst()
            mantissa += digits()
        }
        guard mantissa > 0 else { return false }
        if let e = bytes.first, e == 0x65 || e == 0x45 {
            bytes = bytes.dropFirst()
            if let sign = bytes.first, sign == 0x2B || sign == 0x2D { bytes = bytes.dropFirst() }
            guard digits() > 0 else { return false }
        }
        return bytes.isEmpty
    }
}
