/*
 * CHEIF: the only place where libheif is called.
 *
 * libheif is loaded when it is first needed, not when the program starts:
 * it brings its codecs with it (libde265, x265, libaom, dav1d and the C++
 * runtime, some 20 MB of shared libraries), which every darkroom process
 * would otherwise map and relocate though only HEIF sources need them. Its
 * header still gives the types and constants; its functions are called
 * only through pointers looked up in cheif.c, and the program does not
 * link it. When it cannot be loaded, every function here fails with
 * DR_HEIF_UNSUPPORTED and says why.
 *
 * Decoding of a HEIF file's primary image (HEIC, coded with HEVC, or AVIF,
 * coded with AV1): what its boxes say (size, alpha, colour profile), and
 * its pixels in the engine's RGBX layout, composited onto a background
 * colour where it has alpha. libheif applies the file's own rotation,
 * mirroring and clean-aperture crop (irot, imir, clap), so the size and
 * the pixels are upright; HEIF's EXIF orientation, which those boxes
 * supersede, is not applied again. Deeper than 8-bit images are decoded to
 * 8 bits. Files are read from memory without a copy; every libheif call
 * and pointer stays in cheif.c. libheif never prints; its errors are
 * turned into a few coarse statuses and a message in words, written into
 * the caller's dr_heif_error, so that Swift can map them onto ImageError
 * codes.
 *
 * Memory: the primary image's sides are checked against the caller's side
 * limit (and libheif's own size limit is set to it) before anything is
 * decoded. The decode itself allocates inside libheif and its codec
 * (libde265 or dav1d/libaom), which size their buffers from the coded
 * stream, not from the boxes. So before any decode, every HEVC sequence
 * parameter set in the file (each hvcC property, and each HEVC item's data
 * as iloc places it) is read for its picture size, which must stay within
 * the primary image's longer side plus one 64-pixel coding block; the walk
 * is bounded to a few readings of the file. AV1 sequence headers are not
 * read. The image libheif returns is checked against the size the boxes
 * gave before a pixel is copied.
 *
 * Threads: a decode runs on the calling thread, tiles included (libheif's
 * own pool is turned off), so a worker's concurrency bounds its cores.
 */
#ifndef CHEIF_H
#define CHEIF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dr_heif_status {
    DR_HEIF_OK = 0,
    DR_HEIF_TRUNCATED = 1,          /* data ends before a box or the coded image does */
    DR_HEIF_CORRUPT = 2,            /* bad boxes, no primary image, a coded stream the codec refuses */
    DR_HEIF_OUT_OF_MEMORY = 3,
    DR_HEIF_INVALID_ARGUMENT = 4,   /* caller passed an impossible request */
    DR_HEIF_TOO_LARGE = 5,          /* a side of the primary image over the caller's limit */
    DR_HEIF_CANCELLED = 6,          /* stopped through should_stop (asked before and after the decode) */
    DR_HEIF_INVALID_DIMENSIONS = 7, /* a primary image 0 wide or high */
    DR_HEIF_UNSUPPORTED = 8         /* a codec or feature this libheif cannot decode */
} dr_heif_status;

#define DR_HEIF_MESSAGE_MAX 200

typedef struct dr_heif_error {
    dr_heif_status status;
    char message[DR_HEIF_MESSAGE_MAX]; /* the failure in words, NUL-terminated */
} dr_heif_error;

typedef struct dr_heif_info {
    /* The primary image's size, upright. Also set when the status is
       DR_HEIF_TOO_LARGE or DR_HEIF_INVALID_DIMENSIONS, to word the error. */
    int width;
    int height;
    int has_alpha;
    /* 1 for AV1 (AVIF), 0 for HEVC (HEIC) and anything else. */
    int is_av1;
    /* Bits per luma sample as coded (8, 10, 12), or -1 when not said. */
    int bit_depth;
    /* Bytes of the embedded ICC profile ('prof' or 'rICC'), 0 for none. */
    size_t icc_length;
    /* That profile, malloc'ed when it was asked for (free it with
       dr_heif_free); NULL when it was not, or there is none. */
    uint8_t *icc;
    /* An nclx colour box in place of a profile: its colour primaries and
       transfer characteristics (ISO/IEC 23091-2 codes; 0 for no box), and
       the primaries' and white point's chromaticities as libheif gives them
       (red x, y, green x, y, blue x, y, white x, y). */
    int nclx_primaries;
    int nclx_transfer;
    float nclx_xy[8];
} dr_heif_info;

