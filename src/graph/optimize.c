/*
 * Inference optimization (docs/optimize.md): the forward pass of a plan,
 * from x to y, rebuilt as a new graph and plan that only infer.
 *
 *   - A batchnorm right after a convolution or linear layer is folded into
 *     that layer's weight and bias: y = (Wx + b - mean) * s + beta with
 *     s = gamma / sqrt(var + eps) is W'x + b' with W' = W * s (per output
 *     channel) and b' = (b - mean) * s + beta, computed in double and
 *     rounded once.  Two kernels (statistics, apply) and a pass over the
 *     activations go; the layer's ReLU then fuses into the convolution.
 *   - Dropout, an identity in inference, goes.
 *   - The graph has no backward, so the arena is laid out for the forward
 *     pass alone: each activation lives from its producer to its last
 *     reader, not until backward needs it.
 *
 * The new graph is a copy of the old one's nodes that y needs, in their
 * order, made with the graph's own node constructors, so everything the
 * planner does for any graph (fusing a ReLU into its producer, a 2x2 max
 * pool into its convolution) applies to it.  Its parameters and buffers
 * keep their names and take the old plan's current values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph.h"
#include "graph/plan.h"

typedef struct fold {
    const ct_tensor *layer, *apply; /* of the old graph: the conv or linear, the batchnorm */
    ct_tensor *weight, *bias;       /* the new graph's parameters */
} fold;

typedef struct rewrite {
    const ct_graph *old;
    ct_graph *graph;
    ct_tensor **map;             /* by old id: the new tensor that holds its values */
    bool *needed;                /* by old id: y depends on it */
    int *readers;                /* by old id: readers among the needed nodes */
    const ct_tensor **folded_by; /* by old layer id: the batchnorm folded into it */
    fold *folds;
    int n_folds, removed;
} rewrite;

static bool f32_leaf(const ct_tensor *t, ct_role role)
{
    return t->op == CT_OP_LEAF && t->role == role && t->dtype == CT_F32;
}

/* y's ancestors, and how many of them read each node. */
static void mark_needed(rewrite *rw, const ct_tensor *y)
{
    rw->needed[y->id] = true;
    for (int i = y->id; i >= 0; i--) {
        const ct_tensor *t = rw->old->nodes[i];
        if (!rw->needed[i])
            continue;
        for (int s = 0; s < t->n_src; s++) {
            rw->needed[t->src[s]->id] = true;
            rw->readers[t->src[s]->id]++;
        }
        if (t->view_of && (t->n_src == 0 || t->src[0] != t->view_of)) {
            rw->needed[t->view_of->id] = true;
            rw->readers[t->view_of->id]++;
        }
    }
}

/* The conv or linear layer that `apply` (a batchnorm) can fold into: f32,
 * read by this batchnorm alone, with weight and bias of its own. */
static const ct_tensor *fold_target(const rewrite *rw, const ct_tensor *apply)
{
    const ct_tensor *layer = apply->src[0], *stats = apply->src[1];
    if (stats->op != CT_OP_BN_STATS || stats->src[0] != layer || apply->dtype != CT_F32)
        return NULL;
    if ((layer->op != CT_OP_CONV2D && layer->op != CT_OP_LINEAR) || layer->dtype != CT_F32 ||
        layer->keep || rw->readers[layer->id] != 2 || rw->readers[stats->id] != 1)
        return NULL;
    const ct_tensor *weight = layer->src[1];
    if (!f32_leaf(weight, CT_ROLE_PARAM) || rw->readers[weight->id] != 1)
        return NULL;
    if (layer->n_src == 3 &&
        (!f32_leaf(layer->src[2], CT_ROLE_PARAM) || rw->readers[layer->src[2]->id] != 1))
        return NULL;
    for (int s = 1; s < 3; s++)
        if (!f32_leaf(stats->src[s], CT_ROLE_BUFFER))
            return NULL;
    for (int s = 2; s < 4; s++)
        if (apply->src[s]->op != CT_OP_LEAF || apply->src[s]->dtype != CT_F32)
            return NULL;
    return layer;
}

