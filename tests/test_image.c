/*
 * Image files: PNGs of every colour type and JPEGs written here with libpng
 * and libjpeg decode to the values written (PNG exactly, JPEG within the
 * codec's loss); the bilinear resize matches hand-computed values (and
 * torch's interpolate, align_corners=False); corrupt, truncated and
 * mislabelled files are refused with CT_ERR_FORMAT, never a crash.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CT_HAVE_PNG
#include <png.h>
#endif
#ifdef CT_HAVE_JPEG
#include <jpeglib.h>
#endif

#include "cuttle.h"
#include "harness.h"
#include "tmpdir.h"

#define MAX_BYTES 65536
#define JPEG_SIDE 16
#define JPEG_TOLERANCE 4 /* bytes: quality 100, no chroma subsampling */

#if defined(CT_HAVE_PNG) || defined(CT_HAVE_JPEG)
static uint8_t file_bytes[MAX_BYTES];

static size_t read_file(const char *path, uint8_t *bytes)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(bytes, 1, MAX_BYTES, f) : 0;
    if (f)
        fclose(f);
    return n;
}

/* Load at the file's size (mean 0, std 1: out = x/255) and compare with the
 * bytes [C,H,W] within `tolerance` bytes. */
static void expect_pixels(const char *path, int channels, int height, int width,
                          const uint8_t *chw, int tolerance)
{
    static float out[3 * 64 * 64];
    CHECK_OK(ct_image_load(path, channels, height, width, NULL, NULL, out));
    int wrong = 0, worst = 0;
    for (int i = 0; i < channels * height * width; i++) {
        float want = (float)chw[i] / 255.0f;
        int diff = abs((int)(out[i] * 255.0f + 0.5f) - chw[i]);
        worst = diff > worst ? diff : worst;
        wrong += tolerance == 0 ? out[i] != want : diff > tolerance;
    }
    CHECK(wrong == 0, "%s as %d channels: %d values differ (worst by %d)", path, channels, wrong,
          worst);
}

#endif

static void expect_refused(const char *path, ct_status status, const char *needle1,
                           const char *needle2)
{
    float out[4 * 4 * 3];
    ct_status got = ct_image_load(path, 3, 4, 4, NULL, NULL, out);
    const char *message = ct_last_error();
    CHECK(got == status, "%s: expected %s, got %s: %s", path, ct_status_name(status),
          ct_status_name(got), message);
    CHECK(strstr(message, needle1), "message '%s' lacks '%s'", message, needle1);
    CHECK(!needle2 || strstr(message, needle2), "message '%s' lacks '%s'", message, needle2);
}

#if defined(CT_HAVE_PNG) || defined(CT_HAVE_JPEG)
/* Luma of ITU-R 601 as PIL's convert("L") computes it. */
static uint8_t luma(uint8_t r, uint8_t g, uint8_t b)
{
    return (uint8_t)((19595u * r + 38470u * g + 7471u * b + 0x8000u) >> 16);
}
#endif

static void test_not_an_image(void)
{
    const char *text = tmpdir_path("notes.png");
    const char words[] = "these are not pixels\n";
    tmpdir_write(text, words, sizeof words - 1);
    expect_refused(text, CT_ERR_FORMAT, text, "not a PNG or JPEG");
    const char *empty = tmpdir_path("empty.jpg");
    tmpdir_write(empty, "", 0);
    expect_refused(empty, CT_ERR_FORMAT, empty, "0 bytes");
    expect_refused(tmpdir_path("missing.png"), CT_ERR_IO, "missing.png", "No such file");
    float out[1];
    CHECK(ct_image_load(text, 2, 1, 1, NULL, NULL, out) == CT_ERR_ARG &&
              strstr(ct_last_error(), "channels must be 1 or 3"),
          "2 channels: %s", ct_last_error());
    float zero_std[3] = {1, 0, 1};
    CHECK(ct_image_load(text, 3, 1, 1, NULL, zero_std, out) == CT_ERR_ARG &&
              strstr(ct_last_error(), "std[1]"),
          "std 0: %s", ct_last_error());
}

/* ---- PNG ------------------------------------------------------------------------ */

#ifdef CT_HAVE_PNG
typedef struct png_spec {
    int width, height, color_type, bit_depth;
    bool interlaced;
    const png_color *palette;
    int n_palette;
    const uint8_t *trans;
    int n_trans;
} png_spec;

