#include "CLCMS.h"

#include <lcms2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dr_srgb_transform {
    cmsHTRANSFORM transform;
    /* CMYK samples become RGBX: the fourth byte, which held K, is set. */
    int fill_fourth;
};

static void set_error(char *error, size_t error_size, const char *message) {
    if (error && error_size > 0) {
        snprintf(error, error_size, "%s", message);
    }
}

dr_srgb_transform *dr_srgb_transform_create(const unsigned char *icc, size_t length, dr_color_input input,
                                            char *error, size_t error_size) {
    if (input != DR_COLOR_INPUT_RGBX && input != DR_COLOR_INPUT_CMYK && input != DR_COLOR_INPUT_CMYK_INVERTED) {
        set_error(error, error_size, "unknown colour input");
        return NULL;
    }
    const int cmyk = input != DR_COLOR_INPUT_RGBX;
    if (!icc || length < 128) {
        set_error(error, error_size, "the ICC profile is shorter than its 128-byte header");
        return NULL;
    }
    /* A context of its own: lcms2 keeps no state between images, and its
       error messages (none are printed by default) stay out of the way. */
    cmsContext context = cmsCreateContext(NULL, NULL);
    if (!context) {
        set_error(error, error_size, "out of memory for a colour transform");
        return NULL;
    }
    cmsHPROFILE source = cmsOpenProfileFromMemTHR(context, icc, (cmsUInt32Number)length);
    if (!source) {
        cmsDeleteContext(context);
        set_error(error, error_size, "the embedded ICC profile cannot be read");
        return NULL;
    }
    if (cmsGetColorSpace(source) != (cmyk ? cmsSigCmykData : cmsSigRgbData)) {
        cmsCloseProfile(source);
        cmsDeleteContext(context);
        set_error(error, error_size, cmyk ? "the embedded ICC profile is not a CMYK profile" : "the embedded ICC profile is not an RGB profile");
        return NULL;
    }
    cmsHPROFILE srgb = cmsCreate_sRGBProfileTHR(context);
    if (!srgb) {
        cmsCloseProfile(source);
        cmsDeleteContext(context);
        set_error(error, error_size, "out of memory for the sRGB profile");
        return NULL;
    }
    /* RGBX: three 8-bit channels and one extra byte, which a transform in
       place leaves as it was. CMYK in place works as well: each pixel is
       read whole before its RGBX, of the same four bytes, is written. The
       reversed CMYK format reads 0 as full ink. No one-pixel cache: the
       transform is then read-only, and threads may share it. */
    cmsUInt32Number from = input == DR_COLOR_INPUT_CMYK ? TYPE_CMYK_8
                         : input == DR_COLOR_INPUT_CMYK_INVERTED ? TYPE_CMYK_8_REV : TYPE_RGBA_8;
    cmsHTRANSFORM transform = cmsCreateTransformTHR(context, source, from, srgb, TYPE_RGBA_8,
                                                    INTENT_RELATIVE_COLORIMETRIC,
                                                    cmsFLAGS_BLACKPOINTCOMPENSATION | cmsFLAGS_NOCACHE);
    cmsCloseProfile(source);
    cmsCloseProfile(srgb);
    if (!transform) {
        cmsDeleteContext(context);
        set_error(error, error_size, "no transform to sRGB can be made from the embedded ICC profile");
        return NULL;
    }
    dr_srgb_transform *result = (dr_srgb_transform *)malloc(sizeof(dr_srgb_transform));
    if (!result) {
        cmsDeleteTransform(transform);
        cmsDeleteContext(context);
        set_error(error, error_size, "out of memory for a colour transform");
        return NULL;
    }
    result->transform = transform;
    result->fill_fourth = cmyk;
    return result;
}

