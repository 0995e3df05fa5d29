/*
 * Post-training INT8 quantization (docs/quantization.md): an fp32 plan
 * becomes an inference graph whose conv2d and linear layers run the INT8
 * kernels of src/quant/.
 *
 *   1. ct_plan_optimize: batchnorms fold into their convolutions, dropout
 *      goes, so a layer is conv + bias (+ relu, fused by the planner).
 *   2. Calibration: the optimized graph, with every layer's input and output
 *      kept, runs on the calibration batches; each layer's input range is its
 *      min and max (minmax), or the range that holds p % of its values
 *      (percentile), or the top that minimizes the KL divergence between
 *      the values and their u8 quantization (entropy, as TensorRT), both
 *      from a histogram over [min, max] in a second pass.
 *   3. The int8 graph: a copy of the optimized one where each quantized layer
 *      is a qconv2d or qlinear node reading the f32 input and the bias; the
 *      node quantizes its input to u8 with the calibrated scale and zero
 *      point, and its weights (per output channel, symmetric int8, packed
 *      here, owned by the ct_quantized) multiply it.  Between consecutive
 *      int8 layers (through max pools and flattens) the activations stay
 *      u8, requantized in the first one's epilogue (quant/activations.c).
 *      The last layer (the classifier) stays f32 unless asked.
 *   4. The error of each layer: the int8 graph, with the layers' outputs
 *      kept, against the f32 one on the first calibration batch (SQNR).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph.h"
#include "graph/impl.h"
#include "graph/plan.h"
#include "quant/int8.h"
#include "quant/model.h"

enum { HISTOGRAM_BINS = 2048 };
/* A layer whose dot products are shorter stays f32: the f32 direct
 * kernels beat the int8 im2col + GEMM there (vgg8_bn's first convolution,
 * K = 9, batch 64: 0.37 ms f32, 0.78 ms int8; docs/perf.md). */
enum { MIN_INT8_DEPTH = 32 };
#define DEFAULT_PERCENTILE 99.99

typedef ct_quant_layer layer;
typedef ct_quantizer quantizer;

static const char *const method_names[] = {"minmax", "percentile", "entropy"};

const char *ct_calib_method_name(ct_calib_method method)
{
    return (unsigned)method < 3 ? method_names[method] : "?";
}

ct_status ct_calib_method_parse(const char *name, ct_calib_method *out)
{
    for (int m = 0; name && m < 3; m++)
        if (strcmp(name, method_names[m]) == 0) {
            *out = (ct_calib_method)m;
            return CT_OK;
        }
    return ct_set_error(CT_ERR_ARG, "unknown calibration method '%s': expected minmax, "
                                    "percentile or entropy", name ? name : "(null)");
}

/* ---- the layers -------------------------------------------------------------- */

static const char *keep_f32_reason(const ct_tensor *t, bool last, const ct_quantize_args *args)
{
    if (t->dtype != CT_F32 || t->src[1]->dtype != CT_F32)
        return "not f32";
    if (t->op == CT_OP_CONV2D && t->attr.conv.groups != 1)
        return "grouped convolution (no int8 kernel)";
    int64_t depth = ct_tensor_numel(t->src[1]) / t->src[1]->shape[0];
    if (depth > CT_INT8_MAX_DEPTH)
        return "too deep for an int32 sum";
    if (depth < MIN_INT8_DEPTH && !args->quantize_shallow)
        return "shallow (depth < 32): f32 is faster";
    if (last && !args->quantize_last)
        return "the last layer (the classifier) stays f32";
    return NULL;
}

size_t ct_quant_stem_length(const char *weight)
{
    size_t length = strlen(weight), suffix = strlen(".weight");
    if (length >= suffix && strcmp(weight + length - suffix, ".weight") == 0)
        length -= suffix;
    return length;
}

