/*
 * CLCMS: the only place where Little CMS (lcms2) is called.
 *
 * One conversion: pixels in an ICC profile to sRGB, in the engine's RGBX
 * layout. The source is RGBX pixels in an RGB profile (the fourth byte is
 * left as it is), or a JPEG's CMYK samples in a CMYK profile, four bytes a
 * pixel, turned into RGBX in place (the fourth byte becomes 255). A
 * transform is made once per profile and applied to runs of pixels, so the
 * caller can look at its cancellation flag between runs.
 */
#ifndef CLCMS_H
#define CLCMS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dr_srgb_transform dr_srgb_transform;

/* What a transform converts from. */
typedef enum dr_color_input {
    DR_COLOR_INPUT_RGBX = 0,          /* RGBX pixels, an RGB profile */
    DR_COLOR_INPUT_CMYK = 1,          /* CMYK samples, 255 = full ink, a CMYK profile */
    DR_COLOR_INPUT_CMYK_INVERTED = 2  /* CMYK samples, 0 = full ink (Adobe's JPEGs), a CMYK profile */
} dr_color_input;

/*
 * Reads the ICC profile `icc` (`length` bytes) and prepares the conversion
 * of `input` pixels in it to sRGB: relative colorimetric with black point
 * compensation, as photo editors convert. NULL when the profile cannot be
 * read, is not of the input's colour space, or no transform can be made
 * from it; then `error` (of `error_size` bytes) holds a one-line reason.
 */
dr_srgb_transform *dr_srgb_transform_create(const unsigned char *icc, size_t length, dr_color_input input,
                                            char *error, size_t error_size);

/* Converts `count` pixels in place, four bytes each, into RGBX. A
   transform is never changed by this, so several threads may use one at
   the same time. */
void dr_srgb_transform_apply(const dr_srgb_transform *transform, unsigned char *rgbx, size_t count);

void dr_srgb_transform_destroy(dr_srgb_transform *transform);

/*
 * The ICC profile of the colour an nclx box (ISO/IEC 23091-2) describes,
 * its colour primaries code `primaries` and transfer code `transfer`: an
 * RGB matrix/shaper profile with the red, green and blue primaries and
 * white point at the chromaticities `xy` (red x, y, green x, y, blue x, y,
 * white x, y; BT.709's for unspecified primaries, 2) and the tone curve of
 * `transfer`: sRGB's for 13 (sRGB), 2
 * (unspecified) and the SDR video codes 1, 6, 7, 11, 12, 14 and 15, as
 * browsers show such images; gamma 2.2 for 4, 2.8 for 5; linear for 8.
 * The header's creation date is fixed, so the same box always gives the
 * same bytes. On success *out holds the profile (free it with
 * dr_lcms_free) and 0 is returned. 1, and no profile, for BT.709 or
 * unspecified primaries with one of the curves taken as sRGB's: the
 * pixels are sRGB as coded. -1, and no profile, for any other transfer
 * (PQ and HLG, which are HDR, the log curves, SMPTE 428) or a
 * chromaticity outside (0, 1) or that lcms refuses.
 */
int dr_lcms_nclx_profile(int primaries, int transfer, const float xy[8], unsigned char **out, size_t *out_length);

void dr_lcms_free(void *pointer);

#ifdef __cplusplus
}
#endif

#endif
