/*
 * Reading safetensors files (safetensors.h); writing is in safetensors_save.c.
 *
 * Loading reads the whole file: the header into one buffer (parsed in place
 * by io/json.c; tensor names and metadata point into the parsed strings) and
 * the data section into one aligned buffer.  Everything the header says is
 * checked against the file before any tensor is handed out, and the data
 * against its checksum when the metadata has one (CT_ST_CHECKSUM_KEY).
 */
#define _POSIX_C_SOURCE 200809L

#include "io/safetensors.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "io/checksum.h"
#include "io/json.h"

/* The reference implementation refuses headers over 100 MB too. */
#define ST_MAX_HEADER_BYTES ((uint64_t)100 << 20)
/* root object > tensor entry > shape array; deeper is never valid. */
#define ST_MAX_JSON_DEPTH 3
#define ST_DATA_ALIGN 64

typedef struct st_dtype_info {
    const char *name;
    ct_dtype dtype;
    size_t size;
} st_dtype_info;

static const st_dtype_info st_dtypes[] = {
    {"F32", CT_F32, 4}, {"F16", CT_F16, 2}, {"BF16", CT_BF16, 2}, {"I8", CT_I8, 1},
    {"U8", CT_U8, 1},   {"I32", CT_I32, 4}, {"I64", CT_I64, 8},
};
#define ST_N_DTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

/* Valid in the format, but not handled by cuttle. */
static const char *const st_foreign_dtypes[] = {"BOOL", "I16", "U16", "U32", "U64",
                                                "F8_E4M3", "F8_E5M2", "C64"};

struct ct_st_file {
    ct_json_doc header;
    unsigned char *data; /* the data section */
    ct_st_tensor *tensors;
    int n_tensors;
    const ct_st_tensor **by_name; /* sorted by name, for ct_st_find */
    const char **meta_keys;
    const char **meta_values;
    int n_meta;
    void **copies; /* tensors whose file offset broke their alignment */
    int n_copies;
};

/* Where a tensor's bytes are, while loading. */
typedef struct st_span {
    uint64_t begin, end;
    int header_index;
} st_span;

static const st_dtype_info *st_dtype_by_name(const char *name)
{
    for (int i = 0; i < ST_N_DTYPES; i++)
        if (strcmp(st_dtypes[i].name, name) == 0)
            return &st_dtypes[i];
    return NULL;
}

static const st_dtype_info *st_dtype_info_of(ct_dtype dtype)
{
    for (int i = 0; i < ST_N_DTYPES; i++)
        if (st_dtypes[i].dtype == dtype)
            return &st_dtypes[i];
    return NULL;
}

const char *ct_st_dtype_name(ct_dtype dtype)
{
    const st_dtype_info *info = st_dtype_info_of(dtype);
    return info ? info->name : NULL;
}

size_t ct_st_dtype_size(ct_dtype dtype)
{
    const st_dtype_info *info = st_dtype_info_of(dtype);
    return info ? info->size : 0;
}

/* "[2, 3]" into out. */
static const char *st_format_shape(char *out, size_t cap, int ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (used < cap)
        snprintf(out + used, cap - used, "]");
    return out;
}

static bool st_is_foreign_dtype(const char *name)
{
    for (size_t i = 0; i < sizeof st_foreign_dtypes / sizeof st_foreign_dtypes[0]; i++)
        if (strcmp(st_foreign_dtypes[i], name) == 0)
            return true;
    return false;
}

bool ct_st_shape_bytes(int ndim, const int64_t *shape, size_t element_size, uint64_t *out)
{
    uint64_t bytes = element_size;
    for (int i = 0; i < ndim; i++) {
        uint64_t dim = (uint64_t)shape[i];
        if (dim != 0 && bytes > UINT64_MAX / dim)
            return false;
        bytes *= dim;
    }
    *out = bytes;
    return true;
}

/* ---- loading ------------------------------------------------------------ */

