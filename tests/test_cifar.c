/*
 * CIFAR-10 and CIFAR-100 binary files written here load back exactly, with
 * their normalization and class names; truncated files, labels out of range
 * and missing files are refused with messages that say which and where.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "harness.h"
#include "tmpdir.h"

#define PIXELS 3072
#define SIDE 32
#define MAX_RECORDS 8
#define CIFAR10_RECORD (1 + PIXELS)
#define CIFAR100_RECORD (2 + PIXELS)

static const float cifar10_mean[3] = {0.4914f, 0.4822f, 0.4465f};
static const float cifar10_std[3] = {0.2470f, 0.2435f, 0.2616f};
static const float cifar100_mean[3] = {0.5071f, 0.4865f, 0.4409f};
static const float cifar100_std[3] = {0.2673f, 0.2564f, 0.2762f};

/* Pixel k of record r of file f, and its label. */
static uint8_t pixel(int f, int r, int k)
{
    return (uint8_t)((r * 7 + f * 13 + k) % 256);
}

static int label10(int f, int r)
{
    return (r + 3 * f) % 10;
}

static int label100(int f, int r)
{
    return (r * 37 + f * 11) % 100;
}

/* A CIFAR file of n records in dir/name; label_bytes 1 (CIFAR-10) or 2. */
static void write_cifar(const char *dir, const char *name, int f, int n, int label_bytes)
{
    static uint8_t bytes[MAX_RECORDS * CIFAR100_RECORD];
    size_t record = (size_t)label_bytes + PIXELS;
    for (int r = 0; r < n; r++) {
        uint8_t *at = bytes + (size_t)r * record;
        if (label_bytes == 1) {
            at[0] = (uint8_t)label10(f, r);
        } else {
            at[0] = (uint8_t)(label100(f, r) / 5); /* coarse, 20 superclasses */
            at[1] = (uint8_t)label100(f, r);
        }
        for (int k = 0; k < PIXELS; k++)
            at[label_bytes + k] = pixel(f, r, k);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tmpdir_write(path, bytes, (size_t)n * record);
}

/* CIFAR-10 in dir: batch f holds f + 1 records, the test batch 3. */
static void write_cifar10(const char *dir)
{
    for (int f = 1; f <= 5; f++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", f);
        write_cifar(dir, name, f, f, 1);
    }
    write_cifar(dir, "test_batch.bin", 0, 3, 1);
}

/* Every item of ds against the files: items in file order, then record order. */
static void check_items(const ct_dataset *ds, const int *files, int n_files, const int *counts,
                        bool cifar100)
{
    const float *mean = cifar100 ? cifar100_mean : cifar10_mean;
    const float *std = cifar100 ? cifar100_std : cifar10_std;
    int64_t total = 0;
    for (int i = 0; i < n_files; i++)
        total += counts[i];
    CHECK(ct_dataset_size(ds) == total, "size %lld, expected %lld",
          (long long)ct_dataset_size(ds), (long long)total);
    CHECK(ct_dataset_channels(ds) == 3 && ct_dataset_height(ds) == SIDE &&
              ct_dataset_width(ds) == SIDE,
          "shape %dx%dx%d", ct_dataset_channels(ds), ct_dataset_height(ds),
          ct_dataset_width(ds));
    CHECK(ct_dataset_classes(ds) == (cifar100 ? 100 : 10), "classes %d",
          ct_dataset_classes(ds));
    for (int c = 0; c < 3; c++)
        CHECK(ct_dataset_mean(ds, c) == mean[c] && ct_dataset_std(ds, c) == std[c],
              "channel %d: mean %g std %g", c, (double)ct_dataset_mean(ds, c),
              (double)ct_dataset_std(ds, c));
    CHECK(isnan(ct_dataset_mean(ds, 3)) && isnan(ct_dataset_std(ds, -1)),
          "channels out of range must give NaN");
    if (ct_dataset_size(ds) != total)
        return;
    static float image[PIXELS];
    int wrong = 0;
    int64_t item = 0;
    for (int i = 0; i < n_files; i++)
        for (int r = 0; r < counts[i]; r++, item++) {
            int64_t label = -1;
            CHECK_OK(ct_dataset_batch(ds, &item, 1, image, &label));
            int want = cifar100 ? label100(files[i], r) : label10(files[i], r);
            wrong += label != want;
            for (int k = 0; k < PIXELS; k++) {
                float x = ((float)pixel(files[i], r, k) / 255.0f - mean[k / 1024]) / std[k / 1024];
                wrong += image[k] != x;
            }
        }
    CHECK(wrong == 0, "%d labels or pixels differ", wrong);
}

static void expect_refused(const char *name, const char *dir, const char *split,
                           ct_status status, const char *needle1, const char *needle2)
{
    ct_dataset *ds = (ct_dataset *)&ds; /* poison: must become NULL */
    ct_status got = ct_dataset_load(name, dir, split, &ds);
    const char *message = ct_last_error();
    CHECK(got == status, "expected %s, got %s: %s", ct_status_name(status), ct_status_name(got),
          message);
    CHECK(ds == NULL, "*out must be NULL on failure");
    CHECK(strstr(message, needle1), "message '%s' lacks '%s'", message, needle1);
    CHECK(!needle2 || strstr(message, needle2), "message '%s' lacks '%s'", message, needle2);
    if (got == CT_OK)
        ct_dataset_free(ds);
}

static void test_cifar10(void)
{
    const char *dir = tmpdir_path("c10");
    write_cifar10(dir);
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load("cifar10", dir, "train", &ds));
    static const int train_files[5] = {1, 2, 3, 4, 5}, train_counts[5] = {1, 2, 3, 4, 5};
    if (ds) {
        check_items(ds, train_files, 5, train_counts, false);
        CHECK(strcmp(ct_dataset_class_name(ds, 0), "airplane") == 0 &&
                  strcmp(ct_dataset_class_name(ds, 9), "truck") == 0 &&
                  !ct_dataset_class_name(ds, 10),
              "built-in names '%s', '%s'", ct_dataset_class_name(ds, 0),
              ct_dataset_class_name(ds, 9));
    }
    ct_dataset_free(ds);
    ds = NULL;
    CHECK_OK(ct_dataset_load("cifar10", dir, "test", &ds));
    static const int test_files[1] = {0}, test_counts[1] = {3};
    if (ds)
        check_items(ds, test_files, 1, test_counts, false);
    ct_dataset_free(ds);
}

