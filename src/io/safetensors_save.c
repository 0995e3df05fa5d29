/*
 * Writing safetensors files (safetensors.h): hash the data, build the
 * header (with the hash in its metadata) in memory, then write header and
 * data atomically (atomic_file.h), so that a crash or an error at any point
 * leaves either the old file or the new one.
 */
#define _POSIX_C_SOURCE 200809L

#include "io/safetensors.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/checksum.h"
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
    for (int i = 0; i < n_meta; i++) {
        if (!keys[i] || !values[i] || !ct_json_utf8_valid(keys[i], strlen(keys[i])) ||
            !ct_json_utf8_valid(values[i], strlen(values[i])))
            return ct_set_error(CT_ERR_ARG, "ct_st_save %s: metadata %d needs a UTF-8 key and "
                                "value", path, i);
        if (strcmp(keys[i], CT_ST_CHECKSUM_KEY) == 0)
            return ct_set_error(CT_ERR_ARG, "ct_st_save %s: the metadata key \"%s\" is "
                                "reserved: the save writes the data's checksum there", path,
                                CT_ST_CHECKSUM_KEY);
    }
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

/* CT_ST_CHECKSUM_KEY's value: the hash of the data section, which is the
 * tensors' bytes back to back. */
static void st_checksum_text(int n, const ct_st_tensor *tensors, char *out, size_t capacity)
{
    ct_xxh64_state state;
    ct_xxh64_init(&state, 0);
    for (int i = 0; i < n; i++)
        ct_xxh64_update(&state, tensors[i].data, tensors[i].bytes);
    snprintf(out, capacity, CT_ST_CHECKSUM_ALGO ":%016" PRIx64, ct_xxh64_digest(&state));
}

/* The JSON header, padded with spaces so that the data starts 8-aligned. */
static ct_status st_build_header(const char *path, int n, const ct_st_tensor *tensors, int n_meta,
                                 const char *const *keys, const char *const *values,
                                 st_text *text)
{
    char checksum[64];
    st_checksum_text(n, tensors, checksum, sizeof checksum);
    st_text_add(text, "{\"" CT_ST_METADATA_KEY "\":{");
    for (int i = 0; i < n_meta; i++) {
        st_text_add_json_string(text, keys[i]);
        st_text_add(text, ":");
        st_text_add_json_string(text, values[i]);
        st_text_add(text, ",");
    }
    st_text_add(text, "\"" CT_ST_CHECKSUM_KEY "\":\"");
    st_text_add(text, checksum);
    st_text_add(text, n > 0 ? "\"}," : "\"}");
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

/* The file's chunks: the length prefix, the header, each tensor's bytes. */
static ct_status st_write(const char *path, const st_text *header, int n,
                          const ct_st_tensor *tensors)
{
    unsigned char prefix[CT_ST_LENGTH_PREFIX_BYTES];
    for (int i = 0; i < CT_ST_LENGTH_PREFIX_BYTES; i++)
        prefix[i] = (unsigned char)((uint64_t)header->len >> (8 * i));
    const void **data = malloc(sizeof *data * (size_t)(n + 2));
    size_t *bytes = malloc(sizeof *bytes * (size_t)(n + 2));
    ct_status status = CT_OK;
    if (!data || !bytes) {
        status = ct_set_error(CT_ERR_MEMORY, "ct_st_save %s: out of memory", path);
    } else {
        data[0] = prefix;
        bytes[0] = sizeof prefix;
        data[1] = header->data;
        bytes[1] = header->len;
        for (int i = 0; i < n; i++) {
            data[i + 2] = tensors[i].data;
            bytes[i + 2] = tensors[i].bytes;
        }
        status = ct_write_file_atomic("ct_st_save", path, n + 2, data, bytes);
    }
    free(data);
    free(bytes);
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
    if (status == CT_OK)
        status = st_write(path, &header, n, tensors);
    free(header.data);
    return status;
}
