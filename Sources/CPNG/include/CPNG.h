/*
 * CPNG: the only place where libpng is called.
 *
 * Decoding: what a file's chunks before its image data say, and the whole
 * picture decoded into the engine's RGBX layout, alpha composited onto a
 * background colour. Encoding: RGBX or gray pixels written as an 8-bit PNG
 * into a buffer, with an ICC profile in an iCCP chunk when one is given. Files are read from
 * memory through libpng's regular API; every libpng call, every setjmp and
 * every pointer to a libpng structure stays in cpng.c. Each entry point arms
 * its own setjmp and returns normally: a libpng error never unwinds through
 * the caller's frames, and the caller's should_stop never runs while a jump
 * target is live. libpng's failures are turned into a few coarse statuses
 * and a message in words, written into the caller's dr_png_error, so that
 * Swift can map them onto ImageError codes; its warnings are never printed.
 *
 * What is tolerated and what is not:
 *   - benign problems (a bad CRC in an ancillary chunk, an unknown ancillary
 *     chunk, a chunk out of place, an ICC profile libpng finds wrong, extra
 *     compressed data) are warnings: the chunk is dropped, the decode goes on;
 *   - a bad CRC in a critical chunk (IHDR, PLTE, IDAT), a broken zlib stream
 *     in IDAT, a bad filter byte or too little image data is DR_PNG_CORRUPT;
 *   - data that ends before the last row is read is DR_PNG_TRUNCATED.
 * Nothing after the image data (text chunks, IEND) is read: once the last
 * row is decoded the picture is whole.
 *
 * Memory: the size in IHDR is checked against the caller's side limit before
 * libpng is even set up (libpng's own user limits are set to it as well).
 * Ancillary chunks other than tRNS, iCCP and eXIf are skipped unread (their
 * CRC still checked), text chunks included, so nothing compressed but the
 * ICC profile is ever inflated, and libpng's chunk limit holds that profile
 * to DR_PNG_CHUNK_MALLOC_MAX bytes once decompressed. Every path destroys
 * libpng's structures.
 */
#ifndef CPNG_H
#define CPNG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What went wrong, coarse enough for Swift to map onto ImageError codes. */
typedef enum dr_png_status {
    DR_PNG_OK = 0,
    DR_PNG_TRUNCATED = 1,          /* data ends before the header or the image does */
    DR_PNG_CORRUPT = 2,            /* no PNG signature, bad critical chunks, bad image data */
    DR_PNG_UNSUPPORTED = 3,        /* a critical chunk libpng does not know */
    DR_PNG_OUT_OF_MEMORY = 4,
    DR_PNG_INVALID_ARGUMENT = 5,   /* caller passed an impossible request */
    DR_PNG_TOO_LARGE = 6,          /* a side in IHDR over the caller's limit */
    DR_PNG_CANCELLED = 7,          /* the decode was stopped through its should_stop */
    DR_PNG_INVALID_DIMENSIONS = 8  /* IHDR declares a width or height of 0 */
} dr_png_status;

#define DR_PNG_MESSAGE_MAX 200

/* The most bytes an ancillary chunk may take, read or decompressed (libpng's
   chunk malloc limit). */
enum { DR_PNG_CHUNK_MALLOC_MAX = 8 << 20 };

typedef struct dr_png_error {
    dr_png_status status;
    char message[DR_PNG_MESSAGE_MAX]; /* the failure in words, NUL-terminated */
} dr_png_error;

typedef struct dr_png_info {
    /* From IHDR. width and height are also set when the status is
       DR_PNG_TOO_LARGE or DR_PNG_INVALID_DIMENSIONS, to word the error. */
    int width;
    int height;
    int bit_depth;      /* 1, 2, 4, 8 or 16 */
    int color_type;     /* 0 gray, 2 RGB, 3 palette, 4 gray + alpha, 6 RGBA */
    int interlaced;     /* Adam7 */
    int has_alpha;      /* an alpha channel, or a tRNS chunk libpng accepted */
    /* Copies of the iCCP chunk's profile (decompressed) and of an eXIf
       chunk's body (a TIFF structure), both from before the image data; NULL
       when absent, unusable or not asked for. Owned by the info: released by
       dr_png_info_clear. */
    uint8_t *icc;
    size_t icc_length;
    uint8_t *exif;
    size_t exif_length;
} dr_png_info;