/* The folder the archive unpacks to is found below the given one. */
static void test_cifar10_archive_folder(void)
{
    write_cifar10(tmpdir_path("c10arch/cifar-10-batches-bin"));
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load("cifar10", tmpdir_path("c10arch"), "test", &ds));
    CHECK(ct_dataset_size(ds) == 3, "size %lld", (long long)ct_dataset_size(ds));
    ct_dataset_free(ds);
}

static void test_class_names_file(void)
{
    const char *dir = tmpdir_path("c10names");
    write_cifar10(dir);
    const char names[] = "plane\ncar\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\r\ntruck\n\n\n";
    tmpdir_write(tmpdir_path("c10names/batches.meta.txt"), names, sizeof names - 1);
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load("cifar10", dir, "test", &ds));
    if (ds)
        CHECK(strcmp(ct_dataset_class_name(ds, 0), "plane") == 0 &&
                  strcmp(ct_dataset_class_name(ds, 8), "ship") == 0 &&
                  strcmp(ct_dataset_class_name(ds, 9), "truck") == 0,
              "names from the file: '%s', '%s', '%s'", ct_dataset_class_name(ds, 0),
              ct_dataset_class_name(ds, 8), ct_dataset_class_name(ds, 9));
    ct_dataset_free(ds);

    const char short_names[] = "a\nb\nc\n";
    tmpdir_write(tmpdir_path("c10names/batches.meta.txt"), short_names, sizeof short_names - 1);
    expect_refused("cifar10", dir, "test", CT_ERR_FORMAT, "batches.meta.txt", "names 3 classes");
}

static void test_cifar100(void)
{
    const char *dir = tmpdir_path("c100");
    write_cifar(dir, "train.bin", 1, 7, 2);
    write_cifar(dir, "test.bin", 2, 4, 2);
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load("cifar100", dir, "train", &ds));
    static const int train_files[1] = {1}, train_counts[1] = {7};
    if (ds) {
        check_items(ds, train_files, 1, train_counts, true);
        CHECK(strcmp(ct_dataset_class_name(ds, 0), "apple") == 0 &&
                  strcmp(ct_dataset_class_name(ds, 1), "aquarium_fish") == 0 &&
                  strcmp(ct_dataset_class_name(ds, 99), "worm") == 0,
              "built-in names '%s', '%s'", ct_dataset_class_name(ds, 0),
              ct_dataset_class_name(ds, 99));
    }
    ct_dataset_free(ds);

    char names[100 * 8];
    size_t length = 0;
    for (int c = 0; c < 100; c++)
        length += (size_t)snprintf(names + length, sizeof names - length, "c%d\n", c);
    tmpdir_write(tmpdir_path("c100/fine_label_names.txt"), names, length);
    ds = NULL;
    CHECK_OK(ct_dataset_load("cifar100", dir, "test", &ds));
    static const int test_files[1] = {2}, test_counts[1] = {4};
    if (ds) {
        check_items(ds, test_files, 1, test_counts, true);
        CHECK(strcmp(ct_dataset_class_name(ds, 42), "c42") == 0, "name 42 is '%s'",
              ct_dataset_class_name(ds, 42));
    }
    ct_dataset_free(ds);
}