static uint64_t st_read_u64_le(const unsigned char *bytes)
{
    uint64_t value = 0;
    for (int i = CT_ST_LENGTH_PREFIX_BYTES - 1; i >= 0; i--)
        value = value << 8 | bytes[i];
    return value;
}

static ct_status st_read_exact(const char *path, FILE *file, void *buffer, size_t bytes,
                               const char *what)
{
    if (bytes > 0 && fread(buffer, 1, bytes, file) != bytes)
        return ct_set_error(CT_ERR_IO, "%s: cannot read the %s (%zu bytes): %s", path, what,
                            bytes, ferror(file) ? strerror(errno) : "the file got shorter");
    return CT_OK;
}

/* Check the length prefix against the file size. */
static ct_status st_check_prefix(const char *path, const unsigned char *prefix, uint64_t file_size,
                                 uint64_t header_bytes)
{
    uint64_t after_prefix = file_size - CT_ST_LENGTH_PREFIX_BYTES;
    if (memcmp(prefix, "PK\x03\x04", 4) == 0)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s: this is a zip archive (a PyTorch .pt/.pth checkpoint?), not "
                            "safetensors: convert it with safetensors.torch.save_file",
                            path);
    if (header_bytes > after_prefix)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s: truncated or not safetensors: the header length says %" PRIu64
                            " bytes of JSON, but only %" PRIu64
                            " bytes follow it: was the download or save interrupted?",
                            path, header_bytes, after_prefix);
    if (header_bytes > ST_MAX_HEADER_BYTES)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s: the header length (%" PRIu64 " bytes) is over the %" PRIu64
                            " byte limit: is this a safetensors file?",
                            path, header_bytes, ST_MAX_HEADER_BYTES);
    if (header_bytes < 2)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s: the header length (%" PRIu64 " bytes) is too small for a JSON "
                            "object: is this a safetensors file?",
                            path, header_bytes);
    return CT_OK;
}

/* Read the header text and the data section of an open file. */
static ct_status st_read_file(const char *path, FILE *file, char **header, size_t *header_bytes,
                              unsigned char **data, size_t *data_bytes)
{
    struct stat info;
    if (fstat(fileno(file), &info) != 0)
        return ct_set_error(CT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(info.st_mode))
        return ct_set_error(CT_ERR_IO, "%s: not a regular file (a directory?): give the path "
                            "of a .safetensors file", path);
    uint64_t file_size = (uint64_t)info.st_size;
    if (file_size == 0)
        return ct_set_error(CT_ERR_FORMAT, "%s: the file is empty: was the download or save "
                            "interrupted?", path);
    if (file_size < CT_ST_LENGTH_PREFIX_BYTES)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s: truncated: %" PRIu64 " bytes, too short for the 8-byte header "
                            "length: was the download or save interrupted?",
                            path, file_size);
    unsigned char prefix[CT_ST_LENGTH_PREFIX_BYTES];
    ct_status status = st_read_exact(path, file, prefix, sizeof prefix, "header length");
    if (status != CT_OK)
        return status;
    uint64_t json_bytes = st_read_u64_le(prefix);
    status = st_check_prefix(path, prefix, file_size, json_bytes);
    if (status != CT_OK)
        return status;
    *header_bytes = (size_t)json_bytes;
    *data_bytes = (size_t)(file_size - CT_ST_LENGTH_PREFIX_BYTES - json_bytes);
    size_t data_capacity = (*data_bytes / ST_DATA_ALIGN + 1) * ST_DATA_ALIGN;
    *header = malloc(*header_bytes);
    *data = aligned_alloc(ST_DATA_ALIGN, data_capacity);
    if (!*header || !*data)
        return ct_set_error(CT_ERR_MEMORY, "%s: out of memory for %zu bytes of header and %zu "
                            "of data", path, *header_bytes, *data_bytes);
    status = st_read_exact(path, file, *header, *header_bytes, "header");
    if (status == CT_OK)
        status = st_read_exact(path, file, *data, *data_bytes, "tensor data");
    return status;
}

