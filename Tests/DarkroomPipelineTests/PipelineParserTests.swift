import DarkroomImage
import Testing

@testable import DarkroomPipeline

@Suite("Pipeline text syntax")
struct PipelineParserTests {
    @Test("parses the main pipeline and prints it canonically")
    func mainPipeline() throws {
        let p = try Pipeline(parsing: "scale:2048x2048,mode=fill | crop:square | glitch:seed=7")
        #expect(p.steps == [
            .scale(Size(width: 2048, height: 2048), mode: .fill, kernel: .lanczos3),
            .crop(.square(.center)),
            .glitch(seed: 7, amount: 0.5),
        ])
        #expect(p.canonical == "scale:2048x2048,mode=fill,kernel=lanczos3 | crop:square,gravity=center | glitch:seed=7,amount=0.5")
    }

    @Test("canonical text parses back to the same pipeline", arguments: [
        "scale:100x50",
        "scale:640x480,mode=force,kernel=nearest|crop:10x10+2+3",
        "crop:300x200,gravity=northeast | rotate:270 | flip:v",
        "grayscale|sepia|invert",
        "blur:2.5 | sharpen | sharpen:0.8,amount=2 | brightness:1.2 | contrast:0.9 | saturation:0",
        "pixelate:8 | glitch | glitch:amount=1,seed=18446744073709551615",
        "  SCALE : 10x10 , MODE = FILL  ",
    ])
    func roundTrip(_ text: String) throws {
        let p = try Pipeline(parsing: text)
        let again = try Pipeline(parsing: p.canonical)
        #expect(again == p)
        #expect(again.canonical == p.canonical)
    }

    @Test("named and unnamed primary arguments mean the same")
    func primaryArgument() throws {
        #expect(try Pipeline(parsing: "blur:2") == Pipeline(parsing: "blur:sigma=2"))
        #expect(try Pipeline(parsing: "brightness:1.5").canonical == "brightness:1.5")
        #expect(try Pipeline(parsing: "sharpen").canonical == "sharpen:1,amount=1")
    }

    struct BadCase: Sendable, CustomStringConvertible {
        var text: String
        var messagePart: String
        var column: Int
        var length: Int
        var description: String { text }
    }

    @Test("errors point at the bad token", arguments: [
        BadCase(text: "", messagePart: "empty", column: 0, length: 1),
        BadCase(text: "scale:2048x2048 | crpo:square", messagePart: "did you mean \"crop\"", column: 18, length: 4),
        BadCase(text: "frobnicate", messagePart: "expected one of scale, crop", column: 0, length: 10),
        BadCase(text: "scale", messagePart: "scale needs a size WxH", column: 0, length: 5),
        BadCase(text: "scale:20x", messagePart: "must be WxH", column: 6, length: 3),
        BadCase(text: "scale:0x0", messagePart: "or 0 for one side", column: 6, length: 3),
        BadCase(text: "scale:10x10,mdoe=fill", messagePart: "no parameter \"mdoe\"", column: 12, length: 4),
        BadCase(text: "scale:10x10,mode=fil", messagePart: "mode must be one of fit, fill, force", column: 17, length: 3),
        BadCase(text: "scale:10x10 || invert", messagePart: "empty step", column: 13, length: 1),
        BadCase(text: "crop:10x10+5", messagePart: "WxH+X+Y", column: 5, length: 7),
        BadCase(text: "crop:square,gravity=up", messagePart: "gravity must be one of", column: 20, length: 2),
        BadCase(text: "glitch:seed=-1", messagePart: "seed must be a whole number", column: 12, length: 2),
        BadCase(text: "glitch:amount=2", messagePart: "out of range 0...1", column: 14, length: 1),
        BadCase(text: "blur", messagePart: "blur needs a sigma", column: 0, length: 4),
        BadCase(text: "blur:abc", messagePart: "must be a number", column: 5, length: 3),
        BadCase(text: "rotate:45", messagePart: "90, 180 or 270", column: 7, length: 2),
        BadCase(text: "flip:x", messagePart: "flip takes h", column: 5, length: 1),
        BadCase(text: "invert:1", messagePart: "takes no unnamed argument", column: 7, length: 1),
        BadCase(text: "pixelate:2.5", messagePart: "whole number", column: 9, length: 3),
        BadCase(text: "scale:10x10,mode=fit,mode=fill", messagePart: "given twice", column: 21, length: 4),
        BadCase(text: "scale:10x10,20x20", messagePart: "one unnamed argument", column: 12, length: 5),
    ])
    func errors(_ bad: BadCase) {
        do {
            _ = try Pipeline(parsing: bad.text)
            Issue.record("expected \"\(bad.text)\" to fail")
        } catch {
            #expect(error.message.contains(bad.messagePart), "message was: \(error.message)")
            #expect(error.column == bad.column, "column for \(bad.text): \(error.column)")
            #expect(error.length == bad.length, "length for \(bad.text): \(error.length)")
            #expect(error.description.contains("\n  \(bad.text)\n"))
            #expect(error.summary.contains("at column \(bad.column + 1)"))
        }
    }

    @Test("the caret line sits under the bad token")
    func caret() throws {
        do {
            _ = try Pipeline(parsing: "scale:2048x2048 | crpo:square")
            Issue.record("expected failure")
        } catch {
            let lines = error.description.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(lines.count == 3)
            #expect(lines[2] == "                    ^^^^")
        }
    }
}
