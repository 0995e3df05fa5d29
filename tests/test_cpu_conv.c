/*
 * Kernel tests for src/cpu/gemm.c, conv.c and linear.c: every kernel against
 * a naive double-precision loop written here, on random inputs, with the
 * outputs (and the conv workspace) poisoned with NaN first so that an
 * element the kernel forgot to write fails the comparison.
 */
#include <math.h>
#include "cpu/threads.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "harness.h"

/* fp32 against a double reference, relative to the reference's largest value. */
static const double TOLERANCE = 1e-5;

static float *alloc_random(int64_t count, uint64_t seed)
{
    float *data = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    harness_fill(data, count, seed, -1.0f, 1.0f);
    return data;
}

static float *alloc_nan(int64_t count)
{
    float *data = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    for (int64_t i = 0; i < count; i++)
        data[i] = NAN;
    return data;
}

static double *alloc_zero_f64(int64_t count)
{
    return calloc((size_t)(count > 0 ? count : 1), sizeof(double));
}

/* ---- GEMM -------------------------------------------------------------- */

typedef void gemm_fn(bool, bool, int, int, int, float, const float *, int, const float *, int,
                     float, float *, int);

/* ref[i,j] = alpha * sum_p op(a)[i,p] op(b)[p,j] + beta * c[i,j]; c == NULL means beta*c = 0. */
static void gemm_reference(bool trans_a, bool trans_b, int m, int n, int k, double alpha,
                           const float *a, int lda, const float *b, int ldb, double beta,
                           const float *c, int ldc, double *ref)
{
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double sum = 0.0;
            for (int p = 0; p < k; p++) {
                double av = trans_a ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double bv = trans_b ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                sum += av * bv;
            }
            ref[(size_t)i * n + j] = alpha * sum + (c ? beta * c[(size_t)i * ldc + j] : 0.0);
        }
    }
}

/* One GEMM with padded leading dimensions (ld = columns + pad) against the
 * reference.  beta == 0 runs on a NaN-poisoned C. */
static void check_gemm(gemm_fn *gemm, const char *name, bool trans_a, bool trans_b, int m,
                       int n, int k, float alpha, float beta, int pad)
{
    int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
    float *a = alloc_random((int64_t)a_rows * lda, 1 + m + 7 * k);
    float *b = alloc_random((int64_t)b_rows * ldb, 2 + n + 5 * k);
    float *c = beta == 0.0f ? alloc_nan((int64_t)m * ldc) : alloc_random((int64_t)m * ldc, 3);
    float *c_before = malloc(sizeof(float) * (size_t)(m * ldc > 0 ? m * ldc : 1));
    memcpy(c_before, c, sizeof(float) * (size_t)(m * ldc));
    double *ref = alloc_zero_f64((int64_t)m * n);
    float *got = malloc(sizeof(float) * (size_t)(m * n > 0 ? m * n : 1));

    gemm_reference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                   beta == 0.0f ? NULL : c_before, ldc, ref);
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    bool padding_kept = true;
    for (int i = 0; i < m; i++) {
        memcpy(got + (size_t)i * n, c + (size_t)i * ldc, sizeof(float) * n);
        for (int j = n; j < ldc; j++)
            padding_kept &= memcmp(&c[(size_t)i * ldc + j], &c_before[(size_t)i * ldc + j],
                                   sizeof(float)) == 0;
    }
    double err = harness_rel_err_f64(got, ref, (int64_t)m * n);
    CHECK(err <= TOLERANCE, "%s ta=%d tb=%d m=%d n=%d k=%d alpha=%g beta=%g pad=%d: rel err %g",
          name, trans_a, trans_b, m, n, k, alpha, beta, pad, err);
    CHECK(padding_kept, "%s m=%d n=%d k=%d wrote past column n", name, m, n, k);
    free(a);
    free(b);
    free(c);
    free(c_before);
    free(ref);
    free(got);
}

static const int GEMM_SIZES[] = {1, 7, 33, 129};
enum { N_GEMM_SIZES = sizeof(GEMM_SIZES) / sizeof(GEMM_SIZES[0]) };

