#include "CHEIF.h"

#include <dlfcn.h>
#include <libheif/heif.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIBHEIF_SONAME "libheif.so.1"

/* libheif, loaded on first use (see CHEIF.h for why). Each pointer has the
   type of the function libheif's header declares. They are written once,
   inside pthread_once, before load_libheif returns to any thread, and
   every entry point below calls load_libheif first, so they are never
   read while being written. */
static struct {
    __typeof__(&heif_context_alloc) context_alloc;
    __typeof__(&heif_context_encode_image) context_encode_image;
    __typeof__(&heif_context_free) context_free;
    __typeof__(&heif_context_get_encoder_for_format) context_get_encoder_for_format;
    __typeof__(&heif_context_get_primary_image_handle) context_get_primary_image_handle;
    __typeof__(&heif_context_read_from_memory_without_copy) context_read_from_memory_without_copy;
    __typeof__(&heif_context_set_maximum_image_size_limit) context_set_maximum_image_size_limit;
    __typeof__(&heif_context_set_max_decoding_threads) context_set_max_decoding_threads;
    __typeof__(&heif_context_write) context_write;
    __typeof__(&heif_decode_image) decode_image;
    __typeof__(&heif_decoding_options_alloc) decoding_options_alloc;
    __typeof__(&heif_decoding_options_free) decoding_options_free;
    __typeof__(&heif_encoder_release) encoder_release;
    __typeof__(&heif_encoder_set_lossless) encoder_set_lossless;
    __typeof__(&heif_encoder_set_lossy_quality) encoder_set_lossy_quality;
    __typeof__(&heif_image_add_plane) image_add_plane;
    __typeof__(&heif_image_create) image_create;
    __typeof__(&heif_image_get_bits_per_pixel_range) image_get_bits_per_pixel_range;
    __typeof__(&heif_image_get_height) image_get_height;
    __typeof__(&heif_image_get_plane) image_get_plane;
    __typeof__(&heif_image_get_plane_readonly) image_get_plane_readonly;
    __typeof__(&heif_image_get_width) image_get_width;
    __typeof__(&heif_image_handle_get_color_profile_type) image_handle_get_color_profile_type;
    __typeof__(&heif_image_handle_get_height) image_handle_get_height;
    __typeof__(&heif_image_handle_get_luma_bits_per_pixel) image_handle_get_luma_bits_per_pixel;
    __typeof__(&heif_image_handle_get_raw_color_profile) image_handle_get_raw_color_profile;
    __typeof__(&heif_image_handle_get_raw_color_profile_size) image_handle_get_raw_color_profile_size;
    __typeof__(&heif_image_handle_get_width) image_handle_get_width;
    __typeof__(&heif_image_handle_has_alpha_channel) image_handle_has_alpha_channel;
    __typeof__(&heif_image_handle_release) image_handle_release;
    __typeof__(&heif_image_release) image_release;
    __typeof__(&heif_image_set_raw_color_profile) image_set_raw_color_profile;
    __typeof__(&heif_init) init;
    __typeof__(&heif_main_brand) main_brand;
} api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure = "libheif was not loaded";
static char load_failure_text[512];

