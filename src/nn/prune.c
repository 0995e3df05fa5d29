/*
 * Structured pruning (docs/pruning.md): whole output channels of
 * convolutions removed, with everything that reads them.
 *
 * Channels are followed through the forward graph as "channel spaces": a
 * convolution starts one, and the ops that keep channels where they are
 * (batchnorm, activations, pooling, dropout) carry it on.  An addition
 * joins the spaces of its two inputs into one (union-find): a residual
 * stream is one space, written by every convolution that feeds it, and its
 * channels can only go from all of them at once.  The readers of a space
 * are sliced with it: a convolution's input channels, a batchnorm's four
 * vectors, a linear layer's input features after a flatten (H*W of them
 * per channel).  Anything else that reads a space (the model's output, a
 * concat, a custom op, a grouped convolution, a reshape) keeps it whole.
 *
 * A space's channels are ranked by the sum, over the convolutions that
 * write it, of each one's scores over its mean score (the L1 norm of a
 * filter, or |gamma| of the batchnorm after it), so that each convolution
 * weighs the same; the top ones are kept, in their order.  The new network
 * is written as a model text (nn/model_write.h) and built from it, so it is
 * a model like any other, and its parameters are filled with the kept
 * slices of the old ones by name.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "nn/model_write.h"

#define NO_SPACE (-1)

typedef struct pruner {
    const ct_graph *g;
    ct_plan *plan;
    const ct_prune_args *args;
    bool *needed;
    int *parent;            /* by node id: union-find of channel spaces; NO_SPACE */
    const char **bad;       /* by root: why its channels stay */
    int *producers;         /* by root: convolutions that write it */
    int *axis0, *axis1;     /* by leaf id: the node whose space the axis runs over */
    int64_t *block;         /* by leaf id: axis1's values per channel */
    int *flat_of;           /* by view id: the node a flatten reads */
    const ct_tensor **bn_of; /* by conv id: the batchnorm right after it */
    int **kept;             /* by root: the kept channels, ascending */
    int *n_kept;            /* by root */
    int *out_channels;      /* by conv id, for the text */
} pruner;

static int find(pruner *p, int id)
{
    if (id < 0 || p->parent[id] == NO_SPACE)
        return NO_SPACE;
    while (p->parent[id] != id) {
        p->parent[id] = p->parent[p->parent[id]];
        id = p->parent[id];
    }
    return id;
}

static void mark_bad(pruner *p, int id, const char *why)
{
    int root = find(p, id);
    if (root != NO_SPACE && !p->bad[root])
        p->bad[root] = why;
}

/* Node `id` carries the space of `from`. */
static void unite(pruner *p, int id, int from)
{
    int a = find(p, id), b = find(p, from);
    if (b == NO_SPACE) {
        mark_bad(p, id, "it reads a tensor without channels");
        return;
    }
    if (a == b)
        return;
    p->parent[b] = a;
    if (!p->bad[a])
        p->bad[a] = p->bad[b];
    p->producers[a] += p->producers[b];
}

static bool param_leaf(const ct_tensor *t)
{
    return t->op == CT_OP_LEAF && t->role == CT_ROLE_PARAM && t->dtype == CT_F32;
}

static void visit_conv(pruner *p, const ct_tensor *t)
{
    const ct_tensor *w = t->src[1];
    if (t->attr.conv.groups != 1) {
        mark_bad(p, t->src[0]->id, "a grouped convolution reads it");
        mark_bad(p, t->id, "a grouped convolution");
    }
    if (!param_leaf(w) || (t->n_src == 3 && !param_leaf(t->src[2])) || t->dtype != CT_F32) {
        mark_bad(p, t->src[0]->id, "a convolution whose weight is not an f32 parameter reads it");
        mark_bad(p, t->id, "its weight is not an f32 parameter");
        return;
    }
    p->producers[t->id]++;
    p->axis0[w->id] = t->id;
    p->axis1[w->id] = t->src[0]->id;
    p->block[w->id] = 1;
    if (t->n_src == 3)
        p->axis0[t->src[2]->id] = t->id;
}

