#include "CHEIF.h"
#include "CLoader.h"

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
    __typeof__(&heif_encoder_set_parameter) encoder_set_parameter;
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
    __typeof__(&heif_image_handle_get_nclx_color_profile) image_handle_get_nclx_color_profile;
    __typeof__(&heif_nclx_color_profile_alloc) nclx_color_profile_alloc;
    __typeof__(&heif_nclx_color_profile_free) nclx_color_profile_free;
    __typeof__(&heif_image_set_nclx_color_profile) image_set_nclx_color_profile;
    __typeof__(&heif_image_handle_get_raw_color_profile) image_handle_get_raw_color_profile;
    __typeof__(&heif_image_handle_get_raw_color_profile_size) image_handle_get_raw_color_profile_size;
    __typeof__(&heif_image_handle_get_width) image_handle_get_width;
    __typeof__(&heif_image_handle_has_alpha_channel) image_handle_has_alpha_channel;
    __typeof__(&heif_image_is_premultiplied_alpha) image_is_premultiplied_alpha;
    __typeof__(&heif_image_set_premultiplied_alpha) image_set_premultiplied_alpha;
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
    /* Each symbol by name; the first one missing is named. */
    const dr_symbol symbols[] = {
        { "heif_context_alloc", (void **)&api.context_alloc },
        { "heif_context_encode_image", (void **)&api.context_encode_image },
        { "heif_context_free", (void **)&api.context_free },
        { "heif_context_get_encoder_for_format", (void **)&api.context_get_encoder_for_format },
        { "heif_context_get_primary_image_handle", (void **)&api.context_get_primary_image_handle },
        { "heif_context_read_from_memory_without_copy", (void **)&api.context_read_from_memory_without_copy },
        { "heif_context_set_maximum_image_size_limit", (void **)&api.context_set_maximum_image_size_limit },
        { "heif_context_set_max_decoding_threads", (void **)&api.context_set_max_decoding_threads },
        { "heif_context_write", (void **)&api.context_write },
        { "heif_decode_image", (void **)&api.decode_image },
        { "heif_decoding_options_alloc", (void **)&api.decoding_options_alloc },
        { "heif_decoding_options_free", (void **)&api.decoding_options_free },
        { "heif_encoder_release", (void **)&api.encoder_release },
        { "heif_encoder_set_lossless", (void **)&api.encoder_set_lossless },
        { "heif_encoder_set_lossy_quality", (void **)&api.encoder_set_lossy_quality },
        { "heif_encoder_set_parameter", (void **)&api.encoder_set_parameter },
        { "heif_image_add_plane", (void **)&api.image_add_plane },
        { "heif_image_create", (void **)&api.image_create },
        { "heif_image_get_bits_per_pixel_range", (void **)&api.image_get_bits_per_pixel_range },
        { "heif_image_get_height", (void **)&api.image_get_height },
        { "heif_image_get_plane", (void **)&api.image_get_plane },
        { "heif_image_get_plane_readonly", (void **)&api.image_get_plane_readonly },
        { "heif_image_get_width", (void **)&api.image_get_width },
        { "heif_image_handle_get_color_profile_type", (void **)&api.image_handle_get_color_profile_type },
        { "heif_image_handle_get_height", (void **)&api.image_handle_get_height },
        { "heif_image_handle_get_luma_bits_per_pixel", (void **)&api.image_handle_get_luma_bits_per_pixel },
        { "heif_image_handle_get_nclx_color_profile", (void **)&api.image_handle_get_nclx_color_profile },
        { "heif_nclx_color_profile_alloc", (void **)&api.nclx_color_profile_alloc },
        { "heif_nclx_color_profile_free", (void **)&api.nclx_color_profile_free },
        { "heif_image_set_nclx_color_profile", (void **)&api.image_set_nclx_color_profile },
        { "heif_image_handle_get_raw_color_profile", (void **)&api.image_handle_get_raw_color_profile },
        { "heif_image_handle_get_raw_color_profile_size", (void **)&api.image_handle_get_raw_color_profile_size },
        { "heif_image_handle_get_width", (void **)&api.image_handle_get_width },
        { "heif_image_handle_has_alpha_channel", (void **)&api.image_handle_has_alpha_channel },
        { "heif_image_is_premultiplied_alpha", (void **)&api.image_is_premultiplied_alpha },
        { "heif_image_set_premultiplied_alpha", (void **)&api.image_set_premultiplied_alpha },
        { "heif_image_handle_release", (void **)&api.image_handle_release },
        { "heif_image_release", (void **)&api.image_release },
        { "heif_image_set_raw_color_profile", (void **)&api.image_set_raw_color_profile },
        { "heif_init", (void **)&api.init },
        { "heif_main_brand", (void **)&api.main_brand },
    };
    load_failure = dr_load_library("libheif", LIBHEIF_SONAME, "libheif1 on Debian 12", symbols, sizeof symbols / sizeof symbols[0],
                                   load_failure_text, sizeof load_failure_text);
    if (load_failure != NULL) return;
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

