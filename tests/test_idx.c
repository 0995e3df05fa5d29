/*
 * IDX datasets: small files written here (raw and gzipped) load back
 * exactly; every kind of bad file is refused with a message that names the
 * file and the problem; the real Fashion-MNIST test split loads when
 * Debian's dataset-fashion-mnist is installed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef CT_HAVE_ZLIB
#include <zlib.h>
#endif

#include "cuttle.h"
#include "harness.h"

#define MAGIC_IMAGES 0x00000803u
#define MAGIC_LABELS 0x00000801u
#define N_ITEMS 5
#define ROWS 3
#define COLS 4
#define N_CLASSES 10
#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define MAX_TMP_FILES 64
#define MAX_FILE_BYTES 4096

static char tmp_dir[64];
static char tmp_files[MAX_TMP_FILES][128];
static int n_tmp_files;

/* A path in the temporary directory, remembered for the cleanup. */
static const char *tmp_path(const char *name)
{
    for (int i = 0; i < n_tmp_files; i++)
        if (strcmp(strrchr(tmp_files[i], '/') + 1, name) == 0)
            return tmp_files[i];
    if (n_tmp_files == MAX_TMP_FILES) {
        fprintf(stderr, "test_idx: too many temporary files\n");
        exit(1);
    }
    snprintf(tmp_files[n_tmp_files], sizeof tmp_files[0], "%s/%s", tmp_dir, name);
    return tmp_files[n_tmp_files++];
}

static void put_u32(uint8_t *at, uint32_t value)
{
    at[0] = (uint8_t)(value >> 24);
    at[1] = (uint8_t)(value >> 16);
    at[2] = (uint8_t)(value >> 8);
    at[3] = (uint8_t)value;
}

static void write_bytes(const char *path, const uint8_t *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "test_idx: cannot write %s\n", path);
        exit(1);
    }
}

#ifdef CT_HAVE_ZLIB
static void write_gzip(const char *path, const uint8_t *bytes, size_t n)
{
    gzFile f = gzopen(path, "wb");
    if (!f || gzwrite(f, bytes, (unsigned)n) != (int)n || gzclose(f) != Z_OK) {
        fprintf(stderr, "test_idx: cannot write %s\n", path);
        exit(1);
    }
}

static size_t read_bytes(const char *path, uint8_t *bytes, size_t capacity)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(bytes, 1, capacity, f) : 0;
    if (f)
        fclose(f);
    return n;
}
#endif

/* The image file's bytes: header (magic, n, rows, cols), then pixel
 * (i*31 + r*7 + c*13) % 256 of image i at (r, c). */
static size_t image_file(uint8_t *out, uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols,
                         size_t data_items)
{
    put_u32(out, magic);
    put_u32(out + 4, n);
    put_u32(out + 8, rows);
    put_u32(out + 12, cols);
    size_t size = 16;
    for (size_t i = 0; i < data_items; i++)
        for (uint32_t r = 0; r < ROWS; r++)
            for (uint32_t c = 0; c < COLS; c++)
                out[size++] = (uint8_t)((i * 31 + r * 7 + c * 13) % 256);
    return size;
}

/* The label file's bytes: header (magic, n), then label (i*3) % 10. */
static size_t label_file(uint8_t *out, uint32_t magic, uint32_t n, size_t data_items)
{
    put_u32(out, magic);
    put_u32(out + 4, n);
    for (size_t i = 0; i < data_items; i++)
        out[8 + i] = (uint8_t)(i * 3 % N_CLASSES);
    return 8 + data_items;
}

static const char *good_images(void)
{
    uint8_t bytes[MAX_FILE_BYTES];
    const char *path = tmp_path("good-images");
    write_bytes(path, bytes, image_file(bytes, MAGIC_IMAGES, N_ITEMS, ROWS, COLS, N_ITEMS));
    return path;
}

static const char *good_labels(void)
{
    uint8_t bytes[MAX_FILE_BYTES];
    const char *path = tmp_path("good-labels");
    write_bytes(path, bytes, label_file(bytes, MAGIC_LABELS, N_ITEMS, N_ITEMS));
    return path;
}

