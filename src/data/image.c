/*
 * PNG and JPEG files into bytes, channel conversion, bilinear resize, and
 * ct_image_load.
 *
 * Both libraries report a fatal error by jumping out of the decoder: libpng
 * longjmps to png_jmpbuf, libjpeg calls error_exit, which must not return.
 * Each decoder below keeps everything it allocates in a job struct that
 * lives in its caller's frame (so nothing the jump could clobber is a local
 * of the function that called setjmp), returns CT_ERR_FORMAT with the
 * library's message after a jump, and the caller releases the job either
 * way.  Neither library may print: libpng's warnings are dropped, and a
 * libjpeg warning (a truncated file is only a warning to libjpeg, which
 * fills the rest of the image with gray) is an error here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CT_HAVE_PNG
#include <png.h>
#endif
#ifdef CT_HAVE_JPEG
#include <jpeglib.h>
#endif

#include "core/error.h"
#include "data/dataset.h"
#include "data/image.h"

#define IMAGE_MESSAGE_MAX 200
#define IMAGE_MAX_BYTES ((size_t)1 << 30) /* decoded size refused above this */
/* ITU-R BT.601 luma, 0.299 R + 0.587 G + 0.114 B, in 16-bit fixed point
 * with rounding: the same integers as PIL's convert("L"). */
#define LUMA_R 19595u
#define LUMA_G 38470u
#define LUMA_B 7471u
#define LUMA_ROUND 0x8000u
#define LUMA_SHIFT 16

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const uint8_t jpeg_magic[3] = {0xff, 0xd8, 0xff};

#if defined(CT_HAVE_PNG) || defined(CT_HAVE_JPEG)
/* Refuses sides that are 0 or absurd before anything is allocated. */
static ct_status check_size(const char *path, uint32_t width, uint32_t height, int channels)
{
    if (width == 0 || height == 0 || width > CT_IMAGE_MAX_SIDE || height > CT_IMAGE_MAX_SIDE ||
        (size_t)width * height * (size_t)channels > IMAGE_MAX_BYTES)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s claims an image of %ux%u pixels; cuttle accepts sides from 1 to "
                            "%d and up to %zu bytes: the file is corrupt or too large",
                            path, width, height, CT_IMAGE_MAX_SIDE, IMAGE_MAX_BYTES);
    return CT_OK;
}
#endif

/* ---- PNG ---------------------------------------------------------------------- */

#ifdef CT_HAVE_PNG
typedef struct png_job {
    const char *path;
    FILE *file;
    png_structp png;
    png_infop info;
    png_bytep *rows;
    ct_image image;
    char message[IMAGE_MESSAGE_MAX];
} png_job;

static void png_on_error(png_structp png, png_const_charp message)
{
    png_job *job = png_get_error_ptr(png);
    snprintf(job->message, sizeof job->message, "%s", message);
    png_longjmp(png, 1);
}

static void png_read_bytes(png_structp png, png_bytep data, size_t length)
{
    png_job *job = png_get_io_ptr(png);
    if (fread(data, 1, length, job->file) != length)
        png_error(png, ferror(job->file) ? strerror(errno)
                                         : "the file ends early: it is truncated");
}

static void png_on_warning(png_structp png, png_const_charp message)
{
    (void)png;
    (void)message;
}

/* Gray (+alpha) to 1 channel, the rest to 3: palettes and low bit depths
 * expanded, 16-bit samples cut to their high byte, alpha dropped. */
