/*
 * Forward and gradient checks of every op on the CPU backend.
 *
 * Each case builds a small cuttle graph (input x that requires a gradient,
 * explicit parameters, the op, an upstream gradient dy), runs one training
 * step and compares
 *   - cuttle's f32 forward with the double reference of tests/ref.c, and
 *   - cuttle's f32 gradients with central finite differences of
 *     L = sum(ref_forward(...) * dy), taken in double precision.
 * The reference sees exactly the f32 values that cuttle sees.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "harness.h"
#include "ref.h"

#define FORWARD_TOL 1e-5     /* rel err of the f32 forward vs the f64 reference */
#define GRAD_TOL 1e-4        /* rel err of the f32 gradients vs finite differences */
#define FD_REL_STEP 1e-6     /* finite-difference step, relative to the tensor's scale */
#define FD_BUDGET_FLOPS 5e6  /* reference work per checked tensor, to bound the run time */
#define FD_MIN_CHECKS 8      /* elements checked per tensor, at least (if it has them) */
#define FD_MAX_CHECKS 2000   /* ... and at most */
#define PLAN_SEED 20240601u
#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f
#define RELU_MIN_ABS 1e-3f   /* keep relu inputs away from the kink */
#define MAX_VALUES 8
#define MAX_WRITES 4
#define BN_MAX_CHANNELS 64 /* of the batchnorm cases, for the stack arrays */

/* ---- the fixture: one graph, its host values and one plan ---------------- */

/* A float tensor the test writes: x, a parameter or a buffer. */
typedef struct gc_value {
    ct_tensor *tensor;
    int64_t numel;
    float *f32;          /* written to the plan */
    double *f64;         /* the same values for the reference; perturbed by FD */
    bool differentiable; /* its gradient is checked */
} gc_value;

/* Any other tensor the test writes (labels). */
typedef struct gc_write {
    ct_tensor *tensor;
    const void *host;
    size_t bytes;
} gc_write;

typedef struct gc_case gc_case;
/* The reference forward of a case, from the f64 values of its gc_values. */
typedef void (*gc_forward_fn)(const gc_case *c, double *y);

typedef enum gc_mode {
    GC_VJP,  /* backward from y with an upstream gradient dy */
    GC_LOSS, /* y is a scalar loss: backward from it (dy = 1) */
    GC_EVAL  /* no backward; one CT_EVAL run */
} gc_mode;

struct gc_case {
    ct_graph *graph;
    ct_backend *backend;
    ct_plan *plan;
    gc_value values[MAX_VALUES];
    int n_values;
    gc_write writes[MAX_WRITES];
    int n_writes;
    ct_tensor *y;
    ct_tensor *dy;
    int64_t ny;
    float *y_f32;  /* cuttle's forward, read back */
    float *dy_f32;
    double *dy_f64;
    gc_forward_fn forward;
    const void *args; /* the case's parameters, for `forward` */
    double work;      /* flops of one reference forward: sizes the FD subset */
    uint64_t seed;
};

static bool gc_begin(gc_case *c, gc_forward_fn forward, const void *args, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->forward = forward;
    c->args = args;
    c->seed = seed;
    c->graph = ct_graph_new();
    CHECK(c->graph != NULL, "ct_graph_new: %s", ct_last_error());
    return c->graph != NULL;
}

static void gc_end(gc_case *c)
{
    ct_plan_free(c->plan);
    ct_backend_free(c->backend);
    ct_graph_free(c->graph);
    for (int i = 0; i < c->n_values; i++) {
        free(c->values[i].f32);
        free(c->values[i].f64);
    }
    free(c->y_f32);
    free(c->dy_f32);
    free(c->dy_f64);
}

static void *checked_calloc(int64_t count, size_t size)
{
    void *p = calloc((size_t)(count > 0 ? count : 1), size);
    if (!p) {
        fprintf(stderr, "test_gradcheck: out of memory\n");
        exit(2);
    }
    return p;
}

/* Copies the f32 values into the f64 ones (after a test changed them). */
static void gc_sync(gc_value *v)
{
    for (int64_t i = 0; i < v->numel; i++)
        v->f64[i] = v->f32[i];
}

/* Registers t with random values in [lo, hi); returns t. */
static ct_tensor *gc_add(gc_case *c, ct_tensor *t, const char *what, float lo, float hi,
                         bool differentiable)
{
    CHECK(t != NULL, "creating %s: %s", what, ct_last_error());
    CHECK(c->n_values < MAX_VALUES, "more than %d values: raise MAX_VALUES", MAX_VALUES);
    if (!t || c->n_values == MAX_VALUES)
        return t;
    gc_value *v = &c->values[c->n_values++];
    v->tensor = t;
    v->numel = ct_tensor_numel(t);
    v->f32 = checked_calloc(v->numel, sizeof(float));
    v->f64 = checked_calloc(v->numel, sizeof(double));
    v->differentiable = differentiable;
    harness_fill(v->f32, v->numel, c->seed * 131 + (uint64_t)c->n_values, lo, hi);
    gc_sync(v);
    return t;
}

static ct_tensor *gc_input(gc_case *c, const char *name, int ndim, const int64_t *shape,
                           float lo, float hi)
{
    ct_tensor *t = ct_input(c->graph, name, CT_F32, ndim, shape);
    if (t)
        ct_tensor_requires_grad(t);
    return gc_add(c, t, name, lo, hi, true);
}

static ct_tensor *gc_param(gc_case *c, const char *name, int ndim, const int64_t *shape,
                           float lo, float hi)
{
    ct_tensor *t = ct_param(c->graph, name, ndim, shape, CT_INIT_UNIFORM, 0.5f);
    return gc_add(c, t, name, lo, hi, true);
}

static ct_tensor *gc_buffer(gc_case *c, const char *name, int ndim, const int64_t *shape,
                            float lo, float hi)
{
    ct_tensor *t = ct_buffer(c->graph, name, CT_F32, ndim, shape, CT_INIT_CONST, 1.0f);
    return gc_add(c, t, name, lo, hi, false);
}

/* Moves every value of v with |value| < min_abs to +-(min_abs + |value|). */
static void gc_away_from_zero(gc_value *v, float min_abs)
{
    for (int64_t i = 0; i < v->numel; i++)
        if (fabsf(v->f32[i]) < min_abs)
            v->f32[i] = v->f32[i] < 0 ? v->f32[i] - min_abs : v->f32[i] + min_abs;
    gc_sync(v);
}

/* "[2,3,8,8]" into text (at least 96 bytes). */
static void format_shape(char *text, int ndim, const int64_t *shape)
{
    int at = sprintf(text, "[");
    for (int i = 0; i < ndim && i < CT_MAX_DIMS; i++)
        at += sprintf(text + at, i ? ",%lld" : "%lld", (long long)shape[i]);
    sprintf(text + at, "]");
}

static bool gc_check_shape(const ct_tensor *y, int ndim, const int64_t *shape)
{
    int64_t got[CT_MAX_DIMS];
    int got_ndim = ct_tensor_ndim(y);
    bool same = got_ndim == ndim;
    for (int i = 0; i < got_ndim && i < CT_MAX_DIMS; i++) {
        got[i] = ct_tensor_dim(y, i);
        same = same && got[i] == shape[i];
    }
    char got_text[160], expected_text[160];
    format_shape(got_text, got_ndim, got);
    format_shape(expected_text, ndim, shape);
    CHECK(same, "output %s has shape %s, expected %s", ct_tensor_name(y), got_text,
          expected_text);
    return same;
}

