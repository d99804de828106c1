/*
 * CTIFF: the only place where libtiff is called.
 *
 * Decoding of a TIFF's first image (Darkroom never writes TIFF outside its
 * tests): what its tags say (size, orientation, alpha, ICC profile), and
 * its pixels through libtiff's RGBA interface, which reads every layout
 * libtiff knows (strips or tiles, contiguous or planar samples, 1 to 16
 * bits, gray, palette, RGB, YCbCr, CMYK, and each compression libtiff was
 * built with), in the engine's RGBX layout with alpha laid over a
 * background colour. A multi-page TIFF gives its first page, as libvips
 * and sharp do by default. Files are read from memory; libtiff's errors
 * and warnings go to the caller's dr_tiff_error, never to stderr.
 *
 * The pixels are given as stored: the Orientation tag is reported, not
 * applied, so that the engine turns a TIFF upright as it turns a JPEG.
 *
 * libtiff is loaded with dlopen on first use, as libheif is: it brings
 * libzstd, liblzma, libdeflate, libjbig and LERC (C++), which a command
 * that reads no TIFF need not map. When it cannot be loaded, each entry
 * point fails with DR_TIFF_UNSUPPORTED, saying why.
 *
 * Memory: the sides are checked against the caller's side limit before any
 * pixel buffer exists, and libtiff is told the most it may allocate at
 * once (`max_alloc`), which bounds what a strip or tile that claims to be
 * huge can cost.
 */
#ifndef CTIFF_H
#define CTIFF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dr_tiff_status {
    DR_TIFF_OK = 0,
    DR_TIFF_TRUNCATED = 1,          /* data ends before the header or the image's data does */
    DR_TIFF_CORRUPT = 2,            /* bad header, directory or image data */
    DR_TIFF_OUT_OF_MEMORY = 3,      /* an allocation failed or was over max_alloc */
    DR_TIFF_INVALID_ARGUMENT = 4,   /* caller passed an impossible request */
    DR_TIFF_TOO_LARGE = 5,          /* a side over the caller's limit */
    DR_TIFF_CANCELLED = 6,          /* the decode was stopped through its should_stop */
    DR_TIFF_INVALID_DIMENSIONS = 7, /* an image 0 wide or high */
    DR_TIFF_UNSUPPORTED = 8         /* a layout libtiff's RGBA interface cannot read (floating-point samples, say) */
} dr_tiff_status;

#define DR_TIFF_MESSAGE_MAX 200

typedef struct dr_tiff_error {
    dr_tiff_status status;
    char message[DR_TIFF_MESSAGE_MAX]; /* the failure in words, NUL-terminated */
} dr_tiff_error;

typedef struct dr_tiff_info {
    /* The first image's size as stored; also set for DR_TIFF_TOO_LARGE
       and DR_TIFF_INVALID_DIMENSIONS, to word the error. */
    int width;
    int height;
    /* The Orientation tag, 1 to 8 (1 when absent or out of range), with
       EXIF's meaning. */
    int orientation;
    /* An alpha channel (associated or not) among the extra samples. */
    int has_alpha;
    int bits_per_sample;
    int samples_per_pixel;
    /* PhotometricInterpretation, as TIFF numbers it. */
    int photometric;
    /* Whether the file has images after the first. */
    int more_pages;
    /* 8-bit CMYK ink samples, contiguous, nothing else: what
       dr_tiff_decode_cmyk reads (0 is no ink). */
    int plain_cmyk;
    /* The ICC profile (tag 34675): its length, and a copy to release with
       dr_tiff_free (NULL without one). */
    size_t icc_length;
    uint8_t *icc;
} dr_tiff_info;

/* Reads the first image's tags, checks its size against max_side and
   whether libtiff's RGBA interface can read it, and copies its ICC
   profile. */
dr_tiff_status dr_tiff_read_info(const uint8_t *data, size_t length, uint32_t max_side, size_t max_alloc,
                                 dr_tiff_info *info, dr_tiff_error *err);

/* Asked between bands of rows; a non-zero answer stops the decode with
   DR_TIFF_CANCELLED. It runs on the thread that called dr_tiff_decode_rgbx. */
typedef int (*dr_tiff_should_stop)(void *context);

/* Decodes the first image, as stored (no orientation applied), into
   `width` x `height` RGBX rows `dst_stride` bytes apart (the size
   dr_tiff_read_info gave, checked against the file). Alpha is laid over
   (bg_r, bg_g, bg_b) and the fourth byte of every pixel is 255; with
   `keep_alpha` non-zero each pixel keeps its straight colour (associated
   alpha divided out again, rounded) and the fourth byte holds its alpha,
   255 where the file has none. On any failure the rows hold nothing
   usable. */
dr_tiff_status dr_tiff_decode_rgbx(const uint8_t *data, size_t length, uint32_t max_side, size_t max_alloc,
                                   uint8_t *dst, size_t dst_stride, int width, int height,
                                   uint8_t bg_r, uint8_t bg_g, uint8_t bg_b, int keep_alpha,
                                   dr_tiff_should_stop should_stop, void *stop_context, dr_tiff_error *err);

/* Decodes the first image of a plain CMYK file (plain_cmyk), as stored,
   into `width` x `height` rows of its C, M, Y and K samples `dst_stride`
   bytes apart, for a colour managed conversion through its CMYK profile
   (the RGBA interface converts ink to RGB by a plain formula). */
dr_tiff_status dr_tiff_decode_cmyk(const uint8_t *data, size_t length, uint32_t max_side, size_t max_alloc,
                                   uint8_t *dst, size_t dst_stride, int width, int height,
                                   dr_tiff_should_stop should_stop, void *stop_context, dr_tiff_error *err);

/* How a fixture is written. */
typedef struct dr_tiff_encode_options {
    int samples;          /* 1 gray, 2 gray + alpha, 3 RGB, 4 RGB + alpha (or CMYK) */
    int cmyk;             /* with 4 samples: they are C, M, Y and K ink (0 none) */
    int associated_alpha; /* with alpha: 1 when the samples are premultiplied */
    int bits;             /* 8 or 16 (16-bit samples are the 8-bit ones times 257) */
    int compression;      /* a TIFF compression number: 1 none, 5 LZW, 8 deflate, 7 JPEG, 32773 PackBits */
    int tile;             /* tile side (a multiple of 16), or 0 for strips */
    int rows_per_strip;   /* for strips; 0 for libtiff's default */
    int planar;           /* 1 for separate planes, 0 for contiguous samples */
    int orientation;      /* 1 to 8, or 0 for no tag */
    const uint8_t *icc;
    size_t icc_length;
    int pages;            /* images written; each after the first is a 16x16 gray one */
} dr_tiff_encode_options;

/* Writes `pixels` (rows of `samples` 8-bit samples) as a TIFF, for tests.
   Returns 0 and a buffer to release with dr_tiff_free, or -1 with a
   message. */
int dr_tiff_encode(const uint8_t *pixels, int width, int height, const dr_tiff_encode_options *options,
                   uint8_t **out, size_t *out_length, char *message /* DR_TIFF_MESSAGE_MAX bytes */);

void dr_tiff_free(void *pointer);

#ifdef __cplusplus
}
#endif

#endif
