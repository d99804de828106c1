#include "CGIF.h"

#include <gif_lib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ reading */

typedef struct memory_source {
    const uint8_t *data;
    size_t length;
    size_t offset;
    int ran_out;   /* giflib asked for more bytes than were left */
} memory_source;

/* giflib's input function: a short count is a read failure to giflib,
   which is what a file cut short is. */
static int read_memory(GifFileType *gif, GifByteType *buffer, int wanted) {
    memory_source *source = (memory_source *)gif->UserData;
    if (wanted <= 0) return 0;
    size_t left = source->length - source->offset;
    size_t count = (size_t)wanted < left ? (size_t)wanted : left;
    if (count < (size_t)wanted) source->ran_out = 1;
    memcpy(buffer, source->data + source->offset, count);
    source->offset += count;
    return (int)count;
}

/* Row order: one pass for a sequential picture, GIF's four for an
   interlaced one (every 8th from 0, every 8th from 4, every 4th from 2,
   every 2nd from 1), as a decode reads rows and the fixtures' encoder
   writes them. */
static const int pass_start[4] = {0, 4, 2, 1}, pass_step[4] = {8, 8, 4, 2};

static dr_gif_status fail(dr_gif_error *err, dr_gif_status status, const char *message) {
    if (err) {
        err->status = status;
        snprintf(err->message, sizeof err->message, "%s", message);
    }
    return status;
}

/* A giflib error code as a status and words. Whatever giflib calls it
   (it says "no screen descriptor" for a file cut inside one), a failure
   after the data ran out is a file cut short. */
static dr_gif_status fail_gif(dr_gif_error *err, int code, const memory_source *source) {
    if (source && source->ran_out) return fail(err, DR_GIF_TRUNCATED, "data ends too soon");
    switch (code) {
    case D_GIF_ERR_READ_FAILED:
    case D_GIF_ERR_EOF_TOO_SOON:
        return fail(err, DR_GIF_TRUNCATED, "data ends too soon");
    case D_GIF_ERR_NOT_GIF_FILE:
        return fail(err, DR_GIF_CORRUPT, "no GIF87a or GIF89a signature");
    case D_GIF_ERR_NO_SCRN_DSCR:
        return fail(err, DR_GIF_CORRUPT, "no logical screen descriptor");
    case D_GIF_ERR_NO_IMAG_DSCR:
        return fail(err, DR_GIF_CORRUPT, "bad image descriptor");
    case D_GIF_ERR_NO_COLOR_MAP:
        return fail(err, DR_GIF_CORRUPT, "the picture has no colour table, local or global");
    case D_GIF_ERR_WRONG_RECORD:
        return fail(err, DR_GIF_CORRUPT, "unknown record type");
    case D_GIF_ERR_DATA_TOO_BIG:
        return fail(err, DR_GIF_CORRUPT, "more image data than the picture holds");
    case D_GIF_ERR_NOT_ENOUGH_MEM:
        return fail(err, DR_GIF_OUT_OF_MEMORY, "out of memory");
    case D_GIF_ERR_IMAGE_DEFECT:
        return fail(err, DR_GIF_CORRUPT, "bad LZW image data");
    default: {
        char text[64];
        snprintf(text, sizeof text, "giflib error %d", code);
        return fail(err, DR_GIF_CORRUPT, text);
    }
    }
}

/* Opens the file and reads the records up to the first picture's
   descriptor, dropping every extension but keeping the transparent colour
   of the last graphics control block before it. On success *out is open
   (close it with DGifCloseFile) and positioned at that picture's data. */
