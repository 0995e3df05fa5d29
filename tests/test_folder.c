/*
 * Image folder datasets built here from small PNGs: given train/ and test/
 * splits, a seeded split that is deterministic and disjoint, the training
 * split's normalization used by both, resizing and channel conversion, and
 * the errors (empty folder, class without images, an image that does not
 * decode, named).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CT_HAVE_PNG
#include <png.h>
#endif

#include "cuttle.h"
#include "harness.h"
#include "tmpdir.h"

#define H 4
#define W 6
#define PLANE (H * W)
#define MAX_ITEMS 64

#ifdef CT_HAVE_PNG
/* Byte (c, y, x) of image `id`; byte (0, 0, 0) = id * 37 % 256 tells the
 * image (37 is odd, so ids below 256 differ). */
static uint8_t value(int id, int c, int y, int x)
{
    return (uint8_t)((id * 37 + c * 11 + y * 5 + x * 3 + (c == 0 && y == 0 && x == 0 ? 0 : 1)) %
                     256);
}

static int id_of(uint8_t first_byte)
{
    for (int id = 0; id < 256; id++)
        if ((uint8_t)(id * 37 % 256) == first_byte)
            return id;
    return -1;
}

/* An RGB (or gray) PNG of image `id` at height x width. */
static void write_image(const char *path, int id, int channels, int height, int width)
{
    static uint8_t pixels[3 * 64 * 64];
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++)
            for (int c = 0; c < channels; c++)
                pixels[(y * width + x) * channels + c] = value(id, c, y, x);
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    image.width = (png_uint_32)width;
    image.height = (png_uint_32)height;
    image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", path);
    *strrchr(parent, '/') = '\0';
    tmpdir_mkdirs(parent);
    if (!png_image_write_to_file(&image, path, 0, pixels, 0, NULL)) {
        fprintf(stderr, "test_folder: cannot write %s: %s\n", path, image.message);
        exit(1);
    }
}

/* Items of ds back as bytes [n, 3, H, W] and labels, undoing the normalization. */
static int64_t read_back(const ct_dataset *ds, uint8_t *bytes, int64_t *labels)
{
    int64_t n = ct_dataset_size(ds);
    static float images[MAX_ITEMS * 3 * PLANE];
    int64_t indices[MAX_ITEMS];
    for (int64_t i = 0; i < n && i < MAX_ITEMS; i++)
        indices[i] = i;
    CHECK(n <= MAX_ITEMS, "%lld items", (long long)n);
    CHECK_OK(ct_dataset_batch(ds, indices, (int)n, images, labels));
    int channels = ct_dataset_channels(ds);
    size_t plane = (size_t)ct_dataset_height(ds) * (size_t)ct_dataset_width(ds);
    for (int64_t i = 0; i < n * channels * (int64_t)plane; i++) {
        int c = (int)(i / (int64_t)plane % channels);
        float x = images[i] * ct_dataset_std(ds, c) + ct_dataset_mean(ds, c);
        bytes[i] = (uint8_t)lrintf(x * 255.0f);
    }
    return n;
}

static void expect_refused(const char *dir, const char *split, const ct_folder_args *args,
                           ct_status status, const char *needle1, const char *needle2)
{
    ct_dataset *ds = (ct_dataset *)&ds; /* poison: must become NULL */
    ct_status got = ct_dataset_load_folder(dir, split, args, &ds);
    const char *message = ct_last_error();
    CHECK(got == status, "expected %s, got %s: %s", ct_status_name(status), ct_status_name(got),
          message);
    CHECK(ds == NULL, "*out must be NULL on failure");
    CHECK(strstr(message, needle1), "message '%s' lacks '%s'", message, needle1);
    CHECK(!needle2 || strstr(message, needle2), "message '%s' lacks '%s'", message, needle2);
    if (got == CT_OK)
        ct_dataset_free(ds);
}