/* ------------------------------------------------ coded picture sizes */

/* The size a decoder allocates for comes from the coded stream, not from
   the boxes that libheif checks: an HEVC stream's sequence parameter sets
   (SPS), an AV1 stream's sequence header (its largest frame). Before
   anything is decoded, every one the file carries for an HEVC or AV1
   item, in its hvcC or av1C property or inside the item's own data, is
   read for its picture size, so that a few kilobytes that declare a small
   image and code a huge one are refused before they cost their memory. */

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* One box at the start of [p, p + n): its type, where its body starts and
   how long it is. 0 when no whole box fits. */
static int next_box(const uint8_t *p, size_t n, uint32_t *type, size_t *body, size_t *size) {
    if (n < 8) return 0;
    uint64_t length = be32(p);
    *type = be32(p + 4);
    *body = 8;
    if (length == 1) {
        if (n < 16) return 0;
        length = (uint64_t)be32(p + 8) << 32 | be32(p + 12);
        *body = 16;
    } else if (length == 0) {
        length = n;
    }
    if (length < *body || length > n) return 0;
    *size = (size_t)length;
    return 1;
}

#define FOURCC(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

/* Bit reading of the start of an SPS (its emulation prevention bytes
   taken out) or of an AV1 sequence header. The fields needed lie in the
   first bytes: at most some 360 of a sequence header with 32 operating
   points that each give their decoder model. */
typedef struct bits {
    uint8_t rbsp[512];
    size_t length;
    size_t at;   /* in bits */
    int failed;
} bits;

static unsigned read_bit(bits *b) {
    if (b->at >= b->length * 8) { b->failed = 1; return 0; }
    unsigned v = (b->rbsp[b->at / 8] >> (7 - b->at % 8)) & 1;
    b->at++;
    return v;
}

static uint32_t read_bits(bits *b, int count) {
    uint32_t v = 0;
    for (int i = 0; i < count; i++) v = v << 1 | read_bit(b);
    return v;
}

static uint32_t read_ue(bits *b) {
    int zeros = 0;
    while (!read_bit(b)) {
        if (b->failed || ++zeros > 31) { b->failed = 1; return 0; }
    }
    return (uint32_t)((1ull << zeros) - 1 + read_bits(b, zeros));
}

/* The picture size an SPS NAL unit (header included) declares. 0 when it
   cannot be read that far. */
static int sps_size(const uint8_t *nal, size_t n, uint32_t *width, uint32_t *height) {
    bits b = { .length = 0, .at = 0, .failed = 0 };
    /* Past the two-byte NAL header; the fields needed lie in the first bytes. */
    int zeros = 0;
    for (size_t i = 2; i < n && b.length < sizeof b.rbsp; i++) {
        if (zeros >= 2 && nal[i] == 3) { zeros = 0; continue; }
        zeros = nal[i] == 0 ? zeros + 1 : 0;
        b.rbsp[b.length++] = nal[i];
    }
    read_bits(&b, 4);                         /* sps_video_parameter_set_id */
    unsigned sub_layers = read_bits(&b, 3);   /* sps_max_sub_layers_minus1 */
    read_bits(&b, 1);                         /* sps_temporal_id_nesting_flag */
    /* profile_tier_level: the general profile (88 bits) and level (8). */
    read_bits(&b, 32); read_bits(&b, 32); read_bits(&b, 24); read_bits(&b, 8);
    unsigned profile_present[8] = { 0 }, level_present[8] = { 0 };
    for (unsigned i = 0; i < sub_layers; i++) {
        profile_present[i] = read_bit(&b);
        level_present[i] = read_bit(&b);
    }
    if (sub_layers > 0) for (unsigned i = sub_layers; i < 8; i++) read_bits(&b, 2);
    for (unsigned i = 0; i < sub_layers; i++) {
        if (profile_present[i]) { read_bits(&b, 32); read_bits(&b, 32); read_bits(&b, 24); }
        if (level_present[i]) read_bits(&b, 8);
    }
    read_ue(&b);                              /* sps_seq_parameter_set_id */
    uint32_t chroma = read_ue(&b);            /* chroma_format_idc */
    if (chroma == 3) read_bit(&b);            /* separate_colour_plane_flag */
    *width = read_ue(&b);
    *height = read_ue(&b);
    return !b.failed;
}

