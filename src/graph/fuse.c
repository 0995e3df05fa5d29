/* Plan-time fusion of an activation (or its backward) into the kernel that
 * produces its input. */
#include <stdlib.h>

#include "core/error.h"
#include "graph/fuse.h"
#include "graph/impl.h"

/* Producers whose kernels can apply a relu as they store (CT_FUSES_RELU):
 * convolution, linear (f32 or int8), batchnorm (bn -> relu) and add (a
 * residual block's add -> relu; the add may compute its inputs'
 * batchnorms too, ct_fuse_bn_add). */
static bool produces_for_relu(const ct_tensor *t)
{
    return (t->op == CT_OP_CONV2D || t->op == CT_OP_LINEAR || t->op == CT_OP_BN_APPLY ||
            t->op == CT_OP_ADD || t->op == CT_OP_QCONV2D || t->op == CT_OP_QLINEAR) &&
           t->phase == CT_PHASE_FORWARD && !t->keep && !t->view_of;
}

/* Readers of each of the n nodes: sources and views both count.  NULL
 * without memory (fusing is an optimization: the plan then runs unfused). */
static int *count_readers(const ct_tensor *const *nodes, int n, int n_ids)
{
    int *readers = calloc((size_t)n_ids + 1, sizeof *readers);
    if (!readers)
        return NULL;
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = nodes[i];
        for (int s = 0; s < t->n_src; s++)
            readers[t->src[s]->id]++;
        if (t->view_of && (t->n_src == 0 || t->src[0] != t->view_of))
            readers[t->view_of->id]++;
    }
    return readers;
}

/* Readers of each node of the whole graph (count_readers). */
static int *graph_readers(const ct_graph *graph)
{
    return count_readers((const ct_tensor *const *)graph->nodes, graph->n_nodes, graph->n_nodes);
}

/* The producer that `node` (a relu, or a relu_bwd) can be fused into, with
 * the fusion it takes, or NULL: a relu into the forward kernel that made
 * its input; a relu_bwd into the kernel that made its dy: a max pool's
 * backward whose input is the relu's output (the mask the pool kernel
 * reads anyway: conv -> relu -> max pool), the backward data of the
 * linear or convolution layer that the relu feeds (its GEMM reads the
 * relu's output as it stores: relu -> linear, relu -> conv), the add that
 * sums dy's parts where the relu's output has two readers (a residual
 * block's relu, read by the next block's convolution and its shortcut),
 * or a global average pool's backward (relu -> global average pool). */
static const ct_tensor *relu_producer(const ct_tensor *node, unsigned *fusion)
{
    if (node->op == CT_OP_RELU && produces_for_relu(node->src[0])) {
        *fusion = CT_FUSES_RELU;
        return node->src[0];
    }
    const ct_tensor *dy = node->op == CT_OP_RELU_BWD ? node->src[1] : NULL;
    /* the kernels read the relu's output as their own dtype */
    if (!dy || dy->keep || dy->view_of || node->src[0]->dtype != dy->dtype)
        return NULL;
    *fusion = CT_FUSES_RELU_BWD;
    if (dy->op == CT_OP_MAXPOOL2D_BWD && dy->src[0] == node->src[0])
        return dy;
    if (dy->op == CT_OP_LINEAR_BWD_DATA || dy->op == CT_OP_CONV2D_BWD_DATA ||
        dy->op == CT_OP_ADD || dy->op == CT_OP_GLOBAL_AVGPOOL_BWD)
        return dy;
    return NULL;
}

int ct_fuse_relu(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                 const ct_tensor **alias_of, uint8_t *epilogue, const ct_tensor **epilogue_src)
{
    int *readers = graph_readers(graph);
    if (!readers)
        return 0;
    int fused = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *relu = graph->nodes[i];
        unsigned fusion = 0;
        const ct_tensor *producer = relu_producer(relu, &fusion);
        if (!producer || readers[producer->id] != 1 || (on_host && on_host[producer->id]) ||
            !ct_impl_fuses(backend, producer, fusion, NULL))
            continue;
        CT_ASSERT(producer->dtype == relu->dtype && ct_same_shape(producer, relu));
        alias_of[relu->id] = producer;
        epilogue[producer->id] = fusion == CT_FUSES_RELU ? CT_EPILOGUE_RELU : CT_EPILOGUE_RELU_BWD;
        if (fusion == CT_FUSES_RELU_BWD)
            epilogue_src[producer->id] = relu->src[0]; /* the relu's output */
        fused++;
    }
    free(readers);
    return fused;
}

