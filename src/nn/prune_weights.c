/*
 * Unstructured pruning (docs/pruning.md): the weights of smallest magnitude
 * among all the convolutions and linear layers of a model set to 0, one
 * threshold for the whole model (global magnitude pruning), and a mask per
 * weight that keeps them 0 while the rest are fine-tuned.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph.h"

static int by_value(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* The weights y reads through a conv2d or linear node, each once, into
 * out[] (room for every node); returns how many. */
static int find_weights(const ct_graph *g, const ct_tensor *y, ct_tensor **out)
{
    bool *needed = calloc((size_t)g->n_nodes, sizeof *needed);
    bool *taken = calloc((size_t)g->n_nodes, sizeof *taken);
    int n = 0;
    if (needed && taken) {
        needed[y->id] = true;
        for (int i = y->id; i >= 0; i--)
            for (int s = 0; needed[i] && s < g->nodes[i]->n_src; s++)
                needed[g->nodes[i]->src[s]->id] = true;
        for (int i = 0; i <= y->id; i++) {
            const ct_tensor *t = g->nodes[i];
            if (!needed[i] || (t->op != CT_OP_CONV2D && t->op != CT_OP_LINEAR))
                continue;
            ct_tensor *w = t->src[1];
            if (w->op == CT_OP_LEAF && w->role == CT_ROLE_PARAM && w->dtype == CT_F32 &&
                w->name && !taken[w->id]) {
                taken[w->id] = true;
                out[n++] = w;
            }
        }
    }
    free(needed);
    free(taken);
    return needed && taken ? n : -1;
}

static ct_status prune(ct_plan *plan, ct_tensor *const *weights, int n, double ratio,
                       ct_sparsity *out)
{
    int64_t total = 0, most = 0;
    for (int k = 0; k < n; k++) {
        total += ct_tensor_numel(weights[k]);
        most = ct_tensor_numel(weights[k]) > most ? ct_tensor_numel(weights[k]) : most;
    }
    float *all = malloc(sizeof *all * (size_t)total);
    out->scratch = malloc(sizeof *out->scratch * (size_t)most);
    out->layers = calloc((size_t)n, sizeof *out->layers);
    if (!all || !out->scratch || !out->layers) {
        free(all);
        return ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
    }
    ct_status status = CT_OK;
    int64_t at = 0;
    for (int k = 0; k < n && status == CT_OK; k++) {
        status = ct_plan_read(plan, weights[k], all + at, ct_tensor_bytes(weights[k]));
        at += ct_tensor_numel(weights[k]);
    }
    for (int64_t i = 0; i < total; i++)
        all[i] = fabsf(all[i]);
    int64_t cut = (int64_t)floor((double)total * ratio);
    if (status == CT_OK && cut > 0) {
        qsort(all, (size_t)total, sizeof *all, by_value);
        out->threshold = all[cut - 1];
    } else {
        out->threshold = -1.0f; /* nothing goes */
    }
    free(all);
    for (int k = 0; k < n && status == CT_OK; k++) {
        ct_weight_mask *m = &out->layers[out->n_layers++];
        int64_t count = ct_tensor_numel(weights[k]);
        snprintf(m->name, sizeof m->name, "%s", weights[k]->name);
        m->count = count;
        if (!(m->keep = malloc((size_t)count)))
            return ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
        status = ct_plan_read(plan, weights[k], out->scratch, ct_tensor_bytes(weights[k]));
        for (int64_t i = 0; i < count && status == CT_OK; i++) {
            m->keep[i] = !(fabsf(out->scratch[i]) <= out->threshold);
            if (!m->keep[i]) {
                out->scratch[i] = 0.0f;
                m->zeros++;
            }
        }
        if (status == CT_OK)
            status = ct_plan_write(plan, weights[k], out->scratch, ct_tensor_bytes(weights[k]));
    }
    return status;
}

ct_status ct_plan_prune_weights(ct_plan *plan, const ct_tensor *y, double ratio,
                                ct_sparsity *out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_plan_prune_weights: out is NULL");
    memset(out, 0, sizeof *out);
    if (!plan || !y || y->graph != ct_plan_graph(plan))
        return ct_set_error(CT_ERR_ARG, "ct_plan_prune_weights: a plan and a tensor y of its "
                                        "graph are required");
    if (!(ratio > 0 && ratio < 1))
        return ct_set_error(CT_ERR_ARG, "prune: the ratio %g is not in (0, 1)", ratio);
    const ct_graph *g = y->graph;
    ct_tensor **weights = malloc(sizeof *weights * (size_t)g->n_nodes);
    int n = weights ? find_weights(g, y, weights) : -1;
    ct_status status = CT_OK;
    if (n < 0)
        status = ct_set_error(CT_ERR_MEMORY, "prune: out of host memory");
    else if (n == 0)
        status = ct_set_error(CT_ERR_ARG, "prune: the model has no convolution or linear layer "
                                          "with a weight to prune");
    else
        status = prune(plan, weights, n, ratio, out);
    free(weights);
    if (status != CT_OK)
        ct_sparsity_free(out);
    return status;
}

ct_status ct_plan_apply_masks(ct_plan *plan, ct_sparsity *masks)
{
    if (!plan || !masks)
        return ct_set_error(CT_ERR_ARG, "ct_plan_apply_masks: plan and masks are required");
    const ct_graph *g = ct_plan_graph(plan);
    for (int k = 0; k < masks->n_layers; k++) {
        const ct_weight_mask *m = &masks->layers[k];
        ct_tensor *w = ct_graph_find(g, m->name);
        if (!w || w->dtype != CT_F32 || ct_tensor_numel(w) != m->count)
            return ct_set_error(CT_ERR_ARG, "ct_plan_apply_masks: the plan has no f32 %s of "
                                            "%lld values", m->name, (long long)m->count);
        CT_TRY(ct_plan_read(plan, w, masks->scratch, ct_tensor_bytes(w)));
        for (int64_t i = 0; i < m->count; i++)
            masks->scratch[i] = m->keep[i] ? masks->scratch[i] : 0.0f;
        CT_TRY(ct_plan_write(plan, w, masks->scratch, ct_tensor_bytes(w)));
    }
    return CT_OK;
}

void ct_sparsity_free(ct_sparsity *sparsity)
{
    if (!sparsity)
        return;
    for (int k = 0; k < sparsity->n_layers; k++)
        free(sparsity->layers[k].keep);
    free(sparsity->layers);
    free(sparsity->scratch);
    memset(sparsity, 0, sizeof *sparsity);
}