/* train/{cat: 0 1 2, dog: 3 4} and test/{cat: 5, dog: 6 7}, plus files to skip. */
static void test_given_splits(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tmpdir_path("given"));
    write_image(tmpdir_path("given/train/cat/b.png"), 1, 3, H, W);
    write_image(tmpdir_path("given/train/cat/a.png"), 0, 3, H, W);
    write_image(tmpdir_path("given/train/cat/c.PNG"), 2, 3, H, W);
    write_image(tmpdir_path("given/train/dog/x.png"), 3, 3, H, W);
    write_image(tmpdir_path("given/train/dog/y.png"), 4, 3, H, W);
    write_image(tmpdir_path("given/test/cat/t.png"), 5, 3, H, W);
    write_image(tmpdir_path("given/test/dog/u.png"), 6, 3, H, W);
    write_image(tmpdir_path("given/test/dog/v.png"), 7, 3, H, W);
    tmpdir_write(tmpdir_path("given/train/cat/notes.txt"), "skip me", 7);
    tmpdir_write(tmpdir_path("given/train/dog/.hidden.png"), "skip me", 7);

    ct_dataset *train = NULL, *test = NULL;
    CHECK_OK(ct_dataset_load_folder(dir, "train", NULL, &train));
    CHECK_OK(ct_dataset_load("folder", dir, "test", &test));
    if (!train || !test) {
        ct_dataset_free(train);
        ct_dataset_free(test);
        return;
    }
    CHECK(ct_dataset_size(train) == 5 && ct_dataset_size(test) == 3, "sizes %lld, %lld",
          (long long)ct_dataset_size(train), (long long)ct_dataset_size(test));
    CHECK(ct_dataset_classes(train) == 2 && strcmp(ct_dataset_class_name(train, 0), "cat") == 0 &&
              strcmp(ct_dataset_class_name(train, 1), "dog") == 0,
          "classes %d: %s, %s", ct_dataset_classes(train), ct_dataset_class_name(train, 0),
          ct_dataset_class_name(train, 1));
    CHECK(ct_dataset_channels(train) == 3 && ct_dataset_height(train) == H &&
              ct_dataset_width(train) == W,
          "shape %dx%dx%d", ct_dataset_channels(train), ct_dataset_height(train),
          ct_dataset_width(train));

    /* Items in class order, then name order; every byte as written. */
    static uint8_t bytes[MAX_ITEMS * 3 * PLANE];
    int64_t labels[MAX_ITEMS];
    static const int train_ids[5] = {0, 1, 2, 3, 4}, train_labels[5] = {0, 0, 0, 1, 1};
    int64_t n = read_back(train, bytes, labels);
    int wrong = 0;
    for (int64_t i = 0; i < n && i < 5; i++) {
        wrong += labels[i] != train_labels[i];
        for (int c = 0; c < 3; c++)
            for (int p = 0; p < PLANE; p++)
                wrong += bytes[(i * 3 + c) * PLANE + p] != value(train_ids[i], c, p / W, p % W);
    }
    CHECK(wrong == 0, "%d training bytes or labels differ", wrong);
    static const int test_ids[3] = {5, 6, 7}, test_labels[3] = {0, 1, 1};
    n = read_back(test, bytes, labels);
    for (int64_t i = 0; i < n && i < 3; i++)
        wrong += labels[i] != test_labels[i] || id_of(bytes[i * 3 * PLANE]) != test_ids[i];
    CHECK(wrong == 0, "%d test items differ", wrong);

    /* Normalization: the training split's statistics, in both splits. */
    for (int c = 0; c < 3; c++) {
        double sum = 0, squares = 0;
        for (int id = 0; id < 5; id++)
            for (int p = 0; p < PLANE; p++) {
                double x = value(id, c, p / W, p % W) / 255.0;
                sum += x;
                squares += x * x;
            }
        double mean = sum / (5 * PLANE), std = sqrt(squares / (5 * PLANE) - mean * mean);
        CHECK(fabs(ct_dataset_mean(train, c) - mean) < 1e-6 &&
                  fabs(ct_dataset_std(train, c) - std) < 1e-6,
              "channel %d: mean %g std %g, expected %g %g", c, (double)ct_dataset_mean(train, c),
              (double)ct_dataset_std(train, c), mean, std);
        CHECK(ct_dataset_mean(test, c) == ct_dataset_mean(train, c) &&
                  ct_dataset_std(test, c) == ct_dataset_std(train, c),
              "the test split must use the training statistics (channel %d)", c);
    }
    ct_dataset_free(train);
    ct_dataset_free(test);

    write_image(tmpdir_path("given/test/bird/z.png"), 8, 3, H, W);
    expect_refused(dir, "test", NULL, CT_ERR_FORMAT, "bird", "training split lacks");
}

