/*
 * CLCMS: the only place where Little CMS (lcms2) is called.
 *
 * One conversion: pixels in an RGB ICC profile to sRGB, for the engine's
 * RGBX layout (the fourth byte is left as it is). A transform is made once
 * per image and applied to runs of pixels, so the caller can look at its
 * cancellation flag between runs.
 */
#ifndef CLCMS_H
#define CLCMS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dr_srgb_transform dr_srgb_transform;

/*
 * Reads the ICC profile `icc` (`length` bytes) and prepares the conversion
 * of its RGB pixels to sRGB: relative colorimetric with black point
 * compensation, as photo editors convert. NULL when the profile cannot be
 * read, is not an RGB profile, or no transform can be made from it; then
 * `error` (of `error_size` bytes) holds a one-line reason.
 */
dr_srgb_transform *dr_srgb_transform_create(const unsigned char *icc, size_t length, char *error, size_t error_size);

/* Converts `count` RGBX pixels in place. A transform is never changed by
   this, so several threads may use one at the same time. */
void dr_srgb_transform_apply(const dr_srgb_transform *transform, unsigned char *rgbx, size_t count);

void dr_srgb_transform_destroy(dr_srgb_transform *transform);

#ifdef __cplusplus
}
#endif

#endif
