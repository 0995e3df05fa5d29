/*
 * What ct_plan_quantize (quant/model.c) and the int8 file's save and load
 * (quant/model_io.c) share: the layers of the optimized graph, the int8
 * graph built from them, and the end that hands the packed weights to the
 * ct_quantized.  Private to src/quant/.
 */
#ifndef CT_QUANT_MODEL_H
#define CT_QUANT_MODEL_H

#include "graph/graph.h"
#include "quant/int8.h"

typedef struct ct_quant_layer {
    ct_tensor *node;   /* in the optimized graph: a conv2d or linear */
    ct_int8_weights *weights;
    uint64_t *histogram; /* calibration: [HISTOGRAM_BINS] over [lo, hi] */
} ct_quant_layer;

typedef struct ct_quantizer {
    const ct_quantize_args *args;
    ct_optimized opt;
    /* the optimized graph's values: calibration's own plan with the layers'
     * tensors kept (owned), or opt.plan with a file's values (loading; set
     * to NULL before ct_quant_finish) */
    ct_plan *calib;
    ct_quant_layer *layers;
    ct_quantized *out;
    float *buffer;     /* calibration: the largest layer input or output */
} ct_quantizer;

/* The conv2d and linear nodes of q->opt.graph, in graph order, into
 * q->layers and q->out->layers (named, not yet quantized). */
ct_status ct_quant_layers_find(ct_quantizer *q);

/* The index in q->layers of the layer whose node is t, or -1. */
int ct_quant_layer_of(const ct_quantizer *q, const ct_tensor *t);

/* The int8 graph and its plan (on q->calib's backend), with its state from
 * q->calib: each layer marked quantized in q->out->layers, with its packed
 * weights in q->layers, becomes a qconv2d or qlinear node; the rest is
 * copied.  keep_layers: every layer's output kept, else only y.
 * b->map: by optimized-graph id, the new graph's tensor. */
typedef struct ct_quant_built {
    ct_graph *graph;
    ct_tensor **map;
} ct_quant_built;
ct_status ct_quant_build(ct_quantizer *q, bool keep_layers, ct_quant_built *b, ct_plan **plan);

/* The int8 graph and plan into q->out (x and y too); then the packed
 * weights go to q->out and everything else of q is freed (q->calib and
 * q->opt included).  On error q->out is freed and zeroed.  Returns status,
 * or the first error of its own. */
ct_status ct_quant_finish(ct_quantizer *q, ct_status status);

/* The activations that stay u8 between int8 layers (quant/activations.c),
 * by node of q->opt.graph. */
enum { CT_QUANT_F32 = 0, CT_QUANT_U8, CT_QUANT_U8_FOLDED /* a relu folded into its layer */ };
typedef struct ct_quant_u8 {
    uint8_t *kind;       /* [n_nodes] CT_QUANT_* */
    ct_quant_act *out_q; /* [n_layers] a u8 layer's output grid */
    bool *relu;          /* [n_layers] a u8 layer applies the relu folded into it */
} ct_quant_u8;
ct_status ct_quant_u8_plan(const ct_quantizer *q, ct_quant_u8 *plan);
/* Accepts a zeroed plan. */
void ct_quant_u8_free(ct_quant_u8 *plan);

/* Whether the backend has kernels for qconv2d and qlinear (the CPU). */
bool ct_quant_backend_supported(const ct_backend *backend);

/* The length of a weight's layer name ("conv2" of "conv2.weight"): the name
 * without ".weight" when it ends so, else the whole name. */
size_t ct_quant_stem_length(const char *weight);

#endif
