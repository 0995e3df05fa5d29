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

/* All srcs f32, else a CT_ERR_DTYPE naming the op and the tensor. */
bool ct_check_f32(ct_graph *graph, const char *op_name, int n, ct_tensor *const *srcs);

/* A node of the same shape as `like`. */
ct_tensor *ct_node_like(ct_graph *graph, ct_op op, const ct_tensor *like, int n_src,
                        ct_tensor *const *srcs);

#endif