/* What the walk has found so far, and the bound every picture must keep. */
typedef struct coded_check {
    uint32_t max_width, max_height;  /* the largest a coded picture may be */
    uint32_t width, height;          /* the first picture found over it */
    int over;
    int length_size;                 /* NAL length field in item data: 1, 2 or 4 */
    /* Steps left: a file cannot make the walk cost more than reading it a
       few times over (iloc may name the same bytes for many items). */
    size_t budget;
} coded_check;

static void check_size(coded_check *c, uint32_t w, uint32_t h) {
    if (!c->over && (w > c->max_width || h > c->max_height)) {
        c->over = 1;
        c->width = w;
        c->height = h;
    }
}

static void check_sps(coded_check *c, const uint8_t *nal, size_t n) {
    uint32_t w, h;
    if (n < 3 || ((nal[0] >> 1) & 0x3F) != 33 || !sps_size(nal, n, &w, &h)) return;
    check_size(c, w, h);
}

/* AV1's variable length code (uvlc) of a sequence header's timing info. */
static uint32_t read_uvlc(bits *b) {
    int zeros = 0;
    while (!read_bit(b)) {
        if (b->failed) return 0;
        if (++zeros >= 32) { b->failed = 1; return 0; }
    }
    return (uint32_t)((1ull << zeros) - 1 + read_bits(b, zeros));
}

/* The largest frame an AV1 sequence header (its payload, after the OBU
   header and size) allows: max_frame_width_minus_1 and
   max_frame_height_minus_1, each plus one. 0 when it cannot be read that
   far. Every frame of the sequence is at most that size. */
static int sequence_header_size(const uint8_t *p, size_t n, uint32_t *width, uint32_t *height) {
    bits b = { .length = n < sizeof b.rbsp ? n : sizeof b.rbsp, .at = 0, .failed = 0 };
    memcpy(b.rbsp, p, b.length);
    read_bits(&b, 3);                                  /* seq_profile */
    read_bit(&b);                                      /* still_picture */
    if (read_bit(&b)) {                                /* reduced_still_picture_header */
        read_bits(&b, 5);                              /* seq_level_idx[0] */
    } else {
        unsigned decoder_model = 0, buffer_delay_bits = 0;
        if (read_bit(&b)) {                            /* timing_info_present_flag */
            read_bits(&b, 32); read_bits(&b, 32);      /* num_units_in_display_tick, time_scale */
            if (read_bit(&b)) read_uvlc(&b);           /* equal_picture_interval: num_ticks_per_picture_minus_1 */
            decoder_model = read_bit(&b);              /* decoder_model_info_present_flag */
            if (decoder_model) {
                buffer_delay_bits = read_bits(&b, 5) + 1;
                read_bits(&b, 32);                     /* num_units_in_decoding_tick */
                read_bits(&b, 5); read_bits(&b, 5);    /* removal and presentation time lengths */
            }
        }
        unsigned display_delay = read_bit(&b);         /* initial_display_delay_present_flag */
        unsigned points = read_bits(&b, 5) + 1;        /* operating_points_cnt_minus_1 */
        for (unsigned i = 0; i < points && !b.failed; i++) {
            read_bits(&b, 12);                         /* operating_point_idc */
            if (read_bits(&b, 5) > 7) read_bit(&b);    /* seq_level_idx, seq_tier */
            if (decoder_model && read_bit(&b)) {       /* decoder_model_present_for_this_op */
                read_bits(&b, (int)buffer_delay_bits); read_bits(&b, (int)buffer_delay_bits);
                read_bit(&b);                          /* low_delay_mode_flag */
            }
            if (display_delay && read_bit(&b)) read_bits(&b, 4);
        }
    }
    int width_bits = (int)read_bits(&b, 4) + 1, height_bits = (int)read_bits(&b, 4) + 1;
    uint32_t w = read_bits(&b, width_bits), h = read_bits(&b, height_bits);
    if (b.failed) return 0;
    /* Up to 16 bits each: the sums cannot overflow. */
    *width = w + 1;
    *height = h + 1;
    return 1;
}

/* Reads a leb128 value at *at within n (at most 8 bytes, as AV1 allows). */
static int read_leb128(const uint8_t *p, size_t n, size_t *at, uint64_t *value) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        if (*at >= n) return 0;
        uint8_t byte = p[(*at)++];
        v |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) { *value = v; return 1; }
    }
    return 0;
}

/* AV1 open bitstream units, each with its header (and, as AVIF requires
   of item data, its size): every sequence header among them is read. */
