/*
 * The libpng shim. See include/CPNG.h for the contract.
 *
 * Error handling: libpng reports a failure by calling the error handler,
 * which must not return. Ours records the failure into the caller's
 * dr_png_error and jumps back (png_longjmp) to the setjmp of the function
 * that called into libpng. Those functions do nothing after the jump but
 * return the recorded status; everything that outlives the jump lives in a
 * session struct in the frame of the public entry point, which destroys
 * libpng's structures on every path. Warnings (benign errors included, see
 * png_set_benign_errors) are kept, never printed: the last one words an
 * "Invalid IHDR data" error, whose cause libpng gives as a warning first.
 */
#include <limits.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "CPNG.h"

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};

/* Rows read between two questions to the caller's should_stop. */
enum { DR_PNG_ROWS_PER_POLL = 16 };

static dr_png_status fail(dr_png_error *err, dr_png_status status, const char *format, ...) {
    if (err) {
        va_list args;
        va_start(args, format);
        err->status = status;
        vsnprintf(err->message, sizeof err->message, format, args);
        va_end(args);
    }
    return status;
}

static void reset_error(dr_png_error *err) {
    if (!err) return;
    err->status = DR_PNG_OK;
    err->message[0] = 0;
}

/* ---- One read of a file ---- */

typedef struct session {
    png_structp png;
    png_infop info;
    /* The file, read from memory by read_bytes. */
    const uint8_t *data;
    size_t length;
    size_t offset;
    int overran;                          /* libpng asked for bytes past the end */
    char warning[DR_PNG_MESSAGE_MAX];     /* libpng's last warning */
    dr_png_status status;                 /* what the error handler recorded */
    dr_png_error *err;
} session;

/* libpng's read callback. Asking for more than is left means the file was
   cut short: the error handler reports that as truncation. */
static void read_bytes(png_structp png, png_bytep out, size_t count) {
    session *s = (session *)png_get_io_ptr(png);
    if (count > s->length - s->offset) {
        s->overran = 1;
        png_error(png, "the data ends before libpng has read it all");
    }
    memcpy(out, s->data + s->offset, count);
    s->offset += count;
}

static dr_png_status classify(const session *s, const char *message) {
    if (s->overran) return DR_PNG_TRUNCATED;
    /* png_malloc's "Out of memory", png_read_buffer's "insufficient memory
       to read chunk", zlib's "insufficient memory". */
    if (strstr(message, "Out of memory") || strstr(message, "insufficient memory")) return DR_PNG_OUT_OF_MEMORY;
    /* A critical chunk libpng has no handler for: a feature, not damage. */
    if (strstr(message, "unhandled critical chunk")) return DR_PNG_UNSUPPORTED;
    return DR_PNG_CORRUPT;
}

static void on_error(png_structp png, png_const_charp message) {
    session *s = (session *)png_get_error_ptr(png);
    const char *text = message ? message : "unknown error";
    s->status = classify(s, text);
    if (s->overran) {
        fail(s->err, s->status, "libpng: read past the end of the data, %zu bytes", s->length);
    } else if (strstr(text, "Invalid IHDR data") && s->warning[0]) {
        fail(s->err, s->status, "libpng: %s (%s)", text, s->warning);
    } else {
        fail(s->err, s->status, "libpng: %s", text);
    }
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp message) {
    session *s = (session *)png_get_error_ptr(png);
    snprintf(s->warning, sizeof s->warning, "%s", message ? message : "");
}

static dr_png_status begin(session *s, const uint8_t *data, size_t length, dr_png_error *err) {
    memset(s, 0, sizeof *s);
    s->data = data;
    s->length = length;
    s->err = err;
    s->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s, on_error, on_warning);
    if (!s->png) {
        return fail(err, DR_PNG_OUT_OF_MEMORY, "libpng: no reader (out of memory, or a library of another version)");
    }
    s->info = png_create_info_struct(s->png);
    if (!s->info) {
        png_destroy_read_struct(&s->png, NULL, NULL);
        return fail(err, DR_PNG_OUT_OF_MEMORY, "libpng: out of memory");
    }
    png_set_read_fn(s->png, s, read_bytes);
    return DR_PNG_OK;
}