/* Load and expect failure with `status` and each of the needles in the message. */
static void expect_refused(const char *images, const char *labels, ct_status status,
                           const char *needle1, const char *needle2)
{
    ct_dataset *ds = (ct_dataset *)&ds; /* poison: must become NULL */
    ct_status got = ct_dataset_load_idx(images, labels, N_CLASSES, &ds);
    const char *message = ct_last_error();
    CHECK(got == status, "expected %s, got %s: %s", ct_status_name(status), ct_status_name(got),
          message);
    CHECK(ds == NULL, "*out must be NULL on failure");
    CHECK(strstr(message, needle1), "message '%s' lacks '%s'", message, needle1);
    CHECK(!needle2 || strstr(message, needle2), "message '%s' lacks '%s'", message, needle2);
    if (got == CT_OK)
        ct_dataset_free(ds);
}

/* Every pixel and label of a loaded dataset against the generator above. */
static void check_contents(const ct_dataset *ds, float mean, float std)
{
    CHECK(ct_dataset_size(ds) == N_ITEMS, "size %lld", (long long)ct_dataset_size(ds));
    CHECK(ct_dataset_channels(ds) == 1 && ct_dataset_height(ds) == ROWS &&
              ct_dataset_width(ds) == COLS,
          "shape %dx%dx%d", ct_dataset_channels(ds), ct_dataset_height(ds),
          ct_dataset_width(ds));
    CHECK(ct_dataset_classes(ds) == N_CLASSES, "classes %d", ct_dataset_classes(ds));
    int64_t indices[N_ITEMS] = {4, 0, 2, 2, 1}, labels[N_ITEMS];
    float images[N_ITEMS * ROWS * COLS];
    CHECK_OK(ct_dataset_batch(ds, indices, N_ITEMS, images, labels));
    int wrong = 0;
    for (int b = 0; b < N_ITEMS; b++) {
        int64_t i = indices[b];
        wrong += labels[b] != i * 3 % N_CLASSES;
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) {
                float byte = (float)((i * 31 + r * 7 + c * 13) % 256);
                float want = (byte / 255.0f - mean) / std;
                wrong += fabsf(images[(b * ROWS + r) * COLS + c] - want) > 1e-5f;
            }
    }
    CHECK(wrong == 0, "%d pixels or labels differ", wrong);
}

static void test_round_trip_raw(void)
{
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load_idx(good_images(), good_labels(), N_CLASSES, &ds));
    if (!ds)
        return;
    check_contents(ds, 0.0f, 1.0f);
    CHECK(strcmp(ct_dataset_class_name(ds, 7), "7") == 0, "class 7 is '%s'",
          ct_dataset_class_name(ds, 7));
    CHECK(ct_dataset_class_name(ds, N_CLASSES) == NULL && ct_dataset_class_name(ds, -1) == NULL,
          "out-of-range class names must be NULL");
    int64_t bad_index = N_ITEMS;
    float image[ROWS * COLS];
    CHECK(ct_dataset_batch(ds, &bad_index, 1, image, NULL) == CT_ERR_ARG &&
              strstr(ct_last_error(), "out of range"),
          "index past the end: %s", ct_last_error());
    ct_dataset_free(ds);
    ct_dataset_free(NULL);
}

/* The four files of a split under their usual names in `dir`, gzipped or not. */
static void write_split(const char *prefix, bool gzipped)
{
    uint8_t images[MAX_FILE_BYTES], labels[MAX_FILE_BYTES];
    size_t n_images = image_file(images, MAGIC_IMAGES, N_ITEMS, ROWS, COLS, N_ITEMS);
    size_t n_labels = label_file(labels, MAGIC_LABELS, N_ITEMS, N_ITEMS);
    char images_name[64], labels_name[64];
    snprintf(images_name, sizeof images_name, "%s-images-idx3-ubyte%s", prefix,
             gzipped ? ".gz" : "");
    snprintf(labels_name, sizeof labels_name, "%s-labels-idx1-ubyte%s", prefix,
             gzipped ? ".gz" : "");
#ifdef CT_HAVE_ZLIB
    if (gzipped) {
        write_gzip(tmp_path(images_name), images, n_images);
        write_gzip(tmp_path(labels_name), labels, n_labels);
        return;
    }
#endif
    write_bytes(tmp_path(images_name), images, n_images);
    write_bytes(tmp_path(labels_name), labels, n_labels);
}

