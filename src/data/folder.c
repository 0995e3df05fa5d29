/*
 * Image folder datasets, like torchvision's ImageFolder:
 *
 *   dir/<class>/<image>.png|.jpg|.jpeg            split by a seeded fraction
 *   dir/train/<class>/..., dir/test/<class>/...   the splits as given
 *
 * Classes are the subfolders sorted by name (byte order), label 0 first;
 * with train/ and test/, the classes are those of train/ and each test
 * class must be one of them.  Files are taken in name order and only by
 * their extension (.png, .jpg, .jpeg, any case); other files, hidden
 * entries and nested folders are skipped.  A listed file that does not
 * decode is an error that names it.
 *
 * Without train/ and test/, each class's files are shuffled by
 * Philox(seed, CT_RNG_STREAM_SPLIT, class index) and the first
 * round(count * test_fraction) of them (at most count - 1) are the test
 * split; both splits keep name order.
 *
 * Every image is decoded, converted to the dataset's channels, resized
 * (bilinear) and kept as bytes.  The normalization is the per-channel
 * mean and (population) standard deviation of the training split's pixels
 * at that size, also when the test split is loaded: then the training
 * images are decoded once more to measure them.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "data/folder.h"
#include "data/image.h"

#define FOLDER_DEFAULT_TEST_FRACTION 0.2

typedef struct name_list {
    char **names;
    int n, capacity;
} name_list;

typedef struct file_set {
    char **paths;
    int32_t *labels;
    int64_t n, capacity;
} file_set;

typedef struct folder_plan {
    name_list classes;
    file_set train, test;
} folder_plan;

static bool is_dir(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

static bool is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".png") == 0 || strcasecmp(dot, ".jpg") == 0 ||
                   strcasecmp(dot, ".jpeg") == 0);
}

/* "a/b", malloc'ed; NULL when memory runs out (with the error set). */
static char *join(const char *a, const char *b)
{
    size_t length = strlen(a) + 1 + strlen(b) + 1;
    char *path = malloc(length);
    if (!path)
        ct_set_error(CT_ERR_MEMORY, "out of host memory for the path %s/%s", a, b);
    else
        snprintf(path, length, "%s/%s", a, b);
    return path;
}