static void gemm_all_shapes(gemm_fn *gemm, const char *name)
{
    for (int t = 0; t < 4; t++)
        for (int im = 0; im < N_GEMM_SIZES; im++)
            for (int in = 0; in < N_GEMM_SIZES; in++)
                for (int ik = 0; ik < N_GEMM_SIZES; ik++)
                    check_gemm(gemm, name, t & 1, t & 2, GEMM_SIZES[im], GEMM_SIZES[in],
                               GEMM_SIZES[ik], 1.0f, 0.0f, 0);
}

static void gemm_native_all_transposes_and_sizes(void)
{
    gemm_all_shapes(ct_cpu_gemm_native, "native");
}

static void gemm_dispatch_all_transposes_and_sizes(void)
{
    gemm_all_shapes(ct_cpu_gemm, ct_cpu_gemm_name());
}

/* alpha, beta and leading dimensions wider than the rows; sizes that cross
 * the native GEMM's blocking (k > 256, m > 64, n > 128). */
static void gemm_alpha_beta_and_leading_dimensions(void)
{
    static const float alphas[] = {1.0f, 0.5f, -2.0f};
    static const float betas[] = {0.0f, 1.0f, -1.5f};
    for (int t = 0; t < 4; t++) {
        for (int ia = 0; ia < 3; ia++) {
            for (int ib = 0; ib < 3; ib++) {
                check_gemm(ct_cpu_gemm_native, "native", t & 1, t & 2, 70, 150, 300,
                           alphas[ia], betas[ib], 5);
                check_gemm(ct_cpu_gemm, ct_cpu_gemm_name(), t & 1, t & 2, 13, 9, 17,
                           alphas[ia], betas[ib], 3);
            }
        }
    }
}

/* k == 0 leaves beta * c (zeros for beta == 0, even over NaN). */
static void gemm_empty_depth(void)
{
    check_gemm(ct_cpu_gemm_native, "native", false, false, 5, 6, 0, 1.0f, 0.0f, 1);
    check_gemm(ct_cpu_gemm_native, "native", false, false, 5, 6, 0, 1.0f, 0.5f, 1);
}

/* The native GEMM gives the same bits with 1, 2 and 3 threads. */
static void gemm_native_same_bits_for_any_thread_count(void)
{
    enum { M = 70, N = 300, K = 520 };
    float *a = alloc_random((int64_t)M * K, 80), *b = alloc_random((int64_t)K * N, 81);
    float *c[3];
    int saved_threads = ct_cpu_max_threads();
    for (int run = 0; run < 3; run++) {
        ct_cpu_set_threads(run + 1);
        c[run] = alloc_nan((int64_t)M * N);
        ct_cpu_gemm_native(false, false, M, N, K, 1.0f, a, K, b, N, 0.0f, c[run], N);
    }
    ct_cpu_set_threads(saved_threads);
    for (int run = 1; run < 3; run++)
        CHECK(memcmp(c[0], c[run], sizeof(float) * M * N) == 0, "%d threads differs from 1",
              run + 1);
    for (int run = 0; run < 3; run++)
        free(c[run]);
    free(a);
    free(b);
}

static void gemm_name_matches_build(void)
{
#ifdef CT_HAVE_OPENBLAS
    CHECK(strcmp(ct_cpu_gemm_name(), "openblas") == 0, "got %s", ct_cpu_gemm_name());
#else
    CHECK(strcmp(ct_cpu_gemm_name(), "native") == 0, "got %s", ct_cpu_gemm_name());
#endif
}

/* ---- convolution -------------------------------------------------------- */

typedef struct conv_case {
    int n_batch, in_channels, in_h, in_w, out_channels;
    int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
} conv_case;

