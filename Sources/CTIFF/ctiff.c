#include "CTIFF.h"
#include "CLoader.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

#define LIBTIFF_SONAME "libtiff.so.6"

/* libtiff, loaded on first use (see CTIFF.h for why). Each pointer has the
   type of the function libtiff's header declares. They are written once,
   inside pthread_once, before load_libtiff returns to any thread, and
   every entry point below calls load_libtiff first, so they are never
   read while being written. */
static struct {
    __typeof__(&TIFFClientOpenExt) client_open_ext;
    __typeof__(&TIFFClose) close;
    __typeof__(&TIFFDefaultStripSize) default_strip_size;
    __typeof__(&TIFFGetField) get_field;
    __typeof__(&TIFFGetFieldDefaulted) get_field_defaulted;
    __typeof__(&TIFFIsTiled) is_tiled;
    __typeof__(&TIFFLastDirectory) last_directory;
    __typeof__(&TIFFOpenOptionsAlloc) open_options_alloc;
    __typeof__(&TIFFOpenOptionsFree) open_options_free;
    __typeof__(&TIFFOpenOptionsSetErrorHandlerExtR) open_options_set_error_handler_ext_r;
    __typeof__(&TIFFOpenOptionsSetMaxSingleMemAlloc) open_options_set_max_single_mem_alloc;
    __typeof__(&TIFFOpenOptionsSetWarningHandlerExtR) open_options_set_warning_handler_ext_r;
    __typeof__(&TIFFRGBAImageBegin) rgba_image_begin;
    __typeof__(&TIFFRGBAImageEnd) rgba_image_end;
    __typeof__(&TIFFRGBAImageGet) rgba_image_get;
    __typeof__(&TIFFReadTile) read_tile;
    __typeof__(&TIFFReadEncodedStrip) read_encoded_strip;
    __typeof__(&TIFFComputeStrip) compute_strip;
    __typeof__(&TIFFSetErrorHandler) set_error_handler;
    __typeof__(&TIFFSetField) set_field;
    __typeof__(&TIFFSetWarningHandler) set_warning_handler;
    __typeof__(&TIFFTileSize) tile_size;
    __typeof__(&TIFFWriteDirectory) write_directory;
    __typeof__(&TIFFWriteScanline) write_scanline;
    __typeof__(&TIFFWriteTile) write_tile;
} api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure = "libtiff was not loaded";
static char load_failure_text[512];

static void load(void) {
    /* Each symbol by name; the first one missing is named. */
    const dr_symbol symbols[] = {
        { "TIFFClientOpenExt", (void **)&api.client_open_ext },
        { "TIFFClose", (void **)&api.close },
        { "TIFFDefaultStripSize", (void **)&api.default_strip_size },
        { "TIFFGetField", (void **)&api.get_field },
        { "TIFFGetFieldDefaulted", (void **)&api.get_field_defaulted },
        { "TIFFIsTiled", (void **)&api.is_tiled },
        { "TIFFLastDirectory", (void **)&api.last_directory },
        { "TIFFOpenOptionsAlloc", (void **)&api.open_options_alloc },
        { "TIFFOpenOptionsFree", (void **)&api.open_options_free },
        { "TIFFOpenOptionsSetErrorHandlerExtR", (void **)&api.open_options_set_error_handler_ext_r },
        { "TIFFOpenOptionsSetMaxSingleMemAlloc", (void **)&api.open_options_set_max_single_mem_alloc },
        { "TIFFOpenOptionsSetWarningHandlerExtR", (void **)&api.open_options_set_warning_handler_ext_r },
        { "TIFFRGBAImageBegin", (void **)&api.rgba_image_begin },
        { "TIFFRGBAImageEnd", (void **)&api.rgba_image_end },
        { "TIFFRGBAImageGet", (void **)&api.rgba_image_get },
        { "TIFFReadTile", (void **)&api.read_tile },
        { "TIFFReadEncodedStrip", (void **)&api.read_encoded_strip },
        { "TIFFComputeStrip", (void **)&api.compute_strip },
        { "TIFFSetErrorHandler", (void **)&api.set_error_handler },
        { "TIFFSetField", (void **)&api.set_field },
        { "TIFFSetWarningHandler", (void **)&api.set_warning_handler },
        { "TIFFTileSize", (void **)&api.tile_size },
        { "TIFFWriteDirectory", (void **)&api.write_directory },
        { "TIFFWriteScanline", (void **)&api.write_scanline },
        { "TIFFWriteTile", (void **)&api.write_tile },
    };
    load_failure = dr_load_library("libtiff", LIBTIFF_SONAME, "libtiff6 on Debian 12", symbols, sizeof symbols / sizeof symbols[0],
                                   load_failure_text, sizeof load_failure_text);
    if (load_failure != NULL) return;
    /* The process-wide handlers, which write to stderr by default, are
       removed: a message libtiff raises before a file has its own handlers
       is dropped, not printed. The library stays loaded for the life of the
       process. */
    api.set_error_handler(NULL);
    api.set_warning_handler(NULL);
    load_failure = NULL;
}