static void name_list_free(name_list *list)
{
    for (int i = 0; i < list->n; i++)
        free(list->names[i]);
    free(list->names);
    *list = (name_list){0};
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The subfolders (want_dirs) or the image files of dir, sorted by name. */
static ct_status list_dir(const char *dir, bool want_dirs, name_list *out)
{
    *out = (name_list){0};
    DIR *handle = opendir(dir);
    if (!handle)
        return ct_set_error(CT_ERR_IO, "cannot open the folder %s: %s", dir, strerror(errno));
    ct_status status = CT_OK;
    struct dirent *entry;
    while (status == CT_OK && (entry = readdir(handle))) {
        if (entry->d_name[0] == '.' || (!want_dirs && !is_image_name(entry->d_name)))
            continue;
        char *path = join(dir, entry->d_name);
        if (!path) {
            status = CT_ERR_MEMORY;
            break;
        }
        struct stat info;
        bool keep = stat(path, &info) == 0 &&
                    (want_dirs ? S_ISDIR(info.st_mode) : S_ISREG(info.st_mode));
        free(path);
        if (!keep)
            continue;
        if (out->n == out->capacity) {
            int grown = out->capacity ? 2 * out->capacity : 16;
            char **bigger = realloc(out->names, sizeof *bigger * (size_t)grown);
            if (!bigger) {
                status = ct_set_error(CT_ERR_MEMORY, "out of host memory listing %s", dir);
                break;
            }
            out->names = bigger;
            out->capacity = grown;
        }
        out->names[out->n] = strdup(entry->d_name);
        if (!out->names[out->n])
            status = ct_set_error(CT_ERR_MEMORY, "out of host memory listing %s", dir);
        else
            out->n++;
    }
    closedir(handle);
    if (status != CT_OK)
        name_list_free(out);
    else if (out->n > 1)
        qsort(out->names, (size_t)out->n, sizeof *out->names, compare_names);
    return status;
}

static void file_set_free(file_set *set)
{
    for (int64_t i = 0; i < set->n; i++)
        free(set->paths[i]);
    free(set->paths);
    free(set->labels);
    *set = (file_set){0};
}

/* Append dir/name with its label. */
static ct_status file_set_add(file_set *set, const char *dir, const char *name, int32_t label)
{
    if (set->n == set->capacity) {
        int64_t grown = set->capacity ? 2 * set->capacity : 64;
        char **paths = realloc(set->paths, sizeof *paths * (size_t)grown);
        if (paths)
            set->paths = paths;
        int32_t *labels = realloc(set->labels, sizeof *labels * (size_t)grown);
        if (labels)
            set->labels = labels;
        if (!paths || !labels)
            return ct_set_error(CT_ERR_MEMORY, "out of host memory listing %s", dir);
        set->capacity = grown;
    }
    char *path = join(dir, name);
    if (!path)
        return CT_ERR_MEMORY;
    set->paths[set->n] = path;
    set->labels[set->n] = label;
    set->n++;
    return CT_OK;
}

/* The image files of class folder `dir`, at least one. */
static ct_status list_class(const char *dir, name_list *files)
{
    CT_TRY(list_dir(dir, false, files));
    if (files->n == 0)
        return ct_set_error(CT_ERR_FORMAT,
                            "the class folder %s holds no .png, .jpg or .jpeg images: add some "
                            "or remove the folder",
                            dir);
    return CT_OK;
}

/* One class of a folder without train/ and test/: its files split by seed. */
static ct_status split_class(const char *dir, int32_t label, const ct_folder_args *args,
                             folder_plan *plan)
{
    name_list files;
    CT_TRY(list_class(dir, &files));
    int64_t n = files.n;
    int64_t n_test = (int64_t)floor((double)n * args->test_fraction + 0.5);
    if (n_test > n - 1)
        n_test = n - 1;
    int64_t *order = malloc(sizeof *order * (size_t)n);
    bool *is_test = calloc((size_t)n, sizeof *is_test);
    ct_status status = CT_OK;
    if (!order || !is_test)
        status = ct_set_error(CT_ERR_MEMORY, "out of host memory listing %s", dir);
    if (status == CT_OK) {
        ct_data_permutation(args->seed, CT_RNG_STREAM_SPLIT, (uint32_t)label, n, order);
        for (int64_t i = 0; i < n_test; i++)
            is_test[order[i]] = true;
    }
    for (int64_t i = 0; i < n && status == CT_OK; i++)
        status = file_set_add(is_test[i] ? &plan->test : &plan->train, dir, files.names[i],
                              label);
    free(order);
    free(is_test);
    name_list_free(&files);
    return status;
}

/* The images of the class folders of `root` into `set`, with the labels of
 * plan->classes; `must_be_known`: each folder must be one of them. */
static ct_status add_given_split(const char *root, bool must_be_known, folder_plan *plan,
                                 file_set *set)
{
    name_list classes;
    CT_TRY(list_dir(root, true, &classes));
    ct_status status = CT_OK;
    for (int c = 0; c < classes.n && status == CT_OK; c++) {
        char **known = bsearch(&classes.names[c], plan->classes.names, (size_t)plan->classes.n,
                               sizeof *plan->classes.names, compare_names);
        if (!known && must_be_known) {
            status = ct_set_error(CT_ERR_FORMAT,
                                  "%s/%s is a class that the training split lacks: the classes "
                                  "are the folders of train/, and test/ may only use those",
                                  root, classes.names[c]);
            break;
        }
        char *dir = join(root, classes.names[c]);
        name_list files = {0};
        status = dir ? list_class(dir, &files) : CT_ERR_MEMORY;
        for (int i = 0; status == CT_OK && i < files.n; i++)
            status = file_set_add(set, dir, files.names[i],
                                  (int32_t)(known - plan->classes.names));
        name_list_free(&files);
        free(dir);
    }
    name_list_free(&classes);
    return status;
}

/* Classes and the files of both splits. */
static ct_status plan_folder(const char *dir, const ct_folder_args *args, folder_plan *plan)
{
    char *train_dir = join(dir, "train"), *test_dir = join(dir, "test");
    ct_status status = train_dir && test_dir ? CT_OK : CT_ERR_MEMORY;
    bool given = status == CT_OK && is_dir(train_dir) && is_dir(test_dir);
    const char *root = given ? train_dir : dir;
    if (status == CT_OK)
        status = list_dir(root, true, &plan->classes);
    if (status == CT_OK && plan->classes.n == 0)
        status = ct_set_error(CT_ERR_FORMAT,
                              "%s has no class subfolders: an image folder dataset is "
                              "%s/<class>/<image>.png|.jpg, one subfolder per class",
                              root, root);
    if (status == CT_OK && given) {
        status = add_given_split(train_dir, false, plan, &plan->train);
        if (status == CT_OK)
            status = add_given_split(test_dir, true, plan, &plan->test);
    }
    for (int c = 0; status == CT_OK && !given && c < plan->classes.n; c++) {
        char *class_dir = join(dir, plan->classes.names[c]);
        status = class_dir ? split_class(class_dir, c, args, plan) : CT_ERR_MEMORY;
        free(class_dir);
    }
    free(train_dir);
    free(test_dir);
    return status;
}

/* ---- decoding ------------------------------------------------------------------- */

static ct_status decode_item(const char *path, int channels, int height, int width,
                             uint8_t *chw)
{
    ct_image image;
    CT_TRY(ct_image_decode(path, channels, &image));
    ct_image_resize_chw(&image, height, width, chw);
    ct_image_release(&image);
    return CT_OK;
}

/* Per-channel sums of x and x^2 over items, exact in integers. */
typedef struct pixel_sums {
    uint64_t sum[CT_DATASET_MAX_CHANNELS], squares[CT_DATASET_MAX_CHANNELS];
    uint64_t count; /* pixels per channel */
} pixel_sums;

static void add_sums(pixel_sums *sums, const uint8_t *chw, int channels, size_t plane)
{
    for (int c = 0; c < channels; c++)
        for (size_t i = 0; i < plane; i++) {
            uint64_t x = chw[(size_t)c * plane + i];
            sums->sum[c] += x;
            sums->squares[c] += x * x;
        }
    sums->count += plane;
}

/* The training split's statistics, decoding it again (loading "test"). */
static ct_status measure_training(const file_set *train, const ct_dataset *ds,
                                  pixel_sums *sums)
{
    size_t plane = (size_t)ds->height * (size_t)ds->width;
    uint8_t *scratch = malloc(ct_dataset_item_bytes(ds));
    if (!scratch)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory for one image");
    ct_status status = CT_OK;
    for (int64_t i = 0; i < train->n && status == CT_OK; i++) {
        status = decode_item(train->paths[i], ds->channels, ds->height, ds->width, scratch);
        if (status == CT_OK)
            add_sums(sums, scratch, ds->channels, plane);
    }
    free(scratch);
    return status;
}

static void set_normalization(ct_dataset *ds, const pixel_sums *sums)
{
    float mean[CT_DATASET_MAX_CHANNELS], std[CT_DATASET_MAX_CHANNELS];
    for (int c = 0; c < ds->channels; c++) {
        double n = (double)sums->count * CT_BYTE_MAX;
        double m = (double)sums->sum[c] / n;
        double variance = (double)sums->squares[c] / (n * CT_BYTE_MAX) - m * m;
        mean[c] = (float)m;
        /* Constant images: no spread to divide by; only shift. */
        std[c] = variance > 0 ? (float)sqrt(variance) : 1.0f;
    }
    ct_dataset_set_normalization(ds, mean, std);
}

/* The dataset of `set`, sized by the first training image where args leave
 * a field 0. */
static ct_status build(const folder_plan *plan, bool train, const ct_folder_args *args,
                       ct_dataset *ds)
{
    const file_set *set = train ? &plan->train : &plan->test;
    int channels = args->channels, height = args->height, width = args->width;
    if (!channels || !height || !width) {
        ct_image first;
        CT_TRY(ct_image_decode(plan->train.paths[0], channels, &first));
        channels = first.channels;
        height = height ? height : first.height;
        width = width ? width : first.width;
        ct_image_release(&first);
    }
    CT_TRY(ct_dataset_alloc_items(ds, set->n, channels, height, width));
    size_t item = ct_dataset_item_bytes(ds), plane = (size_t)height * (size_t)width;
    pixel_sums sums = {0};
    for (int64_t i = 0; i < set->n; i++) {
        uint8_t *chw = ds->pixels + (size_t)i * item;
        CT_TRY(decode_item(set->paths[i], channels, height, width, chw));
        ds->labels[i] = set->labels[i];
        if (train)
            add_sums(&sums, chw, channels, plane);
    }
    if (!train)
        CT_TRY(measure_training(&plan->train, ds, &sums));
    set_normalization(ds, &sums);
    return ct_dataset_set_class_names(ds, plan->classes.n,
                                      (const char *const *)plan->classes.names);
}

ct_status ct_dataset_load_folder(const char *dir, const char *split, const ct_folder_args *args,
                                 ct_dataset **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_dataset_load_folder: out is NULL");
    *out = NULL;
    if (!dir)
        return ct_set_error(CT_ERR_ARG, "ct_dataset_load_folder: dir is NULL");
    if (!split || (strcmp(split, "train") != 0 && strcmp(split, "test") != 0))
        return ct_set_error(CT_ERR_ARG, "unknown split '%s' of the image folder %s: use train "
                            "or test", split ? split : "(null)", dir);
    ct_folder_args a = args ? *args : (ct_folder_args){0};
    if (a.test_fraction == 0.0)
        a.test_fraction = FOLDER_DEFAULT_TEST_FRACTION;
    if ((a.channels != 0 && a.channels != 1 && a.channels != 3) || a.height < 0 ||
        a.width < 0 || a.height > CT_IMAGE_MAX_SIDE || a.width > CT_IMAGE_MAX_SIDE ||
        !(a.test_fraction > 0.0 && a.test_fraction < 1.0))
        return ct_set_error(CT_ERR_ARG,
                            "ct_dataset_load_folder: channels must be 0, 1 or 3 (got %d), "
                            "height and width from 0 to %d (got %dx%d), test_fraction between "
                            "0 and 1 (got %g)",
                            a.channels, CT_IMAGE_MAX_SIDE, a.height, a.width, a.test_fraction);
    if (!is_dir(dir))
        return ct_set_error(CT_ERR_IO, "the image folder %s does not exist or is not a folder",
                            dir);
    bool train = strcmp(split, "train") == 0;
    folder_plan plan = {0};
    ct_status status = plan_folder(dir, &a, &plan);
    if (status == CT_OK && !train && plan.test.n == 0)
        status = ct_set_error(CT_ERR_FORMAT,
                              "the test split of %s is empty: each class needs at least 2 "
                              "images, and round(count * test_fraction %g) of them must be >= 1",
                              dir, a.test_fraction);
    ct_dataset *ds = NULL;
    if (status == CT_OK) {
        ds = ct_dataset_create();
        status = ds ? build(&plan, train, &a, ds) : CT_ERR_MEMORY;
    }
    name_list_free(&plan.classes);
    file_set_free(&plan.train);
    file_set_free(&plan.test);
    if (status != CT_OK) {
        ct_dataset_free(ds);
        return status;
    }
    *out = ds;
    return CT_OK;
}

/* "folder" by name has no default location and takes the default args. */
static ct_status load_folder(const char *dir, const char *split, ct_dataset **out)
{
    if (!dir)
        return ct_set_error(CT_ERR_ARG,
                            "the folder dataset needs a directory: one subfolder of .png/.jpg "
                            "images per class, optionally under train/ and test/ "
                            "(--data-dir DIR)");
    return ct_dataset_load_folder(dir, split, NULL, out);
}

const ct_dataset_format ct_folder_format = {"folder", load_folder};
