/*
 * IDX datasets (MNIST, Fashion-MNIST): u8 images [N, rows, cols] and u8
 * labels [N], each file raw or gzipped.
 *
 * The format (LeCun's MNIST page): a big-endian u32 magic 0x000008DD, where
 * 0x08 says "unsigned byte" and DD the number of dimensions, then DD
 * big-endian u32 sizes, then the data row-major.  Images are 0x00000803,
 * labels 0x00000801.
 *
 * The whole split is read into memory as bytes (47 MB for the 60,000
 * training images); a batch is normalized into floats when it is asked for,
 * through a 256-entry table.  Corrupt input never crashes: the header is
 * checked before anything is allocated from it, and the data is read in
 * growing chunks, so a header that claims a billion images in a 100-byte
 * file fails as truncated instead of allocating gigabytes first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef CT_HAVE_ZLIB
#include <zlib.h>
#endif

#include "core/error.h"
#include "data/dataset.h"
#include "data/idx.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_GZIP_MAGIC 0x1f8bu  /* the first two bytes of any gzip file */
#define IDX_MAX_SIDE 4096       /* rows and cols above this are a corrupt header */
#define IDX_MAX_COUNT (1 << 28) /* more items than this too */
#define IDX_MAX_CLASSES 256     /* labels are bytes */
#define IDX_FIRST_CHUNK (1 << 20)

/* ---- reading raw or gzipped files ----------------------------------------- */

typedef struct idx_file {
    const char *path;
#ifdef CT_HAVE_ZLIB
    gzFile gz;
#else
    FILE *file;
#endif
} idx_file;

static ct_status idx_open(const char *path, idx_file *f)
{
    f->path = path;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return ct_set_error(CT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat info;
    if (fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
        close(fd);
        return ct_set_error(CT_ERR_IO, "%s is a directory, not an IDX file", path);
    }
#ifdef CT_HAVE_ZLIB
    f->gz = gzdopen(fd, "rb");
    if (!f->gz) {
        close(fd);
        return ct_set_error(CT_ERR_MEMORY, "cannot read %s: out of memory for zlib", path);
    }
#else
    f->file = fdopen(fd, "rb");
    if (!f->file) {
        int saved = errno;
        close(fd);
        return ct_set_error(CT_ERR_IO, "cannot open %s: %s", path, strerror(saved));
    }
#endif
    return CT_OK;
}

static void idx_close(idx_file *f)
{
#ifdef CT_HAVE_ZLIB
    if (f->gz)
        gzclose(f->gz);
    f->gz = NULL;
#else
    if (f->file)
        fclose(f->file);
    f->file = NULL;
#endif
}

/* Read up to `want` bytes; *got says how many came (fewer only at the end). */
static ct_status idx_read(idx_file *f, void *buffer, size_t want, size_t *got)
{
    *got = 0;
#ifdef CT_HAVE_ZLIB
    while (*got < want) {
        size_t piece = want - *got;
        if (piece > (size_t)1 << 30)
            piece = (size_t)1 << 30; /* gzread takes an unsigned int */
        int n = gzread(f->gz, (char *)buffer + *got, (unsigned)piece);
        if (n < 0) {
            int code = 0;
            const char *message = gzerror(f->gz, &code);
            if (code == Z_ERRNO)
                message = strerror(errno);
            return ct_set_error(CT_ERR_FORMAT,
                                "cannot read %s: %s; the file is corrupt: fetch it again",
                                f->path, message);
        }
        if (n == 0)
            break;
        *got += (size_t)n;
    }
#else
    *got = fread(buffer, 1, want, f->file);
    if (*got < want && ferror(f->file))
        return ct_set_error(CT_ERR_IO, "cannot read %s: %s", f->path, strerror(errno));
#endif
    return CT_OK;
}

static uint32_t big_endian_u32(const uint8_t *bytes)
{
    return (uint32_t)bytes[0] << 24 | (uint32_t)bytes[1] << 16 | (uint32_t)bytes[2] << 8 |
           bytes[3];
}

/* Read the magic and `n_dims` sizes, and check the magic. */
static ct_status read_header(idx_file *f, uint32_t magic, int n_dims, uint32_t *dims)
{
    uint8_t header[16];
    size_t want = 4 * (size_t)(1 + n_dims), got = 0;
    CT_TRY(idx_read(f, header, want, &got));
    if (got < 4)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s is too short to be an IDX file (%zu bytes): the download may "
                            "have failed; fetch it again",
                            f->path, got);
    uint32_t found = big_endian_u32(header);
    if (found != magic) {
        const char *hint = "it is not an IDX file of this kind";
        if (found >> 16 == IDX_GZIP_MAGIC) {
#ifdef CT_HAVE_ZLIB
            hint = "is the file still gzipped? (it looks compressed twice: gunzip it once)";
#else
            hint = "is the file still gzipped? this build of cuttle has no zlib: unpack it "
                   "with `gunzip -k`, or install zlib1g-dev and rebuild";
#endif
        } else if (found == IDX_MAGIC_LABELS) {
            hint = "this is a label file: are the image and label files swapped?";
        } else if (found == IDX_MAGIC_IMAGES) {
            hint = "this is an image file: are the image and label files swapped?";
        }
        return ct_set_error(CT_ERR_FORMAT, "expected IDX magic 0x%08x in %s, got 0x%08x: %s",
                            magic, f->path, found, hint);
    }
    if (got < want)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s is truncated inside its header (%zu of %zu bytes): fetch it "
                            "again",
                            f->path, got, want);
    for (int d = 0; d < n_dims; d++)
        dims[d] = big_endian_u32(header + 4 * (1 + d));
    return CT_OK;
}