static dr_gif_status open_first_picture(const uint8_t *data, size_t length, uint32_t max_side, memory_source *source,
                                        GifFileType **out, dr_gif_info *info, int *transparent, dr_gif_error *err) {
    *out = NULL;
    *transparent = -1;
    memset(info, 0, sizeof *info);
    if (!data || length == 0) return fail(err, DR_GIF_INVALID_ARGUMENT, "no data");
    source->data = data;
    source->length = length;
    source->offset = 0;
    source->ran_out = 0;
    int code = 0;
    GifFileType *gif = DGifOpen(source, read_memory, &code);
    if (!gif) return fail_gif(err, code, source);
    info->width = gif->SWidth;
    info->height = gif->SHeight;
    if ((uint32_t)gif->SWidth > max_side || (uint32_t)gif->SHeight > max_side) {
        DGifCloseFile(gif, &code);
        return fail(err, DR_GIF_TOO_LARGE, "the logical screen is larger than the limit");
    }
    for (;;) {
        GifRecordType record;
        if (DGifGetRecordType(gif, &record) == GIF_ERROR) goto gif_failed;
        if (record == TERMINATE_RECORD_TYPE) {
            DGifCloseFile(gif, &code);
            return fail(err, DR_GIF_NO_IMAGE, "the file ends before its first picture");
        }
        if (record == EXTENSION_RECORD_TYPE) {
            int function = 0;
            GifByteType *block = NULL;
            if (DGifGetExtension(gif, &function, &block) == GIF_ERROR) goto gif_failed;
            if (function == GRAPHICS_EXT_FUNC_CODE && block && block[0] >= 4) {
                GraphicsControlBlock control;
                if (DGifExtensionToGCB(block[0], block + 1, &control) == GIF_OK) *transparent = control.TransparentColor;
            }
            while (block) {
                if (DGifGetExtensionNext(gif, &block) == GIF_ERROR) goto gif_failed;
            }
            continue;
        }
        if (record == IMAGE_DESC_RECORD_TYPE) {
            if (DGifGetImageDesc(gif) == GIF_ERROR) goto gif_failed;
            break;
        }
        /* UNDEFINED or SCREEN_DESC: giflib reports these as WRONG_RECORD itself. */
    }
    info->left = gif->Image.Left;
    info->top = gif->Image.Top;
    info->frame_width = gif->Image.Width;
    info->frame_height = gif->Image.Height;
    info->interlaced = gif->Image.Interlace ? 1 : 0;
    if (info->width == 0 || info->height == 0) {
        /* A screen of no size: the picture's own extent is the image. */
        info->width = info->left + info->frame_width;
        info->height = info->top + info->frame_height;
    }
    if ((uint32_t)info->frame_width > max_side || (uint32_t)info->frame_height > max_side ||
        (uint32_t)info->width > max_side || (uint32_t)info->height > max_side) {
        DGifCloseFile(gif, &code);
        return fail(err, DR_GIF_TOO_LARGE, "the first picture is larger than the limit");
    }
    if (info->width <= 0 || info->height <= 0 || info->frame_width <= 0 || info->frame_height <= 0) {
        DGifCloseFile(gif, &code);
        return fail(err, DR_GIF_INVALID_DIMENSIONS, "a picture 0 pixels wide or high");
    }
    if (!gif->Image.ColorMap && !gif->SColorMap) {
        DGifCloseFile(gif, &code);
        return fail_gif(err, D_GIF_ERR_NO_COLOR_MAP, NULL);
    }
    int covers = info->left == 0 && info->top == 0 && info->frame_width >= info->width && info->frame_height >= info->height;
    info->has_alpha = (*transparent >= 0 || !covers) ? 1 : 0;
    *out = gif;
    return DR_GIF_OK;

gif_failed:
    code = gif->Error;
    {
        int ignored = 0;
        DGifCloseFile(gif, &ignored);
    }
    return fail_gif(err, code, source);
}

