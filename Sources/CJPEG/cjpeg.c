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

/* Where a decoder is in its life (see CJPEG.h). */
enum {
    DR_DECODER_OPEN = 0,    /* header read; start not called yet */
    DR_DECODER_ROWS,        /* started: reading the region's rows, then the rest */
    DR_DECODER_DONE,        /* the whole file has been read */
    DR_DECODER_FAILED       /* a call failed; only close is left */
};

struct dr_jpeg_decoder {
    struct jpeg_decompress_struct cinfo;
    dr_error_mgr jerr;
    int state;
    uint8_t *row;           /* scratch row for trimmed or skipped output */
    uint8_t *icc;           /* the ICC profile put together, if any */
    /* The region, as start set it up. */
    int width, height;      /* its size */
    int trim;               /* extra columns libjpeg keeps on its left */
    int direct;             /* rows go straight into the caller's buffer */
    int cmyk, inverted, gray, keep_cmyk;
    size_t dst_stride;
    int done;               /* region rows written so far */
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

/* Puts the ICC profile together from its APP2 chunks: "ICC_PROFILE\0", the
   chunk's number (from 1), the number of chunks, then its part. Chunks that
   do not make one whole profile (one missing, numbered twice, disagreeing
   counts, less than the 128 bytes of an ICC header) give none: the picture
   decodes the same, only without its profile. Done here rather than with
   jpeg_read_icc_profile, which reports such chunks as a warning, and a
   warning fails the decode when warnings are errors. */
static void read_icc(dr_jpeg_decoder *dec, dr_jpeg_info *info) {
    const JOCTET *parts[256] = {0};
    size_t lengths[256] = {0};
    unsigned count = 0;
    for (jpeg_saved_marker_ptr m = dec->cinfo.marker_list; m; m = m->next) {
        if (m->marker != JPEG_APP0 + 2 || m->data_length < 14 || memcmp(m->data, "ICC_PROFILE", 12) != 0) continue;
        unsigned seq = m->data[12], n = m->data[13];
        if (n == 0 || seq == 0 || seq > n || (count != 0 && n != count) || parts[seq] != NULL) return;
        count = n;
        parts[seq] = m->data + 14;
        lengths[seq] = m->data_length - 14;
    }
    if (count == 0) return;
    size_t total = 0;
    for (unsigned i = 1; i <= count; i++) {
        if (parts[i] == NULL) return;
        total += lengths[i];
    }
    if (total < 128) return;
    dec->icc = malloc(total);
    if (!dec->icc) return;
    size_t at = 0;
    for (unsigned i = 1; i <= count; i++) {
        memcpy(dec->icc + at, parts[i], lengths[i]);
        at += lengths[i];
    }
    info->icc = dec->icc;
    info->icc_length = total;
}

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
    jpeg_save_markers(&dec->cinfo, JPEG_APP0 + 2, 0xFFFF);
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
    read_icc(dec, info);
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

/* What a decoder step does after libjpeg jumped back to its setjmp: the
   error is already in `err`. (The setjmp itself must stay in the public
   function's frame; this runs after the jump, so it may be a call.) */
static dr_jpeg_status decoder_failed(dr_jpeg_decoder *dec, dr_jpeg_error *err) {
    dec->jerr.err = NULL;
    return err ? err->status : DR_JPEG_CORRUPT;
}

dr_jpeg_status dr_jpeg_decoder_start(dr_jpeg_decoder *dec, int scale_denom, int luma_only, int keep_cmyk,
                                     int x, int y, int width, int height, size_t dst_stride,
                                     dr_jpeg_error *err) {
    reset_error(err);
    if (!dec || dec->state != DR_DECODER_OPEN) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "decoder started twice or after a failure");
        return DR_JPEG_INVALID_ARGUMENT;
    }
    if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "scale denominator must be 1, 2, 4 or 8");
        return DR_JPEG_INVALID_ARGUMENT;
    }
    dec->state = DR_DECODER_FAILED; /* until this call succeeds */
    struct jpeg_decompress_struct *c = &dec->cinfo;
    dec->jerr.err = err;
    if (setjmp(dec->jerr.jump)) return decoder_failed(dec, err);

    int cmyk = (c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK);
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
    dec->row = malloc((size_t)out_w * 4);
    if (!dec->row) ERREXIT1(c, JERR_OUT_OF_MEMORY, 0);

    /* In one call: skipping in pieces could leave libjpeg's upsampling context
       in another state than skipping at once, and the rows read next must not
       depend on how the caller paces the decode. */
    if (y > 0) jpeg_skip_scanlines(c, (JDIMENSION)y);

    dec->width = width;
    dec->height = height;
    dec->trim = trim;
    dec->direct = (trim == 0 && out_w == width && !cmyk && !gray);
    dec->cmyk = cmyk;
    dec->inverted = cmyk && c->saw_Adobe_marker;
    dec->keep_cmyk = cmyk && keep_cmyk;
    dec->gray = gray;
    dec->dst_stride = dst_stride;
    dec->done = 0;
    dec->state = DR_DECODER_ROWS;
    dec->jerr.err = NULL;
    return DR_JPEG_OK;
}

