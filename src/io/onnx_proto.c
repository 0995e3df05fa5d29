/*
 * Decoding ONNX files (onnx_proto.h) with the wire reader of protobuf.h.
 *
 * Each message is read in passes over its bytes: one per repeated field to
 * count it (so each array is allocated once, at its size), then one that
 * fills everything.  Strings are copied out as NUL-terminated C strings
 * (one holding a NUL byte is refused); tensor data stays in the file's
 * bytes when it is raw_data or packed floats, and is decoded into its own
 * buffer otherwise.
 */
#define _POSIX_C_SOURCE 200809L

#include "io/onnx_proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "io/protobuf.h"

typedef struct decoder {
    const char *name; /* the file, for messages */
} decoder;

static ct_status malformed(const decoder *d, const char *where, const char *why)
{
    return ct_set_error(CT_ERR_FORMAT, "%s: not a valid ONNX file: %s (in %s)", d->name, why,
                        where);
}

static ct_status out_of_memory(const decoder *d)
{
    return ct_set_error(CT_ERR_MEMORY, "%s: out of memory decoding the ONNX file", d->name);
}

/* Elements of a data type, with their size in bytes (0: not a fixed size). */
static const struct {
    int32_t type;
    const char *name;
    size_t size;
} onnx_dtypes[] = {
    {1, "FLOAT", 4},  {2, "UINT8", 1},   {3, "INT8", 1},   {4, "UINT16", 2},
    {5, "INT16", 2},  {6, "INT32", 4},   {7, "INT64", 8},  {8, "STRING", 0},
    {9, "BOOL", 1},   {10, "FLOAT16", 2}, {11, "DOUBLE", 8}, {12, "UINT32", 4},
    {13, "UINT64", 8}, {14, "COMPLEX64", 8}, {15, "COMPLEX128", 16}, {16, "BFLOAT16", 2},
};
#define ONNX_N_DTYPES ((int)(sizeof onnx_dtypes / sizeof onnx_dtypes[0]))

const char *onnx_dtype_name(int32_t data_type)
{
    for (int i = 0; i < ONNX_N_DTYPES; i++)
        if (onnx_dtypes[i].type == data_type)
            return onnx_dtypes[i].name;
    return "an unknown type";
}

static size_t dtype_size(int32_t data_type)
{
    for (int i = 0; i < ONNX_N_DTYPES; i++)
        if (onnx_dtypes[i].type == data_type)
            return onnx_dtypes[i].size;
    return 0;
}

/* ---- reading fields ------------------------------------------------------------ */

/* Occurrences of field `number` in a message (wire format checked). */
static ct_status count_field(const decoder *d, const uint8_t *msg, size_t length,
                             uint32_t number, const char *where, int *count)
{
    pb_reader r = pb_reader_of(msg, length);
    pb_field f;
    const char *why = NULL;
    int found, n = 0;
    while ((found = pb_next(&r, &f, &why)) > 0)
        n += f.number == number;
    if (found < 0)
        return malformed(d, where, why);
    *count = n;
    return CT_OK;
}

static ct_status expect_wire(const decoder *d, const pb_field *f, pb_wire wire,
                             const char *where)
{
    if (f->wire == wire)
        return CT_OK;
    char why[80];
    snprintf(why, sizeof why, "field %u has wire type %d, not %d", f->number, (int)f->wire,
             (int)wire);
    return malformed(d, where, why);
}

static ct_status copy_string(const decoder *d, const pb_field *f, const char *where,
                             char **out)
{
    CT_TRY(expect_wire(d, f, PB_BYTES, where));
    if (memchr(f->bytes, '\0', f->length))
        return malformed(d, where, "a string holds a NUL byte");
    char *text = malloc(f->length + 1);
    if (!text)
        return out_of_memory(d);
    memcpy(text, f->bytes, f->length);
    text[f->length] = '\0';
    free(*out); /* a repeated optional field: the last one counts, as in protobuf */
    *out = text;
    return CT_OK;
}