/* Finishes the graph around y (expected shape `shape`), plans it, writes
 * every value and runs one step.  False (with a failed CHECK) on error. */
static bool gc_plan(gc_case *c, ct_tensor *y, int ndim, const int64_t *shape, gc_mode mode)
{
    CHECK(y != NULL, "building the op: %s", ct_last_error());
    CHECK(ct_graph_status(c->graph) == CT_OK, "graph status %s: %s",
          ct_status_name(ct_graph_status(c->graph)), ct_last_error());
    if (!y || ct_graph_status(c->graph) != CT_OK || !gc_check_shape(y, ndim, shape))
        return false;
    c->y = y;
    c->ny = ct_tensor_numel(y);
    ct_tensor_keep(y);
    c->dy_f64 = checked_calloc(c->ny, sizeof(double));
    if (mode == GC_VJP) {
        c->dy = ct_input(c->graph, "dy", CT_F32, ndim, shape);
        CHECK(c->dy != NULL, "ct_input(dy): %s", ct_last_error());
        if (!c->dy)
            return false;
        c->dy_f32 = checked_calloc(c->ny, sizeof(float));
        harness_fill(c->dy_f32, c->ny, c->seed * 7 + 3, -1.0f, 1.0f);
        for (int64_t i = 0; i < c->ny; i++)
            c->dy_f64[i] = c->dy_f32[i];
        ct_status status = ct_graph_backward_vjp(c->graph, y, c->dy);
        CHECK(status == CT_OK, "ct_graph_backward_vjp: %s: %s", ct_status_name(status),
              ct_last_error());
        if (status != CT_OK)
            return false;
    } else if (mode == GC_LOSS) {
        c->dy_f64[0] = 1.0;
        ct_status status = ct_graph_backward(c->graph, y);
        CHECK(status == CT_OK, "ct_graph_backward: %s: %s", ct_status_name(status),
              ct_last_error());
        if (status != CT_OK)
            return false;
    }
    /* Input gradients are not state: ask for them to be kept. */
    for (int i = 0; mode != GC_EVAL && i < c->n_values; i++) {
        ct_tensor *grad = ct_tensor_grad(c->values[i].tensor);
        if (grad && !ct_tensor_is_param(c->values[i].tensor))
            ct_tensor_keep(grad);
    }
    ct_status status = ct_backend_new("cpu", &c->backend);
    CHECK(status == CT_OK, "ct_backend_new: %s", ct_last_error());
    if (status != CT_OK)
        return false;
    status = ct_plan_new(c->graph, c->backend, PLAN_SEED, &c->plan);
    CHECK(status == CT_OK, "ct_plan_new: %s: %s", ct_status_name(status), ct_last_error());
    if (status != CT_OK)
        return false;
    bool ok = true;
    for (int i = 0; i < c->n_values; i++) {
        gc_value *v = &c->values[i];
        status = ct_plan_write(c->plan, v->tensor, v->f32, (size_t)v->numel * sizeof(float));
        CHECK(status == CT_OK, "ct_plan_write(%s): %s", ct_tensor_name(v->tensor),
              ct_last_error());
        ok = ok && status == CT_OK;
    }
    for (int i = 0; i < c->n_writes; i++) {
        status = ct_plan_write(c->plan, c->writes[i].tensor, c->writes[i].host,
                               c->writes[i].bytes);
        CHECK(status == CT_OK, "ct_plan_write(%s): %s", ct_tensor_name(c->writes[i].tensor),
              ct_last_error());
        ok = ok && status == CT_OK;
    }
    if (c->dy) {
        status = ct_plan_write(c->plan, c->dy, c->dy_f32, (size_t)c->ny * sizeof(float));
        CHECK(status == CT_OK, "ct_plan_write(dy): %s", ct_last_error());
        ok = ok && status == CT_OK;
    }
    if (!ok)
        return false;
    status = ct_plan_run(c->plan, mode == GC_EVAL ? CT_EVAL : CT_TRAIN);
    CHECK(status == CT_OK, "ct_plan_run: %s: %s", ct_status_name(status), ct_last_error());
    if (status != CT_OK)
        return false;
    c->y_f32 = checked_calloc(c->ny, sizeof(float));
    status = ct_plan_read(c->plan, y, c->y_f32, (size_t)c->ny * sizeof(float));
    CHECK(status == CT_OK, "ct_plan_read(y): %s", ct_last_error());
    return status == CT_OK;
}

static void gc_check_forward(const gc_case *c)
{
    double *y_ref = checked_calloc(c->ny, sizeof(double));
    c->forward(c, y_ref);
    double err = harness_rel_err_f64(c->y_f32, y_ref, c->ny);
    CHECK(err <= FORWARD_TOL, "forward rel err %.3g > %.1g (y[0] = %.8g, expected %.8g)", err,
          FORWARD_TOL, c->y_f32[0], y_ref[0]);
    free(y_ref);
}

/* L = sum(ref_forward * dy) */
static double gc_loss(const gc_case *c, double *y_scratch)
{
    c->forward(c, y_scratch);
    double loss = 0.0;
    for (int64_t i = 0; i < c->ny; i++)
        loss += y_scratch[i] * c->dy_f64[i];
    return loss;
}

/* Element k of a deterministic, evenly spread subset of n_checks of numel. */
static int64_t gc_pick(int64_t k, int64_t n_checks, int64_t numel)
{
    if (n_checks >= numel)
        return k;
    int64_t stride = numel / n_checks;
    return k * stride + (k * 7919) % stride;
}

/* Central differences for value v against cuttle's gradient of it. */
static void gc_check_value_grad(gc_case *c, gc_value *v)
{
    ct_tensor *grad = ct_tensor_grad(v->tensor);
    CHECK(grad != NULL, "no gradient for %s", ct_tensor_name(v->tensor));
    if (!grad)
        return;
    CHECK(ct_tensor_numel(grad) == v->numel, "gradient of %s has %lld elements, expected %lld",
          ct_tensor_name(v->tensor), (long long)ct_tensor_numel(grad), (long long)v->numel);
    if (ct_tensor_numel(grad) != v->numel)
        return;
    float *analytic = checked_calloc(v->numel, sizeof(float));
    ct_status status = ct_plan_read(c->plan, grad, analytic, (size_t)v->numel * sizeof(float));
    CHECK(status == CT_OK, "ct_plan_read(grad of %s): %s", ct_tensor_name(v->tensor),
          ct_last_error());

    double work = c->work > 0 ? c->work : (double)c->ny;
    int64_t n_checks = (int64_t)(FD_BUDGET_FLOPS / (2.0 * work));
    if (n_checks < FD_MIN_CHECKS)
        n_checks = FD_MIN_CHECKS;
    if (n_checks > FD_MAX_CHECKS)
        n_checks = FD_MAX_CHECKS;
    if (n_checks > v->numel)
        n_checks = v->numel;

    double scale = 0.0;
    for (int64_t i = 0; i < v->numel; i++)
        scale = fmax(scale, fabs(v->f64[i]));
    double step = FD_REL_STEP * fmax(scale, 1e-3);

    double *y_scratch = checked_calloc(c->ny, sizeof(double));
    double *numeric = checked_calloc(n_checks, sizeof(double));
    float *picked = checked_calloc(n_checks, sizeof(float));
    for (int64_t k = 0; k < n_checks; k++) {
        int64_t i = gc_pick(k, n_checks, v->numel);
        double saved = v->f64[i];
        v->f64[i] = saved + step;
        double loss_plus = gc_loss(c, y_scratch);
        v->f64[i] = saved - step;
        double loss_minus = gc_loss(c, y_scratch);
        v->f64[i] = saved;
        numeric[k] = (loss_plus - loss_minus) / (2.0 * step);
        picked[k] = analytic[i];
    }
    double err = harness_rel_err_f64(picked, numeric, n_checks);
    CHECK(err <= GRAD_TOL, "gradient of %s: rel err %.3g > %.1g over %lld of %lld elements "
          "(first: got %.8g, finite differences %.8g)", ct_tensor_name(v->tensor), err, GRAD_TOL,
          (long long)n_checks, (long long)v->numel, picked[0], numeric[0]);
    free(y_scratch);
    free(numeric);
    free(picked);
    free(analytic);
}

