/*
 * The dataset object: items as bytes, labels, class names and per-channel
 * normalization (see dataset.h), its accessors, ct_dataset_batch, and
 * ct_dataset_load_from, which picks a format by name from a list it is
 * given (formats.c holds the list), so this file names no reader.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "data/dataset.h"

#define NUMBER_NAME_BYTES 12 /* "-2147483648" and its NUL */
#define FORMAT_NAMES_BYTES 256 /* "fashion-mnist, mnist, ... or folder" */

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

/* "a, b or c": the names of the formats, for a message (cut short at capacity). */
static void list_format_names(const ct_dataset_format *const *formats, size_t n_formats,
                              char *text, size_t capacity)
{
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < n_formats && used < capacity; i++) {
        const char *separator = i == 0 ? "" : i + 1 == n_formats ? " or " : ", ";
        int length = snprintf(text + used, capacity - used, "%s%s", separator, formats[i]->name);
        if (length < 0)
            return;
        used += (size_t)length;
    }
}

ct_status ct_dataset_load_from(const ct_dataset_format *const *formats, size_t n_formats,
                               const char *name, const char *dir, const char *split,
                               ct_dataset **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_dataset_load: out is NULL");
    *out = NULL;
    const ct_dataset_format *format = NULL;
    for (size_t i = 0; name && i < n_formats && !format; i++)
        if (strcmp(name, formats[i]->name) == 0)
            format = formats[i];
    if (!format) {
        char known[FORMAT_NAMES_BYTES];
        list_format_names(formats, n_formats, known, sizeof known);
        return ct_set_error(CT_ERR_ARG, "unknown dataset '%s': use %s", name ? name : "(null)",
                            known);
    }
    if (!split || (strcmp(split, "train") != 0 && strcmp(split, "test") != 0))
        return ct_set_error(CT_ERR_ARG, "unknown split '%s' of %s: use train or test",
                            split ? split : "(null)", name);
    return format->load(dir, split, out);
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