/* A repeated int64 field, packed or not, into a new array. */
static ct_status repeated_ints(const decoder *d, const uint8_t *msg, size_t length,
                               uint32_t number, const char *where, int64_t **out, int *count)
{
    pb_reader r = pb_reader_of(msg, length);
    pb_field f;
    const char *why = NULL;
    int64_t n = 0;
    int found;
    while ((found = pb_next(&r, &f, &why)) > 0) {
        if (f.number != number)
            continue;
        if (f.wire == PB_BYTES) {
            int64_t packed = pb_count_varints(f.bytes, f.length);
            if (packed < 0)
                return malformed(d, where, "a packed integer list is cut short");
            n += packed;
        } else {
            CT_TRY(expect_wire(d, &f, PB_VARINT, where));
            n++;
        }
    }
    if (found < 0)
        return malformed(d, where, why);
    if (n > INT32_MAX)
        return malformed(d, where, "an integer list is absurdly long");
    int64_t *values = calloc((size_t)(n ? n : 1), sizeof *values);
    if (!values)
        return out_of_memory(d);
    r = pb_reader_of(msg, length);
    int64_t at = 0;
    while (pb_next(&r, &f, &why) > 0) {
        if (f.number != number)
            continue;
        if (f.wire == PB_BYTES) {
            pb_read_varints(f.bytes, f.length, values + at);
            at += pb_count_varints(f.bytes, f.length);
        } else {
            values[at++] = (int64_t)f.value;
        }
    }
    *out = values;
    *count = (int)n;
    return CT_OK;
}

/* A repeated float field, packed or not: *data points at the packed bytes
 * when there is exactly one packed run, else into a new array (*owned). */
static ct_status repeated_floats(const decoder *d, const uint8_t *msg, size_t length,
                                 uint32_t number, const char *where, const void **data,
                                 float **owned, int64_t *count)
{
    pb_reader r = pb_reader_of(msg, length);
    pb_field f;
    const char *why = NULL;
    int64_t n = 0;
    int runs = 0, found;
    const uint8_t *packed = NULL;
    while ((found = pb_next(&r, &f, &why)) > 0) {
        if (f.number != number)
            continue;
        if (f.wire == PB_BYTES) {
            if (f.length % sizeof(float))
                return malformed(d, where, "a packed float list is not a whole number of floats");
            n += (int64_t)(f.length / sizeof(float));
            packed = f.bytes;
        } else {
            CT_TRY(expect_wire(d, &f, PB_FIXED32, where));
            n++;
        }
        runs++;
    }
    if (found < 0)
        return malformed(d, where, why);
    *count = n;
    *owned = NULL;
    if (runs == 1 && packed) {
        *data = packed;
        return CT_OK;
    }
    float *values = calloc((size_t)(n ? n : 1), sizeof *values);
    if (!values)
        return out_of_memory(d);
    r = pb_reader_of(msg, length);
    int64_t at = 0;
    while (pb_next(&r, &f, &why) > 0) {
        if (f.number != number)
            continue;
        if (f.wire == PB_BYTES) {
            memcpy(values + at, f.bytes, f.length);
            at += (int64_t)(f.length / sizeof(float));
        } else {
            values[at++] = pb_float_of(f.value);
        }
    }
    *data = values;
    *owned = values;
    return CT_OK;
}

/* ---- TensorProto ------------------------------------------------------------------ */

/* StringStringEntryProto: key 1, value 2. */
static ct_status decode_entry(const decoder *d, const pb_field *entry, const char *where,
                              char **key, char **value)
{
    CT_TRY(expect_wire(d, entry, PB_BYTES, where));
    pb_reader r = pb_reader_of(entry->bytes, entry->length);
    pb_field f;
    const char *why = NULL;
    int found;
    while ((found = pb_next(&r, &f, &why)) > 0) {
        if (f.number == 1)
            CT_TRY(copy_string(d, &f, where, key));
        else if (f.number == 2)
            CT_TRY(copy_string(d, &f, where, value));
    }
    if (found < 0)
        return malformed(d, where, why);
    if (!*key)
        CT_TRY(copy_string(d, &(pb_field){.wire = PB_BYTES, .bytes = (const uint8_t *)""},
                           where, key));
    if (!*value)
        CT_TRY(copy_string(d, &(pb_field){.wire = PB_BYTES, .bytes = (const uint8_t *)""},
                           where, value));
    return CT_OK;
}

static ct_status parse_count(const decoder *d, const char *text, const char *where,
                             int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (end == text || *end || errno || value < 0)
        return malformed(d, where, "an external data offset or length is not a whole number");
    *out = value;
    return CT_OK;
}

static ct_status decode_external(const decoder *d, const pb_field *entry, onnx_tensor *t)
{
    char *key = NULL, *value = NULL;
    ct_status status = decode_entry(d, entry, "a tensor's external_data", &key, &value);
    if (status == CT_OK && strcmp(key, "location") == 0) {
        free(t->location);
        t->location = value;
        value = NULL;
    } else if (status == CT_OK && strcmp(key, "offset") == 0) {
        status = parse_count(d, value, "a tensor's external_data", &t->offset);
    } else if (status == CT_OK && strcmp(key, "length") == 0) {
        status = parse_count(d, value, "a tensor's external_data", &t->length);
    }
    free(key);
    free(value);
    return status;
}