/* NULL once libtiff is ready, or why it is not. */
static const char *load_libtiff(void) {
    pthread_once(&load_once, load);
    return load_failure;
}

static dr_tiff_status fail(dr_tiff_error *err, dr_tiff_status status, const char *format, ...) {
    if (err) {
        err->status = status;
        va_list args;
        va_start(args, format);
        vsnprintf(err->message, sizeof err->message, format, args);
        va_end(args);
    }
    return status;
}

/* A file in memory, read (or, for fixtures, written) through libtiff's
   client procedures. */
typedef struct stream {
    uint8_t *data;
    size_t length, capacity, at;
    int writable;
} stream;

static tmsize_t stream_read(thandle_t handle, void *buffer, tmsize_t size) {
    stream *s = handle;
    if (size <= 0 || s->at >= s->length) return 0;
    size_t count = s->length - s->at < (size_t)size ? s->length - s->at : (size_t)size;
    memcpy(buffer, s->data + s->at, count);
    s->at += count;
    return (tmsize_t)count;
}

static tmsize_t stream_write(thandle_t handle, void *buffer, tmsize_t size) {
    stream *s = handle;
    if (!s->writable || size < 0) return -1;
    size_t end = s->at + (size_t)size;
    if (end > s->capacity) {
        size_t capacity = s->capacity ? s->capacity : 4096;
        while (capacity < end) capacity *= 2;
        uint8_t *grown = realloc(s->data, capacity);
        if (!grown) return -1;
        memset(grown + s->capacity, 0, capacity - s->capacity);
        s->data = grown;
        s->capacity = capacity;
    }
    memcpy(s->data + s->at, buffer, (size_t)size);
    s->at = end;
    if (end > s->length) s->length = end;
    return size;
}

static toff_t stream_seek(thandle_t handle, toff_t offset, int whence) {
    stream *s = handle;
    uint64_t base = whence == SEEK_CUR ? s->at : whence == SEEK_END ? s->length : 0;
    uint64_t target = base + offset;
    if (target < base || target > (uint64_t)SIZE_MAX / 2) return (toff_t)-1;
    s->at = (size_t)target;
    return target;
}

static int stream_close(thandle_t handle) { (void)handle; return 0; }
static toff_t stream_size(thandle_t handle) { return ((stream *)handle)->length; }

/* A file being read is already in memory: libtiff reads strips and tiles
   from it in place instead of copying them out first. */
static int stream_map(thandle_t handle, void **base, toff_t *size) {
    stream *s = handle;
    if (s->writable) return 0;
    *base = s->data;
    *size = s->length;
    return 1;
}

static void stream_unmap(thandle_t handle, void *base, toff_t size) { (void)handle; (void)base; (void)size; }

/* libtiff's first error message for one file, kept for the caller. */
typedef struct capture {
    int have;
    char text[DR_TIFF_MESSAGE_MAX];
} capture;

static int on_error(TIFF *tif, void *user, const char *module, const char *format, va_list args) {
    (void)tif; (void)module;
    capture *c = user;
    if (c && !c->have) {
        vsnprintf(c->text, sizeof c->text, format, args);
        c->have = 1;
    }
    return 1;  /* handled: the process-wide handler is not called */
}

static int on_warning(TIFF *tif, void *user, const char *module, const char *format, va_list args) {
    (void)tif; (void)user; (void)module; (void)format; (void)args;
    return 1;
}

static TIFF *open_stream(stream *s, const char *mode, size_t max_alloc, capture *c) {
    TIFFOpenOptions *options = api.open_options_alloc();
    if (!options) return NULL;
    if (max_alloc > 0) api.open_options_set_max_single_mem_alloc(options, max_alloc > (size_t)INT64_MAX ? INT64_MAX : (tmsize_t)max_alloc);
    api.open_options_set_error_handler_ext_r(options, on_error, c);
    api.open_options_set_warning_handler_ext_r(options, on_warning, c);
    TIFF *tif = api.client_open_ext("input", mode, (thandle_t)s, stream_read, stream_write, stream_seek, stream_close,
                                  stream_size, stream_map, stream_unmap, options);
    api.open_options_free(options);
    return tif;
}

