/*
 * The libjpeg shim. See include/CJPEG.h for the contract.
 *
 * Error handling: each public function arms a setjmp in its own frame; the
 * error manager's error_exit (and emit_message for a warning when warnings are
 * fatal) formats the message into the caller's dr_jpeg_error and longjmps back.
 * Everything that must be released after a jump is reachable from the decoder
 * or the encoder struct (heap memory, intact after the jump) so the landing
 * code can free it.
 */
#include <stdio.h>
#include <jpeglib.h>
#include <jerror.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "CJPEG.h"

typedef struct dr_error_mgr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int fail_on_warning;
    dr_jpeg_error *err;     /* where the current call reports */
} dr_error_mgr;

struct dr_jpeg_decoder {
    struct jpeg_decompress_struct cinfo;
    dr_error_mgr jerr;
    int read_called;
    uint8_t *row;           /* scratch row for trimmed or skipped output */
};

static dr_jpeg_status classify(int code) {
    switch (code) {
    case JWRN_JPEG_EOF:
    case JERR_INPUT_EOF:
        return DR_JPEG_TRUNCATED;
    case JERR_NO_SOI:
        return DR_JPEG_NOT_JPEG;
    case JERR_INPUT_EMPTY:
        return DR_JPEG_EMPTY;
    case JERR_EMPTY_IMAGE:
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW:
        return DR_JPEG_INVALID_DIMENSIONS;
    case JERR_BAD_PRECISION:
    case JERR_SOF_UNSUPPORTED:
    case JERR_NOT_COMPILED:
    case JERR_ARITH_NOTIMPL:
    case JERR_CONVERSION_NOTIMPL:
    case JERR_COMPONENT_COUNT:
        return DR_JPEG_UNSUPPORTED;
    case JERR_OUT_OF_MEMORY:
    case JERR_VIRTUAL_BUG:
        return DR_JPEG_OUT_OF_MEMORY;
    default:
        return DR_JPEG_CORRUPT;
    }
}

static void record(j_common_ptr cinfo, dr_jpeg_status status) {
    dr_error_mgr *mgr = (dr_error_mgr *)cinfo->err;
    if (mgr->err == NULL) return;
    mgr->err->status = status;
    mgr->err->msg_code = mgr->pub.msg_code;
    char buffer[JMSG_LENGTH_MAX];
    buffer[0] = 0;
    (*mgr->pub.format_message)(cinfo, buffer);
    snprintf(mgr->err->message, DR_JPEG_MESSAGE_MAX, "%s", buffer);
}

static void dr_error_exit(j_common_ptr cinfo) {
    dr_error_mgr *mgr = (dr_error_mgr *)cinfo->err;
    record(cinfo, cinfo->is_decompressor ? classify(mgr->pub.msg_code) : DR_JPEG_ENCODE_FAILED);
    longjmp(mgr->jump, 1);
}

static void dr_output_message(j_common_ptr cinfo) {
    (void)cinfo; /* never print */
}

static void dr_emit_message(j_common_ptr cinfo, int msg_level) {
    dr_error_mgr *mgr = (dr_error_mgr *)cinfo->err;
    if (msg_level >= 0) return; /* trace messages */
    mgr->pub.num_warnings++;
    if (mgr->err) mgr->err->warnings = (int)mgr->pub.num_warnings;
    if (mgr->fail_on_warning) {
        record(cinfo, classify(mgr->pub.msg_code));
        longjmp(mgr->jump, 1);
    }
}

static void install(dr_error_mgr *mgr, int fail_on_warning, dr_jpeg_error *err) {
    jpeg_std_error(&mgr->pub);
    mgr->pub.error_exit = dr_error_exit;
    mgr->pub.output_message = dr_output_message;
    mgr->pub.emit_message = dr_emit_message;
    mgr->fail_on_warning = fail_on_warning;
    mgr->err = err;
}