/* Shape checks: dims, element count, byte size. */
static ct_status check_shape(const decoder *d, const onnx_tensor *t, const int64_t *dims,
                             int ndim, int64_t *numel)
{
    const char *name = t->name ? t->name : "(unnamed)";
    if (ndim > ONNX_MAX_DIMS)
        return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' has %d dimensions; cuttle reads at "
                            "most %d", d->name, name, ndim, ONNX_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || (dims[i] && n > (int64_t)(ONNX_MAX_TENSOR_BYTES / (uint64_t)dims[i])))
            return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' has a negative or absurd "
                                "dimension (%lld)", d->name, name, (long long)dims[i]);
        n *= dims[i];
    }
    size_t size = dtype_size(t->data_type);
    if (size && (uint64_t)n * size > ONNX_MAX_TENSOR_BYTES)
        return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' would take over 16 GiB",
                            d->name, name);
    *numel = n;
    return CT_OK;
}

static ct_status decode_tensor(const decoder *d, const uint8_t *msg, size_t length,
                               onnx_tensor *t)
{
    const char *where = "a TensorProto";
    int64_t *dims = NULL;
    int ndim = 0;
    t->length = -1;
    CT_TRY(repeated_ints(d, msg, length, 1, where, &dims, &ndim));
    pb_reader r = pb_reader_of(msg, length);
    pb_field f;
    const char *why = NULL;
    const pb_field *raw = NULL;
    pb_field raw_field;
    bool external = false, has_floats = false, has_int32 = false, has_int64 = false;
    int found;
    ct_status status = CT_OK;
    while (status == CT_OK && (found = pb_next(&r, &f, &why)) > 0) {
        switch (f.number) {
        case 2: status = expect_wire(d, &f, PB_VARINT, where); t->data_type = (int32_t)f.value; break;
        case 3: status = malformed(d, where, "segmented tensors are not supported"); break;
        case 4: has_floats = true; break;
        case 5: has_int32 = true; break;
        case 7: has_int64 = true; break;
        case 8: status = copy_string(d, &f, where, &t->name); break;
        case 9:
            status = expect_wire(d, &f, PB_BYTES, where);
            raw_field = f;
            raw = &raw_field;
            break;
        case 13: status = decode_external(d, &f, t); break;
        case 14: external = f.value == 1; break;
        default: break;
        }
    }
    if (status == CT_OK && found < 0)
        status = malformed(d, where, why);
    if (status == CT_OK)
        status = check_shape(d, t, dims, ndim, &t->numel);
    if (status == CT_OK) {
        t->ndim = ndim;
        memcpy(t->dims, dims, sizeof *dims * (size_t)ndim);
    }
    free(dims);
    if (status != CT_OK)
        return status;
    const char *name = t->name ? t->name : "(unnamed)";
    size_t size = dtype_size(t->data_type);
    uint64_t bytes = (uint64_t)t->numel * size;
    if (external) {
        if (!t->location)
            return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' says its data is external but "
                                "names no location", d->name, name);
        return CT_OK;
    }
    if (raw) {
        if (!size || raw->length != bytes)
            return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' of %s has %zu bytes of data; "
                                "its shape needs %llu", d->name, name,
                                onnx_dtype_name(t->data_type), raw->length,
                                (unsigned long long)bytes);
        t->data = raw->bytes;
        return CT_OK;
    }
    int64_t count = 0;
    if (has_floats && t->data_type == ONNX_FLOAT) {
        float *owned = NULL;
        CT_TRY(repeated_floats(d, msg, length, 4, where, &t->data, &owned, &count));
        t->owned = owned;
    } else if ((has_int64 && t->data_type == ONNX_INT64) ||
               (has_int32 && t->data_type == ONNX_INT32)) {
        int64_t *values = NULL;
        int n = 0;
        CT_TRY(repeated_ints(d, msg, length, has_int64 ? 7 : 5, where, &values, &n));
        count = n;
        if (t->data_type == ONNX_INT32) { /* narrow in place to int32's layout */
            int32_t *narrow = (int32_t *)values;
            for (int i = 0; i < n; i++)
                narrow[i] = (int32_t)values[i];
        }
        t->data = t->owned = values;
    } else if (t->numel == 0 || (t->data_type != ONNX_FLOAT && t->data_type != ONNX_INT32 &&
                                 t->data_type != ONNX_INT64)) {
        return CT_OK; /* empty, or a type cuttle does not read (the importer says so) */
    }
    if (count != t->numel)
        return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' has %lld values; its shape needs "
                            "%lld", d->name, name, (long long)count, (long long)t->numel);
    return CT_OK;
}

/* ---- AttributeProto, NodeProto, ValueInfoProto ---------------------------------------- */

