/// The whole-picture decode the PNG, WebP, GIF, HEIF and TIFF shims share: rows of
/// `width` × `height` RGBX pixels for the shim to fill, and the
/// cancellation flag handed to C unretained, kept alive for the call.
enum ShimDecode {
    /// Calls `decode` with the input bytes, the rows, their stride and the
    /// flag's context for the shim's stop question; `decode` says whether
    /// it filled the rows. Returns the pixels, or nil when it did not.
    static func rgbx(
        _ bytes: [UInt8], width: Int, height: Int, cancellation: CancellationFlag,
        _ decode: (UnsafeBufferPointer<UInt8>, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutableRawPointer) -> Bool
    ) -> [UInt8]? {
        let stride = width * Image.bytesPerPixel
        var filled = false
        // The flag goes to C unretained; this call keeps it alive until the
        // decode, the only user of the pointer, has returned.
        let pixels = withExtendedLifetime(cancellation) {
            bytes.withUnsafeBufferPointer { data in
                [UInt8](unsafeUninitializedCapacity: stride * height) { out, count in
                    filled = decode(data, out.baseAddress, stride, Unmanaged.passUnretained(cancellation).toOpaque())
                    count = filled ? stride * height : 0
                }
            }
        }
        return filled ? pixels : nil
    }
}
