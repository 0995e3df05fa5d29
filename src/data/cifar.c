/*
 * CIFAR-10 and CIFAR-100, the "binary version" from
 * https://www.cs.toronto.edu/~kriz/cifar.html.
 *
 * A file is a run of fixed-size records, nothing else: CIFAR-10 records are
 * 1 label byte + 3072 pixel bytes, CIFAR-100 records 2 label bytes (coarse,
 * fine; we use the fine label, 100 classes) + 3072 pixel bytes.  The pixels
 * are a 32x32 image channel by channel (1024 red, 1024 green, 1024 blue,
 * rows top to bottom), which is already our [C, H, W] layout.
 *
 *   CIFAR-10:  data_batch_1.bin .. data_batch_5.bin (train), test_batch.bin;
 *              class names in batches.meta.txt
 *   CIFAR-100: train.bin, test.bin; class names in fine_label_names.txt
 *
 * The files are looked for in dir, then in the folder the archive unpacks
 * to (dir/cifar-10-batches-bin, dir/cifar-100-binary).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "data/cifar.h"
#include "data/dataset.h"

#define CIFAR_CHANNELS 3
#define CIFAR_SIDE 32
#define CIFAR_PIXELS (CIFAR_CHANNELS * CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR10_TRAIN_FILES 5
#define CIFAR100_COARSE_CLASSES 20
#define CIFAR_MAX_FILES CIFAR10_TRAIN_FILES
#define CIFAR_MAX_NAME 64 /* bytes of a class name from a names file, with its NUL */
#define CIFAR_LINE_MAX 256
#define CIFAR_PATH_MAX 4096 /* the folder of the files */
#define CIFAR_FILE_PATH_MAX (CIFAR_PATH_MAX + 64) /* and a file in it */

static const char *const cifar10_names[] = {
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
};

static const char *const cifar100_names[] = {
    "apple",       "aquarium_fish", "baby",         "bear",       "beaver",
    "bed",         "bee",           "beetle",       "bicycle",    "bottle",
    "bowl",        "boy",           "bridge",       "bus",        "butterfly",
    "camel",       "can",           "castle",       "caterpillar", "cattle",
    "chair",       "chimpanzee",    "clock",        "cloud",      "cockroach",
    "couch",       "crab",          "crocodile",    "cup",        "dinosaur",
    "dolphin",     "elephant",      "flatfish",     "forest",     "fox",
    "girl",        "hamster",       "house",        "kangaroo",   "keyboard",
    "lamp",        "lawn_mower",    "leopard",      "lion",       "lizard",
    "lobster",     "man",           "maple_tree",   "motorcycle", "mountain",
    "mouse",       "mushroom",      "oak_tree",     "orange",     "orchid",
    "otter",       "palm_tree",     "pear",         "pickup_truck", "pine_tree",
    "plain",       "plate",         "poppy",        "porcupine",  "possum",
    "rabbit",      "raccoon",       "ray",          "road",       "rocket",
    "rose",        "sea",           "seal",         "shark",      "shrew",
    "skunk",       "skyscraper",    "snail",        "snake",      "spider",
    "squirrel",    "streetcar",     "sunflower",    "sweet_pepper", "table",
    "tank",        "telephone",     "television",   "tiger",      "tractor",
    "train",       "trout",         "tulip",        "turtle",     "wardrobe",
    "whale",       "willow_tree",   "wolf",         "woman",      "worm",
};

_Static_assert(sizeof cifar10_names / sizeof cifar10_names[0] == 10, "10 CIFAR-10 names");
_Static_assert(sizeof cifar100_names / sizeof cifar100_names[0] == 100, "100 CIFAR-100 names");

typedef struct cifar_info {
    const char *name;         /* "cifar10" */
    const char *archive_dir;  /* what the archive unpacks to */
    const char *url;
    int n_classes, label_bytes;
    const char *train_files[CIFAR_MAX_FILES];
    int n_train_files;
    const char *test_file, *names_file;
    const char *const *builtin_names;
    float mean[CIFAR_CHANNELS], std[CIFAR_CHANNELS]; /* of the training pixels in [0, 1] */
} cifar_info;

static const cifar_info cifar10 = {
    "cifar10", "cifar-10-batches-bin", "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
    10, 1,
    {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
     "data_batch_5.bin"},
    CIFAR10_TRAIN_FILES, "test_batch.bin", "batches.meta.txt", cifar10_names,
    {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f},
};