static void write_png(const char *path, const png_spec *spec, const uint8_t *rows)
{
    FILE *f = fopen(path, "wb");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!f || !info || setjmp(png_jmpbuf(png))) {
        fprintf(stderr, "test_image: cannot write %s\n", path);
        exit(1);
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)spec->width, (png_uint_32)spec->height,
                 spec->bit_depth, spec->color_type,
                 spec->interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (spec->palette)
        png_set_PLTE(png, info, spec->palette, spec->n_palette);
    if (spec->trans)
        png_set_tRNS(png, info, spec->trans, spec->n_trans, NULL);
    png_write_info(png, info);
    size_t row_bytes = png_get_rowbytes(png, info);
    png_bytep pointers[64];
    for (int y = 0; y < spec->height; y++)
        pointers[y] = (png_bytep)rows + (size_t)y * row_bytes;
    png_write_image(png, pointers);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
}

/* A 5x4 image, values spread over 0..255, in each colour type. */
#define PW 5
#define PH 4

static uint8_t sample(int channel, int y, int x)
{
    return (uint8_t)((channel * 91 + y * 67 + x * 29 + (x * y) % 7) % 256);
}

static void test_png_gray(void)
{
    uint8_t rows[PH * PW], gray[PH * PW], rgb[3 * PH * PW];
    for (int y = 0; y < PH; y++)
        for (int x = 0; x < PW; x++)
            rows[y * PW + x] = gray[y * PW + x] = sample(0, y, x);
    for (int c = 0; c < 3; c++)
        memcpy(rgb + c * PH * PW, gray, sizeof gray);
    const char *path = tmpdir_path("gray.png");
    png_spec spec = {PW, PH, PNG_COLOR_TYPE_GRAY, 8, false, NULL, 0, NULL, 0};
    write_png(path, &spec, rows);
    expect_pixels(path, 1, PH, PW, gray, 0);
    expect_pixels(path, 3, PH, PW, rgb, 0);

    /* Adam7 interlacing, and a gray + alpha image (alpha dropped). */
    spec.interlaced = true;
    write_png(path, &spec, rows);
    expect_pixels(path, 1, PH, PW, gray, 0);
    uint8_t gray_alpha[2 * PH * PW];
    for (int i = 0; i < PH * PW; i++) {
        gray_alpha[2 * i] = gray[i];
        gray_alpha[2 * i + 1] = (uint8_t)(i * 13);
    }
    png_spec ga = {PW, PH, PNG_COLOR_TYPE_GRAY_ALPHA, 8, false, NULL, 0, NULL, 0};
    write_png(path, &ga, gray_alpha);
    expect_pixels(path, 1, PH, PW, gray, 0);

    /* 1-bit gray: 0 and 1 become 0 and 255. */
    uint8_t bits[PH] = {0xa0, 0x50, 0xf8, 0x00}; /* rows of 5 pixels, high bit first */
    uint8_t expanded[PH * PW];
    for (int y = 0; y < PH; y++)
        for (int x = 0; x < PW; x++)
            expanded[y * PW + x] = (bits[y] >> (7 - x)) & 1 ? 255 : 0;
    png_spec one_bit = {PW, PH, PNG_COLOR_TYPE_GRAY, 1, false, NULL, 0, NULL, 0};
    write_png(path, &one_bit, bits);
    expect_pixels(path, 1, PH, PW, expanded, 0);

    /* 16-bit samples keep their high byte. */
    uint8_t wide[2 * PH * PW];
    for (int i = 0; i < PH * PW; i++) {
        wide[2 * i] = gray[i];
        wide[2 * i + 1] = (uint8_t)(255 - gray[i]);
    }
    png_spec sixteen = {PW, PH, PNG_COLOR_TYPE_GRAY, 16, false, NULL, 0, NULL, 0};
    write_png(path, &sixteen, wide);
    expect_pixels(path, 1, PH, PW, gray, 0);
}