static ct_tensor *clone_leaf(rewrite *rw, const ct_tensor *t, const char *name)
{
    if (t->role == CT_ROLE_INPUT)
        return ct_input(rw->graph, name, t->dtype, t->ndim, t->shape);
    return ct_graph_add_state(rw->graph, t->role, name, t->dtype, t->ndim, t->shape, t->init,
                              t->init_scale);
}

/* The new tensor for an old source; leaves are copied when first read, so
 * a folded batchnorm's parameters, read by nothing, are left behind. */
static ct_tensor *source(rewrite *rw, const ct_tensor *t)
{
    if (!rw->map[t->id] && t->op == CT_OP_LEAF)
        rw->map[t->id] = clone_leaf(rw, t, t->name);
    return rw->map[t->id];
}

/* The folded layer's bias: its own, copied, or a new one named after the
 * weight ("conv1.weight" -> "conv1.bias"; "...:bias" if that is taken). */
static ct_tensor *new_bias(rewrite *rw, const ct_tensor *layer)
{
    if (layer->n_src == 3)
        return clone_leaf(rw, layer->src[2], layer->src[2]->name);
    const ct_tensor *weight = layer->src[1];
    const char *name = weight->name ? weight->name : "folded";
    size_t stem = strlen(name), suffix = strlen(".weight");
    if (stem >= suffix && strcmp(name + stem - suffix, ".weight") == 0)
        stem -= suffix;
    char *bias_name = malloc(stem + sizeof ".bias");
    if (!bias_name)
        return ct_graph_fail(rw->graph, CT_ERR_MEMORY, "ct_plan_optimize: out of host memory");
    memcpy(bias_name, name, stem);
    strcpy(bias_name + stem, ".bias");
    if (ct_graph_find(rw->old, bias_name) || ct_graph_find(rw->graph, bias_name))
        bias_name[stem] = ':';
    int64_t channels = weight->shape[0];
    ct_tensor *bias = ct_graph_add_state(rw->graph, CT_ROLE_PARAM, bias_name, CT_F32, 1,
                                         &channels, CT_INIT_CONST, 0.0f);
    free(bias_name);
    return bias;
}

static ct_tensor *copy_node(rewrite *rw, const ct_tensor *t)
{
    ct_tensor *srcs[CT_MAX_SRC];
    /* a folded layer reads x and new parameters, not its old ones */
    int n_src = t->n_src, n_mapped = rw->folded_by[t->id] ? 1 : n_src;
    for (int s = 0; s < n_mapped; s++)
        if (!(srcs[s] = source(rw, t->src[s])))
            return NULL;
    if (t->op == CT_OP_VIEW)
        return ct_graph_add_view(rw->graph, srcs[0], t->view_offset - t->src[0]->view_offset,
                                 t->ndim, t->shape);
    if (t->view_of)
        return ct_graph_fail(rw->graph, CT_ERR_UNSUPPORTED,
                             "ct_plan_optimize: %s updates %s in place in the forward pass",
                             ct_tensor_name(t), ct_tensor_name(t->view_of));
    if (rw->folded_by[t->id]) {
        fold *f = &rw->folds[rw->n_folds++];
        *f = (fold){.layer = t, .apply = rw->folded_by[t->id]};
        f->weight = clone_leaf(rw, t->src[1], t->src[1]->name);
        f->bias = new_bias(rw, t);
        if (!f->weight || !f->bias)
            return NULL;
        srcs[1] = f->weight;
        srcs[2] = f->bias;
        n_src = 3;
    }
    ct_tensor *copy = ct_graph_add_node(rw->graph, t->op, t->dtype, t->ndim, t->shape, n_src, srcs);
    if (copy)
        copy->attr = t->attr;
    return copy;
}