static ct_status png_decode(png_job *job)
{
    job->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, png_on_error, png_on_warning);
    if (job->png)
        job->info = png_create_info_struct(job->png);
    if (!job->png || !job->info)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory decoding %s", job->path);
    if (setjmp(png_jmpbuf(job->png)))
        return ct_set_error(CT_ERR_FORMAT, "%s is a corrupt PNG file: libpng says \"%s\"",
                            job->path, job->message);
    png_set_read_fn(job->png, job, png_read_bytes);
    png_set_user_limits(job->png, CT_IMAGE_MAX_SIDE, CT_IMAGE_MAX_SIDE);
    png_read_info(job->png, job->info);
    png_set_expand(job->png);
    png_set_strip_16(job->png);
    png_set_strip_alpha(job->png);
    png_set_interlace_handling(job->png);
    png_read_update_info(job->png, job->info);
    uint32_t width = png_get_image_width(job->png, job->info);
    uint32_t height = png_get_image_height(job->png, job->info);
    int channels = png_get_channels(job->png, job->info);
    CT_ASSERT(channels == 1 || channels == 3);
    CT_TRY(check_size(job->path, width, height, channels));
    size_t row_bytes = (size_t)width * (size_t)channels;
    CT_ASSERT(png_get_rowbytes(job->png, job->info) == row_bytes);
    job->image.pixels = malloc(row_bytes * height);
    job->rows = malloc(sizeof *job->rows * height);
    if (!job->image.pixels || !job->rows)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory decoding %s (%ux%u)", job->path,
                            width, height);
    for (uint32_t y = 0; y < height; y++)
        job->rows[y] = job->image.pixels + y * row_bytes;
    png_read_image(job->png, job->rows);
    png_read_end(job->png, NULL);
    job->image.width = (int)width;
    job->image.height = (int)height;
    job->image.channels = channels;
    return CT_OK;
}

static ct_status decode_png(const char *path, FILE *file, ct_image *out)
{
    png_job job = {.path = path, .file = file};
    ct_status status = png_decode(&job);
    png_destroy_read_struct(&job.png, &job.info, NULL);
    free(job.rows);
    if (status != CT_OK)
        free(job.image.pixels);
    else
        *out = job.image;
    return status;
}
#endif

/* ---- JPEG --------------------------------------------------------------------- */

#ifdef CT_HAVE_JPEG
typedef struct jpeg_job {
    const char *path;
    FILE *file;
    struct jpeg_decompress_struct decoder;
    struct jpeg_error_mgr errors;
    bool created;
    jmp_buf jump;
    ct_image image;
    char message[JMSG_LENGTH_MAX];
} jpeg_job;

static jpeg_job *jpeg_job_of(j_common_ptr decoder)
{
    return (jpeg_job *)((char *)decoder->err - offsetof(jpeg_job, errors));
}

static void jpeg_on_error(j_common_ptr decoder)
{
    jpeg_job *job = jpeg_job_of(decoder);
    decoder->err->format_message(decoder, job->message);
    longjmp(job->jump, 1);
}

/* Level -1 is a warning (corrupt data the library would work around):
 * an error here.  Levels >= 0 are trace messages. */
static void jpeg_on_message(j_common_ptr decoder, int level)
{
    if (level < 0)
        jpeg_on_error(decoder);
}

static void jpeg_silent(j_common_ptr decoder)
{
    (void)decoder;
}

/* Gray JPEGs to 1 channel, the rest to RGB. */
static ct_status jpeg_decode(jpeg_job *job)
{
    job->decoder.err = jpeg_std_error(&job->errors);
    job->errors.error_exit = jpeg_on_error;
    job->errors.emit_message = jpeg_on_message;
    job->errors.output_message = jpeg_silent;
    if (setjmp(job->jump))
        return ct_set_error(CT_ERR_FORMAT, "%s is a corrupt JPEG file: libjpeg says \"%s\"",
                            job->path, job->message);
    jpeg_create_decompress(&job->decoder);
    job->created = true;
    jpeg_stdio_src(&job->decoder, job->file);
    jpeg_read_header(&job->decoder, TRUE);
    J_COLOR_SPACE space = job->decoder.jpeg_color_space;
    if (space == JCS_CMYK || space == JCS_YCCK)
        return ct_set_error(CT_ERR_UNSUPPORTED,
                            "%s is a CMYK JPEG, which cuttle does not read: convert it to RGB",
                            job->path);
    job->decoder.out_color_space = space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
    CT_TRY(check_size(job->path, job->decoder.image_width, job->decoder.image_height, 3));
    jpeg_start_decompress(&job->decoder);
    int channels = job->decoder.output_components;
    CT_ASSERT(channels == 1 || channels == 3);
    size_t row_bytes = (size_t)job->decoder.output_width * (size_t)channels;
    job->image.pixels = malloc(row_bytes * job->decoder.output_height);
    if (!job->image.pixels)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory decoding %s", job->path);
    while (job->decoder.output_scanline < job->decoder.output_height) {
        JSAMPROW row = job->image.pixels + job->decoder.output_scanline * row_bytes;
        jpeg_read_scanlines(&job->decoder, &row, 1);
    }
    jpeg_finish_decompress(&job->decoder);
    job->image.width = (int)job->decoder.output_width;
    job->image.height = (int)job->decoder.output_height;
    job->image.channels = channels;
    return CT_OK;
}

