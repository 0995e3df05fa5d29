/*
 * An ONNX file, decoded: the parts of onnx.proto (ModelProto, GraphProto,
 * NodeProto, AttributeProto, TensorProto, ValueInfoProto) that a CNN's
 * inference graph uses.  Fields outside them are skipped; a subgraph
 * attribute, a sparse initializer or a training section is recorded as
 * present so that the importer can refuse it by name.
 *
 * Limits (each refused with a message naming the file and what broke it):
 * the file is at most 2 GiB (protobuf's own limit; larger models keep their
 * weights in external data files), a tensor has at most ONNX_MAX_DIMS
 * dimensions, no negative dimension, and at most 2^34 bytes; its data must
 * be exactly as long as its shape says.  The decoder does not recurse on
 * the file's nesting (protobuf.h), so no file can exhaust the stack.
 */
#ifndef CT_IO_ONNX_PROTO_H
#define CT_IO_ONNX_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuttle.h"

#define ONNX_MAX_DIMS 8
#define ONNX_MAX_FILE_BYTES ((uint64_t)2 << 30)
#define ONNX_MAX_TENSOR_BYTES ((uint64_t)1 << 34)

/* TensorProto.DataType values cuttle reads (others are named in errors),
 * and the two the int8 QDQ export writes. */
enum {
    ONNX_FLOAT = 1,
    ONNX_UINT8 = 2, /* written: activation zero points */
    ONNX_INT8 = 3,  /* written: int8 weights and their zero points */
    ONNX_INT32 = 6,
    ONNX_INT64 = 7,
};

/* AttributeProto.AttributeType */
typedef enum onnx_attr_type {
    ONNX_ATTR_UNDEFINED = 0,
    ONNX_ATTR_FLOAT = 1,
    ONNX_ATTR_INT = 2,
    ONNX_ATTR_STRING = 3,
    ONNX_ATTR_TENSOR = 4,
    ONNX_ATTR_GRAPH = 5,
    ONNX_ATTR_FLOATS = 6,
    ONNX_ATTR_INTS = 7,
    ONNX_ATTR_STRINGS = 8
} onnx_attr_type;

typedef struct onnx_tensor {
    char *name;
    int32_t data_type;
    int ndim;
    int64_t dims[ONNX_MAX_DIMS];
    int64_t numel;
    /* numel little-endian elements of data_type (float32, int32 or int64;
     * NULL for other types); possibly unaligned: read with memcpy */
    const void *data;
    void *owned; /* data, when it is not a slice of the file's bytes */
    /* external data (data_location EXTERNAL), resolved by onnx_model_load */
    char *location;
    int64_t offset, length; /* length -1: to the end of the file */
} onnx_tensor;

typedef struct onnx_attr {
    char *name;
    onnx_attr_type type;
    float f;
    int64_t i;
    char *s;
    onnx_tensor *t;
    int n_floats, n_ints;
    float *floats;
    int64_t *ints;
} onnx_attr;

typedef struct onnx_node {
    char *name, *op_type, *domain;
    int n_inputs, n_outputs, n_attrs;
    char **inputs; /* "" for an optional input left out */
    char **outputs;
    onnx_attr *attrs;
} onnx_node;

/* A graph input or output.  dims[d] is -1 for a symbolic or unknown size. */
typedef struct onnx_value {
    char *name;
    int32_t elem_type; /* 0: not given */
    int ndim;          /* -1: no shape given */
    int64_t dims[ONNX_MAX_DIMS];
    char *dim_params[ONNX_MAX_DIMS]; /* the symbolic names ("batch"), or NULL */
} onnx_value;

typedef struct onnx_opset {
    char *domain; /* "" or "ai.onnx": the standard operators */
    int64_t version;
} onnx_opset;

typedef struct onnx_model {
    int64_t ir_version;
    char *producer_name, *producer_version;
    int n_opsets, n_meta;
    onnx_opset *opsets;
    char **meta_keys, **meta_values;
    /* the main graph */
    char *graph_name;
    int n_nodes, n_initializers, n_inputs, n_outputs;
    onnx_node *nodes;
    onnx_tensor *initializers;
    onnx_value *inputs, *outputs;
    /* what cuttle refuses, recorded by the decoder for the importer */
    bool has_sparse_initializer, has_training_info, has_functions;
    uint8_t *file; /* the whole file; tensors may point into it */
    size_t file_bytes;
} onnx_model;

/* Read and decode the file at path, and read its tensors' external data
 * files (named relative to its folder; absolute names and ".." are
 * refused).  CT_ERR_IO, CT_ERR_FORMAT, CT_ERR_MEMORY with a message naming
 * the file and the part that is wrong. */
ct_status onnx_model_load(const char *path, onnx_model **out);
/* Decode bytes already in memory (copied); no external data. */
ct_status onnx_model_decode(const uint8_t *bytes, size_t length, const char *name,
                            onnx_model **out);
void onnx_model_free(onnx_model *model);

/* The opset version of the standard domain, or 0 when none is imported. */
int64_t onnx_model_opset(const onnx_model *model);
const char *onnx_model_meta(const onnx_model *model, const char *key);

/* Attribute lookups on a node: NULL when absent. */
const onnx_attr *onnx_node_attr(const onnx_node *node, const char *name);

/* Element i of an int64 or int32 tensor. */
int64_t onnx_tensor_int(const onnx_tensor *t, int64_t i);
const char *onnx_dtype_name(int32_t data_type);

#endif
