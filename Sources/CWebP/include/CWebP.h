/*
 * CWebP: the only place where libwebp (and libwebpmux) is called.
 *
 * Still images only: the header of a file, a whole picture decoded into the
 * engine's RGBX layout, and a lossy encode of RGBX or gray pixels, with an
 * ICC profile put in its own chunk when one is given. libwebp's status codes
 * are turned into a few coarse ones and a message in words, written into the
 * caller's dr_webp_error, so that Swift can map them onto ImageError codes.
 */
#ifndef CWEBP_H
#define CWEBP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What went wrong, coarse enough for Swift to map onto ImageError codes. */
typedef enum dr_webp_status {
    DR_WEBP_OK = 0,
    DR_WEBP_TRUNCATED = 1,        /* data ends before the header or the image does */
    DR_WEBP_CORRUPT = 2,          /* malformed chunks or bitstream */
    DR_WEBP_UNSUPPORTED = 3,      /* valid WebP, unsupported feature (animation...) */
    DR_WEBP_OUT_OF_MEMORY = 4,
    DR_WEBP_INVALID_ARGUMENT = 5, /* caller passed an impossible request */
    DR_WEBP_TOO_LARGE = 6,        /* a side over WebP's limit of 16383 pixels */
    DR_WEBP_ENCODE_FAILED = 7,
    DR_WEBP_CANCELLED = 8         /* stopped through its should_stop */
} dr_webp_status;

#define DR_WEBP_MESSAGE_MAX 200

/* The most pixels a WebP file has on a side (libwebp's WEBP_MAX_DIMENSION). */
enum { DR_WEBP_MAX_SIDE = 16383 };

typedef struct dr_webp_error {
    dr_webp_status status;
    char message[DR_WEBP_MESSAGE_MAX]; /* libwebp's failure in words, NUL-terminated */
} dr_webp_error;

typedef struct dr_webp_info {
    int width;          /* of the canvas, for an animation */
    int height;
    int has_alpha;
    int is_animated;
} dr_webp_info;

/* Reads the header of the `length` bytes at `data` (WebPGetFeatures): only
   the chunks before the bitstream and its first bytes are looked at. */
dr_webp_status dr_webp_read_info(const uint8_t *data, size_t length, dr_webp_info *info, dr_webp_error *err);

/* Asked between parts of a decode or an encode; a non-zero answer stops it
   with DR_WEBP_CANCELLED. It runs on the thread that called the shim,
   before that call returns. */
typedef int (*dr_webp_should_stop)(void *context);

/* Decodes a still picture of `width` x `height` pixels (the size read by
   dr_webp_read_info, checked against it) into RGBX rows `dst_stride` bytes
   apart. With `keep_alpha` non-zero each pixel keeps its straight colour
   and the fourth byte holds its alpha (255 where the file has none), and
   `background` is not used. Otherwise the fourth byte of every pixel is
   255: with `background` NULL a file's alpha is dropped (the colour
   channels are the file's own); with `background` pointing at three bytes
   (R, G, B), every pixel is composited onto that colour by its alpha. The file is fed to libwebp's
   incremental decoder a slice at a time, and `should_stop` (may be NULL)
   is asked with `stop_context` before each slice. */
dr_webp_status dr_webp_decode_rgbx(const uint8_t *data, size_t length, uint8_t *dst, size_t dst_stride,
                                   int width, int height, const uint8_t *background, int keep_alpha,
                                   dr_webp_should_stop should_stop, void *stop_context, dr_webp_error *err);

/* What an encoder reads. WebP has no gray mode: gray pixels are written as
   RGB with equal channels. */
typedef enum dr_webp_input {
    DR_WEBP_INPUT_RGBX = 0, /* four bytes per pixel, the fourth ignored */
    DR_WEBP_INPUT_GRAY = 1, /* one byte per pixel */
    DR_WEBP_INPUT_RGBA = 2  /* four bytes per pixel, the fourth straight alpha */
} dr_webp_input;

/* Encodes `width` x `height` pixels, rows `stride` bytes apart, as a lossy
   WebP at `quality` 1 to 100 (libwebp's quality factor), with alpha
   (lossless, in an ALPH chunk) only from DR_WEBP_INPUT_RGBA.
   With `icc_length` > 0 the profile at `icc` goes into an ICCP chunk.
   `should_stop` (may be NULL) is asked with `stop_context` as the encode
   goes. On success *out holds a buffer to release with dr_webp_free. */
dr_webp_status dr_webp_encode(const uint8_t *pixels, int width, int height, size_t stride, dr_webp_input input,
                              int quality, const uint8_t *icc, size_t icc_length,
                              dr_webp_should_stop should_stop, void *stop_context,
                              uint8_t **out, size_t *out_length, dr_webp_error *err);

void dr_webp_free(uint8_t *buffer);

#ifdef __cplusplus
}
#endif

#endif
