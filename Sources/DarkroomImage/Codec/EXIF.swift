/// A minimal, defensive EXIF reader: it finds the orientation tag (0x0112) in
/// IFD0 of an APP1 "Exif\0\0" body. Every read is bounds-checked; anything
/// malformed yields nil, which callers treat as `.up`.
enum EXIF {
    /// The orientation in an APP1 body that starts with "Exif\0\0", or nil.
    static func orientation(app1 body: [UInt8]) -> Orientation? {
        let exifID: [UInt8] = [0x45, 0x78, 0x69, 0x66, 0, 0]
        guard body.count >= 6, Array(body[0..<6]) == exifID else { return nil }
        return orientation(tiff: Array(body[6...]))
    }

    /// The orientation in a TIFF structure (the part after "Exif\0\0").
    static func orientation(tiff t: [UInt8]) -> Orientation? {
        guard t.count >= 8 else { return nil }
        let little: Bool
        if t[0] == 0x49 && t[1] == 0x49 {
            little = true
        } else if t[0] == 0x4D && t[1] == 0x4D {
            little = false
        } else {
            return nil
        }
        func u16(_ at: Int) -> Int? {
            guard at >= 0, at <= t.count - 2 else { return nil }
            let a = Int(t[at]), b = Int(t[at + 1])
            return little ? a | b << 8 : a << 8 | b
        }
        func u32(_ at: Int) -> Int? {
            guard let hi = u16(little ? at + 2 : at), let lo = u16(little ? at : at + 2) else { return nil }
            return hi << 16 | lo
        }
        guard u16(2) == 42, let ifd = u32(4), ifd >= 8, let count = u16(ifd) else { return nil }
        for i in 0..<count {
            let entry = ifd + 2 + i * 12
            guard let tag = u16(entry), let type = u16(entry + 2), let n = u32(entry + 4) else { return nil }
            guard tag == 0x0112 else { continue }
            // SHORT is what the standard says; accept LONG too, as some writers use it.
            let value: Int?
            switch (type, n) {
            case (3, 1): value = u16(entry + 8)
            case (4, 1): value = u32(entry + 8)
            default: value = nil
            }
            return value.flatMap { Orientation(rawValue: $0) }
        }
        return nil
    }
}