/* A JSON array of non-negative integers with at most max_count elements. */
static bool st_read_sizes(const ct_json_value *array, int max_count, int64_t *out, int *count)
{
    if (!array || array->type != CT_JSON_ARRAY || array->count > max_count)
        return false;
    const ct_json_value *element = ct_json_first(array);
    for (int i = 0; i < array->count; i++, element = ct_json_next(element)) {
        if (element->type != CT_JSON_NUMBER || !element->is_integer || element->integer < 0)
            return false;
        out[i] = element->integer;
    }
    *count = array->count;
    return true;
}

/* The dtype of a tensor entry, or NULL with *status set. */
static const st_dtype_info *st_parse_dtype(const char *path, const char *name,
                                           const ct_json_value *value, ct_status *status)
{
    if (!value || value->type != CT_JSON_STRING) {
        *status = ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' has no \"dtype\" string: the "
                               "header is corrupt", path, name);
        return NULL;
    }
    const st_dtype_info *info = st_dtype_by_name(value->string);
    if (info)
        return info;
    if (strcmp(value->string, "F64") == 0)
        *status = ct_set_error(CT_ERR_UNSUPPORTED,
                               "%s: tensor '%s' is F64, which cuttle does not support: save it "
                               "as F32 instead (in PyTorch: tensor.float())",
                               path, name);
    else if (st_is_foreign_dtype(value->string))
        *status = ct_set_error(CT_ERR_UNSUPPORTED,
                               "%s: tensor '%s' has dtype %s, which cuttle does not support "
                               "(it reads F32, F16, BF16, I8, U8, I32, I64): convert it first",
                               path, name, value->string);
    else
        *status = ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' has unknown dtype \"%s\": the "
                               "header is corrupt or from a newer format", path, name,
                               value->string);
    return NULL;
}

/* One tensor entry of the header: {"dtype", "shape", "data_offsets"}. */
static ct_status st_parse_tensor(const char *path, const ct_json_value *key, ct_st_tensor *tensor,
                                 st_span *span)
{
    const char *name = key->string;
    const ct_json_value *entry = ct_json_member_value(key);
    tensor->name = name;
    if (strlen(name) != key->string_len)
        return ct_set_error(CT_ERR_FORMAT, "%s: a tensor name contains a NUL byte: the header "
                            "is corrupt", path);
    if (entry->type != CT_JSON_OBJECT)
        return ct_set_error(CT_ERR_FORMAT, "%s: the entry of tensor '%s' is %s, not an object "
                            "with dtype, shape and data_offsets", path, name,
                            ct_json_kind(entry->type));
    ct_status status = CT_OK;
    const st_dtype_info *info = st_parse_dtype(path, name, ct_json_get(entry, "dtype"), &status);
    if (!info)
        return status;
    tensor->dtype = info->dtype;
    const ct_json_value *shape = ct_json_get(entry, "shape");
    if (shape && shape->type == CT_JSON_ARRAY && shape->count > CT_MAX_DIMS)
        return ct_set_error(CT_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions; cuttle "
                            "supports at most %d", path, name, shape->count, CT_MAX_DIMS);
    if (!st_read_sizes(shape, CT_MAX_DIMS, tensor->shape, &tensor->ndim))
        return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' needs a \"shape\" array of "
                            "non-negative integers: the header is corrupt", path, name);
    int64_t offsets[2];
    int n_offsets = 0;
    if (!st_read_sizes(ct_json_get(entry, "data_offsets"), 2, offsets, &n_offsets) ||
        n_offsets != 2 || offsets[0] > offsets[1])
        return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' needs \"data_offsets\": [begin, "
                            "end] with 0 <= begin <= end: the header is corrupt", path, name);
    span->begin = (uint64_t)offsets[0];
    span->end = (uint64_t)offsets[1];
    uint64_t bytes;
    if (!ct_st_shape_bytes(tensor->ndim, tensor->shape, info->size, &bytes))
        return ct_set_error(CT_ERR_FORMAT, "%s: the shape of tensor '%s' is too large to be "
                            "real: the header is corrupt", path, name);
    if (bytes != span->end - span->begin) {
        char shape_text[CT_MAX_DIMS * 24];
        return ct_set_error(CT_ERR_FORMAT,
                            "%s: tensor '%s' (%s %s) needs %" PRIu64 " bytes, but its "
                            "data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64
                            ": the header is corrupt",
                            path, name, info->name,
                            st_format_shape(shape_text, sizeof shape_text, tensor->ndim,
                                            tensor->shape),
                            bytes, span->begin, span->end, span->end - span->begin);
    }
    tensor->bytes = (size_t)bytes;
    return CT_OK;
}

