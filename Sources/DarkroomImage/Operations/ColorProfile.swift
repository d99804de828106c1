import CLCMS
import Synchronization

/// What an ICC profile's header says.
public enum ICCHeader {
    /// The data colour space the profile's header names, as its four
    /// characters ("RGB ", "CMYK", "GRAY"); nil for fewer than 128 bytes.
    public static func colorSpace(_ profile: [UInt8]) -> String? {
        profile.count >= 128 ? String(decoding: profile[16..<20], as: UTF8.self) : nil
    }
}

/// What the pixels a profile describes are, as the engine holds them.
enum ProfileInput: Hashable, Sendable {
    /// RGBX pixels in an RGB profile.
    case rgbx
    /// A JPEG's CMYK samples in a CMYK profile; `inverted` when 0 is full
    /// ink, as in Adobe's files.
    case cmyk(inverted: Bool)

    var c: dr_color_input {
        switch self {
        case .rgbx: DR_COLOR_INPUT_RGBX
        case .cmyk(let inverted): inverted ? DR_COLOR_INPUT_CMYK_INVERTED : DR_COLOR_INPUT_CMYK
        }
    }
}

/// A prepared conversion from one ICC profile (RGB, or CMYK) to sRGB.
///
/// `@unchecked Sendable`: the C transform is made once, in `init`, and
/// never changed afterwards. It is made without Little CMS's one-pixel
/// cache (`cmsFLAGS_NOCACHE`), which is its only mutable state, so
/// `cmsDoTransform` only reads it and any number of threads may apply it at
/// once. It is freed in `deinit`, when no thread holds it any more.
final class SRGBTransform: @unchecked Sendable {
    private let transform: OpaquePointer

    /// nil, with the reason, when the profile cannot be used.
    static func make(_ profile: [UInt8], input: ProfileInput = .rgbx) -> Result<SRGBTransform, ProfileFailure> {
        var message = [CChar](repeating: 0, count: 256)
        let made = profile.withUnsafeBufferPointer { icc in
            message.withUnsafeMutableBufferPointer { dr_srgb_transform_create(icc.baseAddress, icc.count, input.c, $0.baseAddress, $0.count) }
        }
        guard let made else {
            return .failure(ProfileFailure(reason: String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        return .success(SRGBTransform(made))
    }

    private init(_ transform: OpaquePointer) {
        self.transform = transform
    }

    deinit { dr_srgb_transform_destroy(transform) }

    /// Converts `count` pixels at `pixels` in place, four bytes each, into RGBX.
    func apply(_ pixels: UnsafeMutablePointer<UInt8>, count: Int) {
        dr_srgb_transform_apply(transform, pixels, count)
    }

    /// Converts every pixel of `pixels` in place, a run of `Image.profileRun`
    /// at a time with a look at `cancellation` before each.
    func apply(to pixels: inout [UInt8], cancellation: CancellationFlag) throws(ImageError) {
        let count = pixels.count / Image.bytesPerPixel
        try pixels.withUnsafeMutableBufferPointer { (bytes: inout UnsafeMutableBufferPointer<UInt8>) throws(ImageError) in
            guard let base = bytes.baseAddress else { return }
            var start = 0
            while start < count {
                try cancellation.check()
                let run = min(Image.profileRun, count - start)
                apply(base + start * Image.bytesPerPixel, count: run)
                start += run
            }
        }
    }
}

/// Why a profile cannot be converted from.
struct ProfileFailure: Error, Sendable, Equatable {
    var reason: String
}

/// The transforms of the profiles met lately, shared by every thread of
/// the process: making one costs milliseconds (Little CMS precomputes its
/// tables), as much as processing a small image, and the photos of one
/// source tend to carry the same few profiles.
final class SRGBTransforms: Sendable {
    static let shared = SRGBTransforms(capacity: 16)

    private let capacity: Int
    /// A profile and what its pixels are.
    private struct Key: Hashable {
        var profile: [UInt8]
        var input: ProfileInput
    }

    /// Each profile's transform or failure, and when it was last used.
    private let entries = Mutex<(byProfile: [Key: (Result<SRGBTransform, ProfileFailure>, UInt64)], clock: UInt64)>(([:], 0))

    init(capacity: Int) {
        self.capacity = capacity
    }

    func transform(for profile: [UInt8], input: ProfileInput = .rgbx) -> Result<SRGBTransform, ProfileFailure> {
        let key = Key(profile: profile, input: input)
        if let found = entries.withLock({ state -> Result<SRGBTransform, ProfileFailure>? in
            guard let (result, _) = state.byProfile[key] else { return nil }
            state.clock += 1
            state.byProfile[key] = (result, state.clock)
            return result
        }) {
            return found
        }
        // Made outside the lock: two threads may both make one for a new
        // profile, and the later simply replaces the earlier.
        let made = SRGBTransform.make(profile, input: input)
        entries.withLock { state in
            if state.byProfile.count >= capacity, state.byProfile[key] == nil,
               let oldest = state.byProfile.min(by: { $0.value.1 < $1.value.1 })?.key {
                state.byProfile[oldest] = nil
            }
            state.clock += 1
            state.byProfile[key] = (made, state.clock)
        }
        return made
    }

    /// How many profiles are held (for tests).
    var count: Int { entries.withLock { $0.byProfile.count } }
}

extension Image {
    /// Pixels per run of the colour transform between two looks at the
    /// cancellation flag: about a megapixel, some 20 ms.
    static let profileRun = 1 << 20

    /// This image's pixels, which are in the RGB ICC colour profile
    /// `profile`, converted to sRGB (Little CMS, relative colorimetric with
    /// black point compensation, as photo editors and libvips convert): the
    /// colours a browser shows for an untagged image are then the ones the
    /// profile meant. Colours outside sRGB are clipped to its gamut.
    ///
    /// When the profile cannot be used (unreadable, not RGB) the image comes
    /// back untouched with the reason in `failure`: the caller decides
    /// whether that matters. Stopped once `cancellation` is set.
    ///
    /// Consuming: the pixels of an image nothing else holds are converted
    /// where they are, with no second image-sized buffer.
    public consuming func convertedToSRGB(
        from profile: [UInt8], cancellation: CancellationFlag = .never
    ) throws(ImageError) -> (image: Image, failure: String?) {
        let transform: SRGBTransform
        switch SRGBTransforms.shared.transform(for: profile) {
        case .success(let made): transform = made
        case .failure(let failure): return (self, failure.reason)
        }
        var converted = consume self
        try transform.apply(to: &converted.pixels, cancellation: cancellation)
        return (converted, nil)
    }
}