static void check_obus(coded_check *c, const uint8_t *p, size_t n) {
    if (n > c->budget) n = c->budget;
    c->budget -= n;
    size_t at = 0;
    while (at < n) {
        uint8_t header = p[at++];
        unsigned type = (header >> 3) & 15;
        if (header & 4) at++;                          /* obu_extension_flag: one more byte */
        uint64_t size = n > at ? n - at : 0;
        if ((header & 2) && !read_leb128(p, n, &at, &size)) return;  /* obu_has_size_field */
        if (at > n || size > n - at) return;
        uint32_t w, h;
        if (type == 1 && sequence_header_size(p + at, (size_t)size, &w, &h)) check_size(c, w, h);
        at += (size_t)size;
    }
}

/* An av1C property: four bytes of configuration, then the sequence's
   configOBUs (its sequence header, when there is one). */
static void check_av1c(coded_check *c, const uint8_t *p, size_t n) {
    if (n > 4) check_obus(c, p + 4, n - 4);
}

/* An hvcC property: its arrays of parameter set NAL units. */
static void check_hvcc(coded_check *c, const uint8_t *p, size_t n) {
    if (n < 23) return;
    c->length_size = (p[21] & 3) + 1;
    unsigned arrays = p[22];
    size_t at = 23;
    for (unsigned a = 0; a < arrays && at + 3 <= n; a++) {
        unsigned count = be16(p + at + 1);
        at += 3;
        for (unsigned i = 0; i < count && at + 2 <= n; i++) {
            size_t length = be16(p + at);
            at += 2;
            if (length > n - at) return;
            check_sps(c, p + at, length);
            at += length;
        }
    }
}

/* An item's data: NAL units, each after its length. */
static void check_nals(coded_check *c, const uint8_t *p, size_t n) {
    if (n > c->budget) n = c->budget;
    c->budget -= n;
    size_t at = 0;
    int size = c->length_size ? c->length_size : 4;
    while (at + (size_t)size <= n) {
        size_t length = 0;
        for (int i = 0; i < size; i++) length = length << 8 | p[at + i];
        at += (size_t)size;
        if (length > n - at) return;
        check_sps(c, p + at, length);
        at += length;
    }
}

/* Reads an unsigned field of `size` bytes (0, 4 or 8) at *at within n. */
static int read_sized(const uint8_t *p, size_t n, size_t *at, int size, uint64_t *value) {
    if (size != 0 && size != 2 && size != 4 && size != 8) return 0;
    if ((size_t)size > n - *at) return 0;
    uint64_t v = 0;
    for (int i = 0; i < size; i++) v = v << 8 | p[*at + i];
    *at += (size_t)size;
    *value = v;
    return 1;
}

#define MAX_CODED_ITEMS 4096

/* Walks meta: its hvc1 and av01 items (iinf), their hvcC and av1C
   properties (iprp/ipco) and their data (iloc, in the file or in idat). */
