/*
 * The libwebp shim. See include/CWebP.h for the contract.
 *
 * libwebp reports failures as status codes, never by jumping, so every call
 * returns normally; whatever it allocated is released before a function
 * returns, on every path, except the encoded file handed to the caller.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/encode.h>
#include <webp/mux.h>

#include "CWebP.h"

_Static_assert(DR_WEBP_MAX_SIDE == WEBP_MAX_DIMENSION, "DR_WEBP_MAX_SIDE is libwebp's limit");

static dr_webp_status fail(dr_webp_error *err, dr_webp_status status, const char *format, ...) {
    if (err) {
        va_list args;
        va_start(args, format);
        err->status = status;
        vsnprintf(err->message, sizeof err->message, format, args);
        va_end(args);
    }
    return status;
}

/* ---- Decoding ---- */

static const char *decode_words(VP8StatusCode code) {
    switch (code) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended before the end of the data";
    case VP8_STATUS_USER_ABORT: return "stopped on request";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "not enough data";
    default: return "unknown error";
    }
}

static dr_webp_status decode_failure(dr_webp_error *err, VP8StatusCode code) {
    dr_webp_status status;
    switch (code) {
    /* The whole file is always given, so a decoder that wants more was
       given a file cut short. */
    case VP8_STATUS_NOT_ENOUGH_DATA:
    case VP8_STATUS_SUSPENDED: status = DR_WEBP_TRUNCATED; break;
    case VP8_STATUS_UNSUPPORTED_FEATURE: status = DR_WEBP_UNSUPPORTED; break;
    case VP8_STATUS_OUT_OF_MEMORY: status = DR_WEBP_OUT_OF_MEMORY; break;
    /* Only a bad output buffer or a library of another ABI gets this far
       with it: the request, not the file, is at fault. */
    case VP8_STATUS_INVALID_PARAM: status = DR_WEBP_INVALID_ARGUMENT; break;
    default: status = DR_WEBP_CORRUPT; break;
    }
    return fail(err, status, "libwebp: %s", decode_words(code));
}

dr_webp_status dr_webp_read_info(const uint8_t *data, size_t length, dr_webp_info *info, dr_webp_error *err) {
    if (!data || length == 0) return fail(err, DR_WEBP_TRUNCATED, "libwebp: not enough data");
    WebPBitstreamFeatures features;
    VP8StatusCode code = WebPGetFeatures(data, length, &features);
    if (code != VP8_STATUS_OK) return decode_failure(err, code);
    info->width = features.width;
    info->height = features.height;
    info->has_alpha = features.has_alpha;
    info->is_animated = features.has_animation;
    return DR_WEBP_OK;
}

/* The slice of the file handed to the incremental decoder between two
   looks at the stop flag: small enough that a 12 MP lossy picture (about
   2 MB) is looked at some thirty times. */
enum { DECODE_SLICE = 64 * 1024 };

