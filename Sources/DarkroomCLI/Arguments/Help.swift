/// Renders help in the layout users know from swift-argument-parser:
/// OVERVIEW, USAGE, ARGUMENTS, OPTIONS, SUBCOMMANDS.
extension CommandSpec {
    /// `darkroom process <inputs> ... --ops <PIPELINE> [--out <DIR>] ...`
    func usageLine(program: String) -> String {
        var parts = ["\(program) \(name)"]
        parts += arguments.map(\.usage)
        for option in options {
            let text = option.isFlag ? "--\(option.name)" : "--\(option.name) <\(option.valueName!)>"
            let required = option.defaultValue == nil && requiredOptions.contains(option.name)
            parts.append(required ? text : "[\(text)]")
        }
        return parts.joined(separator: " ")
    }

    /// Options that have no default and must be given (documented in help).
    var requiredOptions: Set<String> {
        Set(options.filter { $0.help.hasPrefix("(required)") }.map(\.name))
    }

    func help(program: String) -> String {
        var out = "OVERVIEW: \(abstract)\n"
        if let discussion { out += "\n\(discussion)\n" }
        out += "\nUSAGE: \(usageLine(program: program))\n"
        if !arguments.isEmpty {
            out += "\nARGUMENTS:\n"
            for argument in arguments {
                out += row("<\(argument.name)>", argument.help)
            }
        }
        out += "\nOPTIONS:\n"
        for option in allOptions {
            var text = option.help
            if let def = option.defaultValue { text += " (default: \(def))" }
            if let variable = option.environment { text += " (or $\(variable))" }
            out += row(option.signature, text)
        }
        return out
    }
}

/// One help row: the signature padded to a column, wrapped text after it.
func row(_ left: String, _ text: String, width: Int = 26) -> String {
    let lines = wrap(text, to: 80 - width - 2)
    var out = ""
    if left.count + 2 < width {
        out += "  " + left.padded(to: width - 2) + (lines.first ?? "") + "\n"
    } else {
        out += "  \(left)\n" + String(repeating: " ", count: width) + (lines.first ?? "") + "\n"
    }
    for line in lines.dropFirst() {
        out += String(repeating: " ", count: width) + line + "\n"
    }
    return out
}

func wrap(_ text: String, to width: Int) -> [String] {
    var lines: [String] = []
    var current = ""
    for word in text.split(separator: " ") {
        if !current.isEmpty, current.count + 1 + word.count > width {
            lines.append(current)
            current = ""
        }
        current += current.isEmpty ? String(word) : " " + word
    }
    if !current.isEmpty { lines.append(current) }
    return lines
}

extension String {
    func padded(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