static void visit_linear(pruner *p, const ct_tensor *t)
{
    const ct_tensor *x = t->src[0], *w = t->src[1];
    mark_bad(p, t->id, "a linear layer's features");
    if (!param_leaf(w)) {
        mark_bad(p, x->id, "a linear layer whose weight is not a parameter reads it");
        return;
    }
    int flat = p->flat_of[x->id];
    p->axis1[w->id] = flat >= 0 ? flat : x->id;
    p->block[w->id] = flat >= 0 ? ct_tensor_numel(p->g->nodes[flat]) /
                                      (p->g->nodes[flat]->shape[0] * p->g->nodes[flat]->shape[1])
                                : 1;
}

static void visit(pruner *p, const ct_tensor *t)
{
    int id = t->id;
    p->parent[id] = id;
    bool elementwise = t->op == CT_OP_RELU || t->op == CT_OP_SIGMOID || t->op == CT_OP_TANH ||
                       t->op == CT_OP_DROPOUT;
    if (elementwise && p->flat_of[t->src[0]->id] >= 0) {
        /* on the flattened features, which keep their order: still a flatten */
        p->flat_of[id] = p->flat_of[t->src[0]->id];
        mark_bad(p, id, "a reshaped tensor");
        return;
    }
    for (int s = 0; s < t->n_src; s++) {
        int flat = p->flat_of[t->src[s]->id];
        if (flat >= 0 && !(t->op == CT_OP_LINEAR && s == 0))
            mark_bad(p, flat, "it is flattened into something other than a linear layer");
    }
    switch (t->op) {
    case CT_OP_CONV2D:
        visit_conv(p, t);
        break;
    case CT_OP_LINEAR:
        visit_linear(p, t);
        break;
    case CT_OP_BN_STATS:
        p->parent[id] = NO_SPACE;
        for (int s = 1; s < 3; s++)
            p->axis0[t->src[s]->id] = t->src[0]->id;
        break;
    case CT_OP_BN_APPLY:
        unite(p, id, t->src[0]->id);
        for (int s = 2; s < 4; s++)
            p->axis0[t->src[s]->id] = t->src[0]->id;
        if (t->src[0]->op == CT_OP_CONV2D)
            p->bn_of[t->src[0]->id] = t;
        break;
    case CT_OP_RELU:
    case CT_OP_SIGMOID:
    case CT_OP_TANH:
    case CT_OP_MAXPOOL2D:
    case CT_OP_AVGPOOL2D:
    case CT_OP_GLOBAL_AVGPOOL:
    case CT_OP_DROPOUT:
        unite(p, id, t->src[0]->id);
        break;
    case CT_OP_ADD:
        unite(p, id, t->src[0]->id);
        unite(p, id, t->src[1]->id);
        break;
    case CT_OP_VIEW:
        mark_bad(p, id, "a reshaped tensor");
        if (t->ndim == 2 && t->src[0]->ndim == 4 && t->view_offset == t->src[0]->view_offset)
            p->flat_of[id] = t->src[0]->id;
        else
            mark_bad(p, t->src[0]->id, "it is reshaped");
        break;
    default:
        mark_bad(p, id, "the output of an op that pruning does not follow");
        for (int s = 0; s < t->n_src; s++)
            mark_bad(p, t->src[s]->id, "an op that pruning does not follow reads it");
        break;
    }
}

/* A convolution's score per output channel into s[C]: its filter's L1 norm
 * or |gamma| of its batchnorm. */
static ct_status channel_scores(pruner *p, const ct_tensor *conv, double *s)
{
    int channels = (int)conv->shape[1];
    const ct_tensor *from = conv->src[1];
    if (p->args->rank == CT_PRUNE_RANK_BN) {
        const ct_tensor *bn = p->bn_of[conv->id];
        if (!bn)
            return ct_set_error(CT_ERR_ARG,
                                "prune: rank bn needs a batchnorm right after every convolution "
                                "to prune, and %s has none (rank l1 needs none)",
                                from->name ? from->name : ct_tensor_name(conv));
        from = bn->src[2];
    }
    int64_t count = ct_tensor_numel(from), per = count / channels;
    float *v = malloc(sizeof *v * (size_t)count);
    if (!v)
        return ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
    ct_status status = ct_plan_read(p->plan, from, v, sizeof *v * (size_t)count);
    for (int c = 0; c < channels && status == CT_OK; c++) {
        s[c] = 0;
        for (int64_t k = 0; k < per; k++)
            s[c] += fabs((double)v[c * per + k]);
    }
    free(v);
    return status;
}

