/// ICC v2 profiles built byte by byte for the colour tests, so that the
/// profiles, like the colour science that checks them, are written out
/// here rather than taken from the library under test.
enum ICCProfiles {
    static let d50 = [0.9642, 1.0, 0.8249]

    static func be16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    /// An s15Fixed16Number.
    static func s15(_ v: Double) -> [UInt8] { be32(UInt32(bitPattern: Int32((v * 65_536).rounded()))) }
    /// An XYZType tag.
    static func xyz(_ v: [Double]) -> [UInt8] { Array("XYZ ".utf8) + [0, 0, 0, 0] + v.flatMap(s15) }

    /// A version 2.1 profile of `deviceClass` ("mntr", "prtr"), data colour
    /// space `colorSpace` ("RGB ", "CMYK") and connection space `pcs`
    /// ("XYZ ", "Lab "), D50, with `tags` in order, each 4-byte aligned.
    static func assemble(deviceClass: String, colorSpace: String, pcs: String, tags: [(String, [UInt8])]) -> [UInt8] {
        var table: [UInt8] = be32(UInt32(tags.count))
        var data: [UInt8] = []
        let dataStart = 128 + 4 + 12 * tags.count
        for (signature, bytes) in tags {
            table += Array(signature.utf8) + be32(UInt32(dataStart + data.count)) + be32(UInt32(bytes.count))
            data += bytes
            while data.count % 4 != 0 { data.append(0) }
        }
        var header = [UInt8](repeating: 0, count: 128)
        header.replaceSubrange(0..<4, with: be32(UInt32(128 + table.count + data.count)))
        header.replaceSubrange(8..<12, with: be32(0x0210_0000))
        header.replaceSubrange(12..<16, with: Array(deviceClass.utf8))
        header.replaceSubrange(16..<20, with: Array(colorSpace.utf8))
        header.replaceSubrange(20..<24, with: Array(pcs.utf8))
        header.replaceSubrange(36..<40, with: Array("acsp".utf8))
        header.replaceSubrange(68..<80, with: d50.flatMap(s15))
        return header + table + data
    }
}
