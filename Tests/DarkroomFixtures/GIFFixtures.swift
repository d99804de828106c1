import CGIF

/// GIF files for tests, written by giflib's encoder (through CGIF): the
/// decoder is then checked against pixels the test chose.
public enum GIFFixtures {
    /// One picture: its place on the screen, its palette indices row by
    /// row, and its transparent index, if any.
    public struct Frame: Sendable {
        public var left = 0
        public var top = 0
        public var width: Int
        public var height: Int
        public var interlaced = false
        public var transparent: Int? = nil
        public var indices: [UInt8]

        public init(left: Int = 0, top: Int = 0, width: Int, height: Int, interlaced: Bool = false, transparent: Int? = nil,
                    indices: [UInt8]) {
            precondition(indices.count == width * height, "a frame holds width × height indices")
            self.left = left
            self.top = top
            self.width = width
            self.height = height
            self.interlaced = interlaced
            self.transparent = transparent
            self.indices = indices
        }
    }

    /// A GIF89a of `frames` on a `width` × `height` screen, with `palette`
    /// (2, 4, ... 256 colours) as its global colour table.
    public static func gif(width: Int, height: Int, palette: [(UInt8, UInt8, UInt8)], frames: [Frame]) -> [UInt8] {
        let flat = palette.flatMap { [$0.0, $0.1, $0.2] }
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        let status = frames.map(\.indices).withPointers { pointers in
            let specs = zip(frames, pointers).map { frame, pointer in
                dr_gif_frame(left: Int32(frame.left), top: Int32(frame.top), width: Int32(frame.width), height: Int32(frame.height),
                             interlaced: frame.interlaced ? 1 : 0, transparent: Int32(frame.transparent ?? -1), indices: pointer)
            }
            return specs.withUnsafeBufferPointer {
                dr_gif_encode($0.baseAddress, Int32(frames.count), Int32(width), Int32(height), flat, Int32(palette.count), &out, &length)
            }
        }
        precondition(status == 0 && out != nil, "giflib could not write the fixture")
        defer { dr_gif_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }

    /// A palette of `count` colours, each distinct and easy to tell apart.
    public static func palette(_ count: Int) -> [(UInt8, UInt8, UInt8)] {
        (0..<count).map { index in
            (UInt8(truncatingIfNeeded: index &* 37 &+ 11), UInt8(truncatingIfNeeded: index &* 91 &+ 3), UInt8(truncatingIfNeeded: 250 &- index &* 13))
        }
    }
}

extension Array where Element == [UInt8] {
    /// Calls `body` with a stable pointer to each array's bytes.
    fileprivate func withPointers<R>(_ body: ([UnsafePointer<UInt8>?]) -> R) -> R {
        var pointers: [UnsafePointer<UInt8>?] = []
        func nest(_ index: Int) -> R {
            if index == count { return body(pointers) }
            return self[index].withUnsafeBufferPointer { buffer in
                pointers.append(buffer.baseAddress)
                return nest(index + 1)
            }
        }
        return nest(0)
    }
}