static void end(session *s) {
    if (s->png) png_destroy_read_struct(&s->png, &s->info, NULL);
}

/* Settings shared by header reads and decodes. May raise a libpng error
   (an allocation in png_set_keep_unknown_chunks): call with the jump armed. */
static void configure(session *s, uint32_t max_side, int with_metadata) {
    png_structp png = s->png;
    /* Benign errors (bad ancillary CRCs, profiles libpng finds wrong, chunks
       out of place, extra compressed data) warn and drop the chunk. */
    png_set_benign_errors(png, 1);
    /* The caller has checked IHDR against max_side already (precheck);
       libpng checks it again. */
    uint32_t side = max_side < PNG_UINT_31_MAX ? max_side : PNG_UINT_31_MAX;
    png_set_user_limits(png, side, side);
    png_set_chunk_malloc_max(png, DR_PNG_CHUNK_MALLOC_MAX);
    /* Every ancillary chunk but tRNS is skipped, its CRC still checked
       (libpng's list for a negative count), and so are unknown chunks. The
       header read takes iCCP and eXIf back. No gamma correction is made,
       so gAMA, cHRM and sRGB are skipped too: like browsers and libvips,
       the samples are taken as sRGB unless an ICC profile says otherwise. */
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
    if (with_metadata) {
        static const png_byte wanted[] = {'i', 'C', 'C', 'P', 0, 'e', 'X', 'I', 'f', 0};
        png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_AS_DEFAULT, wanted, 2);
    }
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* The signature, then the size in IHDR (the first chunk of every PNG file)
   against the limit, before libpng is set up or allocates anything. A
   file too short to hold the size, or whose first chunk is not IHDR, is
   left to libpng to report. */
static dr_png_status precheck(const uint8_t *data, size_t length, uint32_t max_side, dr_png_info *info,
                              dr_png_error *err) {
    if (!data || length == 0) return fail(err, DR_PNG_TRUNCATED, "libpng: no data");
    size_t compared = length < 8 ? length : 8;
    if (memcmp(data, png_signature, compared) != 0) {
        return fail(err, DR_PNG_CORRUPT, "not a PNG (no PNG signature)");
    }
    if (length < 8) return fail(err, DR_PNG_TRUNCATED, "the data ends inside the PNG signature");
    if (length < 24 || memcmp(data + 12, "IHDR", 4) != 0) return DR_PNG_OK;
    uint32_t width = be32(data + 16), height = be32(data + 20);
    if (width > PNG_UINT_31_MAX || height > PNG_UINT_31_MAX) return DR_PNG_OK;
    if (width == 0 || height == 0) {
        info->width = (int)width;
        info->height = (int)height;
        return fail(err, DR_PNG_INVALID_DIMENSIONS, "IHDR declares a %ux%u image", width, height);
    }
    if (width > max_side || height > max_side) {
        info->width = (int)width;
        info->height = (int)height;
        return fail(err, DR_PNG_TOO_LARGE, "IHDR declares a %ux%u image, over the limit of %u pixels a side",
                    width, height, max_side);
    }
    return DR_PNG_OK;
}

/* ---- The header ---- */

static dr_png_status read_header(session *s, uint32_t max_side, int with_metadata) {
    if (setjmp(png_jmpbuf(s->png))) return s->status;
    configure(s, max_side, with_metadata);
    png_read_info(s->png, s->info);
    return DR_PNG_OK;
}

static uint8_t *copy(const uint8_t *bytes, size_t length) {
    uint8_t *out = malloc(length);
    if (out) memcpy(out, bytes, length);
    return out;
}