static ct_status st_parse_metadata(const char *path, const ct_json_value *object,
                                   ct_st_file *file)
{
    if (object->type != CT_JSON_OBJECT)
        return ct_set_error(CT_ERR_FORMAT, "%s: \"__metadata__\" is %s, but must be an object "
                            "of strings", path, ct_json_kind(object->type));
    if (object->count == 0)
        return CT_OK;
    file->meta_keys = malloc((size_t)object->count * sizeof *file->meta_keys);
    file->meta_values = malloc((size_t)object->count * sizeof *file->meta_values);
    if (!file->meta_keys || !file->meta_values)
        return ct_set_error(CT_ERR_MEMORY, "%s: out of memory for the metadata", path);
    const ct_json_value *key = ct_json_first(object);
    for (int i = 0; i < object->count; i++, key = ct_json_next_member(key)) {
        const ct_json_value *value = ct_json_member_value(key);
        if (value->type != CT_JSON_STRING)
            return ct_set_error(CT_ERR_FORMAT, "%s: metadata '%s' is %s, but safetensors "
                                "metadata values must be strings", path, key->string,
                                ct_json_kind(value->type));
        for (int j = 0; j < i; j++)
            if (strcmp(file->meta_keys[j], key->string) == 0)
                return ct_set_error(CT_ERR_FORMAT, "%s: metadata key '%s' appears twice",
                                    path, key->string);
        file->meta_keys[i] = key->string;
        file->meta_values[i] = value->string;
        file->n_meta++;
    }
    return CT_OK;
}

static int st_compare_spans(const void *a, const void *b)
{
    const st_span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return (x->header_index > y->header_index) - (x->header_index < y->header_index);
}

static int st_compare_names(const void *a, const void *b)
{
    const ct_st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Data inside the section, no two tensors sharing a byte, names unique. */
static ct_status st_check_layout(const char *path, ct_st_file *file, st_span *spans,
                                 const ct_st_tensor *parsed, size_t data_bytes)
{
    int n = file->n_tensors;
    uint64_t data_end = 0;
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (spans[i].end > data_end) {
            data_end = spans[i].end;
            last = i;
        }
    }
    if (data_end > data_bytes)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s: truncated: header says %" PRIu64 " bytes of tensor data "
                            "(tensor '%s' ends there), file has %zu: was the download or save "
                            "interrupted?",
                            path, data_end, parsed[spans[last].header_index].name, data_bytes);
    qsort(spans, (size_t)n, sizeof *spans, st_compare_spans);
    const st_span *previous = NULL;
    for (int i = 0; i < n; i++) {
        if (spans[i].begin == spans[i].end)
            continue; /* an empty tensor owns no bytes */
        if (previous && spans[i].begin < previous->end)
            return ct_set_error(CT_ERR_FORMAT,
                                "%s: tensors '%s' [%" PRIu64 ", %" PRIu64 ") and '%s' [%" PRIu64
                                ", %" PRIu64 ") overlap in the data section: the file is corrupt",
                                path, parsed[previous->header_index].name, previous->begin,
                                previous->end, parsed[spans[i].header_index].name,
                                spans[i].begin, spans[i].end);
        previous = &spans[i];
    }
    for (int i = 0; i < n; i++) {
        file->tensors[i] = parsed[spans[i].header_index];
        file->tensors[i].data = file->data + spans[i].begin;
        file->by_name[i] = &file->tensors[i];
    }
    qsort(file->by_name, (size_t)n, sizeof *file->by_name, st_compare_names);
    for (int i = 1; i < n; i++)
        if (strcmp(file->by_name[i - 1]->name, file->by_name[i]->name) == 0)
            return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' appears twice in the header",
                                path, file->by_name[i]->name);
    return CT_OK;
}

