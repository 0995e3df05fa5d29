/*
 * Which activations of an int8 graph stay u8 between its int8 layers
 * (docs/quantization.md, "u8 between layers").
 *
 * An int8 layer whose output reaches only other int8 layers, through max
 * pools and whole-tensor views (a flatten), writes u8 on the grid of the
 * layers that read it (their calibrated input scale and zero point): its
 * epilogue requantizes instead of writing f32, the pools run on bytes, and
 * the readers skip their own quantizing pass.  A relu that is the layer's
 * only reader folds into the layer's epilogue.  The result is the same bits
 * as f32 between the layers: the epilogue's requantization is the readers'
 * quantization rule (ct_int8_requantize, the same 1 / scale), and max
 * commutes with that monotone rule; NaN is the exception (a u8 pool never
 * sees one).
 *
 * The region of a layer stays f32 when any tensor in it is the graph's
 * output, has another kind of reader (an add, a float layer, a softmax), or
 * feeds int8 layers calibrated on different grids.
 */
#include <stdlib.h>

#include "core/error.h"
#include "quant/model.h"

/* The nodes of g that read each node, as one array (CSR): the readers of
 * node i are reader[first[i] .. first[i + 1]).  A node that aliases another
 * (view_of) without reading it as src[0] counts as a reader too. */
typedef struct readers {
    int *first, *reader;
} readers;

static void readers_free(readers *r)
{
    free(r->first);
    free(r->reader);
}

static bool aliases_without_reading(const ct_tensor *t)
{
    return t->view_of && (t->n_src == 0 || t->src[0] != t->view_of);
}

static ct_status readers_of(const ct_graph *g, readers *r)
{
    int n = g->n_nodes, edges = 0;
    r->first = calloc((size_t)n + 2, sizeof *r->first);
    for (int i = 0; i < n && r->first; i++) {
        const ct_tensor *t = g->nodes[i];
        for (int s = 0; s < t->n_src; s++)
            r->first[t->src[s]->id + 2]++, edges++;
        if (aliases_without_reading(t))
            r->first[t->view_of->id + 2]++, edges++;
    }
    r->reader = malloc(sizeof *r->reader * (size_t)(edges ? edges : 1));
    if (!r->first || !r->reader) {
        readers_free(r);
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
    }
    /* counts at first[id + 2], summed: first[id + 1] is where node id's
     * readers start; each one filled moves it on, so that afterwards
     * first[id] is where they start and first[id + 1] where they end */
    for (int i = 2; i <= n + 1; i++)
        r->first[i] += r->first[i - 1];
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = g->nodes[i];
        for (int s = 0; s < t->n_src; s++)
            r->reader[r->first[t->src[s]->id + 1]++] = t->id;
        if (aliases_without_reading(t))
            r->reader[r->first[t->view_of->id + 1]++] = t->id;
    }
    return CT_OK;
}

/* A node a u8 value passes through unchanged in kind: a max pool, or a
 * view of the whole tensor from its start (a flatten). */
static bool passes_u8(const ct_tensor *t, const ct_tensor *from)
{
    if (t->n_src < 1 || t->src[0] != from)
        return false;
    return t->op == CT_OP_MAXPOOL2D ||
           (t->op == CT_OP_VIEW && t->view_offset == from->view_offset);
}

/* The int8 layer whose input is t (src[0]), or -1. */
static int int8_reader(const ct_quantizer *q, const ct_tensor *t, const ct_tensor *from)
{
    if (t->n_src < 1 || t->src[0] != from)
        return -1;
    int k = ct_quant_layer_of(q, t);
    return k >= 0 && q->out->layers[k].quantized ? k : -1;
}

/* The region of layer k (see the top): whether it can be u8, its grid in
 * *grid; `region` (n_nodes ids) receives its tensors, *n_region how many. */
static bool region_of(const ct_quantizer *q, const readers *r, const ct_tensor *start,
                      int *region, int *n_region, ct_quant_act *grid)
{
    const ct_graph *g = q->opt.graph;
    int n = 0, done = 0, consumers = 0;
    region[n++] = start->id;
    while (done < n) {
        const ct_tensor *t = g->nodes[region[done++]];
        if (t == q->opt.y)
            return false;
        for (int e = r->first[t->id]; e < r->first[t->id + 1]; e++) {
            const ct_tensor *reader = g->nodes[r->reader[e]];
            int k = int8_reader(q, reader, t);
            if (k >= 0) {
                ct_quant_act p = {q->out->layers[k].in_scale, q->out->layers[k].in_zero_point};
                if (consumers++ > 0 && (p.scale != grid->scale ||
                                        p.zero_point != grid->zero_point))
                    return false;
                *grid = p;
            } else if (passes_u8(reader, t) && n < g->n_nodes) {
                region[n++] = reader->id;
            } else {
                return false;
            }
        }
    }
    *n_region = n;
    return consumers > 0;
}

ct_status ct_quant_u8_plan(const ct_quantizer *q, ct_quant_u8 *plan)
{
    const ct_graph *g = q->opt.graph;
    readers r = {0};
    CT_TRY(readers_of(g, &r));
    plan->kind = calloc((size_t)g->n_nodes, sizeof *plan->kind);
    plan->out_q = calloc((size_t)q->out->n_layers, sizeof *plan->out_q);
    plan->relu = calloc((size_t)q->out->n_layers, sizeof *plan->relu);
    int *region = malloc(sizeof *region * (size_t)g->n_nodes);
    if (!plan->kind || !plan->out_q || !plan->relu || !region) {
        readers_free(&r);
        free(region);
        ct_quant_u8_free(plan);
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
    }
    for (int k = 0; k < q->out->n_layers; k++) {
        const ct_tensor *layer = q->layers[k].node, *start = layer;
        if (!q->out->layers[k].quantized)
            continue;
        int first = r.first[layer->id], count = r.first[layer->id + 1] - first;
        const ct_tensor *only = count == 1 ? g->nodes[r.reader[first]] : NULL;
        bool relu = only && only->op == CT_OP_RELU && !aliases_without_reading(only);
        if (relu)
            start = only;
        int n_region = 0;
        if (!region_of(q, &r, start, region, &n_region, &plan->out_q[k]))
            continue;
        plan->relu[k] = relu;
        plan->kind[layer->id] = CT_QUANT_U8;
        if (relu)
            plan->kind[start->id] = CT_QUANT_U8_FOLDED;
        for (int i = 1; i < n_region; i++)
            plan->kind[region[i]] = CT_QUANT_U8;
    }
    readers_free(&r);
    free(region);
    return CT_OK;
}

void ct_quant_u8_free(ct_quant_u8 *plan)
{
    free(plan->kind);
    free(plan->out_q);
    free(plan->relu);
    plan->kind = NULL;
    plan->out_q = NULL;
    plan->relu = NULL;
}