ct_status ct_quant_layers_find(quantizer *q)
{
    const ct_graph *g = q->opt.graph;
    int count = 0;
    for (int i = 0; i < g->n_nodes; i++)
        count += g->nodes[i]->op == CT_OP_CONV2D || g->nodes[i]->op == CT_OP_LINEAR;
    if (count == 0)
        return ct_set_error(CT_ERR_ARG, "ct_plan_quantize: the model has no conv2d or linear "
                                        "layer to quantize");
    q->layers = calloc((size_t)count, sizeof *q->layers);
    q->out->layers = calloc((size_t)count, sizeof *q->out->layers);
    if (!q->layers || !q->out->layers)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
    q->out->n_layers = count;
    for (int i = 0, k = 0; i < g->n_nodes; i++) {
        ct_tensor *t = g->nodes[i];
        if (t->op != CT_OP_CONV2D && t->op != CT_OP_LINEAR)
            continue;
        ct_quantize_layer *info = &q->out->layers[k];
        q->layers[k++].node = t;
        const char *name = ct_tensor_name(t->src[1]);
        snprintf(info->name, sizeof info->name, "%.*s", (int)ct_quant_stem_length(name), name);
        if (!(info->weight = strdup(name)))
            return ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
        info->in_lo = FLT_MAX;
        info->in_hi = -FLT_MAX;
    }
    return CT_OK;
}

/* Which layers become int8, and their tensors kept for calibration. */
static void choose_layers(quantizer *q)
{
    int n = q->out->n_layers;
    for (int k = 0; k < n; k++) {
        ct_tensor *t = q->layers[k].node;
        ct_quantize_layer *info = &q->out->layers[k];
        info->reason = keep_f32_reason(t, k == n - 1, q->args);
        info->quantized = !info->reason;
        ct_tensor_keep(t->src[0]);
        ct_tensor_keep(t);
    }
}

/* ---- calibration ------------------------------------------------------------- */

static ct_status run_batch(ct_plan *plan, ct_tensor *x, const float *batch)
{
    CT_TRY(ct_plan_write(plan, x, batch, ct_tensor_bytes(x)));
    return ct_plan_run(plan, CT_EVAL);
}

static ct_status observe(quantizer *q, int k, bool histogram)
{
    const ct_tensor *input = q->layers[k].node->src[0];
    ct_quantize_layer *info = &q->out->layers[k];
    int64_t n = ct_tensor_numel(input);
    CT_TRY(ct_plan_read(q->calib, input, q->buffer, ct_tensor_bytes(input)));
    if (!histogram) {
        for (int64_t i = 0; i < n; i++) {
            info->in_lo = fminf(info->in_lo, q->buffer[i]);
            info->in_hi = fmaxf(info->in_hi, q->buffer[i]);
        }
        return CT_OK;
    }
    double width = ((double)info->in_hi - info->in_lo) / HISTOGRAM_BINS;
    /* entropy: exact zeros (a relu's) are left out; 0 is exact on every
     * grid, and their spike in the first bin would pull the range down */
    bool zeros = q->args->method != CT_CALIB_ENTROPY;
    for (int64_t i = 0; i < n && width > 0; i++) {
        if (!zeros && q->buffer[i] == 0.0f)
            continue;
        int bin = (int)((q->buffer[i] - (double)info->in_lo) / width);
        q->layers[k].histogram[bin < 0 ? 0 : bin >= HISTOGRAM_BINS ? HISTOGRAM_BINS - 1 : bin]++;
    }
    return CT_OK;
}

/* The range that holds `percentile` % of the values: (100 - p) / 2 % cut
 * from each tail, at bin edges. */
static void percentile_range(const uint64_t *histogram, double percentile,
                             ct_quantize_layer *info)
{
    uint64_t total = 0;
    for (int b = 0; b < HISTOGRAM_BINS; b++)
        total += histogram[b];
    double cut = (double)total * (100.0 - percentile) / 200.0, below = 0, above = 0;
    int lo = 0, hi = HISTOGRAM_BINS - 1;
    while (lo < hi && below + (double)histogram[lo] <= cut)
        below += (double)histogram[lo++];
    while (hi > lo && above + (double)histogram[hi] <= cut)
        above += (double)histogram[hi--];
    double width = ((double)info->in_hi - info->in_lo) / HISTOGRAM_BINS;
    float new_lo = (float)(info->in_lo + lo * width);
    info->in_hi = (float)(info->in_lo + (hi + 1) * width);
    info->in_lo = new_lo;
}

/* KL(P || Q) for the range of the first `bins` bins (TensorRT's entropy
 * calibration, on the u8 grid): P is the histogram with everything above
 * folded into its last bin; Q is that slice merged into U8_LEVELS chunks,
 * each chunk's count spread evenly over its nonzero bins of P. */
enum { U8_LEVELS = 255 };