/* What png_read_info found, copied out of libpng's structures. */
static dr_png_status describe(session *s, int with_metadata, dr_png_info *info, dr_png_error *err) {
    png_uint_32 width = 0, height = 0;
    int bit_depth = 0, color_type = 0, interlace = 0;
    png_get_IHDR(s->png, s->info, &width, &height, &bit_depth, &color_type, &interlace, NULL, NULL);
    if (width == 0 || height == 0 || width > INT_MAX || height > INT_MAX) {
        /* libpng refuses such an IHDR itself; a corrupt file, whatever happened. */
        return fail(err, DR_PNG_CORRUPT, "libpng: no usable IHDR");
    }
    info->width = (int)width;
    info->height = (int)height;
    info->bit_depth = bit_depth;
    info->color_type = color_type;
    info->interlaced = interlace == PNG_INTERLACE_ADAM7;
    info->has_alpha = (color_type & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(s->png, s->info, PNG_INFO_tRNS) != 0;
    if (!with_metadata) return DR_PNG_OK;

    png_charp name = NULL;
    int compression = 0;
    png_bytep profile = NULL;
    png_uint_32 profile_length = 0;
    if (png_get_iCCP(s->png, s->info, &name, &compression, &profile, &profile_length) && profile && profile_length > 0) {
        info->icc = copy(profile, profile_length);
        if (!info->icc) return fail(err, DR_PNG_OUT_OF_MEMORY, "out of memory for the ICC profile");
        info->icc_length = profile_length;
    }
    png_uint_32 exif_length = 0;
    png_bytep exif = NULL;
    if (png_get_eXIf_1(s->png, s->info, &exif_length, &exif) && exif && exif_length > 0) {
        info->exif = copy(exif, exif_length);
        if (!info->exif) return fail(err, DR_PNG_OUT_OF_MEMORY, "out of memory for the eXIf chunk");
        info->exif_length = exif_length;
    }
    return DR_PNG_OK;
}

dr_png_status dr_png_read_info(const uint8_t *data, size_t length, uint32_t max_side, int with_metadata,
                               dr_png_info *info, dr_png_error *err) {
    reset_error(err);
    if (!info) return fail(err, DR_PNG_INVALID_ARGUMENT, "no place for the header");
    memset(info, 0, sizeof *info);
    dr_png_status status = precheck(data, length, max_side, info, err);
    if (status != DR_PNG_OK) return status;
    session s;
    status = begin(&s, data, length, err);
    if (status != DR_PNG_OK) return status;
    status = read_header(&s, max_side, with_metadata);
    if (status == DR_PNG_OK) status = describe(&s, with_metadata, info, err);
    end(&s);
    if (status != DR_PNG_OK) dr_png_info_clear(info);
    return status;
}

void dr_png_info_clear(dr_png_info *info) {
    if (!info) return;
    free(info->icc);
    free(info->exif);
    info->icc = NULL;
    info->icc_length = 0;
    info->exif = NULL;
    info->exif_length = 0;
}

/* ---- The pixels ---- */

/* Reads the header and sets up the transforms that turn every kind of PNG
   into 8-bit RGBA or RGBX rows. */
static dr_png_status start_decode(session *s, uint32_t max_side, int width, int height, int *has_alpha,
                                  int *passes) {
    if (setjmp(png_jmpbuf(s->png))) return s->status;
    png_structp png = s->png;
    png_infop info = s->info;
    configure(s, max_side, 0);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    /* The caller sized the rows from a header it read before: a different
       size now would mean writing past them. */
    if (w != (png_uint_32)width || h != (png_uint_32)height) {
        return fail(s->err, DR_PNG_INVALID_ARGUMENT, "the picture is %ux%u, not the %dx%d expected",
                    (unsigned)w, (unsigned)h, width, height);
    }
    int color_type = png_get_color_type(png, info);
    int bit_depth = png_get_bit_depth(png, info);
    int trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    *has_alpha = (color_type & PNG_COLOR_MASK_ALPHA) != 0 || trns;

    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (trns) png_set_tRNS_to_alpha(png);
    /* (v * 255 + 32895) >> 16: v / 257 rounded, not the high byte. */
    if (bit_depth == 16) png_set_scale_16(png);
    if ((color_type & PNG_COLOR_MASK_COLOR) == 0) png_set_gray_to_rgb(png);
    if (!*has_alpha) png_set_filler(png, 0xFF, PNG_FILLER_AFTER);
    *passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_bit_depth(png, info) != 8 || png_get_channels(png, info) != 4 ||
        png_get_rowbytes(png, info) != (size_t)width * 4) {
        return fail(s->err, DR_PNG_UNSUPPORTED, "libpng gives %d channels of %d bits, not 8-bit RGBA",
                    png_get_channels(png, info), png_get_bit_depth(png, info));
    }
    return DR_PNG_OK;
}