static void load(void) {
    void *library = dlopen(LIBHEIF_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *why = dlerror();
        snprintf(load_failure_text, sizeof load_failure_text,
                 "libheif could not be loaded (%s; install the package that provides " LIBHEIF_SONAME ", libheif1 on Debian 12)",
                 why != NULL ? why : LIBHEIF_SONAME);
        load_failure = load_failure_text;
        return;
    }
    /* Each symbol by name; the first one missing is named. */
#define RESOLVE(field, name)                                                                   \
    do {                                                                                       \
        *(void **)(&api.field) = dlsym(library, name);                                         \
        if (api.field == NULL) {                                                               \
            snprintf(load_failure_text, sizeof load_failure_text,                              \
                     "libheif could not be used: " LIBHEIF_SONAME " has no %s", name);         \
            load_failure = load_failure_text;                                                  \
            return;                                                                            \
        }                                                                                      \
    } while (0)
    RESOLVE(context_alloc, "heif_context_alloc");
    RESOLVE(context_encode_image, "heif_context_encode_image");
    RESOLVE(context_free, "heif_context_free");
    RESOLVE(context_get_encoder_for_format, "heif_context_get_encoder_for_format");
    RESOLVE(context_get_primary_image_handle, "heif_context_get_primary_image_handle");
    RESOLVE(context_read_from_memory_without_copy, "heif_context_read_from_memory_without_copy");
    RESOLVE(context_set_maximum_image_size_limit, "heif_context_set_maximum_image_size_limit");
    RESOLVE(context_set_max_decoding_threads, "heif_context_set_max_decoding_threads");
    RESOLVE(context_write, "heif_context_write");
    RESOLVE(decode_image, "heif_decode_image");
    RESOLVE(decoding_options_alloc, "heif_decoding_options_alloc");
    RESOLVE(decoding_options_free, "heif_decoding_options_free");
    RESOLVE(encoder_release, "heif_encoder_release");
    RESOLVE(encoder_set_lossless, "heif_encoder_set_lossless");
    RESOLVE(encoder_set_lossy_quality, "heif_encoder_set_lossy_quality");
    RESOLVE(image_add_plane, "heif_image_add_plane");
    RESOLVE(image_create, "heif_image_create");
    RESOLVE(image_get_bits_per_pixel_range, "heif_image_get_bits_per_pixel_range");
    RESOLVE(image_get_height, "heif_image_get_height");
    RESOLVE(image_get_plane, "heif_image_get_plane");
    RESOLVE(image_get_plane_readonly, "heif_image_get_plane_readonly");
    RESOLVE(image_get_width, "heif_image_get_width");
    RESOLVE(image_handle_get_color_profile_type, "heif_image_handle_get_color_profile_type");
    RESOLVE(image_handle_get_height, "heif_image_handle_get_height");
    RESOLVE(image_handle_get_luma_bits_per_pixel, "heif_image_handle_get_luma_bits_per_pixel");
    RESOLVE(image_handle_get_raw_color_profile, "heif_image_handle_get_raw_color_profile");
    RESOLVE(image_handle_get_raw_color_profile_size, "heif_image_handle_get_raw_color_profile_size");
    RESOLVE(image_handle_get_width, "heif_image_handle_get_width");
    RESOLVE(image_handle_has_alpha_channel, "heif_image_handle_has_alpha_channel");
    RESOLVE(image_handle_release, "heif_image_handle_release");
    RESOLVE(image_release, "heif_image_release");
    RESOLVE(image_set_raw_color_profile, "heif_image_set_raw_color_profile");
    RESOLVE(init, "heif_init");
    RESOLVE(main_brand, "heif_main_brand");
#undef RESOLVE
    /* Its plugins and colour conversions, set up once; the library stays
       loaded for the life of the process (never dlclose'd or torn down):
       workers decode until they exit. */
    struct heif_error e = api.init(NULL);
    if (e.code != heif_error_Ok) {
        snprintf(load_failure_text, sizeof load_failure_text, "libheif could not start: %s", e.message ? e.message : "no reason given");
        load_failure = load_failure_text;
        return;
    }
    load_failure = NULL;
}

/* NULL once libheif is ready, or why it is not. */
static const char *load_libheif(void) {
    pthread_once(&load_once, load);
    return load_failure;
}

static dr_heif_status fail(dr_heif_error *err, dr_heif_status status, const char *format, ...) {
    if (err) {
        err->status = status;
        va_list args;
        va_start(args, format);
        vsnprintf(err->message, sizeof err->message, format, args);
        va_end(args);
    }
    return status;
}

/* A libheif error as a status and words: `step` says what was being done. */
static dr_heif_status from_heif(struct heif_error e, const char *step, dr_heif_error *err) {
    dr_heif_status status = DR_HEIF_CORRUPT;
    if (e.code == heif_error_Memory_allocation_error) status = DR_HEIF_OUT_OF_MEMORY;
    else if (e.subcode == heif_suberror_End_of_data) status = DR_HEIF_TRUNCATED;
    else if (e.subcode == heif_suberror_Security_limit_exceeded) status = DR_HEIF_TOO_LARGE;
    else if (e.code == heif_error_Unsupported_feature || e.subcode == heif_suberror_Unsupported_codec) status = DR_HEIF_UNSUPPORTED;
    else if (e.code == heif_error_Usage_error) status = DR_HEIF_INVALID_ARGUMENT;
    return fail(err, status, "%s: %s", step, e.message ? e.message : "no reason given");
}