static double clipped_divergence(const uint64_t *histogram, int bins, uint64_t above)
{
    double p_total = 0, q_total = 0, divergence = 0;
    double p[HISTOGRAM_BINS], q[HISTOGRAM_BINS];
    for (int b = 0; b < bins; b++)
        p_total += (p[b] = (double)histogram[b] + (b == bins - 1 ? (double)above : 0));
    for (int level = 0; level < U8_LEVELS; level++) {
        int start = (int)((int64_t)level * bins / U8_LEVELS);
        int stop = (int)((int64_t)(level + 1) * bins / U8_LEVELS);
        double sum = 0;
        int nonzero = 0;
        for (int b = start; b < stop; b++) {
            sum += (double)histogram[b];
            nonzero += p[b] > 0;
        }
        for (int b = start; b < stop; b++)
            q_total += (q[b] = p[b] > 0 ? sum / nonzero : 0);
    }
    for (int b = 0; b < bins; b++) {
        if (p[b] <= 0)
            continue;
        double pb = p[b] / p_total, qb = q[b] > 0 ? q[b] / q_total : 1e-12;
        divergence += pb * log(pb / qb);
    }
    return divergence;
}

/* The top of the range that minimizes clipped_divergence; the bottom stays
 * the minimum (after a relu, 0). */
static void entropy_range(const uint64_t *histogram, ct_quantize_layer *info)
{
    uint64_t above = 0;
    double best = INFINITY;
    int best_bins = HISTOGRAM_BINS;
    for (int bins = HISTOGRAM_BINS; bins >= U8_LEVELS + 1; bins--) {
        double divergence = clipped_divergence(histogram, bins, above);
        if (divergence < best) {
            best = divergence;
            best_bins = bins;
        }
        above += histogram[bins - 1];
    }
    double width = ((double)info->in_hi - info->in_lo) / HISTOGRAM_BINS;
    info->in_hi = (float)(info->in_lo + best_bins * width);
}

static ct_status calibrate(quantizer *q, const float *const *batches, int n_batches)
{
    ct_tensor *x = q->opt.x;
    int n = q->out->n_layers;
    bool histogram = q->args->method != CT_CALIB_MINMAX;
    for (int pass = 0; pass < (histogram ? 2 : 1); pass++)
        for (int b = 0; b < n_batches; b++) {
            CT_TRY(run_batch(q->calib, x, batches[b]));
            for (int k = 0; k < n; k++)
                if (q->out->layers[k].quantized)
                    CT_TRY(observe(q, k, pass == 1));
        }
    for (int k = 0; k < n; k++) {
        ct_quantize_layer *info = &q->out->layers[k];
        if (!info->quantized)
            continue;
        if (q->args->method == CT_CALIB_PERCENTILE)
            percentile_range(q->layers[k].histogram,
                             q->args->percentile > 0 ? q->args->percentile
                                                     : DEFAULT_PERCENTILE, info);
        else if (q->args->method == CT_CALIB_ENTROPY)
            entropy_range(q->layers[k].histogram, info);
        ct_quant_act act;
        if (ct_quant_act_from_range(info->in_lo, info->in_hi, &act) != CT_OK)
            return ct_set_error(CT_ERR_ARG, "ct_plan_quantize: the input of %s is not finite "
                                            "on the calibration batches", info->name);
        info->in_scale = act.scale;
        info->in_zero_point = act.zero_point;
    }
    return CT_OK;
}

/* ---- the weights ------------------------------------------------------------- */

static ct_status pack_weights(quantizer *q, int k)
{
    const ct_tensor *w = q->layers[k].node->src[1];
    int rows = (int)w->shape[0], depth = (int)(ct_tensor_numel(w) / rows);
    int8_t *qw = malloc((size_t)rows * (size_t)depth);
    float *values = malloc(ct_tensor_bytes(w)), *scales = malloc(sizeof(float) * (size_t)rows);
    ct_status status = qw && values && scales
                           ? ct_plan_read(q->calib, w, values, ct_tensor_bytes(w))
                           : ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
    if (status == CT_OK)
        status = ct_int8_weights_quantize(rows, depth, values, qw, scales);
    if (status == CT_OK)
        status = ct_int8_weights_pack(rows, depth, qw, scales, &q->layers[k].weights);
    free(qw);
    free(values);
    free(scales);
    return status;
}

/* ---- the int8 graph ---------------------------------------------------------- */