static void test_known_datasets(void)
{
    write_split("train", false);
#ifdef CT_HAVE_ZLIB
    write_split("t10k", true);
#else
    write_split("t10k", false);
#endif
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load("mnist", tmp_dir, "train", &ds));
    if (ds)
        check_contents(ds, 0.1307f, 0.3081f);
    ct_dataset_free(ds);
    ds = NULL;
    CHECK_OK(ct_dataset_load("fashion-mnist", tmp_dir, "test", &ds));
    if (ds) {
        check_contents(ds, 0.2860f, 0.3530f);
        CHECK(strcmp(ct_dataset_class_name(ds, 0), "T-shirt/top") == 0 &&
                  strcmp(ct_dataset_class_name(ds, 9), "Ankle boot") == 0,
              "class names '%s', '%s'", ct_dataset_class_name(ds, 0),
              ct_dataset_class_name(ds, 9));
    }
    ct_dataset_free(ds);

    ds = (ct_dataset *)&ds;
    CHECK(ct_dataset_load("cifar-10", tmp_dir, "train", &ds) == CT_ERR_ARG && !ds &&
              strstr(ct_last_error(), "cifar-10"),
          "unknown dataset: %s", ct_last_error());
    CHECK(ct_dataset_load("mnist", tmp_dir, "validation", &ds) == CT_ERR_ARG &&
              strstr(ct_last_error(), "validation"),
          "unknown split: %s", ct_last_error());
    CHECK(ct_dataset_load("mnist", NULL, "train", &ds) == CT_ERR_ARG &&
              strstr(ct_last_error(), "--data-dir"),
          "mnist has no default location: %s", ct_last_error());
}

static void test_gzip(void)
{
    uint8_t bytes[MAX_FILE_BYTES];
    size_t n = image_file(bytes, MAGIC_IMAGES, N_ITEMS, ROWS, COLS, N_ITEMS);
#ifdef CT_HAVE_ZLIB
    const char *gz = tmp_path("images.gz");
    write_gzip(gz, bytes, n);
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load_idx(gz, good_labels(), N_CLASSES, &ds));
    if (ds)
        check_contents(ds, 0.0f, 1.0f);
    ct_dataset_free(ds);

    /* Compressed twice: what comes out of gzip is a gzip file. */
    uint8_t once[MAX_FILE_BYTES];
    size_t n_once = read_bytes(gz, once, sizeof once);
    const char *twice = tmp_path("images.gz.gz");
    write_gzip(twice, once, n_once);
    expect_refused(twice, good_labels(), CT_ERR_FORMAT, "got 0x1f8b08", "still gzipped");

    /* A damaged deflate stream: flip bytes in the middle of the data. */
    uint8_t damaged[MAX_FILE_BYTES];
    memcpy(damaged, once, n_once);
    for (size_t i = 12; i < n_once - 8; i += 3)
        damaged[i] ^= 0x5a;
    const char *broken = tmp_path("broken.gz");
    write_bytes(broken, damaged, n_once);
    ct_dataset *out = NULL;
    ct_status status = ct_dataset_load_idx(broken, good_labels(), N_CLASSES, &out);
    CHECK(status != CT_OK && out == NULL && strstr(ct_last_error(), broken),
          "a damaged gzip file must be refused: %s", ct_last_error());
#else
    /* Without zlib a gzipped file is refused with what to do. */
    uint8_t gz_like[MAX_FILE_BYTES] = {0x1f, 0x8b, 0x08, 0x08};
    memcpy(gz_like + 4, bytes + 4, n - 4);
    const char *gz = tmp_path("images.gz");
    write_bytes(gz, gz_like, n);
    expect_refused(gz, good_labels(), CT_ERR_FORMAT, "still gzipped", "gunzip");
#endif
}

static void test_missing_files(void)
{
    const char *missing = tmp_path("no-such-file");
    expect_refused(missing, good_labels(), CT_ERR_IO, missing, "No such file");
    expect_refused(good_images(), missing, CT_ERR_IO, missing, "No such file");
    expect_refused(tmp_dir, good_labels(), CT_ERR_IO, tmp_dir, "directory");

    const char *empty_dir = tmp_path("empty");
    if (mkdir(empty_dir, 0700) != 0) {
        CHECK(false, "cannot create %s", empty_dir);
        return;
    }
    ct_dataset *ds = NULL;
    CHECK(ct_dataset_load("fashion-mnist", empty_dir, "train", &ds) == CT_ERR_IO && !ds,
          "an empty directory must fail with CT_ERR_IO");
    const char *message = ct_last_error();
    CHECK(strstr(message, empty_dir) && strstr(message, "train-images-idx3-ubyte.gz"),
          "the message must name the missing file: %s", message);

    struct stat info;
    if (stat(FASHION_DIR, &info) != 0) {
        CHECK(ct_dataset_load("fashion-mnist", NULL, "train", &ds) == CT_ERR_IO &&
                  strstr(ct_last_error(), "apt-get install dataset-fashion-mnist") &&
                  strstr(ct_last_error(), "--data-dir"),
              "the default location must say how to install it: %s", ct_last_error());
    }
}