dr_jpeg_status dr_jpeg_decoder_step(dr_jpeg_decoder *dec, uint8_t *dst, int max_lines, int *finished,
                                    dr_jpeg_error *err) {
    reset_error(err);
    if (finished) *finished = 0;
    if (!dec || !dst || !finished || max_lines < 1 || dec->state != DR_DECODER_ROWS) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "decoder stepped without a buffer, or when not started");
        return DR_JPEG_INVALID_ARGUMENT;
    }
    struct jpeg_decompress_struct *c = &dec->cinfo;
    dec->state = DR_DECODER_FAILED; /* until this call succeeds */
    dec->jerr.err = err;
    if (setjmp(dec->jerr.jump)) return decoder_failed(dec, err);

    /* The region's rows, 16 at a time straight into the buffer when the
       scanlines are the rows, else one by one through the scratch row. */
    int budget = max_lines;
    while (budget > 0 && dec->done < dec->height) {
        if (dec->direct) {
            JSAMPROW rows[16];
            int n = dec->height - dec->done;
            if (n > 16) n = 16;
            for (int i = 0; i < n; i++) rows[i] = dst + (size_t)(dec->done + i) * dec->dst_stride;
            /* libjpeg may return fewer rows than asked (a row group at a time). */
            int got = (int)jpeg_read_scanlines(c, rows, (JDIMENSION)n);
            dec->done += got;
            budget -= got > 0 ? got : 1;
        } else {
            JSAMPROW rows[1] = { dec->row };
            budget -= 1;
            if (jpeg_read_scanlines(c, rows, 1) != 1) continue;
            uint8_t *out = dst + (size_t)dec->done * dec->dst_stride;
            const uint8_t *src = dec->row + (size_t)dec->trim * 4;
            if (dec->keep_cmyk) memcpy(out, src, (size_t)dec->width * 4);
            else if (dec->cmyk) cmyk_to_rgbx(src, out, dec->width, dec->inverted);
            else if (dec->gray) gray_to_rgbx(dec->row + dec->trim, out, dec->width);
            else memcpy(out, src, (size_t)dec->width * 4);
            dec->done++;
        }
    }

    /* Then the rest of the file: skipping all remaining lines at once would let
       libjpeg stop without reading them, so skip all but one and read that one.
       What is skipped is never seen, so it may be skipped in pieces. */
    if (dec->done >= dec->height) {
        int remaining = (int)(c->output_height - c->output_scanline);
        if (remaining > 1 && budget > 0) {
            int n = remaining - 1 < budget ? remaining - 1 : budget;
            jpeg_skip_scanlines(c, (JDIMENSION)n);
            remaining = (int)(c->output_height - c->output_scanline);
        }
        if (remaining <= 1) {
            while (c->output_scanline < c->output_height) {
                JSAMPROW rows[1] = { dec->row };
                jpeg_read_scanlines(c, rows, 1);
            }
            jpeg_finish_decompress(c);
            *finished = 1;
            dec->jerr.err = NULL;
            dec->state = DR_DECODER_DONE;
            if (err) err->warnings = (int)dec->jerr.pub.num_warnings;
            return DR_JPEG_OK;
        }
    }
    dec->jerr.err = NULL;
    dec->state = DR_DECODER_ROWS;
    return DR_JPEG_OK;
}