dr_webp_status dr_webp_decode_rgbx(const uint8_t *data, size_t length, uint8_t *dst, size_t dst_stride,
                                   int width, int height, const uint8_t *background, int keep_alpha,
                                   dr_webp_should_stop should_stop, void *stop_context, dr_webp_error *err) {
    if (!data || length == 0) return fail(err, DR_WEBP_TRUNCATED, "libwebp: not enough data");
    if (!dst || width <= 0 || height <= 0 || dst_stride < (size_t)width * 4 || dst_stride > INT_MAX) {
        return fail(err, DR_WEBP_INVALID_ARGUMENT, "no room for a %dx%d picture in rows of %zu bytes",
                    width, height, dst_stride);
    }
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config)) {
        return fail(err, DR_WEBP_INVALID_ARGUMENT, "libwebp: the library's ABI does not match its headers");
    }
    VP8StatusCode code = WebPGetFeatures(data, length, &config.input);
    if (code != VP8_STATUS_OK) return decode_failure(err, code);
    if (config.input.has_animation) {
        return fail(err, DR_WEBP_UNSUPPORTED, "animated WebP");
    }
    /* The caller sized `dst` from a header it read before: a different
       size now would mean writing past it. */
    if (config.input.width != width || config.input.height != height) {
        return fail(err, DR_WEBP_INVALID_ARGUMENT, "the picture is %dx%d, not the %dx%d expected",
                    config.input.width, config.input.height, width, height);
    }
    /* Straight (not premultiplied) RGBA, straight into the caller's rows:
       the colour channels are the file's own, whatever the alpha. */
    config.output.colorspace = MODE_RGBA;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = dst;
    config.output.u.RGBA.stride = (int)dst_stride;
    config.output.u.RGBA.size = dst_stride * (size_t)(height - 1) + (size_t)width * 4;
    WebPIDecoder *decoder = WebPIDecode(NULL, 0, &config);
    if (!decoder) {
        WebPFreeDecBuffer(&config.output);
        return fail(err, DR_WEBP_OUT_OF_MEMORY, "libwebp: out of memory");
    }
    code = VP8_STATUS_SUSPENDED;
    size_t offset = 0;
    while (offset < length && code == VP8_STATUS_SUSPENDED) {
        if (should_stop && should_stop(stop_context)) {
            WebPIDelete(decoder);
            WebPFreeDecBuffer(&config.output);
            return fail(err, DR_WEBP_CANCELLED, "stopped on request");
        }
        size_t slice = length - offset < DECODE_SLICE ? length - offset : DECODE_SLICE;
        code = WebPIAppend(decoder, data + offset, slice);
        offset += slice;
    }
    WebPIDelete(decoder);
    /* Nothing of libwebp's to free with external memory, but it is the
       call the API asks for after every decode. */
    WebPFreeDecBuffer(&config.output);
    /* All of the file given and the decoder still waiting: it was cut short. */
    if (code != VP8_STATUS_OK) return decode_failure(err, code);
    /* libwebp wrote the straight colour and the alpha (255 without any). */
    if (keep_alpha) return DR_WEBP_OK;
    /* Otherwise the engine's fourth byte is 255. Without a background a
       file's alpha goes, and a lossless file's word that it has none is not
       taken on trust: its pixels carry alpha values all the same. With one,
       each pixel is laid over it, rounded to the nearest level. */
    for (int y = 0; y < height; y++) {
        uint8_t *row = dst + (size_t)y * dst_stride;
        if (background) {
            for (int x = 0; x < width; x++) {
                uint8_t *p = row + x * 4;
                unsigned a = p[3];
                if (a != 255) {
                    for (int c = 0; c < 3; c++) p[c] = (uint8_t)((p[c] * a + background[c] * (255 - a) + 127) / 255);
                }
                p[3] = 255;
            }
        } else {
            for (int x = 0; x < width; x++) row[x * 4 + 3] = 255;
        }
    }
    return DR_WEBP_OK;
}

/* ---- Encoding ---- */

static const char *encode_words(WebPEncodingError code) {
    switch (code) {
    case VP8_ENC_ERROR_OUT_OF_MEMORY: return "out of memory";
    case VP8_ENC_ERROR_BITSTREAM_OUT_OF_MEMORY: return "out of memory while writing the bitstream";
    case VP8_ENC_ERROR_NULL_PARAMETER: return "a required pointer is NULL";
    case VP8_ENC_ERROR_INVALID_CONFIGURATION: return "invalid configuration";
    case VP8_ENC_ERROR_BAD_DIMENSION: return "bad picture dimensions";
    case VP8_ENC_ERROR_PARTITION0_OVERFLOW: return "the first partition is over its 512 KiB limit";
    case VP8_ENC_ERROR_PARTITION_OVERFLOW: return "a partition is over its 16 MiB limit";
    case VP8_ENC_ERROR_BAD_WRITE: return "the output could not be written";
    case VP8_ENC_ERROR_FILE_TOO_BIG: return "the file would be over 4 GiB";
    case VP8_ENC_ERROR_USER_ABORT: return "stopped on request";
    default: return "unknown error";
    }
}