static void gc_check_grads(gc_case *c)
{
    for (int i = 0; i < c->n_values; i++)
        if (c->values[i].differentiable)
            gc_check_value_grad(c, &c->values[i]);
}

/* The usual end of a case: plan, run, check the forward and the gradients. */
static void gc_finish(gc_case *c, ct_tensor *y, int ndim, const int64_t *shape)
{
    if (gc_plan(c, y, ndim, shape, GC_VJP)) {
        gc_check_forward(c);
        gc_check_grads(c);
    }
    gc_end(c);
}

/* ---- conv2d ---------------------------------------------------------------- */

typedef struct conv_case {
    ref_conv2d_shape shape;
    bool bias;
} conv_case;

static void conv_forward(const gc_case *c, double *y)
{
    const conv_case *a = c->args;
    ref_conv2d(&a->shape, c->values[0].f64, c->values[1].f64, a->bias ? c->values[2].f64 : NULL,
               y);
}

static void check_conv(const conv_case *a, uint64_t seed)
{
    const ref_conv2d_shape *s = &a->shape;
    gc_case c;
    if (!gc_begin(&c, conv_forward, a, seed))
        return;
    int64_t x_shape[4] = {s->n_batch, s->in_channels, s->in_h, s->in_w};
    int64_t w_shape[4] = {s->out_channels, s->in_channels / s->groups, s->kernel_h,
                          s->kernel_w};
    int64_t b_shape[1] = {s->out_channels};
    ct_tensor *x = gc_input(&c, "x", 4, x_shape, -1.0f, 1.0f);
    ct_tensor *w = gc_param(&c, "conv.weight", 4, w_shape, -1.0f, 1.0f);
    ct_tensor *b = a->bias ? gc_param(&c, "conv.bias", 1, b_shape, -1.0f, 1.0f) : NULL;
    ct_conv_args args = {{s->stride_h, s->stride_w}, {s->pad_h, s->pad_w},
                         {s->dilation_h, s->dilation_w}, s->groups};
    ct_tensor *y = ct_conv2d(c.graph, x, w, b, args);
    int out_h = ref_conv2d_out_size(s->in_h, s->kernel_h, s->stride_h, s->pad_h, s->dilation_h);
    int out_w = ref_conv2d_out_size(s->in_w, s->kernel_w, s->stride_w, s->pad_w, s->dilation_w);
    int64_t y_shape[4] = {s->n_batch, s->out_channels, out_h, out_w};
    c.work = (double)s->n_batch * s->out_channels * out_h * out_w *
             (s->in_channels / s->groups) * s->kernel_h * s->kernel_w;
    gc_finish(&c, y, 4, y_shape);
}

/* Shape fields: N, C, H, W, O, KH, KW, SH, SW, PH, PW, DH, DW, G */
static void test_conv_3x3_pad1_batch1(void)
{
    conv_case a = {{1, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1}, true};
    check_conv(&a, 1);
}

static void test_conv_nonsquare_kernel_batch3(void)
{
    conv_case a = {{3, 2, 7, 9, 3, 2, 3, 1, 1, 0, 1, 1, 1, 1}, true};
    check_conv(&a, 2);
}

static void test_conv_pad2_stride2_batch7(void)
{
    conv_case a = {{7, 3, 9, 8, 5, 3, 3, 2, 2, 2, 2, 1, 1, 1}, true};
    check_conv(&a, 3);
}

static void test_conv_dilation2(void)
{
    conv_case a = {{3, 2, 10, 10, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1}, false};
    check_conv(&a, 4);
}

static void test_conv_asymmetric_stride_pad_dilation(void)
{
    conv_case a = {{3, 3, 11, 9, 2, 3, 2, 2, 1, 1, 2, 2, 1, 1}, true};
    check_conv(&a, 5);
}

static void test_conv_groups2(void)
{
    conv_case a = {{3, 4, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2}, true};
    check_conv(&a, 6);
}

static void test_conv_depthwise_stride2(void)
{
    conv_case a = {{3, 4, 8, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4}, false};
    check_conv(&a, 7);
}

static void test_conv_depthwise_multiplier2(void)
{
    conv_case a = {{1, 3, 6, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3}, true};
    check_conv(&a, 8);
}

static void test_conv_1x1_batch7(void)
{
    conv_case a = {{7, 8, 4, 4, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1}, false};
    check_conv(&a, 9);
}

static void test_conv_3x32x32_batch1(void)
{
    conv_case a = {{1, 3, 32, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1}, true};
    check_conv(&a, 10);
}

static void test_conv_3x32x32_7x7_stride2_pad3(void)
{
    conv_case a = {{1, 3, 32, 32, 4, 7, 7, 2, 2, 3, 3, 1, 1, 1}, false};
    check_conv(&a, 11);
}

/* ---- linear ------------------------------------------------------------------ */

typedef struct linear_case {
    int n, in, out;
    bool bias;
} linear_case;

static void linear_forward(const gc_case *c, double *y)
{
    const linear_case *a = c->args;
    ref_linear(a->n, a->in, a->out, c->values[0].f64, c->values[1].f64,
               a->bias ? c->values[2].f64 : NULL, y);
}

static void check_linear(const linear_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, linear_forward, a, seed))
        return;
    int64_t x_shape[2] = {a->n, a->in}, w_shape[2] = {a->out, a->in}, b_shape[1] = {a->out};
    ct_tensor *x = gc_input(&c, "x", 2, x_shape, -1.0f, 1.0f);
    ct_tensor *w = gc_param(&c, "fc.weight", 2, w_shape, -1.0f, 1.0f);
    ct_tensor *b = a->bias ? gc_param(&c, "fc.bias", 1, b_shape, -1.0f, 1.0f) : NULL;
    ct_tensor *y = ct_linear(c.graph, x, w, b);
    int64_t y_shape[2] = {a->n, a->out};
    c.work = (double)a->n * a->in * a->out;
    gc_finish(&c, y, 2, y_shape);
}

static void test_linear_batch1(void)
{
    linear_case a = {1, 5, 3, true};
    check_linear(&a, 21);
}

static void test_linear_batch7_no_bias(void)
{
    linear_case a = {7, 64, 10, false};
    check_linear(&a, 22);
}

static void test_linear_batch3_wide(void)
{
    linear_case a = {3, 300, 20, true};
    check_linear(&a, 23);
}

/* ---- pooling ----------------------------------------------------------------- */

typedef struct pool_case {
    ref_pool2d_shape shape;
    bool max; /* else average */
} pool_case;

static void pool_forward(const gc_case *c, double *y)
{
    const pool_case *a = c->args;
    if (a->max)
        ref_maxpool2d(&a->shape, c->values[0].f64, y);
    else
        ref_avgpool2d(&a->shape, c->values[0].f64, y);
}

/* Replaces v by a shuffled, scaled 0..numel-1 in [-1, 1): all values
 * distinct and 2/numel apart, so no finite-difference step crosses a tie. */
