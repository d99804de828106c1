/// The file formats a job's source may be in.
public enum SourceFormat: String, Sendable, CaseIterable {
    case jpeg, png, webp, gif, heif, tiff

    /// The format whose signature `bytes` start with, or nil. Only the
    /// first bytes are looked at: a JPEG's SOI marker (FF D8), PNG's
    /// eight-byte signature, "RIFF", a size and "WEBP", "GIF87a" or
    /// "GIF89a", an ISO media "ftyp" box naming a HEIF brand (HEIC, AVIF),
    /// or a TIFF byte order mark ("II*\0", "MM\0*", or BigTIFF's "+").
    public init?(signatureOf bytes: [UInt8]) {
        if bytes.starts(with: [0xFF, 0xD8]) {
            self = .jpeg
        } else if bytes.starts(with: SourceFormat.pngSignature) {
            self = .png
        } else if bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WEBP".utf8) {
            self = .webp
        } else if GIF.isGIF(bytes) {
            self = .gif
        } else if HEIF.isHEIF(bytes) {
            self = .heif
        } else if TIFF.isTIFF(bytes) {
            self = .tiff
        } else {
            return nil
        }
    }

    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
}

/// What a source's header says, whatever its format: what a job plans
/// with before any pixel is decoded.
public struct SourceHeader: Sendable, Equatable {
    public var format: SourceFormat
    /// The size of the pixels as stored.
    public var storedSize: Size
    /// The EXIF orientation (a JPEG's APP1, a PNG's eXIf, a WebP's EXIF
    /// chunk, a TIFF's Orientation tag).
    public var orientation: Orientation
    /// The size once the orientation is applied: the size the pipeline sees.
    public var uprightSize: Size
    /// The embedded profile when it is an RGB profile that describes the
    /// decoded pixels: the profile outputs carry and `srgb` converts from.
    public var rgbProfile: [UInt8]?
    /// Whether the file has transparency, which decoding composites onto
    /// `Source.background` unless asked to keep it (`keepsAlpha`).
    public var hasAlpha: Bool
    /// A JPEG's own header, which its decoder's shortcuts (shrink on load,
    /// region, luma) plan with; nil for the other formats.
    public var jpeg: JPEGHeader?
    /// A plain CMYK TIFF's CMYK profile, which its decode converts the inks
    /// through; nil for the other formats (a CMYK JPEG's is in `jpeg`).
    public var cmykProfile: [UInt8]? = nil

    /// Whether a decode can keep this source's transparency
    /// (`DecodeOptions.keepAlpha`): a PNG, WebP, GIF, HEIF or TIFF with
    /// alpha. A CMYK TIFF converted through its profile is composited.
    public var keepsAlpha: Bool { hasAlpha && format != .jpeg && cmykProfile == nil }
}

/// A job's source image in any of the formats it may be in: JPEG, PNG,
/// WebP, GIF (its first picture), HEIF (HEIC or AVIF, its primary
/// image) or TIFF (its first page). Its header is read first (limits are checked there, before any
/// pixel exists); a JPEG is then decoded through `JPEG.decode` with the
/// pipeline's load plan, and the others whole (`decode`).
public enum Source {
    /// What transparent pixels are laid over: white, the page most
    /// pictures with transparency (logos, screenshots, stickers) are made
    /// to be seen on. A job keeps the transparency only for outputs that
    /// have alpha (PNG, WebP, AVIF); a JPEG is laid over this.
    public static let background: (UInt8, UInt8, UInt8) = (255, 255, 255)

    /// Reads the header of a source in any of the formats, after checking
    /// its signature. Bytes that start like none of them fail with
    /// `.unsupportedFormat`, naming what they look like.
    public static func readHeader(_ bytes: [UInt8], limits: DecodeLimits = .default) throws(ImageError) -> SourceHeader {
        if bytes.isEmpty { throw ImageError(.empty, "empty input (0 bytes)") }
        switch format(of: bytes) {
        case .jpeg:
            let jpeg = try JPEG.readHeader(bytes, limits: limits)
            return SourceHeader(format: .jpeg, storedSize: jpeg.storedSize, orientation: jpeg.orientation,
                                uprightSize: jpeg.uprightSize, rgbProfile: jpeg.rgbProfile, hasAlpha: false, jpeg: jpeg)
        case .png:
            let png = try PNG.readHeader(bytes, limits: limits)
            return SourceHeader(format: .png, storedSize: png.storedSize, orientation: png.orientation,
                                uprightSize: png.uprightSize, rgbProfile: rgb(png.iccProfile), hasAlpha: png.hasAlpha, jpeg: nil)
        case .webp:
            let webp = try WebP.readHeader(bytes, limits: limits)
            if webp.isAnimated {
                throw ImageError(.unsupported, "animated WebP is not supported (only still pictures are decoded)")
            }
            let orientation = WebP.orientation(bytes) ?? .up
            return SourceHeader(format: .webp, storedSize: webp.size, orientation: orientation,
                                uprightSize: orientation.uprightSize(ofStored: webp.size), rgbProfile: rgb(WebP.iccProfile(bytes)),
                                hasAlpha: webp.hasAlpha, jpeg: nil)
        case .gif:
            let gif = try GIF.readHeader(bytes, limits: limits)
            return SourceHeader(format: .gif, storedSize: gif.size, orientation: .up, uprightSize: gif.size, rgbProfile: nil,
                                hasAlpha: gif.hasAlpha, jpeg: nil)
        case .heif:
            // Decoded upright by libheif: no orientation left to apply.
            let heif = try HEIF.readHeader(bytes, limits: limits)
            return SourceHeader(format: .heif, storedSize: heif.size, orientation: .up, uprightSize: heif.size,
                                rgbProfile: rgb(heif.iccProfile), hasAlpha: heif.hasAlpha, jpeg: nil)
        case .tiff:
            let tiff = try TIFF.readHeader(bytes, limits: limits)
            return SourceHeader(format: .tiff, storedSize: tiff.size, orientation: tiff.orientation,
                                uprightSize: tiff.orientation.uprightSize(ofStored: tiff.size), rgbProfile: rgb(tiff.iccProfile),
                                hasAlpha: tiff.hasAlpha, jpeg: nil, cmykProfile: tiff.cmykProfile)
        case nil:
            throw ImageError(.unsupportedFormat, unsupportedMessage(bytes))
        }
    }

