import DarkroomImage

/// How to decode a JPEG so that the pipeline's first steps cost as little as
/// possible. Two savings, both invisible in the result except for sub-pixel
/// rounding:
///
/// - **Crop before scale.** `scale` followed by `crop` needs only the part of the
///   source that survives the crop. That region is mapped back to source
///   coordinates and cut out while decoding, and the scale then resamples just
///   that region straight to the crop's size. For `scale:2048x2048,mode=fill |
///   crop:square` on a 16:10 photo this skips about a third of the resampling.
/// - **Shrink on load.** When the resample shrinks the region by 2x or more,
///   libjpeg's DCT scaling decodes it at 1/2, 1/4 or 1/8 size. Following libvips,
///   the largest such factor is chosen that still leaves at least a factor of 2
///   for the real resampling kernel, so quality is set by lanczos3, not the DCT.
/// - **Luma on load.** A `grayscale` step that comes first, or right after the
///   folded steps, is done by the decoder: it reads the JPEG's own luma (the
///   same BT.601 weights `grayscale` uses) and never rebuilds the chroma
///   planes. The luma of the decoded RGB can differ by a level or two where
///   converting to RGB clipped a saturated colour; the Y plane is the exact
///   one.
struct LoadPlan: Equatable {
    /// DCT scaling denominator: 1, 2, 4 or 8.
    var shrink = 1
    /// The region of the upright source to decode, or nil for all of it.
    var region: Rect?
    /// How many leading pipeline steps the plan has taken over (0, 1 or 2).
    var foldedSteps = 0
    /// After decoding, resample to exactly this size with this kernel; this is the
    /// output of the folded steps.
    var resize: (size: Size, kernel: ResampleKernel)?
    /// The index of the `grayscale` step the decoder does by reading the luma
    /// only, if any. It is always the first step after the folded ones.
    var lumaStep: Int?

    static func == (a: LoadPlan, b: LoadPlan) -> Bool {
        a.shrink == b.shrink && a.region == b.region && a.foldedSteps == b.foldedSteps
            && a.resize?.size == b.resize?.size && a.resize?.kernel == b.resize?.kernel && a.lumaStep == b.lumaStep
    }

    /// Plans the decode of an image whose upright size is `source`. The steps must
    /// already have been checked with `Pipeline.plannedSizes`.
    static func make(for steps: [Operation], source: Size) -> LoadPlan {
        var plan = planResample(for: steps, source: source)
        // Scaling and cropping act on each channel alike, so taking the luma
        // before them gives what taking it after would.
        if plan.foldedSteps < steps.count, case .grayscale = steps[plan.foldedSteps] {
            plan.lumaStep = plan.foldedSteps
        }
        return plan
    }

    private static func planResample(for steps: [Operation], source: Size) -> LoadPlan {
        guard case let .scale(box, mode, kernel, enlarge)? = steps.first else { return LoadPlan() }
        let scaled = Operation.scaledSize(of: source, to: box, mode: mode, enlarge: enlarge)
        // A scale that leaves the image as it is (enlarge=no) has nothing to fold.
        if scaled == source, !enlarge { return LoadPlan() }
        let sx = Double(scaled.width) / Double(source.width)
        let sy = Double(scaled.height) / Double(source.height)

        var plan = LoadPlan()
        var needed = Rect(x: 0, y: 0, width: source.width, height: source.height)
        var target = scaled
        plan.foldedSteps = 1
        if steps.count > 1, case let .crop(crop) = steps[1], let window = cropWindow(crop, in: scaled) {
            let x = min(source.width - 1, max(0, Int((Double(window.x) / sx).rounded())))
            let y = min(source.height - 1, max(0, Int((Double(window.y) / sy).rounded())))
            let w = min(source.width - x, max(1, Int((Double(window.width) / sx).rounded())))
            let h = min(source.height - y, max(1, Int((Double(window.height) / sy).rounded())))
            needed = Rect(x: x, y: y, width: w, height: h)
            target = window.size
            plan.foldedSteps = 2
            if needed != Rect(x: 0, y: 0, width: source.width, height: source.height) {
                plan.region = needed
            }
        }
        plan.resize = (target, kernel)
        for factor in [8, 4, 2] where needed.width / factor >= 2 * target.width && needed.height / factor >= 2 * target.height {
            plan.shrink = factor
            break
        }
        return plan
    }

    /// Where a crop step lands in an image of `size`, or nil if it does not fit
    /// (the step itself will then report the error).
    private static func cropWindow(_ crop: Operation.Crop, in size: Size) -> Rect? {
        switch crop {
        case .square(.smart), .size(_, .smart):
            return nil  // placed by the pixels, which the plan has not seen
        case let .square(gravity):
            let side = min(size.width, size.height)
            return gravity.place(Size(width: side, height: side), in: size)
        case let .size(cropSize, gravity):
            guard cropSize.width <= size.width, cropSize.height <= size.height else { return nil }
            return gravity.place(cropSize, in: size)
        case let .rect(rect):
            return rect.fits(in: size) ? rect : nil
        }
    }
}
