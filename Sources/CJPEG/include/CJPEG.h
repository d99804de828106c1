/*
 * CJPEG: the only place where libjpeg is called.
 *
 * Every entry point arms its own setjmp before calling libjpeg and disarms it
 * before returning, so a libjpeg error never unwinds through Swift frames and no
 * Swift code runs while a jump target is live. libjpeg's messages are captured
 * into the caller's dr_jpeg_error instead of being printed.
 */
#ifndef CJPEG_H
#define CJPEG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What went wrong, coarse enough for Swift to map onto ImageError codes. */
typedef enum dr_jpeg_status {
    DR_JPEG_OK = 0,
    DR_JPEG_EMPTY = 1,              /* zero bytes of input */
    DR_JPEG_NOT_JPEG = 2,           /* no SOI marker */
    DR_JPEG_TRUNCATED = 3,          /* data ends before the image does */
    DR_JPEG_CORRUPT = 4,            /* malformed markers or entropy data */
    DR_JPEG_INVALID_DIMENSIONS = 5, /* zero or too large dimensions in the SOF */
    DR_JPEG_UNSUPPORTED = 6,        /* valid JPEG, unsupported feature (12-bit, arithmetic...) */
    DR_JPEG_OUT_OF_MEMORY = 7,
    DR_JPEG_INVALID_ARGUMENT = 8,   /* caller passed an impossible request */
    DR_JPEG_ENCODE_FAILED = 9
} dr_jpeg_status;

/* The colour space the file declares (libjpeg's jpeg_color_space). */
typedef enum dr_jpeg_color {
    DR_JPEG_COLOR_UNKNOWN = 0,
    DR_JPEG_COLOR_GRAY = 1,
    DR_JPEG_COLOR_YCBCR = 2,
    DR_JPEG_COLOR_RGB = 3,
    DR_JPEG_COLOR_CMYK = 4,
    DR_JPEG_COLOR_YCCK = 5
} dr_jpeg_color;

#define DR_JPEG_MESSAGE_MAX 200

typedef struct dr_jpeg_error {
    dr_jpeg_status status;
    int msg_code;                      /* libjpeg message code of the failure, -1 if none */
    int warnings;                      /* warnings seen (only counted when not fatal) */
    char message[DR_JPEG_MESSAGE_MAX]; /* libjpeg's text for the failure, NUL-terminated */
} dr_jpeg_error;

typedef struct dr_jpeg_info {
    int width;          /* as in the SOF */
    int height;
    int components;
    dr_jpeg_color color_space;
    int progressive;
    int saw_adobe;      /* an Adobe APP14 marker was present */
    /* Sampling factors of component 0 (luma) and component 1 (first chroma). */
    int luma_h, luma_v, chroma_h, chroma_v;
    /* Body of the first APP1 segment starting with "Exif\0\0" (NULL if none).
       Valid until the decoder is closed. */
    const uint8_t *exif;
    size_t exif_length;
} dr_jpeg_info;

typedef struct dr_jpeg_decoder dr_jpeg_decoder;

/* Reads the header of `data` (which must stay valid until close). Returns NULL
   and fills `err` on failure. `fail_on_warning` turns every libjpeg warning
   (premature end, corrupt data) into an error. */
dr_jpeg_decoder *dr_jpeg_decoder_open(const uint8_t *data, size_t length, int fail_on_warning,
                                      dr_jpeg_info *info, dr_jpeg_error *err);

/* Decodes the region (x, y, width, height), given in coordinates of the image
   scaled by 1/scale_denom (scale_denom 1, 2, 4 or 8; scaled size is
   ceil(size / scale_denom)), into `dst` as RGBX rows `dst_stride` bytes apart.
   Grayscale, RGB, CMYK and YCCK files all come out as RGBX. With `luma_only`
   (ignored for CMYK and YCCK) only the luma is decoded, with BT.601 weights,
   and written to R, G and B alike; the chroma planes are never reconstructed.
   The rest of the file is still decoded to its end so damage anywhere is
   reported. Call once. */
dr_jpeg_status dr_jpeg_decoder_read(dr_jpeg_decoder *dec, int scale_denom, int luma_only,
                                    int x, int y, int width, int height,
                                    uint8_t *dst, size_t dst_stride, dr_jpeg_error *err);

/* Number of warnings seen so far. */
int dr_jpeg_decoder_warnings(const dr_jpeg_decoder *dec);

void dr_jpeg_decoder_close(dr_jpeg_decoder *dec);

/* Encodes RGBX pixels. Chroma sampling is given as the luma factors
   (1x1 = 4:4:4, 2x1 = 4:2:2, 2x2 = 4:2:0). With `gray` a one-component file
   is written from the pixels' BT.601 luma (exactly R for gray pixels) and the
   sampling is ignored. No metadata is written. On success *out holds a
   malloc'ed buffer to release with dr_jpeg_free. */
dr_jpeg_status dr_jpeg_encode_rgbx(const uint8_t *pixels, int width, int height, size_t stride,
                                   int gray, int quality, int luma_h, int luma_v, int progressive,
                                   int optimize_coding, uint8_t **out, size_t *out_length,
                                   dr_jpeg_error *err);

/* Encodes raw samples in another layout, used to build grayscale and CMYK files:
   components 1 (grayscale) or 4 (CMYK samples, written as they are with an Adobe
   marker; libjpeg does not invert them). When store_ycck is set the CMYK samples
   are stored as YCCK. */
dr_jpeg_status dr_jpeg_encode_raw(const uint8_t *samples, int width, int height, int components,
                                  int store_ycck, int quality, uint8_t **out, size_t *out_length,
                                  dr_jpeg_error *err);

void dr_jpeg_free(uint8_t *buffer);

/* Test hook, for tests only: it lets a test drive the encoder's output buffer
   through its growth and error paths and see how the buffer was handled. */
typedef struct dr_jpeg_encode_probe {
    size_t first_capacity; /* in: size of the first output buffer; 0 for the encoder's own estimate */
    size_t fail_after;     /* in: once this many bytes are written, the next growth of the buffer
                              fails as if realloc had returned NULL; 0 for never */
    int growths;           /* out: successful growths of the output buffer */
    int buffers_freed;     /* out: output buffers the encoder released after an error */
} dr_jpeg_encode_probe;

/* Test hook: dr_jpeg_encode_rgbx under the control of `probe` (see above). An
   injected failure ends the call as an allocation failure inside libjpeg would:
   DR_JPEG_ENCODE_FAILED with libjpeg's "Insufficient memory" message. */
dr_jpeg_status dr_jpeg_encode_rgbx_probed(const uint8_t *pixels, int width, int height, size_t stride,
                                          int gray, int quality, int luma_h, int luma_v, int progressive,
                                          int optimize_coding, uint8_t **out, size_t *out_length,
                                          dr_jpeg_encode_probe *probe, dr_jpeg_error *err);

#ifdef __cplusplus
}
#endif

#endif
