#include "CLCMS.h"

#include <lcms2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dr_srgb_transform {
    cmsHTRANSFORM transform;
};

static void set_error(char *error, size_t error_size, const char *message) {
    if (error && error_size > 0) {
        snprintf(error, error_size, "%s", message);
    }
}

dr_srgb_transform *dr_srgb_transform_create(const unsigned char *icc, size_t length, char *error, size_t error_size) {
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
    if (cmsGetColorSpace(source) != cmsSigRgbData) {
        cmsCloseProfile(source);
        cmsDeleteContext(context);
        set_error(error, error_size, "the embedded ICC profile is not an RGB profile");
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
       place leaves as it was. No one-pixel cache: the transform is then
       read-only, and threads may share it. */
    cmsHTRANSFORM transform = cmsCreateTransformTHR(context, source, TYPE_RGBA_8, srgb, TYPE_RGBA_8,
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
    return result;
}

void dr_srgb_transform_apply(const dr_srgb_transform *transform, unsigned char *rgbx, size_t count) {
    while (count > 0) {
        cmsUInt32Number run = count > 0x10000000u ? 0x10000000u : (cmsUInt32Number)count;
        cmsDoTransform(transform->transform, rgbx, rgbx, run);
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
