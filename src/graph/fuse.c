/* Plan-time fusion of an activation into the kernel that produces its input. */
#include <stdlib.h>

#include "core/error.h"
#include "graph/fuse.h"
#include "graph/impl.h"

/* Producers whose kernels can apply a relu as they store (CT_FUSES_RELU):
 * convolution, linear (f32 or int8), batchnorm (bn -> relu) and add (a
 * residual block's add -> relu). */
static bool produces_for_relu(const ct_tensor *t)
{
    return (t->op == CT_OP_CONV2D || t->op == CT_OP_LINEAR || t->op == CT_OP_BN_APPLY ||
            t->op == CT_OP_ADD || t->op == CT_OP_QCONV2D || t->op == CT_OP_QLINEAR) &&
           t->phase == CT_PHASE_FORWARD && !t->keep && !t->view_of;
}

int ct_fuse_relu(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                 const ct_tensor **alias_of, uint8_t *epilogue)
{
    /* Readers of each node: sources and views both count. */
    int *readers = calloc((size_t)graph->n_nodes + 1, sizeof *readers);
    if (!readers)
        return 0; /* fusing is an optimization: without memory, run unfused */
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *t = graph->nodes[i];
        for (int s = 0; s < t->n_src; s++)
            readers[t->src[s]->id]++;
        if (t->view_of && (t->n_src == 0 || t->src[0] != t->view_of))
            readers[t->view_of->id]++;
    }
    int fused = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *relu = graph->nodes[i];
        if (relu->op != CT_OP_RELU)
            continue;
        const ct_tensor *producer = relu->src[0];
        if (!produces_for_relu(producer) || readers[producer->id] != 1 ||
            (on_host && on_host[producer->id]) ||
            !ct_impl_fuses(backend, producer, CT_FUSES_RELU, NULL))
            continue;
        CT_ASSERT(producer->dtype == relu->dtype && ct_same_shape(producer, relu));
        alias_of[relu->id] = producer;
        epilogue[producer->id] = CT_EPILOGUE_RELU;
        fused++;
    }
    free(readers);
    return fused;
}

int ct_fuse_eval_maxpool(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                         const ct_tensor *const *schedule, int n_schedule,
                         const ct_tensor **alias_of, const uint8_t *epilogue,
                         const ct_tensor **pool_into)
{
    int *readers = calloc((size_t)graph->n_nodes + 1, sizeof *readers);
    if (!readers)
        return 0;
    for (int i = 0; i < n_schedule; i++) {
        const ct_tensor *t = schedule[i];
        for (int s = 0; s < t->n_src; s++)
            readers[t->src[s]->id]++;
        if (t->view_of && (t->n_src == 0 || t->src[0] != t->view_of))
            readers[t->view_of->id]++;
    }
    int fused = 0;
    for (int i = 0; i < n_schedule; i++) {
        const ct_tensor *pool = schedule[i];
        if (pool->op != CT_OP_MAXPOOL2D)
            continue;
        const ct_tensor *relu = pool->src[0];
        const ct_tensor *conv = alias_of[relu->id];
        if (!conv || conv->op != CT_OP_CONV2D || epilogue[conv->id] != CT_EPILOGUE_RELU ||
            readers[relu->id] != 1 || relu->keep || (on_host && on_host[pool->id]) ||
            !ct_impl_fuses(backend, conv, CT_FUSES_RELU_MAXPOOL2X2, pool))
            continue;
        pool_into[conv->id] = pool;
        fused++;
    }
    free(readers);
    return fused;
}
