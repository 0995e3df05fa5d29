/*
 * Forward and gradient checks of pooling: maxpool2d, avgpool2d (padding
 * counted in the divisor and not) and global average pooling.  The fixture
 * is tests/gradcheck.h's.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "gradcheck.h"
#include "harness.h"
#include "ref.h"

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
    int64_t *order = gc_calloc(v->numel, sizeof(int64_t));
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

int main(void)
{
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
    return harness_finish();
}
