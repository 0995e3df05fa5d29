/*
 * The int8 model as a file (docs/quantization.md, "The int8 file").
 *
 * ct_quantized_save writes the int8 graph's state (biases, layers kept f32,
 * anything else the optimized graph holds) as F32 under its names, and for
 * each int8 layer its weight as I8 under the f32 weight's name, the weight
 * scales and its input's scale and zero point.  ct_plan_load_quantized
 * rebuilds the int8 plan from the f32 model's definition and such a file:
 * the definition is optimized as ct_plan_quantize optimizes it (the same
 * graph, so the same names), the file's values replace the optimized
 * graph's, and the int8 graph is built by the same code from weights packed
 * from the file's bytes.  Nothing is calibrated, so the plan is the one that
 * was saved, bit for bit.  Loading is all or nothing, every problem listed
 * in one message, like ct_plan_load_checkpoint.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/shapes.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "io/checkpoint.h"
#include "quant/model.h"

#define INT8_MARKER_KEY "quantization"
#define INT8_MARKER "int8"
/* The metadata the library writes itself (ct_quantized_save). */
enum { LIBRARY_META = 5, META_VALUE_CAPACITY = 40 };
/* The tensors of one int8 layer: weight, weight scale, input scale, input zero point. */
enum { LAYER_TENSORS = 4 };

static bool is_int8_node(const ct_tensor *t)
{
    return t->op == CT_OP_QCONV2D || t->op == CT_OP_QLINEAR;
}

/* The names of one int8 layer's tensors besides its weight. */
typedef struct layer_names {
    char *scale, *input_scale, *input_zero_point; /* owned */
} layer_names;

static void names_free(layer_names *n)
{
    free(n->scale);
    free(n->input_scale);
    free(n->input_zero_point);
    memset(n, 0, sizeof *n);
}

/* "conv2.weight" -> "conv2.weight_scale", "conv2.input_scale", "conv2.input_zero_point". */
static ct_status names_of(const char *weight, layer_names *n)
{
    size_t length = strlen(weight);
    int stem = (int)ct_quant_stem_length(weight);
    n->scale = malloc(length + sizeof "_scale");
    n->input_scale = malloc(length + sizeof ".input_scale");
    n->input_zero_point = malloc(length + sizeof ".input_zero_point");
    if (!n->scale || !n->input_scale || !n->input_zero_point) {
        names_free(n);
        return ct_set_error(CT_ERR_MEMORY, "int8 model: out of host memory for names");
    }
    sprintf(n->scale, "%s_scale", weight);
    sprintf(n->input_scale, "%.*s.input_scale", stem, weight);
    sprintf(n->input_zero_point, "%.*s.input_zero_point", stem, weight);
    return CT_OK;
}

/* The f32 weight's shape: [out, in, kh, kw] (groups 1) or [out, in]. */
static int weight_shape(const ct_tensor *node, int64_t *shape)
{
    const ct_int8_weights *w = node->attr.quant.weights;
    shape[0] = w->rows;
    if (node->op == CT_OP_QLINEAR) {
        shape[1] = w->depth;
        return 2;
    }
    const ct_conv2d_shape *c = &node->attr.quant.conv;
    shape[1] = c->in_channels;
    shape[2] = c->kernel_h;
    shape[3] = c->kernel_w;
    CT_ASSERT(shape[1] * shape[2] * shape[3] == w->depth);
    return 4;
}

/* ---- saving ----------------------------------------------------------------------- */

typedef struct saver {
    ct_st_tensor *tensors;
    int n;
    void **owned; /* host copies of state and layer names */
    int n_owned;
    float *input_scales; /* per int8 layer */
    uint8_t *zero_points;
} saver;

static ct_st_tensor *add(saver *s, const char *name, ct_dtype dtype, int ndim,
                         const int64_t *shape, const void *data, size_t bytes)
{
    ct_st_tensor *t = &s->tensors[s->n++];
    *t = (ct_st_tensor){.name = name, .dtype = dtype, .ndim = ndim, .data = data, .bytes = bytes};
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    return t;
}