static const cifar_info cifar100 = {
    "cifar100", "cifar-100-binary", "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz",
    100, 2, {"train.bin"}, 1, "test.bin", "fine_label_names.txt", cifar100_names,
    {0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f},
};

static bool is_file(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

/* The folder that holds `first_file`: dir itself or dir/<archive_dir>. */
static ct_status find_dir(const cifar_info *info, const char *dir, const char *first_file,
                          char *found, size_t capacity)
{
    char path[CIFAR_FILE_PATH_MAX];
    for (int i = 0; i < 2; i++) {
        int length = i == 0 ? snprintf(found, capacity, "%s", dir)
                            : snprintf(found, capacity, "%s/%s", dir, info->archive_dir);
        if (length < 0 || (size_t)length >= capacity)
            return ct_set_error(CT_ERR_ARG, "dataset directory path '%s' is too long", dir);
        snprintf(path, sizeof path, "%s/%s", found, first_file);
        if (is_file(path))
            return CT_OK;
    }
    return ct_set_error(CT_ERR_IO,
                        "%s: %s is missing from %s (and from %s/%s): download the binary "
                        "version, %s, unpack it and pass the directory (--data-dir DIR)",
                        info->name, first_file, dir, dir, info->archive_dir, info->url);
}

/* The number of whole records in each file; refuses partial records. */
static ct_status count_records(const cifar_info *info, const char *dir,
                               const char *const *files, int n_files, int64_t *counts,
                               int64_t *total)
{
    size_t record = (size_t)info->label_bytes + CIFAR_PIXELS;
    *total = 0;
    for (int i = 0; i < n_files; i++) {
        char path[CIFAR_FILE_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        struct stat st;
        if (stat(path, &st) != 0)
            return ct_set_error(CT_ERR_IO, "%s: cannot open %s in %s: %s", info->name,
                                files[i], dir, strerror(errno));
        if (!S_ISREG(st.st_mode))
            return ct_set_error(CT_ERR_IO, "%s: %s is not a regular file", info->name, path);
        int64_t bytes = (int64_t)st.st_size;
        if (bytes == 0 || bytes % (int64_t)record != 0)
            return ct_set_error(CT_ERR_FORMAT,
                                "%s is %lld bytes, not a whole number of %zu-byte %s records "
                                "(%lld records and %lld bytes over): the file is truncated or "
                                "not the binary version of %s; fetch %s again",
                                path, (long long)bytes, record, info->name,
                                (long long)(bytes / (int64_t)record),
                                (long long)(bytes % (int64_t)record), info->name, info->url);
        counts[i] = bytes / (int64_t)record;
        *total += counts[i];
    }
    return CT_OK;
}

/* Read `count` records of one file into items [first, first + count). */
static ct_status read_records(const cifar_info *info, const char *path, int64_t first,
                              int64_t count, ct_dataset *ds)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return ct_set_error(CT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    ct_status status = CT_OK;
    uint8_t labels[2];
    int fine = info->label_bytes - 1; /* the label we keep is the last one */
    for (int64_t r = 0; r < count && status == CT_OK; r++) {
        uint8_t *pixels = ds->pixels + (size_t)(first + r) * CIFAR_PIXELS;
        if (fread(labels, 1, (size_t)info->label_bytes, file) != (size_t)info->label_bytes ||
            fread(pixels, 1, CIFAR_PIXELS, file) != CIFAR_PIXELS) {
            status = ct_set_error(CT_ERR_IO, "cannot read record %lld of %s: %s", (long long)r,
                                  path, ferror(file) ? strerror(errno) : "the file shrank");
        } else if (info->label_bytes == 2 && labels[0] >= CIFAR100_COARSE_CLASSES) {
            status = ct_set_error(CT_ERR_FORMAT,
                                  "%s: record %lld has coarse label %u, out of range for %d "
                                  "superclasses: the file is corrupt or not %s",
                                  path, (long long)r, labels[0], CIFAR100_COARSE_CLASSES,
                                  info->name);
        } else if (labels[fine] >= info->n_classes) {
            status = ct_set_error(CT_ERR_FORMAT,
                                  "%s: record %lld has label %u, out of range for %d classes: "
                                  "the file is corrupt or not %s",
                                  path, (long long)r, labels[fine], info->n_classes, info->name);
        } else {
            ds->labels[first + r] = labels[fine];
        }
    }
    fclose(file);
    return status;
}

/* Class names from the names file beside the data, when there is one: one
 * name a line, blank lines ignored, exactly n_classes names. */
static ct_status set_class_names(const cifar_info *info, const char *dir, ct_dataset *ds)
{
    char path[CIFAR_FILE_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, info->names_file);
    FILE *file = fopen(path, "r");
    if (!file)
        return ct_dataset_set_class_names(ds, info->n_classes, info->builtin_names);
    char (*names)[CIFAR_MAX_NAME] = malloc(sizeof *names * (size_t)info->n_classes);
    const char **pointers = malloc(sizeof *pointers * (size_t)info->n_classes);
    ct_status status = CT_OK;
    if (!names || !pointers)
        status = ct_set_error(CT_ERR_MEMORY, "out of host memory reading %s", path);
    int n = 0;
    char line[CIFAR_LINE_MAX];
    while (status == CT_OK && fgets(line, sizeof line, file)) {
        size_t length = strlen(line);
        while (length > 0 && strchr(" \t\r\n", line[length - 1]))
            line[--length] = '\0';
        if (length == 0)
            continue;
        if (length >= CIFAR_MAX_NAME) {
            status = ct_set_error(CT_ERR_FORMAT,
                                  "%s: the name of class %d is longer than %d characters: is "
                                  "this a names file?",
                                  path, n, CIFAR_MAX_NAME - 1);
            break;
        }
        if (n == info->n_classes) {
            status = ct_set_error(CT_ERR_FORMAT,
                                  "%s names more than %d classes: is it from another dataset?",
                                  path, info->n_classes);
            break;
        }
        memcpy(names[n], line, length + 1);
        pointers[n] = names[n];
        n++;
    }
    if (status == CT_OK && n != info->n_classes)
        status = ct_set_error(CT_ERR_FORMAT,
                              "%s names %d classes, %s has %d: fix or delete it (the standard "
                              "names are built in)",
                              path, n, info->name, info->n_classes);
    if (status == CT_OK)
        status = ct_dataset_set_class_names(ds, info->n_classes, pointers);
    fclose(file);
    free(names);
    free(pointers);
    return status;
}

/* The split of one CIFAR dataset from dir (required: it has no default). */
static ct_status load_cifar(const cifar_info *info, const char *dir, const char *split,
                            ct_dataset **out)
{
    *out = NULL;
    if (!dir)
        return ct_set_error(CT_ERR_ARG,
                            "%s has no default location: download the binary version, %s, "
                            "unpack it and pass the directory that holds %s (--data-dir DIR)",
                            info->name, info->url, info->test_file);
    bool train = strcmp(split, "train") == 0;
    const char *const *files = train ? info->train_files : &info->test_file;
    int n_files = train ? info->n_train_files : 1;

    char folder[CIFAR_PATH_MAX];
    CT_TRY(find_dir(info, dir, files[0], folder, sizeof folder));
    int64_t counts[CIFAR_MAX_FILES], total = 0;
    CT_TRY(count_records(info, folder, files, n_files, counts, &total));

    ct_dataset *ds = ct_dataset_create();
    if (!ds)
        return CT_ERR_MEMORY;
    ct_status status = ct_dataset_alloc_items(ds, total, CIFAR_CHANNELS, CIFAR_SIDE, CIFAR_SIDE);
    int64_t first = 0;
    for (int i = 0; i < n_files && status == CT_OK; i++) {
        char path[CIFAR_FILE_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", folder, files[i]);
        status = read_records(info, path, first, counts[i], ds);
        first += counts[i];
    }
    if (status == CT_OK)
        status = set_class_names(info, folder, ds);
    if (status != CT_OK) {
        ct_dataset_free(ds);
        return status;
    }
    ct_dataset_set_normalization(ds, info->mean, info->std);
    *out = ds;
    return CT_OK;
}

static ct_status load_cifar10(const char *dir, const char *split, ct_dataset **out)
{
    return load_cifar(&cifar10, dir, split, out);
}

static ct_status load_cifar100(const char *dir, const char *split, ct_dataset **out)
{
    return load_cifar(&cifar100, dir, split, out);
}

const ct_dataset_format ct_cifar10_format = {"cifar10", load_cifar10};
const ct_dataset_format ct_cifar100_format = {"cifar100", load_cifar100};