static const conv_case CONV_CASES[] = {
    /*  N  C   H   W   O  KH KW sh sw ph pw dh dw  g */
    {1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 1, 1, 1},
    {3, 2, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {7, 3, 9, 11, 5, 3, 5, 1, 1, 1, 2, 1, 1, 1},  /* non-square kernel */
    {3, 4, 8, 8, 6, 3, 3, 1, 1, 2, 2, 1, 1, 1},   /* padding 2 */
    {3, 3, 9, 10, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1},  /* stride 2 */
    {1, 3, 8, 9, 2, 4, 2, 2, 3, 1, 0, 1, 1, 1},   /* uneven strides, even kernel */
    {3, 2, 10, 10, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1}, /* dilation 2 */
    {3, 2, 11, 9, 2, 3, 2, 2, 1, 1, 1, 2, 3, 1},  /* dilation and stride mixed */
    {3, 4, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2},   /* groups 2 */
    {7, 6, 8, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6},   /* depthwise */
    {3, 4, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 4},   /* depthwise, multiplier 2, stride 2 */
    {3, 8, 6, 5, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1},   /* 1x1: the no-im2col path */
    {7, 8, 5, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2},   /* 1x1 grouped */
    {3, 8, 9, 9, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1},   /* 1x1 stride 2: needs im2col */
    {3, 4, 5, 5, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* 1x1 padded: needs im2col */
    {1, 2, 3, 3, 3, 5, 5, 1, 1, 2, 2, 1, 1, 1},   /* kernel as large as the input */
    {2, 3, 4, 4, 2, 3, 3, 3, 3, 0, 0, 1, 1, 1},   /* 1x1 output */
    {3, 3, 32, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1}, /* CIFAR first layer */
    {2, 16, 32, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {3, 4, 8, 7, 5, 1, 1, 2, 1, 0, 0, 1, 1, 1},   /* 1x1, stride 2 in h only */
    {3, 4, 6, 7, 5, 1, 1, 1, 1, 0, 1, 1, 1, 1},   /* 1x1, padding in w only */
    {3, 4, 9, 9, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2},   /* dilated and grouped */
};
enum { N_CONV_CASES = sizeof(CONV_CASES) / sizeof(CONV_CASES[0]) };

static ct_conv2d_shape conv_shape(const conv_case *t)
{
    ct_conv2d_shape s = {
        .n_batch = t->n_batch, .in_channels = t->in_channels, .in_h = t->in_h,
        .in_w = t->in_w, .out_channels = t->out_channels, .kernel_h = t->kernel_h,
        .kernel_w = t->kernel_w, .stride_h = t->stride_h, .stride_w = t->stride_w,
        .pad_h = t->pad_h, .pad_w = t->pad_w, .dilation_h = t->dilation_h,
        .dilation_w = t->dilation_w, .groups = t->groups,
    };
    s.out_h = (s.in_h + 2 * s.pad_h - s.dilation_h * (s.kernel_h - 1) - 1) / s.stride_h + 1;
    s.out_w = (s.in_w + 2 * s.pad_w - s.dilation_w * (s.kernel_w - 1) - 1) / s.stride_w + 1;
    return s;
}

static int64_t conv_x_count(const ct_conv2d_shape *s)
{
    return (int64_t)s->n_batch * s->in_channels * s->in_h * s->in_w;
}
static int64_t conv_y_count(const ct_conv2d_shape *s)
{
    return (int64_t)s->n_batch * s->out_channels * s->out_h * s->out_w;
}
static int64_t conv_w_count(const ct_conv2d_shape *s)
{
    return (int64_t)s->out_channels * (s->in_channels / s->groups) * s->kernel_h * s->kernel_w;
}

/* Visits every (n, o, oh, ow, c, i, j) whose input pixel is inside the
 * image, with the flat indices of y, x (channel g*Cg + c) and w. */
typedef void conv_visit_fn(void *ctx, int64_t yi, int64_t xi, int64_t wi);

static void conv_reference_visit(const ct_conv2d_shape *s, conv_visit_fn *visit, void *ctx)
{
    int cg = s->in_channels / s->groups, og = s->out_channels / s->groups;
    for (int n = 0; n < s->n_batch; n++)
        for (int o = 0; o < s->out_channels; o++)
            for (int oh = 0; oh < s->out_h; oh++)
                for (int ow = 0; ow < s->out_w; ow++)
                    for (int c = 0; c < cg; c++)
                        for (int i = 0; i < s->kernel_h; i++)
                            for (int j = 0; j < s->kernel_w; j++) {
                                int ih = oh * s->stride_h - s->pad_h + i * s->dilation_h;
                                int iw = ow * s->stride_w - s->pad_w + j * s->dilation_w;
                                if (ih < 0 || ih >= s->in_h || iw < 0 || iw >= s->in_w)
                                    continue;
                                int channel = o / og * cg + c;
                                int64_t yi = (((int64_t)n * s->out_channels + o) * s->out_h +
                                              oh) * s->out_w + ow;
                                int64_t xi = (((int64_t)n * s->in_channels + channel) *
                                              s->in_h + ih) * s->in_w + iw;
                                int64_t wi = (((int64_t)o * cg + c) * s->kernel_h + i) *
                                             s->kernel_w + j;
                                visit(ctx, yi, xi, wi);
                            }
}

typedef struct conv_tensors {
    const float *x, *w, *dy;
    double *out;
} conv_tensors;

static void visit_forward(void *ctx, int64_t yi, int64_t xi, int64_t wi)
{
    conv_tensors *t = ctx;
    t->out[yi] += (double)t->x[xi] * t->w[wi];
}
static void visit_backward_data(void *ctx, int64_t yi, int64_t xi, int64_t wi)
{
    conv_tensors *t = ctx;
    t->out[xi] += (double)t->dy[yi] * t->w[wi];
}
static void visit_backward_weight(void *ctx, int64_t yi, int64_t xi, int64_t wi)
{
    conv_tensors *t = ctx;
    t->out[wi] += (double)t->dy[yi] * t->x[xi];
}

/* The workspace, poisoned: im2col must write every element it reads. */
static void *alloc_workspace(const ct_conv2d_shape *s)
{
    size_t bytes = ct_cpu_conv2d_workspace(s, ct_cpu_max_threads());
    return alloc_nan((int64_t)(bytes / sizeof(float)));
}

static void check_conv_case(const conv_case *c, int case_index, bool with_bias)
{
    ct_conv2d_shape s = conv_shape(c);
    int64_t nx = conv_x_count(&s), ny = conv_y_count(&s), nw = conv_w_count(&s);
    float *x = alloc_random(nx, 10 + case_index);
    float *w = alloc_random(nw, 20 + case_index);
    float *dy = alloc_random(ny, 30 + case_index);
    float *bias = alloc_random(s.out_channels, 40 + case_index);
    float *y = alloc_nan(ny), *dx = alloc_nan(nx), *dw = alloc_nan(nw);
    double *ref_y = alloc_zero_f64(ny), *ref_dx = alloc_zero_f64(nx), *ref_dw = alloc_zero_f64(nw);
    void *workspace = alloc_workspace(&s);

    conv_tensors t = {x, w, dy, ref_y};
    conv_reference_visit(&s, visit_forward, &t);
    int64_t out_plane = (int64_t)s.out_h * s.out_w;
    for (int64_t i = 0; with_bias && i < ny; i++)
        ref_y[i] += bias[i / out_plane % s.out_channels];
    t.out = ref_dx;
    conv_reference_visit(&s, visit_backward_data, &t);
    t.out = ref_dw;
    conv_reference_visit(&s, visit_backward_weight, &t);

    ct_cpu_conv2d_forward(&s, x, w, with_bias ? bias : NULL, y, workspace);
    ct_cpu_conv2d_backward_data(&s, dy, w, dx, workspace);
    ct_cpu_conv2d_backward_weight(&s, x, dy, dw, workspace);

    double err_y = harness_rel_err_f64(y, ref_y, ny);
    double err_dx = harness_rel_err_f64(dx, ref_dx, nx);
    double err_dw = harness_rel_err_f64(dw, ref_dw, nw);
    CHECK(err_y <= TOLERANCE, "case %d forward (bias %d): rel err %g", case_index, with_bias,
          err_y);
    CHECK(err_dx <= TOLERANCE, "case %d backward data: rel err %g", case_index, err_dx);
    CHECK(err_dw <= TOLERANCE, "case %d backward weight: rel err %g", case_index, err_dw);
    free(x);
    free(w);
    free(dy);
    free(bias);
    free(y);
    free(dx);
    free(dw);
    free(ref_y);
    free(ref_dx);
    free(ref_dw);
    free(workspace);
}

static void conv_matches_reference(void)
{
    for (int i = 0; i < N_CONV_CASES; i++)
        check_conv_case(&CONV_CASES[i], i, i % 2 == 0);
}

static void conv_bias_on_the_other_cases(void)
{
    check_conv_case(&CONV_CASES[1], 1, true);
    check_conv_case(&CONV_CASES[11], 11, true);
}

/* The three conv kernels on one case with `threads` OpenMP threads:
 * out[0] = y, out[1] = dx, out[2] = dw. */
static void run_conv_kernels(const ct_conv2d_shape *s, int threads, const float *x,
                             const float *w, const float *bias, const float *dy, float *out[3])
{
    ct_cpu_set_threads(threads);
    void *workspace = alloc_workspace(s);
    out[0] = alloc_nan(conv_y_count(s));
    out[1] = alloc_nan(conv_x_count(s));
    out[2] = alloc_nan(conv_w_count(s));
    ct_cpu_conv2d_forward(s, x, w, bias, out[0], workspace);
    ct_cpu_conv2d_backward_data(s, dy, w, out[1], workspace);
    ct_cpu_conv2d_backward_weight(s, x, dy, out[2], workspace);
    free(workspace);
}

/* Two runs with 2 threads give the same bits.  With the native GEMM a run
 * with 1 thread does too; OpenBLAS's results depend on its thread count. */
static void conv_same_bits_run_to_run(void)
{
    static const int cases[] = {2, 9, 12, 17};
    static const int run_threads[] = {2, 2, 1};
    bool native = strcmp(ct_cpu_gemm_name(), "native") == 0;
    int n_runs = native ? 3 : 2;
    int saved_threads = ct_cpu_max_threads();
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        ct_conv2d_shape s = conv_shape(&CONV_CASES[cases[ci]]);
        const int64_t counts[3] = {conv_y_count(&s), conv_x_count(&s), conv_w_count(&s)};
        const char *names[3] = {"forward", "backward data", "backward weight"};
        float *x = alloc_random(counts[1], 50), *w = alloc_random(counts[2], 51);
        float *dy = alloc_random(counts[0], 52), *bias = alloc_random(s.out_channels, 53);
        float *out[3][3];
        for (int run = 0; run < n_runs; run++)
            run_conv_kernels(&s, run_threads[run], x, w, bias, dy, out[run]);
        for (int k = 0; k < 3; k++) {
            for (int run = 1; run < n_runs; run++)
                CHECK(memcmp(out[0][k], out[run][k], sizeof(float) * counts[k]) == 0,
                      "case %d %s: %d threads differs from 2", cases[ci], names[k],
                      run_threads[run]);
            for (int run = 0; run < n_runs; run++)
                free(out[run][k]);
        }
        free(x);
        free(w);
        free(dy);
        free(bias);
    }
    ct_cpu_set_threads(saved_threads);
}

static void conv_pointwise_needs_no_workspace(void)
{
    ct_conv2d_shape pointwise = conv_shape(&CONV_CASES[11]);
    ct_conv2d_shape strided = conv_shape(&CONV_CASES[13]);
    CHECK(ct_cpu_conv2d_workspace(&pointwise, 4) == 0, "1x1 stride 1 should skip im2col");
    CHECK(ct_cpu_conv2d_workspace(&strided, 4) > 0, "1x1 stride 2 needs a col buffer");
}

/* ---- channel sum and linear --------------------------------------------- */

static void channel_sum_matches_reference(void)
{
    static const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {7, 16, 1024}, {64, 10, 1}, {2, 3, 33}};
    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
        int n = shapes[si][0], c = shapes[si][1], inner = shapes[si][2];
        int64_t count = (int64_t)n * c * inner;
        float *dy = alloc_random(count, 60 + si), *db = alloc_nan(c);
        double *ref = alloc_zero_f64(c);
        for (int64_t i = 0; i < count; i++)
            ref[i / inner % c] += dy[i];
        ct_cpu_channel_sum(n, c, inner, dy, db);
        double err = harness_rel_err_f64(db, ref, c);
        CHECK(err <= TOLERANCE, "n=%d c=%d inner=%d: rel err %g", n, c, inner, err);
        free(dy);
        free(db);
        free(ref);
    }
}