/* Reads the boxes up to the primary image's properties, and copies out
   its ICC profile too when `want_icc` is not 0. */
dr_heif_status dr_heif_read_info(const uint8_t *data, size_t length, uint32_t max_side, int want_icc, dr_heif_info *info,
                                 dr_heif_error *err);

/* Asked before and after the decode (libheif cannot be stopped inside
   one); a non-zero answer stops it with DR_HEIF_CANCELLED. It runs on the
   thread that called dr_heif_decode_rgbx. */
typedef int (*dr_heif_should_stop)(void *context);

/* Decodes the primary image into `width` x `height` RGBX rows `dst_stride`
   bytes apart (the size dr_heif_read_info gave; the decoded image is
   checked against it). Premultiplied colour (a file's 'prem' reference)
   is divided out, rounded, or laid over the background as it is. Where
   the image has alpha, each pixel is laid over
   (bg_r, bg_g, bg_b): (c * a + bg * (255 - a) + 127) / 255, and the fourth
   byte of every pixel is 255; with `keep_alpha` non-zero each pixel keeps
   its colour and the fourth byte holds its alpha (255 where the image has
   none). On any failure the rows hold nothing usable. */
dr_heif_status dr_heif_decode_rgbx(const uint8_t *data, size_t length, uint32_t max_side,
                                   uint8_t *dst, size_t dst_stride, int width, int height,
                                   uint8_t bg_r, uint8_t bg_g, uint8_t bg_b, int keep_alpha,
                                   dr_heif_should_stop should_stop, void *stop_context, dr_heif_error *err);

/* Writes a HEIF of one image (tests build their fixtures with it): `pixels`
   holds `width` x `height` 8-bit RGB (or RGBA with `has_alpha`; with
   `has_alpha` 2 the colour is premultiplied and the file says so) rows, coded
   with HEVC (`av1` 0) or AV1 (`av1` 1) at `quality` (0-100), or lossless
   with `lossless`, at `bit_depth` bits a sample (8, or 10 or 12: each
   sample widened as v << (bits - 8) | v >> (16 - bits)). An ICC profile is embedded when `icc` is not NULL, and an
   nclx colour box (those codes, BT.601 matrix, full range) when `nclx_primaries` > 0. The file
   is malloc'ed into *out (free it with dr_heif_free). Returns 0 on
   success, and otherwise writes what failed into `message`. */
int dr_heif_encode(const uint8_t *pixels, int width, int height, int has_alpha, int av1, int quality, int lossless,
                   int bit_depth, const uint8_t *icc, size_t icc_length, int nclx_primaries, int nclx_transfer,
                   uint8_t **out, size_t *out_length, char message[DR_HEIF_MESSAGE_MAX]);
/* Writes `width` x `height` RGBX rows, `stride` bytes apart (the fourth
   byte of each pixel is dropped, or with `has_alpha` coded as straight
   alpha in an auxiliary alpha image), as an AVIF: AV1 through libheif's AV1
   encoder (libaom on Debian), lossy at `quality` 1-100 with the encoder's
   own speed and chroma (4:2:0), on one thread, 8 bits a sample, with the
   ICC profile at `icc` in a 'prof' colour box when `icc_length` > 0.
   libheif's encode cannot be stopped part way: `should_stop` (may be NULL)
   is asked once, before it starts. On success *out holds the file, to
   release with dr_heif_free; DR_HEIF_UNSUPPORTED when libheif or its AV1
   encoder is missing. */
dr_heif_status dr_heif_encode_avif(const uint8_t *pixels, int width, int height, size_t stride, int has_alpha, int quality,
                                   const uint8_t *icc, size_t icc_length, dr_heif_should_stop should_stop,
                                   void *stop_context, uint8_t **out, size_t *out_length, dr_heif_error *err);

void dr_heif_free(void *pointer);

#ifdef __cplusplus
}
#endif

#endif