/* libtiff's message turned into a status: its words for data that ends
   early, and for memory, are the ones it has used for decades. */
static dr_tiff_status from_capture(const capture *c, const char *step, dr_tiff_error *err) {
    const char *text = c->have ? c->text : "libtiff could not read it, and gave no reason";
    dr_tiff_status status = DR_TIFF_CORRUPT;
    if (strstr(text, "Read error") || strstr(text, "Cannot read") || strstr(text, "end of file") || strstr(text, "past end"))
        status = DR_TIFF_TRUNCATED;
    else if (strstr(text, "emory") || strstr(text, "allocat"))
        status = DR_TIFF_OUT_OF_MEMORY;
    return fail(err, status, "%s: %s", step, text);
}

/* The first image's size and orientation from its tags. */
static void read_size(TIFF *tif, uint32_t *width, uint32_t *height, int *orientation) {
    uint32_t w = 0, h = 0;
    uint16_t o = ORIENTATION_TOPLEFT;
    api.get_field(tif, TIFFTAG_IMAGEWIDTH, &w);
    api.get_field(tif, TIFFTAG_IMAGELENGTH, &h);
    api.get_field_defaulted(tif, TIFFTAG_ORIENTATION, &o);
    *width = w;
    *height = h;
    *orientation = o >= 1 && o <= 8 ? o : 1;
}

/* 8-bit CMYK ink samples, contiguous, and nothing else: the layout
   dr_tiff_decode_cmyk copies out as it is. */
static int is_plain_cmyk(TIFF *tif) {
    uint16_t photometric = 0, inks = INKSET_CMYK, samples = 1, bits = 1, planar = PLANARCONFIG_CONTIG;
    api.get_field(tif, TIFFTAG_PHOTOMETRIC, &photometric);
    api.get_field_defaulted(tif, TIFFTAG_INKSET, &inks);
    api.get_field_defaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
    api.get_field_defaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
    api.get_field_defaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
    return photometric == PHOTOMETRIC_SEPARATED && inks == INKSET_CMYK && samples == 4 && bits == 8 && planar == PLANARCONFIG_CONTIG;
}

/* Whether the RGBA interface leaves alpha premultiplied in what it gives:
   always for associated alpha (the file's own samples), and for
   unassociated alpha with colour samples, which it multiplies out itself;
   gray with unassociated alpha it gives as stored. */
static int premultiplied(const TIFFRGBAImage *img) {
    if (img->alpha == EXTRASAMPLE_ASSOCALPHA) return 1;
    return img->alpha == EXTRASAMPLE_UNASSALPHA && img->photometric != PHOTOMETRIC_MINISBLACK
           && img->photometric != PHOTOMETRIC_MINISWHITE;
}