static dr_webp_status encode_failure(dr_webp_error *err, WebPEncodingError code) {
    dr_webp_status status;
    switch (code) {
    case VP8_ENC_ERROR_USER_ABORT: status = DR_WEBP_CANCELLED; break;
    case VP8_ENC_ERROR_OUT_OF_MEMORY:
    case VP8_ENC_ERROR_BITSTREAM_OUT_OF_MEMORY: status = DR_WEBP_OUT_OF_MEMORY; break;
    default: status = DR_WEBP_ENCODE_FAILED; break;
    }
    return fail(err, status, "libwebp: %s", encode_words(code));
}

static const char *mux_words(WebPMuxError code) {
    switch (code) {
    case WEBP_MUX_NOT_FOUND: return "chunk not found";
    case WEBP_MUX_INVALID_ARGUMENT: return "invalid argument";
    case WEBP_MUX_BAD_DATA: return "bad data";
    case WEBP_MUX_MEMORY_ERROR: return "out of memory";
    case WEBP_MUX_NOT_ENOUGH_DATA: return "not enough data";
    default: return "unknown error";
    }
}

typedef struct stop_request {
    dr_webp_should_stop should_stop;
    void *context;
} stop_request;

/* libwebp calls this each time its progress moves by a percent, about a
   hundred times an encode: that is how often the caller's flag is looked at. */
static int keep_going(int percent, const WebPPicture *picture) {
    (void)percent;
    const stop_request *stop = (const stop_request *)picture->user_data;
    return !stop->should_stop(stop->context);
}

/* Gray pixels have no chroma: U and V are 128, and Y is what libwebp's own
   RGB import computes for R = G = B = v (VP8RGBToY, 16839 + 33059 + 6420 =
   56318, with its rounding). The file is then the one an RGBX picture of
   the same grays gives, made without an RGBX copy four times the plane. */
static int import_gray(WebPPicture *picture, const uint8_t *gray, size_t stride) {
    picture->use_argb = 0;
    picture->colorspace = WEBP_YUV420;
    if (!WebPPictureAlloc(picture)) return 0;
    for (int y = 0; y < picture->height; y++) {
        const uint8_t *src = gray + (size_t)y * stride;
        uint8_t *dst = picture->y + (size_t)y * (size_t)picture->y_stride;
        for (int x = 0; x < picture->width; x++) {
            dst[x] = (uint8_t)((56318 * (int)src[x] + (1 << 15) + (16 << 16)) >> 16);
        }
    }
    const int uv_width = (picture->width + 1) >> 1;
    const int uv_height = (picture->height + 1) >> 1;
    for (int y = 0; y < uv_height; y++) {
        memset(picture->u + (size_t)y * (size_t)picture->uv_stride, 128, (size_t)uv_width);
        memset(picture->v + (size_t)y * (size_t)picture->uv_stride, 128, (size_t)uv_width);
    }
    return 1;
}

/* Puts the bitstream `image` and an ICCP chunk together in one file (a VP8X
   header, whose flags announce the profile). */
static dr_webp_status add_icc(const uint8_t *image, size_t image_length, const uint8_t *icc, size_t icc_length,
                              uint8_t **out, size_t *out_length, dr_webp_error *err) {
    WebPMux *mux = WebPMuxNew();
    if (!mux) return fail(err, DR_WEBP_OUT_OF_MEMORY, "libwebpmux: out of memory");
    WebPData bitstream = {image, image_length};
    WebPData profile = {icc, icc_length};
    WebPData assembled;
    WebPDataInit(&assembled);
    /* Not copied (copy_data 0): both outlive the mux, deleted below. */
    WebPMuxError code = WebPMuxSetImage(mux, &bitstream, 0);
    if (code == WEBP_MUX_OK) code = WebPMuxSetChunk(mux, "ICCP", &profile, 0);
    if (code == WEBP_MUX_OK) code = WebPMuxAssemble(mux, &assembled);
    WebPMuxDelete(mux);
    if (code != WEBP_MUX_OK) {
        WebPDataClear(&assembled);
        return fail(err, code == WEBP_MUX_MEMORY_ERROR ? DR_WEBP_OUT_OF_MEMORY : DR_WEBP_ENCODE_FAILED,
                    "libwebpmux: %s", mux_words(code));
    }
    *out = (uint8_t *)assembled.bytes;
    *out_length = assembled.size;
    return DR_WEBP_OK;
}