/* Image ids of a split, by class; returns the count. */
static int64_t split_ids(const char *dir, const char *split, const ct_folder_args *args,
                         int *ids, int64_t *labels)
{
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load_folder(dir, split, args, &ds));
    if (!ds)
        return 0;
    static uint8_t bytes[MAX_ITEMS * 3 * PLANE];
    int64_t n = read_back(ds, bytes, labels);
    for (int64_t i = 0; i < n; i++)
        ids[i] = id_of(bytes[i * 3 * PLANE]);
    ct_dataset_free(ds);
    return n;
}

/* a: 10 images (ids 0-9), b: 7 (10-16), c: 1 (17); file names in id order. */
static void test_seeded_split(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tmpdir_path("seeded"));
    static const int counts[3] = {10, 7, 1};
    static const char *const classes[3] = {"a", "b", "c"};
    int id = 0;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < counts[c]; i++, id++)
            write_image(tmpdir_path("seeded/%s/img%02d.png", classes[c], i), id, 3, H, W);

    ct_folder_args args = {.test_fraction = 0.3, .seed = 7};
    int train[MAX_ITEMS], test[MAX_ITEMS], again[MAX_ITEMS];
    int64_t train_labels[MAX_ITEMS], test_labels[MAX_ITEMS];
    int64_t n_train = split_ids(dir, "train", &args, train, train_labels);
    int64_t n_test = split_ids(dir, "test", &args, test, test_labels);
    /* round(10 * 0.3) = 3, round(7 * 0.3) = 2, round(0.3) = 0. */
    CHECK(n_train == 13 && n_test == 5, "split %lld + %lld", (long long)n_train,
          (long long)n_test);
    int seen[MAX_ITEMS] = {0}, out_of_order = 0, wrong_class = 0;
    for (int64_t i = 0; i < n_train; i++) {
        seen[train[i]]++;
        out_of_order += i > 0 && train_labels[i] == train_labels[i - 1] && train[i] < train[i - 1];
        wrong_class += train_labels[i] != (train[i] < 10 ? 0 : train[i] < 17 ? 1 : 2);
    }
    for (int64_t i = 0; i < n_test; i++) {
        seen[test[i]]++;
        out_of_order += i > 0 && test_labels[i] == test_labels[i - 1] && test[i] < test[i - 1];
        wrong_class += test_labels[i] != (test[i] < 10 ? 0 : test[i] < 17 ? 1 : 2);
    }
    int missing_or_twice = 0;
    for (int i = 0; i < 18; i++)
        missing_or_twice += seen[i] != 1;
    CHECK(missing_or_twice == 0, "%d images are in neither split or in both", missing_or_twice);
    CHECK(out_of_order == 0 && wrong_class == 0, "%d out of name order, %d with a wrong label",
          out_of_order, wrong_class);

    /* The same seed gives the same split; another seed another one. */
    CHECK(split_ids(dir, "test", &args, again, test_labels) == n_test &&
              memcmp(again, test, sizeof *test * (size_t)n_test) == 0,
          "the same seed must give the same test split");
    int differs = 0;
    for (uint64_t seed = 8; seed < 12; seed++) {
        args.seed = seed;
        differs += split_ids(dir, "test", &args, again, test_labels) == n_test &&
                   memcmp(again, test, sizeof *test * (size_t)n_test) != 0;
    }
    CHECK(differs > 0, "four other seeds all gave the same split");

    ct_folder_args bad = {.test_fraction = 1.5};
    expect_refused(dir, "train", &bad, CT_ERR_ARG, "test_fraction", "1.5");
}