int ct_fuse_maxpool(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                    const ct_tensor *const *schedule, int n_schedule, const ct_tensor **alias_of,
                    const uint8_t *epilogue, bool training, const ct_tensor **pool_into)
{
    int *readers = count_readers(schedule, n_schedule, graph->n_nodes);
    if (!readers)
        return 0;
    int fused = 0;
    for (int i = 0; i < n_schedule; i++) {
        const ct_tensor *pool = schedule[i];
        if (pool->op != CT_OP_MAXPOOL2D)
            continue;
        const ct_tensor *relu = pool->src[0];
        const ct_tensor *conv = alias_of[relu->id];
        if (!conv || conv->op != CT_OP_CONV2D || epilogue[conv->id] != CT_EPILOGUE_RELU ||
            (!training && readers[relu->id] != 1) || relu->keep ||
            (on_host && on_host[pool->id]) ||
            !ct_impl_fuses(backend, conv, CT_FUSES_RELU_MAXPOOL2X2, pool))
            continue;
        pool_into[conv->id] = pool;
        fused++;
    }
    free(readers);
    return fused;
}

int ct_fuse_bias_grad(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                      const ct_tensor **bias_into)
{
    /* the weight gradient reading each dy, by the dy's id */
    const ct_tensor **weight_of = calloc((size_t)graph->n_nodes + 1, sizeof *weight_of);
    if (!weight_of)
        return 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *w = graph->nodes[i];
        if ((w->op == CT_OP_CONV2D_BWD_WEIGHT || w->op == CT_OP_LINEAR_BWD_WEIGHT) &&
            !(on_host && on_host[w->id]))
            weight_of[w->src[1]->id] = w;
    }
    int fused = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *sum = graph->nodes[i];
        if (sum->op != CT_OP_CHANNEL_SUM || sum->dtype != CT_F32 || sum->view_of ||
            (on_host && on_host[sum->id]))
            continue;
        const ct_tensor *w = weight_of[sum->src[0]->id];
        if (!w || bias_into[w->id] || sum->src[0]->dtype != w->dtype || sum->ndim != 1 ||
            sum->shape[0] != w->shape[0] || !ct_impl_fuses(backend, w, CT_FUSES_BIAS_GRAD, NULL))
            continue;
        bias_into[w->id] = sum;
        fused++;
    }
    free(weight_of);
    return fused;
}

int ct_fuse_loss_grad(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                      const ct_tensor **grad_into)
{
    int *readers = graph_readers(graph);
    if (!readers)
        return 0;
    int fused = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *back = graph->nodes[i];
        if (back->op != CT_OP_CROSS_ENTROPY_BWD || (on_host && on_host[back->id]))
            continue;
        const ct_tensor *seed = back->src[0], *logits = back->src[1], *labels = back->src[2];
        if (seed->op != CT_OP_FILL || seed->keep || readers[seed->id] != 1)
            continue;
        for (int j = 0; j < graph->n_nodes; j++) {
            const ct_tensor *loss = graph->nodes[j];
            if (loss->op != CT_OP_CROSS_ENTROPY || loss->src[0] != logits ||
                loss->src[1] != labels || loss->attr.ce.smoothing != back->attr.ce.smoothing ||
                grad_into[loss->id] || (on_host && on_host[loss->id]) ||
                !ct_impl_fuses(backend, loss, CT_FUSES_LOSS_GRAD, back))
                continue;
            grad_into[loss->id] = back;
            fused++;
            break;
        }
    }
    free(readers);
    return fused;
}

int ct_fuse_bn_add(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                   const ct_tensor **computed_in)
{
    int *readers = graph_readers(graph);
    if (!readers)
        return 0;
    int fused = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *add = graph->nodes[i];
        if (add->op != CT_OP_ADD || add->phase != CT_PHASE_FORWARD || add->view_of ||
            (on_host && on_host[add->id]))
            continue;
        for (int s = 0; s < 2; s++) {
            const ct_tensor *apply = add->src[s];
            if (apply->op != CT_OP_BN_APPLY || apply->phase != CT_PHASE_FORWARD ||
                apply->keep || apply->view_of || readers[apply->id] != 1 ||
                apply->dtype != add->dtype || !ct_same_shape(apply, add) ||
                (on_host && on_host[apply->id]) ||
                !ct_impl_fuses(backend, add, CT_FUSES_BN_INPUT, apply))
                continue;
            computed_in[apply->id] = add;
            fused++;
        }
    }
    free(readers);
    return fused;
}