dr_webp_status dr_webp_encode(const uint8_t *pixels, int width, int height, size_t stride, dr_webp_input input,
                              int quality, const uint8_t *icc, size_t icc_length,
                              dr_webp_should_stop should_stop, void *stop_context,
                              uint8_t **out, size_t *out_length, dr_webp_error *err) {
    if (!out || !out_length) return fail(err, DR_WEBP_INVALID_ARGUMENT, "no place for the file");
    *out = NULL;
    *out_length = 0;
    /* Checked here rather than left to libwebp, whose "bad picture
       dimensions" would not say which limit the picture is over. */
    if (width > WEBP_MAX_DIMENSION || height > WEBP_MAX_DIMENSION) {
        return fail(err, DR_WEBP_TOO_LARGE, "WebP allows at most %d pixels a side", WEBP_MAX_DIMENSION);
    }
    const size_t row = (size_t)(width > 0 ? width : 0) * (input == DR_WEBP_INPUT_GRAY ? 1 : 4);
    if (!pixels || width <= 0 || height <= 0 || stride < row || stride > INT_MAX ||
        (input != DR_WEBP_INPUT_RGBX && input != DR_WEBP_INPUT_GRAY && input != DR_WEBP_INPUT_RGBA)) {
        return fail(err, DR_WEBP_INVALID_ARGUMENT, "no %dx%d picture in rows of %zu bytes", width, height, stride);
    }
    if (quality < 1 || quality > 100) {
        return fail(err, DR_WEBP_INVALID_ARGUMENT, "quality must be 1 to 100, not %d", quality);
    }
    if (icc_length > 0 && !icc) return fail(err, DR_WEBP_INVALID_ARGUMENT, "no ICC profile bytes");

    WebPConfig config;
    if (!WebPConfigInit(&config)) {
        return fail(err, DR_WEBP_ENCODE_FAILED, "libwebp: the library's ABI does not match its headers");
    }
    config.quality = (float)quality;
    if (!WebPValidateConfig(&config)) return encode_failure(err, VP8_ENC_ERROR_INVALID_CONFIGURATION);

    WebPPicture picture;
    if (!WebPPictureInit(&picture)) {
        return fail(err, DR_WEBP_ENCODE_FAILED, "libwebp: the library's ABI does not match its headers");
    }
    /* YUV input: a lossy encode works on YUV, and an ARGB picture would
       only be converted to it inside WebPEncode. */
    picture.use_argb = 0;
    picture.width = width;
    picture.height = height;
    WebPMemoryWriter writer;
    WebPMemoryWriterInit(&writer);
    picture.writer = WebPMemoryWrite;
    picture.custom_ptr = &writer;
    stop_request stop = {should_stop, stop_context};
    if (should_stop) {
        picture.progress_hook = keep_going;
        picture.user_data = &stop;
    }

    int ok = input == DR_WEBP_INPUT_GRAY ? import_gray(&picture, pixels, stride)
           : input == DR_WEBP_INPUT_RGBA ? WebPPictureImportRGBA(&picture, pixels, (int)stride)
                                         : WebPPictureImportRGBX(&picture, pixels, (int)stride);
    if (ok) ok = WebPEncode(&config, &picture);
    dr_webp_status status = ok ? DR_WEBP_OK : encode_failure(err, picture.error_code);
    WebPPictureFree(&picture);
    if (status != DR_WEBP_OK) {
        WebPMemoryWriterClear(&writer);
        return status;
    }
    if (icc_length == 0) {
        /* Handed over, not cleared: dr_webp_free releases it as
           WebPMemoryWriterClear would (WebPFree). */
        *out = writer.mem;
        *out_length = writer.size;
        return DR_WEBP_OK;
    }
    status = add_icc(writer.mem, writer.size, icc, icc_length, out, out_length, err);
    WebPMemoryWriterClear(&writer);
    return status;
}

void dr_webp_free(uint8_t *buffer) {
    WebPFree(buffer);
}