static void test_partial_records(void)
{
    const char *dir = tmpdir_path("c10short");
    write_cifar10(dir);
    static uint8_t bytes[3 * CIFAR10_RECORD];
    const char *path = tmpdir_path("c10short/data_batch_3.bin");
    tmpdir_write(path, bytes, 3 * CIFAR10_RECORD - 5);
    expect_refused("cifar10", dir, "train", CT_ERR_FORMAT, path, "not a whole number");
    expect_refused("cifar10", dir, "train", CT_ERR_FORMAT, "2 records and 3068 bytes over",
                   NULL);
    tmpdir_write(path, bytes, 0);
    expect_refused("cifar10", dir, "train", CT_ERR_FORMAT, path, "0 bytes");
    /* A CIFAR-10 file read as CIFAR-100: 3073 is not a multiple of 3074. */
    const char *c100 = tmpdir_path("c10short/test.bin");
    tmpdir_write(c100, bytes, CIFAR10_RECORD);
    expect_refused("cifar100", dir, "test", CT_ERR_FORMAT, c100, "3074-byte");
}

static void test_labels_out_of_range(void)
{
    const char *dir = tmpdir_path("c10labels");
    write_cifar10(dir);
    static uint8_t bytes[3 * CIFAR100_RECORD];
    const char *path = tmpdir_path("c10labels/test_batch.bin");
    bytes[2 * CIFAR10_RECORD] = 10; /* record 2 */
    tmpdir_write(path, bytes, 3 * CIFAR10_RECORD);
    expect_refused("cifar10", dir, "test", CT_ERR_FORMAT, path, "record 2 has label 10");

    const char *c100 = tmpdir_path("c10labels/test.bin");
    memset(bytes, 0, sizeof bytes);
    bytes[CIFAR100_RECORD + 1] = 100; /* record 1, fine */
    tmpdir_write(c100, bytes, 3 * CIFAR100_RECORD);
    expect_refused("cifar100", dir, "test", CT_ERR_FORMAT, "record 1 has label 100",
                   "100 classes");
    memset(bytes, 0, sizeof bytes);
    bytes[2 * CIFAR100_RECORD] = 20; /* record 2, coarse */
    tmpdir_write(c100, bytes, 3 * CIFAR100_RECORD);
    expect_refused("cifar100", dir, "test", CT_ERR_FORMAT, "record 2 has coarse label 20", c100);
}

static void test_missing_files(void)
{
    const char *dir = tmpdir_path("c10missing");
    tmpdir_mkdirs(dir);
    expect_refused("cifar10", dir, "train", CT_ERR_IO, "data_batch_1.bin", dir);
    expect_refused("cifar10", dir, "test", CT_ERR_IO, "test_batch.bin", "cifar-10-binary.tar.gz");
    expect_refused("cifar100", dir, "train", CT_ERR_IO, "train.bin", "cifar-100-binary");
    write_cifar(dir, "data_batch_1.bin", 1, 1, 1);
    write_cifar(dir, "data_batch_2.bin", 2, 1, 1);
    expect_refused("cifar10", dir, "train", CT_ERR_IO, "data_batch_3.bin", dir);
    expect_refused("cifar10", NULL, "train", CT_ERR_ARG, "--data-dir",
                   "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz");
    expect_refused("cifar100", NULL, "test", CT_ERR_ARG, "cifar-100-binary.tar.gz", NULL);
}

static void test_names_and_splits(void)
{
    expect_refused("imagenet", "/tmp", "train", CT_ERR_ARG, "unknown dataset 'imagenet'",
                   "fashion-mnist, mnist, cifar10, cifar100 or folder");
    expect_refused("cifar10", "/tmp", "val", CT_ERR_ARG, "unknown split 'val'", NULL);
    expect_refused("folder", NULL, "train", CT_ERR_ARG, "--data-dir", NULL);
}

int main(void)
{
    tmpdir_create("test_cifar");
    RUN(test_cifar10);
    RUN(test_cifar10_archive_folder);
    RUN(test_class_names_file);
    RUN(test_cifar100);
    RUN(test_partial_records);
    RUN(test_labels_out_of_range);
    RUN(test_missing_files);
    RUN(test_names_and_splits);
    tmpdir_remove();
    return harness_finish();
}