static void reset_error(dr_jpeg_error *err) {
    if (!err) return;
    err->status = DR_JPEG_OK;
    err->msg_code = -1;
    err->warnings = 0;
    err->message[0] = 0;
}

static void set_error(dr_jpeg_error *err, dr_jpeg_status status, const char *message) {
    if (!err) return;
    err->status = status;
    err->msg_code = -1;
    snprintf(err->message, DR_JPEG_MESSAGE_MAX, "%s", message);
}

static dr_jpeg_color color_of(J_COLOR_SPACE space) {
    switch (space) {
    case JCS_GRAYSCALE: return DR_JPEG_COLOR_GRAY;
    case JCS_YCbCr: return DR_JPEG_COLOR_YCBCR;
    case JCS_RGB: return DR_JPEG_COLOR_RGB;
    case JCS_CMYK: return DR_JPEG_COLOR_CMYK;
    case JCS_YCCK: return DR_JPEG_COLOR_YCCK;
    default: return DR_JPEG_COLOR_UNKNOWN;
    }
}

/* ---------------------------------------------------------------- decoding */

dr_jpeg_decoder *dr_jpeg_decoder_open(const uint8_t *data, size_t length, int fail_on_warning,
                                      dr_jpeg_info *info, dr_jpeg_error *err) {
    reset_error(err);
    if (length == 0 || data == NULL) {
        set_error(err, DR_JPEG_EMPTY, "Empty input file");
        return NULL;
    }
    dr_jpeg_decoder *dec = calloc(1, sizeof(*dec));
    if (!dec) {
        set_error(err, DR_JPEG_OUT_OF_MEMORY, "Insufficient memory for the decoder");
        return NULL;
    }
    install(&dec->jerr, fail_on_warning, err);
    dec->cinfo.err = &dec->jerr.pub;
    if (setjmp(dec->jerr.jump)) {
        jpeg_destroy_decompress(&dec->cinfo);
        free(dec);
        return NULL;
    }
    jpeg_create_decompress(&dec->cinfo);
    jpeg_mem_src(&dec->cinfo, data, (unsigned long)length);
    jpeg_save_markers(&dec->cinfo, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(&dec->cinfo, TRUE);

    struct jpeg_decompress_struct *c = &dec->cinfo;
    memset(info, 0, sizeof(*info));
    info->width = (int)c->image_width;
    info->height = (int)c->image_height;
    info->components = c->num_components;
    info->color_space = color_of(c->jpeg_color_space);
    info->progressive = c->progressive_mode ? 1 : 0;
    info->saw_adobe = c->saw_Adobe_marker ? 1 : 0;
    if (c->num_components >= 1 && c->comp_info) {
        info->luma_h = c->comp_info[0].h_samp_factor;
        info->luma_v = c->comp_info[0].v_samp_factor;
    }
    if (c->num_components >= 2 && c->comp_info) {
        info->chroma_h = c->comp_info[1].h_samp_factor;
        info->chroma_v = c->comp_info[1].v_samp_factor;
    }
    for (jpeg_saved_marker_ptr m = c->marker_list; m; m = m->next) {
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && memcmp(m->data, "Exif\0\0", 6) == 0) {
            info->exif = m->data;
            info->exif_length = m->data_length;
            break;
        }
    }
    dec->jerr.err = NULL;
    return dec;
}

int dr_jpeg_decoder_warnings(const dr_jpeg_decoder *dec) {
    return dec ? (int)dec->jerr.pub.num_warnings : 0;
}

/* Adobe CMYK (inverted: 0 = full ink) or plain CMYK to RGBX, `count` pixels. */
static void cmyk_to_rgbx(const uint8_t *src, uint8_t *dst, int count, int inverted) {
    for (int i = 0; i < count; i++) {
        unsigned c = src[0], m = src[1], y = src[2], k = src[3];
        if (!inverted) { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k; }
        /* Now each value is the amount of light let through; r = c * k / 255, rounded. */
        unsigned r = c * k + 128, g = m * k + 128, b = y * k + 128;
        dst[0] = (uint8_t)((r + (r >> 8)) >> 8);
        dst[1] = (uint8_t)((g + (g >> 8)) >> 8);
        dst[2] = (uint8_t)((b + (b >> 8)) >> 8);
        dst[3] = 255;
        src += 4;
        dst += 4;
    }
}