/* Reads rows first ..< first + count of the current pass. In a pass of an
   interlaced file libpng writes only that pass's pixels into each row,
   leaving the others as earlier passes made them; every row is read in
   every pass, libpng skipping those the pass has none of. */
static dr_png_status read_rows(session *s, uint8_t *dst, size_t stride, int first, int count) {
    if (setjmp(png_jmpbuf(s->png))) return s->status;
    for (int i = 0; i < count; i++) {
        png_read_row(s->png, dst + (size_t)(first + i) * stride, NULL);
    }
    return DR_PNG_OK;
}

/* Composites straight RGBA onto the background, in place, rounding
   (c * a + bg * (255 - a) + 127) / 255; the fourth byte becomes 255. */
static void composite(uint8_t *row, int width, const uint8_t background[3]) {
    for (int x = 0; x < width; x++) {
        uint8_t *p = row + (size_t)x * 4;
        unsigned a = p[3];
        if (a != 255) {
            unsigned rest = 255 - a;
            p[0] = (uint8_t)((p[0] * a + background[0] * rest + 127) / 255);
            p[1] = (uint8_t)((p[1] * a + background[1] * rest + 127) / 255);
            p[2] = (uint8_t)((p[2] * a + background[2] * rest + 127) / 255);
            p[3] = 255;
        }
    }
}

dr_png_status dr_png_decode_rgbx(const uint8_t *data, size_t length, uint32_t max_side,
                                 uint8_t *dst, size_t dst_stride, int width, int height,
                                 uint8_t bg_r, uint8_t bg_g, uint8_t bg_b, int keep_alpha,
                                 dr_png_should_stop should_stop, void *stop_context, dr_png_error *err) {
    reset_error(err);
    if (!dst || width <= 0 || height <= 0 || dst_stride < (size_t)width * 4) {
        return fail(err, DR_PNG_INVALID_ARGUMENT, "no room for a %dx%d picture in rows of %zu bytes",
                    width, height, dst_stride);
    }
    dr_png_info header;
    memset(&header, 0, sizeof header);
    dr_png_status status = precheck(data, length, max_side, &header, err);
    if (status != DR_PNG_OK) return status;
    session s;
    status = begin(&s, data, length, err);
    if (status != DR_PNG_OK) return status;

    int has_alpha = 0, passes = 1;
    status = start_decode(&s, max_side, width, height, &has_alpha, &passes);
    const uint8_t background[3] = {bg_r, bg_g, bg_b};
    for (int pass = 0; status == DR_PNG_OK && pass < passes; pass++) {
        for (int y = 0; y < height; y += DR_PNG_ROWS_PER_POLL) {
            if (should_stop && should_stop(stop_context)) {
                status = fail(err, DR_PNG_CANCELLED, "stopped on request");
                break;
            }
            int count = height - y < DR_PNG_ROWS_PER_POLL ? height - y : DR_PNG_ROWS_PER_POLL;
            status = read_rows(&s, dst, dst_stride, y, count);
            if (status != DR_PNG_OK) break;
            /* After the last pass these rows are whole: every earlier pass
               has been read in full. */
            if (has_alpha && !keep_alpha && pass == passes - 1) {
                for (int i = 0; i < count; i++) composite(dst + (size_t)(y + i) * dst_stride, width, background);
            }
        }
    }
    end(&s);
    return status;
}