static ct_status decode_attr(const decoder *d, const pb_field *field, onnx_attr *a)
{
    const char *where = "an AttributeProto";
    CT_TRY(expect_wire(d, field, PB_BYTES, where));
    const uint8_t *msg = field->bytes;
    size_t length = field->length;
    int64_t n_floats = 0;
    const void *float_data = NULL;
    CT_TRY(repeated_ints(d, msg, length, 8, where, &a->ints, &a->n_ints));
    CT_TRY(repeated_floats(d, msg, length, 7, where, &float_data, &a->floats, &n_floats));
    if (n_floats > INT32_MAX)
        return malformed(d, where, "a float list is absurdly long");
    if (!a->floats) { /* one packed run: copy it, so that floats is aligned and owned */
        if (!(a->floats = malloc(sizeof(float) * (size_t)(n_floats ? n_floats : 1))))
            return out_of_memory(d);
        memcpy(a->floats, float_data, sizeof(float) * (size_t)n_floats);
    }
    a->n_floats = (int)n_floats;
    pb_reader r = pb_reader_of(msg, length);
    pb_field f;
    const char *why = NULL;
    int found;
    bool typed = false;
    ct_status status = CT_OK;
    onnx_attr_type seen = ONNX_ATTR_UNDEFINED;
    while (status == CT_OK && (found = pb_next(&r, &f, &why)) > 0) {
        switch (f.number) {
        case 1: status = copy_string(d, &f, where, &a->name); break;
        case 20: status = expect_wire(d, &f, PB_VARINT, where); a->type = (onnx_attr_type)f.value; typed = true; break;
        case 2: status = expect_wire(d, &f, PB_FIXED32, where); a->f = pb_float_of(f.value); seen = ONNX_ATTR_FLOAT; break;
        case 3: status = expect_wire(d, &f, PB_VARINT, where); a->i = (int64_t)f.value; seen = ONNX_ATTR_INT; break;
        case 4: status = copy_string(d, &f, where, &a->s); seen = ONNX_ATTR_STRING; break;
        case 5:
            status = expect_wire(d, &f, PB_BYTES, where);
            if (status == CT_OK && !a->t && !(a->t = calloc(1, sizeof *a->t)))
                status = out_of_memory(d);
            if (status == CT_OK)
                status = decode_tensor(d, f.bytes, f.length, a->t);
            seen = ONNX_ATTR_TENSOR;
            break;
        case 6: seen = ONNX_ATTR_GRAPH; break;
        case 7: seen = ONNX_ATTR_FLOATS; break;
        case 8: seen = ONNX_ATTR_INTS; break;
        case 9: seen = ONNX_ATTR_STRINGS; break;
        default: break;
        }
    }
    if (status == CT_OK && found < 0)
        status = malformed(d, where, why);
    if (status == CT_OK && !a->name)
        status = malformed(d, where, "an attribute has no name");
    if (!typed) /* files from before IR version 2 leave type out */
        a->type = seen;
    return status;
}

static ct_status decode_strings(const decoder *d, const uint8_t *msg, size_t length,
                                uint32_t number, const char *where, char ***out, int *count)
{
    CT_TRY(count_field(d, msg, length, number, where, count));
    if (!(*out = calloc((size_t)(*count ? *count : 1), sizeof **out)))
        return out_of_memory(d);
    pb_reader r = pb_reader_of(msg, length);
    pb_field f;
    const char *why = NULL;
    int at = 0;
    while (pb_next(&r, &f, &why) > 0)
        if (f.number == number)
            CT_TRY(copy_string(d, &f, where, &(*out)[at++]));
    return CT_OK;
}

static ct_status decode_node(const decoder *d, const pb_field *field, onnx_node *node)
{
    const char *where = "a NodeProto";
    CT_TRY(expect_wire(d, field, PB_BYTES, where));
    const uint8_t *msg = field->bytes;
    size_t length = field->length;
    CT_TRY(decode_strings(d, msg, length, 1, where, &node->inputs, &node->n_inputs));
    CT_TRY(decode_strings(d, msg, length, 2, where, &node->outputs, &node->n_outputs));
    CT_TRY(count_field(d, msg, length, 5, where, &node->n_attrs));
    if (!(node->attrs = calloc((size_t)(node->n_attrs ? node->n_attrs : 1), sizeof *node->attrs)))
        return out_of_memory(d);
    pb_reader r = pb_reader_of(msg, length);
    pb_field f;
    const char *why = NULL;
    int at = 0;
    while (pb_next(&r, &f, &why) > 0) {
        if (f.number == 3)
            CT_TRY(copy_string(d, &f, where, &node->name));
        else if (f.number == 4)
            CT_TRY(copy_string(d, &f, where, &node->op_type));
        else if (f.number == 7)
            CT_TRY(copy_string(d, &f, where, &node->domain));
        else if (f.number == 5)
            CT_TRY(decode_attr(d, &f, &node->attrs[at++]));
    }
    if (!node->op_type)
        return malformed(d, where, "a node has no op_type");
    for (char **text = &node->name; text <= &node->domain; text++)
        if (!*text && !(*text = strdup("")))
            return out_of_memory(d);
    return CT_OK;
}

