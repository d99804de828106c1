import DarkroomImage
import DarkroomProtocol

/// What the storage node checks in a STORE's two images before it keeps
/// anything (DRK1 section 11): each must be a JPEG, a still WebP, a PNG or
/// an AVIF whose header is within the limits and gives exactly the size the STORE
/// declares for it (frames 6 and 7). The full-resolution image is checked
/// first; the first failure is the answer, and the STORE is not stored.
///
/// Only the header is read (libjpeg's `jpeg_read_header`, through
/// `JPEG.readHeader`, libwebp's `WebPGetFeatures`, through
/// `WebP.readHeader`, libpng's chunks up to IDAT, through
/// `PNG.readHeader`, or libheif's boxes up to the primary image's
/// properties, through `HEIF.readHeader`): the markers up to the first scan, a few microseconds
/// for a worker's output whatever its pixel count, and no pixel buffer. The entropy-coded data
/// after the header is not looked at, so a file whose scan is cut short or
/// damaged passes: finding that out costs a full decode, and a worker that
/// sends such a file has failed to encode, which no check here would mend.
/// The check is against bytes a peer made up, not against a worker's bugs.
struct ImageCheck: Sendable {
    /// The limits each header must be within; warnings are always errors, so
    /// a header that ends early is refused rather than guessed at.
    let limits: DecodeLimits

    init(limits: DecodeLimits) {
        var limits = limits
        limits.failOnWarning = true
        self.limits = limits
    }

    /// Nil when both images pass, else the ERROR to answer: `invalid-image`,
    /// or `too-large` for an image over the limits. The reason names the
    /// image ("full" or "thumbnail") and what is wrong with it.
    func failure(of request: StoreRequest) -> ProtocolError? {
        if let failure = failure(of: request.full, declared: request.fullSize, name: "full") { return failure }
        return failure(of: request.thumbnail, declared: request.thumbnailSize, name: "thumbnail")
    }

    /// One image against its declared size; `name` starts the reason.
    func failure(of bytes: [UInt8], declared: ImageSize, name: String) -> ProtocolError? {
        let size: Size
        if WebP.isWebP(bytes) {
            let header: WebPHeader
            do {
                header = try WebP.readHeader(bytes, limits: limits)
            } catch {
                // libwebp's own words: the JPEG wording below speaks of scans.
                return ProtocolError(Self.code(of: error), "\(name): \(error.message)")
            }
            guard !header.isAnimated else {
                return ProtocolError(.invalidImage, "\(name): an animated WebP (outputs are still images)")
            }
            size = header.size
        } else if PNG.isPNG(bytes) {
            do {
                // IHDR's size; an eXIf orientation is not applied (workers
                // write none).
                size = try PNG.readHeader(bytes, limits: limits).storedSize
            } catch {
                return ProtocolError(Self.code(of: error), "\(name): \(error.message)")
            }
        } else if HEIF.isHEIF(bytes) {
            let header: HEIFHeader
            do {
                header = try HEIF.readHeader(bytes, limits: limits)
            } catch {
                return ProtocolError(Self.code(of: error), "\(name): \(error.message)")
            }
            // Workers write AVIF; a HEIC is not an output DRK1 names.
            guard header.isAVIF else { return ProtocolError(.invalidImage, "\(name): a HEIF that is not an AVIF (coded with HEVC, not AV1)") }
            size = header.size
        } else {
            do {
                // The size in the frame header (SOF), as the pixels are
                // stored: an EXIF orientation is not applied (workers write
                // none).
                size = try JPEG.readHeader(bytes, limits: limits).storedSize
            } catch {
                return ProtocolError(Self.code(of: error), "\(name): \(Self.reason(of: error))")
            }
        }
        guard size.width == Int(declared.width), size.height == Int(declared.height) else {
            return ProtocolError(
                .invalidImage,
                "\(name): header says \(size.width)x\(size.height), STORE declares \(declared.width)x\(declared.height)")
        }
        return nil
    }

    /// Over a limit is `too-large`, as DRK1 names it; anything else about
    /// the bytes is `invalid-image`. Both are 3xx: a worker does not retry.
    static func code(of error: ImageError) -> ErrorCode {
        error.code == .limitExceeded ? .tooLarge : .invalidImage
    }

    /// The image engine's message, worded for a header: the engine's texts
    /// speak of decoding a whole image.
    static func reason(of error: ImageError) -> String {
        switch error.code {
        case .notJPEG:
            // Bytes that start like neither format; "not a JPEG (starts with
            // 89 50 4E 47: looks like PNG)" keeps its detail.
            error.message.hasPrefix("not a JPEG (")
                ? "not a JPEG, WebP, PNG or AVIF (no SOI marker, RIFF WEBP header, PNG signature or HEIF ftyp box; " + error.message.dropFirst("not a JPEG (".count)
                : "not a JPEG, WebP, PNG or AVIF (no SOI marker, RIFF WEBP header, PNG signature or HEIF ftyp box)"
        case .truncated: "truncated header (the data ends before the first scan)"
        case .empty: "empty (0 bytes)"
        default: error.message
        }
    }
}