static ct_status rebuild(rewrite *rw, const ct_tensor *y)
{
    mark_needed(rw, y);
    for (int i = 0; i <= y->id; i++) {
        const ct_tensor *t = rw->old->nodes[i];
        const ct_tensor *layer = rw->needed[i] && t->op == CT_OP_BN_APPLY ? fold_target(rw, t)
                                                                          : NULL;
        if (layer)
            rw->folded_by[layer->id] = t;
    }
    for (int i = 0; i <= y->id && rw->graph->status == CT_OK; i++) {
        const ct_tensor *t = rw->old->nodes[i];
        if (!rw->needed[i] || t->op == CT_OP_LEAF)
            continue;
        if (t->op == CT_OP_BN_STATS && rw->folded_by[t->src[0]->id])
            continue; /* its batchnorm is folded */
        if (t->op == CT_OP_BN_APPLY && rw->folded_by[t->src[0]->id] == t) {
            rw->map[i] = rw->map[t->src[0]->id];
        } else if (t->op == CT_OP_DROPOUT) {
            rw->map[i] = source(rw, t->src[0]);
            rw->removed++;
        } else {
            rw->map[i] = copy_node(rw, t);
        }
    }
    if (rw->graph->status == CT_OK && rw->map[y->id])
        ct_tensor_keep(rw->map[y->id]);
    return rw->graph->status;
}

static ct_status copy_values(ct_plan *from, const ct_tensor *old, ct_plan *to, ct_tensor *t,
                             void *buffer)
{
    CT_TRY(ct_plan_read(from, old, buffer, ct_tensor_bytes(old)));
    return ct_plan_write(to, t, buffer, ct_tensor_bytes(t));
}

/* W' = W * s and b' = (b - mean) * s + beta, s = gamma / sqrt(var + eps),
 * per output channel (the weight's first dimension). */
static ct_status fold_values(ct_plan *from, const fold *f, ct_plan *to)
{
    const ct_tensor *stats = f->apply->src[1], *layer = f->layer;
    const ct_tensor *vectors[4] = {f->apply->src[2], f->apply->src[3], stats->src[1],
                                   stats->src[2]}; /* gamma, beta, mean, var */
    int64_t channels = layer->src[1]->shape[0], count = ct_tensor_numel(layer->src[1]);
    int64_t per_channel = count / channels;
    float *weight = malloc(sizeof(float) * (size_t)(count + 5 * channels));
    if (!weight)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_optimize: out of host memory");
    float *bias = weight + count, *v = bias + channels;
    ct_status status = ct_plan_read(from, layer->src[1], weight, sizeof(float) * (size_t)count);
    if (layer->n_src == 3 && status == CT_OK)
        status = ct_plan_read(from, layer->src[2], bias, sizeof(float) * (size_t)channels);
    else
        memset(bias, 0, sizeof(float) * (size_t)channels);
    for (int k = 0; k < 4 && status == CT_OK; k++)
        status = ct_plan_read(from, vectors[k], v + k * channels,
                              sizeof(float) * (size_t)channels);
    double eps = stats->attr.bn.eps;
    for (int64_t c = 0; c < channels && status == CT_OK; c++) {
        double scale = v[c] / sqrt((double)v[3 * channels + c] + eps);
        for (int64_t k = 0; k < per_channel; k++)
            weight[c * per_channel + k] = (float)(weight[c * per_channel + k] * scale);
        bias[c] = (float)((bias[c] - (double)v[2 * channels + c]) * scale + v[channels + c]);
    }
    if (status == CT_OK)
        status = ct_plan_write(to, f->weight, weight, sizeof(float) * (size_t)count);
    if (status == CT_OK)
        status = ct_plan_write(to, f->bias, bias, sizeof(float) * (size_t)channels);
    free(weight);
    return status;
}