/* TensorShapeProto.Dimension: dim_value 1, dim_param 2. */
static ct_status decode_dim(const decoder *d, const pb_field *field, onnx_value *v, int at)
{
    const char *where = "a tensor shape's dimension";
    CT_TRY(expect_wire(d, field, PB_BYTES, where));
    pb_reader r = pb_reader_of(field->bytes, field->length);
    pb_field f;
    const char *why = NULL;
    int found;
    v->dims[at] = -1;
    while ((found = pb_next(&r, &f, &why)) > 0) {
        if (f.number == 1) {
            CT_TRY(expect_wire(d, &f, PB_VARINT, where));
            v->dims[at] = (int64_t)f.value;
        } else if (f.number == 2) {
            CT_TRY(copy_string(d, &f, where, &v->dim_params[at]));
        }
    }
    return found < 0 ? malformed(d, where, why) : CT_OK;
}

/* TypeProto.tensor_type (1): elem_type 1, shape 2 (TensorShapeProto: dim 1). */
static ct_status decode_type(const decoder *d, const pb_field *field, onnx_value *v)
{
    const char *where = "a value's type";
    CT_TRY(expect_wire(d, field, PB_BYTES, where));
    pb_reader types = pb_reader_of(field->bytes, field->length), r;
    pb_field f, g, h;
    const char *why = NULL;
    int found;
    while ((found = pb_next(&types, &f, &why)) > 0) {
        if (f.number != 1)
            continue; /* a sequence, map or optional: elem_type stays 0 */
        CT_TRY(expect_wire(d, &f, PB_BYTES, where));
        r = pb_reader_of(f.bytes, f.length);
        while ((found = pb_next(&r, &g, &why)) > 0) {
            if (g.number == 1) {
                CT_TRY(expect_wire(d, &g, PB_VARINT, where));
                v->elem_type = (int32_t)g.value;
            } else if (g.number == 2) {
                CT_TRY(expect_wire(d, &g, PB_BYTES, where));
                int n_dims = 0;
                CT_TRY(count_field(d, g.bytes, g.length, 1, where, &n_dims));
                if (n_dims > ONNX_MAX_DIMS)
                    return ct_set_error(CT_ERR_FORMAT, "%s: value '%s' has %d dimensions; "
                                        "cuttle reads at most %d", d->name,
                                        v->name ? v->name : "", n_dims, ONNX_MAX_DIMS);
                pb_reader dims = pb_reader_of(g.bytes, g.length);
                v->ndim = 0;
                while (pb_next(&dims, &h, &why) > 0)
                    if (h.number == 1)
                        CT_TRY(decode_dim(d, &h, v, v->ndim++));
            }
        }
        if (found < 0)
            return malformed(d, where, why);
    }
    return found < 0 ? malformed(d, where, why) : CT_OK;
}

static ct_status decode_value(const decoder *d, const pb_field *field, onnx_value *v)
{
    const char *where = "a ValueInfoProto";
    CT_TRY(expect_wire(d, field, PB_BYTES, where));
    v->ndim = -1;
    pb_reader r = pb_reader_of(field->bytes, field->length);
    pb_field f;
    const char *why = NULL;
    int found;
    while ((found = pb_next(&r, &f, &why)) > 0) {
        if (f.number == 1)
            CT_TRY(copy_string(d, &f, where, &v->name));
        else if (f.number == 2)
            CT_TRY(decode_type(d, &f, v));
    }
    if (found < 0)
        return malformed(d, where, why);
    return v->name ? CT_OK : malformed(d, where, "a graph input or output has no name");
}

/* ---- GraphProto and ModelProto ---------------------------------------------------- */

/* calloc'ed room for `count` items of `size` at *out. */
static ct_status allocate(const decoder *d, void **out, int count, size_t size)
{
    *out = calloc((size_t)(count ? count : 1), size);
    return *out ? CT_OK : out_of_memory(d);
}