static ct_status decode_jpeg(const char *path, FILE *file, ct_image *out)
{
    jpeg_job job = {.path = path, .file = file};
    ct_status status = jpeg_decode(&job);
    if (job.created)
        jpeg_destroy_decompress(&job.decoder);
    if (status != CT_OK)
        free(job.image.pixels);
    else
        *out = job.image;
    return status;
}
#endif

/* ---- decoding and conversion ---------------------------------------------------- */

/* Gray to RGB by copying, RGB to gray with the luma weights. */
static ct_status convert_channels(const char *path, ct_image *image, int channels)
{
    if (channels == 0 || channels == image->channels)
        return CT_OK;
    size_t n = (size_t)image->height * (size_t)image->width;
    uint8_t *converted = malloc(n * (size_t)channels);
    if (!converted)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory converting %s", path);
    const uint8_t *src = image->pixels;
    for (size_t i = 0; i < n; i++) {
        if (channels == 3) {
            converted[3 * i] = converted[3 * i + 1] = converted[3 * i + 2] = src[i];
        } else {
            uint32_t luma = LUMA_R * src[3 * i] + LUMA_G * src[3 * i + 1] +
                            LUMA_B * src[3 * i + 2] + LUMA_ROUND;
            converted[i] = (uint8_t)(luma >> LUMA_SHIFT);
        }
    }
    free(image->pixels);
    image->pixels = converted;
    image->channels = channels;
    return CT_OK;
}

