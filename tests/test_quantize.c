/*
 * ct_plan_quantize: SimpleCNN and vgg8_bn (random weights) become int8
 * graphs whose logits stay close to the f32 model's on inputs from the
 * calibration distribution (top-1 agreement and SQNR); the last layer
 * stays f32, and the first convolution (on one channel) unless asked;
 * percentile and entropy calibration clip ranges that minmax does not; bad
 * arguments are refused with a message that says what was wrong.
 */
#include <math.h>
#include <string.h>

#include "cuttle.h"
#include "graph/graph.h"
#include "harness.h"

enum { CALIB_BATCHES = 4, TEST_BATCHES = 8 };

static uint32_t rng_state = 2024;

static float uniform(float lo, float hi)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(rng_state >> 8) / 16777216.0f;
}

static float *random_batch(int64_t n)
{
    float *batch = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        batch[i] = uniform(-1.0f, 1.0f);
    return batch;
}

typedef struct model {
    ct_backend *backend;
    ct_graph *graph;
    ct_tensor *x, *y;
    ct_plan *plan;
    float *calib[CALIB_BATCHES];
} model;

static void model_open(model *m, const char *name, int batch, const char *device)
{
    memset(m, 0, sizeof *m);
    CHECK_OK(ct_backend_new(device, &m->backend));
    char *text = NULL;
    CHECK_OK(ct_model_source(name, &text));
    m->graph = ct_graph_new();
    m->x = ct_input(m->graph, "x", CT_F32, 4, (int64_t[]){batch, 1, 28, 28});
    m->y = ct_model_build(m->graph, text, m->x, 10);
    ct_tensor_keep(m->y);
    free(text);
    CHECK_OK(ct_graph_status(m->graph));
    CHECK_OK(ct_plan_new(m->graph, m->backend, 7, &m->plan));
    for (int b = 0; b < CALIB_BATCHES; b++)
        m->calib[b] = random_batch(ct_tensor_numel(m->x));
}

static void model_close(model *m)
{
    for (int b = 0; b < CALIB_BATCHES; b++)
        free(m->calib[b]);
    ct_plan_free(m->plan);
    ct_graph_free(m->graph);
    ct_backend_free(m->backend);
}