/* ---- Writing ---- */

/* One encode: libpng's structures and the growing output, in the frame of
   dr_png_encode, which destroys them on every path. */
typedef struct writer {
    png_structp png;
    png_infop info;
    uint8_t *out;
    size_t length;
    size_t capacity;
    int out_of_memory;                    /* the output could not grow */
    dr_png_status status;                 /* what the error handler recorded */
    dr_png_error *err;
    uint8_t *row;                         /* a gray + alpha row, packed from RGBA */
} writer;

static void write_bytes(png_structp png, png_bytep data, size_t count) {
    writer *w = (writer *)png_get_io_ptr(png);
    if (count > w->capacity - w->length) {
        size_t capacity = w->capacity ? w->capacity : 64 << 10;
        while (count > capacity - w->length) {
            if (capacity > SIZE_MAX / 2) capacity = SIZE_MAX;
            else capacity *= 2;
        }
        uint8_t *grown = realloc(w->out, capacity);
        if (!grown) {
            w->out_of_memory = 1;
            png_error(png, "Out of memory for the output");
        }
        w->out = grown;
        w->capacity = capacity;
    }
    memcpy(w->out + w->length, data, count);
    w->length += count;
}

static void flush_bytes(png_structp png) { (void)png; }

static void on_write_error(png_structp png, png_const_charp message) {
    writer *w = (writer *)png_get_error_ptr(png);
    const char *text = message ? message : "unknown error";
    w->status = (w->out_of_memory || strstr(text, "Out of memory") || strstr(text, "insufficient memory"))
                    ? DR_PNG_OUT_OF_MEMORY : DR_PNG_CORRUPT;
    fail(w->err, w->status, "libpng: %s", text);
    png_longjmp(png, 1);
}

/* Warnings while writing (a profile libpng leaves out) are not failures. */
static void on_write_warning(png_structp png, png_const_charp message) {
    (void)png;
    (void)message;
}