/* to's tensor t_to = from's tensor t (the same shape and dtype). */
static ct_status copy_values(ct_plan *from, const ct_tensor *t, ct_plan *to, ct_tensor *t_to)
{
    void *values = malloc(ct_tensor_bytes(t));
    ct_status status = values ? ct_plan_read(from, t, values, ct_tensor_bytes(t))
                              : ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host "
                                                            "memory");
    if (status == CT_OK)
        status = ct_plan_write(to, t_to, values, ct_tensor_bytes(t));
    free(values);
    return status;
}

typedef ct_quant_built built;

static ct_tensor *source(built *b, const ct_tensor *t)
{
    if (!b->map[t->id] && t->op == CT_OP_LEAF)
        b->map[t->id] = t->role == CT_ROLE_INPUT
                            ? ct_input(b->graph, t->name, t->dtype, t->ndim, t->shape)
                            : ct_graph_add_state(b->graph, t->role, t->name, t->dtype, t->ndim,
                                                 t->shape, t->init, t->init_scale);
    return b->map[t->id];
}

int ct_quant_layer_of(const quantizer *q, const ct_tensor *t)
{
    for (int k = 0; k < q->out->n_layers; k++)
        if (q->layers[k].node == t)
            return k;
    return -1;
}

static ct_tensor *int8_node(quantizer *q, built *b, const ct_tensor *t, int k,
                            const ct_quant_u8 *u8)
{
    ct_tensor *srcs[2] = {source(b, t->src[0]), t->n_src == 3 ? source(b, t->src[2]) : NULL};
    ct_op op = t->op == CT_OP_CONV2D ? CT_OP_QCONV2D : CT_OP_QLINEAR;
    bool out_u8 = u8->kind && u8->kind[t->id] == CT_QUANT_U8;
    ct_tensor *node = ct_graph_add_node(b->graph, op, out_u8 ? CT_U8 : CT_F32, t->ndim,
                                        t->shape, srcs[1] ? 2 : 1, srcs);
    if (node) {
        const ct_quantize_layer *info = &q->out->layers[k];
        node->attr.quant.conv = t->attr.conv;
        node->attr.quant.x_scale = info->in_scale;
        node->attr.quant.x_zero_point = info->in_zero_point;
        node->attr.quant.weights = q->layers[k].weights;
        node->attr.quant.weight_name = info->weight;
        if (out_u8) {
            node->attr.quant.relu = u8->relu[k];
            node->attr.quant.out_scale = u8->out_q[k].scale;
            node->attr.quant.out_zero_point = u8->out_q[k].zero_point;
        }
    }
    return node;
}

static ct_tensor *copy_node(built *b, const ct_tensor *t, ct_dtype dtype)
{
    ct_tensor *srcs[CT_MAX_SRC];
    for (int s = 0; s < t->n_src; s++)
        if (!(srcs[s] = source(b, t->src[s])))
            return NULL;
    if (t->op == CT_OP_VIEW)
        return ct_graph_add_view(b->graph, srcs[0], t->view_offset - t->src[0]->view_offset,
                                 t->ndim, t->shape);
    ct_tensor *copy = ct_graph_add_node(b->graph, t->op, dtype, t->ndim, t->shape, t->n_src,
                                        srcs);
    if (copy)
        copy->attr = t->attr;
    return copy;
}

