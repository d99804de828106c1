/// Byte-level looks at the input that help write a clear error message.
enum Sniff {
    /// "not a JPEG (starts with 89 50 4E 47: looks like PNG)".
    static func notJPEGMessage(_ data: [UInt8]) -> String {
        let hex = firstBytes(data)
        if let kind = format(data) { return "not a JPEG (starts with \(hex): looks like \(kind))" }
        return "not a JPEG (starts with \(hex))"
    }

    /// The first four bytes in hex, "89 50 4E 47", for messages.
    static func firstBytes(_ data: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF")
        return data.prefix(4).map { String([digits[Int($0 >> 4)], digits[Int($0 & 15)]]) }.joined(separator: " ")
    }

    /// The text of a C shim's fixed-size, NUL-terminated message field (a
    /// tuple of bytes as Swift imports a `char[N]`).
    static func text<Field>(ofCString field: Field) -> String {
        withUnsafeBytes(of: field) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }

    /// The format a signature belongs to, for the common non-JPEG image files.
    static func format(_ d: [UInt8]) -> String? {
        func starts(_ sig: [UInt8], at offset: Int = 0) -> Bool {
            d.count >= offset + sig.count && Array(d[offset..<offset + sig.count]) == sig
        }
        if starts([0x89, 0x50, 0x4E, 0x47]) { return "PNG" }
        if starts(Array("GIF8".utf8)) { return "GIF" }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return "WebP" }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return "TIFF" }
        if starts(Array("ftyp".utf8), at: 4) { return "an ISO media file such as MP4 or MOV" }
        if starts(Array("BM".utf8)) { return "BMP" }
        if starts(Array("%PDF".utf8)) { return "PDF" }
        if starts([0x50, 0x4B, 0x03, 0x04]) { return "ZIP" }
        if starts([0xFF, 0x0A]) { return "JPEG XL" }
        return nil
    }

    /// The width and height in the first SOF marker, found by walking the marker
    /// segments; nil when the walk fails. Only used to word errors.
    static func frameSize(_ d: UnsafeBufferPointer<UInt8>) -> Size? {
        var i = 2
        while i + 3 < d.count {
            guard d[i] == 0xFF else { return nil }
            let marker = d[i + 1]
            if marker == 0xFF { i += 1; continue }
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { i += 2; continue }
            let length = Int(d[i + 2]) << 8 | Int(d[i + 3])
            let isSOF = (0xC0...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC
            if isSOF {
                guard i + 8 < d.count else { return nil }
                let height = Int(d[i + 5]) << 8 | Int(d[i + 6])
                let width = Int(d[i + 7]) << 8 | Int(d[i + 8])
                return Size(width: width, height: height)
            }
            if marker == 0xDA || length < 2 { return nil }
            i += 2 + length
        }
        return nil
    }
}