/* Gray samples to RGBX, `count` pixels. */
static void gray_to_rgbx(const uint8_t *src, uint8_t *dst, int count) {
    for (int i = 0; i < count; i++) {
        dst[0] = dst[1] = dst[2] = src[i];
        dst[3] = 255;
        dst += 4;
    }
}

dr_jpeg_status dr_jpeg_decoder_read(dr_jpeg_decoder *dec, int scale_denom, int luma_only,
                                    int x, int y, int width, int height,
                                    uint8_t *dst, size_t dst_stride, dr_jpeg_error *err) {
    reset_error(err);
    if (!dec || !dst || dec->read_called) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "decoder used twice or without a buffer");
        return DR_JPEG_INVALID_ARGUMENT;
    }
    if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "scale denominator must be 1, 2, 4 or 8");
        return DR_JPEG_INVALID_ARGUMENT;
    }
    dec->read_called = 1;
    struct jpeg_decompress_struct *c = &dec->cinfo;
    dec->jerr.err = err;
    if (setjmp(dec->jerr.jump)) {
        dec->jerr.err = NULL;
        return err ? err->status : DR_JPEG_CORRUPT;
    }

    int cmyk = (c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK);
    int inverted = cmyk && c->saw_Adobe_marker;
    /* Luma only: libjpeg then skips the chroma planes' IDCT, upsampling and
       colour conversion (for YCbCr files the luma is the Y plane itself). */
    int gray = luma_only && !cmyk;
    c->out_color_space = cmyk ? JCS_CMYK : gray ? JCS_GRAYSCALE : JCS_EXT_RGBX;
    c->scale_num = 1;
    c->scale_denom = (unsigned)scale_denom;
    c->dct_method = JDCT_ISLOW;
    jpeg_calc_output_dimensions(c);
    int full_w = (int)c->output_width, full_h = (int)c->output_height;
    if (x < 0 || y < 0 || width <= 0 || height <= 0 || x > full_w - width || y > full_h - height ||
        (size_t)width * 4 > dst_stride) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "region outside the scaled image");
        dec->jerr.err = NULL;
        return DR_JPEG_INVALID_ARGUMENT;
    }

    jpeg_start_decompress(c);

    /* Horizontal crop: libjpeg widens it to an iMCU boundary; `trim` is how many
       extra columns it kept on the left. */
    int trim = 0;
    if (width < full_w) {
        JDIMENSION xoff = (JDIMENSION)x, cw = (JDIMENSION)width;
        jpeg_crop_scanline(c, &xoff, &cw);
        trim = x - (int)xoff;
    }
    int out_w = (int)c->output_width;
    int direct = (trim == 0 && out_w == width && !cmyk && !gray);
    dec->row = malloc((size_t)out_w * 4);
    if (!dec->row) ERREXIT1(c, JERR_OUT_OF_MEMORY, 0);

    if (y > 0) jpeg_skip_scanlines(c, (JDIMENSION)y);

    int done = 0;
    while (done < height) {
        if (direct) {
            JSAMPROW rows[16];
            int n = height - done;
            if (n > 16) n = 16;
            for (int i = 0; i < n; i++) rows[i] = dst + (size_t)(done + i) * dst_stride;
            done += (int)jpeg_read_scanlines(c, rows, (JDIMENSION)n);
        } else {
            JSAMPROW rows[1] = { dec->row };
            if (jpeg_read_scanlines(c, rows, 1) != 1) continue;
            uint8_t *out = dst + (size_t)done * dst_stride;
            const uint8_t *src = dec->row + (size_t)trim * 4;
            if (cmyk) cmyk_to_rgbx(src, out, width, inverted);
            else if (gray) gray_to_rgbx(dec->row + trim, out, width);
            else memcpy(out, src, (size_t)width * 4);
            done++;
        }
    }

    /* Decode the rest of the file: skipping all remaining lines at once would let
       libjpeg stop without reading them, so skip all but one and read that one. */
    int remaining = (int)(c->output_height - c->output_scanline);
    if (remaining > 1) jpeg_skip_scanlines(c, (JDIMENSION)(remaining - 1));
    while (c->output_scanline < c->output_height) {
        JSAMPROW rows[1] = { dec->row };
        jpeg_read_scanlines(c, rows, 1);
    }
    jpeg_finish_decompress(c);
    dec->jerr.err = NULL;
    if (err) err->warnings = (int)dec->jerr.pub.num_warnings;
    return DR_JPEG_OK;
}