static void fill_distinct(gc_value *v, uint64_t seed)
{
    int64_t *order = checked_calloc(v->numel, sizeof(int64_t));
    for (int64_t i = 0; i < v->numel; i++)
        order[i] = i;
    uint64_t state = seed;
    for (int64_t i = v->numel - 1; i > 0; i--) {
        int64_t j = (int64_t)(harness_uniform(&state, 0.0f, 1.0f) * (float)(i + 1));
        if (j > i)
            j = i;
        int64_t swap = order[i];
        order[i] = order[j];
        order[j] = swap;
    }
    for (int64_t i = 0; i < v->numel; i++)
        v->f32[i] = (float)(2.0 * (double)order[i] / (double)v->numel - 1.0);
    gc_sync(v);
    free(order);
}

static void check_pool(const pool_case *a, uint64_t seed)
{
    const ref_pool2d_shape *s = &a->shape;
    gc_case c;
    if (!gc_begin(&c, pool_forward, a, seed))
        return;
    int64_t x_shape[4] = {s->n_batch, s->channels, s->in_h, s->in_w};
    ct_tensor *x = gc_input(&c, "x", 4, x_shape, -1.0f, 1.0f);
    if (a->max && c.n_values == 1)
        fill_distinct(&c.values[0], seed);
    ct_pool_args args = {{s->kernel_h, s->kernel_w}, {s->stride_h, s->stride_w},
                         {s->pad_h, s->pad_w}, s->exclude_pad};
    ct_tensor *y = a->max ? ct_maxpool2d(c.graph, x, args) : ct_avgpool2d(c.graph, x, args);
    int out_h = ref_pool2d_out_size(s->in_h, s->kernel_h, s->stride_h, s->pad_h);
    int out_w = ref_pool2d_out_size(s->in_w, s->kernel_w, s->stride_w, s->pad_w);
    int64_t y_shape[4] = {s->n_batch, s->channels, out_h, out_w};
    c.work = (double)s->n_batch * s->channels * out_h * out_w * s->kernel_h * s->kernel_w;
    gc_finish(&c, y, 4, y_shape);
}

/* Shape fields: N, C, H, W, KH, KW, SH, SW, PH, PW, exclude_pad */
static void test_maxpool_2x2_batch1(void)
{
    pool_case a = {{1, 3, 8, 8, 2, 2, 2, 2, 0, 0, false}, true};
    check_pool(&a, 31);
}

static void test_maxpool_3x3_stride2_pad1_batch3(void)
{
    pool_case a = {{3, 4, 9, 9, 3, 3, 2, 2, 1, 1, false}, true};
    check_pool(&a, 32);
}

static void test_maxpool_nonsquare_batch7(void)
{
    pool_case a = {{7, 2, 6, 7, 2, 3, 1, 2, 1, 1, false}, true};
    check_pool(&a, 33);
}

static void test_maxpool_3x32x32(void)
{
    pool_case a = {{3, 3, 32, 32, 2, 2, 2, 2, 0, 0, false}, true};
    check_pool(&a, 34);
}

static void test_avgpool_2x2_batch1(void)
{
    pool_case a = {{1, 3, 8, 8, 2, 2, 2, 2, 0, 0, false}, false};
    check_pool(&a, 35);
}

static void test_avgpool_3x3_pad1_include_batch3(void)
{
    pool_case a = {{3, 4, 9, 9, 3, 3, 2, 2, 1, 1, false}, false};
    check_pool(&a, 36);
}

static void test_avgpool_3x3_pad1_exclude_batch3(void)
{
    pool_case a = {{3, 4, 9, 9, 3, 3, 2, 2, 1, 1, true}, false};
    check_pool(&a, 37);
}

static void test_avgpool_nonsquare_pad_exclude_batch7(void)
{
    pool_case a = {{7, 2, 6, 7, 3, 2, 1, 2, 1, 1, true}, false};
    check_pool(&a, 38);
}

static void test_avgpool_pad2_include_batch7(void)
{
    pool_case a = {{7, 2, 7, 6, 5, 4, 2, 3, 2, 2, false}, false};
    check_pool(&a, 39);
}

typedef struct global_pool_case {
    int n, c, h, w;
} global_pool_case;

static void global_pool_forward(const gc_case *c, double *y)
{
    const global_pool_case *a = c->args;
    ref_global_avgpool(a->n, a->c, a->h * a->w, c->values[0].f64, y);
}

static void check_global_pool(const global_pool_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, global_pool_forward, a, seed))
        return;
    int64_t x_shape[4] = {a->n, a->c, a->h, a->w};
    ct_tensor *x = gc_input(&c, "x", 4, x_shape, -1.0f, 1.0f);
    ct_tensor *y = ct_global_avgpool(c.graph, x);
    int64_t y_shape[4] = {a->n, a->c, 1, 1};
    c.work = (double)a->n * a->c * a->h * a->w;
    gc_finish(&c, y, 4, y_shape);
}

static void test_global_avgpool_batch1(void)
{
    global_pool_case a = {1, 3, 5, 5};
    check_global_pool(&a, 41);
}

static void test_global_avgpool_batch7(void)
{
    global_pool_case a = {7, 16, 4, 3};
    check_global_pool(&a, 42);
}

static void test_global_avgpool_3x32x32(void)
{
    global_pool_case a = {3, 3, 32, 32};
    check_global_pool(&a, 43);
}

/* ---- activations ---------------------------------------------------------------- */

typedef enum act_kind { ACT_RELU, ACT_SIGMOID, ACT_TANH } act_kind;

typedef struct act_case {
    act_kind kind;
    int ndim;
    int64_t shape[4];
} act_case;

static void act_forward(const gc_case *c, double *y)
{
    const act_case *a = c->args;
    if (a->kind == ACT_RELU)
        ref_relu(c->ny, c->values[0].f64, y);
    else if (a->kind == ACT_SIGMOID)
        ref_sigmoid(c->ny, c->values[0].f64, y);
    else
        ref_tanh(c->ny, c->values[0].f64, y);
}

static void check_act(const act_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, act_forward, a, seed))
        return;
    ct_tensor *x = gc_input(&c, "x", a->ndim, a->shape, -3.0f, 3.0f);
    if (a->kind == ACT_RELU && c.n_values == 1)
        gc_away_from_zero(&c.values[0], RELU_MIN_ABS);
    ct_tensor *y = a->kind == ACT_RELU      ? ct_relu(c.graph, x)
                   : a->kind == ACT_SIGMOID ? ct_sigmoid(c.graph, x)
                                            : ct_tanh(c.graph, x);
    gc_finish(&c, y, a->ndim, a->shape);
}

static void test_relu_batch1_3x32x32(void)
{
    act_case a = {ACT_RELU, 4, {1, 3, 32, 32}};
    check_act(&a, 51);
}

static void test_relu_batch7_2d(void)
{
    act_case a = {ACT_RELU, 2, {7, 10}};
    check_act(&a, 52);
}

static void test_sigmoid_batch3(void)
{
    act_case a = {ACT_SIGMOID, 4, {3, 4, 5, 5}};
    check_act(&a, 53);
}

static void test_sigmoid_batch7_2d(void)
{
    act_case a = {ACT_SIGMOID, 2, {7, 10}};
    check_act(&a, 54);
}

static void test_tanh_batch3(void)
{
    act_case a = {ACT_TANH, 4, {3, 4, 5, 5}};
    check_act(&a, 55);
}

static void test_tanh_batch1_3x32x32(void)
{
    act_case a = {ACT_TANH, 4, {1, 3, 32, 32}};
    check_act(&a, 56);
}