void dr_srgb_transform_apply(const dr_srgb_transform *transform, unsigned char *rgbx, size_t count) {
    while (count > 0) {
        cmsUInt32Number run = count > 0x10000000u ? 0x10000000u : (cmsUInt32Number)count;
        cmsDoTransform(transform->transform, rgbx, rgbx, run);
        if (transform->fill_fourth) {
            for (cmsUInt32Number i = 0; i < run; i++) rgbx[(size_t)i * 4 + 3] = 255;
        }
        rgbx += (size_t)run * 4;
        count -= run;
    }
}

void dr_srgb_transform_destroy(dr_srgb_transform *transform) {
    if (!transform) return;
    cmsContext context = cmsGetTransformContextID(transform->transform);
    cmsDeleteTransform(transform->transform);
    cmsDeleteContext(context);
    free(transform);
}

int dr_lcms_nclx_profile(int primaries, int transfer, const float xy[8], unsigned char **out, size_t *out_length) {
    if (!xy || !out || !out_length) return -1;
    *out = NULL;
    *out_length = 0;
    /* sRGB's curve (IEC 61966-2-1) as lcms's parametric type 4. */
    const cmsFloat64Number srgb[5] = { 2.4, 1.0 / 1.055, 0.055 / 1.055, 1.0 / 12.92, 0.04045 };
    cmsFloat64Number gamma = 0;
    switch (transfer) {
    case 1: case 2: case 6: case 7: case 11: case 12: case 13: case 14: case 15: break;
    case 4: gamma = 2.2; break;
    case 5: gamma = 2.8; break;
    case 8: gamma = 1.0; break;
    default: return -1;
    }
    /* BT.709 primaries (sRGB's), or unspecified ones, with an SDR curve:
       sRGB as coded. */
    const int bt709 = primaries == 1 || primaries == 2;
    if (bt709 && gamma == 0) return 1;
    /* Unspecified primaries are taken for BT.709's, whose chromaticities
       libheif does not give for them. */
    static const float bt709_xy[8] = { 0.64f, 0.33f, 0.30f, 0.60f, 0.15f, 0.06f, 0.3127f, 0.3290f };
    if (primaries == 2) xy = bt709_xy;
    for (int i = 0; i < 8; i++) {
        if (!(xy[i] > 0.0f && xy[i] < 1.0f)) return -1;
    }
    cmsContext context = cmsCreateContext(NULL, NULL);
    if (!context) return -1;
    cmsToneCurve *curve = gamma > 0 ? cmsBuildGamma(context, gamma) : cmsBuildParametricToneCurve(context, 4, srgb);
    cmsCIExyY white = { xy[6], xy[7], 1.0 };
    cmsCIExyYTRIPLE chromaticities = { { xy[0], xy[1], 1.0 }, { xy[2], xy[3], 1.0 }, { xy[4], xy[5], 1.0 } };
    cmsToneCurve *curves[3] = { curve, curve, curve };
    cmsHPROFILE profile = curve ? cmsCreateRGBProfileTHR(context, &white, &chromaticities, curves) : NULL;
    int result = -1;
    cmsUInt32Number length = 0;
    if (profile && cmsSaveProfileToMem(profile, NULL, &length) && length > 0) {
        unsigned char *bytes = (unsigned char *)malloc(length);
        if (bytes && cmsSaveProfileToMem(profile, bytes, &length) && length >= 128) {
            /* lcms stamps the header with the time it was made (bytes 24
               to 35): a fixed date instead, 2000-01-01 00:00:00, so that
               one box always stands for the same bytes (outputs that do
               not change from run to run, one transform cached per box). */
            static const unsigned char date[12] = { 0x07, 0xD0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0 };
            memcpy(bytes + 24, date, sizeof date);
            *out = bytes;
            *out_length = length;
            result = 0;
        } else {
            free(bytes);
        }
    }
    if (profile) cmsCloseProfile(profile);
    if (curve) cmsFreeToneCurve(curve);
    cmsDeleteContext(context);
    return result;
}

void dr_lcms_free(void *pointer) { free(pointer); }