ct_status ct_image_decode(const char *path, int channels, ct_image *out)
{
    *out = (ct_image){0};
    CT_ASSERT(channels == 0 || channels == 1 || channels == 3);
    FILE *file = fopen(path, "rb");
    if (!file)
        return ct_set_error(CT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    uint8_t head[sizeof png_magic] = {0};
    size_t got = fread(head, 1, sizeof head, file);
    ct_status status = CT_OK;
    bool is_png = got == sizeof png_magic && memcmp(head, png_magic, sizeof png_magic) == 0;
    bool is_jpeg = got >= sizeof jpeg_magic && memcmp(head, jpeg_magic, sizeof jpeg_magic) == 0;
    if (ferror(file))
        status = ct_set_error(CT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    else if (!is_png && !is_jpeg)
        status = ct_set_error(CT_ERR_FORMAT,
                              "%s is not a PNG or JPEG file (%zu bytes, starting %02x %02x %02x "
                              "%02x): cuttle tells images by their content, not their name",
                              path, got, head[0], head[1], head[2], head[3]);
    else if (fseek(file, 0, SEEK_SET) != 0)
        status = ct_set_error(CT_ERR_IO, "cannot rewind %s: %s", path, strerror(errno));
    else if (is_png) {
#ifdef CT_HAVE_PNG
        status = decode_png(path, file, out);
#else
        status = ct_set_error(CT_ERR_UNSUPPORTED,
                              "%s is a PNG file, but this build of cuttle has no libpng: "
                              "rebuild with libpng-dev installed (apt-get install libpng-dev)",
                              path);
#endif
    } else {
#ifdef CT_HAVE_JPEG
        status = decode_jpeg(path, file, out);
#else
        status = ct_set_error(CT_ERR_UNSUPPORTED,
                              "%s is a JPEG file, but this build of cuttle has no libjpeg: "
                              "rebuild with libjpeg-dev installed (apt-get install libjpeg-dev)",
                              path);
#endif
    }
    fclose(file);
    if (status == CT_OK)
        status = convert_channels(path, out, channels);
    if (status != CT_OK)
        ct_image_release(out);
    return status;
}

void ct_image_release(ct_image *image)
{
    if (!image)
        return;
    free(image->pixels);
    *image = (ct_image){0};
}

/* ---- resize ------------------------------------------------------------------- */

/* Where output index `dst` samples the input along one axis: the convention
 * of torch's interpolate(mode="bilinear", align_corners=False) without
 * antialiasing, i.e. half-pixel centres: src = (dst + 0.5) * in/out - 0.5,
 * clamped at 0, blending indices i0 and i1 = min(i0 + 1, in - 1).  PIL
 * agrees when enlarging; when shrinking PIL widens its filter (antialias)
 * and torch's default, like this, does not. */
typedef struct sample {
    int i0, i1;
    float w1; /* the weight of i1; i0 gets 1 - w1 */
} sample;

static sample sample_at(int dst, int in, int out)
{
    float scale = (float)in / (float)out;
    float src = ((float)dst + 0.5f) * scale - 0.5f;
    if (src < 0.0f)
        src = 0.0f;
    int i0 = (int)src;
    if (i0 > in - 1)
        i0 = in - 1;
    sample s = {i0, i0 < in - 1 ? i0 + 1 : i0, src - (float)i0};
    return s;
}

/* out[c,y,x] = round(sum over the 2x2 neighbours of in[y', x', c] * weights) */
void ct_image_resize_chw(const ct_image *in, int height, int width, uint8_t *out)
{
    int channels = in->channels;
    size_t row = (size_t)in->width * (size_t)channels;
    size_t plane = (size_t)height * (size_t)width;
    for (int y = 0; y < height; y++) {
        sample sy = sample_at(y, in->height, height);
        const uint8_t *row0 = in->pixels + (size_t)sy.i0 * row;
        const uint8_t *row1 = in->pixels + (size_t)sy.i1 * row;
        for (int x = 0; x < width; x++) {
            sample sx = sample_at(x, in->width, width);
            size_t a = (size_t)sx.i0 * (size_t)channels, b = (size_t)sx.i1 * (size_t)channels;
            for (int c = 0; c < channels; c++) {
                float top = (1.0f - sx.w1) * row0[a + c] + sx.w1 * row0[b + c];
                float bottom = (1.0f - sx.w1) * row1[a + c] + sx.w1 * row1[b + c];
                float value = (1.0f - sy.w1) * top + sy.w1 * bottom + 0.5f;
                out[c * plane + (size_t)y * width + x] =
                    (uint8_t)(value >= CT_BYTE_MAX ? CT_BYTE_MAX : value);
            }
        }
    }
}

/* ---- public API ---------------------------------------------------------------- */

ct_status ct_image_load(const char *path, int channels, int height, int width,
                        const float *mean, const float *std, float *out)
{
    if (!path || !out || (channels != 1 && channels != 3) || height < 1 || width < 1 ||
        height > CT_IMAGE_MAX_SIDE || width > CT_IMAGE_MAX_SIDE)
        return ct_set_error(CT_ERR_ARG,
                            "ct_image_load: path and out are required, channels must be 1 or 3 "
                            "(got %d) and height, width from 1 to %d (got %dx%d)",
                            channels, CT_IMAGE_MAX_SIDE, height, width);
    for (int c = 0; std && c < channels; c++)
        if (!(std[c] > 0.0f))
            return ct_set_error(CT_ERR_ARG, "ct_image_load: std[%d] is %g; it must be > 0", c,
                                (double)std[c]);
    ct_image image;
    CT_TRY(ct_image_decode(path, channels, &image));
    size_t plane = (size_t)height * (size_t)width;
    uint8_t *resized = malloc(plane * (size_t)channels);
    if (!resized) {
        ct_image_release(&image);
        return ct_set_error(CT_ERR_MEMORY, "out of host memory resizing %s", path);
    }
    ct_image_resize_chw(&image, height, width, resized);
    ct_image_release(&image);
    for (int c = 0; c < channels; c++) {
        float m = mean ? mean[c] : 0.0f, s = std ? std[c] : 1.0f;
        for (size_t i = 0; i < plane; i++)
            out[c * plane + i] = ((float)resized[c * plane + i] / CT_BYTE_MAX - m) / s;
    }
    free(resized);
    return CT_OK;
}