static ct_status decode_graph(const decoder *d, const pb_field *field, onnx_model *m)
{
    const char *where = "the GraphProto";
    CT_TRY(expect_wire(d, field, PB_BYTES, where));
    const uint8_t *msg = field->bytes;
    size_t length = field->length;
    CT_TRY(count_field(d, msg, length, 1, where, &m->n_nodes));
    CT_TRY(count_field(d, msg, length, 5, where, &m->n_initializers));
    CT_TRY(count_field(d, msg, length, 11, where, &m->n_inputs));
    CT_TRY(count_field(d, msg, length, 12, where, &m->n_outputs));
    CT_TRY(allocate(d, (void **)&m->nodes, m->n_nodes, sizeof *m->nodes));
    CT_TRY(allocate(d, (void **)&m->initializers, m->n_initializers, sizeof *m->initializers));
    CT_TRY(allocate(d, (void **)&m->inputs, m->n_inputs, sizeof *m->inputs));
    CT_TRY(allocate(d, (void **)&m->outputs, m->n_outputs, sizeof *m->outputs));
    int nodes = 0, initializers = 0, inputs = 0, outputs = 0;
    pb_reader r = pb_reader_of(msg, length);
    pb_field f;
    const char *why = NULL;
    while (pb_next(&r, &f, &why) > 0) {
        switch (f.number) {
        case 1: CT_TRY(decode_node(d, &f, &m->nodes[nodes++])); break;
        case 2: CT_TRY(copy_string(d, &f, where, &m->graph_name)); break;
        case 5:
            CT_TRY(expect_wire(d, &f, PB_BYTES, where));
            CT_TRY(decode_tensor(d, f.bytes, f.length, &m->initializers[initializers]));
            if (!m->initializers[initializers++].name)
                return malformed(d, where, "an initializer has no name");
            break;
        case 11: CT_TRY(decode_value(d, &f, &m->inputs[inputs++])); break;
        case 12: CT_TRY(decode_value(d, &f, &m->outputs[outputs++])); break;
        case 15: m->has_sparse_initializer = true; break;
        default: break;
        }
    }
    return CT_OK;
}

static ct_status decode_opset(const decoder *d, const pb_field *field, onnx_opset *opset)
{
    const char *where = "an OperatorSetIdProto";
    CT_TRY(expect_wire(d, field, PB_BYTES, where));
    pb_reader r = pb_reader_of(field->bytes, field->length);
    pb_field f;
    const char *why = NULL;
    int found;
    while ((found = pb_next(&r, &f, &why)) > 0) {
        if (f.number == 1) {
            CT_TRY(copy_string(d, &f, where, &opset->domain));
        } else if (f.number == 2) {
            CT_TRY(expect_wire(d, &f, PB_VARINT, where));
            opset->version = (int64_t)f.value;
        }
    }
    if (found < 0)
        return malformed(d, where, why);
    return opset->domain || (opset->domain = strdup("")) ? CT_OK : out_of_memory(d);
}

static ct_status decode_model(const decoder *d, onnx_model *m)
{
    const char *where = "the ModelProto";
    const uint8_t *msg = m->file;
    size_t length = m->file_bytes;
    int n_graphs = 0;
    CT_TRY(count_field(d, msg, length, 7, where, &n_graphs));
    CT_TRY(count_field(d, msg, length, 8, where, &m->n_opsets));
    CT_TRY(count_field(d, msg, length, 14, where, &m->n_meta));
    if (n_graphs != 1)
        return malformed(d, where, n_graphs ? "more than one main graph" : "no graph");
    CT_TRY(allocate(d, (void **)&m->opsets, m->n_opsets, sizeof *m->opsets));
    CT_TRY(allocate(d, (void **)&m->meta_keys, m->n_meta, sizeof *m->meta_keys));
    CT_TRY(allocate(d, (void **)&m->meta_values, m->n_meta, sizeof *m->meta_values));
    int opsets = 0, meta = 0;
    pb_reader r = pb_reader_of(msg, length);
    pb_field f;
    const char *why = NULL;
    while (pb_next(&r, &f, &why) > 0) {
        switch (f.number) {
        case 1: CT_TRY(expect_wire(d, &f, PB_VARINT, where)); m->ir_version = (int64_t)f.value; break;
        case 2: CT_TRY(copy_string(d, &f, where, &m->producer_name)); break;
        case 3: CT_TRY(copy_string(d, &f, where, &m->producer_version)); break;
        case 7: CT_TRY(decode_graph(d, &f, m)); break;
        case 8: CT_TRY(decode_opset(d, &f, &m->opsets[opsets++])); break;
        case 14:
            CT_TRY(decode_entry(d, &f, "metadata_props", &m->meta_keys[meta],
                                &m->meta_values[meta]));
            meta++;
            break;
        case 20: m->has_training_info = true; break;
        case 25: m->has_functions = true; break;
        default: break;
        }
    }
    return CT_OK;
}