static ct_status add_state(saver *s, ct_plan *plan, const ct_tensor *t)
{
    size_t bytes = ct_tensor_bytes(t);
    void *data = malloc(bytes ? bytes : 1);
    if (!data)
        return ct_set_error(CT_ERR_MEMORY, "ct_quantized_save: out of host memory for '%s'",
                            t->name);
    s->owned[s->n_owned++] = data;
    add(s, t->name, t->dtype, t->ndim, t->shape, data, bytes);
    return ct_plan_read(plan, t, data, bytes);
}

static ct_status add_layer(saver *s, const ct_tensor *node, int index)
{
    const ct_int8_weights *w = node->attr.quant.weights;
    const char *weight = node->attr.quant.weight_name;
    CT_ASSERT(w && weight);
    layer_names names;
    CT_TRY(names_of(weight, &names));
    s->owned[s->n_owned++] = names.scale;
    s->owned[s->n_owned++] = names.input_scale;
    s->owned[s->n_owned++] = names.input_zero_point;
    int64_t shape[4], rows = w->rows;
    int ndim = weight_shape(node, shape);
    s->input_scales[index] = node->attr.quant.x_scale;
    s->zero_points[index] = (uint8_t)node->attr.quant.x_zero_point;
    add(s, weight, CT_I8, ndim, shape, w->values, (size_t)w->rows * (size_t)w->depth);
    add(s, names.scale, CT_F32, 1, &rows, w->scales, sizeof(float) * (size_t)rows);
    add(s, names.input_scale, CT_F32, 0, NULL, &s->input_scales[index], sizeof(float));
    add(s, names.input_zero_point, CT_U8, 0, NULL, &s->zero_points[index], 1);
    return CT_OK;
}

/* Wider elements first, graph order among equals (a stable insertion
 * sort): the data section has no gaps, so this is what keeps every tensor
 * at an offset that is a multiple of its element size (I64, then F32, then
 * the bytes), for readers that map the file. */
static void sort_by_alignment(saver *s)
{
    for (int i = 1; i < s->n; i++) {
        ct_st_tensor t = s->tensors[i];
        int j = i;
        for (; j > 0 && ct_dtype_size(s->tensors[j - 1].dtype) < ct_dtype_size(t.dtype); j--)
            s->tensors[j] = s->tensors[j - 1];
        s->tensors[j] = t;
    }
}

ct_status ct_quantized_save(const ct_quantized *quantized, const char *path, int n_meta,
                            const ct_meta *meta)
{
    if (!quantized || !quantized->plan || !quantized->graph || !path || n_meta < 0 ||
        (n_meta > 0 && !meta))
        return ct_set_error(CT_ERR_ARG, "ct_quantized_save: the quantized model (with its plan "
                                        "and graph), path and meta are required");
    const ct_graph *g = quantized->graph;
    int n_int8 = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n_int8 += is_int8_node(g->nodes[i]);
    int n_keys = LIBRARY_META + n_meta;
    saver s = {.tensors = calloc((size_t)(g->n_state + LAYER_TENSORS * n_int8) + 1,
                                 sizeof *s.tensors),
               .owned = calloc((size_t)(g->n_state + 3 * n_int8) + 1, sizeof *s.owned),
               .input_scales = calloc((size_t)n_int8 + 1, sizeof *s.input_scales),
               .zero_points = calloc((size_t)n_int8 + 1, sizeof *s.zero_points)};
    const char **keys = calloc((size_t)n_keys, sizeof *keys);
    const char **values = calloc((size_t)n_keys, sizeof *values);
    ct_status status = CT_OK;
    if (!s.tensors || !s.owned || !s.input_scales || !s.zero_points || !keys || !values)
        status = ct_set_error(CT_ERR_MEMORY, "ct_quantized_save: out of host memory");
    /* in graph order: a layer's bias (a leaf) comes just before its int8 tensors */
    for (int i = 0, k = 0; status == CT_OK && i < g->n_nodes; i++) {
        const ct_tensor *t = g->nodes[i];
        if (t->state_index >= 0)
            status = add_state(&s, quantized->plan, t);
        else if (is_int8_node(t))
            status = add_layer(&s, t, k++);
    }
    const ct_quantize_args *a = &quantized->args;
    char numbers[3][META_VALUE_CAPACITY];
    snprintf(numbers[0], sizeof numbers[0], "%.15g", a->percentile);
    snprintf(numbers[1], sizeof numbers[1], "%d", quantized->calib_batches);
    snprintf(numbers[2], sizeof numbers[2], "%d", quantized->calib_batch);
    int k = 0;
    if (keys && values) {
        keys[k] = INT8_MARKER_KEY, values[k++] = INT8_MARKER;
        keys[k] = "calibration", values[k++] = ct_calib_method_name(a->method);
        if (a->method == CT_CALIB_PERCENTILE)
            keys[k] = "calibration_percentile", values[k++] = numbers[0];
        keys[k] = "calibration_batches", values[k++] = numbers[1];
        keys[k] = "calibration_batch", values[k++] = numbers[2];
        for (int m = 0; m < n_meta; m++)
            keys[k] = meta[m].key, values[k++] = meta[m].value;
    }
    sort_by_alignment(&s);
    if (status == CT_OK)
        status = ct_st_save(path, s.n, s.tensors, k, keys, values);
    for (int i = 0; i < s.n_owned; i++)
        free(s.owned[i]);
    free(s.owned);
    free(s.tensors);
    free(s.input_scales);
    free(s.zero_points);
    free(keys);
    free(values);
    return status;
}

