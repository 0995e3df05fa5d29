/*
 * The CUDA op table's optimizer entries (table.c lists them): SGD and Adam
 * one parameter a node, or every parameter of a step in launches of up to
 * CT_CUDA_GROUP_MAX tensors (graph/impl.h's groups), and fp16's finite
 * check of the gradients (loss scaling).
 */
#include "core/error.h"
#include "cuda/backend_impl.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "graph/impl.h"
#include "graph/node_args.h"
#include "ops/ops.h"

static ct_status run_sgd_update(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_sgd_args *a = &n->attr.sgd;
    float *momentum_buf = a->momentum > 0 ? ct_exec_data(e, n->src[2]) : NULL;
    return ct_cuda_sgd_update(ct_tensor_numel(n), ct_exec_data(e, n->src[0]), ct_in(e, n, 1),
                              momentum_buf, e->step_values, a->momentum, a->dampening,
                              a->weight_decay, a->nesterov, b->stream);
}

static ct_status run_adam_update(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    const ct_adam_args *a = &n->attr.adam;
    return ct_cuda_adam_update(ct_tensor_numel(n), ct_exec_data(e, n->src[0]), ct_in(e, n, 1),
                               ct_exec_data(e, n->src[2]), ct_exec_data(e, n->src[3]),
                               e->step_values, a->beta1, a->beta2, a->eps, a->weight_decay,
                               a->decoupled, b->stream);
}

/* fp16's loss scaling: the gradients' inf and NaN (f32 sources; a chained
 * check's i32 output only orders them) into the output and the step's
 * found_inf. */
static ct_status run_check_finite(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    ct_cuda_group group = {.n = 0};
    for (int s = 0; s < n->n_src; s++) {
        if (n->src[s]->dtype != CT_F32)
            continue;
        group.arrays[group.n][0] = ct_exec_data(e, n->src[s]);
        group.count[group.n++] = ct_tensor_numel(n->src[s]);
    }
    return ct_cuda_check_finite(&group, ct_exec_data(e, n), (ct_step_values *)e->step_values,
                                b->stream);
}

/* ---- the optimizer's updates, every parameter in one launch ------------------------- */

/* nodes[first, first + group->n) as a group: the parameter (the update is
 * in place on src[0]), its gradient and state buffers. */
static void fill_group(const ct_exec *e, const ct_tensor *const *nodes, int first, int n,
                       ct_cuda_group *group)
{
    group->n = n;
    for (int t = 0; t < n; t++) {
        const ct_tensor *node = nodes[first + t];
        group->count[t] = ct_tensor_numel(node);
        for (int s = 0; s < 4; s++)
            group->arrays[t][s] = s < node->n_src ? ct_exec_data(e, node->src[s]) : NULL;
    }
}

/* The update of one group of up to CT_CUDA_GROUP_MAX tensors, with the
 * settings of `node` (the group's first). */
typedef ct_status (*group_update)(const ct_cuda_group *group, const ct_exec *e,
                                  const ct_tensor *node, cudaStream_t stream);

static ct_status sgd_group_update(const ct_cuda_group *group, const ct_exec *e,
                                  const ct_tensor *node, cudaStream_t stream)
{
    const ct_sgd_args *a = &node->attr.sgd;
    return ct_cuda_sgd_update_group(group, e->step_values, a->momentum, a->dampening,
                                    a->weight_decay, a->nesterov, stream);
}

static ct_status adam_group_update(const ct_cuda_group *group, const ct_exec *e,
                                   const ct_tensor *node, cudaStream_t stream)
{
    const ct_adam_args *a = &node->attr.adam;
    return ct_cuda_adam_update_group(group, e->step_values, a->beta1, a->beta2, a->eps,
                                     a->weight_decay, a->decoupled, stream);
}

/* nodes[0..n) in launches of up to CT_CUDA_GROUP_MAX tensors. */
static ct_status run_groups(ct_backend *backend, const ct_exec *e, const ct_tensor *const *nodes,
                            int n, group_update update)
{
    cuda_backend *b = backend->impl;
    CT_CUDA_CALL(cudaSetDevice(b->device)); /* as cuda_run_node does for a node */
    for (int first = 0; first < n; first += CT_CUDA_GROUP_MAX) {
        ct_cuda_group group;
        fill_group(e, nodes, first, n - first < CT_CUDA_GROUP_MAX ? n - first : CT_CUDA_GROUP_MAX,
                   &group);
        CT_TRY(update(&group, e, nodes[0], b->stream));
    }
    return CT_OK;
}

static ct_status run_sgd_group(ct_backend *backend, const ct_exec *e,
                               const ct_tensor *const *nodes, int n)
{
    return run_groups(backend, e, nodes, n, sgd_group_update);
}

static ct_status run_adam_group(ct_backend *backend, const ct_exec *e,
                                const ct_tensor *const *nodes, int n)
{
    return run_groups(backend, e, nodes, n, adam_group_update);
}

CT_CUDA_IMPL(, ct_cuda_sgd_update_impl, "native", run_sgd_update, .groups = ct_sgd_nodes_group,
             .run_group = run_sgd_group);
CT_CUDA_IMPL(, ct_cuda_adam_update_impl, "native", run_adam_update,
             .groups = ct_adam_nodes_group, .run_group = run_adam_group);
CT_CUDA_IMPL(, ct_cuda_check_finite_impl, "native", run_check_finite);
