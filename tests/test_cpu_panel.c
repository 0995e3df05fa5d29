/*
 * The panel convolution (src/cpu/conv_panel.c, AVX-512): forward against a
 * double reference over strides, padding, dilation, 1x1 and 7x7 kernels,
 * column counts around its 48-wide panels and 16-wide vectors, depths
 * around its 256-deep blocks; bias and relu as it stores (a NaN passes the
 * relu); the same bits for 1, 2 and 3 threads; what it refuses.  Skipped,
 * saying so, on a CPU without AVX-512.
 */
#include <string.h>

#include "core/window_math.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/threads.h"
#include "harness.h"

typedef struct panel_case {
    int n, c, h, w, o, kh, kw, stride, pad, dilation;
} panel_case;

static const panel_case CASES[] = {
    /* n   c   h   w   o kh kw  s  p  d */
    {1, 64, 14, 14, 64, 3, 3, 1, 1, 1},  /* 196 columns: 4 panels and a 4-wide tail */
    {2, 32, 15, 13, 40, 3, 3, 2, 1, 1},  /* strided, odd sizes, two images: 8x7 = 56 */
    {1, 3, 40, 40, 16, 7, 7, 2, 3, 1},   /* a stem: 20x20 = 400 columns, K = 147 */
    {1, 300, 7, 7, 24, 1, 1, 1, 0, 1},   /* K = 300: a 256 block and a partial one */
    {1, 40, 9, 9, 8, 3, 3, 1, 2, 2},     /* dilation 2, pad 2: 9x9 */
    {1, 16, 4, 4, 8, 1, 1, 1, 0, 1},     /* 16 columns: one full vector */
    {1, 16, 7, 7, 8, 1, 1, 1, 0, 1},     /* 49: a panel and 1 */
    {1, 520, 1, 1, 32, 1, 1, 1, 0, 1},   /* one column, K = 520 */
    {3, 24, 12, 4, 16, 3, 3, 1, 1, 1},   /* 48 columns: exactly one panel */
    {1, 8, 16, 6, 8, 3, 1, 1, 0, 1},     /* a 3x1 kernel: 14x6 = 84 */
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

static ct_conv2d_shape shape_of(const panel_case *c)
{
    int span_h = c->dilation * (c->kh - 1) + 1, span_w = c->dilation * (c->kw - 1) + 1;
    ct_conv2d_shape s = {c->n, c->c, c->h, c->w, c->o,
                         (c->h + 2 * c->pad - span_h) / c->stride + 1,
                         (c->w + 2 * c->pad - span_w) / c->stride + 1,
                         c->kh, c->kw, c->stride, c->stride, c->pad, c->pad,
                         c->dilation, c->dilation, 1};
    return s;
}

static float *random_floats(int64_t n, uint32_t seed)
{
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    uint32_t state = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        v[i] = (float)(state >> 8) / 16777216.0f * 2.0f - 1.0f;
    }
    return v;
}

static void reference(const ct_conv2d_shape *s, const float *x, const float *w, const float *bias,
                      bool relu, double *y)
{
    for (int n = 0; n < s->n_batch; n++)
        for (int o = 0; o < s->out_channels; o++)
            for (int oh = 0; oh < s->out_h; oh++)
                for (int ow = 0; ow < s->out_w; ow++) {
                    double sum = bias ? bias[o] : 0.0;
                    for (int c = 0; c < s->in_channels; c++)
                        for (int i = 0; i < s->kernel_h; i++)
                            for (int j = 0; j < s->kernel_w; j++) {
                                int ih = ct_window_input(oh, i, s->stride_h, s->pad_h,
                                                         s->dilation_h);
                                int iw = ct_window_input(ow, j, s->stride_w, s->pad_w,
                                                         s->dilation_w);
                                if (ih < 0 || ih >= s->in_h || iw < 0 || iw >= s->in_w)
                                    continue;
                                sum += (double)x[((n * s->in_channels + c) * s->in_h + ih) *
                                                     s->in_w + iw] *
                                       w[((o * s->in_channels + c) * s->kernel_h + i) *
                                             s->kernel_w + j];
                            }
                    *y++ = relu && sum < 0 ? 0.0 : sum;
                }
}

typedef struct run {
    ct_conv2d_shape s;
    float *x, *w, *bias, *y;
    int64_t nx, nw, ny;
} run;