ct_status ct_quant_build(quantizer *q, bool keep_layers, built *b, ct_plan **plan)
{
    const ct_graph *old = q->opt.graph;
    b->graph = ct_graph_new();
    b->map = calloc((size_t)old->n_nodes, sizeof *b->map);
    if (!b->graph || !b->map)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
    /* u8 between the layers, unless every layer's output is read back
     * (keep_layers: the report's errors) or asked not to */
    ct_quant_u8 u8 = {0};
    if (!keep_layers && !q->out->args.f32_activations)
        CT_TRY(ct_quant_u8_plan(q, &u8));
    for (int i = 0; i < old->n_nodes && b->graph->status == CT_OK; i++) {
        const ct_tensor *t = old->nodes[i];
        int kind = u8.kind ? u8.kind[i] : CT_QUANT_F32;
        if (t->op == CT_OP_LEAF)
            continue;
        if (kind == CT_QUANT_U8_FOLDED) { /* a relu the layer before it applies */
            b->map[i] = b->map[t->src[0]->id];
            continue;
        }
        int k = ct_quant_layer_of(q, t);
        b->map[i] = k >= 0 && q->out->layers[k].quantized
                        ? int8_node(q, b, t, k, &u8)
                        : copy_node(b, t, kind == CT_QUANT_U8 ? CT_U8 : t->dtype);
        if (b->map[i] && (t == q->opt.y || (k >= 0 && keep_layers)))
            ct_tensor_keep(b->map[i]);
    }
    for (int k = 0; k < q->out->n_layers; k++)
        q->out->layers[k].out_u8 = u8.kind && u8.kind[q->layers[k].node->id] == CT_QUANT_U8;
    ct_quant_u8_free(&u8);
    source(b, q->opt.x);
    CT_TRY(b->graph->status);
    CT_TRY(ct_plan_new(b->graph, ct_plan_backend(q->calib), 0, plan));
    for (int i = 0; i < old->n_nodes; i++) {
        const ct_tensor *t = old->nodes[i];
        if (b->map[i] && t->op == CT_OP_LEAF && t->role != CT_ROLE_INPUT)
            CT_TRY(copy_values(q->calib, t, *plan, b->map[i]));
    }
    return CT_OK;
}

static double sqnr_db(const float *f, const float *g, int64_t n)
{
    double signal = 0, noise = 0;
    for (int64_t i = 0; i < n; i++) {
        signal += (double)f[i] * f[i];
        noise += ((double)f[i] - g[i]) * ((double)f[i] - g[i]);
    }
    return noise == 0 ? INFINITY : 10.0 * log10(signal / noise);
}

/* Each layer's output, int8 graph against f32, on the first batch. */
static ct_status measure(quantizer *q, const float *batch)
{
    built b = {0};
    ct_plan *plan = NULL;
    ct_status status = ct_quant_build(q, true, &b, &plan);
    if (status == CT_OK)
        status = run_batch(q->calib, q->opt.x, batch);
    if (status == CT_OK)
        status = run_batch(plan, b.map[q->opt.x->id], batch);
    for (int k = 0; k < q->out->n_layers && status == CT_OK; k++) {
        const ct_tensor *t = q->layers[k].node;
        int64_t n = ct_tensor_numel(t);
        float *int8_out = malloc(ct_tensor_bytes(t));
        status = int8_out ? ct_plan_read(q->calib, t, q->buffer, ct_tensor_bytes(t))
                          : ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
        if (status == CT_OK)
            status = ct_plan_read(plan, b.map[t->id], int8_out, ct_tensor_bytes(t));
        if (status == CT_OK)
            q->out->layers[k].sqnr_db = sqnr_db(q->buffer, int8_out, n);
        free(int8_out);
    }
    ct_plan_free(plan);
    ct_graph_free(b.graph);
    free(b.map);
    return status;
}

/* ---- the whole ---------------------------------------------------------------- */

bool ct_quant_backend_supported(const ct_backend *backend)
{
    const ct_impl *const *impls;
    return ct_impl_list(backend, CT_OP_QCONV2D, &impls) > 0 &&
           ct_impl_list(backend, CT_OP_QLINEAR, &impls) > 0;
}

static ct_status check_args(ct_plan *plan, const ct_tensor *x, const ct_quantize_args *args,
                            const float *const *batches, int n_batches)
{
    if (!plan || !x || !args)
        return ct_set_error(CT_ERR_ARG, "ct_plan_quantize: plan, x, y and args are required");
    const ct_backend *backend = ct_plan_backend(plan);
    if (!ct_quant_backend_supported(backend))
        return ct_set_error(CT_ERR_UNSUPPORTED, "ct_plan_quantize: the int8 ops (qconv2d, "
                                                "qlinear) run on the cpu backend only, not on "
                                                "%s: plan the model on the cpu",
                            ct_backend_name(backend));
    if ((unsigned)args->method > CT_CALIB_ENTROPY)
        return ct_set_error(CT_ERR_ARG, "ct_plan_quantize: unknown calibration method %d",
                            (int)args->method);
    if (args->method == CT_CALIB_PERCENTILE &&
        !(args->percentile == 0 || (args->percentile > 50 && args->percentile <= 100)))
        return ct_set_error(CT_ERR_ARG, "ct_plan_quantize: percentile %g is outside (50, 100]",
                            args->percentile);
    if (!batches || n_batches < 1)
        return ct_set_error(CT_ERR_ARG, "ct_plan_quantize: no calibration batches (got %d): "
                                        "calibration needs at least one", n_batches);
    for (int b = 0; b < n_batches; b++)
        if (!batches[b])
            return ct_set_error(CT_ERR_ARG, "ct_plan_quantize: calibration batch %d is NULL", b);
    return CT_OK;
}