/* IHDR, the profile and the settings, up to the first row. */
static dr_png_status write_start(writer *w, int width, int height, dr_png_input input, int level,
                                 const uint8_t *icc, size_t icc_length) {
    if (setjmp(png_jmpbuf(w->png))) return w->status;
    png_structp png = w->png;
    png_set_benign_errors(png, 1);
    png_set_write_fn(png, w, write_bytes, flush_bytes);
    png_set_compression_level(png, level);
    int color_type = input == DR_PNG_INPUT_GRAY ? PNG_COLOR_TYPE_GRAY
                   : input == DR_PNG_INPUT_RGBA ? PNG_COLOR_TYPE_RGB_ALPHA
                   : input == DR_PNG_INPUT_GRAY_ALPHA ? PNG_COLOR_TYPE_GRAY_ALPHA : PNG_COLOR_TYPE_RGB;
    png_set_IHDR(png, w->info, (png_uint_32)width, (png_uint_32)height, 8, color_type, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (icc && icc_length > 0 && icc_length <= PNG_UINT_31_MAX) {
        png_set_iCCP(png, w->info, "ICC profile", PNG_COMPRESSION_TYPE_BASE, icc, (png_uint_32)icc_length);
    }
    png_write_info(png, w->info);
    /* The fourth byte of each RGBX pixel is dropped as the rows are written. */
    if (input == DR_PNG_INPUT_RGBX) png_set_filler(png, 0, PNG_FILLER_AFTER);
    return DR_PNG_OK;
}

static dr_png_status write_rows(writer *w, const uint8_t *pixels, size_t stride, int width, int first, int count) {
    if (setjmp(png_jmpbuf(w->png))) return w->status;
    for (int i = 0; i < count; i++) {
        const uint8_t *row = pixels + (size_t)(first + i) * stride;
        if (w->row) {
            /* Gray + alpha: the first and fourth byte of each pixel. */
            for (int x = 0; x < width; x++) {
                w->row[2 * x] = row[4 * x];
                w->row[2 * x + 1] = row[4 * x + 3];
            }
            row = w->row;
        }
        png_write_row(w->png, (png_const_bytep)row);
    }
    return DR_PNG_OK;
}

static dr_png_status write_end(writer *w) {
    if (setjmp(png_jmpbuf(w->png))) return w->status;
    png_write_end(w->png, NULL);
    return DR_PNG_OK;
}

dr_png_status dr_png_encode(const uint8_t *pixels, int width, int height, size_t stride, dr_png_input input, int level,
                            const uint8_t *icc, size_t icc_length, dr_png_should_stop should_stop, void *stop_context,
                            uint8_t **out, size_t *out_length, dr_png_error *err) {
    reset_error(err);
    if (!out || !out_length) return fail(err, DR_PNG_INVALID_ARGUMENT, "no place for the output");
    *out = NULL;
    *out_length = 0;
    size_t row_bytes = (size_t)width * (input == DR_PNG_INPUT_GRAY ? 1 : 4);
    if (!pixels || width <= 0 || height <= 0 || stride < row_bytes ||
        (input != DR_PNG_INPUT_RGBX && input != DR_PNG_INPUT_GRAY && input != DR_PNG_INPUT_RGBA &&
         input != DR_PNG_INPUT_GRAY_ALPHA)) {
        return fail(err, DR_PNG_INVALID_ARGUMENT, "no %dx%d picture in rows of %zu bytes", width, height, stride);
    }
    if (level < 0 || level > 9) return fail(err, DR_PNG_INVALID_ARGUMENT, "compression level %d is not 0 to 9", level);
    writer w;
    memset(&w, 0, sizeof w);
    w.err = err;
    w.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &w, on_write_error, on_write_warning);
    if (!w.png) return fail(err, DR_PNG_OUT_OF_MEMORY, "libpng: no writer (out of memory, or a library of another version)");
    w.info = png_create_info_struct(w.png);
    dr_png_status status = w.info ? DR_PNG_OK : fail(err, DR_PNG_OUT_OF_MEMORY, "libpng: out of memory");
    if (status == DR_PNG_OK) status = write_start(&w, width, height, input, level, icc, icc_length);
    /* The packed row of a gray + alpha file, once libpng has accepted the size. */
    if (status == DR_PNG_OK && input == DR_PNG_INPUT_GRAY_ALPHA) {
        w.row = (uint8_t *)malloc((size_t)width * 2);
        if (!w.row) status = fail(err, DR_PNG_OUT_OF_MEMORY, "no room for a row of %d pixels", width);
    }
    for (int y = 0; status == DR_PNG_OK && y < height; y += DR_PNG_ROWS_PER_POLL) {
        if (should_stop && should_stop(stop_context)) {
            status = fail(err, DR_PNG_CANCELLED, "stopped on request");
            break;
        }
        int count = height - y < DR_PNG_ROWS_PER_POLL ? height - y : DR_PNG_ROWS_PER_POLL;
        status = write_rows(&w, pixels, stride, width, y, count);
    }
    if (status == DR_PNG_OK) status = write_end(&w);
    png_destroy_write_struct(&w.png, &w.info);
    free(w.row);
    if (status != DR_PNG_OK) {
        free(w.out);
        return status;
    }
    *out = w.out;
    *out_length = w.length;
    return DR_PNG_OK;
}

void dr_png_free(uint8_t *buffer) { free(buffer); }