static int count_ops(const ct_graph *graph, ct_op op)
{
    int count = 0;
    for (int i = 0; i < graph->n_nodes; i++)
        count += graph->nodes[i]->op == op;
    return count;
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

/* Both models on fresh batches: top-1 agreement (fraction) and the SQNR of
 * the logits (dB). */
static void compare(model *m, ct_quantized *q, double *agreement, double *sqnr)
{
    int64_t nx = ct_tensor_numel(m->x), ny = ct_tensor_numel(m->y);
    int classes = (int)m->y->shape[1], rows = (int)(ny / classes), agree = 0;
    float *f = malloc(sizeof(float) * (size_t)ny), *g = malloc(sizeof(float) * (size_t)ny);
    double signal = 0, noise = 0;
    for (int b = 0; b < TEST_BATCHES; b++) {
        float *input = random_batch(nx);
        CHECK_OK(ct_plan_write(m->plan, m->x, input, sizeof(float) * (size_t)nx));
        CHECK_OK(ct_plan_run(m->plan, CT_EVAL));
        CHECK_OK(ct_plan_read(m->plan, m->y, f, sizeof(float) * (size_t)ny));
        CHECK_OK(ct_plan_write(q->plan, q->x, input, sizeof(float) * (size_t)nx));
        CHECK_OK(ct_plan_run(q->plan, CT_EVAL));
        CHECK_OK(ct_plan_read(q->plan, q->y, g, sizeof(float) * (size_t)ny));
        for (int r = 0; r < rows; r++)
            agree += argmax(f + r * classes, classes) == argmax(g + r * classes, classes);
        for (int64_t i = 0; i < ny; i++) {
            signal += (double)f[i] * f[i];
            noise += ((double)f[i] - g[i]) * ((double)f[i] - g[i]);
        }
        free(input);
    }
    *agreement = (double)agree / (rows * TEST_BATCHES);
    *sqnr = 10.0 * log10(signal / noise);
    free(f);
    free(g);
}

/* conv_layers: the model's; the first (on 1 channel) stays f32 unless shallow. */
static void check_model(const char *name, int batch, int conv_layers, ct_calib_method method,
                        bool shallow)
{
    model m;
    model_open(&m, name, batch, "cpu");
    ct_quantize_args args = {.method = method, .quantize_shallow = shallow};
    int int8_convs = shallow ? conv_layers : conv_layers - 1;
    ct_quantized q;
    CHECK_OK(ct_plan_quantize(m.plan, m.x, m.y, &args, (const float *const *)m.calib,
                              CALIB_BATCHES, &q));
    if (q.plan) {
        CHECK(count_ops(q.graph, CT_OP_QCONV2D) == int8_convs &&
                  count_ops(q.graph, CT_OP_CONV2D) == conv_layers - int8_convs,
              "%s: %d qconv2d, %d conv2d", name, count_ops(q.graph, CT_OP_QCONV2D),
              count_ops(q.graph, CT_OP_CONV2D));
        const ct_quantize_layer *last = &q.layers[q.n_layers - 1];
        CHECK(!last->quantized && last->reason && strstr(last->reason, "classifier"),
              "%s: the classifier %s is quantized", name, last->name);
        CHECK(q.layers[0].quantized == shallow &&
                  (shallow || strstr(q.layers[0].reason, "shallow")),
              "%s: the first layer (depth < 32) %s", name,
              q.layers[0].quantized ? "is int8" : q.layers[0].reason);
        CHECK(count_ops(q.graph, CT_OP_LINEAR) == 1, "%s: one f32 linear (the classifier)",
              name);
        for (int k = 0; k < q.n_layers; k++) {
            const ct_quantize_layer *l = &q.layers[k];
            CHECK(l->sqnr_db > 15.0, "%s: layer %s SQNR %.1f dB", name, l->name, l->sqnr_db);
            CHECK(!l->quantized || (l->in_scale > 0 && l->in_lo <= 0 && l->in_hi > 0),
                  "%s: layer %s range [%g, %g]", name, l->name, l->in_lo, l->in_hi);
        }
        double agreement, sqnr;
        compare(&m, &q, &agreement, &sqnr);
        printf("  %s (%s%s): top-1 agreement %.1f %%, logits SQNR %.1f dB, layers:", name,
               ct_calib_method_name(method), shallow ? ", first layer int8" : "",
               100 * agreement, sqnr);
        for (int k = 0; k < q.n_layers; k++)
            printf(" %s %.1f%s", q.layers[k].name, q.layers[k].sqnr_db,
                   q.layers[k].quantized ? "" : " (f32)");
        printf("\n");
        CHECK(agreement >= 0.95, "%s: top-1 agreement %.3f", name, agreement);
        CHECK(sqnr >= 25.0, "%s: logits SQNR %.1f dB", name, sqnr);
    }
    ct_quantized_free(&q);
    model_close(&m);
}

static void simplecnn_close_to_f32(void)
{
    check_model("simplecnn", 16, 2, CT_CALIB_MINMAX, false);
    check_model("simplecnn", 16, 2, CT_CALIB_PERCENTILE, false);
    check_model("simplecnn", 16, 2, CT_CALIB_MINMAX, true);
    check_model("simplecnn", 16, 2, CT_CALIB_ENTROPY, false);
}

static void vgg8_bn_close_to_f32(void)
{
    check_model("vgg8_bn", 8, 6, CT_CALIB_MINMAX, false);
    check_model("vgg8_bn", 8, 6, CT_CALIB_PERCENTILE, false);
    check_model("vgg8_bn", 8, 6, CT_CALIB_PERCENTILE, true);
    check_model("vgg8_bn", 8, 6, CT_CALIB_ENTROPY, false);
}

static int count_u8(const ct_graph *graph, ct_op op)
{
    int count = 0;
    for (int i = 0; i < graph->n_nodes; i++)
        count += graph->nodes[i]->op == op && graph->nodes[i]->dtype == CT_U8;
    return count;
}

/* u8 between consecutive int8 layers (requantized in the epilogue, u8 max
 * pools, relus folded into the layers) gives the same logits, bit for bit,
 * as f32 between them; u8_convs: the qconv2d layers whose output only int8
 * layers read. */
static void u8_same_bits(const char *name, int batch, int u8_convs, int u8_pools)
{
    model m;
    model_open(&m, name, batch, "cpu");
    ct_quantized q[2];
    for (int k = 0; k < 2; k++) {
        ct_quantize_args args = {.method = CT_CALIB_PERCENTILE, .f32_activations = k == 1};
        CHECK_OK(ct_plan_quantize(m.plan, m.x, m.y, &args, (const float *const *)m.calib,
                                  CALIB_BATCHES, &q[k]));
    }
    if (q[0].plan && q[1].plan) {
        CHECK(count_u8(q[0].graph, CT_OP_QCONV2D) == u8_convs &&
                  count_u8(q[0].graph, CT_OP_MAXPOOL2D) == u8_pools,
              "%s: %d qconv2d and %d max pools write u8, expected %d and %d", name,
              count_u8(q[0].graph, CT_OP_QCONV2D), count_u8(q[0].graph, CT_OP_MAXPOOL2D),
              u8_convs, u8_pools);
        CHECK(count_u8(q[1].graph, CT_OP_QCONV2D) == 0 && count_u8(q[1].graph, CT_OP_QLINEAR) == 0,
              "%s: f32_activations still has u8 layers", name);
        CHECK(count_ops(q[0].graph, CT_OP_RELU) == count_ops(q[1].graph, CT_OP_RELU) - u8_convs -
                                                      count_u8(q[0].graph, CT_OP_QLINEAR),
              "%s: %d relus left, %d without u8", name, count_ops(q[0].graph, CT_OP_RELU),
              count_ops(q[1].graph, CT_OP_RELU));
        int64_t nx = ct_tensor_numel(m.x), ny = ct_tensor_numel(m.y);
        float *out[2] = {malloc(sizeof(float) * (size_t)ny), malloc(sizeof(float) * (size_t)ny)};
        for (int b = 0; b < 3; b++) {
            float *input = random_batch(nx);
            for (int k = 0; k < 2; k++) {
                CHECK_OK(ct_plan_write(q[k].plan, q[k].x, input, sizeof(float) * (size_t)nx));
                CHECK_OK(ct_plan_run(q[k].plan, CT_EVAL));
                CHECK_OK(ct_plan_read(q[k].plan, q[k].y, out[k], sizeof(float) * (size_t)ny));
            }
            CHECK(memcmp(out[0], out[1], sizeof(float) * (size_t)ny) == 0,
                  "%s batch %d: u8 between the layers differs from f32 between them", name, b);
            free(input);
        }
        free(out[0]);
        free(out[1]);
    }
    for (int k = 0; k < 2; k++)
        ct_quantized_free(&q[k]);
    model_close(&m);
}

static void u8_between_layers_same_bits(void)
{
    u8_same_bits("simplecnn", 16, 1, 1); /* conv2 -> relu -> pool -> flatten -> fc1 */
    u8_same_bits("vgg8_bn", 8, 5, 3);    /* every conv after the first */
    u8_same_bits("resnet18", 2, 8, 0);   /* each block's first conv (its second feeds an add) */
}

/* Percentile and entropy ranges lie inside the min-max ones, and some
 * are narrower; entropy keeps the bottom. */
static void clipped_ranges(ct_calib_method method)
{
    model m;
    model_open(&m, "vgg8_bn", 4, "cpu");
    ct_quantize_args minmax = {.method = CT_CALIB_MINMAX};
    ct_quantize_args pct = {.method = method, .percentile = 99.0};
    ct_quantized a, b;
    CHECK_OK(ct_plan_quantize(m.plan, m.x, m.y, &minmax, (const float *const *)m.calib,
                              CALIB_BATCHES, &a));
    CHECK_OK(ct_plan_quantize(m.plan, m.x, m.y, &pct, (const float *const *)m.calib,
                              CALIB_BATCHES, &b));
    int narrower = 0;
    for (int k = 0; a.plan && b.plan && k < a.n_layers; k++) {
        const ct_quantize_layer *la = &a.layers[k], *lb = &b.layers[k];
        if (!la->quantized)
            continue;
        CHECK(lb->in_lo >= la->in_lo && lb->in_hi <= la->in_hi * (1 + 1e-6),
              "%s: %s [%g, %g] outside minmax [%g, %g]", la->name,
              ct_calib_method_name(method), lb->in_lo, lb->in_hi, la->in_lo, la->in_hi);
        CHECK(method != CT_CALIB_ENTROPY || lb->in_lo == la->in_lo,
              "%s: entropy moved the bottom of the range", la->name);
        narrower += lb->in_hi - lb->in_lo < 0.99f * (la->in_hi - la->in_lo);
    }
    CHECK(narrower >= 3, "only %d layers narrower with %s", narrower,
          ct_calib_method_name(method));
    ct_quantized_free(&a);
    ct_quantized_free(&b);
    model_close(&m);
}

static void percentile_clips(void)
{
    clipped_ranges(CT_CALIB_PERCENTILE);
}

static void entropy_clips(void)
{
    clipped_ranges(CT_CALIB_ENTROPY);
}

static void expect_refused(ct_status got, ct_status want, const char *needle, const char *what)
{
    CHECK(got == want && strstr(ct_last_error(), needle), "%s: status %d, message '%s'", what,
          (int)got, ct_last_error());
}

static void bad_input_refused(void)
{
    model m;
    model_open(&m, "simplecnn", 2, "cpu");
    const float *const *calib = (const float *const *)m.calib;
    ct_quantize_args args = {.method = CT_CALIB_MINMAX};
    ct_quantized q = {.graph = (ct_graph *)1};
    expect_refused(ct_plan_quantize(m.plan, m.x, m.y, &args, calib, 0, &q), CT_ERR_ARG,
                   "no calibration batches", "zero batches");
    CHECK(!q.graph && !q.plan, "a failed call leaves *out zeroed");
    expect_refused(ct_plan_quantize(m.plan, m.x, m.y, &args, NULL, 3, &q), CT_ERR_ARG,
                   "no calibration batches", "no batch array");
    const float *holes[2] = {m.calib[0], NULL};
    expect_refused(ct_plan_quantize(m.plan, m.x, m.y, &args, holes, 2, &q), CT_ERR_ARG,
                   "batch 1 is NULL", "a NULL batch");
    args.method = (ct_calib_method)7;
    expect_refused(ct_plan_quantize(m.plan, m.x, m.y, &args, calib, 1, &q), CT_ERR_ARG,
                   "unknown calibration method", "method 7");
    args = (ct_quantize_args){.method = CT_CALIB_PERCENTILE, .percentile = 101};
    expect_refused(ct_plan_quantize(m.plan, m.x, m.y, &args, calib, 1, &q), CT_ERR_ARG,
                   "outside", "percentile 101");
    expect_refused(ct_plan_quantize(m.plan, m.x, m.y, &args, calib, 1, NULL), CT_ERR_ARG,
                   "out is NULL", "no out");
    ct_calib_method method;
    CHECK(ct_calib_method_parse("percentile", &method) == CT_OK &&
              method == CT_CALIB_PERCENTILE, "parse percentile");
    expect_refused(ct_calib_method_parse("kl", &method), CT_ERR_ARG, "minmax, percentile",
                   "method kl");
    model_close(&m);
    ct_backend *cuda = NULL;
    if (ct_backend_new("cuda", &cuda) != CT_OK) {
        printf("  (no cuda backend in this build: the other-backend refusal is not run)\n");
        return;
    }
    ct_backend_free(cuda);
    model_open(&m, "simplecnn", 2, "cuda");
    args.method = CT_CALIB_MINMAX;
    expect_refused(ct_plan_quantize(m.plan, m.x, m.y, &args, (const float *const *)m.calib, 1,
                                    &q),
                   CT_ERR_UNSUPPORTED, "cpu backend only", "a cuda plan");
    model_close(&m);
}

int main(void)
{
    RUN(simplecnn_close_to_f32);
    RUN(vgg8_bn_close_to_f32);
    RUN(u8_between_layers_same_bits);
    RUN(percentile_clips);
    RUN(entropy_clips);
    RUN(bad_input_refused);
    return harness_finish();
}