static ct_status quantize(quantizer *q, ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                          const float *const *batches, int n_batches)
{
    CT_TRY(ct_plan_optimize(plan, x, y, &q->opt));
    q->out->optimize = q->opt.report;
    CT_TRY(ct_quant_layers_find(q));
    choose_layers(q);
    CT_TRY(ct_plan_new(q->opt.graph, ct_plan_backend(plan), 0, &q->calib));
    size_t most = 0;
    for (int i = 0; i < q->opt.graph->n_nodes; i++) {
        ct_tensor *t = q->opt.graph->nodes[i];
        if (t->op == CT_OP_LEAF && t->role != CT_ROLE_INPUT)
            CT_TRY(copy_values(q->opt.plan, t, q->calib, t));
        if (t->keep && ct_tensor_bytes(t) > most)
            most = ct_tensor_bytes(t);
    }
    q->buffer = malloc(most);
    if (!q->buffer)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
    for (int k = 0; k < q->out->n_layers; k++)
        if (q->out->layers[k].quantized && q->args->method != CT_CALIB_MINMAX &&
            !(q->layers[k].histogram = calloc(HISTOGRAM_BINS, sizeof(uint64_t))))
            return ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
    CT_TRY(calibrate(q, batches, n_batches));
    for (int k = 0; k < q->out->n_layers; k++)
        if (q->out->layers[k].quantized)
            CT_TRY(pack_weights(q, k));
    CT_TRY(measure(q, batches[0]));
    built b = {0};
    ct_status status = ct_quant_build(q, false, &b, &q->out->plan);
    q->out->graph = b.graph;
    if (status == CT_OK) {
        q->out->x = b.map[q->opt.x->id];
        q->out->y = b.map[q->opt.y->id];
    }
    free(b.map);
    return status;
}

ct_status ct_quant_finish(quantizer *q, ct_status status)
{
    ct_quantized *out = q->out;
    int n_packed = 0;
    for (int k = 0; k < out->n_layers && q->layers; k++)
        n_packed += q->layers[k].weights != NULL;
    out->packed = calloc((size_t)(n_packed ? n_packed : 1), sizeof *out->packed);
    if (!out->packed && status == CT_OK)
        status = ct_set_error(CT_ERR_MEMORY, "ct_plan_quantize: out of host memory");
    for (int k = 0; k < out->n_layers && q->layers; k++) {
        if (out->packed && q->layers[k].weights)
            out->packed[out->n_packed++] = q->layers[k].weights;
        else
            ct_int8_weights_free(q->layers[k].weights);
        free(q->layers[k].histogram);
    }
    free(q->layers);
    free(q->buffer);
    ct_plan_free(q->calib);
    ct_optimized_free(&q->opt);
    if (status != CT_OK)
        ct_quantized_free(out);
    return status;
}

ct_status ct_plan_quantize(ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                           const ct_quantize_args *args, const float *const *batches,
                           int n_batches, ct_quantized *out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_plan_quantize: out is NULL");
    memset(out, 0, sizeof *out);
    CT_TRY(check_args(plan, x, args, batches, n_batches));
    out->args = *args;
    if (out->args.method == CT_CALIB_PERCENTILE && out->args.percentile == 0)
        out->args.percentile = DEFAULT_PERCENTILE;
    out->calib_batches = n_batches;
    out->calib_batch = (int)x->shape[0];
    quantizer q = {.args = args, .out = out};
    return ct_quant_finish(&q, quantize(&q, plan, x, y, batches, n_batches));
}

void ct_quantized_free(ct_quantized *quantized)
{
    if (!quantized)
        return;
    ct_plan_free(quantized->plan);
    ct_graph_free(quantized->graph);
    for (int k = 0; k < quantized->n_packed; k++)
        ct_int8_weights_free(quantized->packed[k]);
    free(quantized->packed);
    for (int k = 0; quantized->layers && k < quantized->n_layers; k++)
        free((char *)quantized->layers[k].weight);
    free(quantized->layers);
    memset(quantized, 0, sizeof *quantized);
}