static void check_meta(coded_check *c, const uint8_t *data, size_t length, const uint8_t *meta, size_t n) {
    uint32_t coded[MAX_CODED_ITEMS];
    uint8_t is_av1[MAX_CODED_ITEMS];
    size_t coded_count = 0;
    const uint8_t *iloc = NULL, *idat = NULL;
    size_t iloc_n = 0, idat_n = 0;
    size_t at = 4;  /* meta is a full box */
    uint32_t type;
    size_t body, size;
    while (at < n && next_box(meta + at, n - at, &type, &body, &size)) {
        const uint8_t *b = meta + at + body;
        size_t bn = size - body;
        if (type == FOURCC('i', 'i', 'n', 'f') && bn >= 4) {
            size_t inner = 4 + (b[0] == 0 ? 2 : 4);
            uint32_t t; size_t ib, is;
            while (inner < bn && next_box(b + inner, bn - inner, &t, &ib, &is)) {
                const uint8_t *e = b + inner + ib;
                size_t en = is - ib;
                if (t == FOURCC('i', 'n', 'f', 'e') && en >= 4 && e[0] >= 2) {
                    size_t id_size = e[0] == 2 ? 2 : 4;
                    if (en >= 4 + id_size + 2 + 4) {
                        uint32_t id = id_size == 2 ? be16(e + 4) : be32(e + 4);
                        uint32_t item_type = be32(e + 4 + id_size + 2);
                        int av1 = item_type == FOURCC('a', 'v', '0', '1');
                        if ((av1 || item_type == FOURCC('h', 'v', 'c', '1')) && coded_count < MAX_CODED_ITEMS) {
                            coded[coded_count] = id;
                            is_av1[coded_count++] = (uint8_t)av1;
                        }
                    }
                }
                inner += is;
            }
        } else if (type == FOURCC('i', 'p', 'r', 'p')) {
            uint32_t t; size_t ib, is;
            size_t inner = 0;
            while (inner < bn && next_box(b + inner, bn - inner, &t, &ib, &is)) {
                if (t == FOURCC('i', 'p', 'c', 'o')) {
                    const uint8_t *q = b + inner + ib;
                    size_t qn = is - ib, qa = 0;
                    uint32_t pt; size_t pb, ps;
                    while (qa < qn && next_box(q + qa, qn - qa, &pt, &pb, &ps)) {
                        if (pt == FOURCC('h', 'v', 'c', 'C')) check_hvcc(c, q + qa + pb, ps - pb);
                        else if (pt == FOURCC('a', 'v', '1', 'C')) check_av1c(c, q + qa + pb, ps - pb);
                        qa += ps;
                    }
                }
                inner += is;
            }
        } else if (type == FOURCC('i', 'l', 'o', 'c')) {
            iloc = b; iloc_n = bn;
        } else if (type == FOURCC('i', 'd', 'a', 't')) {
            idat = b; idat_n = bn;
        }
        at += size;
    }
    if (!iloc || iloc_n < 8 || coded_count == 0) return;
    /* iloc: version, flags, then field sizes and the items. */
    unsigned version = iloc[0];
    int offset_size = iloc[4] >> 4, length_size = iloc[4] & 15, base_size = iloc[5] >> 4;
    int index_size = version >= 1 ? (iloc[5] & 15) : 0;
    size_t p = 6;
    uint64_t items;
    if (!read_sized(iloc, iloc_n, &p, version < 2 ? 2 : 4, &items)) return;
    for (uint64_t i = 0; i < items && c->budget > 0; i++, c->budget--) {
        uint64_t id, method = 0, reference, base, extents;
        if (!read_sized(iloc, iloc_n, &p, version < 2 ? 2 : 4, &id)) return;
        if (version >= 1) {
            if (!read_sized(iloc, iloc_n, &p, 2, &method)) return;
            method &= 15;
        }
        if (!read_sized(iloc, iloc_n, &p, 2, &reference) || !read_sized(iloc, iloc_n, &p, base_size, &base)
            || !read_sized(iloc, iloc_n, &p, 2, &extents)) return;
        int kind = 0;  /* 0: not a coded item, 1: HEVC, 2: AV1 */
        for (size_t k = 0; k < coded_count; k++) if (coded[k] == id) { kind = is_av1[k] ? 2 : 1; break; }
        if (c->budget < coded_count) return;
        c->budget -= coded_count;
        /* Extents of no bytes at all would be read without end. */
        if (offset_size == 0 && length_size == 0 && index_size == 0 && extents > 1) extents = 1;
        for (uint64_t x = 0; x < extents; x++) {
            uint64_t index, offset, extent_length;
            if (index_size > 0 && !read_sized(iloc, iloc_n, &p, index_size, &index)) return;
            if (!read_sized(iloc, iloc_n, &p, offset_size, &offset) || !read_sized(iloc, iloc_n, &p, length_size, &extent_length)) return;
            if (!kind || reference != 0) continue;
            const uint8_t *source = method == 1 ? idat : method == 0 ? data : NULL;
            size_t source_n = method == 1 ? idat_n : length;
            if (!source || base + offset < base || base + offset > source_n) continue;
            size_t start = (size_t)(base + offset);
            size_t end = extent_length == 0 || extent_length > source_n - start ? source_n : start + (size_t)extent_length;
            if (kind == 2) check_obus(c, source + start, end - start);
            else check_nals(c, source + start, end - start);
        }
    }
}

/* Whether every HEVC or AV1 picture the file codes fits `width` x
   `height`, the primary image's size as the boxes give it, with room for
   the padding a coder adds (up to one 64-pixel coding tree block or
   superblock) and for a rotation. A side under 512 counts as 512: a
   phone writes a small (cropped) photo as a grid of one 512x512 tile,
   and such a picture costs little to decode whatever the boxes say. */