/* ---- loading ---------------------------------------------------------------------- */

bool ct_checkpoint_is_int8(const ct_checkpoint *checkpoint)
{
    const char *marker = ct_checkpoint_meta(checkpoint, INT8_MARKER_KEY);
    return marker && strcmp(marker, INT8_MARKER) == 0;
}

typedef struct loader {
    ct_quantizer q;
    const ct_st_file *file;
    const char *path;
    const ct_st_tensor **used; /* file tensors that found their place */
    int n_used;
    ct_load_report problems;
} loader;


/* The file's tensor `name`, checked for dtype and shape (ndim < 0: any
 * shape of `numel` elements); NULL, with the problem noted, if it does not fit. */
static const ct_st_tensor *take(loader *l, const char *name, ct_dtype dtype, int ndim,
                                const int64_t *shape, int64_t numel)
{
    const ct_st_tensor *t = ct_st_find(l->file, name);
    char want[96], got[96];
    if (!t) {
        ct_load_report_add(&l->problems, "\n  missing: '%s' (%s)", name, ct_dtype_name(dtype));
        return NULL;
    }
    l->used[l->n_used++] = t;
    int64_t count = 1;
    bool same = ndim < 0 || t->ndim == ndim;
    for (int d = 0; d < t->ndim; d++) {
        count *= t->shape[d];
        same = same && (ndim < 0 || t->shape[d] == shape[d]);
    }
    if (!same || (ndim < 0 && count != numel)) {
        if (ndim < 0)
            snprintf(want, sizeof want, "%lld element%s", (long long)numel, numel == 1 ? "" : "s");
        else
            ct_shape_text(ndim, shape, want, sizeof want);
        ct_shape_text(t->ndim, t->shape, got, sizeof got);
        ct_load_report_add(&l->problems, "\n  shape of '%s': the model needs %s, the file has %s", name, want, got);
        return NULL;
    }
    if (t->dtype != dtype) {
        ct_load_report_add(&l->problems, "\n  dtype of '%s': the model needs %s, the file has %s", name,
                ct_dtype_name(dtype), ct_dtype_name(t->dtype));
        return NULL;
    }
    return t;
}

/* Scales must be finite and positive: the kernels divide by none, but a
 * zero, negative, NaN or infinite one gives nonsense silently. */
static bool scales_valid(loader *l, const ct_st_tensor *t)
{
    const float *scales = t->data;
    int64_t n = (int64_t)(t->bytes / sizeof(float));
    for (int64_t i = 0; i < n; i++)
        if (!(isfinite(scales[i]) && scales[i] > 0)) {
            ct_load_report_add(&l->problems, "\n  '%s' holds %g at %lld: a scale must be finite and positive (a "
                       "corrupt file?)", t->name, (double)scales[i], (long long)i);
            return false;
        }
    return true;
}

