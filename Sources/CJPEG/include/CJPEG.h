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
    /* The ICC profile of the APP2 "ICC_PROFILE" chunks, put together (NULL if
       none, or if its chunks do not make one whole profile). Valid until the
       decoder is closed. */
    const uint8_t *icc;
    size_t icc_length;
} dr_jpeg_info;

typedef struct dr_jpeg_decoder dr_jpeg_decoder;

/* Reads the header of `data` (which must stay valid until close). Returns NULL
   and fills `err` on failure. `fail_on_warning` turns every libjpeg warning
   (premature end, corrupt data) into an error. */
dr_jpeg_decoder *dr_jpeg_decoder_open(const uint8_t *data, size_t length, int fail_on_warning,
                                      dr_jpeg_info *info, dr_jpeg_error *err);

/* Decoding happens in steps, so that the caller can stop between any two of
   them (each call arms its own setjmp and returns; no jump target outlives a
   call):

     dr_jpeg_decoder_start   once, to choose what to decode;
     dr_jpeg_decoder_step    until *finished, each call a bounded amount of work;
     dr_jpeg_decoder_close   always, also after a failure or to give up early.

   After any failure the decoder accepts nothing but close. */

/* Prepares to decode the region (x, y, width, height), given in coordinates
   of the image scaled by 1/scale_denom (scale_denom 1, 2, 4 or 8; scaled size
   is ceil(size / scale_denom)), as RGBX rows `dst_stride` bytes apart.
   Grayscale, RGB, CMYK and YCCK files all come out as RGBX; with
   `keep_cmyk`, CMYK and YCCK files come out as their CMYK samples instead,
   four bytes a pixel as the file holds them (0 is full ink when the file
   has an Adobe marker), for a colour transform through the file's
   profile. With `luma_only`
   (ignored for CMYK and YCCK) only the luma is decoded, with BT.601 weights,
   and written to R, G and B alike; the chroma planes are never reconstructed.
   Call once. For a progressive file this reads and decodes every scan, most
   of the work, in this one call. The scanlines above the region are skipped
   here too. */
dr_jpeg_status dr_jpeg_decoder_start(dr_jpeg_decoder *dec, int scale_denom, int luma_only, int keep_cmyk,
                                     int x, int y, int width, int height, size_t dst_stride,
                                     dr_jpeg_error *err);

/* Decodes at most about `max_lines` scanlines of the scaled image (at least
   one): the next rows of the region, written to `dst` (the region's first
   row, the same buffer at every step), then the scanlines after it. The rest
   of the file is decoded to its end so damage anywhere is reported. Sets
   *finished once the whole file has been read. */
dr_jpeg_status dr_jpeg_decoder_step(dr_jpeg_decoder *dec, uint8_t *dst, int max_lines, int *finished,
                                    dr_jpeg_error *err);

/* Number of warnings seen so far. */
int dr_jpeg_decoder_warnings(const dr_jpeg_decoder *dec);

void dr_jpeg_decoder_close(dr_jpeg_decoder *dec);

/* What an encoder reads and what it stores. */
typedef enum dr_jpeg_input {
    DR_JPEG_INPUT_RGBX = 0,          /* RGBX pixels, stored as YCbCr */
    DR_JPEG_INPUT_RGBX_AS_GRAY = 1,  /* RGBX pixels, stored as one component: their BT.601
                                        luma (exactly R for gray pixels) */
    DR_JPEG_INPUT_GRAY = 2,          /* one byte per pixel, stored as grayscale */
    DR_JPEG_INPUT_CMYK = 3,          /* CMYK samples, written as they are with an Adobe
                                        marker (libjpeg does not invert them) */
    DR_JPEG_INPUT_CMYK_AS_YCCK = 4   /* CMYK samples, stored as YCCK */
} dr_jpeg_input;

typedef struct dr_jpeg_encoder dr_jpeg_encoder;
typedef struct dr_jpeg_encode_probe dr_jpeg_encode_probe;

/* Encoding happens in steps too, with the same rules:

     dr_jpeg_encoder_start   once, with the picture's size and the settings;
     dr_jpeg_encoder_write   the rows, top to bottom, as many per call as wanted;
     dr_jpeg_encoder_finish  once every row is written, for the file;
     dr_jpeg_encoder_close   always, also after a failure or to give up early.

   Chroma sampling is given as the luma factors (1x1 = 4:4:4, 2x1 = 4:2:2,
   2x2 = 4:2:0); it applies to YCbCr output only. No metadata is written but
   an ICC profile given to dr_jpeg_encoder_write_icc.
   `probe` is a test hook (see below), NULL in normal use. Returns NULL and
   fills `err` on failure. */
dr_jpeg_encoder *dr_jpeg_encoder_start(int width, int height, dr_jpeg_input input, int quality,
                                       int luma_h, int luma_v, int progressive, int optimize_coding,
                                       dr_jpeg_encode_probe *probe, dr_jpeg_error *err);

/* Writes an ICC profile (APP2 "ICC_PROFILE" chunks) into the file: right
   after start, before any row. */
dr_jpeg_status dr_jpeg_encoder_write_icc(dr_jpeg_encoder *enc, const uint8_t *icc, size_t length, dr_jpeg_error *err);

/* Writes the next `count` rows, `stride` bytes apart from `rows` on. */
dr_jpeg_status dr_jpeg_encoder_write(dr_jpeg_encoder *enc, const uint8_t *rows, size_t stride, int count,
                                     dr_jpeg_error *err);

/* Completes the file. For a progressive file this is where most of the
   entropy coding happens. On success *out holds a malloc'ed buffer to release
   with dr_jpeg_free. */
dr_jpeg_status dr_jpeg_encoder_finish(dr_jpeg_encoder *enc, uint8_t **out, size_t *out_length,
                                      dr_jpeg_error *err);

/* Releases the encoder and any output it still holds. */
void dr_jpeg_encoder_close(dr_jpeg_encoder *enc);

void dr_jpeg_free(uint8_t *buffer);

/* Test hook, for tests only: it lets a test drive the encoder's output buffer
   through its growth and error paths and see how the buffer was handled. An
   injected failure ends the call as an allocation failure inside libjpeg
   would: DR_JPEG_ENCODE_FAILED with libjpeg's "Insufficient memory" message. */
struct dr_jpeg_encode_probe {
    size_t first_capacity; /* in: size of the first output buffer; 0 for the encoder's own estimate */
    size_t fail_after;     /* in: once this many bytes are written, the next growth of the buffer
                              fails as if realloc had returned NULL; 0 for never */
    int growths;           /* out: successful growths of the output buffer */
    int buffers_freed;     /* out: output buffers the encoder released instead of handing them over */
};

#ifdef __cplusplus
}
#endif

#endif