/* Reads the chunks of the `length` bytes at `data` up to the image data.
   A side in IHDR over `max_side` gives DR_PNG_TOO_LARGE, a width or height
   of 0 DR_PNG_INVALID_DIMENSIONS, both before libpng reads anything. With
   `with_metadata` the iCCP and eXIf chunks are read into `info`; without,
   they are skipped as every other ancillary chunk but tRNS is. Call
   dr_png_info_clear on `info` afterwards, whatever the status. */
dr_png_status dr_png_read_info(const uint8_t *data, size_t length, uint32_t max_side, int with_metadata,
                               dr_png_info *info, dr_png_error *err);

/* Releases what dr_png_read_info copied into `info` (safe on a zeroed or
   already cleared info). */
void dr_png_info_clear(dr_png_info *info);

/* Asked every 16 rows of a pass; a non-zero answer stops the decode with
   DR_PNG_CANCELLED. It runs on the thread that called dr_png_decode_rgbx,
   before that call returns, never while libpng is running. */
typedef int (*dr_png_should_stop)(void *context);

/* Decodes the whole picture of `width` x `height` pixels (the size read by
   dr_png_read_info, checked against it) into RGBX rows `dst_stride` bytes
   apart, in the orientation it is stored in. Palette, gray and low bit
   depths are expanded to RGB, 16-bit samples scaled to 8 bits with rounding,
   and no gamma correction is made. Pixels with alpha (an alpha channel or a
   tRNS chunk) are composited onto (bg_r, bg_g, bg_b) and the fourth byte of
   every pixel is 255; with `keep_alpha` non-zero they keep their straight
   (not premultiplied) colour and the fourth byte holds their alpha, 255
   where the file has none. Interlaced files are read pass by pass into the same
   rows. `should_stop` (may be NULL) is asked with `stop_context`. On any
   failure the rows hold nothing usable. */
dr_png_status dr_png_decode_rgbx(const uint8_t *data, size_t length, uint32_t max_side,
                                 uint8_t *dst, size_t dst_stride, int width, int height,
                                 uint8_t bg_r, uint8_t bg_g, uint8_t bg_b, int keep_alpha,
                                 dr_png_should_stop should_stop, void *stop_context, dr_png_error *err);

/* What an encoder reads. */
typedef enum dr_png_input {
    DR_PNG_INPUT_RGBX = 0, /* four bytes per pixel, the fourth dropped: an RGB file */
    DR_PNG_INPUT_GRAY = 1, /* one byte per pixel: a gray file */
    DR_PNG_INPUT_RGBA = 2, /* four bytes per pixel, the fourth straight alpha: an RGBA file */
    DR_PNG_INPUT_GRAY_ALPHA = 3 /* four bytes per pixel, the first three equal (only the first
                                   is read) and the fourth straight alpha: a gray + alpha file */
} dr_png_input;

/* Encodes `width` x `height` pixels, rows `stride` bytes apart, as a
   non-interlaced 8-bit PNG (RGB, RGBA, gray or gray + alpha), its image data
   compressed by zlib at `level` 0 to 9 with libpng's adaptive filters.
   With `icc_length` > 0 the profile at `icc` goes into an iCCP chunk; one
   libpng finds unusable is left out (a warning, not a failure). Nothing
   else is written: no gAMA, no text, no time. `should_stop` (may be NULL)
   is asked with `stop_context` before every 16 rows. On success *out holds
   a buffer of *out_length bytes, to release with dr_png_free; on failure
   *out is NULL. */
dr_png_status dr_png_encode(const uint8_t *pixels, int width, int height, size_t stride, dr_png_input input, int level,
                            const uint8_t *icc, size_t icc_length, dr_png_should_stop should_stop, void *stop_context,
                            uint8_t **out, size_t *out_length, dr_png_error *err);

/* Releases a buffer dr_png_encode made (NULL is fine). */
void dr_png_free(uint8_t *buffer);

#ifdef __cplusplus
}
#endif

#endif