/* ---- batchnorm --------------------------------------------------------------- */

typedef struct bn_case {
    int ndim; /* 4: [n, c, h, w]; 2: [n, c] */
    int n, c, h, w;
} bn_case;

/* values: 0 x, 1 gamma, 2 beta, 3 running_mean, 4 running_var */
static void bn_train_forward(const gc_case *c, double *y)
{
    const bn_case *a = c->args;
    ref_batchnorm2d_train(a->n, a->c, a->h * a->w, c->values[0].f64, c->values[1].f64,
                          c->values[2].f64, BN_EPS, BN_MOMENTUM, NULL, NULL, y);
}

static void bn_eval_forward(const gc_case *c, double *y)
{
    const bn_case *a = c->args;
    ref_batchnorm2d_eval(a->n, a->c, a->h * a->w, c->values[0].f64, c->values[1].f64,
                         c->values[2].f64, c->values[3].f64, c->values[4].f64, BN_EPS, y);
}

/* Builds x, the parameters, the buffers and the op; NULL on error. */
static ct_tensor *bn_build(gc_case *c, const bn_case *a, int64_t *x_shape)
{
    x_shape[0] = a->n;
    x_shape[1] = a->c;
    x_shape[2] = a->h;
    x_shape[3] = a->w;
    int64_t c_shape[1] = {a->c};
    /* An offset mean and a non-unit spread, so normalization does something. */
    ct_tensor *x = gc_input(c, "x", a->ndim, x_shape, -1.5f, 2.5f);
    ct_tensor *gamma = gc_param(c, "bn.weight", 1, c_shape, 0.5f, 1.5f);
    ct_tensor *beta = gc_param(c, "bn.bias", 1, c_shape, -0.5f, 0.5f);
    ct_tensor *mean = gc_buffer(c, "bn.running_mean", 1, c_shape, -0.5f, 0.5f);
    ct_tensor *var = gc_buffer(c, "bn.running_var", 1, c_shape, 0.5f, 2.0f);
    return ct_batchnorm2d(c->graph, x, gamma, beta, mean, var, BN_EPS, BN_MOMENTUM);
}

/* Compares the running statistics in the plan with expected ones. */
static void bn_check_running(gc_case *c, const double *mean, const double *var, int channels)
{
    float got[2][BN_MAX_CHANNELS];
    const double *expected[2] = {mean, var};
    for (int k = 0; k < 2 && channels <= BN_MAX_CHANNELS; k++) {
        ct_tensor *t = c->values[3 + k].tensor;
        ct_status status = ct_plan_read(c->plan, t, got[k], (size_t)channels * sizeof(float));
        CHECK(status == CT_OK, "ct_plan_read(%s): %s", ct_tensor_name(t), ct_last_error());
        double err = harness_rel_err_f64(got[k], expected[k], channels);
        CHECK(err <= FORWARD_TOL, "%s rel err %.3g (got[0] %.8g, expected %.8g)",
              ct_tensor_name(t), err, got[k][0], expected[k][0]);
    }
}

static void check_bn_train(const bn_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, bn_train_forward, a, seed))
        return;
    int64_t x_shape[4];
    ct_tensor *y = bn_build(&c, a, x_shape);
    c.work = 6.0 * a->n * a->c * a->h * a->w;
    if (gc_plan(&c, y, a->ndim, x_shape, GC_VJP)) {
        gc_check_forward(&c);
        gc_check_grads(&c);
        double mean[BN_MAX_CHANNELS], var[BN_MAX_CHANNELS];
        double *y_ref = checked_calloc(c.ny, sizeof(double));
        for (int ch = 0; ch < a->c && ch < BN_MAX_CHANNELS; ch++) {
            mean[ch] = c.values[3].f64[ch];
            var[ch] = c.values[4].f64[ch];
        }
        ref_batchnorm2d_train(a->n, a->c, a->h * a->w, c.values[0].f64, c.values[1].f64,
                              c.values[2].f64, BN_EPS, BN_MOMENTUM, mean, var, y_ref);
        bn_check_running(&c, mean, var, a->c);
        free(y_ref);
    }
    gc_end(&c);
}

static void check_bn_eval(const bn_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, bn_eval_forward, a, seed))
        return;
    int64_t x_shape[4];
    ct_tensor *y = bn_build(&c, a, x_shape);
    if (gc_plan(&c, y, a->ndim, x_shape, GC_EVAL)) {
        gc_check_forward(&c);
        /* Evaluation leaves the running statistics alone. */
        bn_check_running(&c, c.values[3].f64, c.values[4].f64, a->c);
    }
    gc_end(&c);
}

static void test_batchnorm_train_batch3(void)
{
    bn_case a = {4, 3, 4, 5, 5};
    check_bn_train(&a, 61);
}

static void test_batchnorm_train_batch1(void)
{
    bn_case a = {4, 1, 3, 4, 6};
    check_bn_train(&a, 62);
}

static void test_batchnorm_train_batch7_3x32x32(void)
{
    bn_case a = {4, 7, 3, 32, 32};
    check_bn_train(&a, 63);
}

static void test_batchnorm_train_2d(void)
{
    bn_case a = {2, 7, 6, 1, 1};
    check_bn_train(&a, 64);
}

static void test_batchnorm_eval_batch3(void)
{
    bn_case a = {4, 3, 4, 5, 5};
    check_bn_eval(&a, 65);
}

static void test_batchnorm_eval_batch1_2d(void)
{
    bn_case a = {2, 1, 5, 1, 1};
    check_bn_eval(&a, 66);
}

/* ---- dropout ----------------------------------------------------------------- */

#define DROPOUT_P 0.3f
#define DROPOUT_EXACT_TOL 1e-6

/* Recovers keep = (y != 0) and checks y = x * keep / (1-p).  Returns the
 * number of kept elements. */
static int64_t dropout_mask(const float *x, const float *y, int64_t count, uint8_t *keep)
{
    int64_t kept = 0;
    double *x_f64 = checked_calloc(count, sizeof(double));
    double *y_ref = checked_calloc(count, sizeof(double));
    for (int64_t i = 0; i < count; i++) {
        keep[i] = y[i] != 0.0f;
        kept += keep[i];
        x_f64[i] = x[i];
    }
    ref_dropout(count, x_f64, keep, DROPOUT_P, y_ref);
    double err = harness_rel_err_f64(y, y_ref, count);
    CHECK(err <= DROPOUT_EXACT_TOL, "dropout y != x*mask/(1-p): rel err %.3g", err);
    free(x_f64);
    free(y_ref);
    return kept;
}

static void check_kept_fraction(int64_t kept, int64_t count)
{
    double fraction = (double)kept / (double)count;
    double sigma = sqrt(DROPOUT_P * (1.0 - DROPOUT_P) / (double)count);
    CHECK(fabs(fraction - (1.0 - DROPOUT_P)) <= 6.0 * sigma,
          "kept fraction %.4f, expected %.4f +- %.4f", fraction, 1.0 - DROPOUT_P, 6.0 * sigma);
}