/* Decode a file's bytes, taking them over (freed on failure too). */
static ct_status decode_owned(uint8_t *file, size_t length, const char *name, onnx_model **out)
{
    *out = NULL;
    decoder d = {name};
    onnx_model *m = calloc(1, sizeof *m);
    if (!m) {
        free(file);
        return out_of_memory(&d);
    }
    m->file = file;
    m->file_bytes = length;
    ct_status status = decode_model(&d, m);
    if (status != CT_OK) {
        onnx_model_free(m);
        return status;
    }
    *out = m;
    return CT_OK;
}

static ct_status too_big(const char *name, uint64_t length)
{
    return ct_set_error(CT_ERR_FORMAT, "%s: %llu bytes; an ONNX file is at most 2 GiB (a larger "
                        "model keeps its weights in external data files)", name,
                        (unsigned long long)length);
}

ct_status onnx_model_decode(const uint8_t *bytes, size_t length, const char *name,
                            onnx_model **out)
{
    *out = NULL;
    if ((uint64_t)length > ONNX_MAX_FILE_BYTES)
        return too_big(name, length);
    uint8_t *copy = malloc(length ? length : 1);
    if (!copy)
        return out_of_memory(&(decoder){name});
    memcpy(copy, bytes, length);
    return decode_owned(copy, length, name, out);
}

/* The whole of an open file, of `length` bytes from `offset`, into a new
 * buffer. */
static ct_status read_span(FILE *file, const char *path, uint64_t offset, uint64_t length,
                           uint8_t **out)
{
    uint8_t *data = malloc(length ? (size_t)length : 1);
    if (!data)
        return ct_set_error(CT_ERR_MEMORY, "%s: out of memory for %llu bytes", path,
                            (unsigned long long)length);
    if (fseeko(file, (off_t)offset, SEEK_SET) != 0 ||
        fread(data, 1, (size_t)length, file) != (size_t)length) {
        free(data);
        return ct_set_error(CT_ERR_IO, "%s: cannot read %llu bytes at offset %llu: %s", path,
                            (unsigned long long)length, (unsigned long long)offset,
                            ferror(file) ? strerror(errno) : "the file is shorter");
    }
    *out = data;
    return CT_OK;
}

/* Size of an open file. */
static ct_status file_size(FILE *file, const char *path, uint64_t *bytes)
{
    struct stat info;
    if (fstat(fileno(file), &info) != 0 || !S_ISREG(info.st_mode))
        return ct_set_error(CT_ERR_IO, "%s: not a regular file", path);
    *bytes = (uint64_t)info.st_size;
    return CT_OK;
}

/* An external data file's name is relative to the model's folder and stays
 * inside it (the ONNX checker's rule). */
static bool safe_location(const char *location)
{
    if (!*location || location[0] == '/')
        return false;
    for (const char *at = location; at; at = strchr(at, '/')) {
        at += *at == '/';
        if (strncmp(at, "..", 2) == 0 && (at[2] == '/' || at[2] == '\0'))
            return false;
    }
    return true;
}

static ct_status load_external(const char *model_path, onnx_tensor *t)
{
    if (!safe_location(t->location))
        return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' keeps its data in '%s': external "
                            "data must be named relative to the model's folder, without '..'",
                            model_path, t->name, t->location);
    size_t size = dtype_size(t->data_type);
    if (!size)
        return ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' of %s cannot be external data",
                            model_path, t->name, onnx_dtype_name(t->data_type));
    const char *slash = strrchr(model_path, '/');
    int folder = slash ? (int)(slash - model_path + 1) : 0;
    size_t capacity = (size_t)folder + strlen(t->location) + 1;
    char *path = malloc(capacity);
    if (!path)
        return ct_set_error(CT_ERR_MEMORY, "%s: out of memory", model_path);
    snprintf(path, capacity, "%.*s%s", folder, model_path, t->location);
    FILE *file = fopen(path, "rb");
    uint64_t bytes = 0, needed = (uint64_t)t->numel * size;
    ct_status status = file ? file_size(file, path, &bytes)
                            : ct_set_error(CT_ERR_IO, "%s: tensor '%s' keeps its data in %s, "
                                           "which cannot be opened: %s", model_path, t->name,
                                           path, strerror(errno));
    uint64_t length = t->length < 0 ? bytes - ((uint64_t)t->offset < bytes ? (uint64_t)t->offset
                                                                           : bytes)
                                    : (uint64_t)t->length;
    if (status == CT_OK && ((uint64_t)t->offset > bytes || length > bytes - (uint64_t)t->offset ||
                            length != needed))
        status = ct_set_error(CT_ERR_FORMAT, "%s: tensor '%s' needs %llu bytes of %s at offset "
                              "%lld, length %lld; the file has %llu", model_path, t->name,
                              (unsigned long long)needed, path, (long long)t->offset,
                              (long long)t->length, (unsigned long long)bytes);
    uint8_t *data = NULL;
    if (status == CT_OK)
        status = read_span(file, path, (uint64_t)t->offset, length, &data);
    if (status == CT_OK)
        t->data = t->owned = data;
    if (file)
        fclose(file);
    free(path);
    return status;
}