void dr_jpeg_decoder_close(dr_jpeg_decoder *dec) {
    if (!dec) return;
    jpeg_destroy_decompress(&dec->cinfo);
    free(dec->row);
    free(dec);
}

/* ---------------------------------------------------------------- encoding */

/*
 * The encoder writes into a buffer this file owns, through its own destination
 * manager. libjpeg's jpeg_mem_dest would not do: when its buffer fills it
 * allocates a bigger one and frees the old one itself, and it tells the caller
 * where the output lives only at jpeg_finish_compress. After an error halfway
 * through, the landing code would hold a pointer libjpeg had already freed and
 * no pointer at all to the live buffer.
 *
 * Here `buffer` is the only pointer to the output at every moment. It grows
 * with realloc, which hands back the one pointer that replaces it, so whether
 * an encode ends in success (the buffer goes to the caller) or in a longjmp
 * (the landing code frees it), the buffer is released exactly once. The
 * destination lives inside dr_encoder, not in libjpeg's pools, so the landing
 * code can still reach it after jpeg_destroy_compress.
 */
typedef struct dr_destination {
    struct jpeg_destination_mgr pub;  /* first member: libjpeg's cinfo->dest points here */
    unsigned char *buffer;            /* the output so far; NULL until init_destination */
    size_t capacity;                  /* bytes allocated at `buffer` */
    size_t length;                    /* bytes of output, set by term_destination */
    dr_jpeg_encode_probe *probe;      /* test hook (see CJPEG.h); NULL in normal use */
} dr_destination;

/* The case numbers in "Insufficient memory (case N)" that jpeg_mem_dest used
   for the same failures, so the messages read as they always have. */
enum { DR_OOM_BUFFER = 10, DR_OOM_SIZE = 13 };

/* A first buffer that holds most files whole: headers and tables take well
   under 4 KB, and 2 bits per pixel per component is more than a typical photo
   needs at the usual qualities. A large allocation costs memory only for the
   pages the encoder writes, and when the guess is short the buffer doubles, so
   even noise needs only a few reallocs. The cap keeps a huge but flat picture
   (up to 65500 x 65500 x 4 samples) from asking for gigabytes up front. */
enum { DR_FIRST_CAPACITY_MAX = 64 << 20 };

static size_t first_capacity(j_compress_ptr c) {
    size_t samples = (size_t)c->image_width * (size_t)c->image_height * (size_t)c->num_components;
    size_t capacity = samples / 4 + 4096;
    return capacity < DR_FIRST_CAPACITY_MAX ? capacity : DR_FIRST_CAPACITY_MAX;
}

static void dest_init(j_compress_ptr c) {
    dr_destination *d = (dr_destination *)c->dest;
    size_t capacity = d->probe && d->probe->first_capacity ? d->probe->first_capacity : first_capacity(c);
    if (!d->buffer) {
        d->buffer = malloc(capacity);
        if (!d->buffer) ERREXIT1(c, JERR_OUT_OF_MEMORY, DR_OOM_BUFFER);
        d->capacity = capacity;
    }
    d->length = 0;
    d->pub.next_output_byte = d->buffer;
    d->pub.free_in_buffer = d->capacity;
}