static void test_dropout(void)
{
    gc_case c;
    if (!gc_begin(&c, NULL, NULL, 71))
        return;
    int64_t x_shape[4] = {4, 8, 16, 16};
    ct_tensor *x = gc_input(&c, "x", 4, x_shape, -1.0f, 1.0f);
    if (c.n_values == 1)
        gc_away_from_zero(&c.values[0], RELU_MIN_ABS);
    ct_tensor *y = ct_dropout(c.graph, x, DROPOUT_P);
    if (!gc_plan(&c, y, 4, x_shape, GC_VJP)) {
        gc_end(&c);
        return;
    }
    int64_t count = c.ny;
    const float *x_f32 = c.values[0].f32;
    uint8_t *mask = checked_calloc(count, 1);
    uint8_t *mask_next = checked_calloc(count, 1);
    float *buffer = checked_calloc(count, sizeof(float));
    check_kept_fraction(dropout_mask(x_f32, c.y_f32, count, mask), count);

    /* dx = dy * mask / (1-p) */
    ct_tensor *dx = ct_tensor_grad(x);
    CHECK(dx != NULL, "no gradient for x");
    if (dx) {
        CHECK_OK(ct_plan_read(c.plan, dx, buffer, (size_t)count * sizeof(float)));
        double *dx_ref = checked_calloc(count, sizeof(double));
        ref_dropout(count, c.dy_f64, mask, DROPOUT_P, dx_ref);
        double err = harness_rel_err_f64(buffer, dx_ref, count);
        CHECK(err <= DROPOUT_EXACT_TOL, "dx != dy*mask/(1-p): rel err %.3g", err);
        free(dx_ref);
    }

    /* The next step draws another mask. */
    int64_t step = ct_plan_step(c.plan);
    CHECK(step == 1, "ct_plan_step after one run = %lld, expected 1", (long long)step);
    CHECK_OK(ct_plan_run(c.plan, CT_TRAIN));
    CHECK_OK(ct_plan_read(c.plan, y, buffer, (size_t)count * sizeof(float)));
    check_kept_fraction(dropout_mask(x_f32, buffer, count, mask_next), count);
    CHECK(memcmp(mask, mask_next, (size_t)count) != 0, "step 2 drew the same mask as step 1");

    /* Evaluation is the identity. */
    CHECK_OK(ct_plan_run(c.plan, CT_EVAL));
    CHECK_OK(ct_plan_read(c.plan, y, buffer, (size_t)count * sizeof(float)));
    CHECK(memcmp(buffer, x_f32, (size_t)count * sizeof(float)) == 0,
          "dropout in CT_EVAL is not the identity");

    /* A fresh plan with the same seed reproduces the first mask. */
    ct_plan_free(c.plan);
    c.plan = NULL;
    ct_status status = ct_plan_new(c.graph, c.backend, PLAN_SEED, &c.plan);
    CHECK(status == CT_OK, "second ct_plan_new: %s", ct_last_error());
    if (status == CT_OK) {
        CHECK_OK(ct_plan_write(c.plan, x, x_f32, (size_t)count * sizeof(float)));
        CHECK_OK(ct_plan_write(c.plan, c.dy, c.dy_f32, (size_t)count * sizeof(float)));
        CHECK_OK(ct_plan_run(c.plan, CT_TRAIN));
        CHECK_OK(ct_plan_read(c.plan, y, buffer, (size_t)count * sizeof(float)));
        CHECK(memcmp(buffer, c.y_f32, (size_t)count * sizeof(float)) == 0,
              "a fresh plan with the same seed gave another output");
    }
    free(mask);
    free(mask_next);
    free(buffer);
    gc_end(&c);
}

/* ---- add, concat ---------------------------------------------------------------- */

static void add_forward(const gc_case *c, double *y)
{
    ref_add(c->ny, c->values[0].f64, c->values[1].f64, y);
}

static void test_add_batch3(void)
{
    gc_case c;
    if (!gc_begin(&c, add_forward, NULL, 81))
        return;
    int64_t shape[4] = {3, 4, 5, 5};
    ct_tensor *a = gc_input(&c, "a", 4, shape, -1.0f, 1.0f);
    ct_tensor *b = gc_input(&c, "b", 4, shape, -2.0f, 2.0f);
    gc_finish(&c, ct_add(c.graph, a, b), 4, shape);
}

static void test_add_param_batch1(void)
{
    gc_case c;
    if (!gc_begin(&c, add_forward, NULL, 82))
        return;
    int64_t shape[2] = {1, 17};
    ct_tensor *a = gc_input(&c, "a", 2, shape, -1.0f, 1.0f);
    ct_tensor *b = gc_param(&c, "offset", 2, shape, -1.0f, 1.0f);
    gc_finish(&c, ct_add(c.graph, a, b), 2, shape);
}

#define CONCAT_MAX_INPUTS 4

typedef struct concat_case {
    int ndim; /* 4: [n, c_k, h, w]; 2: [n, c_k] */
    int n, h, w;
    int n_inputs;
    int channels[CONCAT_MAX_INPUTS];
} concat_case;

static void concat_forward(const gc_case *c, double *y)
{
    const concat_case *a = c->args;
    const double *xs[CONCAT_MAX_INPUTS];
    for (int k = 0; k < a->n_inputs; k++)
        xs[k] = c->values[k].f64;
    ref_concat(a->n, a->h * a->w, a->n_inputs, a->channels, xs, y);
}

static void check_concat(const concat_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, concat_forward, a, seed))
        return;
    static const char *const names[CONCAT_MAX_INPUTS] = {"x0", "x1", "x2", "x3"};
    ct_tensor *xs[CONCAT_MAX_INPUTS];
    int total = 0;
    for (int k = 0; k < a->n_inputs; k++) {
        int64_t shape[4] = {a->n, a->channels[k], a->h, a->w};
        xs[k] = gc_input(&c, names[k], a->ndim, shape, -1.0f, 1.0f);
        total += a->channels[k];
    }
    int64_t y_shape[4] = {a->n, total, a->h, a->w};
    gc_finish(&c, ct_concat(c.graph, a->n_inputs, xs), a->ndim, y_shape);
}

static void test_concat_3_inputs_batch3(void)
{
    concat_case a = {4, 3, 4, 4, 3, {2, 3, 1}};
    check_concat(&a, 83);
}

static void test_concat_2_inputs_batch1(void)
{
    concat_case a = {4, 1, 3, 5, 2, {4, 2}};
    check_concat(&a, 84);
}

static void test_concat_2d_batch7(void)
{
    concat_case a = {2, 7, 1, 1, 2, {3, 5}};
    check_concat(&a, 85);
}

/* ---- softmax and cross-entropy ---------------------------------------------------- */

typedef struct softmax_case {
    int n, c;
} softmax_case;

static void softmax_forward(const gc_case *c, double *y)
{
    const softmax_case *a = c->args;
    ref_softmax(a->n, a->c, c->values[0].f64, y);
}

static void check_softmax(const softmax_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, softmax_forward, a, seed))
        return;
    int64_t shape[2] = {a->n, a->c};
    ct_tensor *x = gc_input(&c, "x", 2, shape, -3.0f, 3.0f);
    c.work = 4.0 * a->n * a->c;
    gc_finish(&c, ct_softmax(c.graph, x), 2, shape);
}

static void test_softmax_batch1(void)
{
    softmax_case a = {1, 10};
    check_softmax(&a, 91);
}

static void test_softmax_batch7(void)
{
    softmax_case a = {7, 10};
    check_softmax(&a, 92);
}

static void test_softmax_batch3_wide(void)
{
    softmax_case a = {3, 100};
    check_softmax(&a, 93);
}

#define CE_MAX_BATCH 16

typedef struct ce_case {
    int n, c;
    float label_smoothing;
    bool labels_i64;
    int64_t labels[CE_MAX_BATCH];
} ce_case;

static void ce_forward(const gc_case *c, double *y)
{
    const ce_case *a = c->args;
    y[0] = ref_cross_entropy(a->n, a->c, c->values[0].f64, a->labels, a->label_smoothing);
}