int ct_fuse_bn_params(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                      const ct_tensor *const *alias_of, const ct_tensor *(*bn_params_into)[2])
{
    int fused = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *params = graph->nodes[i];
        if (params->op != CT_OP_BN_BWD_PARAMS || (on_host && on_host[params->id]))
            continue;
        /* dy: the maker's output, or the relu's backward fused in it */
        const ct_tensor *x = params->src[0], *dy = params->src[1];
        const ct_tensor *maker = alias_of[dy->id] ? alias_of[dy->id] : dy;
        const ct_tensor **into = bn_params_into[maker->id];
        if ((maker->op != CT_OP_ADD && maker->op != CT_OP_MAXPOOL2D_BWD) ||
            maker->phase != CT_PHASE_BACKWARD || maker->view_of || into[1] ||
            (on_host && on_host[maker->id]) || x->dtype != maker->dtype ||
            !ct_same_shape(x, maker) ||
            !ct_impl_fuses(backend, maker, CT_FUSES_BN_PARAMS, params))
            continue;
        into[into[0] ? 1 : 0] = params;
        fused++;
    }
    return fused;
}

int ct_fuse_pool_bwd(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                     const ct_tensor *const *alias_of, const ct_tensor *const *bias_into,
                     const ct_tensor **computed_in)
{
    int *readers = graph_readers(graph);
    if (!readers)
        return 0;
    int fused = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *weight = graph->nodes[i];
        if (weight->op != CT_OP_CONV2D_BWD_WEIGHT || (on_host && on_host[weight->id]))
            continue;
        const ct_tensor *dy = weight->src[1];
        /* dy: the pool's backward, or the relu's fused into it */
        const ct_tensor *pool = dy->op == CT_OP_RELU_BWD ? alias_of[dy->id] : dy;
        if (!pool || pool->op != CT_OP_MAXPOOL2D_BWD || (dy != pool && dy->src[1] != pool))
            continue;
        const ct_tensor *bias = bias_into[weight->id];
        int dy_readers = 1 + (bias && bias->src[0] == dy);
        if (readers[dy->id] != dy_readers || (dy != pool && readers[pool->id] != 1) ||
            dy->keep || pool->keep || dy->view_of || pool->view_of ||
            (on_host && (on_host[dy->id] || on_host[pool->id])) ||
            !ct_impl_fuses(backend, weight, CT_FUSES_POOL_BWD, pool))
            continue;
        computed_in[pool->id] = weight;
        computed_in[dy->id] = weight;
        fused++;
    }
    free(readers);
    return fused;
}

/* Whether every node that reads t (a source, or a view of it) is `a` or
 * (computer not NULL) computed in `computer` (computed_in). */
static bool read_only_by(const ct_graph *graph, const ct_tensor *t, const ct_tensor *a,
                         const ct_tensor *const *computed_in, const ct_tensor *computer)
{
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *r = graph->nodes[i];
        bool reads = r->view_of == t;
        for (int s = 0; s < r->n_src; s++)
            reads = reads || r->src[s] == t;
        if (reads && r != a && (!computer || computed_in[r->id] != computer))
            return false;
    }
    return true;
}

int ct_fuse_pool_codes(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                       const ct_tensor *const *alias_of, const ct_tensor *const *pool_into,
                       const ct_tensor *const *computed_in, bool *pool_codes)
{
    int fused = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        const ct_tensor *pool_bwd = graph->nodes[i];
        const ct_tensor *weight = computed_in[pool_bwd->id];
        if (pool_bwd->op != CT_OP_MAXPOOL2D_BWD || !weight)
            continue;
        const ct_tensor *y = pool_bwd->src[0], *conv = alias_of[y->id];
        const ct_tensor *pool = conv ? pool_into[conv->id] : NULL;
        if (!pool || conv->op != CT_OP_CONV2D || pool->src[0] != y || y->keep || conv->keep ||
            (on_host && on_host[conv->id]) ||
            !read_only_by(graph, conv, y, computed_in, NULL) ||
            !read_only_by(graph, y, pool, computed_in, weight) ||
            !ct_impl_fuses(backend, conv, CT_FUSES_POOL_CODES, pool))
            continue;
        pool_codes[conv->id] = pool_codes[y->id] = true;
        fused++;
    }
    return fused;
}