/* An open file and its primary image. */
typedef struct primary {
    struct heif_context *context;
    struct heif_image_handle *handle;
} primary;

static void close_primary(primary *p) {
    if (p->handle) api.image_handle_release(p->handle);
    if (p->context) api.context_free(p->context);
    p->handle = NULL;
    p->context = NULL;
}

/* Opens the file and its primary image, and checks its size. */
static dr_heif_status open_primary(const uint8_t *data, size_t length, uint32_t max_side, primary *p,
                                   dr_heif_info *info, dr_heif_error *err) {
    memset(p, 0, sizeof *p);
    memset(info, 0, sizeof *info);
    if (!data || length == 0) return fail(err, DR_HEIF_INVALID_ARGUMENT, "no data");
    if (length > INT_MAX) return fail(err, DR_HEIF_TOO_LARGE, "the file holds %zu bytes", length);
    const char *missing = load_libheif();
    if (missing) return fail(err, DR_HEIF_UNSUPPORTED, "%s", missing);
    p->context = api.context_alloc();
    if (!p->context) return fail(err, DR_HEIF_OUT_OF_MEMORY, "no memory for a HEIF context");
    /* libheif refuses images whose sides reach its limit (as a square). */
    api.context_set_maximum_image_size_limit(p->context, max_side >= INT_MAX - 1 ? INT_MAX : (int)max_side + 1);
    /* A tiled image (a phone's HEIC is a grid of 512x512 tiles) is decoded
       on the calling thread: a worker's concurrency is what decides how
       many cores its jobs use, not libheif's own pool of four. */
    api.context_set_max_decoding_threads(p->context, 0);
    struct heif_error e = api.context_read_from_memory_without_copy(p->context, data, length, NULL);
    if (e.code != heif_error_Ok) {
        close_primary(p);
        return from_heif(e, "reading the boxes", err);
    }
    e = api.context_get_primary_image_handle(p->context, &p->handle);
    if (e.code != heif_error_Ok) {
        close_primary(p);
        return from_heif(e, "finding the primary image", err);
    }
    info->width = api.image_handle_get_width(p->handle);
    info->height = api.image_handle_get_height(p->handle);
    info->has_alpha = api.image_handle_has_alpha_channel(p->handle) ? 1 : 0;
    info->bit_depth = api.image_handle_get_luma_bits_per_pixel(p->handle);
    enum heif_brand brand = api.main_brand(data, length < 64 ? (int)length : 64);
    info->is_av1 = (brand == heif_avif || brand == heif_avis) ? 1 : 0;
    enum heif_color_profile_type profile = api.image_handle_get_color_profile_type(p->handle);
    if (profile == heif_color_profile_type_prof || profile == heif_color_profile_type_rICC) {
        info->icc_length = api.image_handle_get_raw_color_profile_size(p->handle);
    }
    if (info->width <= 0 || info->height <= 0) {
        close_primary(p);
        return fail(err, DR_HEIF_INVALID_DIMENSIONS, "the primary image is %dx%d", info->width, info->height);
    }
    if ((uint32_t)info->width > max_side || (uint32_t)info->height > max_side) {
        close_primary(p);
        return fail(err, DR_HEIF_TOO_LARGE, "the primary image is %dx%d, over the side limit of %u",
                    info->width, info->height, max_side);
    }
    return DR_HEIF_OK;
}

dr_heif_status dr_heif_read_info(const uint8_t *data, size_t length, uint32_t max_side, dr_heif_info *info, dr_heif_error *err) {
    if (!info) return fail(err, DR_HEIF_INVALID_ARGUMENT, "no info to fill");
    primary p;
    dr_heif_status status = open_primary(data, length, max_side, &p, info, err);
    if (status != DR_HEIF_OK) return status;
    close_primary(&p);
    return DR_HEIF_OK;
}

