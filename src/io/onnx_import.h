/*
 * Importing ONNX graphs: the state that onnx_import.c (values, loading,
 * the public API) shares with onnx_ops.c (one function per ONNX op).
 *
 * A value (an ONNX name) is one of: a graph tensor; an initializer not yet
 * used (it becomes a parameter or buffer when an op takes it as a weight,
 * or a constant when a shape computation reads it); or a small integer
 * constant that the importer computes itself (Shape, Gather, Unsqueeze,
 * Concat on shapes, as torch.onnx writes `x.view(x.size(0), -1)`).
 */
#ifndef CT_IO_ONNX_IMPORT_H
#define CT_IO_ONNX_IMPORT_H

#include <stdbool.h>

#include "graph/graph.h"
#include "io/onnx_proto.h"

#define ONNX_MIN_OPSET 13
#define ONNX_MAX_OPSET 17

struct ct_onnx {
    onnx_model *model;
    const char *path;
    char *path_copy;
    int64_t input_shape[4]; /* batch 0: dynamic */
    int64_t classes;
};

/* The state tensor of an initializer: its own name; ":T" after it when a
 * layer takes it transposed ([out, in] from MatMul's or Gemm's [in, out]);
 * ":buffer" or ":param" before that when it also feeds an input of the
 * other kind (by_role).  ct_plan_load_onnx reads the suffixes back.  False
 * if the name does not fit. */
#define ONNX_STATE_NAME_CAPACITY 512
#define ONNX_TRANSPOSED ":T"
#define ONNX_AS_BUFFER ":buffer"
#define ONNX_AS_PARAM ":param"
bool onnx_state_name(const char *initializer, ct_role role, bool transpose, bool by_role,
                     char out[ONNX_STATE_NAME_CAPACITY]);

typedef struct im_value {
    const char *name;
    ct_tensor *tensor;    /* a graph tensor, or NULL */
    int initializer;      /* index into the model's initializers, or -1 */
    bool is_const;        /* an integer constant: */
    int const_ndim;       /* 0 (a scalar) or 1 */
    int64_t const_count;
    int64_t *const_values; /* owned */
    bool bias_added;       /* a MatMul's output that took the next Add's bias */
} im_value;

typedef struct importer {
    ct_graph *graph;
    const ct_onnx *onnx;
    const onnx_model *m;
    bool failed_here; /* im_fail put the node in front of the message already */
    im_value *values;
    int n_values, capacity;
    const onnx_node *node; /* being imported, for messages */
    int node_index;
} importer;

/* ct_onnx_load on bytes in memory named `name` in messages; tensors kept
 * in external data stay without data (the fuzz target's way in). */
ct_status onnx_load_bytes(const uint8_t *bytes, size_t length, const char *name, ct_onnx **out);

/* Fail with the node's name, op and opset in front of the message; returns
 * the status (the graph records it). */
ct_status im_fail(importer *im, ct_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The latest value of that name, or NULL. */
im_value *im_find_value(importer *im, const char *name);
/* Input i of the node (an absent optional input is NULL with no error). */
const im_value *im_value_of(importer *im, int i);
/* Input i, which the op requires: NULL with an error when absent. */
const im_value *im_required(importer *im, int i);
/* Input i as a graph tensor (an initializer becomes a parameter). */
ct_tensor *im_tensor(importer *im, int i);
/* Input i, an initializer, as a parameter or buffer; [out, in] from an
 * [in, out] initializer when `transpose`. */
ct_tensor *im_weight(importer *im, int i, ct_role role, bool transpose);
ct_tensor *im_weight_of(importer *im, const im_value *v, ct_role role, bool transpose);
/* Input i as integers (a constant or an int64 initializer). */
bool im_ints(importer *im, int i, int64_t *out, int capacity, int *count);
/* Bind output i of the node. */
ct_status im_set_tensor(importer *im, int i, ct_tensor *t);
ct_status im_set_const(importer *im, int i, int ndim, const int64_t *values, int64_t count);
/* Output i names the same initializer as another name (Identity). */
ct_status im_set_initializer(importer *im, int i, int initializer);

/* How many nodes read the value `name`, and the first of them after the
 * current node. */
int im_consumers(const importer *im, const char *name, const onnx_node **first);

/* Attributes of the current node: the allowed names (NULL-terminated);
 * any other is refused. */
ct_status im_check_attrs(importer *im, const char *const *allowed);
int64_t im_attr_int(const importer *im, const char *name, int64_t fallback);
float im_attr_float(const importer *im, const char *name, float fallback);
/* The ints of an attribute into out[0..count); false (with no error) if
 * absent, an error if it has another count. */
bool im_attr_ints(importer *im, const char *name, int64_t *out, int count);
const char *im_attr_string(const importer *im, const char *name, const char *fallback);

/* The op's importer, or NULL for an op cuttle does not import. */
typedef ct_status (*im_op_fn)(importer *im);
im_op_fn im_find_op(const char *op_type);
/* The op types cuttle imports, for messages (", "-separated). */
const char *im_op_list(void);

#endif