static void check_linear(int n, int in, int out, bool with_bias)
{
    float *x = alloc_random((int64_t)n * in, 70 + n), *w = alloc_random((int64_t)out * in, 71);
    float *dy = alloc_random((int64_t)n * out, 72), *bias = alloc_random(out, 73);
    float *y = alloc_nan((int64_t)n * out), *dx = alloc_nan((int64_t)n * in);
    float *dw = alloc_nan((int64_t)out * in);
    double *ref_y = alloc_zero_f64((int64_t)n * out), *ref_dx = alloc_zero_f64((int64_t)n * in);
    double *ref_dw = alloc_zero_f64((int64_t)out * in);
    for (int r = 0; r < n; r++) {
        for (int o = 0; o < out; o++) {
            ref_y[r * out + o] = with_bias ? bias[o] : 0.0;
            for (int i = 0; i < in; i++) {
                ref_y[r * out + o] += (double)x[r * in + i] * w[o * in + i];
                ref_dx[r * in + i] += (double)dy[r * out + o] * w[o * in + i];
                ref_dw[o * in + i] += (double)dy[r * out + o] * x[r * in + i];
            }
        }
    }
    ct_cpu_linear_forward(n, in, out, x, w, with_bias ? bias : NULL, y);
    ct_cpu_linear_backward_data(n, in, out, dy, w, NULL, dx);
    ct_cpu_linear_backward_weight(n, in, out, x, dy, dw);
    double err_y = harness_rel_err_f64(y, ref_y, (int64_t)n * out);
    double err_dx = harness_rel_err_f64(dx, ref_dx, (int64_t)n * in);
    double err_dw = harness_rel_err_f64(dw, ref_dw, (int64_t)out * in);
    CHECK(err_y <= TOLERANCE, "n=%d in=%d out=%d forward: rel err %g", n, in, out, err_y);
    CHECK(err_dx <= TOLERANCE, "n=%d in=%d out=%d backward data: rel err %g", n, in, out, err_dx);
    CHECK(err_dw <= TOLERANCE, "n=%d in=%d out=%d backward weight: rel err %g", n, in, out,
          err_dw);
    /* with a relu's backward fused in: the unfused bits where its output
     * is > 0 (or NaN), 0 where it is <= 0 */
    float *relu_y = alloc_random((int64_t)n * in, 74), *masked = alloc_nan((int64_t)n * in);
    relu_y[0] = 0.0f;
    if (n * in > 1)
        relu_y[1] = NAN;
    ct_cpu_linear_backward_data(n, in, out, dy, w, relu_y, masked);
    int64_t wrong = 0;
    for (int64_t k = 0; k < (int64_t)n * in; k++) {
        float want = relu_y[k] <= 0.0f ? 0.0f : dx[k];
        wrong += memcmp(&want, &masked[k], sizeof want) != 0;
    }
    CHECK(wrong == 0, "n=%d in=%d out=%d backward data with relu: %lld of %lld differ", n, in,
          out, (long long)wrong, (long long)n * in);
    free(relu_y);
    free(masked);
    free(x);
    free(w);
    free(dy);
    free(bias);
    free(y);
    free(dx);
    free(dw);
    free(ref_y);
    free(ref_dx);
    free(ref_dw);
}