dr_heif_status dr_heif_copy_icc(const uint8_t *data, size_t length, uint8_t *out, size_t out_length, dr_heif_error *err) {
    primary p;
    dr_heif_info info;
    dr_heif_status status = open_primary(data, length, UINT32_MAX >> 1, &p, &info, err);
    if (status != DR_HEIF_OK) return status;
    if (!out || info.icc_length == 0 || out_length != info.icc_length) {
        close_primary(&p);
        return fail(err, DR_HEIF_INVALID_ARGUMENT, "a profile of %zu bytes asked into %zu", info.icc_length, out_length);
    }
    struct heif_error e = api.image_handle_get_raw_color_profile(p.handle, out);
    close_primary(&p);
    if (e.code != heif_error_Ok) return from_heif(e, "reading the colour profile", err);
    return DR_HEIF_OK;
}

dr_heif_status dr_heif_decode_rgbx(const uint8_t *data, size_t length, uint32_t max_side,
                                   uint8_t *dst, size_t dst_stride, int width, int height,
                                   uint8_t bg_r, uint8_t bg_g, uint8_t bg_b,
                                   dr_heif_should_stop should_stop, void *stop_context, dr_heif_error *err) {
    if (!dst || width <= 0 || height <= 0 || dst_stride < (size_t)width * 4) {
        return fail(err, DR_HEIF_INVALID_ARGUMENT, "no room for %dx%d RGBX rows", width, height);
    }
    primary p;
    dr_heif_info info;
    dr_heif_status status = open_primary(data, length, max_side, &p, &info, err);
    if (status != DR_HEIF_OK) return status;
    if (info.width != width || info.height != height) {
        close_primary(&p);
        return fail(err, DR_HEIF_INVALID_ARGUMENT, "asked for %dx%d, the primary image is %dx%d", width, height, info.width, info.height);
    }
    if (should_stop && should_stop(stop_context)) {
        close_primary(&p);
        return fail(err, DR_HEIF_CANCELLED, "cancelled");
    }
    struct heif_decoding_options *options = api.decoding_options_alloc();
    if (!options) {
        close_primary(&p);
        return fail(err, DR_HEIF_OUT_OF_MEMORY, "no memory for decoding options");
    }
    options->convert_hdr_to_8bit = 1;
    struct heif_image *image = NULL;
    struct heif_error e = api.decode_image(p.handle, &image, heif_colorspace_RGB,
                                            info.has_alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB, options);
    api.decoding_options_free(options);
    close_primary(&p);
    if (e.code != heif_error_Ok) {
        if (image) api.image_release(image);
        return from_heif(e, "decoding the primary image", err);
    }
    int got_width = api.image_get_width(image, heif_channel_interleaved);
    int got_height = api.image_get_height(image, heif_channel_interleaved);
    int bits = api.image_get_bits_per_pixel_range(image, heif_channel_interleaved);
    int stride = 0;
    const uint8_t *plane = api.image_get_plane_readonly(image, heif_channel_interleaved, &stride);
    if (got_width != width || got_height != height) {
        api.image_release(image);
        return fail(err, DR_HEIF_CORRUPT, "the coded image is %dx%d, its boxes say %dx%d", got_width, got_height, width, height);
    }
    if (!plane || bits != 8) {
        api.image_release(image);
        return fail(err, DR_HEIF_UNSUPPORTED, "libheif gave no 8-bit RGB image (%d bits)", bits);
    }
    const int channels = info.has_alpha ? 4 : 3;
    for (int y = 0; y < height; y++) {
        const uint8_t *s = plane + (size_t)y * (size_t)stride;
        uint8_t *d = dst + (size_t)y * dst_stride;
        if (channels == 3) {
            for (int x = 0; x < width; x++, s += 3, d += 4) {
                d[0] = s[0]; d[1] = s[1]; d[2] = s[2]; d[3] = 255;
            }
        } else {
            for (int x = 0; x < width; x++, s += 4, d += 4) {
                unsigned a = s[3], rest = 255 - a;
                d[0] = (uint8_t)((s[0] * a + bg_r * rest + 127) / 255);
                d[1] = (uint8_t)((s[1] * a + bg_g * rest + 127) / 255);
                d[2] = (uint8_t)((s[2] * a + bg_b * rest + 127) / 255);
                d[3] = 255;
            }
        }
    }
    api.image_release(image);
    if (should_stop && should_stop(stop_context)) return fail(err, DR_HEIF_CANCELLED, "cancelled");
    return DR_HEIF_OK;
}

/* ------------------------------------------------------------ encoding */

typedef struct buffer {
    uint8_t *bytes;
    size_t length;
    int failed;
} buffer;