ct_status onnx_model_load(const char *path, onnx_model **out)
{
    *out = NULL;
    FILE *file = fopen(path, "rb");
    if (!file)
        return ct_set_error(CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint64_t bytes = 0;
    uint8_t *data = NULL;
    ct_status status = file_size(file, path, &bytes);
    if (status == CT_OK && bytes > ONNX_MAX_FILE_BYTES)
        status = too_big(path, bytes);
    if (status == CT_OK)
        status = read_span(file, path, 0, bytes, &data);
    fclose(file);
    if (status == CT_OK)
        status = decode_owned(data, (size_t)bytes, path, out);
    for (int i = 0; status == CT_OK && i < (*out)->n_initializers; i++)
        if ((*out)->initializers[i].location && !(*out)->initializers[i].data)
            status = load_external(path, &(*out)->initializers[i]);
    if (status != CT_OK && *out) {
        onnx_model_free(*out);
        *out = NULL;
    }
    return status;
}

/* ---- lookups and freeing ----------------------------------------------------------- */

int64_t onnx_model_opset(const onnx_model *model)
{
    for (int i = 0; i < model->n_opsets; i++)
        if (!*model->opsets[i].domain || strcmp(model->opsets[i].domain, "ai.onnx") == 0)
            return model->opsets[i].version;
    return 0;
}

const char *onnx_model_meta(const onnx_model *model, const char *key)
{
    for (int i = 0; i < model->n_meta; i++)
        if (strcmp(model->meta_keys[i], key) == 0)
            return model->meta_values[i];
    return NULL;
}

const onnx_attr *onnx_node_attr(const onnx_node *node, const char *name)
{
    for (int i = 0; i < node->n_attrs; i++)
        if (strcmp(node->attrs[i].name, name) == 0)
            return &node->attrs[i];
    return NULL;
}

int64_t onnx_tensor_int(const onnx_tensor *t, int64_t i)
{
    if (t->data_type == ONNX_INT32) {
        int32_t value;
        memcpy(&value, (const uint8_t *)t->data + 4 * i, sizeof value);
        return value;
    }
    int64_t value;
    memcpy(&value, (const uint8_t *)t->data + 8 * i, sizeof value);
    return value;
}

static void free_tensor(onnx_tensor *t)
{
    free(t->name);
    free(t->owned);
    free(t->location);
}

static void free_strings(char **texts, int count)
{
    for (int i = 0; texts && i < count; i++)
        free(texts[i]);
    free(texts);
}

static void free_node(onnx_node *node)
{
    free(node->name);
    free(node->op_type);
    free(node->domain);
    free_strings(node->inputs, node->n_inputs);
    free_strings(node->outputs, node->n_outputs);
    for (int i = 0; node->attrs && i < node->n_attrs; i++) {
        onnx_attr *a = &node->attrs[i];
        free(a->name);
        free(a->s);
        free(a->floats);
        free(a->ints);
        if (a->t)
            free_tensor(a->t);
        free(a->t);
    }
    free(node->attrs);
}

static void free_values(onnx_value *values, int count)
{
    for (int i = 0; values && i < count; i++) {
        free(values[i].name);
        for (int d = 0; d < ONNX_MAX_DIMS; d++)
            free(values[i].dim_params[d]);
    }
    free(values);
}

void onnx_model_free(onnx_model *m)
{
    if (!m)
        return;
    free(m->producer_name);
    free(m->producer_version);
    free(m->graph_name);
    for (int i = 0; m->opsets && i < m->n_opsets; i++)
        free(m->opsets[i].domain);
    free(m->opsets);
    free_strings(m->meta_keys, m->n_meta);
    free_strings(m->meta_values, m->n_meta);
    for (int i = 0; m->nodes && i < m->n_nodes; i++)
        free_node(&m->nodes[i]);
    free(m->nodes);
    for (int i = 0; m->initializers && i < m->n_initializers; i++)
        free_tensor(&m->initializers[i]);
    free(m->initializers);
    free_values(m->inputs, m->n_inputs);
    free_values(m->outputs, m->n_outputs);
    free(m->file);
    free(m);
}