static void linear_matches_reference(void)
{
    check_linear(1, 1, 1, true);
    check_linear(7, 33, 10, true);
    check_linear(64, 784, 129, false);
    check_linear(3, 300, 1, true);
    check_linear(64, 256, 120, true); /* SimpleCNN's fc1, fc2, fc3 (linear_avx512.c) */
    check_linear(64, 1024, 300, false); /* past linear_avx512.c's 16 Mi: the GEMM */
    check_linear(64, 120, 84, false);
    check_linear(62, 84, 10, true);
    check_linear(37, 17, 130, true); /* tails everywhere, on the small kernels */
    check_linear(13, 84, 70, false);
}

int main(void)
{
    RUN(gemm_name_matches_build);
    RUN(gemm_native_all_transposes_and_sizes);
    RUN(gemm_dispatch_all_transposes_and_sizes);
    RUN(gemm_alpha_beta_and_leading_dimensions);
    RUN(gemm_empty_depth);
    RUN(gemm_native_same_bits_for_any_thread_count);
    RUN(conv_matches_reference);
    RUN(conv_bias_on_the_other_cases);
    RUN(conv_pointwise_needs_no_workspace);
    RUN(conv_same_bits_run_to_run);
    RUN(channel_sum_matches_reference);
    RUN(linear_matches_reference);
    return harness_finish();
}