/* Layer k is int8 when the file holds its weight as I8. */
static ct_status read_layer(loader *l, int k)
{
    const ct_tensor *node = l->q.layers[k].node, *w = node->src[1];
    ct_quantize_layer *info = &l->q.out->layers[k];
    const ct_st_tensor *found = ct_st_find(l->file, w->name);
    if (!found || found->dtype != CT_I8) {
        info->reason = "f32 in the file";
        return CT_OK; /* checked with the rest of the state */
    }
    info->quantized = true;
    int rows = (int)w->shape[0], depth = (int)(ct_tensor_numel(w) / w->shape[0]);
    if (node->dtype != CT_F32 || w->dtype != CT_F32)
        ct_load_report_add(&l->problems, "\n  '%s' is int8 in the file, but the model builds it in %s: build the "
                   "model in fp32", w->name, ct_dtype_name(node->dtype));
    else if (node->op == CT_OP_CONV2D && node->attr.conv.groups != 1)
        ct_load_report_add(&l->problems, "\n  '%s' is int8 in the file, but it is a grouped convolution (no int8 "
                   "kernel)", w->name);
    else if (depth > CT_INT8_MAX_DEPTH)
        ct_load_report_add(&l->problems, "\n  '%s' is int8 in the file, but its depth %d is above %d (the int32 sums "
                   "would overflow)", w->name, depth, (int)CT_INT8_MAX_DEPTH);
    layer_names names;
    CT_TRY(names_of(w->name, &names));
    int64_t n_rows = rows;
    const ct_st_tensor *q = take(l, w->name, CT_I8, w->ndim, w->shape, 0);
    const ct_st_tensor *scale = take(l, names.scale, CT_F32, 1, &n_rows, 0);
    const ct_st_tensor *x_scale = take(l, names.input_scale, CT_F32, -1, NULL, 1);
    const ct_st_tensor *x_zero = take(l, names.input_zero_point, CT_U8, -1, NULL, 1);
    names_free(&names);
    bool valid = q && scale && x_scale && x_zero;
    if (scale && !scales_valid(l, scale))
        valid = false;
    if (x_scale && !scales_valid(l, x_scale))
        valid = false;
    if (!valid || l->problems.count > 0)
        return CT_OK;
    info->in_scale = *(const float *)x_scale->data;
    info->in_zero_point = *(const uint8_t *)x_zero->data;
    info->in_lo = (float)(0 - info->in_zero_point) * info->in_scale;
    info->in_hi = (float)(255 - info->in_zero_point) * info->in_scale;
    info->sqnr_db = NAN;
    return ct_int8_weights_pack(rows, depth, q->data, scale->data, &l->q.layers[k].weights);
}

static bool is_int8_weight(const loader *l, const ct_tensor *t)
{
    for (int k = 0; k < l->q.out->n_layers; k++)
        if (l->q.out->layers[k].quantized && l->q.layers[k].node->src[1] == t)
            return true;
    return false;
}

/* Every state tensor of the optimized graph but the int8 layers' f32
 * weights, from the file; then nothing left over. */
static void read_state(loader *l)
{
    const ct_graph *g = l->q.opt.graph;
    for (int i = 0; i < g->n_state; i++) {
        const ct_tensor *t = g->state[i];
        if (!is_int8_weight(l, t))
            take(l, t->name, t->dtype, t->ndim, t->shape, 0);
    }
    for (int i = 0; i < ct_st_count(l->file); i++) {
        const ct_st_tensor *t = ct_st_get(l->file, i);
        bool used = false;
        for (int u = 0; u < l->n_used && !used; u++)
            used = l->used[u] == t;
        if (!used)
            ct_load_report_add(&l->problems, "\n  unexpected: '%s' (%s) is not a tensor of this int8 model", t->name,
                    ct_dtype_name(t->dtype));
    }
}

static ct_status write_state(loader *l)
{
    const ct_graph *g = l->q.opt.graph;
    for (int i = 0; i < g->n_state; i++) {
        ct_tensor *t = g->state[i];
        const ct_st_tensor *st = ct_st_find(l->file, t->name);
        if (!is_int8_weight(l, t))
            CT_TRY(ct_plan_write(l->q.opt.plan, t, st->data, st->bytes));
    }
    return CT_OK;
}