/* Give every tensor data aligned to its element size. */
static ct_status st_align_tensors(const char *path, ct_st_file *file)
{
    for (int i = 0; i < file->n_tensors; i++) {
        ct_st_tensor *tensor = &file->tensors[i];
        size_t element = st_dtype_info_of(tensor->dtype)->size;
        if ((uintptr_t)tensor->data % element == 0)
            continue;
        void *copy = malloc(tensor->bytes);
        if (!copy)
            return ct_set_error(CT_ERR_MEMORY, "%s: out of memory", path);
        memcpy(copy, tensor->data, tensor->bytes);
        file->copies[file->n_copies++] = copy;
        tensor->data = copy;
    }
    return CT_OK;
}

/* Every member of the header's root object: tensors and __metadata__. */
static ct_status st_parse_header(const char *path, ct_st_file *file, size_t data_bytes)
{
    const ct_json_value *root = ct_json_root(&file->header);
    if (root->type != CT_JSON_OBJECT)
        return ct_set_error(CT_ERR_FORMAT, "%s: the header is %s, not a JSON object: is this "
                            "a safetensors file?", path, ct_json_kind(root->type));
    size_t slots = (size_t)root->count + 1;
    ct_st_tensor *parsed = calloc(slots, sizeof *parsed);
    st_span *spans = calloc(slots, sizeof *spans);
    file->tensors = calloc(slots, sizeof *file->tensors);
    file->by_name = calloc(slots, sizeof *file->by_name);
    file->copies = calloc(slots, sizeof *file->copies);
    ct_status status = CT_OK;
    if (!parsed || !spans || !file->tensors || !file->by_name || !file->copies)
        status = ct_set_error(CT_ERR_MEMORY, "%s: out of memory for %d tensors", path,
                              root->count);
    bool seen_metadata = false;
    const ct_json_value *key = ct_json_first(root);
    for (int i = 0; status == CT_OK && i < root->count; i++, key = ct_json_next_member(key)) {
        if (strcmp(key->string, CT_ST_METADATA_KEY) == 0) {
            status = seen_metadata ? ct_set_error(CT_ERR_FORMAT, "%s: \"__metadata__\" appears "
                                                  "twice", path)
                                   : st_parse_metadata(path, ct_json_member_value(key), file);
            seen_metadata = true;
            continue;
        }
        int index = file->n_tensors++;
        spans[index].header_index = index;
        status = st_parse_tensor(path, key, &parsed[index], &spans[index]);
    }
    if (status == CT_OK)
        status = st_check_layout(path, file, spans, parsed, data_bytes);
    if (status == CT_OK)
        status = st_align_tensors(path, file);
    free(parsed);
    free(spans);
    return status;
}

/* "xxh64:" and 16 hex digits into *hash; false if the text is not that. */
static bool st_parse_checksum(const char *text, uint64_t *hash)
{
    size_t prefix = strlen(CT_ST_CHECKSUM_ALGO ":");
    if (strncmp(text, CT_ST_CHECKSUM_ALGO ":", prefix) != 0 || strlen(text) != prefix + 16)
        return false;
    uint64_t value = 0;
    for (const char *c = text + prefix; *c; c++) {
        int digit = *c >= '0' && *c <= '9'   ? *c - '0'
                    : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
                                             : -1;
        if (digit < 0)
            return false;
        value = value << 4 | (uint64_t)digit;
    }
    *hash = value;
    return true;
}