static run make_run(const panel_case *c, int index)
{
    run r = {.s = shape_of(c)};
    r.nx = (int64_t)r.s.n_batch * r.s.in_channels * r.s.in_h * r.s.in_w;
    r.nw = (int64_t)r.s.out_channels * r.s.in_channels * r.s.kernel_h * r.s.kernel_w;
    r.ny = (int64_t)r.s.n_batch * r.s.out_channels * r.s.out_h * r.s.out_w;
    r.x = random_floats(r.nx, 10 + index);
    r.w = random_floats(r.nw, 20 + index);
    r.bias = random_floats(r.s.out_channels, 30 + index);
    r.y = malloc(sizeof(float) * (size_t)r.ny);
    return r;
}

static void forward(run *r, const float *bias, bool relu)
{
    void *workspace = malloc(ct_cpu_conv2d_panel_workspace(&r->s, ct_cpu_max_threads()));
    for (int64_t i = 0; i < r->ny; i++)
        r->y[i] = NAN; /* every output must be written */
    ct_cpu_conv2d_panel_forward(&r->s, r->x, r->w, bias, relu, r->y, workspace);
    free(workspace);
}

static void free_run(run *r)
{
    free(r->x);
    free(r->w);
    free(r->bias);
    free(r->y);
}

static bool skip(void)
{
    if (ct_cpu_simd_avx512())
        return false;
    printf("  (this CPU, or CT_CPU_SIMD=0, has no AVX-512: the panel convolution is not used)\n");
    return true;
}

static void matches_reference(void)
{
    if (skip())
        return;
    for (int i = 0; i < N_CASES; i++) {
        for (int variant = 0; variant < 2; variant++) {
            bool relu = variant == 1;
            run r = make_run(&CASES[i], i);
            CHECK(ct_cpu_conv2d_panel_fits(&r.s), "case %d does not fit", i);
            const float *bias = relu ? r.bias : NULL;
            forward(&r, bias, relu);
            double *ref = malloc(sizeof(double) * (size_t)r.ny);
            reference(&r.s, r.x, r.w, bias, relu, ref);
            double err = harness_rel_err_f64(r.y, ref, r.ny);
            CHECK(err <= 1e-5, "case %d (%s): rel err %g", i, relu ? "bias, relu" : "plain",
                  err);
            free(ref);
            free_run(&r);
        }
    }
}

static void relu_keeps_nan(void)
{
    if (skip())
        return;
    run r = make_run(&CASES[5], 5);
    r.x[0] = NAN; /* reaches output column 0 of every channel */
    forward(&r, r.bias, true);
    int nans = 0;
    for (int64_t i = 0; i < r.ny; i++)
        nans += isnan(r.y[i]);
    CHECK(nans == r.s.out_channels, "%d NaN outputs, not %d", nans, r.s.out_channels);
    free_run(&r);
}

static void same_bits_for_any_thread_count(void)
{
    if (skip())
        return;
    int saved = ct_cpu_max_threads();
    for (int i = 0; i < N_CASES; i += 3) {
        run r = make_run(&CASES[i], i);
        float *first = malloc(sizeof(float) * (size_t)r.ny);
        for (int threads = 1; threads <= 3; threads++) {
            ct_cpu_set_threads(threads);
            forward(&r, r.bias, true);
            if (threads == 1)
                memcpy(first, r.y, sizeof(float) * (size_t)r.ny);
            else
                CHECK(memcmp(first, r.y, sizeof(float) * (size_t)r.ny) == 0,
                      "case %d: %d threads differ from 1", i, threads);
        }
        free(first);
        free_run(&r);
    }
    ct_cpu_set_threads(saved);
}

static void refuses_what_it_cannot(void)
{
    ct_conv2d_shape s = shape_of(&CASES[0]);
    s.groups = 2;
    CHECK(!ct_cpu_conv2d_panel_fits(&s), "groups 2 must go to im2col");
    s = shape_of(&CASES[0]);
    s.out_channels = 12;
    CHECK(!ct_cpu_conv2d_panel_fits(&s), "12 output channels (not a multiple of 8) must go to "
                                         "im2col");
}

int main(void)
{
    RUN(matches_reference);
    RUN(relu_keeps_nan);
    RUN(same_bits_for_any_thread_count);
    RUN(refuses_what_it_cannot);
    return harness_finish();
}