static void check_cross_entropy(ce_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, ce_forward, a, seed))
        return;
    int32_t labels_i32[CE_MAX_BATCH];
    uint64_t state = seed;
    for (int b = 0; b < a->n; b++) {
        a->labels[b] = (int64_t)(harness_uniform(&state, 0.0f, 1.0f) * (float)a->c) % a->c;
        labels_i32[b] = (int32_t)a->labels[b];
    }
    int64_t logits_shape[2] = {a->n, a->c}, labels_shape[1] = {a->n};
    ct_tensor *logits = gc_input(&c, "logits", 2, logits_shape, -3.0f, 3.0f);
    ct_tensor *labels = ct_input(c.graph, "labels", a->labels_i64 ? CT_I64 : CT_I32, 1,
                                 labels_shape);
    CHECK(labels != NULL, "ct_input(labels): %s", ct_last_error());
    c.writes[c.n_writes++] = (gc_write){labels, a->labels_i64 ? (const void *)a->labels
                                                              : (const void *)labels_i32,
                                        (size_t)a->n * (a->labels_i64 ? 8 : 4)};
    ct_tensor *loss = ct_cross_entropy(c.graph, logits, labels, a->label_smoothing);
    c.work = 4.0 * a->n * a->c;
    if (gc_plan(&c, loss, 0, NULL, GC_LOSS)) {
        gc_check_forward(&c);
        gc_check_grads(&c);
    }
    gc_end(&c);
}

static void test_cross_entropy_i64_batch7(void)
{
    ce_case a = {7, 10, 0.0f, true, {0}};
    check_cross_entropy(&a, 101);
}

static void test_cross_entropy_i32_smoothing_batch3(void)
{
    ce_case a = {3, 5, 0.1f, false, {0}};
    check_cross_entropy(&a, 102);
}

static void test_cross_entropy_i64_smoothing_batch1(void)
{
    ce_case a = {1, 4, 0.2f, true, {0}};
    check_cross_entropy(&a, 103);
}

/* ---- chains: views, and a tensor used twice ---------------------------------------- */

typedef struct chain_case {
    ref_conv2d_shape conv;
    int features; /* linear out */
} chain_case;

/* values: 0 x, 1 conv.weight, 2 conv.bias, 3 fc.weight, 4 fc.bias.
 * Flatten and reshape are views: the reference just reads the same array. */
static void chain_forward(const gc_case *c, double *y)
{
    const chain_case *a = c->args;
    const ref_conv2d_shape *s = &a->conv;
    int out_h = ref_conv2d_out_size(s->in_h, s->kernel_h, s->stride_h, s->pad_h, s->dilation_h);
    int out_w = ref_conv2d_out_size(s->in_w, s->kernel_w, s->stride_w, s->pad_w, s->dilation_w);
    int in_features = s->out_channels * out_h * out_w;
    double *hidden = checked_calloc((int64_t)s->n_batch * in_features, sizeof(double));
    ref_conv2d(s, c->values[0].f64, c->values[1].f64, c->values[2].f64, hidden);
    ref_linear(s->n_batch, in_features, a->features, hidden, c->values[3].f64,
               c->values[4].f64, y);
    free(hidden);
}

/* x -> conv -> (flatten, or reshape to [N, -1]) -> linear.  With x_flat, x
 * arrives as [N, C*H*W] and is reshaped to [N, C, H, W] first. */
static void check_chain(const chain_case *a, bool x_flat, uint64_t seed)
{
    const ref_conv2d_shape *s = &a->conv;
    gc_case c;
    if (!gc_begin(&c, chain_forward, a, seed))
        return;
    int out_h = ref_conv2d_out_size(s->in_h, s->kernel_h, s->stride_h, s->pad_h, s->dilation_h);
    int out_w = ref_conv2d_out_size(s->in_w, s->kernel_w, s->stride_w, s->pad_w, s->dilation_w);
    int64_t in_features = (int64_t)s->out_channels * out_h * out_w;
    int64_t x_shape[4] = {s->n_batch, s->in_channels, s->in_h, s->in_w};
    int64_t x_flat_shape[2] = {s->n_batch, (int64_t)s->in_channels * s->in_h * s->in_w};
    int64_t cw_shape[4] = {s->out_channels, s->in_channels / s->groups, s->kernel_h,
                           s->kernel_w};
    int64_t cb_shape[1] = {s->out_channels};
    int64_t fw_shape[2] = {a->features, in_features}, fb_shape[1] = {a->features};
    int64_t rows_shape[2] = {s->n_batch, -1};

    ct_tensor *x = x_flat ? gc_input(&c, "x", 2, x_flat_shape, -1.0f, 1.0f)
                          : gc_input(&c, "x", 4, x_shape, -1.0f, 1.0f);
    ct_tensor *cw = gc_param(&c, "conv.weight", 4, cw_shape, -1.0f, 1.0f);
    ct_tensor *cb = gc_param(&c, "conv.bias", 1, cb_shape, -1.0f, 1.0f);
    ct_tensor *fw = gc_param(&c, "fc.weight", 2, fw_shape, -0.5f, 0.5f);
    ct_tensor *fb = gc_param(&c, "fc.bias", 1, fb_shape, -0.5f, 0.5f);
    ct_conv_args args = {{s->stride_h, s->stride_w}, {s->pad_h, s->pad_w},
                         {s->dilation_h, s->dilation_w}, s->groups};
    ct_tensor *image = x_flat ? ct_reshape(c.graph, x, 4, x_shape) : x;
    ct_tensor *h = ct_conv2d(c.graph, image, cw, cb, args);
    ct_tensor *rows = x_flat ? ct_reshape(c.graph, h, 2, rows_shape) : ct_flatten(c.graph, h);
    ct_tensor *y = ct_linear(c.graph, rows, fw, fb);
    int64_t y_shape[2] = {s->n_batch, a->features};
    c.work = (double)s->n_batch * (s->out_channels * out_h * out_w) *
             ((s->in_channels / s->groups) * s->kernel_h * s->kernel_w + a->features);
    gc_finish(&c, y, 2, y_shape);
}

static void test_chain_conv_flatten_linear(void)
{
    chain_case a = {{3, 3, 8, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1}, 10};
    check_chain(&a, false, 111);
}

