/* Helpers shared by the op builders. */
#ifndef CT_OPS_COMMON_H
#define CT_OPS_COMMON_H

#include "core/error.h"
#include "graph/graph.h"
#include "ops/ops.h"

/* Declares `char <t>_desc[]` holding "'name' [shape]" for error messages. */
#define CT_DESCRIBE(t)                     \
    char t##_desc[CT_DESCRIBE_CAPACITY];   \
    ct_tensor_describe(t, t##_desc, sizeof t##_desc)

/* All srcs f32, f16 or bf16, else a CT_ERR_DTYPE naming the op and the tensor. */
bool ct_check_float(ct_graph *graph, const char *op_name, int n, ct_tensor *const *srcs);

/* Autocast (ops/autocast.c): the dtype in which the graph's convolutions
 * and linear layers run (f16 or bf16 under that precision, else f32), and x
 * converted to `dtype` (x itself if it is; a tensor's copy is made once). */
ct_dtype ct_autocast_dtype(const ct_graph *graph);
ct_tensor *ct_autocast(ct_graph *graph, ct_tensor *x, ct_dtype dtype);

/* A node of the same shape as `like`. */
ct_tensor *ct_node_like(ct_graph *graph, ct_op op, const ct_tensor *like, int n_src,
                        ct_tensor *const *srcs);

#endif