void dr_jpeg_decoder_close(dr_jpeg_decoder *dec) {
    if (!dec) return;
    jpeg_destroy_decompress(&dec->cinfo);
    free(dec->row);
    free(dec->icc);
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
 * an encode ends in success (the buffer goes to the caller), in a longjmp (the
 * landing code frees it) or is given up halfway (close frees it), the buffer
 * is released exactly once. The destination lives inside dr_jpeg_encoder, not
 * in libjpeg's pools, so the landing code can still reach it after
 * jpeg_destroy_compress.
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

struct dr_jpeg_encoder {
    struct jpeg_compress_struct cinfo;
    dr_error_mgr jerr;
    dr_destination dest;
    int ended;              /* a call failed or the file is complete; only close is left */
};

/* Releases the output buffer unless it was handed over. */
static void release_output(dr_jpeg_encoder *enc) {
    if (!enc->dest.buffer) return;
    free(enc->dest.buffer);
    enc->dest.buffer = NULL;
    if (enc->dest.probe) enc->dest.probe->buffers_freed++;
}

/* What an encoder step does after libjpeg jumped back to its setjmp: the
   encoder is ended and its output released. */
static dr_jpeg_status encoder_failed(dr_jpeg_encoder *enc) {
    enc->jerr.err = NULL;
    enc->ended = 1;
    release_output(enc);
    return DR_JPEG_ENCODE_FAILED;
}

dr_jpeg_encoder *dr_jpeg_encoder_start(int width, int height, dr_jpeg_input input, int quality,
                                       int luma_h, int luma_v, int progressive, int optimize_coding,
                                       dr_jpeg_encode_probe *probe, dr_jpeg_error *err) {
    reset_error(err);
    if (probe) {
        probe->growths = 0;
        probe->buffers_freed = 0;
    }
    J_COLOR_SPACE in_space, store_space;
    int in_components;
    switch (input) {
    case DR_JPEG_INPUT_RGBX: in_space = JCS_EXT_RGBX; in_components = 4; store_space = JCS_YCbCr; break;
    case DR_JPEG_INPUT_RGBX_AS_GRAY: in_space = JCS_EXT_RGBX; in_components = 4; store_space = JCS_GRAYSCALE; break;
    case DR_JPEG_INPUT_GRAY: in_space = JCS_GRAYSCALE; in_components = 1; store_space = JCS_GRAYSCALE; break;
    case DR_JPEG_INPUT_CMYK: in_space = JCS_CMYK; in_components = 4; store_space = JCS_CMYK; break;
    case DR_JPEG_INPUT_CMYK_AS_YCCK: in_space = JCS_CMYK; in_components = 4; store_space = JCS_YCCK; break;
    default:
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "unknown encoder input");
        return NULL;
    }
    if (width <= 0 || height <= 0 || width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION ||
        quality < 1 || quality > 100 || luma_h < 1 || luma_h > 2 || luma_v < 1 || luma_v > 2) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "invalid encoder arguments");
        return NULL;
    }
    dr_jpeg_encoder *enc = calloc(1, sizeof(*enc));
    if (!enc) {
        set_error(err, DR_JPEG_OUT_OF_MEMORY, "Insufficient memory for the encoder");
        return NULL;
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
        release_output(enc);
        free(enc);
        return NULL;
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
    enc->jerr.err = NULL;
    return enc;
}

dr_jpeg_status dr_jpeg_encoder_write_icc(dr_jpeg_encoder *enc, const uint8_t *icc, size_t length, dr_jpeg_error *err) {
    reset_error(err);
    if (!enc || enc->ended || !icc || length == 0 || length > 255u * 65519u || enc->cinfo.next_scanline != 0) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "invalid ICC profile arguments");
        return DR_JPEG_INVALID_ARGUMENT;
    }
    enc->jerr.err = err;
    if (setjmp(enc->jerr.jump)) return encoder_failed(enc);
    jpeg_write_icc_profile(&enc->cinfo, icc, (unsigned int)length);
    enc->jerr.err = NULL;
    return DR_JPEG_OK;
}

dr_jpeg_status dr_jpeg_encoder_write(dr_jpeg_encoder *enc, const uint8_t *rows, size_t stride, int count,
                                     dr_jpeg_error *err) {
    reset_error(err);
    if (!enc || enc->ended || !rows || count < 0 ||
        (size_t)count > enc->cinfo.image_height - enc->cinfo.next_scanline ||
        stride < (size_t)enc->cinfo.image_width * (size_t)enc->cinfo.input_components) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "invalid encoder arguments");
        return DR_JPEG_INVALID_ARGUMENT;
    }
    struct jpeg_compress_struct *c = &enc->cinfo;
    enc->jerr.err = err;
    if (setjmp(enc->jerr.jump)) return encoder_failed(enc);
    JDIMENSION first = c->next_scanline, end = first + (JDIMENSION)count;
    while (c->next_scanline < end) {
        JSAMPROW batch[16];
        int n = (int)(end - c->next_scanline);
        if (n > 16) n = 16;
        for (int i = 0; i < n; i++) batch[i] = (JSAMPROW)(rows + (size_t)(c->next_scanline - first + i) * stride);
        jpeg_write_scanlines(c, batch, (JDIMENSION)n);
    }
    enc->jerr.err = NULL;
    return DR_JPEG_OK;
}

dr_jpeg_status dr_jpeg_encoder_finish(dr_jpeg_encoder *enc, uint8_t **out, size_t *out_length,
                                      dr_jpeg_error *err) {
    reset_error(err);
    if (out) *out = NULL;
    if (out_length) *out_length = 0;
    if (!enc || enc->ended || !out || !out_length || enc->cinfo.next_scanline < enc->cinfo.image_height) {
        set_error(err, DR_JPEG_INVALID_ARGUMENT, "encoder finished before every row was written");
        return DR_JPEG_INVALID_ARGUMENT;
    }
    struct jpeg_compress_struct *c = &enc->cinfo;
    enc->jerr.err = err;
    if (setjmp(enc->jerr.jump)) return encoder_failed(enc);
    jpeg_finish_compress(c);
    enc->jerr.err = NULL;
    /* The buffer passes to the caller, who releases it with dr_jpeg_free. */
    *out = enc->dest.buffer;
    *out_length = enc->dest.length;
    enc->dest.buffer = NULL;
    enc->ended = 1;
    return DR_JPEG_OK;
}

void dr_jpeg_encoder_close(dr_jpeg_encoder *enc) {
    if (!enc) return;
    jpeg_destroy_compress(&enc->cinfo);
    release_output(enc);
    free(enc);
}

void dr_jpeg_free(uint8_t *buffer) {
    free(buffer);
}