/* Read exactly `bytes` of data into a new buffer, growing it as data
 * arrives, then make sure nothing follows.  `what` describes the data. */
static ct_status read_body(idx_file *f, size_t bytes, const char *what, uint8_t **out)
{
    *out = NULL;
    uint8_t *data = NULL;
    size_t have = 0, capacity = 0;
    while (have < bytes) {
        if (have == capacity) {
            size_t grown = capacity ? capacity * 2 : IDX_FIRST_CHUNK;
            if (grown > bytes)
                grown = bytes;
            uint8_t *bigger = realloc(data, grown);
            if (!bigger) {
                free(data);
                return ct_set_error(CT_ERR_MEMORY, "out of memory reading %s (%zu bytes)",
                                    f->path, grown);
            }
            data = bigger;
            capacity = grown;
        }
        size_t want = capacity - have, got = 0;
        ct_status status = idx_read(f, data + have, want, &got);
        if (status != CT_OK) {
            free(data);
            return status;
        }
        have += got;
        if (got < want)
            break; /* the end of the file */
    }
    if (have < bytes) {
        free(data);
        return ct_set_error(CT_ERR_FORMAT,
                            "%s is truncated: its header promises %s (%zu bytes of data) but "
                            "only %zu bytes follow; the download may be incomplete: fetch it "
                            "again",
                            f->path, what, bytes, have);
    }
    uint8_t extra;
    size_t got = 0;
    ct_status status = idx_read(f, &extra, 1, &got);
    if (status == CT_OK && got != 0)
        status = ct_set_error(CT_ERR_FORMAT,
                              "%s has data past the %s its header promises: the header or the "
                              "file is corrupt",
                              f->path, what);
    if (status != CT_OK) {
        free(data);
        return status;
    }
    *out = data;
    return CT_OK;
}

static ct_status check_count(const char *path, uint32_t n, const char *items)
{
    if (n == 0)
        return ct_set_error(CT_ERR_FORMAT, "%s holds no %s: the header says 0", path, items);
    if (n > IDX_MAX_COUNT)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s claims %u %s, more than the %d cuttle accepts: the header is "
                            "corrupt",
                            path, n, items, IDX_MAX_COUNT);
    return CT_OK;
}