static dr_heif_status check_coded_sizes(const uint8_t *data, size_t length, int width, int height, dr_heif_error *err) {
    uint32_t longer = (uint32_t)(width > height ? width : height);
    uint32_t side = (longer < 512 ? 512 : longer) + 64;
    coded_check c = { .max_width = side, .max_height = side, .width = 0, .height = 0, .over = 0, .length_size = 0,
                      .budget = 4 * length + (1u << 20) };
    size_t at = 0;
    uint32_t type;
    size_t body, size;
    while (at < length && next_box(data + at, length - at, &type, &body, &size)) {
        if (type == FOURCC('m', 'e', 't', 'a')) check_meta(&c, data, length, data + at + body, size - body);
        at += size;
    }
    if (c.over) {
        return fail(err, DR_HEIF_CORRUPT, "a coded picture is %ux%u, its boxes say %dx%d", c.width, c.height, width, height);
    }
    return DR_HEIF_OK;
}

/* Opens the file and its primary image, and checks its size and the
   sizes its HEVC and AV1 pictures are coded at. */
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
        /* The message is the context's: worded before it is freed. */
        dr_heif_status status = from_heif(e, "reading the boxes", err);
        close_primary(p);
        return status;
    }
    e = api.context_get_primary_image_handle(p->context, &p->handle);
    if (e.code != heif_error_Ok) {
        dr_heif_status status = from_heif(e, "finding the primary image", err);
        close_primary(p);
        return status;
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
    } else if (profile == heif_color_profile_type_nclx) {
        struct heif_color_profile_nclx *nclx = NULL;
        if (api.image_handle_get_nclx_color_profile(p->handle, &nclx).code == heif_error_Ok && nclx) {
            info->nclx_primaries = (int)nclx->color_primaries;
            info->nclx_transfer = (int)nclx->transfer_characteristics;
            const float xy[8] = { nclx->color_primary_red_x, nclx->color_primary_red_y, nclx->color_primary_green_x,
                                  nclx->color_primary_green_y, nclx->color_primary_blue_x, nclx->color_primary_blue_y,
                                  nclx->color_primary_white_x, nclx->color_primary_white_y };
            for (int i = 0; i < 8; i++) info->nclx_xy[i] = xy[i];
        }
        if (nclx) api.nclx_color_profile_free(nclx);
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
    dr_heif_status coded = check_coded_sizes(data, length, info->width, info->height, err);
    if (coded != DR_HEIF_OK) close_primary(p);
    return coded;
}

dr_heif_status dr_heif_read_info(const uint8_t *data, size_t length, uint32_t max_side, int want_icc, dr_heif_info *info,
                                 dr_heif_error *err) {
    if (!info) return fail(err, DR_HEIF_INVALID_ARGUMENT, "no info to fill");
    primary p;
    dr_heif_status status = open_primary(data, length, max_side, &p, info, err);
    if (status != DR_HEIF_OK) return status;
    if (want_icc && info->icc_length > 0) {
        info->icc = malloc(info->icc_length);
        struct heif_error e = info->icc ? api.image_handle_get_raw_color_profile(p.handle, info->icc)
                                        : (struct heif_error){ heif_error_Memory_allocation_error, heif_suberror_Unspecified, "no memory for the profile" };
        /* A profile that cannot be read leaves the pixels as coded. */
        if (e.code != heif_error_Ok) {
            free(info->icc);
            info->icc = NULL;
        }
    }
    close_primary(&p);
    return DR_HEIF_OK;
}

