/*
 * Forward and gradient checks of the weight layers: conv2d (padding, stride,
 * dilation, groups, depthwise, 1x1, 7x7, with and without bias) and linear.
 * The fixture is tests/gradcheck.h's.
 */
#include <stdbool.h>
#include <stdint.h>

#include "gradcheck.h"
#include "harness.h"
#include "ref.h"

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
    return harness_finish();
}
