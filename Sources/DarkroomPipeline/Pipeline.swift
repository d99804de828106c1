import Foundation
import DarkroomImage

/// A parsed pipeline: the steps a job runs on its image, in order.
///
/// Build one from text with `Pipeline(parsing:)`; print it back with `canonical`,
/// the one form the wire protocol and the store carry:
///
///     let p = try Pipeline(parsing: "scale:2048x2048,mode=fill | crop:square | glitch:seed=7")
///     p.canonical  // "scale:2048x2048,mode=fill,kernel=lanczos3 | crop:square,gravity=center | glitch:seed=7,amount=0.5"
public struct Pipeline: Sendable, Equatable, CustomStringConvertible {
    public var steps: [Operation]

    public init(_ steps: [Operation]) {
        self.steps = steps
    }

    /// Parses the one-line text form. Errors point at the bad token.
    public init(parsing text: String) throws(PipelineSyntaxError) {
        self.steps = try PipelineParser(text).parse()
    }

    /// The canonical text: each step's canonical form joined by `" | "`.
    /// Parsing the canonical text gives back an equal pipeline.
    public var canonical: String {
        steps.map(\.canonical).joined(separator: " | ")
    }

    public var description: String { canonical }

    /// The size each step produces, from the upright input size, checking every
    /// step against the size it will receive and against the output limits. Runs
    /// on the header alone, before any pixel is decoded, so a job that cannot
    /// succeed fails at once with the step that would have failed.
    public func plannedSizes(from input: Size, limits: DecodeLimits) throws(PipelineFailure) -> [Size] {
        var sizes: [Size] = []
        var size = input
        for (index, step) in steps.enumerated() {
            do {
                size = try step.outputSize(for: size)
            } catch {
                throw PipelineFailure(stage: .step(index: index + 1, text: step.canonical), error: error)
            }
            if size.width > limits.maxSide || size.height > limits.maxSide || size.pixelCount > limits.maxPixels {
                let error = ImageError(.limitExceeded, "output \(size) is over the limits (\(formatMegapixels(limits.maxPixels)) megapixels, \(limits.maxSide) pixels a side)")
                throw PipelineFailure(stage: .step(index: index + 1, text: step.canonical), error: error)
            }
            sizes.append(size)
        }
        return sizes
    }

    /// Every operation with its syntax, for `--help`.
    public static let reference: String = OperationKind.allCases.map { kind in
        "  \(kind.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0)) \(kind.parameterHelp.replacingOccurrences(of: "usage: ", with: ""))"
    }.joined(separator: "\n")
}

func formatMegapixels(_ pixels: Int) -> String {
    let mp = Double(pixels) / 1_000_000
    return mp == mp.rounded() ? String(Int(mp)) : format1(mp)
}

private func format1(_ value: Double) -> String {
    let scaled = (value * 10).rounded() / 10
    return "\(scaled)"
}