/* libjpeg calls this when the buffer is full (free_in_buffer is 0). The new
   space starts right after the old capacity. A failed realloc leaves `buffer`
   as it was, still ours to free. */
static boolean dest_grow(j_compress_ptr c) {
    dr_destination *d = (dr_destination *)c->dest;
    if (d->capacity > SIZE_MAX / 2) ERREXIT1(c, JERR_OUT_OF_MEMORY, DR_OOM_SIZE);
    size_t capacity = d->capacity * 2;
    unsigned char *grown = NULL;
    /* The test hook's failure is taken exactly where a failed realloc would be. */
    if (!(d->probe && d->probe->fail_after && d->capacity >= d->probe->fail_after)) {
        grown = realloc(d->buffer, capacity);
    }
    if (!grown) ERREXIT1(c, JERR_OUT_OF_MEMORY, DR_OOM_BUFFER);
    if (d->probe) d->probe->growths++;
    d->pub.next_output_byte = grown + d->capacity;
    d->pub.free_in_buffer = capacity - d->capacity;
    d->buffer = grown;
    d->capacity = capacity;
    return TRUE;
}

static void dest_term(j_compress_ptr c) {
    dr_destination *d = (dr_destination *)c->dest;
    d->length = d->capacity - d->pub.free_in_buffer;
}

typedef struct dr_encoder {
    struct jpeg_compress_struct cinfo;
    dr_error_mgr jerr;
    dr_destination dest;
} dr_encoder;

static dr_jpeg_status encode_common(const uint8_t *pixels, int width, int height, size_t stride,
                                    J_COLOR_SPACE in_space, int in_components, J_COLOR_SPACE store_space,
                                    int quality, int luma_h, int luma_v, int progressive,
                                    int optimize_coding, uint8_t **out, size_t *out_length,
                                    dr_jpeg_encode_probe *probe, dr_jpeg_error *err) {
    reset_error(err);
    *out = NULL;
    *out_length = 0;
    if (probe) {
        probe->growths = 0;
        probe->buffers_freed = 0;
    }
    if (!pixels || width <= 0 || height <= 0 || width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION ||
        quality < 1 || quality > 100 || luma_h < 1 || luma_h > 2 || luma_v < 1 || luma_v > 2 ||
        stride < (size_t)width * (size_t)in_components) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "invalid encoder arguments");
        return DR_JPEG_INVALID_ARGUMENT;
    }
    dr_encoder *enc = calloc(1, sizeof(*enc));
    if (!enc) {
        set_error(err, DR_JPEG_OUT_OF_MEMORY, "Insufficient memory for the encoder");
        return DR_JPEG_OUT_OF_MEMORY;
    }
    install(&enc->jerr, 0, err);
    enc->cinfo.err = &enc->jerr.pub;
    enc->dest.pub.init_destination = dest_init;
    enc->dest.pub.empty_output_buffer = dest_grow;
    enc->dest.pub.term_destination = dest_term;
    enc->dest.probe = probe;
    if (setjmp(enc->jerr.jump)) {
        /* `enc` is not written after setjmp and the destination is heap memory,
           so both are intact here; libjpeg never frees the buffer. */
        jpeg_destroy_compress(&enc->cinfo);
        if (enc->dest.buffer) {
            free(enc->dest.buffer);
            enc->dest.buffer = NULL;
            if (probe) probe->buffers_freed++;
        }
        free(enc);
        return DR_JPEG_ENCODE_FAILED;
    }
    jpeg_create_compress(&enc->cinfo);
    struct jpeg_compress_struct *c = &enc->cinfo;
    c->dest = &enc->dest.pub;
    c->image_width = (JDIMENSION)width;
    c->image_height = (JDIMENSION)height;
    c->input_components = in_components;
    c->in_color_space = in_space;
    jpeg_set_defaults(c);
    jpeg_set_colorspace(c, store_space);
    jpeg_set_quality(c, quality, TRUE);
    c->dct_method = JDCT_ISLOW;
    c->optimize_coding = optimize_coding ? TRUE : FALSE;
    if (store_space == JCS_YCbCr) {
        c->comp_info[0].h_samp_factor = luma_h;
        c->comp_info[0].v_samp_factor = luma_v;
        c->comp_info[1].h_samp_factor = c->comp_info[1].v_samp_factor = 1;
        c->comp_info[2].h_samp_factor = c->comp_info[2].v_samp_factor = 1;
    }
    if (progressive) jpeg_simple_progression(c);
    jpeg_start_compress(c, TRUE);
    while (c->next_scanline < c->image_height) {
        JSAMPROW rows[16];
        int n = (int)(c->image_height - c->next_scanline);
        if (n > 16) n = 16;
        for (int i = 0; i < n; i++) rows[i] = (JSAMPROW)(pixels + (size_t)(c->next_scanline + i) * stride);
        jpeg_write_scanlines(c, rows, (JDIMENSION)n);
    }
    jpeg_finish_compress(c);
    /* The buffer passes to the caller, who releases it with dr_jpeg_free. */
    *out = enc->dest.buffer;
    *out_length = enc->dest.length;
    enc->dest.buffer = NULL;
    jpeg_destroy_compress(c);
    free(enc);
    return DR_JPEG_OK;
}