/* The data section against the checksum in the metadata, if there is one. */
static ct_status st_verify_checksum(const char *path, const ct_st_file *file, size_t data_bytes)
{
    const char *text = ct_st_metadata(file, CT_ST_CHECKSUM_KEY);
    if (!text)
        return CT_OK; /* PyTorch's files, and cuttle's before checksums */
    uint64_t want = 0;
    if (!st_parse_checksum(text, &want))
        return ct_set_error(CT_ERR_FORMAT, "%s: the metadata's \"" CT_ST_CHECKSUM_KEY "\" is "
                            "\"%.40s\", not \"" CT_ST_CHECKSUM_ALGO ":\" and 16 hex digits: the "
                            "header is corrupt, or the file is from a newer cuttle",
                            path, text);
    uint64_t got = ct_xxh64(file->data, data_bytes, 0);
    if (got != want)
        return ct_set_error(CT_ERR_FORMAT,
                            "%s: the tensor data does not match its checksum (" CT_ST_CHECKSUM_ALGO
                            " %016" PRIx64 " in the header, %016" PRIx64 " of the %zu bytes "
                            "of data): the file is corrupt or was modified after it was saved; "
                            "its weights cannot be trusted: use another copy or an earlier "
                            "checkpoint (or re-save it from where it was modified)",
                            path, want, got, data_bytes);
    return CT_OK;
}

ct_status ct_st_load(const char *path, ct_st_file **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_st_load: out is NULL");
    *out = NULL;
    if (!path)
        return ct_set_error(CT_ERR_ARG, "ct_st_load: path is NULL");
    FILE *stream = fopen(path, "rb");
    if (!stream)
        return ct_set_error(CT_ERR_IO, "%s: cannot open: %s: check the path", path,
                            strerror(errno));
    ct_st_file *file = calloc(1, sizeof *file);
    char *header = NULL;
    size_t header_bytes = 0, data_bytes = 0;
    ct_status status = file ? CT_OK : ct_set_error(CT_ERR_MEMORY, "%s: out of memory", path);
    if (status == CT_OK)
        status = st_read_file(path, stream, &header, &header_bytes, &file->data, &data_bytes);
    fclose(stream);
    if (status == CT_OK) {
        ct_json_error error;
        status = ct_json_parse(header, header_bytes, ST_MAX_JSON_DEPTH, &file->header, &error);
        if (status != CT_OK)
            ct_set_error(status, "%s: the header is not valid JSON: %s at byte %zu of the header "
                         "(byte %zu of the file): the file is corrupt", path, error.message,
                         error.offset, error.offset + CT_ST_LENGTH_PREFIX_BYTES);
    }
    free(header);
    if (status == CT_OK)
        status = st_parse_header(path, file, data_bytes);
    if (status == CT_OK)
        status = st_verify_checksum(path, file, data_bytes);
    if (status != CT_OK) {
        ct_st_free(file);
        return status;
    }
    *out = file;
    return CT_OK;
}

void ct_st_free(ct_st_file *file)
{
    if (!file)
        return;
    for (int i = 0; i < file->n_copies; i++)
        free(file->copies[i]);
    free(file->copies);
    free(file->tensors);
    free(file->by_name);
    free(file->meta_keys);
    free(file->meta_values);
    free(file->data);
    ct_json_free(&file->header);
    free(file);
}

int ct_st_count(const ct_st_file *file)
{
    return file ? file->n_tensors : 0;
}

const ct_st_tensor *ct_st_get(const ct_st_file *file, int i)
{
    if (!file || i < 0 || i >= file->n_tensors)
        return NULL;
    return &file->tensors[i];
}

const ct_st_tensor *ct_st_find(const ct_st_file *file, const char *name)
{
    if (!file || !name || file->n_tensors == 0)
        return NULL;
    ct_st_tensor key_tensor = {.name = name};
    const ct_st_tensor *key = &key_tensor;
    const ct_st_tensor **found = bsearch(&key, file->by_name, (size_t)file->n_tensors,
                                         sizeof *file->by_name, st_compare_names);
    return found ? *found : NULL;
}

const char *ct_st_metadata(const ct_st_file *file, const char *key)
{
    if (!file || !key)
        return NULL;
    for (int i = 0; i < file->n_meta; i++)
        if (strcmp(file->meta_keys[i], key) == 0)
            return file->meta_values[i];
    return NULL;
}
