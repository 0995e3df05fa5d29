/*
 * Writing safetensors files (safetensors.h): build the header in memory,
 * write header and data to a temporary file beside the target, fsync it,
 * rename it over the target and fsync the directory, so that a crash or an
 * error at any point leaves either the old file or the new one, never half.
 */
#define _POSIX_C_SOURCE 200809L

#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/json.h"

/* The format pads the header with spaces so that the data starts aligned. */
#define ST_HEADER_ALIGN 8

/* A growing text buffer; `failed` sticks after the first allocation error. */
typedef struct st_text {
    char *data;
    size_t len, cap;
    bool failed;
} st_text;

static char *st_text_reserve(st_text *text, size_t extra)
{
    if (text->failed)
        return NULL;
    if (text->cap - text->len <= extra) {
        size_t capacity = text->cap ? text->cap : 256;
        while (capacity - text->len <= extra)
            capacity *= 2;
        char *grown = realloc(text->data, capacity);
        if (!grown) {
            text->failed = true;
            return NULL;
        }
        text->data = grown;
        text->cap = capacity;
    }
    return text->data + text->len;
}

static void st_text_add(st_text *text, const char *s)
{
    size_t len = strlen(s);
    char *end = st_text_reserve(text, len);
    if (end) {
        memcpy(end, s, len + 1);
        text->len += len;
    }
}

static void st_text_add_u64(st_text *text, uint64_t value)
{
    char digits[24];
    snprintf(digits, sizeof digits, "%" PRIu64, value);
    st_text_add(text, digits);
}

static void st_text_add_json_string(st_text *text, const char *s)
{
    size_t len = strlen(s);
    size_t need = ct_json_escape(NULL, 0, s, len);
    char *end = st_text_reserve(text, need);
    if (end) {
        ct_json_escape(end, need + 1, s, len);
        text->len += need;
    }
}

static int st_compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first string that appears twice, or NULL (or "" when out of memory). */
static const char *st_find_duplicate(int n, const char *const *strings)
{
    if (n < 2)
        return NULL;
    const char **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted)
        return "";
    memcpy(sorted, strings, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, st_compare_strings);
    const char *duplicate = NULL;
    for (int i = 1; i < n && !duplicate; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            duplicate = sorted[i];
    free(sorted);
    return duplicate;
}

static ct_status st_check_tensor(const char *path, const ct_st_tensor *tensor)
{
    if (!tensor->name || !ct_json_utf8_valid(tensor->name, strlen(tensor->name)) ||
        strcmp(tensor->name, CT_ST_METADATA_KEY) == 0)
        return ct_set_error(CT_ERR_ARG, "ct_st_save %s: every tensor needs a UTF-8 name other "
                            "than \"__metadata__\"", path);
    size_t element_size = ct_st_dtype_size(tensor->dtype);
    if (element_size == 0)
        return ct_set_error(CT_ERR_ARG, "ct_st_save %s: tensor '%s' has an invalid dtype %d",
                            path, tensor->name, (int)tensor->dtype);
    if (tensor->ndim < 0 || tensor->ndim > CT_MAX_DIMS)
        return ct_set_error(CT_ERR_ARG, "ct_st_save %s: tensor '%s' has %d dims (0 to %d "
                            "allowed)", path, tensor->name, tensor->ndim, CT_MAX_DIMS);
    for (int i = 0; i < tensor->ndim; i++)
        if (tensor->shape[i] < 0)
            return ct_set_error(CT_ERR_ARG, "ct_st_save %s: tensor '%s' has a negative dim",
                                path, tensor->name);
    uint64_t bytes;
    if (!ct_st_shape_bytes(tensor->ndim, tensor->shape, element_size, &bytes) ||
        bytes != tensor->bytes)
        return ct_set_error(CT_ERR_ARG, "ct_st_save %s: tensor '%s' says %zu bytes, but its "
                            "shape and dtype need %" PRIu64, path, tensor->name, tensor->bytes,
                            bytes);
    if (bytes > 0 && !tensor->data)
        return ct_set_error(CT_ERR_ARG, "ct_st_save %s: tensor '%s' has no data", path,
                            tensor->name);
    return CT_OK;
}