static ct_status fill_state(const rewrite *rw, ct_plan *from, ct_plan *to)
{
    size_t most = 0;
    for (int i = 0; i < rw->old->n_nodes; i++)
        if (rw->map[i] && rw->old->nodes[i]->op == CT_OP_LEAF &&
            ct_tensor_bytes(rw->old->nodes[i]) > most)
            most = ct_tensor_bytes(rw->old->nodes[i]);
    void *buffer = malloc(most ? most : 1);
    if (!buffer)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_optimize: out of host memory");
    ct_status status = CT_OK;
    for (int i = 0; i < rw->old->n_nodes && status == CT_OK; i++) {
        const ct_tensor *old = rw->old->nodes[i];
        if (rw->map[i] && old->op == CT_OP_LEAF && old->role != CT_ROLE_INPUT)
            status = copy_values(from, old, to, rw->map[i], buffer);
    }
    free(buffer);
    for (int k = 0; k < rw->n_folds && status == CT_OK; k++)
        status = fold_values(from, &rw->folds[k], to);
    return status;
}

static int64_t state_values(const ct_graph *graph, const bool *only)
{
    int64_t count = 0;
    for (int i = 0; i < graph->n_state; i++)
        if (!only || only[graph->state[i]->id])
            count += ct_tensor_numel(graph->state[i]);
    return count;
}

static ct_status finish(rewrite *rw, ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                        ct_optimized *out)
{
    CT_TRY(rebuild(rw, y));
    out->x = rw->map[x->id];
    out->y = rw->map[y->id];
    if (!out->x)
        return ct_set_error(CT_ERR_ARG, "ct_plan_optimize: y does not depend on x");
    CT_TRY(ct_plan_new(rw->graph, ct_plan_backend(plan), 0, &out->plan));
    CT_TRY(fill_state(rw, plan, out->plan));
    ct_optimize_report *r = &out->report;
    r->folded = rw->n_folds;
    r->removed = rw->removed;
    ct_plan_runs(plan, CT_EVAL, &r->kernels_before);
    ct_plan_runs(out->plan, CT_EVAL, &r->kernels_after);
    r->arena_before = ct_plan_arena_bytes(plan);
    r->arena_after = ct_plan_arena_bytes(out->plan);
    r->values_before = state_values(rw->old, rw->needed);
    r->values_after = state_values(rw->graph, NULL);
    return CT_OK;
}

ct_status ct_plan_optimize(ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                           ct_optimized *out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_plan_optimize: out is NULL");
    memset(out, 0, sizeof *out);
    if (!plan || !x || !y)
        return ct_set_error(CT_ERR_ARG, "ct_plan_optimize: plan, x and y are required");
    const ct_graph *old = ct_plan_graph(plan);
    if (x->graph != old || y->graph != old)
        return ct_set_error(CT_ERR_ARG, "ct_plan_optimize: x and y must be tensors of the "
                                        "plan's graph");
    if (x->role != CT_ROLE_INPUT)
        return ct_set_error(CT_ERR_ARG, "ct_plan_optimize: x (%s) is not an input",
                            ct_tensor_name(x));
    size_t n = (size_t)old->n_nodes;
    rewrite rw = {.old = old,
                  .graph = ct_graph_new(),
                  .map = calloc(n, sizeof *rw.map),
                  .needed = calloc(n, sizeof *rw.needed),
                  .readers = calloc(n, sizeof *rw.readers),
                  .folded_by = calloc(n, sizeof *rw.folded_by),
                  .folds = calloc(n, sizeof *rw.folds)};
    ct_status status = rw.graph && rw.map && rw.needed && rw.readers && rw.folded_by && rw.folds
                           ? CT_OK
                           : ct_set_error(CT_ERR_MEMORY, "ct_plan_optimize: out of host memory");
    if (status == CT_OK) {
        rw.graph->precision = old->precision;
        out->graph = rw.graph;
        status = finish(&rw, plan, x, y, out);
    }
    free(rw.map);
    free(rw.needed);
    free(rw.readers);
    free(rw.folded_by);
    free(rw.folds);
    if (status != CT_OK) {
        if (!out->graph)
            ct_graph_free(rw.graph);
        ct_optimized_free(out);
    }
    return status;
}

void ct_optimized_free(ct_optimized *optimized)
{
    if (!optimized)
        return;
    ct_plan_free(optimized->plan);
    ct_graph_free(optimized->graph);
    memset(optimized, 0, sizeof *optimized);
}