dr_heif_status dr_heif_decode_rgbx(const uint8_t *data, size_t length, uint32_t max_side,
                                   uint8_t *dst, size_t dst_stride, int width, int height,
                                   uint8_t bg_r, uint8_t bg_g, uint8_t bg_b, int keep_alpha,
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
    if (e.code != heif_error_Ok) {
        /* The message may be the context's or the image's: worded first. */
        dr_heif_status status = from_heif(e, "decoding the primary image", err);
        if (image) api.image_release(image);
        close_primary(&p);
        return status;
    }
    close_primary(&p);
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
    /* A file that says its colour is premultiplied ('prem') is given so. */
    const int multiplied = info.has_alpha && api.image_is_premultiplied_alpha(image);
    for (int y = 0; y < height; y++) {
        const uint8_t *s = plane + (size_t)y * (size_t)stride;
        uint8_t *d = dst + (size_t)y * dst_stride;
        if (channels == 3) {
            for (int x = 0; x < width; x++, s += 3, d += 4) {
                d[0] = s[0]; d[1] = s[1]; d[2] = s[2]; d[3] = 255;
            }
        } else if (keep_alpha && !multiplied) {
            memcpy(d, s, (size_t)width * 4);
        } else {
            const unsigned bg[3] = { bg_r, bg_g, bg_b };
            for (int x = 0; x < width; x++, s += 4, d += 4) {
                unsigned a = s[3], rest = 255 - a;
                for (int k = 0; k < 3; k++) {
                    unsigned v;
                    if (keep_alpha) v = a == 0 ? 0 : (s[k] * 255 + a / 2) / a;
                    else v = multiplied ? s[k] + (bg[k] * rest + 127) / 255 : (s[k] * a + bg[k] * rest + 127) / 255;
                    d[k] = (uint8_t)(v > 255 ? 255 : v);
                }
                d[3] = keep_alpha ? (uint8_t)a : 255;
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

/* One image written as a HEIF file, for both encoders: `in_samples` bytes a
   pixel in rows `stride` apart, of which the first 3 (4 with `has_alpha`)
   are coded, each widened to `bit_depth` bits as v << (bits - 8) |
   v >> (16 - bits); with `one_thread` the encoder is asked to use one. */
static dr_heif_status encode_image(const uint8_t *pixels, int width, int height, size_t stride, int in_samples, int has_alpha,
                                   int av1, int quality, int lossless, int bit_depth, int one_thread, const uint8_t *icc,
                                   size_t icc_length, int nclx_primaries, int nclx_transfer, uint8_t **out, size_t *out_length,
                                   dr_heif_error *err) {
    struct heif_context *context = api.context_alloc();
    if (!context) return fail(err, DR_HEIF_OUT_OF_MEMORY, "libheif: out of memory");
    struct heif_encoder *encoder = NULL;
    struct heif_image *image = NULL;
    struct heif_image_handle *handle = NULL;
    buffer b = { NULL, 0, 0 };
    dr_heif_status status = DR_HEIF_OK;
    struct heif_error e = api.context_get_encoder_for_format(context, av1 ? heif_compression_AV1 : heif_compression_HEVC, &encoder);
    if (e.code != heif_error_Ok) {
        status = fail(err, DR_HEIF_UNSUPPORTED, "no %s encoder in this libheif (%s)", av1 ? "AV1" : "HEVC", e.message ? e.message : "");
        goto done;
    }
    e = lossless ? api.encoder_set_lossless(encoder, 1) : api.encoder_set_lossy_quality(encoder, quality);
    if (e.code == heif_error_Ok) {
        /* An encoder without the parameter keeps its own. */
        if (one_thread) (void)api.encoder_set_parameter(encoder, "threads", "1");
        enum heif_chroma chroma = bit_depth == 8 ? (has_alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB)
                                                 : (has_alpha ? heif_chroma_interleaved_RRGGBBAA_LE : heif_chroma_interleaved_RRGGBB_LE);
        e = api.image_create(width, height, heif_colorspace_RGB, chroma, &image);
    }
    if (e.code == heif_error_Ok) e = api.image_add_plane(image, heif_channel_interleaved, width, height, bit_depth);
    if (e.code != heif_error_Ok) {
        status = fail(err, e.code == heif_error_Memory_allocation_error ? DR_HEIF_OUT_OF_MEMORY : DR_HEIF_INVALID_ARGUMENT,
                      "libheif: %s", e.message ? e.message : "cannot make the image");
        goto done;
    }
    const int samples = has_alpha ? 4 : 3, bytes = bit_depth == 8 ? 1 : 2;
    int plane_stride = 0;
    uint8_t *plane = api.image_get_plane(image, heif_channel_interleaved, &plane_stride);
    if (!plane || plane_stride < width * samples * bytes) {
        status = fail(err, DR_HEIF_OUT_OF_MEMORY, "libheif: no plane for the image");
        goto done;
    }
    for (int y = 0; y < height; y++) {
        const uint8_t *s = pixels + (size_t)y * stride;
        uint8_t *d = plane + (size_t)y * (size_t)plane_stride;
        if (bit_depth == 8 && in_samples == samples) {
            memcpy(d, s, (size_t)width * samples);
            continue;
        }
        for (int x = 0; x < width; x++, s += in_samples) {
            for (int c = 0; c < samples; c++) {
                if (bit_depth == 8) {
                    *d++ = s[c];
                } else {
                    unsigned v = ((unsigned)s[c] << (bit_depth - 8)) | ((unsigned)s[c] >> (16 - bit_depth));
                    *d++ = (uint8_t)(v & 0xFF);
                    *d++ = (uint8_t)(v >> 8);
                }
            }
        }
    }
    /* has_alpha 2: the colour samples given are premultiplied (fixtures). */
    if (has_alpha == 2) api.image_set_premultiplied_alpha(image, 1);
    if (icc && icc_length > 0) {
        e = api.image_set_raw_color_profile(image, "prof", icc, icc_length);
        if (e.code != heif_error_Ok) {
            status = fail(err, DR_HEIF_INVALID_ARGUMENT, "libheif: %s", e.message ? e.message : "cannot attach the profile");
            goto done;
        }
    }
    /* An nclx colour box (fixtures): those primaries and transfer, BT.601
       matrix, full range. */
    if (nclx_primaries > 0) {
        struct heif_color_profile_nclx *nclx = api.nclx_color_profile_alloc();
        if (!nclx) {
            status = fail(err, DR_HEIF_OUT_OF_MEMORY, "libheif: out of memory");
            goto done;
        }
        nclx->color_primaries = (enum heif_color_primaries)nclx_primaries;
        nclx->transfer_characteristics = (enum heif_transfer_characteristics)nclx_transfer;
        nclx->matrix_coefficients = heif_matrix_coefficients_ITU_R_BT_601_6;
        nclx->full_range_flag = 1;
        e = api.image_set_nclx_color_profile(image, nclx);
        api.nclx_color_profile_free(nclx);
        if (e.code != heif_error_Ok) {
            status = fail(err, DR_HEIF_INVALID_ARGUMENT, "libheif: %s", e.message ? e.message : "cannot attach the nclx box");
            goto done;
        }
    }
    e = api.context_encode_image(context, image, encoder, NULL, &handle);
    if (e.code == heif_error_Ok) {
        struct heif_writer writer = { 1, append };
        e = api.context_write(context, &writer, &b);
    }
    if (e.code != heif_error_Ok || b.failed) {
        int memory = b.failed || e.code == heif_error_Memory_allocation_error;
        status = fail(err, memory ? DR_HEIF_OUT_OF_MEMORY : DR_HEIF_CORRUPT, "libheif: %s",
                      e.message && e.message[0] ? e.message : "encoding failed");
        goto done;
    }
    *out = b.bytes;
    *out_length = b.length;
    b.bytes = NULL;
done:
    free(b.bytes);
    if (handle) api.image_handle_release(handle);
    if (image) api.image_release(image);
    if (encoder) api.encoder_release(encoder);
    api.context_free(context);
    return status;
}

int dr_heif_encode(const uint8_t *pixels, int width, int height, int has_alpha, int av1, int quality, int lossless,
                   int bit_depth, const uint8_t *icc, size_t icc_length, int nclx_primaries, int nclx_transfer,
                   uint8_t **out, size_t *out_length, char message[DR_HEIF_MESSAGE_MAX]) {
    if (!pixels || !out || !out_length || width <= 0 || height <= 0 || (bit_depth != 8 && bit_depth != 10 && bit_depth != 12)) {
        snprintf(message, DR_HEIF_MESSAGE_MAX, "nothing to encode");
        return -1;
    }
    const char *missing = load_libheif();
    if (missing) {
        snprintf(message, DR_HEIF_MESSAGE_MAX, "%s", missing);
        return -1;
    }
    const int samples = has_alpha ? 4 : 3;
    dr_heif_error err;
    if (encode_image(pixels, width, height, (size_t)width * samples, samples, has_alpha, av1, quality, lossless, bit_depth, 0,
                     icc, icc_length, nclx_primaries, nclx_transfer, out, out_length, &err) == DR_HEIF_OK) return 0;
    snprintf(message, DR_HEIF_MESSAGE_MAX, "%s", err.message);
    return -1;
}

dr_heif_status dr_heif_encode_avif(const uint8_t *pixels, int width, int height, size_t stride, int has_alpha, int quality,
                                   const uint8_t *icc, size_t icc_length, dr_heif_should_stop should_stop,
                                   void *stop_context, uint8_t **out, size_t *out_length, dr_heif_error *err) {
    if (!out || !out_length) return fail(err, DR_HEIF_INVALID_ARGUMENT, "no place for the output");
    *out = NULL;
    *out_length = 0;
    if (!pixels || width <= 0 || height <= 0 || stride < (size_t)width * 4 || quality < 1 || quality > 100) {
        return fail(err, DR_HEIF_INVALID_ARGUMENT, "no %dx%d picture in rows of %zu bytes at quality %d", width, height,
                    stride, quality);
    }
    const char *missing = load_libheif();
    if (missing) return fail(err, DR_HEIF_UNSUPPORTED, "%s", missing);
    if (should_stop && should_stop(stop_context)) return fail(err, DR_HEIF_CANCELLED, "stopped on request");
    /* RGBX: the fourth byte of each pixel is coded only as alpha. One
       thread, as every step of a job runs on the worker's thread for it. */
    return encode_image(pixels, width, height, stride, 4, has_alpha ? 1 : 0, 1, quality, 0, 8, 1, icc, icc_length, 0, 0, out, out_length,
                        err);
}

void dr_heif_free(void *pointer) { free(pointer); }
