/*
 * Forward and gradient checks of the tensor ops: add, concat, the views
 * (flatten, reshape) inside conv -> linear chains, and a tensor used twice
 * (gradients that must add up).  The fixture is tests/gradcheck.h's.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "gradcheck.h"
#include "harness.h"
#include "ref.h"

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

/* relu(a + b), a residual block's end: the plan fuses the relu into the
 * add's kernel (graph/fuse.c); relu_bwd reads the fused output. */
static void add_relu_forward(const gc_case *c, double *y)
{
    add_forward(c, y);
    ref_relu(c->ny, y, y);
}

static void test_add_relu_fused(void)
{
    gc_case c;
    if (!gc_begin(&c, add_relu_forward, NULL, 83))
        return;
    int64_t shape[4] = {2, 3, 4, 5};
    ct_tensor *a = gc_input(&c, "a", 4, shape, -1.0f, 1.0f);
    ct_tensor *b = gc_input(&c, "b", 4, shape, -2.0f, 2.0f);
    gc_finish(&c, ct_relu(c.graph, ct_add(c.graph, a, b)), 4, shape);
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
    double *hidden = gc_calloc((int64_t)s->n_batch * in_features, sizeof(double));
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

int main(void)
{
    RUN(test_add_batch3);
    RUN(test_add_param_batch1);
    RUN(test_add_relu_fused);
    RUN(test_concat_3_inputs_batch3);
    RUN(test_concat_2_inputs_batch1);
    RUN(test_concat_2d_batch7);
    RUN(test_chain_conv_flatten_linear);
    RUN(test_chain_reshape_conv_reshape_linear);
    RUN(test_tensor_used_twice);
    return harness_finish();
}