dr_gif_status dr_gif_read_info(const uint8_t *data, size_t length, uint32_t max_side, dr_gif_info *info, dr_gif_error *err) {
    if (err) {
        err->status = DR_GIF_OK;
        err->message[0] = 0;
    }
    if (!info) return fail(err, DR_GIF_INVALID_ARGUMENT, "no info to fill");
    memory_source source;
    GifFileType *gif = NULL;
    int transparent = -1;
    dr_gif_status status = open_first_picture(data, length, max_side, &source, &gif, info, &transparent, err);
    if (gif) {
        int code = 0;
        DGifCloseFile(gif, &code);
    }
    return status;
}

dr_gif_status dr_gif_decode_rgbx(const uint8_t *data, size_t length, uint32_t max_side,
                                 uint8_t *dst, size_t dst_stride, int width, int height,
                                 uint8_t bg_r, uint8_t bg_g, uint8_t bg_b, int keep_alpha,
                                 dr_gif_should_stop should_stop, void *stop_context, dr_gif_error *err) {
    if (err) {
        err->status = DR_GIF_OK;
        err->message[0] = 0;
    }
    if (!dst || width <= 0 || height <= 0 || dst_stride < (size_t)width * 4) {
        return fail(err, DR_GIF_INVALID_ARGUMENT, "bad output buffer");
    }
    memory_source source;
    GifFileType *gif = NULL;
    dr_gif_info info;
    int transparent = -1;
    dr_gif_status status = open_first_picture(data, length, max_side, &source, &gif, &info, &transparent, err);
    if (status != DR_GIF_OK) return status;
    int code = 0;
    if (info.width != width || info.height != height) {
        DGifCloseFile(gif, &code);
        return fail(err, DR_GIF_INVALID_ARGUMENT, "the canvas is not the size the header gives");
    }
    /* Every index as the RGBX pixel it draws: the transparent one and any
       past the colour table draw the background, which is what the canvas
       holds there (only the first picture is drawn), so a pixel is one
       four-byte store, with no test. */
    const ColorMapObject *map = gif->Image.ColorMap ? gif->Image.ColorMap : gif->SColorMap;
    const uint8_t background[4] = {keep_alpha ? 0 : bg_r, keep_alpha ? 0 : bg_g, keep_alpha ? 0 : bg_b, keep_alpha ? 0 : 255};
    uint8_t table[256][4];
    for (int index = 0; index < 256; index++) {
        int shows = index != transparent && index < map->ColorCount;
        table[index][0] = shows ? map->Colors[index].Red : background[0];
        table[index][1] = shows ? map->Colors[index].Green : background[1];
        table[index][2] = shows ? map->Colors[index].Blue : background[2];
        table[index][3] = shows ? 255 : background[3];
    }
    /* The background only where the picture does not reach. */
    int covers = info.left == 0 && info.top == 0 && info.frame_width >= width && info.frame_height >= height;
    if (!covers) {
        for (int y = 0; y < height; y++) {
            uint8_t *row = dst + (size_t)y * dst_stride;
            for (int x = 0; x < width; x++) memcpy(row + 4 * (size_t)x, background, 4);
        }
    }
    GifPixelType *line = malloc((size_t)info.frame_width);
    if (!line) {
        DGifCloseFile(gif, &code);
        return fail(err, DR_GIF_OUT_OF_MEMORY, "out of memory for a row");
    }
    int passes = info.interlaced ? 4 : 1;
    int read = 0;
    for (int pass = 0; pass < passes; pass++) {
        int start = info.interlaced ? pass_start[pass] : 0, step = info.interlaced ? pass_step[pass] : 1;
        for (int y = start; y < info.frame_height; y += step) {
            if (should_stop && read % 16 == 0 && should_stop(stop_context)) {
                free(line);
                DGifCloseFile(gif, &code);
                return fail(err, DR_GIF_CANCELLED, "cancelled");
            }
            read++;
            if (DGifGetLine(gif, line, info.frame_width) == GIF_ERROR) {
                int failed = gif->Error;
                free(line);
                DGifCloseFile(gif, &code);
                return fail_gif(err, failed, &source);
            }
            int canvas_y = info.top + y;
            if (canvas_y >= height) continue;
            if (info.left >= width) continue;
            int visible = info.frame_width < width - info.left ? info.frame_width : width - info.left;
            uint8_t *row = dst + (size_t)canvas_y * dst_stride + 4 * (size_t)info.left;
            for (int x = 0; x < visible; x++) memcpy(row + 4 * (size_t)x, table[line[x]], 4);
        }
    }
    free(line);
    DGifCloseFile(gif, &code);
    return DR_GIF_OK;
}

