/*
 * The dataset object: items as bytes, labels, class names and per-channel
 * normalization (see dataset.h), its accessors, ct_dataset_batch, and
 * ct_dataset_load, which picks the reader by the dataset's name.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "data/dataset.h"

#define NUMBER_NAME_BYTES 12 /* "-2147483648" and its NUL */

static void set_channel_normalization(ct_dataset *ds, int c, float mean, float std)
{
    CT_ASSERT(std > 0.0f);
    ds->mean[c] = mean;
    ds->std[c] = std;
    for (int byte = 0; byte < 256; byte++)
        ds->normalized[c][byte] = ((float)byte / CT_BYTE_MAX - mean) / std;
}

ct_dataset *ct_dataset_create(void)
{
    ct_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) {
        ct_set_error(CT_ERR_MEMORY, "out of host memory for a dataset");
        return NULL;
    }
    for (int c = 0; c < CT_DATASET_MAX_CHANNELS; c++)
        set_channel_normalization(ds, c, 0.0f, 1.0f);
    return ds;
}

ct_status ct_dataset_alloc_items(ct_dataset *ds, int64_t n, int channels, int height, int width)
{
    CT_ASSERT(!ds->pixels && !ds->labels && n > 0 && channels >= 1 &&
              channels <= CT_DATASET_MAX_CHANNELS && height > 0 && width > 0);
    ds->n = n;
    ds->channels = channels;
    ds->height = height;
    ds->width = width;
    size_t bytes = (size_t)n * ct_dataset_item_bytes(ds);
    ds->pixels = malloc(bytes);
    ds->labels = malloc(sizeof *ds->labels * (size_t)n);
    if (!ds->pixels || !ds->labels)
        return ct_set_error(CT_ERR_MEMORY,
                            "out of host memory for %lld images of %dx%dx%d (%zu bytes)",
                            (long long)n, channels, height, width, bytes);
    return CT_OK;
}

ct_status ct_dataset_set_class_names(ct_dataset *ds, int n_classes, const char *const *names)
{
    CT_ASSERT(n_classes > 0);
    free(ds->class_names);
    free(ds->class_text);
    ds->class_names = NULL;
    ds->class_text = NULL;
    size_t text_bytes = 0;
    for (int c = 0; c < n_classes; c++)
        text_bytes += names ? strlen(names[c]) + 1 : NUMBER_NAME_BYTES;
    ds->class_names = malloc(sizeof *ds->class_names * (size_t)n_classes);
    ds->class_text = malloc(text_bytes);
    if (!ds->class_names || !ds->class_text)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory for %d class names", n_classes);
    char *at = ds->class_text;
    for (int c = 0; c < n_classes; c++) {
        ds->class_names[c] = at;
        if (names) {
            size_t length = strlen(names[c]) + 1;
            memcpy(at, names[c], length);
            at += length;
        } else {
            snprintf(at, NUMBER_NAME_BYTES, "%d", c);
            at += NUMBER_NAME_BYTES;
        }
    }
    ds->n_classes = n_classes;
    return CT_OK;
}

void ct_dataset_set_normalization(ct_dataset *ds, const float *mean, const float *std)
{
    CT_ASSERT(ds->channels >= 1 && ds->channels <= CT_DATASET_MAX_CHANNELS);
    for (int c = 0; c < ds->channels; c++)
        set_channel_normalization(ds, c, mean[c], std[c]);
}

void ct_data_permutation(uint64_t seed, uint32_t stream, uint32_t step, int64_t n,
                         int64_t *order)
{
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    /* Fisher-Yates from the back: draw k picks j in [0, i] for i = n-1-k,
     * by the top bits of a 32-bit word times (i + 1). */
    uint32_t words[4];
    for (int64_t k = 0; k < n - 1; k++) {
        if (k % 4 == 0)
            ct_philox_block(seed, stream, step, (uint64_t)k / 4, words);
        int64_t i = n - 1 - k;
        int64_t j = (int64_t)(((uint64_t)words[k % 4] * (uint64_t)(i + 1)) >> 32);
        int64_t held = order[i];
        order[i] = order[j];
        order[j] = held;
    }
}

/* ---- public API ---------------------------------------------------------------- */