dr_tiff_status dr_tiff_read_info(const uint8_t *data, size_t length, uint32_t max_side, size_t max_alloc,
                                 dr_tiff_info *info, dr_tiff_error *err) {
    if (!info) return fail(err, DR_TIFF_INVALID_ARGUMENT, "no info to fill");
    memset(info, 0, sizeof *info);
    if (!data || length == 0) return fail(err, DR_TIFF_INVALID_ARGUMENT, "no data");
    const char *missing = load_libtiff();
    if (missing) return fail(err, DR_TIFF_UNSUPPORTED, "%s", missing);
    stream s = { .data = (uint8_t *)data, .length = length, .capacity = length, .at = 0, .writable = 0 };
    if (length < 8) return fail(err, DR_TIFF_TRUNCATED, "the file ends inside its 8-byte header (%zu bytes)", length);
    capture c = { 0 };
    TIFF *tif = open_stream(&s, "r", max_alloc, &c);
    if (!tif) return from_capture(&c, "reading the header", err);
    uint32_t width, height;
    read_size(tif, &width, &height, &info->orientation);
    info->width = width > INT_MAX ? INT_MAX : (int)width;
    info->height = height > INT_MAX ? INT_MAX : (int)height;
    uint16_t samples = 1, bits = 1, photometric = 0;
    api.get_field_defaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
    api.get_field_defaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
    api.get_field(tif, TIFFTAG_PHOTOMETRIC, &photometric);
    info->samples_per_pixel = samples;
    info->bits_per_sample = bits;
    info->photometric = photometric;
    info->more_pages = api.last_directory(tif) ? 0 : 1;
    info->plain_cmyk = is_plain_cmyk(tif);
    dr_tiff_status status = DR_TIFF_OK;
    char why[1024] = "";
    if (width == 0 || height == 0) {
        status = fail(err, DR_TIFF_INVALID_DIMENSIONS, "the first image is %ux%u", width, height);
    } else if (width > max_side || height > max_side) {
        status = fail(err, DR_TIFF_TOO_LARGE, "the first image is %ux%u, over the side limit of %u", width, height, max_side);
    } else {
        /* Begin asks TIFFRGBAImageOK first, and words why it cannot read
           the layout. */
        TIFFRGBAImage img;
        if (!api.rgba_image_begin(&img, tif, 1, why)) {
            status = c.have ? from_capture(&c, "reading the tags", err) : fail(err, DR_TIFF_UNSUPPORTED, "%s", why);
        } else {
            info->has_alpha = img.alpha != 0;
            api.rgba_image_end(&img);
        }
    }
    uint32_t icc_length = 0;
    void *icc = NULL;
    if (status == DR_TIFF_OK && api.get_field(tif, TIFFTAG_ICCPROFILE, &icc_length, &icc) && icc && icc_length > 0) {
        info->icc_length = icc_length;
        info->icc = malloc(icc_length);
        if (!info->icc) status = fail(err, DR_TIFF_OUT_OF_MEMORY, "no memory for the ICC profile");
        else memcpy(info->icc, icc, icc_length);
    }
    api.close(tif);
    return status;
}

/* A sample of colour `v` at opacity `a`, premultiplied (`multiplied`) or
   not, as the decode leaves it: laid over `bg`, or with `keep_alpha` as
   straight colour (a premultiplied one divided out, rounded; 0 where the
   pixel is clear). */
static uint8_t settle(unsigned v, unsigned a, int multiplied, unsigned bg, int keep_alpha) {
    unsigned out;
    if (keep_alpha) out = !multiplied || a == 255 ? v : a == 0 ? 0 : (v * 255 + a / 2) / a;
    else out = multiplied ? v + (bg * (255 - a) + 127) / 255 : (v * a + bg * (255 - a) + 127) / 255;
    return (uint8_t)(out > 255 ? 255 : out);
}

/* 16-bit gray in tiles, read here tile by tile instead of through the RGBA
   interface: libtiff 4.5 shifts the rows of a 16-bit gray tile that the
   image's right edge cuts (it skips the cut part by half its bytes). Each
   sample's high byte is the gray level, as the RGBA interface takes it;
   white-is-zero is turned around; alpha (a second sample, or plane) is
   laid over the background as `premultiplied` says. */