typedef struct ranked {
    double score;
    int channel;
} ranked;

/* Highest score first; on a tie, the lower channel. */
static int by_score(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->channel - y->channel;
}

static int ascending(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The kept channels of the space with root `root` of C channels. */
static ct_status choose(pruner *p, int root, int channels)
{
    double *score = calloc((size_t)channels * 2, sizeof *score), *mine = score + channels;
    int *order = malloc(sizeof *order * (size_t)channels);
    ranked *ranks = malloc(sizeof *ranks * (size_t)channels);
    ct_status status = score && order && ranks
                           ? CT_OK
                           : ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
    for (int i = 0; i <= p->g->n_nodes - 1 && status == CT_OK; i++) {
        const ct_tensor *t = p->g->nodes[i];
        if (!p->needed[i] || t->op != CT_OP_CONV2D || find(p, i) != root)
            continue;
        status = channel_scores(p, t, mine);
        double mean = 0;
        for (int c = 0; c < channels; c++)
            mean += mine[c] / channels;
        for (int c = 0; c < channels && status == CT_OK && mean > 0; c++)
            score[c] += mine[c] / mean;
    }
    int keep = channels - (int)floor(channels * p->args->ratio);
    keep = keep < 1 ? 1 : keep;
    if (status == CT_OK) {
        for (int c = 0; c < channels; c++)
            ranks[c] = (ranked){score[c], c};
        qsort(ranks, (size_t)channels, sizeof *ranks, by_score);
        for (int k = 0; k < keep; k++)
            order[k] = ranks[k].channel;
        qsort(order, (size_t)keep, sizeof *order, ascending);
        p->kept[root] = order;
        p->n_kept[root] = keep;
        order = NULL;
    }
    free(score);
    free(order);
    free(ranks);
    return status;
}

static ct_status analyse(pruner *p, const ct_tensor *x, const ct_tensor *y, ct_pruned *out)
{
    const ct_graph *g = p->g;
    p->needed[y->id] = true;
    for (int i = y->id; i >= 0; i--)
        for (int s = 0; p->needed[i] && s < g->nodes[i]->n_src; s++)
            p->needed[g->nodes[i]->src[s]->id] = true;
    p->parent[x->id] = x->id;
    mark_bad(p, x->id, "the model's input");
    for (int i = 0; i <= y->id; i++)
        if (p->needed[i] && g->nodes[i]->op != CT_OP_LEAF)
            visit(p, g->nodes[i]);
    mark_bad(p, y->id, "the model's output");
    if (p->flat_of[y->id] >= 0)
        mark_bad(p, p->flat_of[y->id], "the model's output");
    int n_convs = 0, n_ties = 0, pruned = 0;
    for (int i = 0; i <= y->id; i++)
        n_convs += p->needed[i] && g->nodes[i]->op == CT_OP_CONV2D;
    if (!(out->layers = calloc((size_t)(n_convs ? n_convs : 1), sizeof *out->layers)))
        return ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
    int *tie_of = calloc((size_t)g->n_nodes, sizeof *tie_of);
    if (!tie_of)
        return ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
    ct_status status = CT_OK;
    const char *why_none = "the model has no convolution";
    for (int i = 0; i <= y->id && status == CT_OK; i++) {
        const ct_tensor *t = g->nodes[i];
        if (!p->needed[i] || t->op != CT_OP_CONV2D)
            continue;
        ct_prune_layer *l = &out->layers[out->n_layers++];
        int root = find(p, i), channels = (int)t->shape[1];
        const char *name = t->src[1]->name ? t->src[1]->name : ct_tensor_name(t);
        size_t len = strlen(name), suffix = strlen(".weight");
        if (len > suffix && strcmp(name + len - suffix, ".weight") == 0)
            len -= suffix;
        snprintf(l->name, sizeof l->name, "%.*s", (int)len, name);
        l->channels_before = l->channels_after = channels;
        l->reason = p->bad[root];
        if (l->reason) {
            why_none = l->reason;
            continue;
        }
        if (p->producers[root] > 1 && !tie_of[root])
            tie_of[root] = ++n_ties;
        l->tie = p->producers[root] > 1 ? tie_of[root] : 0;
        if (!p->kept[root])
            status = choose(p, root, channels);
        l->channels_after = p->n_kept[root];
        p->out_channels[i] = p->n_kept[root];
        pruned++;
    }
    free(tie_of);
    if (status == CT_OK && pruned == 0)
        status = ct_set_error(CT_ERR_ARG, "prune: no convolution can be pruned: its channels "
                              "are %s", why_none);
    return status;
}

/* Old values into a new state tensor: the kept rows of axis 0 and columns
 * of axis 1 (blocks of `block`), each with its trailing values. */
static ct_status fill_one(pruner *p, const ct_tensor *old, ct_plan *to, ct_tensor *t)
{
    int64_t d0 = old->ndim >= 1 ? old->shape[0] : 1, d1 = old->ndim >= 2 ? old->shape[1] : 1;
    int64_t inner = d0 > 0 && d1 > 0 ? ct_tensor_numel(old) / (d0 * d1) : 0;
    size_t elem = ct_dtype_size(old->dtype), bytes_old = ct_tensor_bytes(old);
    int r0 = p->axis0[old->id] >= 0 ? find(p, p->axis0[old->id]) : NO_SPACE;
    int r1 = old->ndim >= 2 && p->axis1[old->id] >= 0 ? find(p, p->axis1[old->id]) : NO_SPACE;
    const int *k0 = r0 != NO_SPACE ? p->kept[r0] : NULL, *k1 = r1 != NO_SPACE ? p->kept[r1] : NULL;
    int64_t block = k1 ? p->block[old->id] : 1;
    int64_t n0 = k0 ? p->n_kept[r0] : d0, n1 = k1 ? p->n_kept[r1] * block : d1;
    if (n0 * n1 * inner != ct_tensor_numel(t) || t->dtype != old->dtype)
        return ct_set_error(CT_ERR_INTERNAL, "prune: %s has %lld values in the pruned model, "
                            "not %lld (a bug in cuttle: please report it)", ct_tensor_name(t),
                            (long long)ct_tensor_numel(t), (long long)(n0 * n1 * inner));
    char *from = malloc(bytes_old ? bytes_old : 1), *dst = malloc(ct_tensor_bytes(t) + 1);
    ct_status status = from && dst ? ct_plan_read(p->plan, old, from, bytes_old)
                                   : ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
    size_t run = (size_t)inner * elem, at = 0;
    for (int64_t i = 0; i < n0 && status == CT_OK; i++) {
        int64_t row = k0 ? k0[i] : i;
        for (int64_t j = 0; j < n1; j++, at += run) {
            int64_t col = k1 ? (int64_t)k1[j / block] * block + j % block : j;
            memcpy(dst + at, from + (size_t)(row * d1 + col) * run, run);
        }
    }
    if (status == CT_OK)
        status = ct_plan_write(to, t, dst, ct_tensor_bytes(t));
    free(from);
    free(dst);
    return status;
}

static ct_status build_pruned(pruner *p, const ct_tensor *x, const ct_tensor *y, ct_pruned *out)
{
    char header[200];
    snprintf(header, sizeof header,
             "Pruned (docs/pruning.md): %g of each prunable convolution's channels removed,\n"
             "ranked by %s; written for inputs of %lldx%lldx%lld.",
             p->args->ratio, p->args->rank == CT_PRUNE_RANK_BN ? "batchnorm |gamma|" : "filter L1",
             (long long)x->shape[1], (long long)x->shape[2], (long long)x->shape[3]);
    CT_TRY(ct_model_write(p->g, x, y, p->out_channels, p->args->name ? p->args->name : "pruned",
                          header, &out->text));
    if (!(out->graph = ct_graph_new()))
        return ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
    out->graph->precision = p->g->precision;
    out->x = ct_input(out->graph, x->name ? x->name : "x", x->dtype, x->ndim, x->shape);
    out->y = ct_model_build(out->graph, out->text, out->x, (int)y->shape[1]);
    if (ct_graph_status(out->graph) != CT_OK)
        return ct_graph_status(out->graph);
    ct_tensor_keep(out->y);
    CT_TRY(ct_plan_new(out->graph, ct_plan_backend(p->plan), 0, &out->plan));
    for (int i = 0; i < out->graph->n_state; i++) {
        ct_tensor *t = out->graph->state[i];
        const ct_tensor *old = ct_graph_find(p->g, t->name);
        if (!old)
            return ct_set_error(CT_ERR_INTERNAL, "prune: the pruned model's %s is not in the "
                                "model (a bug in cuttle: please report it)", t->name);
        CT_TRY(fill_one(p, old, out->plan, t));
    }
    return CT_OK;
}

ct_status ct_plan_prune_channels(ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                                 const ct_prune_args *args, ct_pruned *out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_plan_prune_channels: out is NULL");
    memset(out, 0, sizeof *out);
    if (!plan || !x || !y || !args)
        return ct_set_error(CT_ERR_ARG, "ct_plan_prune_channels: plan, x, y and args are "
                                        "required");
    if (!(args->ratio > 0 && args->ratio < 1))
        return ct_set_error(CT_ERR_ARG, "prune: the ratio %g is not in (0, 1)", args->ratio);
    if (args->rank != CT_PRUNE_RANK_L1 && args->rank != CT_PRUNE_RANK_BN)
        return ct_set_error(CT_ERR_ARG, "prune: unknown rank %d", (int)args->rank);
    const ct_graph *g = ct_plan_graph(plan);
    if (x->graph != g || y->graph != g || x->role != CT_ROLE_INPUT || x->ndim != 4 ||
        y->ndim != 2)
        return ct_set_error(CT_ERR_ARG, "ct_plan_prune_channels: x (an input [N,C,H,W]) and y "
                                        "(logits [N,K]) must be tensors of the plan's graph");
    size_t n = (size_t)g->n_nodes;
    pruner p = {.g = g, .plan = plan, .args = args};
    p.needed = calloc(n, sizeof *p.needed);
    p.parent = malloc(n * sizeof *p.parent);
    p.bad = calloc(n, sizeof *p.bad);
    p.producers = calloc(n, sizeof *p.producers);
    p.axis0 = malloc(n * sizeof *p.axis0);
    p.axis1 = malloc(n * sizeof *p.axis1);
    p.block = calloc(n, sizeof *p.block);
    p.flat_of = malloc(n * sizeof *p.flat_of);
    p.bn_of = calloc(n, sizeof *p.bn_of);
    p.kept = calloc(n, sizeof *p.kept);
    p.n_kept = calloc(n, sizeof *p.n_kept);
    p.out_channels = calloc(n, sizeof *p.out_channels);
    ct_status status = CT_OK;
    if (!p.needed || !p.parent || !p.bad || !p.producers || !p.axis0 || !p.axis1 || !p.block ||
        !p.flat_of || !p.bn_of || !p.kept || !p.n_kept || !p.out_channels)
        status = ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
    for (size_t i = 0; status == CT_OK && i < n; i++)
        p.parent[i] = p.axis0[i] = p.axis1[i] = p.flat_of[i] = NO_SPACE;
    if (status == CT_OK)
        status = analyse(&p, x, y, out);
    if (status == CT_OK)
        status = build_pruned(&p, x, y, out);
    for (size_t i = 0; p.kept && i < n; i++)
        free(p.kept[i]);
    free(p.needed);
    free(p.parent);
    free(p.bad);
    free(p.producers);
    free(p.axis0);
    free(p.axis1);
    free(p.block);
    free(p.flat_of);
    free(p.bn_of);
    free(p.kept);
    free(p.n_kept);
    free(p.out_channels);
    if (status != CT_OK)
        ct_pruned_free(out);
    return status;
}

void ct_pruned_free(ct_pruned *pruned)
{
    if (!pruned)
        return;
    ct_plan_free(pruned->plan);
    ct_graph_free(pruned->graph);
    free(pruned->text);
    free(pruned->layers);
    memset(pruned, 0, sizeof *pruned);
}