static void test_png_rgb_and_rgba(void)
{
    uint8_t rgb_rows[PH * PW * 3], rgba_rows[PH * PW * 4], chw[3 * PH * PW], gray[PH * PW];
    for (int y = 0; y < PH; y++)
        for (int x = 0; x < PW; x++) {
            int i = y * PW + x;
            for (int c = 0; c < 3; c++) {
                rgb_rows[3 * i + c] = rgba_rows[4 * i + c] = chw[c * PH * PW + i] =
                    sample(c, y, x);
            }
            rgba_rows[4 * i + 3] = (uint8_t)(255 - i * 11);
            gray[i] = luma(sample(0, y, x), sample(1, y, x), sample(2, y, x));
        }
    const char *path = tmpdir_path("rgb.png");
    png_spec rgb = {PW, PH, PNG_COLOR_TYPE_RGB, 8, false, NULL, 0, NULL, 0};
    write_png(path, &rgb, rgb_rows);
    expect_pixels(path, 3, PH, PW, chw, 0);
    expect_pixels(path, 1, PH, PW, gray, 0);
    /* The weights are ITU-R 601's: pure red, green and blue. */
    CHECK(luma(255, 0, 0) == 76 && luma(0, 255, 0) == 150 && luma(0, 0, 255) == 29,
          "luma of primaries %d %d %d", luma(255, 0, 0), luma(0, 255, 0), luma(0, 0, 255));

    const char *rgba_path = tmpdir_path("rgba.png");
    png_spec rgba = {PW, PH, PNG_COLOR_TYPE_RGB_ALPHA, 8, false, NULL, 0, NULL, 0};
    write_png(rgba_path, &rgba, rgba_rows);
    expect_pixels(rgba_path, 3, PH, PW, chw, 0);
    expect_pixels(rgba_path, 1, PH, PW, gray, 0);
}

static void test_png_palette(void)
{
    static const png_color palette[4] = {{255, 0, 0}, {0, 128, 255}, {10, 20, 30}, {7, 7, 7}};
    static const uint8_t trans[2] = {0, 128}; /* alpha of entries 0 and 1: dropped */
    uint8_t rows[PH * PW], chw[3 * PH * PW], gray[PH * PW];
    for (int i = 0; i < PH * PW; i++) {
        int entry = (i * 3) % 4;
        rows[i] = (uint8_t)entry;
        chw[i] = palette[entry].red;
        chw[PH * PW + i] = palette[entry].green;
        chw[2 * PH * PW + i] = palette[entry].blue;
        gray[i] = luma(palette[entry].red, palette[entry].green, palette[entry].blue);
    }
    const char *path = tmpdir_path("palette.png");
    png_spec spec = {PW, PH, PNG_COLOR_TYPE_PALETTE, 8, false, palette, 4, trans, 2};
    write_png(path, &spec, rows);
    expect_pixels(path, 3, PH, PW, chw, 0);
    expect_pixels(path, 1, PH, PW, gray, 0);
    /* Told by its bytes, not its name. */
    const char *named_jpeg = tmpdir_path("really-a-png.jpg");
    write_png(named_jpeg, &spec, rows);
    expect_pixels(named_jpeg, 3, PH, PW, chw, 0);
}

static void test_resize(void)
{
    /* 2x2 -> 4x4: src = (dst + 0.5) / 2 - 0.5, clamped; by hand (and
     * torch.nn.functional.interpolate gives the same before rounding):
     *    0     25     75    100
     *   50  72.19 116.56 138.75
     *  150 166.56 199.69 216.25
     *  200 213.75 241.25    255 */
    const uint8_t square[4] = {0, 100, 200, 255};
    static const uint8_t up[16] = {0,   25,  75,  100, 50,  72,  117, 139,
                                   150, 167, 200, 216, 200, 214, 241, 255};
    const char *path = tmpdir_path("square.png");
    png_spec spec = {2, 2, PNG_COLOR_TYPE_GRAY, 8, false, NULL, 0, NULL, 0};
    write_png(path, &spec, square);
    expect_pixels(path, 1, 4, 4, up, 0);

    /* 2x2 -> 3x5, against torch's unrounded values (within rounding). */
    static const float torch_3x5[15] = {0,   10,     50,     90,     100,
                                        100, 107.75, 138.75, 169.75, 177.5,
                                        200, 205.5,  227.5,  249.5,  255};
    float out[15];
    CHECK_OK(ct_image_load(path, 1, 3, 5, NULL, NULL, out));
    int wrong = 0;
    for (int i = 0; i < 15; i++)
        wrong += fabsf(out[i] * 255.0f - torch_3x5[i]) > 0.5f + 1e-3f;
    CHECK(wrong == 0, "%d values of the 3x5 resize are off by more than rounding", wrong);

    /* 4x4 -> 2x2 halves exactly: each output is the mean of a 2x2 block. */
    uint8_t ramp[16], half[4];
    for (int i = 0; i < 16; i++)
        ramp[i] = (uint8_t)(i * 10 + 3);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 2; x++)
            half[y * 2 + x] = (uint8_t)((ramp[8 * y + 2 * x] + ramp[8 * y + 2 * x + 1] +
                                         ramp[8 * y + 2 * x + 4] + ramp[8 * y + 2 * x + 5]) /
                                        4);
    png_spec four = {4, 4, PNG_COLOR_TYPE_GRAY, 8, false, NULL, 0, NULL, 0};
    write_png(path, &four, ramp);
    expect_pixels(path, 1, 2, 2, half, 0);
}