static dr_tiff_status decode_gray16_tiles(TIFF *tif, const TIFFRGBAImage *img, uint8_t *dst, size_t stride, uint32_t w,
                                          uint32_t h, size_t max_alloc, const unsigned bg[3], int keep_alpha, dr_tiff_should_stop should_stop,
                                          void *stop_context, const capture *c, dr_tiff_error *err) {
    uint32_t tw = 0, th = 0;
    uint16_t planar = PLANARCONFIG_CONTIG;
    api.get_field(tif, TIFFTAG_TILEWIDTH, &tw);
    api.get_field(tif, TIFFTAG_TILELENGTH, &th);
    api.get_field_defaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
    int samples = img->samplesperpixel, alpha = img->alpha != 0 && samples >= 2, separate = planar == PLANARCONFIG_SEPARATE;
    int white_is_zero = img->photometric == PHOTOMETRIC_MINISWHITE, multiplied = premultiplied(img);
    tmsize_t size = api.tile_size(tif);
    /* The samples this reads of a tile must fit what libtiff gives. */
    size_t needed = (size_t)tw * th * 2 * (separate ? 1 : (size_t)samples);
    if (tw == 0 || th == 0 || size <= 0 || (size_t)size < needed || (size_t)size > max_alloc / 2)
        return fail(err, DR_TIFF_CORRUPT, "tiles of %ux%u do not fit %lld bytes", tw, th, (long long)size);
    /* Zeroed: a tile libtiff fills only in part shows nothing of the heap. */
    uint8_t *gray = calloc(1, (size_t)size), *plane = separate && alpha ? calloc(1, (size_t)size) : NULL;
    if (!gray || (separate && alpha && !plane)) {
        free(gray);
        free(plane);
        return fail(err, DR_TIFF_OUT_OF_MEMORY, "no memory for a tile");
    }
    dr_tiff_status status = DR_TIFF_OK;
    for (uint32_t ty = 0; ty < h && status == DR_TIFF_OK; ty += th) {
        if (should_stop && should_stop(stop_context)) {
            status = fail(err, DR_TIFF_CANCELLED, "cancelled");
            break;
        }
        for (uint32_t tx = 0; tx < w; tx += tw) {
            if (api.read_tile(tif, gray, tx, ty, 0, 0) < 0 || (plane && api.read_tile(tif, plane, tx, ty, 0, 1) < 0)) {
                status = from_capture(c, "decoding", err);
                break;
            }
            for (uint32_t y = 0; y < th && ty + y < h; y++) {
                uint8_t *out = dst + (size_t)(ty + y) * stride + (size_t)tx * 4;
                for (uint32_t x = 0; x < tw && tx + x < w; x++, out += 4) {
                    size_t at = (size_t)y * tw + x;
                    uint16_t g, a = 0xFFFF;
                    if (separate) {
                        memcpy(&g, gray + at * 2, 2);
                        if (plane) memcpy(&a, plane + at * 2, 2);
                    } else {
                        memcpy(&g, gray + at * 2 * samples, 2);
                        if (alpha) memcpy(&a, gray + at * 2 * samples + 2, 2);
                    }
                    unsigned v = g >> 8, opacity = a >> 8;
                    if (white_is_zero) v = 255 - v;
                    for (int k = 0; k < 3; k++) out[k] = settle(v, opacity, multiplied, bg[k], keep_alpha);
                    out[3] = keep_alpha ? (uint8_t)opacity : 255;
                }
            }
        }
    }
    free(gray);
    free(plane);
    return status;
}

/* A file opened for a decode: libtiff reads from `s` and keeps its errors
   in `c`, so both live beside `tif` in the decoding function's frame. */
typedef struct opened {
    stream s;
    capture c;
    TIFF *tif;
    int orientation;
} opened;

/* What both decodes start with: the request checked, libtiff loaded, the
   file opened into `o` and its first image's size checked against what
   the header gave. On success the caller closes `o->tif`. */
static dr_tiff_status open_to_decode(const uint8_t *data, size_t length, uint32_t max_side, size_t max_alloc, const uint8_t *dst,
                                     size_t dst_stride, int width, int height, opened *o, dr_tiff_error *err) {
    memset(o, 0, sizeof *o);
    if (!data || length == 0 || !dst || width <= 0 || height <= 0 || dst_stride != (size_t)width * 4)
        return fail(err, DR_TIFF_INVALID_ARGUMENT, "no data, no rows, or rows not %d pixels of 4 bytes", width);
    const char *missing = load_libtiff();
    if (missing) return fail(err, DR_TIFF_UNSUPPORTED, "%s", missing);
    o->s = (stream){ .data = (uint8_t *)data, .length = length, .capacity = length, .at = 0, .writable = 0 };
    o->tif = open_stream(&o->s, "r", max_alloc, &o->c);
    if (!o->tif) return from_capture(&o->c, "reading the header", err);
    uint32_t w, h;
    read_size(o->tif, &w, &h, &o->orientation);
    if (w > max_side || h > max_side || w != (uint32_t)width || h != (uint32_t)height) {
        api.close(o->tif);
        return fail(err, DR_TIFF_CORRUPT, "the first image is %ux%u, its header said %dx%d", w, h, width, height);
    }
    return DR_TIFF_OK;
}