/* Sizes from the first image unless given; gray from RGB and back. */
static void test_sizes_and_channels(void)
{
    const char *dir = tmpdir_path("sizes");
    write_image(tmpdir_path("sizes/a/1.png"), 0, 3, 5, 7);
    write_image(tmpdir_path("sizes/a/2.png"), 1, 1, 9, 4);
    write_image(tmpdir_path("sizes/b/1.png"), 2, 3, 6, 6);
    ct_folder_args args = {.test_fraction = 0.1};
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load_folder(dir, "train", &args, &ds));
    CHECK(ct_dataset_channels(ds) == 3 && ct_dataset_height(ds) == 5 && ct_dataset_width(ds) == 7,
          "shape from the first image: %dx%dx%d", ct_dataset_channels(ds),
          ct_dataset_height(ds), ct_dataset_width(ds));
    ct_dataset_free(ds);
    ds = NULL;
    args = (ct_folder_args){.channels = 1, .height = 3, .width = 2, .test_fraction = 0.1};
    CHECK_OK(ct_dataset_load_folder(dir, "train", &args, &ds));
    CHECK(ct_dataset_size(ds) == 3 && ct_dataset_channels(ds) == 1 &&
              ct_dataset_height(ds) == 3 && ct_dataset_width(ds) == 2,
          "shape as asked: %lld x %dx%dx%d", (long long)ct_dataset_size(ds),
          ct_dataset_channels(ds), ct_dataset_height(ds), ct_dataset_width(ds));
    ct_dataset_free(ds);
}

static void test_errors(void)
{
    const char *empty = tmpdir_path("empty");
    tmpdir_mkdirs(empty);
    expect_refused(empty, "train", NULL, CT_ERR_FORMAT, "no class subfolders", empty);
    expect_refused(tmpdir_path("nowhere"), "train", NULL, CT_ERR_IO, "nowhere", "does not exist");
    expect_refused(empty, "validation", NULL, CT_ERR_ARG, "validation", NULL);

    write_image(tmpdir_path("noimages/a/1.png"), 0, 3, H, W);
    tmpdir_write(tmpdir_path("noimages/b/readme.txt"), "text", 4);
    expect_refused(tmpdir_path("noimages"), "train", NULL, CT_ERR_FORMAT,
                   tmpdir_path("noimages/b"), "no .png, .jpg or .jpeg images");

    write_image(tmpdir_path("broken/a/1.png"), 0, 3, H, W);
    write_image(tmpdir_path("broken/a/2.png"), 1, 3, H, W);
    const char *broken = tmpdir_path("broken/a/3.jpg");
    tmpdir_write(broken, "not a jpeg", 10);
    /* Loading the test split decodes both splits (the training one for
     * its statistics), wherever the seed put the broken file. */
    expect_refused(tmpdir_path("broken"), "test", NULL, CT_ERR_FORMAT, broken,
                   "not a PNG or JPEG");

    /* One image per class leaves nothing for the test split. */
    write_image(tmpdir_path("single/a/1.png"), 0, 3, H, W);
    expect_refused(tmpdir_path("single"), "test", NULL, CT_ERR_FORMAT, "test split",
                   "is empty");
}
#endif

#ifndef CT_HAVE_PNG
/* Without libpng a folder of PNGs is refused with what to do. */
static void test_png_unsupported(void)
{
    static const uint8_t png_head[16] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    tmpdir_write(tmpdir_path("nolib/a/1.png"), png_head, sizeof png_head);
    ct_dataset *ds = NULL;
    CHECK(ct_dataset_load_folder(tmpdir_path("nolib"), "train", NULL, &ds) ==
                  CT_ERR_UNSUPPORTED &&
              strstr(ct_last_error(), "rebuild with libpng-dev"),
          "a PNG without libpng: %s", ct_last_error());
    ct_dataset_free(ds);
}
#endif

int main(void)
{
    tmpdir_create("test_folder");
#ifdef CT_HAVE_PNG
    RUN(test_given_splits);
    RUN(test_seeded_split);
    RUN(test_sizes_and_channels);
    RUN(test_errors);
#else
    printf("skipped: built without libpng\n");
    RUN(test_png_unsupported);
#endif
    tmpdir_remove();
    return harness_finish();
}