static ct_status st_check_save_args(const char *path, int n, const ct_st_tensor *tensors,
                                    int n_meta, const char *const *keys,
                                    const char *const *values)
{
    if (n < 0 || (n > 0 && !tensors) || n_meta < 0 || (n_meta > 0 && (!keys || !values)))
        return ct_set_error(CT_ERR_ARG, "ct_st_save %s: bad tensor or metadata arrays", path);
    for (int i = 0; i < n; i++) {
        ct_status status = st_check_tensor(path, &tensors[i]);
        if (status != CT_OK)
            return status;
    }
    for (int i = 0; i < n_meta; i++)
        if (!keys[i] || !values[i] || !ct_json_utf8_valid(keys[i], strlen(keys[i])) ||
            !ct_json_utf8_valid(values[i], strlen(values[i])))
            return ct_set_error(CT_ERR_ARG, "ct_st_save %s: metadata %d needs a UTF-8 key and "
                                "value", path, i);
    const char **names = malloc(((size_t)n + 1) * sizeof *names);
    if (!names)
        return ct_set_error(CT_ERR_MEMORY, "ct_st_save %s: out of memory", path);
    for (int i = 0; i < n; i++)
        names[i] = tensors[i].name;
    const char *duplicate = st_find_duplicate(n, names);
    free(names);
    if (!duplicate)
        duplicate = st_find_duplicate(n_meta, keys);
    if (duplicate)
        return ct_set_error(CT_ERR_ARG, "ct_st_save %s: the name '%s' is given twice", path,
                            duplicate);
    return CT_OK;
}

/* The JSON header, padded with spaces so that the data starts 8-aligned. */
static ct_status st_build_header(const char *path, int n, const ct_st_tensor *tensors, int n_meta,
                                 const char *const *keys, const char *const *values,
                                 st_text *text)
{
    st_text_add(text, "{");
    if (n_meta > 0) {
        st_text_add(text, "\"" CT_ST_METADATA_KEY "\":{");
        for (int i = 0; i < n_meta; i++) {
            st_text_add(text, i ? "," : "");
            st_text_add_json_string(text, keys[i]);
            st_text_add(text, ":");
            st_text_add_json_string(text, values[i]);
        }
        st_text_add(text, n > 0 ? "}," : "}");
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        st_text_add(text, i ? "," : "");
        st_text_add_json_string(text, tensors[i].name);
        st_text_add(text, ":{\"dtype\":\"");
        st_text_add(text, ct_st_dtype_name(tensors[i].dtype));
        st_text_add(text, "\",\"shape\":[");
        for (int d = 0; d < tensors[i].ndim; d++) {
            st_text_add(text, d ? "," : "");
            st_text_add_u64(text, (uint64_t)tensors[i].shape[d]);
        }
        st_text_add(text, "],\"data_offsets\":[");
        st_text_add_u64(text, offset);
        st_text_add(text, ",");
        offset += tensors[i].bytes;
        st_text_add_u64(text, offset);
        st_text_add(text, "]}");
    }
    st_text_add(text, "}");
    while (!text->failed && (CT_ST_LENGTH_PREFIX_BYTES + text->len) % ST_HEADER_ALIGN != 0)
        st_text_add(text, " ");
    if (text->failed)
        return ct_set_error(CT_ERR_MEMORY, "ct_st_save %s: out of memory for the header", path);
    return CT_OK;
}