dr_tiff_status dr_tiff_decode_cmyk(const uint8_t *data, size_t length, uint32_t max_side, size_t max_alloc,
                                   uint8_t *dst, size_t dst_stride, int width, int height,
                                   dr_tiff_should_stop should_stop, void *stop_context, dr_tiff_error *err) {
    opened o;
    dr_tiff_status status = open_to_decode(data, length, max_side, max_alloc, dst, dst_stride, width, height, &o, err);
    if (status != DR_TIFF_OK) return status;
    TIFF *tif = o.tif;
    uint32_t w = (uint32_t)width, h = (uint32_t)height;
    if (!is_plain_cmyk(tif)) status = fail(err, DR_TIFF_INVALID_ARGUMENT, "not 8-bit contiguous CMYK");
    uint8_t *buffer = NULL;
    uint32_t unit_width = w, unit_height = 0;
    int tiled = api.is_tiled(tif);
    if (status == DR_TIFF_OK) {
        if (tiled) {
            api.get_field(tif, TIFFTAG_TILEWIDTH, &unit_width);
            api.get_field(tif, TIFFTAG_TILELENGTH, &unit_height);
        } else {
            api.get_field_defaulted(tif, TIFFTAG_ROWSPERSTRIP, &unit_height);
            if (unit_height == 0 || unit_height > h) unit_height = h;
        }
        /* One strip or tile, decoded whole, then its rows copied out. */
        uint64_t size = (uint64_t)unit_width * unit_height * 4;
        if (unit_width == 0 || unit_height == 0 || size > max_alloc) {
            status = fail(err, DR_TIFF_CORRUPT, "strips or tiles of %ux%u", unit_width, unit_height);
        } else if (!(buffer = malloc((size_t)size))) {
            status = fail(err, DR_TIFF_OUT_OF_MEMORY, "no memory for a strip of %ux%u", unit_width, unit_height);
        }
    }
    for (uint32_t y = 0; y < h && status == DR_TIFF_OK; y += unit_height) {
        if (should_stop && should_stop(stop_context)) {
            status = fail(err, DR_TIFF_CANCELLED, "cancelled");
            break;
        }
        uint32_t rows = h - y < unit_height ? h - y : unit_height;
        for (uint32_t x = 0; x < w; x += unit_width) {
            tmsize_t got = tiled ? api.read_tile(tif, buffer, x, y, 0, 0)
                                 : api.read_encoded_strip(tif, api.compute_strip(tif, y, 0), buffer, (tmsize_t)unit_width * rows * 4);
            if (got < (tmsize_t)((size_t)(tiled ? unit_width * unit_height : unit_width * rows) * 4)) {
                status = from_capture(&o.c, "decoding", err);
                break;
            }
            uint32_t columns = w - x < unit_width ? w - x : unit_width;
            for (uint32_t r = 0; r < rows; r++)
                memcpy(dst + (size_t)(y + r) * dst_stride + (size_t)x * 4, buffer + (size_t)r * unit_width * 4, (size_t)columns * 4);
        }
    }
    free(buffer);
    api.close(tif);
    return status;
}

dr_tiff_status dr_tiff_decode_rgbx(const uint8_t *data, size_t length, uint32_t max_side, size_t max_alloc,
                                   uint8_t *dst, size_t dst_stride, int width, int height,
                                   uint8_t bg_r, uint8_t bg_g, uint8_t bg_b, int keep_alpha,
                                   dr_tiff_should_stop should_stop, void *stop_context, dr_tiff_error *err) {
    opened o;
    dr_tiff_status status = open_to_decode(data, length, max_side, max_alloc, dst, dst_stride, width, height, &o, err);
    if (status != DR_TIFF_OK) return status;
    TIFF *tif = o.tif;
    uint32_t w = (uint32_t)width, h = (uint32_t)height;
    char why[1024] = "";
    TIFFRGBAImage img;
    if (!api.rgba_image_begin(&img, tif, 1, why)) {
        status = o.c.have ? from_capture(&o.c, "reading the tags", err) : fail(err, DR_TIFF_UNSUPPORTED, "%s", why);
        api.close(tif);
        return status;
    }
    /* As stored: asking for the file's own orientation leaves every row
       and column where the file has it. */
    img.req_orientation = (uint16_t)o.orientation;
    /* Bands of whole strips or tiles, so that none is decoded twice, of at
       least 64 rows; the stop question is asked between them. */
    uint32_t unit = 0;
    if (api.is_tiled(tif)) api.get_field(tif, TIFFTAG_TILELENGTH, &unit);
    else api.get_field_defaulted(tif, TIFFTAG_ROWSPERSTRIP, &unit);
    if (unit == 0 || unit > h) unit = h;
    uint32_t band = unit >= 64 ? unit : (64 + unit - 1) / unit * unit;
    const unsigned bg[3] = { bg_r, bg_g, bg_b };
    uint16_t bits = 8;
    api.get_field_defaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
    if (api.is_tiled(tif) && bits == 16
        && (img.photometric == PHOTOMETRIC_MINISBLACK || img.photometric == PHOTOMETRIC_MINISWHITE)) {
        status = decode_gray16_tiles(tif, &img, dst, dst_stride, w, h, max_alloc, bg, keep_alpha, should_stop, stop_context, &o.c,
                                     err);
        api.rgba_image_end(&img);
        api.close(tif);
        return status;
    }
    for (uint32_t y = 0; y < h; y += band) {
        if (should_stop && should_stop(stop_context)) {
            status = fail(err, DR_TIFF_CANCELLED, "cancelled");
            break;
        }
        uint32_t rows = h - y < band ? h - y : band;
        img.row_offset = (int)y;
        img.col_offset = 0;
        if (!api.rgba_image_get(&img, (uint32_t *)(void *)(dst + (size_t)y * dst_stride), w, rows)) {
            status = from_capture(&o.c, "decoding", err);
            break;
        }
    }
    int alpha = img.alpha != 0, multiplied = premultiplied(&img);
    api.rgba_image_end(&img);
    api.close(tif);
    if (status != DR_TIFF_OK) return status;
    /* The RGBA interface packs each pixel as R, G, B, A in memory. */
    for (int y = 0; y < height; y++) {
        uint8_t *p = dst + (size_t)y * dst_stride;
        for (int x = 0; x < width; x++, p += 4) {
            unsigned a = alpha ? p[3] : 255;
            if (a != 255) {
                for (int k = 0; k < 3; k++) p[k] = settle(p[k], a, multiplied, bg[k], keep_alpha);
            }
            p[3] = keep_alpha ? (uint8_t)a : 255;
        }
    }
    return DR_TIFF_OK;
}