static ct_status load_images(const char *path, ct_dataset *ds)
{
    idx_file f = {0};
    CT_TRY(idx_open(path, &f));
    uint32_t dims[3];
    ct_status status = read_header(&f, IDX_MAGIC_IMAGES, 3, dims);
    if (status == CT_OK)
        status = check_count(path, dims[0], "images");
    if (status == CT_OK &&
        (dims[1] == 0 || dims[2] == 0 || dims[1] > IDX_MAX_SIDE || dims[2] > IDX_MAX_SIDE))
        status = ct_set_error(CT_ERR_FORMAT,
                              "%s claims images of %ux%u pixels; each side must be from 1 to "
                              "%d: the header is corrupt",
                              path, dims[1], dims[2], IDX_MAX_SIDE);
    if (status == CT_OK) {
        char what[96];
        snprintf(what, sizeof what, "%u images of %ux%u", dims[0], dims[1], dims[2]);
        size_t bytes = (size_t)dims[0] * dims[1] * dims[2];
        status = read_body(&f, bytes, what, &ds->pixels);
    }
    idx_close(&f);
    if (status == CT_OK) {
        ds->n = dims[0];
        ds->channels = 1;
        ds->height = (int)dims[1];
        ds->width = (int)dims[2];
    }
    return status;
}

static ct_status load_labels(const char *path, const char *images_path, ct_dataset *ds)
{
    idx_file f = {0};
    CT_TRY(idx_open(path, &f));
    uint32_t n = 0;
    uint8_t *bytes = NULL;
    ct_status status = read_header(&f, IDX_MAGIC_LABELS, 1, &n);
    if (status == CT_OK)
        status = check_count(path, n, "labels");
    if (status == CT_OK && (int64_t)n != ds->n)
        status = ct_set_error(CT_ERR_FORMAT,
                              "%s holds %u labels but %s holds %lld images: they must come "
                              "from the same split",
                              path, n, images_path, (long long)ds->n);
    if (status == CT_OK) {
        char what[64];
        snprintf(what, sizeof what, "%u labels", n);
        status = read_body(&f, n, what, &bytes);
    }
    idx_close(&f);
    if (status == CT_OK) {
        ds->labels = malloc(sizeof *ds->labels * (size_t)n);
        if (!ds->labels)
            status = ct_set_error(CT_ERR_MEMORY, "out of host memory for %u labels", n);
    }
    for (int64_t i = 0; status == CT_OK && i < ds->n; i++) {
        if (bytes[i] >= ds->n_classes)
            status = ct_set_error(CT_ERR_FORMAT,
                                  "%s: label %u of item %lld is out of range for %d classes: "
                                  "the file is corrupt or belongs to another dataset",
                                  path, bytes[i], (long long)i, ds->n_classes);
        else
            ds->labels[i] = bytes[i];
    }
    free(bytes);
    return status;
}

/* ---- public API ---------------------------------------------------------------- */

ct_status ct_dataset_load_idx(const char *images_path, const char *labels_path, int n_classes,
                              ct_dataset **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_dataset_load_idx: out is NULL");
    *out = NULL;
    if (!images_path || !labels_path)
        return ct_set_error(CT_ERR_ARG, "ct_dataset_load_idx: both file paths are required");
    if (n_classes < 1 || n_classes > IDX_MAX_CLASSES)
        return ct_set_error(CT_ERR_ARG,
                            "ct_dataset_load_idx: %d classes; IDX labels are bytes, so from 1 "
                            "to %d",
                            n_classes, IDX_MAX_CLASSES);
    ct_dataset *ds = ct_dataset_create();
    if (!ds)
        return CT_ERR_MEMORY;
    ct_status status = ct_dataset_set_class_names(ds, n_classes, NULL);
    if (status == CT_OK)
        status = load_images(images_path, ds);
    if (status == CT_OK)
        status = load_labels(labels_path, images_path, ds);
    if (status != CT_OK) {
        ct_dataset_free(ds);
        return status;
    }
    *out = ds;
    return CT_OK;
}

