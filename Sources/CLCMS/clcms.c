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