/* One image of a fixture: its tags, then its rows, strips or tiles. */
static int write_image(TIFF *tif, const uint8_t *pixels, int width, int height, const dr_tiff_encode_options *o,
                       int page, int pages, char *message) {
    int samples = o->samples, bytes = o->bits == 16 ? 2 : 1;
    api.set_field(tif, TIFFTAG_IMAGEWIDTH, (uint32_t)width);
    api.set_field(tif, TIFFTAG_IMAGELENGTH, (uint32_t)height);
    api.set_field(tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)samples);
    api.set_field(tif, TIFFTAG_BITSPERSAMPLE, (uint16_t)(bytes * 8));
    api.set_field(tif, TIFFTAG_PHOTOMETRIC, samples <= 2 ? PHOTOMETRIC_MINISBLACK : o->cmyk && samples == 4 ? PHOTOMETRIC_SEPARATED : PHOTOMETRIC_RGB);
    if (o->cmyk && samples == 4) api.set_field(tif, TIFFTAG_INKSET, INKSET_CMYK);
    api.set_field(tif, TIFFTAG_PLANARCONFIG, o->planar ? PLANARCONFIG_SEPARATE : PLANARCONFIG_CONTIG);
    api.set_field(tif, TIFFTAG_COMPRESSION, (uint16_t)(o->compression ? o->compression : COMPRESSION_NONE));
    if (o->compression == COMPRESSION_JPEG) api.set_field(tif, TIFFTAG_JPEGQUALITY, 92);
    if (o->orientation) api.set_field(tif, TIFFTAG_ORIENTATION, (uint16_t)o->orientation);
    if (samples == 2 || (samples == 4 && !o->cmyk)) {
        uint16_t kind = o->associated_alpha ? EXTRASAMPLE_ASSOCALPHA : EXTRASAMPLE_UNASSALPHA;
        api.set_field(tif, TIFFTAG_EXTRASAMPLES, 1, &kind);
    }
    if (o->icc && o->icc_length) api.set_field(tif, TIFFTAG_ICCPROFILE, (uint32_t)o->icc_length, o->icc);
    if (pages > 1) {
        api.set_field(tif, TIFFTAG_SUBFILETYPE, FILETYPE_PAGE);
        api.set_field(tif, TIFFTAG_PAGENUMBER, (uint16_t)page, (uint16_t)pages);
    }
    int planes = o->planar ? samples : 1, per_plane = o->planar ? 1 : samples;
    /* One sample of the picture at (x, y), or 0 outside it. */
