/// The whole-picture decode the PNG, WebP, GIF, HEIF and TIFF shims share: rows of
/// `width` × `height` RGBX pixels for the shim to fill, and the
/// cancellation flag handed to C unretained, kept alive for the call; and
/// the encode the WebP and PNG shims share.
enum ShimDecode {
    /// Calls `decode` with the input bytes, the rows, their stride and the
    /// flag's context for the shim's stop question (`shouldStop`); `decode`
    /// returns nil when it filled the rows, or why it did not, which is
    /// thrown. Returns the pixels.
    static func rgbx(
        _ bytes: [UInt8], width: Int, height: Int, cancellation: CancellationFlag,
        _ decode: (UnsafeBufferPointer<UInt8>, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutableRawPointer) -> ImageError?
    ) throws(ImageError) -> [UInt8] {
        let stride = width * Image.bytesPerPixel
        var failure: ImageError?
        // The flag goes to C unretained; this call keeps it alive until the
        // decode, the only user of the pointer, has returned.
        let pixels = withExtendedLifetime(cancellation) {
            bytes.withUnsafeBufferPointer { data in
                [UInt8](unsafeUninitializedCapacity: stride * height) { out, count in
                    failure = decode(data, out.baseAddress, stride, Unmanaged.passUnretained(cancellation).toOpaque())
                    count = failure == nil ? stride * height : 0
                }
            }
        }
        if let failure { throw failure }
        return pixels
    }

    /// The encode the WebP and PNG shims share: `encode` gets the samples,
    /// the ICC profile (empty for none), the flag's context for the stop
    /// question, and the places for the buffer the shim allocates and its
    /// length; it returns nil when the buffer holds the file, or why not,
    /// which is thrown. The buffer is copied out and released with `free`.
    static func encoded(
        _ samples: [UInt8], iccProfile: [UInt8]?, cancellation: CancellationFlag,
        free: (UnsafeMutablePointer<UInt8>?) -> Void,
        _ encode: (UnsafePointer<UInt8>?, UnsafeBufferPointer<UInt8>, UnsafeMutableRawPointer,
                   inout UnsafeMutablePointer<UInt8>?, inout Int) -> ImageError?
    ) throws(ImageError) -> [UInt8] {
        try cancellation.check()
        let profile = iccProfile ?? []
        var out: UnsafeMutablePointer<UInt8>? = nil
        var length = 0
        defer { free(out) }
        // The flag goes to C unretained; this call keeps it alive until the
        // encode, the only user of the pointer, has returned.
        let failure = withExtendedLifetime(cancellation) {
            samples.withUnsafeBufferPointer { pixels in
                profile.withUnsafeBufferPointer { icc in
                    encode(pixels.baseAddress, icc, Unmanaged.passUnretained(cancellation).toOpaque(), &out, &length)
                }
            }
        }
        if let failure { throw failure }
        return try cancellation.checked(Array(UnsafeBufferPointer(start: out, count: length)))
    }

    /// Every shim's stop question, asked with the flag as its context
    /// (`CancellationFlag.shimShouldStop`). The shims' own typedefs of it
    /// are all `int (*)(void *)`.
    static let shouldStop: @convention(c) (UnsafeMutableRawPointer?) -> Int32 = { CancellationFlag.shimShouldStop($0) }
}