static void test_bad_headers(void)
{
    uint8_t bytes[MAX_FILE_BYTES];
    const char *path = tmp_path("bad-images");
    const char *labels = good_labels();

    write_bytes(path, bytes, image_file(bytes, 0x12345678u, N_ITEMS, ROWS, COLS, N_ITEMS));
    expect_refused(path, labels, CT_ERR_FORMAT, "expected IDX magic 0x00000803", "0x12345678");
    /* The two files swapped. */
    expect_refused(labels, good_images(), CT_ERR_FORMAT, "got 0x00000801", "swapped");

    write_bytes(path, bytes, image_file(bytes, MAGIC_IMAGES, N_ITEMS, 0, COLS, 0));
    expect_refused(path, labels, CT_ERR_FORMAT, "0x4 pixels", path);
    write_bytes(path, bytes, image_file(bytes, MAGIC_IMAGES, N_ITEMS, 100000, COLS, 0));
    expect_refused(path, labels, CT_ERR_FORMAT, "100000x4 pixels", "corrupt");
    write_bytes(path, bytes, image_file(bytes, MAGIC_IMAGES, 0, ROWS, COLS, 0));
    expect_refused(path, labels, CT_ERR_FORMAT, "no images", path);
    write_bytes(path, bytes, image_file(bytes, MAGIC_IMAGES, 0xffffffffu, ROWS, COLS, 0));
    expect_refused(path, labels, CT_ERR_FORMAT, "4294967295 images", "corrupt");
    /* A header that promises a lot more than the file holds. */
    write_bytes(path, bytes, image_file(bytes, MAGIC_IMAGES, 1u << 27, 4096, 4096, 2));
    expect_refused(path, labels, CT_ERR_FORMAT, "truncated", path);
}

static void test_truncated_and_extra(void)
{
    uint8_t bytes[MAX_FILE_BYTES];
    const char *path = tmp_path("short-images");
    const char *labels = good_labels();
    size_t full = image_file(bytes, MAGIC_IMAGES, N_ITEMS, ROWS, COLS, N_ITEMS);
    write_bytes(path, bytes, full - 1);
    expect_refused(path, labels, CT_ERR_FORMAT, "truncated", "5 images of 3x4");

    /* Every shorter prefix of a good file is refused, none crashes. */
    int accepted = 0;
    for (size_t length = 0; length < full; length++) {
        write_bytes(path, bytes, length);
        ct_dataset *ds = NULL;
        if (ct_dataset_load_idx(path, labels, N_CLASSES, &ds) == CT_OK || ds)
            accepted++;
        ct_dataset_free(ds);
    }
    CHECK(accepted == 0, "%d truncated image files were accepted", accepted);

    size_t n_labels = label_file(bytes, MAGIC_LABELS, N_ITEMS, N_ITEMS);
    for (size_t length = 0; length < n_labels; length++) {
        write_bytes(path, bytes, length);
        ct_dataset *ds = NULL;
        if (ct_dataset_load_idx(good_images(), path, N_CLASSES, &ds) == CT_OK || ds)
            accepted++;
        ct_dataset_free(ds);
    }
    CHECK(accepted == 0, "%d truncated label files were accepted", accepted);

    full = image_file(bytes, MAGIC_IMAGES, N_ITEMS - 1, ROWS, COLS, N_ITEMS);
    write_bytes(path, bytes, full);
    expect_refused(path, labels, CT_ERR_FORMAT, "data past", path);
}

static void test_bad_labels(void)
{
    uint8_t bytes[MAX_FILE_BYTES];
    const char *path = tmp_path("bad-labels");
    const char *images = good_images();

    write_bytes(path, bytes, label_file(bytes, MAGIC_LABELS, N_ITEMS - 1, N_ITEMS - 1));
    expect_refused(images, path, CT_ERR_FORMAT, "4 labels", "5 images");

    size_t n = label_file(bytes, MAGIC_LABELS, N_ITEMS, N_ITEMS);
    bytes[8 + 2] = N_CLASSES; /* item 2 */
    write_bytes(path, bytes, n);
    expect_refused(images, path, CT_ERR_FORMAT, "label 10 of item 2", "out of range");

    write_bytes(path, bytes, label_file(bytes, MAGIC_IMAGES, N_ITEMS, N_ITEMS));
    expect_refused(images, path, CT_ERR_FORMAT, "expected IDX magic 0x00000801", path);
}