/* ------------------------------------------------------------------ writing */

typedef struct memory_sink {
    uint8_t *data;
    size_t length;
    size_t capacity;
    int failed;
} memory_sink;

static int write_memory(GifFileType *gif, const GifByteType *bytes, int count) {
    memory_sink *sink = (memory_sink *)gif->UserData;
    if (count <= 0) return 0;
    if (sink->length + (size_t)count > sink->capacity) {
        size_t capacity = sink->capacity ? sink->capacity : 4096;
        while (capacity < sink->length + (size_t)count) capacity *= 2;
        uint8_t *grown = realloc(sink->data, capacity);
        if (!grown) {
            sink->failed = 1;
            return 0;
        }
        sink->data = grown;
        sink->capacity = capacity;
    }
    memcpy(sink->data + sink->length, bytes, (size_t)count);
    sink->length += (size_t)count;
    return count;
}

int dr_gif_encode(const dr_gif_frame *frames, int count, int screen_width, int screen_height,
                  const uint8_t *palette, int colors, uint8_t **out, size_t *out_length) {
    if (!out || !out_length || !palette || (count > 0 && !frames)) return -1;
    *out = NULL;
    *out_length = 0;
    ColorMapObject *map = GifMakeMapObject(colors, NULL);
    if (!map) return -1;
    for (int i = 0; i < colors; i++) {
        map->Colors[i].Red = palette[3 * i];
        map->Colors[i].Green = palette[3 * i + 1];
        map->Colors[i].Blue = palette[3 * i + 2];
    }
    memory_sink sink = {0};
    int code = 0;
    GifFileType *gif = EGifOpen(&sink, write_memory, &code);
    if (!gif) {
        GifFreeMapObject(map);
        return -1;
    }
    EGifSetGifVersion(gif, true);
    int failed = EGifPutScreenDesc(gif, screen_width, screen_height, 8, 0, map) == GIF_ERROR;
    for (int f = 0; f < count && !failed; f++) {
        const dr_gif_frame *frame = &frames[f];
        GraphicsControlBlock control = {0};
        control.DisposalMode = DISPOSAL_UNSPECIFIED;
        control.DelayTime = 10;
        control.TransparentColor = frame->transparent;
        GifByteType extension[4];
        size_t size = EGifGCBToExtension(&control, extension);
        failed = EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, (int)size, extension) == GIF_ERROR;
        if (failed) break;
        failed = EGifPutImageDesc(gif, frame->left, frame->top, frame->width, frame->height, frame->interlaced != 0, NULL) == GIF_ERROR;
        int passes = frame->interlaced ? 4 : 1;
        for (int pass = 0; pass < passes && !failed; pass++) {
            int start = frame->interlaced ? pass_start[pass] : 0, step = frame->interlaced ? pass_step[pass] : 1;
            for (int y = start; y < frame->height && !failed; y += step) {
                failed = EGifPutLine(gif, (GifPixelType *)(frame->indices + (size_t)y * frame->width), frame->width) == GIF_ERROR;
            }
        }
    }
    if (EGifCloseFile(gif, &code) == GIF_ERROR) failed = 1;
    GifFreeMapObject(map);
    if (failed || sink.failed) {
        free(sink.data);
        return -1;
    }
    *out = sink.data;
    *out_length = sink.length;
    return 0;
}

void dr_gif_free(void *pointer) { free(pointer); }