static void test_chain_reshape_conv_reshape_linear(void)
{
    chain_case a = {{3, 3, 4, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 5};
    check_chain(&a, true, 112);
}

/* y = relu(x) + x: x's gradient has two contributions that must add up. */
static void twice_forward(const gc_case *c, double *y)
{
    ref_relu(c->ny, c->values[0].f64, y);
    ref_add(c->ny, y, c->values[0].f64, y);
}

static void test_tensor_used_twice(void)
{
    gc_case c;
    if (!gc_begin(&c, twice_forward, NULL, 121))
        return;
    int64_t shape[4] = {3, 2, 4, 4};
    ct_tensor *x = gc_input(&c, "x", 4, shape, -1.0f, 1.0f);
    if (c.n_values == 1)
        gc_away_from_zero(&c.values[0], RELU_MIN_ABS);
    gc_finish(&c, ct_add(c.graph, ct_relu(c.graph, x), x), 4, shape);
}

/* ---- build-time errors ------------------------------------------------------------- */

#define MAX_MESSAGE_NUMBERS 128

/* Whether the dims of `shape` appear, adjacent and in order, among the
 * integers written in msg, whatever the brackets and separators. */
static bool message_has_shape(const char *msg, int ndim, const int64_t *shape)
{
    int64_t numbers[MAX_MESSAGE_NUMBERS];
    int count = 0;
    for (const char *p = msg; *p && count < MAX_MESSAGE_NUMBERS;) {
        if (*p >= '0' && *p <= '9') {
            char *end;
            numbers[count++] = strtoll(p, &end, 10);
            p = end;
        } else {
            p++;
        }
    }
    for (int start = 0; start + ndim <= count; start++) {
        int i = 0;
        while (i < ndim && numbers[start + i] == shape[i])
            i++;
        if (i == ndim)
            return true;
    }
    return false;
}

static void check_build_error(ct_graph *graph, const ct_tensor *result, ct_status expected,
                              const char *op)
{
    CHECK(result == NULL, "%s returned a tensor", op);
    CHECK(ct_graph_status(graph) == expected, "graph status %s, expected %s",
          ct_status_name(ct_graph_status(graph)), ct_status_name(expected));
    CHECK(strstr(ct_last_error(), op) != NULL, "message does not name %s: \"%s\"", op,
          ct_last_error());
}

static void test_error_conv2d_channels(void)
{
    ct_graph *graph = ct_graph_new();
    CHECK(graph != NULL, "ct_graph_new: %s", ct_last_error());
    if (!graph)
        return;
    int64_t x_shape[4] = {2, 3, 8, 8}, w_shape[4] = {4, 5, 3, 3};
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, x_shape);
    ct_tensor *w = ct_param(graph, "conv.weight", 4, w_shape, CT_INIT_UNIFORM, 0.1f);
    ct_conv_args args = {{1, 1}, {1, 1}, {1, 1}, 1};
    ct_tensor *y = ct_conv2d(graph, x, w, NULL, args);
    check_build_error(graph, y, CT_ERR_SHAPE, "conv2d");
    const char *msg = ct_last_error();
    CHECK(message_has_shape(msg, 4, x_shape), "message lacks x's shape: \"%s\"", msg);
    CHECK(message_has_shape(msg, 4, w_shape), "message lacks w's shape: \"%s\"", msg);
    /* A builder given NULL keeps the first message and status. */
    CHECK(ct_relu(graph, y) == NULL, "relu of NULL returned a tensor");
    CHECK(strstr(ct_last_error(), "conv2d") != NULL, "first message overwritten: \"%s\"",
          ct_last_error());
    CHECK(ct_graph_status(graph) == CT_ERR_SHAPE, "graph status became %s",
          ct_status_name(ct_graph_status(graph)));
    ct_graph_free(graph);
}

static void test_error_linear_in_features(void)
{
    ct_graph *graph = ct_graph_new();
    CHECK(graph != NULL, "ct_graph_new: %s", ct_last_error());
    if (!graph)
        return;
    int64_t x_shape[2] = {4, 10}, w_shape[2] = {5, 11};
    ct_tensor *x = ct_input(graph, "x", CT_F32, 2, x_shape);
    ct_tensor *w = ct_param(graph, "fc.weight", 2, w_shape, CT_INIT_UNIFORM, 0.1f);
    check_build_error(graph, ct_linear(graph, x, w, NULL), CT_ERR_SHAPE, "linear");
    CHECK(message_has_shape(ct_last_error(), 2, x_shape), "message lacks x's shape: \"%s\"",
          ct_last_error());
    CHECK(message_has_shape(ct_last_error(), 2, w_shape), "message lacks w's shape: \"%s\"",
          ct_last_error());
    ct_graph_free(graph);
}

static void test_error_add_shapes(void)
{
    ct_graph *graph = ct_graph_new();
    CHECK(graph != NULL, "ct_graph_new: %s", ct_last_error());
    if (!graph)
        return;
    int64_t a_shape[4] = {2, 3, 4, 4}, b_shape[4] = {2, 3, 4, 5};
    ct_tensor *a = ct_input(graph, "a", CT_F32, 4, a_shape);
    ct_tensor *b = ct_input(graph, "b", CT_F32, 4, b_shape);
    check_build_error(graph, ct_add(graph, a, b), CT_ERR_SHAPE, "add");
    ct_graph_free(graph);
}

static void test_error_cross_entropy_float_labels(void)
{
    ct_graph *graph = ct_graph_new();
    CHECK(graph != NULL, "ct_graph_new: %s", ct_last_error());
    if (!graph)
        return;
    int64_t logits_shape[2] = {4, 5}, labels_shape[1] = {4};
    ct_tensor *logits = ct_input(graph, "logits", CT_F32, 2, logits_shape);
    ct_tensor *labels = ct_input(graph, "labels", CT_F32, 1, labels_shape);
    check_build_error(graph, ct_cross_entropy(graph, logits, labels, 0.0f), CT_ERR_DTYPE,
                      "cross_entropy");
    ct_graph_free(graph);
}

int main(void)
{
    RUN(test_conv_3x3_pad1_batch1);
    RUN(test_conv_nonsquare_kernel_batch3);
    RUN(test_conv_pad2_stride2_batch7);
    RUN(test_conv_dilation2);
    RUN(test_conv_asymmetric_stride_pad_dilation);
    RUN(test_conv_groups2);
    RUN(test_conv_depthwise_stride2);
    RUN(test_conv_depthwise_multiplier2);
    RUN(test_conv_1x1_batch7);
    RUN(test_conv_3x32x32_batch1);
    RUN(test_conv_3x32x32_7x7_stride2_pad3);
    RUN(test_linear_batch1);
    RUN(test_linear_batch7_no_bias);
    RUN(test_linear_batch3_wide);
    RUN(test_maxpool_2x2_batch1);
    RUN(test_maxpool_3x3_stride2_pad1_batch3);
    RUN(test_maxpool_nonsquare_batch7);
    RUN(test_maxpool_3x32x32);
    RUN(test_avgpool_2x2_batch1);
    RUN(test_avgpool_3x3_pad1_include_batch3);
    RUN(test_avgpool_3x3_pad1_exclude_batch3);
    RUN(test_avgpool_nonsquare_pad_exclude_batch7);
    RUN(test_avgpool_pad2_include_batch7);
    RUN(test_global_avgpool_batch1);
    RUN(test_global_avgpool_batch7);
    RUN(test_global_avgpool_3x32x32);
    RUN(test_relu_batch1_3x32x32);
    RUN(test_relu_batch7_2d);
    RUN(test_sigmoid_batch3);
    RUN(test_sigmoid_batch7_2d);
    RUN(test_tanh_batch3);
    RUN(test_tanh_batch1_3x32x32);
    RUN(test_batchnorm_train_batch3);
    RUN(test_batchnorm_train_batch1);
    RUN(test_batchnorm_train_batch7_3x32x32);
    RUN(test_batchnorm_train_2d);
    RUN(test_batchnorm_eval_batch3);
    RUN(test_batchnorm_eval_batch1_2d);
    RUN(test_dropout);
    RUN(test_add_batch3);
    RUN(test_add_param_batch1);
    RUN(test_concat_3_inputs_batch3);
    RUN(test_concat_2_inputs_batch1);
    RUN(test_concat_2d_batch7);
    RUN(test_softmax_batch1);
    RUN(test_softmax_batch7);
    RUN(test_softmax_batch3_wide);
    RUN(test_cross_entropy_i64_batch7);
    RUN(test_cross_entropy_i32_smoothing_batch3);
    RUN(test_cross_entropy_i64_smoothing_batch1);
    RUN(test_chain_conv_flatten_linear);
    RUN(test_chain_reshape_conv_reshape_linear);
    RUN(test_tensor_used_twice);
    RUN(test_error_conv2d_channels);
    RUN(test_error_linear_in_features);
    RUN(test_error_add_shapes);
    RUN(test_error_cross_entropy_float_labels);
    return harness_finish();
}