static void test_bad_arguments(void)
{
    ct_dataset *ds = NULL;
    CHECK(ct_dataset_load_idx(good_images(), good_labels(), 0, &ds) == CT_ERR_ARG && !ds,
          "0 classes");
    CHECK(ct_dataset_load_idx(good_images(), good_labels(), 257, &ds) == CT_ERR_ARG && !ds,
          "257 classes");
    CHECK(ct_dataset_load_idx(NULL, good_labels(), N_CLASSES, &ds) == CT_ERR_ARG && !ds,
          "NULL path");
    CHECK(ct_dataset_load_idx(good_images(), good_labels(), N_CLASSES, NULL) == CT_ERR_ARG,
          "NULL out");
    CHECK(ct_dataset_batch(NULL, NULL, 1, NULL, NULL) == CT_ERR_ARG, "NULL dataset");
    CHECK(ct_dataset_size(NULL) == 0 && ct_dataset_class_name(NULL, 0) == NULL,
          "NULL accessors");
}

static void test_real_fashion_mnist(void)
{
    struct stat info;
    if (stat(FASHION_DIR, &info) != 0) {
        fprintf(stderr, "note: %s not found (apt-get install dataset-fashion-mnist): "
                        "skipping the real test split\n",
                FASHION_DIR);
        return;
    }
#ifndef CT_HAVE_ZLIB
    fprintf(stderr, "note: this build has no zlib and %s holds .gz files: skipping the real "
                    "test split\n",
            FASHION_DIR);
    return;
#endif
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load("fashion-mnist", NULL, "test", &ds));
    if (!ds)
        return;
    CHECK(ct_dataset_size(ds) == 10000, "size %lld", (long long)ct_dataset_size(ds));
    CHECK(ct_dataset_height(ds) == 28 && ct_dataset_width(ds) == 28 &&
              ct_dataset_channels(ds) == 1,
          "shape %dx%dx%d", ct_dataset_channels(ds), ct_dataset_height(ds),
          ct_dataset_width(ds));
    enum { N = 10000, PIXELS = 28 * 28 };
    static int64_t indices[N], labels[N];
    static float images[(size_t)N * PIXELS];
    for (int i = 0; i < N; i++)
        indices[i] = i;
    CHECK_OK(ct_dataset_batch(ds, indices, N, images, labels));
    int counts[N_CLASSES] = {0};
    int out_of_range = 0;
    for (int i = 0; i < N; i++) {
        if (labels[i] < 0 || labels[i] >= N_CLASSES)
            out_of_range++;
        else
            counts[labels[i]]++;
    }
    CHECK(out_of_range == 0, "%d labels out of range", out_of_range);
    for (int c = 0; c < N_CLASSES; c++)
        CHECK(counts[c] == 1000, "class %d has %d test images, not 1000", c, counts[c]);
    double sum = 0, sum_sq = 0;
    for (size_t i = 0; i < (size_t)N * PIXELS; i++) {
        sum += images[i];
        sum_sq += (double)images[i] * images[i];
    }
    double mean = sum / ((double)N * PIXELS);
    double std = sqrt(sum_sq / ((double)N * PIXELS) - mean * mean);
    CHECK(fabs(mean) < 0.05 && fabs(std - 1.0) < 0.05,
          "normalized test pixels have mean %.3f std %.3f (want ~0, ~1)", mean, std);
    ct_dataset_free(ds);
}

int main(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/cuttle_test_idx_XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        fprintf(stderr, "test_idx: mkdtemp failed\n");
        return 1;
    }
    RUN(test_round_trip_raw);
    RUN(test_known_datasets);
    RUN(test_gzip);
    RUN(test_missing_files);
    RUN(test_bad_headers);
    RUN(test_truncated_and_extra);
    RUN(test_bad_labels);
    RUN(test_bad_arguments);
    RUN(test_real_fashion_mnist);
    for (int i = n_tmp_files - 1; i >= 0; i--)
        remove(tmp_files[i]);
    rmdir(tmp_dir);
    return harness_finish();
}