static const char *const fashion_mnist_classes[] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot",
};

typedef struct dataset_info {
    const char *name;
    const char *default_dir; /* NULL: no default location */
    const char *package;     /* the Debian package that fills default_dir */
    float mean, std;         /* of the training pixels, scaled to [0, 1] */
    int n_classes;
    const char *const *class_names; /* NULL: the digits */
} dataset_info;

static const dataset_info fashion_mnist = {
    "fashion-mnist", "/usr/share/datasets/fashion-mnist", "dataset-fashion-mnist", 0.2860f,
    0.3530f, 10, fashion_mnist_classes,
};

static const dataset_info mnist = {"mnist", NULL, NULL, 0.1307f, 0.3081f, 10, NULL};

static bool file_exists(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0;
}

/* "<dir>/<stem>" if it exists, else "<dir>/<stem>.gz" if that exists; else
 * an error naming what is missing and what to do. */
static ct_status find_file(const dataset_info *info, const char *dir, bool default_dir,
                           const char *stem, char *path, size_t capacity)
{
    static const char *const suffixes[] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        int length = snprintf(path, capacity, "%s/%s%s", dir, stem, suffixes[i]);
        if (length < 0 || (size_t)length >= capacity)
            return ct_set_error(CT_ERR_ARG, "dataset directory path '%s' is too long", dir);
        if (file_exists(path))
            return CT_OK;
    }
    if (default_dir)
        return ct_set_error(CT_ERR_IO,
                            "%s: %s/%s.gz is missing: install the data with `apt-get install "
                            "%s`, or point cuttle at a directory that holds the IDX files "
                            "(--data-dir DIR)",
                            info->name, dir, stem, info->package);
    return ct_set_error(CT_ERR_IO,
                        "%s: %s/%s.gz is missing (and so is %s/%s): put the %s IDX files, "
                        "raw or gzipped, in %s",
                        info->name, dir, stem, dir, stem, info->name, dir);
}

/* The split of a known IDX dataset, from dir or its default location. */
static ct_status load_known(const dataset_info *info, const char *dir, const char *split,
                            ct_dataset **out)
{
    const char *prefix = strcmp(split, "train") == 0 ? "train" : "t10k";
    bool default_dir = dir == NULL;
    if (default_dir)
        dir = info->default_dir;
    if (!dir)
        return ct_set_error(CT_ERR_ARG,
                            "%s has no default location on this system: download its four IDX "
                            "files into a directory and pass it (--data-dir DIR)",
                            info->name);

    char images_stem[64], labels_stem[64], images_path[4096], labels_path[4096];
    snprintf(images_stem, sizeof images_stem, "%s-images-idx3-ubyte", prefix);
    snprintf(labels_stem, sizeof labels_stem, "%s-labels-idx1-ubyte", prefix);
    CT_TRY(find_file(info, dir, default_dir, images_stem, images_path, sizeof images_path));
    CT_TRY(find_file(info, dir, default_dir, labels_stem, labels_path, sizeof labels_path));

    ct_dataset *ds = NULL;
    CT_TRY(ct_dataset_load_idx(images_path, labels_path, info->n_classes, &ds));
    ct_dataset_set_normalization(ds, &info->mean, &info->std);
    ct_status status = ct_dataset_set_class_names(ds, info->n_classes, info->class_names);
    if (status != CT_OK) {
        ct_dataset_free(ds);
        return status;
    }
    *out = ds;
    return CT_OK;
}

static ct_status load_fashion_mnist(const char *dir, const char *split, ct_dataset **out)
{
    return load_known(&fashion_mnist, dir, split, out);
}

static ct_status load_mnist(const char *dir, const char *split, ct_dataset **out)
{
    return load_known(&mnist, dir, split, out);
}

const ct_dataset_format ct_idx_fashion_mnist_format = {"fashion-mnist", load_fashion_mnist};
const ct_dataset_format ct_idx_mnist_format = {"mnist", load_mnist};
