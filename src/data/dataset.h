/*
 * The in-memory dataset shared by the readers (idx.c, cifar.c, folder.c),
 * the augmentation (augment.c) and the loader (loader.c), and the format
 * descriptor through which the readers plug into ct_dataset_load.
 *
 * Every dataset keeps its pixels as bytes, [n, channels, height, width],
 * and normalizes them only when a batch is made, through one 256-entry
 * table per channel: normalized[c][x] = (x/255 - mean[c]) / std[c], the
 * same float operations as torchvision's ToTensor + Normalize.
 */
#ifndef CT_DATA_DATASET_H
#define CT_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "cuttle.h"

#define CT_DATASET_MAX_CHANNELS 3 /* gray or RGB */
#define CT_BYTE_MAX 255.0f

struct ct_dataset {
    int64_t n;
    int channels, height, width, n_classes;
    uint8_t *pixels; /* [n, channels, height, width] */
    int32_t *labels; /* [n], each in [0, n_classes) */
    float mean[CT_DATASET_MAX_CHANNELS], std[CT_DATASET_MAX_CHANNELS];
    float normalized[CT_DATASET_MAX_CHANNELS][256]; /* see above */
    char **class_names; /* [n_classes], pointing into class_text */
    char *class_text;
};

/* A new empty dataset (no items) with mean 0 and std 1; NULL when memory
 * runs out, with the error set. */
ct_dataset *ct_dataset_create(void);
/* Allocate pixels and labels for n items of channels x height x width. */
ct_status ct_dataset_alloc_items(ct_dataset *ds, int64_t n, int channels, int height, int width);
/* Copy n_classes names (NULL: "0", "1", ...), replacing any earlier ones,
 * and set ds->n_classes. */
ct_status ct_dataset_set_class_names(ct_dataset *ds, int n_classes, const char *const *names);
/* Set mean[c] and std[c] for each of ds->channels and rebuild the table. */
void ct_dataset_set_normalization(ct_dataset *ds, const float *mean, const float *std);

/* Bytes of one item: channels * height * width. */
static inline size_t ct_dataset_item_bytes(const ct_dataset *ds)
{
    return (size_t)ds->channels * (size_t)ds->height * (size_t)ds->width;
}

/* order = a permutation of 0..n-1, a pure function of (seed, stream, step)
 * (Fisher-Yates on Philox draws; n must be below 2^32). */
void ct_data_permutation(uint64_t seed, uint32_t stream, uint32_t step, int64_t n,
                         int64_t *order);

/* One dataset that ct_dataset_load can name.  Each reader (idx.c, cifar.c,
 * folder.c) exports its own descriptors and formats.c lists them, so this
 * layer never names a reader and every dependency points down to it. */
typedef struct ct_dataset_format {
    const char *name; /* as ct_dataset_load takes it: "mnist" */
    /* Load split ("train" or "test", already checked) from dir; dir NULL
     * means the format's default location, or an error that asks for one. */
    ct_status (*load)(const char *dir, const char *split, ct_dataset **out);
} ct_dataset_format;

/* ct_dataset_load over a list of formats: the one called `name` loads
 * `split` from dir.  CT_ERR_ARG for out NULL, an unknown name (the message
 * lists the formats' names) or a split other than "train" or "test". */
ct_status ct_dataset_load_from(const ct_dataset_format *const *formats, size_t n_formats,
                               const char *name, const char *dir, const char *split,
                               ct_dataset **out);

/* Item `item` of the dataset, augmented for `epoch` with draws keyed by
 * (seed, epoch, item) (augment.c), normalized into out [C, H, W]. */
void ct_augment_item(const ct_dataset *ds, const ct_augment *augment, uint64_t seed,
                     int64_t epoch, int64_t item, float *out);

#endif