void ct_dataset_free(ct_dataset *ds)
{
    if (!ds)
        return;
    free(ds->pixels);
    free(ds->labels);
    free(ds->class_names);
    free(ds->class_text);
    free(ds);
}

int64_t ct_dataset_size(const ct_dataset *ds)
{
    return ds ? ds->n : 0;
}

int ct_dataset_channels(const ct_dataset *ds)
{
    return ds ? ds->channels : 0;
}

int ct_dataset_height(const ct_dataset *ds)
{
    return ds ? ds->height : 0;
}

int ct_dataset_width(const ct_dataset *ds)
{
    return ds ? ds->width : 0;
}

int ct_dataset_classes(const ct_dataset *ds)
{
    return ds ? ds->n_classes : 0;
}

const char *ct_dataset_class_name(const ct_dataset *ds, int label)
{
    if (!ds || label < 0 || label >= ds->n_classes)
        return NULL;
    return ds->class_names[label];
}

float ct_dataset_mean(const ct_dataset *ds, int channel)
{
    if (!ds || channel < 0 || channel >= ds->channels)
        return NAN;
    return ds->mean[channel];
}

float ct_dataset_std(const ct_dataset *ds, int channel)
{
    if (!ds || channel < 0 || channel >= ds->channels)
        return NAN;
    return ds->std[channel];
}

ct_status ct_dataset_batch(const ct_dataset *ds, const int64_t *indices, int n, float *images,
                           int64_t *labels)
{
    if (!ds || !indices || !images || n < 0)
        return ct_set_error(CT_ERR_ARG,
                            "ct_dataset_batch: dataset, indices and images are required and n "
                            "(%d) must be >= 0",
                            n);
    for (int b = 0; b < n; b++)
        if (indices[b] < 0 || indices[b] >= ds->n)
            return ct_set_error(CT_ERR_ARG,
                                "ct_dataset_batch: index %lld (batch row %d) is out of range "
                                "for a dataset of %lld items",
                                (long long)indices[b], b, (long long)ds->n);
    size_t plane = (size_t)ds->height * (size_t)ds->width;
    size_t item = ct_dataset_item_bytes(ds);
    for (int b = 0; b < n; b++) {
        const uint8_t *src = ds->pixels + (size_t)indices[b] * item;
        float *dst = images + (size_t)b * item;
        for (int c = 0; c < ds->channels; c++)
            for (size_t i = 0; i < plane; i++)
                dst[c * plane + i] = ds->normalized[c][src[c * plane + i]];
        if (labels)
            labels[b] = ds->labels[indices[b]];
    }
    return CT_OK;
}

ct_status ct_dataset_load(const char *name, const char *dir, const char *split,
                          ct_dataset **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_dataset_load: out is NULL");
    *out = NULL;
    static const char known[] = "fashion-mnist, mnist, cifar10, cifar100 or folder";
    bool is_idx = name && (strcmp(name, "fashion-mnist") == 0 || strcmp(name, "mnist") == 0);
    bool is_cifar10 = name && strcmp(name, "cifar10") == 0;
    bool is_cifar100 = name && strcmp(name, "cifar100") == 0;
    bool is_folder = name && strcmp(name, "folder") == 0;
    if (!is_idx && !is_cifar10 && !is_cifar100 && !is_folder)
        return ct_set_error(CT_ERR_ARG, "unknown dataset '%s': use %s", name ? name : "(null)",
                            known);
    if (!split || (strcmp(split, "train") != 0 && strcmp(split, "test") != 0))
        return ct_set_error(CT_ERR_ARG, "unknown split '%s' of %s: use train or test",
                            split ? split : "(null)", name);
    if (is_idx)
        return ct_idx_load_named(name, dir, split, out);
    if (is_cifar10 || is_cifar100)
        return ct_cifar_load(is_cifar10 ? 10 : 100, dir, split, out);
    if (!dir)
        return ct_set_error(CT_ERR_ARG,
                            "the folder dataset needs a directory: one subfolder of .png/.jpg "
                            "images per class, optionally under train/ and test/ "
                            "(--data-dir DIR)");
    return ct_dataset_load_folder(dir, split, NULL, out);
}
