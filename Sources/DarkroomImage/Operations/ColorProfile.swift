import CLCMS
import Synchronization

/// A prepared conversion from one RGB ICC profile to sRGB.
///
/// `@unchecked Sendable`: the C transform is made once, in `init`, and
/// never changed afterwards. It is made without Little CMS's one-pixel
/// cache (`cmsFLAGS_NOCACHE`), which is its only mutable state, so
/// `cmsDoTransform` only reads it and any number of threads may apply it at
/// once. It is freed in `deinit`, when no thread holds it any more.
final class SRGBTransform: @unchecked Sendable {
    private let transform: OpaquePointer

    /// nil, with the reason, when the profile cannot be used.
    static func make(_ profile: [UInt8]) -> Result<SRGBTransform, ProfileFailure> {
        var message = [CChar](repeating: 0, count: 256)
        let made = profile.withUnsafeBufferPointer { icc in
            message.withUnsafeMutableBufferPointer { dr_srgb_transform_create(icc.baseAddress, icc.count, $0.baseAddress, $0.count) }
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

    /// Converts `count` RGBX pixels at `pixels` in place.
    func apply(_ pixels: UnsafeMutablePointer<UInt8>, count: Int) {
        dr_srgb_transform_apply(transform, pixels, count)
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
    /// Each profile's transform or failure, and when it was last used.
    private let entries = Mutex<(byProfile: [[UInt8]: (Result<SRGBTransform, ProfileFailure>, UInt64)], clock: UInt64)>(([:], 0))

    init(capacity: Int) {
        self.capacity = capacity
    }

    func transform(for profile: [UInt8]) -> Result<SRGBTransform, ProfileFailure> {
        if let found = entries.withLock({ state -> Result<SRGBTransform, ProfileFailure>? in
            guard let (result, _) = state.byProfile[profile] else { return nil }
            state.clock += 1
            state.byProfile[profile] = (result, state.clock)
            return result
        }) {
            return found
        }
        // Made outside the lock: two threads may both make one for a new
        // profile, and the later simply replaces the earlier.
        let made = SRGBTransform.make(profile)
        entries.withLock { state in
            if state.byProfile.count >= capacity, state.byProfile[profile] == nil,
               let oldest = state.byProfile.min(by: { $0.value.1 < $1.value.1 })?.key {
                state.byProfile[oldest] = nil
            }
            state.clock += 1
            state.byProfile[profile] = (made, state.clock)
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
    public func convertedToSRGB(from profile: [UInt8], cancellation: CancellationFlag = .never) throws(ImageError) -> (image: Image, failure: String?) {
        let transform: SRGBTransform
        switch SRGBTransforms.shared.transform(for: profile) {
        case .success(let made): transform = made
        case .failure(let failure): return (self, failure.reason)
        }
        var converted = self
        let count = width * height
        try converted.pixels.withUnsafeMutableBufferPointer { (bytes: inout UnsafeMutableBufferPointer<UInt8>) throws(ImageError) in
            guard let base = bytes.baseAddress else { return }
            var start = 0
            while start < count {
                try cancellation.check()
                let run = min(Image.profileRun, count - start)
                transform.apply(base + start * Image.bytesPerPixel, count: run)
                start += run
            }
        }
        return (converted, nil)
    }
}