dr_jpeg_status dr_jpeg_encode_rgbx(const uint8_t *pixels, int width, int height, size_t stride,
                                   int gray, int quality, int luma_h, int luma_v, int progressive,
                                   int optimize_coding, uint8_t **out, size_t *out_length,
                                   dr_jpeg_error *err) {
    return encode_common(pixels, width, height, stride, JCS_EXT_RGBX, 4, gray ? JCS_GRAYSCALE : JCS_YCbCr, quality,
                         luma_h, luma_v, progressive, optimize_coding, out, out_length, NULL, err);
}

dr_jpeg_status dr_jpeg_encode_rgbx_probed(const uint8_t *pixels, int width, int height, size_t stride,
                                          int gray, int quality, int luma_h, int luma_v, int progressive,
                                          int optimize_coding, uint8_t **out, size_t *out_length,
                                          dr_jpeg_encode_probe *probe, dr_jpeg_error *err) {
    return encode_common(pixels, width, height, stride, JCS_EXT_RGBX, 4, gray ? JCS_GRAYSCALE : JCS_YCbCr, quality,
                         luma_h, luma_v, progressive, optimize_coding, out, out_length, probe, err);
}

dr_jpeg_status dr_jpeg_encode_raw(const uint8_t *samples, int width, int height, int components,
                                  int store_ycck, int quality, uint8_t **out, size_t *out_length,
                                  dr_jpeg_error *err) {
    if (components == 1) {
        return encode_common(samples, width, height, (size_t)width, JCS_GRAYSCALE, 1, JCS_GRAYSCALE,
                             quality, 1, 1, 0, 0, out, out_length, NULL, err);
    }
    if (components == 4) {
        return encode_common(samples, width, height, (size_t)width * 4, JCS_CMYK, 4,
                             store_ycck ? JCS_YCCK : JCS_CMYK, quality, 1, 1, 0, 0, out, out_length, NULL, err);
    }
    reset_error(err);
    set_error(err, DR_JPEG_INVALID_ARGUMENT, "components must be 1 or 4");
    *out = NULL;
    *out_length = 0;
    return DR_JPEG_INVALID_ARGUMENT;
}

void dr_jpeg_free(uint8_t *buffer) {
    free(buffer);
}