/* Write, flush and fsync the whole file to an open stream. */
static bool st_write_stream(FILE *stream, const st_text *header, int n,
                            const ct_st_tensor *tensors)
{
    unsigned char prefix[CT_ST_LENGTH_PREFIX_BYTES];
    for (int i = 0; i < CT_ST_LENGTH_PREFIX_BYTES; i++)
        prefix[i] = (unsigned char)((uint64_t)header->len >> (8 * i));
    bool ok = fwrite(prefix, 1, sizeof prefix, stream) == sizeof prefix &&
              fwrite(header->data, 1, header->len, stream) == header->len;
    for (int i = 0; ok && i < n; i++)
        ok = tensors[i].bytes == 0 ||
             fwrite(tensors[i].data, 1, tensors[i].bytes, stream) == tensors[i].bytes;
    return ok && fflush(stream) == 0 && fsync(fileno(stream)) == 0;
}

/* fsync the directory holding path, so that the rename itself is durable. */
static ct_status st_sync_directory(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *directory = !slash ? strdup(".") : slash == path ? strdup("/")
                                                           : strndup(path, (size_t)(slash - path));
    if (!directory)
        return ct_set_error(CT_ERR_MEMORY, "ct_st_save %s: out of memory", path);
    int fd = open(directory, O_RDONLY | O_DIRECTORY);
    /* Some file systems cannot sync a directory (EINVAL); nothing to do there. */
    bool ok = fd >= 0 && (fsync(fd) == 0 || errno == EINVAL || errno == ENOTSUP);
    int saved_errno = errno;
    if (fd >= 0)
        close(fd);
    free(directory);
    if (!ok)
        return ct_set_error(CT_ERR_IO, "%s: saved, but syncing its directory failed (%s): the "
                            "file may be lost if the machine crashes now", path,
                            strerror(saved_errno));
    return CT_OK;
}

/* Write the file to temp_path and rename it over path; on failure remove
 * temp_path, so that path keeps whatever it held before. */
static ct_status st_replace_file(const char *path, const char *temp_path, const st_text *header,
                                 int n, const ct_st_tensor *tensors)
{
    FILE *stream = fopen(temp_path, "wb");
    if (!stream)
        return ct_set_error(CT_ERR_IO, "%s: cannot create the temporary file %s: %s: is the "
                            "directory writable?", path, temp_path, strerror(errno));
    bool written = st_write_stream(stream, header, n, tensors);
    int write_errno = errno;
    if (fclose(stream) != 0 && written) {
        written = false;
        write_errno = errno;
    }
    ct_status status = CT_OK;
    if (!written)
        status = ct_set_error(CT_ERR_IO, "%s: writing %s failed: %s: is the disk full? (the old "
                              "file, if any, is unchanged)", path, temp_path,
                              strerror(write_errno));
    else if (rename(temp_path, path) != 0)
        status = ct_set_error(CT_ERR_IO, "%s: cannot replace it with %s: %s (the old file, if "
                              "any, is unchanged)", path, temp_path, strerror(errno));
    if (status != CT_OK)
        remove(temp_path);
    return status;
}

ct_status ct_st_save(const char *path, int n, const ct_st_tensor *tensors, int n_meta,
                     const char *const *meta_keys, const char *const *meta_values)
{
    if (!path || !*path)
        return ct_set_error(CT_ERR_ARG, "ct_st_save: no path");
    struct stat info;
    if (stat(path, &info) == 0 && S_ISDIR(info.st_mode))
        return ct_set_error(CT_ERR_IO, "%s: is a directory: give a file name to save to", path);
    ct_status status = st_check_save_args(path, n, tensors, n_meta, meta_keys, meta_values);
    st_text header = {0};
    if (status == CT_OK)
        status = st_build_header(path, n, tensors, n_meta, meta_keys, meta_values, &header);
    size_t temp_len = strlen(path) + 32;
    char *temp_path = status == CT_OK ? malloc(temp_len) : NULL;
    if (status == CT_OK && !temp_path)
        status = ct_set_error(CT_ERR_MEMORY, "ct_st_save %s: out of memory", path);
    if (status == CT_OK) {
        snprintf(temp_path, temp_len, "%s.tmp.%ld", path, (long)getpid());
        status = st_replace_file(path, temp_path, &header, n, tensors);
    }
    if (status == CT_OK)
        status = st_sync_directory(path);
    free(temp_path);
    free(header.data);
    return status;
}