    /// The format a source is read as. A file cut inside its signature is
    /// still given to its own reader, which says it is truncated: PNG's
    /// first bytes, or "RIFF" (whose size and "WEBP" may be missing). A
    /// lone FF is no JPEG yet.
    static func format(of bytes: [UInt8]) -> SourceFormat? {
        if let format = SourceFormat(signatureOf: bytes) { return format }
        if bytes.count < 8, SourceFormat.pngSignature.starts(with: bytes) { return .png }
        if bytes.count < 12, bytes.starts(with: "RIFF".utf8) || "RIFF".utf8.starts(with: bytes) { return .webp }
        if bytes.count < 6, bytes.count >= 3, "GIF8".utf8.starts(with: bytes.prefix(4)) { return .gif }
        if bytes.count < 4, bytes.count >= 2, bytes.starts(with: "II".utf8) || bytes.starts(with: "MM".utf8) { return .tiff }
        return nil
    }

    /// Decodes a source upright. A JPEG goes through `JPEG.decode` with
    /// `options` (the pipeline's load plan: shrink, region, luma), which
    /// turns it upright itself; a PNG, WebP, GIF, HEIF or TIFF is decoded whole within
    /// `options.limits`, composited onto `background` and turned upright.
    /// With `options.keepAlpha`, a source whose header `keepsAlpha` is not
    /// composited: its fourth bytes hold its alpha (see `AlphaImage`).
    public static func decode(
        _ bytes: [UInt8], header: SourceHeader, options: DecodeOptions = DecodeOptions(),
        cancellation: CancellationFlag = .never
    ) throws(ImageError) -> Image {
        // A JPEG decodes with its load plan. The others decode at the
        // header's size, checked against these limits, instead of each
        // reading its header again; each shim checks the file against it.
        let limits = options.limits
        let keep = options.keepAlpha && header.keepsAlpha
        let stored: Image
        switch header.format {
        case .jpeg: return try JPEG.decode(bytes, options: options, cancellation: cancellation).image
        case .png: stored = try PNG.decode(bytes, size: try limited(header, limits), limits: limits, background: background, keepAlpha: keep,
                                           cancellation: cancellation)
        case .webp: stored = try WebP.decode(bytes, size: try limited(header, limits), background: background, keepAlpha: keep,
                                             cancellation: cancellation)
        case .gif: stored = try GIF.decode(bytes, size: try limited(header, limits), limits: limits, background: background, keepAlpha: keep,
                                           cancellation: cancellation)
        case .heif: stored = try HEIF.decode(bytes, size: try limited(header, limits), limits: limits, background: background, keepAlpha: keep,
                                             cancellation: cancellation)
        case .tiff: stored = try TIFF.decode(bytes, size: try limited(header, limits), cmykProfile: header.cmykProfile, limits: limits,
                                             background: background, keepAlpha: keep, cancellation: cancellation)
        }
        if header.orientation == .up { return stored }
        return try stored.applying(header.orientation, cancellation: cancellation)
    }

    /// The header's stored size, within `limits` (the header may have been
    /// read with others).
    private static func limited(_ header: SourceHeader, _ limits: DecodeLimits) throws(ImageError) -> Size {
        try JPEG.check(header.storedSize, limits: limits)
        return header.storedSize
    }

    /// An embedded profile kept only when it is an RGB profile: a gray or
    /// CMYK profile does not describe the RGB pixels decoded.
    private static func rgb(_ profile: [UInt8]?) -> [UInt8]? {
        guard let profile, ICCHeader.colorSpace(profile) == "RGB " else { return nil }
        return profile
    }

    /// "not a JPEG, PNG, WebP, GIF, HEIF or TIFF image (starts with 42 4D 36 00: looks like BMP)".
    static func unsupportedMessage(_ bytes: [UInt8]) -> String {
        let hex = Sniff.firstBytes(bytes)
        if let kind = Sniff.format(bytes) { return "not a JPEG, PNG, WebP, GIF, HEIF or TIFF image (starts with \(hex): looks like \(kind))" }
        return "not a JPEG, PNG, WebP, GIF, HEIF or TIFF image (starts with \(hex))"
    }
}
