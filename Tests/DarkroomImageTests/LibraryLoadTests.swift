import CLoader
import Foundation
import Testing

/// CLoader, which the libraries loaded on first use (libheif, libtiff,
/// libcurl, libmicrohttpd) go through: a table filled from a real library,
/// and what a machine without it, or with another version, is told.
@Suite("Libraries loaded on first use")
struct LibraryLoadTests {
    /// Loads `symbols` from `soname`; the failure's words, or nil.
    static func load(_ soname: String, _ names: [String]) -> (failure: String?, found: Int) {
        var slots = [UnsafeMutableRawPointer?](repeating: nil, count: names.count)
        var text = [CChar](repeating: 0, count: 512)
        let failure: String? = slots.withUnsafeMutableBufferPointer { slotBuffer in
            let cNames = names.map { strdup($0) }
            defer { cNames.forEach { free($0) } }
            var symbols = (0..<names.count).map { index in
                dr_symbol(name: cNames[index], slot: slotBuffer.baseAddress! + index)
            }
            return text.withUnsafeMutableBufferPointer { textBuffer in
                dr_load_library("libtiff", soname, "libtiff6 on Debian 12", &symbols, symbols.count, textBuffer.baseAddress, textBuffer.count)
                    .map { String(cString: $0) }
            }
        }
        return (failure, slots.filter { $0 != nil }.count)
    }

    @Test("every function of a table is found in the library")
    func found() {
        let result = Self.load("libtiff.so.6", ["TIFFClose", "TIFFRGBAImageGet", "TIFFClientOpenExt"])
        #expect(result.failure == nil && result.found == 3)
    }

    @Test("a missing library is named, with the package that provides it")
    func missingLibrary() {
        let result = Self.load("libtiff.so.99", ["TIFFClose"])
        #expect(result.failure?.hasPrefix("libtiff could not be loaded (") == true, "\(String(describing: result.failure))")
        #expect(result.failure?.hasSuffix("install the package that provides libtiff.so.99, libtiff6 on Debian 12)") == true)
    }

    @Test("a library without one of the functions names the first one missing")
    func missingFunction() {
        let result = Self.load("libtiff.so.6", ["TIFFClose", "TIFFNoSuchFunction", "TIFFAlsoMissing"])
        #expect(result.failure == "libtiff could not be used: libtiff.so.6 has no TIFFNoSuchFunction")
    }
}