static void test_normalization(void)
{
    uint8_t rows[PH * PW * 3];
    for (int i = 0; i < PH * PW * 3; i++)
        rows[i] = (uint8_t)(i * 17);
    const char *path = tmpdir_path("norm.png");
    png_spec spec = {PW, PH, PNG_COLOR_TYPE_RGB, 8, false, NULL, 0, NULL, 0};
    write_png(path, &spec, rows);
    const float mean[3] = {0.5f, 0.4f, 0.3f}, std[3] = {0.2f, 0.25f, 0.3f};
    float out[3 * PH * PW];
    CHECK_OK(ct_image_load(path, 3, PH, PW, mean, std, out));
    int wrong = 0;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < PH * PW; i++)
            wrong += out[c * PH * PW + i] != ((float)rows[3 * i + c] / 255.0f - mean[c]) / std[c];
    CHECK(wrong == 0, "%d normalized values differ", wrong);
}

static void test_png_corrupt(void)
{
    uint8_t rows[PH * PW * 3];
    for (int i = 0; i < PH * PW * 3; i++)
        rows[i] = (uint8_t)(i * 37);
    const char *good = tmpdir_path("good.png");
    png_spec spec = {PW, PH, PNG_COLOR_TYPE_RGB, 8, false, NULL, 0, NULL, 0};
    write_png(good, &spec, rows);
    size_t n = read_file(good, file_bytes);
    const char *bad = tmpdir_path("bad.png");

    /* Every truncation is refused as a format error. */
    int accepted = 0, other = 0;
    float out[3 * 4 * 4];
    for (size_t length = 0; length < n; length++) {
        tmpdir_write(bad, file_bytes, length);
        ct_status status = ct_image_load(bad, 3, 4, 4, NULL, NULL, out);
        accepted += status == CT_OK;
        other += status != CT_OK && status != CT_ERR_FORMAT;
    }
    CHECK(accepted == 0 && other == 0, "of %zu truncated PNGs, %d accepted, %d not FORMAT", n,
          accepted, other);
    tmpdir_write(bad, file_bytes, n - 20);
    expect_refused(bad, CT_ERR_FORMAT, bad, "libpng says");

    /* Damage inside the image data: the CRC (or zlib) catches it. */
    for (size_t i = 45; i < 55 && i < n; i++)
        file_bytes[i] ^= 0x5a;
    tmpdir_write(bad, file_bytes, n);
    expect_refused(bad, CT_ERR_FORMAT, bad, "corrupt PNG");
}
#endif

/* ---- JPEG ------------------------------------------------------------------------ */

#ifdef CT_HAVE_JPEG
static void write_jpeg(const char *path, int width, int height, int components,
                       const uint8_t *rows, int quality)
{
    struct jpeg_compress_struct encoder;
    struct jpeg_error_mgr errors;
    encoder.err = jpeg_std_error(&errors);
    jpeg_create_compress(&encoder);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "test_image: cannot write %s\n", path);
        exit(1);
    }
    jpeg_stdio_dest(&encoder, f);
    encoder.image_width = (JDIMENSION)width;
    encoder.image_height = (JDIMENSION)height;
    encoder.input_components = components;
    encoder.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&encoder);
    jpeg_set_quality(&encoder, quality, TRUE);
    encoder.comp_info[0].h_samp_factor = encoder.comp_info[0].v_samp_factor = 1; /* 4:4:4 */
    jpeg_start_compress(&encoder, TRUE);
    while (encoder.next_scanline < encoder.image_height) {
        JSAMPROW row = (JSAMPROW)rows + (size_t)encoder.next_scanline * (size_t)width *
                                            (size_t)components;
        jpeg_write_scanlines(&encoder, &row, 1);
    }
    jpeg_finish_compress(&encoder);
    jpeg_destroy_compress(&encoder);
    fclose(f);
}

/* A smooth RGB picture (JPEG's loss is small on it) in rows and [C,H,W]. */
static void smooth_picture(uint8_t *rows, uint8_t *chw, uint8_t *gray)
{
    const int plane = JPEG_SIDE * JPEG_SIDE;
    for (int y = 0; y < JPEG_SIDE; y++)
        for (int x = 0; x < JPEG_SIDE; x++) {
            int i = y * JPEG_SIDE + x;
            uint8_t rgb[3] = {(uint8_t)(40 + 10 * x), (uint8_t)(30 + 8 * y),
                              (uint8_t)(200 - 5 * (x + y))};
            for (int c = 0; c < 3; c++)
                rows[3 * i + c] = chw[c * plane + i] = rgb[c];
            gray[i] = luma(rgb[0], rgb[1], rgb[2]);
        }
}