static struct heif_error append(struct heif_context *context, const void *data, size_t size, void *user) {
    (void)context;
    buffer *b = user;
    uint8_t *grown = realloc(b->bytes, b->length + size);
    if (!grown) {
        b->failed = 1;
        struct heif_error e = { heif_error_Memory_allocation_error, heif_suberror_Unspecified, "out of memory" };
        return e;
    }
    memcpy(grown + b->length, data, size);
    b->bytes = grown;
    b->length += size;
    struct heif_error ok = { heif_error_Ok, heif_suberror_Unspecified, "" };
    return ok;
}

int dr_heif_encode(const uint8_t *pixels, int width, int height, int has_alpha, int av1, int quality, int lossless,
                   int bit_depth, const uint8_t *icc, size_t icc_length, uint8_t **out, size_t *out_length,
                   char message[DR_HEIF_MESSAGE_MAX]) {
    if (!pixels || !out || !out_length || width <= 0 || height <= 0 || (bit_depth != 8 && bit_depth != 10 && bit_depth != 12)) {
        snprintf(message, DR_HEIF_MESSAGE_MAX, "nothing to encode");
        return -1;
    }
    const char *missing = load_libheif();
    if (missing) {
        snprintf(message, DR_HEIF_MESSAGE_MAX, "%s", missing);
        return -1;
    }
    struct heif_context *context = api.context_alloc();
    struct heif_encoder *encoder = NULL;
    struct heif_image *image = NULL;
    struct heif_image_handle *handle = NULL;
    buffer b = { NULL, 0, 0 };
    int result = -1;
    struct heif_error e = api.context_get_encoder_for_format(context, av1 ? heif_compression_AV1 : heif_compression_HEVC, &encoder);
    if (e.code != heif_error_Ok) goto done;
    e = lossless ? api.encoder_set_lossless(encoder, 1) : api.encoder_set_lossy_quality(encoder, quality);
    if (e.code != heif_error_Ok) goto done;
    enum heif_chroma chroma = bit_depth == 8 ? (has_alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB)
                                             : (has_alpha ? heif_chroma_interleaved_RRGGBBAA_LE : heif_chroma_interleaved_RRGGBB_LE);
    e = api.image_create(width, height, heif_colorspace_RGB, chroma, &image);
    if (e.code != heif_error_Ok) goto done;
    e = api.image_add_plane(image, heif_channel_interleaved, width, height, bit_depth);
    if (e.code != heif_error_Ok) goto done;
    int stride = 0;
    uint8_t *plane = api.image_get_plane(image, heif_channel_interleaved, &stride);
    const size_t row = (size_t)width * (has_alpha ? 4 : 3);
    for (int y = 0; y < height; y++) {
        const uint8_t *s = pixels + (size_t)y * row;
        uint8_t *d = plane + (size_t)y * (size_t)stride;
        if (bit_depth == 8) {
            memcpy(d, s, row);
        } else {
            for (size_t i = 0; i < row; i++) {
                unsigned v = ((unsigned)s[i] << (bit_depth - 8)) | ((unsigned)s[i] >> (16 - bit_depth));
                d[2 * i] = (uint8_t)(v & 0xFF);
                d[2 * i + 1] = (uint8_t)(v >> 8);
            }
        }
    }
    if (icc && icc_length > 0) {
        e = api.image_set_raw_color_profile(image, "prof", icc, icc_length);
        if (e.code != heif_error_Ok) goto done;
    }
    e = api.context_encode_image(context, image, encoder, NULL, &handle);
    if (e.code != heif_error_Ok) goto done;
    struct heif_writer writer = { 1, append };
    e = api.context_write(context, &writer, &b);
    if (e.code != heif_error_Ok || b.failed) goto done;
    *out = b.bytes;
    *out_length = b.length;
    b.bytes = NULL;
    result = 0;
done:
    if (result != 0) snprintf(message, DR_HEIF_MESSAGE_MAX, "%s", e.message ? e.message : "encoding failed");
    free(b.bytes);
    if (handle) api.image_handle_release(handle);
    if (image) api.image_release(image);
    if (encoder) api.encoder_release(encoder);
    api.context_free(context);
    return result;
}

void dr_heif_free(void *pointer) { free(pointer); }