/* How it was calibrated, from the metadata: the method is required (with
 * the marker, what says the file is ours), the numbers informative. */
static ct_status read_calibration(loader *l, const ct_checkpoint *checkpoint)
{
    ct_quantized *out = l->q.out;
    const char *method = ct_checkpoint_meta(checkpoint, "calibration");
    if (!method || ct_calib_method_parse(method, &out->args.method) != CT_OK)
        return ct_set_error(CT_ERR_FORMAT, "%s: metadata 'calibration' is %s%s%s, not minmax, "
                                           "percentile or entropy: was the file written by "
                                           "ct_quantized_save (cuttle quantize -o)?",
                            l->path, method ? "'" : "", method ? method : "missing",
                            method ? "'" : "");
    const char *percentile = ct_checkpoint_meta(checkpoint, "calibration_percentile");
    const char *batches = ct_checkpoint_meta(checkpoint, "calibration_batches");
    const char *batch = ct_checkpoint_meta(checkpoint, "calibration_batch");
    out->args.percentile = percentile ? strtod(percentile, NULL) : 0;
    out->calib_batches = batches ? atoi(batches) : 0;
    out->calib_batch = batch ? atoi(batch) : 0;
    return CT_OK;
}

static ct_status load(loader *l, ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                      const ct_checkpoint *checkpoint)
{
    CT_TRY(read_calibration(l, checkpoint));
    CT_TRY(ct_plan_optimize(plan, x, y, &l->q.opt));
    l->q.out->optimize = l->q.opt.report;
    CT_TRY(ct_quant_layers_find(&l->q));
    if (!(l->used = calloc((size_t)ct_st_count(l->file) + 1, sizeof *l->used)))
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_load_quantized: out of host memory");
    for (int k = 0; k < l->q.out->n_layers; k++)
        CT_TRY(read_layer(l, k));
    read_state(l);
    if (l->problems.count > 0) {
        ct_load_report_finish(&l->problems);
        return ct_set_error(CT_ERR_FORMAT, "%s does not fit this model as an int8 model (%d "
                                           "problem%s):%s\n  Was it saved from another model, "
                                           "input size or number of classes, or is it corrupt?",
                            l->path, l->problems.count, l->problems.count == 1 ? "" : "s",
                            l->problems.text);
    }
    CT_TRY(write_state(l));
    l->q.calib = l->q.opt.plan;
    ct_quant_built b = {0};
    ct_status status = ct_quant_build(&l->q, false, &b, &l->q.out->plan);
    l->q.calib = NULL;
    l->q.out->graph = b.graph;
    if (status == CT_OK) {
        l->q.out->x = b.map[l->q.opt.x->id];
        l->q.out->y = b.map[l->q.opt.y->id];
    }
    free(b.map);
    return status;
}

ct_status ct_plan_load_quantized(ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                                 const ct_checkpoint *checkpoint, ct_quantized *out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_plan_load_quantized: out is NULL");
    memset(out, 0, sizeof *out);
    if (!plan || !x || !y || !checkpoint)
        return ct_set_error(CT_ERR_ARG, "ct_plan_load_quantized: plan, x, y and checkpoint are "
                                        "required");
    const char *path = ct_checkpoint_path(checkpoint);
    if (!ct_checkpoint_is_int8(checkpoint))
        return ct_set_error(CT_ERR_ARG, "ct_plan_load_quantized: %s is not an int8 model (its "
                                        "metadata has no quantization = int8): load it with "
                                        "ct_plan_load_checkpoint", path);
    const ct_backend *backend = ct_plan_backend(plan);
    if (!ct_quant_backend_supported(backend))
        return ct_set_error(CT_ERR_UNSUPPORTED, "%s is an int8 model: its int8 ops (qconv2d, "
                                                "qlinear) run on the cpu backend only, not on "
                                                "%s; run it on the cpu (--device cpu)",
                            path, ct_backend_name(backend));
    loader l = {.q = {.out = out}, .file = ct_checkpoint_file(checkpoint), .path = path};
    ct_status status = load(&l, plan, x, y, checkpoint);
    free(l.used);
    return ct_quant_finish(&l.q, status);
}