static void test_jpeg(void)
{
    static uint8_t rows[3 * JPEG_SIDE * JPEG_SIDE], chw[3 * JPEG_SIDE * JPEG_SIDE],
        gray[JPEG_SIDE * JPEG_SIDE];
    smooth_picture(rows, chw, gray);
    const char *path = tmpdir_path("smooth.jpg");
    write_jpeg(path, JPEG_SIDE, JPEG_SIDE, 3, rows, 100);
    expect_pixels(path, 3, JPEG_SIDE, JPEG_SIDE, chw, JPEG_TOLERANCE);
    expect_pixels(path, 1, JPEG_SIDE, JPEG_SIDE, gray, JPEG_TOLERANCE);

    const char *gray_path = tmpdir_path("gray.jpeg");
    write_jpeg(gray_path, JPEG_SIDE, JPEG_SIDE, 1, gray, 100);
    expect_pixels(gray_path, 1, JPEG_SIDE, JPEG_SIDE, gray, JPEG_TOLERANCE);
    static uint8_t gray3[3 * JPEG_SIDE * JPEG_SIDE];
    for (int c = 0; c < 3; c++)
        memcpy(gray3 + c * JPEG_SIDE * JPEG_SIDE, gray, JPEG_SIDE * JPEG_SIDE);
    expect_pixels(gray_path, 3, JPEG_SIDE, JPEG_SIDE, gray3, JPEG_TOLERANCE);
}

static void test_jpeg_corrupt(void)
{
    static uint8_t rows[3 * JPEG_SIDE * JPEG_SIDE], chw[3 * JPEG_SIDE * JPEG_SIDE],
        gray[JPEG_SIDE * JPEG_SIDE];
    smooth_picture(rows, chw, gray);
    const char *good = tmpdir_path("good.jpg");
    write_jpeg(good, JPEG_SIDE, JPEG_SIDE, 3, rows, 90);
    size_t n = read_file(good, file_bytes);
    const char *bad = tmpdir_path("bad.jpg");

    int accepted = 0, other = 0;
    float out[3 * 4 * 4];
    for (size_t length = 0; length < n; length++) {
        tmpdir_write(bad, file_bytes, length);
        ct_status status = ct_image_load(bad, 3, 4, 4, NULL, NULL, out);
        accepted += status == CT_OK;
        other += status != CT_OK && status != CT_ERR_FORMAT;
    }
    CHECK(accepted == 0 && other == 0, "of %zu truncated JPEGs, %d accepted, %d not FORMAT", n,
          accepted, other);
    tmpdir_write(bad, file_bytes, n / 2);
    expect_refused(bad, CT_ERR_FORMAT, bad, "libjpeg says");

    /* Garbage where the markers should be. */
    memset(file_bytes + 6, 0x00, 24);
    tmpdir_write(bad, file_bytes, n);
    expect_refused(bad, CT_ERR_FORMAT, bad, "corrupt JPEG");
}
#endif

/* Without the libraries, files of their kind are refused with what to do. */
static void test_unsupported_without_libraries(void)
{
#ifndef CT_HAVE_PNG
    static const uint8_t png_head[16] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    const char *png = tmpdir_path("x.png");
    tmpdir_write(png, png_head, sizeof png_head);
    expect_refused(png, CT_ERR_UNSUPPORTED, png, "rebuild with libpng-dev");
#endif
#ifndef CT_HAVE_JPEG
    static const uint8_t jpeg_head[16] = {0xff, 0xd8, 0xff, 0xe0};
    const char *jpeg = tmpdir_path("x.jpg");
    tmpdir_write(jpeg, jpeg_head, sizeof jpeg_head);
    expect_refused(jpeg, CT_ERR_UNSUPPORTED, jpeg, "rebuild with libjpeg-dev");
#endif
}

int main(void)
{
    tmpdir_create("test_image");
    RUN(test_not_an_image);
    RUN(test_unsupported_without_libraries);
#ifdef CT_HAVE_PNG
    RUN(test_png_gray);
    RUN(test_png_rgb_and_rgba);
    RUN(test_png_palette);
    RUN(test_resize);
    RUN(test_normalization);
    RUN(test_png_corrupt);
#else
    printf("skipped: built without libpng\n");
#endif
#ifdef CT_HAVE_JPEG
    RUN(test_jpeg);
    RUN(test_jpeg_corrupt);
#else
    printf("skipped: built without libjpeg\n");
#endif
    tmpdir_remove();
    return harness_finish();
}