#define SAMPLE(x, y, k) ((x) < width && (y) < height ? pixels[((size_t)(y) * width + (x)) * samples + (k)] : 0)
    if (o->tile > 0) {
        api.set_field(tif, TIFFTAG_TILEWIDTH, (uint32_t)o->tile);
        api.set_field(tif, TIFFTAG_TILELENGTH, (uint32_t)o->tile);
        size_t size = (size_t)o->tile * o->tile * per_plane * bytes;
        uint8_t *buffer = malloc(size);
        if (!buffer) { snprintf(message, DR_TIFF_MESSAGE_MAX, "no memory"); return -1; }
        for (int plane = 0; plane < planes; plane++) {
            for (int ty = 0; ty < height; ty += o->tile) {
                for (int tx = 0; tx < width; tx += o->tile) {
                    size_t at = 0;
                    for (int y = ty; y < ty + o->tile; y++)
                        for (int x = tx; x < tx + o->tile; x++)
                            for (int k = 0; k < per_plane; k++) {
                                unsigned v = SAMPLE(x, y, o->planar ? plane : k);
                                if (bytes == 2) { uint16_t wide = (uint16_t)(v * 257); memcpy(buffer + at, &wide, 2); at += 2; }
                                else buffer[at++] = (uint8_t)v;
                            }
                    if (api.write_tile(tif, buffer, (uint32_t)tx, (uint32_t)ty, 0, (uint16_t)plane) < 0) {
                        free(buffer);
                        snprintf(message, DR_TIFF_MESSAGE_MAX, "could not write a tile");
                        return -1;
                    }
                }
            }
        }
        free(buffer);
    } else {
        api.set_field(tif, TIFFTAG_ROWSPERSTRIP, o->rows_per_strip > 0 ? (uint32_t)o->rows_per_strip : api.default_strip_size(tif, 0));
        uint8_t *row = malloc((size_t)width * per_plane * bytes);
        if (!row) { snprintf(message, DR_TIFF_MESSAGE_MAX, "no memory"); return -1; }
        for (int plane = 0; plane < planes; plane++) {
            for (int y = 0; y < height; y++) {
                size_t at = 0;
                for (int x = 0; x < width; x++)
                    for (int k = 0; k < per_plane; k++) {
                        unsigned v = SAMPLE(x, y, o->planar ? plane : k);
                        if (bytes == 2) { uint16_t wide = (uint16_t)(v * 257); memcpy(row + at, &wide, 2); at += 2; }
                        else row[at++] = (uint8_t)v;
                    }
                if (api.write_scanline(tif, row, (uint32_t)y, (uint16_t)plane) < 0) {
                    free(row);
                    snprintf(message, DR_TIFF_MESSAGE_MAX, "could not write row %d", y);
                    return -1;
                }
            }
        }
        free(row);
    }
#undef SAMPLE
    if (!api.write_directory(tif)) { snprintf(message, DR_TIFF_MESSAGE_MAX, "could not write the directory"); return -1; }
    return 0;
}

int dr_tiff_encode(const uint8_t *pixels, int width, int height, const dr_tiff_encode_options *options,
                   uint8_t **out, size_t *out_length, char *message) {
    if (!pixels || !options || !out || !out_length || width <= 0 || height <= 0 || options->samples < 1 || options->samples > 4) {
        snprintf(message, DR_TIFF_MESSAGE_MAX, "invalid arguments");
        return -1;
    }
    const char *missing = load_libtiff();
    if (missing) {
        snprintf(message, DR_TIFF_MESSAGE_MAX, "%s", missing);
        return -1;
    }
    stream s = { .data = NULL, .length = 0, .capacity = 0, .at = 0, .writable = 1 };
    capture c = { 0 };
    TIFF *tif = open_stream(&s, "w", 0, &c);
    if (!tif) {
        snprintf(message, DR_TIFF_MESSAGE_MAX, "could not start a TIFF: %.170s", c.have ? c.text : "no reason given");
        free(s.data);
        return -1;
    }
    int pages = options->pages > 1 ? options->pages : 1;
    int result = write_image(tif, pixels, width, height, options, 0, pages, message);
    /* Every later page: a 16x16 gray square, 8-bit, uncompressed. */
    uint8_t gray[256];
    memset(gray, 90, sizeof gray);
    dr_tiff_encode_options plain = { .samples = 1, .bits = 8, .compression = COMPRESSION_NONE };
    for (int page = 1; page < pages && result == 0; page++) result = write_image(tif, gray, 16, 16, &plain, page, pages, message);
    api.close(tif);
    if (result != 0 || c.have) {
        if (result == 0) snprintf(message, DR_TIFF_MESSAGE_MAX, "%s", c.text);
        free(s.data);
        return -1;
    }
    *out = s.data;
    *out_length = s.length;
    return 0;
}

void dr_tiff_free(void *pointer) { free(pointer); }
