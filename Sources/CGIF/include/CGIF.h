/*
 * CGIF: the only place where giflib is called.
 *
 * Decoding of a GIF's first picture (Darkroom never writes GIF outside its
 * tests): what the header and the records before that picture say, and the
 * picture itself on the logical screen, in the engine's RGBX layout, with
 * its transparent colour and whatever it leaves uncovered showing a
 * background colour. An animated GIF gives its first frame, as libvips and
 * sharp do by default. Files are read from memory through giflib's
 * DGifOpen; every giflib call and every pointer to a giflib structure stays
 * in cgif.c. giflib never prints or exits; its error codes are turned into
 * a few coarse statuses and a message in words, written into the caller's
 * dr_gif_error, so that Swift can map them onto ImageError codes.
 *
 * Memory: the logical screen's and the first picture's sides are checked
 * against the caller's side limit before any pixel buffer exists, and the
 * only buffer this file allocates for a decode is one row of the picture.
 * Extension blocks (comments, application data, a later frame's anything)
 * are read and dropped block by block, never kept. Nothing after the first
 * picture is read.
 */
#ifndef CGIF_H
#define CGIF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What went wrong, coarse enough for Swift to map onto ImageError codes. */
typedef enum dr_gif_status {
    DR_GIF_OK = 0,
    DR_GIF_TRUNCATED = 1,          /* data ends before the header or the first picture does */
    DR_GIF_CORRUPT = 2,            /* no GIF signature, bad records, bad image data, no colour table */
    DR_GIF_OUT_OF_MEMORY = 3,
    DR_GIF_INVALID_ARGUMENT = 4,   /* caller passed an impossible request */
    DR_GIF_TOO_LARGE = 5,          /* a side of the screen or of the first picture over the caller's limit */
    DR_GIF_CANCELLED = 6,          /* the decode was stopped through its should_stop */
    DR_GIF_INVALID_DIMENSIONS = 7, /* a screen and a first picture 0 wide or high */
    DR_GIF_NO_IMAGE = 8            /* the file ends (trailer) before any picture */
} dr_gif_status;

#define DR_GIF_MESSAGE_MAX 200

typedef struct dr_gif_error {
    dr_gif_status status;
    char message[DR_GIF_MESSAGE_MAX]; /* the failure in words, NUL-terminated */
} dr_gif_error;

typedef struct dr_gif_info {
    /* The size decoded: the logical screen's, or the first picture's
       extent when the screen says 0 wide or high. Also set when the status
       is DR_GIF_TOO_LARGE or DR_GIF_INVALID_DIMENSIONS, to word the error. */
    int width;
    int height;
    /* The first picture's place on the screen. */
    int left, top, frame_width, frame_height;
    int interlaced;
    /* A transparent colour in the first picture's graphics control block,
       or a picture that leaves part of the screen uncovered. */
    int has_alpha;
} dr_gif_info;

/* Reads the header and the records up to the first picture's descriptor. */
dr_gif_status dr_gif_read_info(const uint8_t *data, size_t length, uint32_t max_side, dr_gif_info *info, dr_gif_error *err);

/* Asked every 16 rows; a non-zero answer stops the decode with
   DR_GIF_CANCELLED. It runs on the thread that called dr_gif_decode_rgbx. */
typedef int (*dr_gif_should_stop)(void *context);

/* Decodes the first picture onto a `width` x `height` canvas (the size
   dr_gif_read_info gave, checked against it) of RGBX rows `dst_stride`
   bytes apart. The canvas starts as (bg_r, bg_g, bg_b); the picture's
   pixels are drawn at its place through its local colour table, or the
   global one, except those of its transparent colour and those whose index
   is past the table, which leave the background. Interlaced pictures are
   drawn row by row into their places. The fourth byte of every pixel is
   255. With `keep_alpha` non-zero the background is transparent instead:
   what would show it is (0, 0, 0) with a fourth byte of 0, and every other
   pixel's fourth byte is 255. On any failure the rows hold nothing usable. */
dr_gif_status dr_gif_decode_rgbx(const uint8_t *data, size_t length, uint32_t max_side,
                                 uint8_t *dst, size_t dst_stride, int width, int height,
                                 uint8_t bg_r, uint8_t bg_g, uint8_t bg_b, int keep_alpha,
                                 dr_gif_should_stop should_stop, void *stop_context, dr_gif_error *err);

/* One picture for dr_gif_encode (tests build their GIF fixtures with it). */
typedef struct dr_gif_frame {
    int left, top, width, height;
    int interlaced;
    int transparent;        /* a palette index, or -1 for none */
    const uint8_t *indices; /* width * height palette indices, row by row */
} dr_gif_frame;

/* Writes a GIF89a of `count` pictures on a `screen_width` x `screen_height`
   screen with one global colour table of `colors` entries (2, 4, ... 256;
   `palette` holds them as R, G, B). The file is malloc'ed into *out (free
   it with dr_gif_free). Returns 0 on success. */
int dr_gif_encode(const dr_gif_frame *frames, int count, int screen_width, int screen_height,
                  const uint8_t *palette, int colors, uint8_t **out, size_t *out_length);
void dr_gif_free(void *pointer);

#ifdef __cplusplus
}
#endif

#endif
