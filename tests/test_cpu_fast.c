/*
 * The AVX2 kernels (src/cpu/<family>_avx2.c) against the portable kernels
 * and against naive double-precision loops written here: the direct
 * convolution (forward, backward data, backward weight) on random shapes
 * with odd sizes, and max pooling 2x2 backward with ties and NaNs.  Each
 * case runs on its fast path and on im2col + GEMM, each called by name.
 * Tolerance: 1e-5 relative to the reference's largest magnitude (fp32 sums
 * of up to 400 products in a different order than the double reference).
 * On a CPU without AVX2 the fast cases say so and pass on the portable path.
 * Also the fused relu (conv and linear kernels, and the plan-time fusion of
 * src/graph/fuse.c): the same bits as an unfused relu.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "cpu/conv_channels.h"
#include "cpu/conv_direct.h"
#include "cpu/conv_flat.h"
#include "cpu/conv_pooled.h"
#include "cpu/conv_winograd.h"
#include "cpu/kernels.h"
#include "cpu/linear_small.h"
#include "cpu/simd.h"
#include "cpu/threads.h"
#include "graph/backend.h"
#include "graph/impl.h"
#include "graph/plan_impl.h"
#include "harness.h"

static const double TOLERANCE = 1e-5;

static float *random_floats(int64_t count, uint64_t seed)
{
    float *data = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    harness_fill(data, count, seed, -1.0f, 1.0f);
    return data;
}

static float *nan_floats(int64_t count)
{
    float *data = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    for (int64_t i = 0; i < count; i++)
        data[i] = NAN;
    return data;
}

/* ---- direct convolution ------------------------------------------------ */

typedef struct fast_conv_case {
    int n, c, h, w, o, kh, kw, ph, pw;
} fast_conv_case;

static const fast_conv_case FAST_CONV_CASES[] = {
    /* n  c   h   w   o kh kw ph pw */
    {64, 1, 28, 28, 6, 5, 5, 0, 0},   /* SimpleCNN conv1 */
    {64, 6, 12, 12, 16, 5, 5, 0, 0},  /* SimpleCNN conv2 */
    {3, 3, 32, 32, 16, 3, 3, 1, 1},   /* CIFAR stem */
    {5, 2, 9, 13, 7, 3, 3, 1, 1},     /* odd sizes: 13 wide = 8 + 5 lanes */
    {1, 5, 11, 7, 3, 3, 5, 2, 1},     /* batch 1, non-square kernel, uneven pads */
    {9, 4, 6, 10, 10, 2, 4, 0, 3},    /* even kernel, 10 channels = 3+3+4 */
    {2, 1, 40, 37, 1, 5, 3, 2, 0},    /* one channel each way, wide rows */
    {3, 16, 8, 8, 5, 5, 5, 2, 2},     /* depth 400: the largest direct depth */
    {4, 2, 7, 13, 5, 3, 5, 0, 0},     /* no padding (images read in place), 9 = 8 + 1 lanes */
    {10, 3, 9, 11, 32, 3, 3, 1, 1},   /* padded, 32 channels: two vectors of them, 8 + 2 images */
    {3, 2, 17, 18, 7, 2, 3, 0, 0},    /* 16x16 outputs: two rows pooled from 2 vectors */
    {2, 3, 15, 18, 9, 3, 3, 1, 0},    /* 15x16 outputs, padded rows: 2 + 2 + 2 + 1 pairs of rows
                                       * a block, the odd row not pooled */
    {1, 2, 14, 10, 5, 3, 3, 0, 0},    /* 12x8 outputs: rows of 8, pooled from the stored plane */
};
enum { N_FAST_CONV_CASES = sizeof(FAST_CONV_CASES) / sizeof(FAST_CONV_CASES[0]) };

static ct_conv2d_shape fast_conv_shape(const fast_conv_case *c)
{
    ct_conv2d_shape s = {c->n, c->c, c->h, c->w, c->o, c->h + 2 * c->ph - c->kh + 1,
                         c->w + 2 * c->pw - c->kw + 1, c->kh, c->kw, 1, 1, c->ph, c->pw,
                         1, 1, 1};
    return s;
}

/* The CPU's three convolution paths, called by name (the CPU's op table,
 * cpu/table.c, is what prefers one for a shape; here each runs the cases
 * it is for).  Without AVX2 kernels in the build every path is im2col. */
typedef enum conv_path { PATH_IM2COL, PATH_DIRECT, PATH_WINOGRAD } conv_path;
static const char *const PATH_NAMES[] = {"im2col", "direct", "winograd"};

static void conv_forward_on(conv_path path, const ct_conv2d_shape *s, const float *x,
                            const float *w, const float *bias, bool relu, float *y,
                            void *workspace)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (path == PATH_DIRECT && ct_cpu_simd_avx2()) {
        ct_cpu_conv2d_direct_forward(s, x, w, bias, relu, y, workspace);
        return;
    }
    if (path == PATH_WINOGRAD && ct_cpu_simd_avx2()) {
        ct_cpu_conv2d_winograd_forward(s, x, w, bias, relu, y, workspace);
        return;
    }
#endif
    (void)path;
    (relu ? ct_cpu_conv2d_forward_relu : ct_cpu_conv2d_forward)(s, x, w, bias, y, workspace);
}

static void conv_backward_on(conv_path path, const ct_conv2d_shape *s, const float *x,
                             const float *w, const float *dy, float *dx, float *dw,
                             void *workspace)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (path == PATH_DIRECT && ct_cpu_simd_avx2()) {
        ct_cpu_conv2d_direct_backward_data(s, dy, w, dx, workspace);
        ct_cpu_conv2d_direct_backward_weight(s, x, dy, dw, NULL, workspace);
        return;
    }
    if (path == PATH_WINOGRAD && ct_cpu_simd_avx2()) {
        ct_cpu_conv2d_winograd_backward_data(s, dy, w, dx, workspace);
        ct_cpu_conv2d_winograd_backward_weight(s, x, dy, dw, workspace);
        return;
    }
#endif
    (void)path;
    ct_cpu_conv2d_backward_data(s, dy, w, dx, workspace);
    ct_cpu_conv2d_backward_weight(s, x, dy, dw, workspace);
}

/* The double references: y = conv(x, w) + bias, dx, dw by the chain rule. */
static void reference_conv(const ct_conv2d_shape *s, const float *x, const float *w,
                           const float *bias, const float *dy, double *y, double *dx, double *dw)
{
    int64_t nx = (int64_t)s->n_batch * s->in_channels * s->in_h * s->in_w;
    int64_t nw = (int64_t)s->out_channels * s->in_channels * s->kernel_h * s->kernel_w;
    memset(dx, 0, sizeof(double) * (size_t)nx);
    memset(dw, 0, sizeof(double) * (size_t)nw);
    for (int n = 0; n < s->n_batch; n++)
        for (int o = 0; o < s->out_channels; o++)
            for (int oh = 0; oh < s->out_h; oh++)
                for (int ow = 0; ow < s->out_w; ow++) {
                    int64_t yi = (((int64_t)n * s->out_channels + o) * s->out_h + oh) * s->out_w + ow;
                    double sum = bias[o];
                    for (int c = 0; c < s->in_channels; c++)
                        for (int i = 0; i < s->kernel_h; i++)
                            for (int j = 0; j < s->kernel_w; j++) {
                                int ih = oh - s->pad_h + i, iw = ow - s->pad_w + j;
                                if (ih < 0 || ih >= s->in_h || iw < 0 || iw >= s->in_w)
                                    continue;
                                int64_t xi = (((int64_t)n * s->in_channels + c) * s->in_h + ih) *
                                                 s->in_w + iw;
                                int64_t wi = (((int64_t)o * s->in_channels + c) * s->kernel_h + i) *
                                                 s->kernel_w + j;
                                sum += (double)x[xi] * w[wi];
                                dx[xi] += (double)dy[yi] * w[wi];
                                dw[wi] += (double)dy[yi] * x[xi];
                            }
                    y[yi] = sum;
                }
}

/* One case on one path: errors of y, dx, dw against the reference. */
static void check_conv_case(const fast_conv_case *c, int index, conv_path path,
                            double tolerance)
{
    ct_conv2d_shape s = fast_conv_shape(c);
    int64_t nx = (int64_t)s.n_batch * s.in_channels * s.in_h * s.in_w;
    int64_t ny = (int64_t)s.n_batch * s.out_channels * s.out_h * s.out_w;
    int64_t nw = (int64_t)s.out_channels * s.in_channels * s.kernel_h * s.kernel_w;
    float *x = random_floats(nx, 100 + index), *w = random_floats(nw, 200 + index);
    float *bias = random_floats(s.out_channels, 300 + index), *dy = random_floats(ny, 400 + index);
    float *y = nan_floats(ny), *dx = nan_floats(nx), *dw = nan_floats(nw);
    double *ref_y = malloc(sizeof(double) * (size_t)ny), *ref_dx = malloc(sizeof(double) * (size_t)nx);
    double *ref_dw = malloc(sizeof(double) * (size_t)nw);
    size_t bytes = ct_cpu_conv2d_workspace(&s, ct_cpu_max_threads());
    float *workspace = nan_floats((int64_t)(bytes / sizeof(float)));
    reference_conv(&s, x, w, bias, dy, ref_y, ref_dx, ref_dw);
    conv_forward_on(path, &s, x, w, bias, false, y, workspace);
    conv_backward_on(path, &s, x, w, dy, dx, dw, workspace);
    const char *path_name = PATH_NAMES[path];
    double err = harness_rel_err_f64(y, ref_y, ny);
    CHECK(err <= tolerance, "case %d %s forward: rel err %g", index, path_name, err);
    if (getenv("CT_TEST_VERBOSE"))
        fprintf(stderr, "  case %d %s: forward %.2g", index, path_name, err);
    err = harness_rel_err_f64(dx, ref_dx, nx);
    CHECK(err <= tolerance, "case %d %s backward data: rel err %g", index, path_name, err);
    if (getenv("CT_TEST_VERBOSE"))
        fprintf(stderr, ", data %.2g", err);
    err = harness_rel_err_f64(dw, ref_dw, nw);
    CHECK(err <= tolerance, "case %d %s backward weight: rel err %g", index, path_name, err);
    if (getenv("CT_TEST_VERBOSE"))
        fprintf(stderr, ", weight %.2g\n", err);
    free(x); free(w); free(bias); free(dy); free(y); free(dx); free(dw);
    free(ref_y); free(ref_dx); free(ref_dw); free(workspace);
}

static void direct_conv_takes_the_cases(void)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    for (int i = 0; i < N_FAST_CONV_CASES; i++) {
        ct_conv2d_shape s = fast_conv_shape(&FAST_CONV_CASES[i]);
        CHECK(ct_cpu_conv2d_direct_fits(&s), "case %d should take the direct kernels", i);
        /* where AVX-512 is, its 16-float forward and weight gradient
         * (conv_flat.c), which direct_conv_matches_reference then checks */
        CHECK(ct_cpu_conv2d_flat_fits(&s) == ct_cpu_simd_avx512(),
              "case %d: the 16-float kernels should run it exactly where AVX-512 is", i);
    }
    /* the weight gradient on vectors of 16 channels: SimpleCNN's conv2 and
     * the padded 32-channel case (9); not conv1's 6 channels */
    ct_conv2d_shape conv1 = fast_conv_shape(&FAST_CONV_CASES[0]);
    ct_conv2d_shape conv2 = fast_conv_shape(&FAST_CONV_CASES[1]);
    ct_conv2d_shape padded = fast_conv_shape(&FAST_CONV_CASES[9]);
    CHECK(ct_cpu_conv2d_channels_fits(&conv2) == ct_cpu_simd_avx512() &&
              ct_cpu_conv2d_channels_fits(&padded) == ct_cpu_simd_avx512() &&
              !ct_cpu_conv2d_channels_fits(&conv1),
          "SimpleCNN's conv2 and the 32-channel case, not conv1, should take the channel-vector "
          "weight gradient");
    ct_conv2d_shape strided = fast_conv_shape(&FAST_CONV_CASES[2]);
    strided.stride_h = 2;
    CHECK(!ct_cpu_conv2d_direct_fits(&strided), "stride 2 must stay on im2col + GEMM");
#endif
    if (!ct_cpu_simd_avx2())
        fprintf(stderr, "  note: this CPU (or CT_CPU_SIMD=0) runs only the portable kernels\n");
}

static void direct_conv_matches_reference(void)
{
    for (int i = 0; i < N_FAST_CONV_CASES; i++) {
        check_conv_case(&FAST_CONV_CASES[i], i, PATH_DIRECT, TOLERANCE);
        check_conv_case(&FAST_CONV_CASES[i], i, PATH_IM2COL, TOLERANCE);
    }
}

/* 1, 2 and 3 threads give the same bits (the direct kernels cut the batch
 * into fixed chunks; Winograd gives each GEMM and transform to one thread). */
static void conv_same_bits_for_any_thread_count(const fast_conv_case *c, conv_path path)
{
    if (!ct_cpu_simd_avx2()) { /* im2col's GEMM (OpenBLAS) sums differently per thread count */
        fprintf(stderr, "  note: no AVX2 kernels here (or CT_CPU_SIMD=0): nothing to check\n");
        return;
    }
    ct_conv2d_shape s = fast_conv_shape(c);
    int64_t nx = (int64_t)s.n_batch * s.in_channels * s.in_h * s.in_w;
    int64_t ny = (int64_t)s.n_batch * s.out_channels * s.out_h * s.out_w;
    int64_t nw = (int64_t)s.out_channels * s.in_channels * s.kernel_h * s.kernel_w;
    float *x = random_floats(nx, 7), *w = random_floats(nw, 8), *dy = random_floats(ny, 9);
    float *out[3][3];
    int saved = ct_cpu_max_threads();
    for (int run = 0; run < 3; run++) {
        ct_cpu_set_threads(run + 1);
        void *workspace = malloc(ct_cpu_conv2d_workspace(&s, run + 1));
        out[run][0] = nan_floats(ny);
        out[run][1] = nan_floats(nx);
        out[run][2] = nan_floats(nw);
        conv_forward_on(path, &s, x, w, NULL, false, out[run][0], workspace);
        conv_backward_on(path, &s, x, w, dy, out[run][1], out[run][2], workspace);
        free(workspace);
    }
    ct_cpu_set_threads(saved);
    const int64_t counts[3] = {ny, nx, nw};
    for (int k = 0; k < 3; k++) {
        for (int run = 1; run < 3; run++)
            CHECK(memcmp(out[0][k], out[run][k], sizeof(float) * (size_t)counts[k]) == 0,
                  "output %d: %d threads differ from 1", k, run + 1);
        for (int run = 0; run < 3; run++)
            free(out[run][k]);
    }
    free(x); free(w); free(dy);
}

static void direct_conv_same_bits_for_any_thread_count(void)
{
    conv_same_bits_for_any_thread_count(&FAST_CONV_CASES[3], PATH_DIRECT);
}

/* The direct kernels without AVX-512 (the AVX2 register blocks, the
 * backward data as a forward over the flipped kernel) against the
 * reference, on a CPU that has it. */
static void direct_conv_avx2_only_matches_reference(void)
{
    if (!ct_cpu_simd_avx512())
        fprintf(stderr, "  note: no AVX-512 here: direct_conv_matches_reference ran these\n");
    ct_cpu_simd_set_avx512(false);
    for (int i = 0; i < N_FAST_CONV_CASES; i++)
        check_conv_case(&FAST_CONV_CASES[i], i, PATH_DIRECT, TOLERANCE);
    ct_cpu_simd_set_avx512(true);
}

#ifdef CT_CPU_HAVE_AVX2_KERNELS
/* a[k] and b[k] NaN together, and |a - b| <= tolerance * max |a| elsewhere
 * (the measure the reference checks use). */
static bool same_within(const float *a, const float *b, int64_t count, double tolerance)
{
    double largest = 0.0, worst = 0.0;
    for (int64_t k = 0; k < count; k++) {
        if (isnan(a[k]) || isnan(b[k])) {
            if (!(isnan(a[k]) && isnan(b[k])))
                return false;
            continue;
        }
        largest = fabs(a[k]) > largest ? fabs(a[k]) : largest;
        worst = fabs((double)a[k] - b[k]) > worst ? fabs((double)a[k] - b[k]) : worst;
    }
    return worst <= tolerance * largest;
}

/* The forward (with relu and bias), the forward with relu and 2x2 max pool,
 * and the weight and bias gradients of one case, with AVX-512's blocks
 * allowed or not. */
static void direct_conv_outputs(const ct_conv2d_shape *s, bool avx512, const float *x,
                                const float *w, const float *bias, const float *dy, float *y,
                                float *pooled, float *dw, float *db)
{
    void *workspace = malloc(ct_cpu_conv2d_workspace(s, ct_cpu_max_threads()));
    ct_cpu_simd_set_avx512(avx512);
    ct_cpu_conv2d_direct_forward(s, x, w, bias, true, y, workspace);
    if (s->out_h >= 2 && s->out_w >= 2)
        ct_cpu_conv2d_direct_forward_relu_maxpool(s, x, w, bias, NULL, false, pooled, workspace);
    ct_cpu_conv2d_direct_backward_weight(s, x, dy, dw, db, workspace);
    ct_cpu_simd_set_avx512(true);
    free(workspace);
}
#endif

/* AVX-512's kernels against AVX2's: the 32-register blocks (forward: up to
 * 8 channels x 3 vectors or 6 x 4; weight gradient: 5 kernel columns) and
 * the 16-float forward (conv_flat.c) add the same products in the same
 * order as AVX2's: the same bits, NaN included.  The 16-float weight
 * gradient keeps 16 partial sums a weight instead of 8: close, not equal. */
static void direct_conv_wide_blocks_same_bits(void)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (!ct_cpu_simd_avx512()) {
        fprintf(stderr, "  note: no AVX-512 here: only the AVX2 blocks run\n");
        return;
    }
    for (int index = 0; index < N_FAST_CONV_CASES; index++) {
        ct_conv2d_shape s = fast_conv_shape(&FAST_CONV_CASES[index]);
        int64_t nx = (int64_t)s.n_batch * s.in_channels * s.in_h * s.in_w;
        int64_t ny = (int64_t)s.n_batch * s.out_channels * s.out_h * s.out_w;
        int64_t nw = (int64_t)s.out_channels * s.in_channels * s.kernel_h * s.kernel_w;
        int64_t np = (int64_t)s.n_batch * s.out_channels * (s.out_h / 2) * (s.out_w / 2);
        int64_t counts[4] = {ny, np, nw, s.out_channels};
        float *x = random_floats(nx, 900 + index), *w = random_floats(nw, 910 + index);
        float *bias = random_floats(s.out_channels, 920 + index);
        float *dy = random_floats(ny, 930 + index);
        x[nx / 3] = NAN;
        float *out[2][4];
        for (int run = 0; run < 2; run++) {
            for (int k = 0; k < 4; k++)
                out[run][k] = nan_floats(counts[k]);
            direct_conv_outputs(&s, run == 0, x, w, bias, dy, out[run][0], out[run][1],
                                out[run][2], out[run][3]);
        }
        static const char *const names[4] = {"forward", "forward+pool", "dw", "db"};
        for (int k = 0; k < 4; k++) {
            if (k == 2 && ct_cpu_conv2d_flat_fits(&s)) {
                /* 16-lane sums (conv_flat.c) or whole ones on vectors of
                 * channels (conv_channels.c): close, NaN where AVX2's is */
                CHECK(same_within(out[0][k], out[1][k], counts[k], TOLERANCE),
                      "case %d: dw on 16-float vectors is not AVX2's within %g", index,
                      TOLERANCE);
            } else {
                CHECK(memcmp(out[0][k], out[1][k], sizeof(float) * (size_t)counts[k]) == 0,
                      "case %d: %s with AVX-512's blocks differs from AVX2's", index, names[k]);
            }
            free(out[0][k]);
            free(out[1][k]);
        }
        free(x); free(w); free(bias); free(dy);
    }
#endif
}

/* ---- small linear layers (linear_avx512.c) --------------------------------- */

/* SimpleCNN's layers take the AVX-512 kernels where the CPU has them, and
 * 1, 2 and 3 threads give the same bits (each output is one thread's). */
/* A whole 4 x 4 block of the small forward adds its 16 sums in one tree
 * (linear_avx512.c's store_block): the same bits as a row that falls in a
 * partial block, summed one output at a time, NaN and relu's zeros
 * included: every row again alone (n = 1: 1 x 4 blocks) must match. */
static void linear_small_blocks_same_bits(void)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (!ct_cpu_simd_avx512()) {
        fprintf(stderr, "  note: no AVX-512 here: linear layers run on the GEMM\n");
        return;
    }
    enum { N = 9, IN = 40, OUT = 12 };
    float *x = random_floats((int64_t)N * IN, 60), *w = random_floats((int64_t)OUT * IN, 61);
    float *bias = random_floats(OUT, 62);
    x[3 * IN + 5] = NAN;
    float *all = nan_floats((int64_t)N * OUT), *one = nan_floats(OUT);
    ct_cpu_linear_small_forward(N, IN, OUT, x, w, bias, true, all);
    int zeros = 0;
    for (int n = 0; n < N; n++) {
        ct_cpu_linear_small_forward(1, IN, OUT, x + (size_t)n * IN, w, bias, true, one);
        CHECK(memcmp(one, all + (size_t)n * OUT, sizeof(float) * OUT) == 0,
              "row %d of a 4 x 4 block differs from the same row alone", n);
        for (int o = 0; o < OUT; o++)
            zeros += all[n * OUT + o] == 0.0f;
    }
    CHECK(zeros > 0 && isnan(all[3 * OUT]), "the case should have relu zeros and a NaN row");
    free(x); free(w); free(bias); free(all); free(one);
#endif
}

static void linear_small_same_bits_for_any_thread_count(void)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (!ct_cpu_simd_avx512()) {
        fprintf(stderr, "  note: no AVX-512 here: linear layers run on the GEMM\n");
        return;
    }
    CHECK(ct_cpu_linear_small_fits(64, 256, 120), "fc1 should take the small kernels");
    CHECK(!ct_cpu_linear_small_fits(256, 4096, 4096), "a 4096-wide layer stays on the GEMM");
    CHECK(ct_cpu_linear_small_fits(13, 84, 70) && ct_cpu_linear_small_fits(37, 17, 130),
          "the odd shapes below should take the small kernels");
    CHECK(ct_cpu_linear_small_fits(64, 84, 10) && ct_cpu_linear_small_fits(1, 84, 10) &&
              !ct_cpu_linear_small_fits(0, 84, 10),
          "fc3 should take the small kernels (on one thread) at batch 64 and 1, none at 0");
#endif
    /* fc1; then odd rows, a 4-lane k tail and 2 of 4 outputs; 37 x 17 x 130;
     * fc3, below the parallel regions, at batch 64 and 1 */
    static const int shapes[][3] = {{64, 256, 120}, {13, 84, 70}, {37, 17, 130}, {64, 84, 10},
                                    {1, 84, 10}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int n = shapes[si][0], in = shapes[si][1], out = shapes[si][2];
        float *x = random_floats((int64_t)n * in, 40 + si);
        float *w = random_floats((int64_t)out * in, 41);
        float *dy = random_floats((int64_t)n * out, 42), *bias = random_floats(out, 43);
        float *got[3][3];
        int saved = ct_cpu_max_threads();
        for (int run = 0; run < 3; run++) {
            ct_cpu_set_threads(run + 1);
            got[run][0] = nan_floats((int64_t)n * out);
            got[run][1] = nan_floats((int64_t)n * in);
            got[run][2] = nan_floats((int64_t)out * in);
            ct_cpu_linear_forward_relu(n, in, out, x, w, bias, got[run][0]);
            ct_cpu_linear_backward_data(n, in, out, dy, w, NULL, got[run][1]);
            ct_cpu_linear_backward_weight(n, in, out, x, dy, got[run][2]);
        }
        ct_cpu_set_threads(saved);
        const int64_t counts[3] = {(int64_t)n * out, (int64_t)n * in, (int64_t)out * in};
        for (int k = 0; k < 3; k++) {
            for (int run = 1; run < 3; run++)
                CHECK(memcmp(got[0][k], got[run][k], sizeof(float) * (size_t)counts[k]) == 0,
                      "linear %dx%dx%d output %d: %d threads differ from 1", n, in, out, k,
                      run + 1);
            for (int run = 0; run < 3; run++)
                free(got[run][k]);
        }
        free(x); free(w); free(dy); free(bias);
    }
}

/* ---- Winograd convolution ------------------------------------------------- */

static const fast_conv_case WINOGRAD_CASES[] = {
    /* n   c   h   w    o kh kw ph pw   (at least 16 tiles over the batch) */
    {8, 64, 8, 8, 64, 3, 3, 1, 1},     /* a ResNet layer: 2x2 tiles */
    {6, 50, 7, 9, 37, 3, 3, 1, 1},     /* partial tiles; K*C = 1850, not a multiple of 8 */
    {6, 64, 13, 10, 20, 3, 3, 0, 0},   /* no padding: 11x8 outputs */
    {8, 48, 6, 6, 48, 3, 3, 2, 2},     /* pad 2 (backward data pads by 0) */
    {5, 16, 12, 12, 130, 3, 3, 1, 2},  /* uneven pads, 16 input channels */
    {32, 512, 4, 4, 64, 3, 3, 1, 1},   /* deep: 4608 products per output */
    {12, 96, 20, 20, 96, 3, 3, 1, 1},  /* 300 tiles: two blocks, the last one partial */
};
enum { N_WINOGRAD_CASES = sizeof(WINOGRAD_CASES) / sizeof(WINOGRAD_CASES[0]) };

/* F(4x4, 3x3) computes the same sums in a transformed basis whose
 * coefficients (1/24, 8, ...) amplify rounding: measured errors are up to
 * about 1e-5 of the largest output on these cases (docs/perf.md). */
static const double WINOGRAD_TOLERANCE = 5e-5;

static void winograd_takes_the_cases(void)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    for (int i = 0; i < N_WINOGRAD_CASES; i++) {
        ct_conv2d_shape s = fast_conv_shape(&WINOGRAD_CASES[i]);
        CHECK(ct_cpu_conv2d_winograd_fits(&s) && !ct_cpu_conv2d_direct_fits(&s),
              "case %d should take the Winograd kernels", i);
    }
    ct_conv2d_shape s = fast_conv_shape(&WINOGRAD_CASES[0]);
    ct_conv2d_shape strided = s, dilated = s, grouped = s, five = s, tiny = s, thin = s, few = s;
    strided.stride_h = 2, strided.out_h = 4;
    dilated.dilation_w = 2, dilated.out_w = 6;
    grouped.groups = 2;
    five.kernel_h = five.kernel_w = 5, five.out_h = five.out_w = 6;
    tiny.in_h = tiny.in_w = tiny.out_h = tiny.out_w = 2; /* 2x2 planes: no gain */
    thin.in_channels = 8;
    few.n_batch = 3; /* 12 tiles: thin GEMMs that stream U (ResNet's 7x7 layers at batch 1) */
    const ct_conv2d_shape *refused[] = {&strided, &dilated, &grouped, &five, &tiny, &thin, &few};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        CHECK(!ct_cpu_conv2d_winograd_fits(refused[i]), "shape %zu must not take Winograd", i);
#endif
}

static void winograd_matches_reference(void)
{
    for (int i = 0; i < N_WINOGRAD_CASES; i++) {
        check_conv_case(&WINOGRAD_CASES[i], i, PATH_WINOGRAD, WINOGRAD_TOLERANCE);
        check_conv_case(&WINOGRAD_CASES[i], i, PATH_IM2COL, TOLERANCE);
    }
}

static void winograd_same_bits_for_any_thread_count(void)
{
    conv_same_bits_for_any_thread_count(&WINOGRAD_CASES[1], PATH_WINOGRAD);
    conv_same_bits_for_any_thread_count(&WINOGRAD_CASES[6], PATH_WINOGRAD);
}

/* ---- average pooling 2x2 ------------------------------------------------------ */

/* The 2x2/2 path of avgpool equals the general rule, bit for bit: the
 * window's sum in double over the rows then columns, divided by 4; each
 * covered input gets dy/4, an uncovered last row or column 0. */
static void avgpool_2x2_same_bits(void)
{
    static const int sizes[][3] = {{3, 28, 28}, {2, 9, 13}, {4, 10, 7}, {1, 2, 2}};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int planes = sizes[si][0], h = sizes[si][1], w = sizes[si][2], oh = h / 2, ow = w / 2;
        ct_pool2d_shape s = {1, planes, h, w, oh, ow, 2, 2, 2, 2, 0, 0, false};
        int64_t nx = (int64_t)planes * h * w, ny = (int64_t)planes * oh * ow;
        float *x = random_floats(nx, 80 + si), *dy = random_floats(ny, 90 + si);
        float *y = nan_floats(ny), *dx = nan_floats(nx);
        float *want_y = malloc(sizeof(float) * (size_t)ny), *want_dx = calloc((size_t)nx, sizeof(float));
        for (int p = 0; p < planes; p++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    const float *xp = x + (int64_t)p * h * w;
                    double sum = 0;
                    for (int a = 0; a < 2; a++)
                        for (int b = 0; b < 2; b++)
                            sum += xp[(2 * i + a) * w + 2 * j + b];
                    want_y[((int64_t)p * oh + i) * ow + j] = (float)(sum / 4);
                    float share = dy[((int64_t)p * oh + i) * ow + j] / 4.0f;
                    for (int a = 0; a < 2; a++)
                        for (int b = 0; b < 2; b++)
                            want_dx[(int64_t)p * h * w + (2 * i + a) * w + 2 * j + b] = share;
                }
        ct_cpu_avgpool2d_forward(&s, x, y);
        ct_cpu_avgpool2d_backward(&s, dy, dx);
        CHECK(memcmp(y, want_y, sizeof(float) * (size_t)ny) == 0,
              "avgpool 2x2 forward %dx%dx%d differs", planes, h, w);
        CHECK(memcmp(dx, want_dx, sizeof(float) * (size_t)nx) == 0,
              "avgpool 2x2 backward %dx%dx%d differs", planes, h, w);
        free(x); free(dy); free(y); free(dx); free(want_y); free(want_dx);
    }
}

/* ---- tanh ------------------------------------------------------------------- */

/* The vector tanh against libm's tanhf: within 2 ulp (3e-7 relative) on a
 * sweep from 1e-30 to 20 of both signs (odd counts: the scalar tail too),
 * and exactly on NaN, infinities, zeros of both signs and large values. */
static void tanh_vector_matches_libm(void)
{
    enum { N = 200003 };
    float *x = malloc(sizeof(float) * N), *fast = malloc(sizeof(float) * N);
    float *portable = malloc(sizeof(float) * N);
    const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e30f, -1e30f, 1e-40f,
                             -1e-40f};
    enum { N_SPECIAL = sizeof special / sizeof special[0] };
    for (int i = 0; i < N; i++) {
        double t = (double)i / N; /* magnitudes 1e-30 ... 20, log-spaced, alternating sign */
        float v = (float)(1e-30 * pow(2e31, t));
        x[i] = i < N_SPECIAL ? special[i] : (i % 2 ? -v : v);
    }
    ct_cpu_tanh_forward(N, x, fast);
    ct_cpu_simd_set(false);
    ct_cpu_tanh_forward(N, x, portable);
    ct_cpu_simd_set(true);
    double worst = 0;
    int wrong_special = 0;
    for (int i = 0; i < N; i++) {
        if (i < N_SPECIAL) {
            bool same = isnan(portable[i]) ? isnan(fast[i])
                                           : fast[i] == portable[i] &&
                                                 signbit(fast[i]) == signbit(portable[i]);
            if (!same)
                fprintf(stderr, "  tanh(%g): %.9g, tanhf %.9g\n", x[i], fast[i], portable[i]);
            wrong_special += !same;
            continue;
        }
        double ref = portable[i], err = fabs((double)fast[i] - ref) / fmax(fabs(ref), 1e-38);
        worst = err > worst ? err : worst;
    }
    CHECK(wrong_special == 0, "%d special values differ from tanhf", wrong_special);
    CHECK(worst <= 3e-7, "vector tanh: relative error %g against tanhf", worst);
    free(x); free(fast); free(portable);
}

/* ---- max pooling 2x2 backward --------------------------------------------- */

/* The forward's argmax codes (kernels.h) of planes x h x w inputs x:
 * the same codes and pool (want: the pool's forward) on AVX-512, AVX2 and
 * the portable loop, and made in place over x; and where the relu's
 * backward through the pool puts each window's gradient. */
static void pool_codes_agree(int planes, int h, int w, const float *x, const float *dy,
                             const float *want)
{
    int out_h = h / 2, out_w = w / 2;
    int64_t nx = (int64_t)planes * h * w, ny = (int64_t)planes * out_h * out_w;
    uint8_t *codes[3];
    for (int path = 0; path < 3; path++) { /* AVX-512, AVX2, portable */
        float *pooled = nan_floats(ny), *in_place = malloc(sizeof(float) * (size_t)nx);
        codes[path] = malloc((size_t)ny);
        ct_cpu_simd_set(path < 2);
        ct_cpu_simd_set_avx512(path == 0);
        ct_cpu_maxpool2x2_planes_codes(planes, h, w, x, pooled, codes[path]);
        CHECK(memcmp(pooled, want, sizeof(float) * (size_t)ny) == 0 &&
                  memcmp(codes[path], codes[0], (size_t)ny) == 0,
              "maxpool codes %dx%dx%d (path %d): another pool or other codes", planes, h, w, path);
        memcpy(in_place, x, sizeof(float) * (size_t)nx);
        ct_cpu_maxpool2x2_planes_codes(planes, h, w, in_place, pooled, (uint8_t *)in_place);
        CHECK(memcmp(pooled, want, sizeof(float) * (size_t)ny) == 0 &&
                  memcmp(in_place, codes[0], (size_t)ny) == 0,
              "maxpool codes %dx%dx%d (path %d): made in place over x, they differ", planes, h, w,
              path);
        free(pooled); free(in_place);
    }
    ct_cpu_simd_set(true);
    ct_cpu_simd_set_avx512(true);
    ct_pool2d_shape s = {1, planes, h, w, out_h, out_w, 2, 2, 2, 2, 0, 0, false};
    float *dx = nan_floats(nx);
    ct_cpu_maxpool2d_backward(&s, x, dy, true, dx);
    int wrong = 0;
    for (int64_t k = 0; k < ny; k++) {
        int64_t plane = k / ((int64_t)out_h * out_w), at = k % ((int64_t)out_h * out_w);
        int oh = (int)(at / out_w), ow = (int)(at % out_w), code = codes[0][k];
        int64_t where = plane * h * w + (int64_t)(2 * oh + (code & CT_POOL_CODE_DOWN ? 1 : 0)) * w +
                        2 * ow + (code & CT_POOL_CODE_RIGHT);
        float g = code & CT_POOL_CODE_PASS ? dy[k] : 0.0f;
        wrong += memcmp(&dx[where], &g, sizeof g) != 0;
    }
    CHECK(wrong == 0, "maxpool codes %dx%dx%d: %d windows' gradients are not where the codes say",
          planes, h, w, wrong);
    for (int path = 0; path < 3; path++)
        free(codes[path]);
    free(dx);
}

/* The vector and scalar argmax agree bit for bit, ties and NaNs included,
 * on odd sizes (a last row and column that no window covers). */
static void maxpool_2x2_backward_same_bits(void)
{
    /* 35 = 16+16+3; 8x12x10: 48 rows of 5 windows as one plane, where codes
     * made in place reach inputs of rows before them; the forward takes rows
     * of 8 inputs 16 windows a vector across rows (and planes): 7x6x8 ends in
     * 4 windows, 3x9x8's planes (a row past the windows) go one by one */
    static const int sizes[][3] = {{3, 24, 24}, {5, 8, 8}, {2, 13, 17}, {4, 9, 30}, {1, 2, 2},
                                   {2, 6, 70},  {8, 12, 10}, {7, 6, 8}, {3, 9, 8}};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        int planes = sizes[si][0], h = sizes[si][1], w = sizes[si][2];
        ct_pool2d_shape s = {1, planes, h, w, h / 2, w / 2, 2, 2, 2, 2, 0, 0, false};
        int64_t nx = (int64_t)planes * h * w, ny = (int64_t)planes * (h / 2) * (w / 2);
        float *x = random_floats(nx, 60 + si), *dy = random_floats(ny, 70 + si);
        for (int64_t i = 0; i < nx; i += 7)
            x[i] = x[i + 1 < nx ? i + 1 : i]; /* ties */
        for (int64_t i = 5; i < nx; i += 23)
            x[i] = NAN;
        for (int relu = 0; relu < 2; relu++) {
            float *fast = nan_floats(nx), *portable = nan_floats(nx);
            ct_cpu_maxpool2d_backward(&s, x, dy, relu, fast);
            ct_cpu_simd_set(false);
            ct_cpu_maxpool2d_backward(&s, x, dy, relu, portable);
            ct_cpu_simd_set(true);
            CHECK(memcmp(fast, portable, sizeof(float) * (size_t)nx) == 0,
                  "maxpool backward %dx%dx%d (relu %d): vector and scalar differ", planes, h, w,
                  relu);
            free(fast); free(portable);
        }
        /* the forward the same way (AVX-512 from 8 windows a row on) */
        float *fast = nan_floats(ny), *portable = nan_floats(ny);
        ct_cpu_maxpool2d_forward(&s, x, fast);
        ct_cpu_simd_set(false);
        ct_cpu_maxpool2d_forward(&s, x, portable);
        ct_cpu_simd_set(true);
        CHECK(memcmp(fast, portable, sizeof(float) * (size_t)ny) == 0,
              "maxpool forward %dx%dx%d: vector and scalar differ", planes, h, w);
        pool_codes_agree(planes, h, w, x, dy, fast);
        free(x); free(dy); free(fast); free(portable);
    }
}

/* ---- a first layer's weight gradient through its relu and max pool ---------- */

/* conv_pooled.c against the unfused kernels (the pool's backward with its
 * relu, then im2col's weight gradient and a double bias sum), within 1e-5
 * of the largest; AVX2 and portable the same bits, and 1 or 3 threads.
 * The relu's output has ties (the first maximum takes the gradient) and
 * zeros (no gradient with the relu); sizes leave a row and a column past
 * the last window; 9 and 15 kernel rows are more than one group of 6. */
static void pooled_weight_matches_unfused(void)
{
    static const fast_conv_case cases[] = {
        /* n  c   h   w   o kh kw */
        {8, 1, 28, 28, 6, 5, 5, 0, 0},  /* SimpleCNN conv1 */
        {3, 3, 13, 12, 4, 3, 3, 0, 0},  /* 11x10 output: a row past the windows */
        {2, 3, 12, 17, 5, 5, 8, 0, 0},  /* 8 wide, 15 rows */
        {4, 2, 9, 9, 3, 2, 1, 0, 0},    /* 1 wide; 8x9: a column past them */
        /* on more than one thread (ct_cpu_conv2d_pooled_backward_weight's
         * work >= 64 K): the batch in 8 chunks, in 3 (as many as images),
         * and whole (the chunks' sums too many for its stack) */
        {64, 1, 28, 28, 6, 5, 5, 0, 0}, /* SimpleCNN conv1 at B64 */
        {3, 3, 32, 32, 8, 5, 5, 0, 0},
        {8, 4, 16, 16, 20, 5, 5, 0, 0},
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        ct_conv2d_shape s = fast_conv_shape(&cases[ci]);
        ct_pool2d_shape p = {s.n_batch, s.out_channels, s.out_h, s.out_w, s.out_h / 2,
                             s.out_w / 2, 2, 2, 2, 2, 0, 0, false};
        CHECK(ct_cpu_conv2d_pooled_weight_fits(&s, &p), "case %zu does not fit", ci);
        int64_t nx = (int64_t)s.n_batch * s.in_channels * s.in_h * s.in_w;
        int64_t ny = (int64_t)s.n_batch * s.out_channels * s.out_h * s.out_w;
        int64_t np = (int64_t)p.n_batch * p.channels * p.out_h * p.out_w;
        int64_t nw = (int64_t)s.out_channels * s.in_channels * s.kernel_h * s.kernel_w;
        float *x = random_floats(nx, 900 + ci), *y = random_floats(ny, 910 + ci);
        float *dy = random_floats(np, 920 + ci);
        for (int64_t i = 0; i < ny; i++)
            y[i] = y[i] < 0.0f ? 0.0f : y[i]; /* a relu's output */
        for (int64_t i = 0; i + 1 < ny; i += 5)
            y[i + 1] = y[i]; /* ties */
        for (int relu = 0; relu < 2; relu++) {
            float *dx = nan_floats(ny), *want = nan_floats(nw), *got = nan_floats(nw);
            float *db = nan_floats(s.out_channels);
            void *workspace = malloc(ct_cpu_conv2d_workspace(&s, ct_cpu_max_threads()));
            ct_cpu_maxpool2d_backward(&p, y, dy, relu, dx);
            ct_cpu_conv2d_backward_weight(&s, x, dx, want, workspace);
            ct_cpu_conv2d_pooled_backward_weight(&s, &p, x, y, NULL, dy, relu, got, db);
            double largest = 0.0, worst = 0.0, bias_worst = 0.0;
            for (int64_t i = 0; i < nw; i++) {
                largest = fmax(largest, fabs(want[i]));
                worst = fmax(worst, fabs((double)got[i] - want[i]));
            }
            int64_t plane = (int64_t)s.out_h * s.out_w;
            for (int o = 0; o < s.out_channels; o++) {
                double sum = 0.0;
                for (int n = 0; n < s.n_batch; n++)
                    for (int64_t k = 0; k < plane; k++)
                        sum += dx[((int64_t)n * s.out_channels + o) * plane + k];
                bias_worst = fmax(bias_worst, fabs(db[o] - sum));
            }
            CHECK(worst <= TOLERANCE * fmax(largest, 1.0) && bias_worst <= TOLERANCE * 100,
                  "case %zu (relu %d): weight off by %g (largest %g), bias by %g", ci, relu,
                  worst, largest, bias_worst);
            /* the same bits on the portable path and for any thread count */
            float *portable = nan_floats(nw), *threads = nan_floats(nw);
            float *db_portable = nan_floats(s.out_channels);
            ct_cpu_simd_set(false);
            ct_cpu_conv2d_pooled_backward_weight(&s, &p, x, y, NULL, dy, relu, portable,
                                                 db_portable);
            ct_cpu_simd_set(true);
            int saved = ct_cpu_max_threads();
            for (int t = 1; t <= 3; t += 2) {
                ct_cpu_set_threads(t);
                ct_cpu_conv2d_pooled_backward_weight(&s, &p, x, y, NULL, dy, relu, threads, NULL);
                CHECK(memcmp(got, threads, sizeof(float) * (size_t)nw) == 0,
                      "case %zu (relu %d): %d threads give other bits", ci, relu, t);
            }
            ct_cpu_set_threads(saved);
            CHECK(memcmp(got, portable, sizeof(float) * (size_t)nw) == 0 &&
                      memcmp(db, db_portable, sizeof(float) * (size_t)s.out_channels) == 0,
                  "case %zu (relu %d): vector and scalar differ", ci, relu);
            /* from the windows' argmax codes in y's place (the forward's
             * codes, made in place over a copy of y): the same bits, on
             * both paths */
            for (int fast = 1; fast >= 0; fast--) {
                float *codes_y = malloc(sizeof(float) * (size_t)ny), *pooled = nan_floats(np);
                float *from_codes = nan_floats(nw), *db_codes = nan_floats(s.out_channels);
                memcpy(codes_y, y, sizeof(float) * (size_t)ny);
                ct_cpu_simd_set(fast);
                ct_cpu_maxpool2x2_planes_codes(s.n_batch * s.out_channels, s.out_h, s.out_w,
                                               codes_y, pooled, (uint8_t *)codes_y);
                ct_cpu_conv2d_pooled_backward_weight(&s, &p, x, NULL, (const uint8_t *)codes_y, dy,
                                                     relu, from_codes, db_codes);
                ct_cpu_simd_set(true);
                CHECK(memcmp(got, from_codes, sizeof(float) * (size_t)nw) == 0 &&
                          memcmp(db, db_codes, sizeof(float) * (size_t)s.out_channels) == 0,
                      "case %zu (relu %d, %s): the codes give other bits than y", ci, relu,
                      fast ? "vector" : "portable");
                free(codes_y); free(pooled); free(from_codes); free(db_codes);
            }
            free(dx); free(want); free(got); free(db); free(workspace);
            free(portable); free(threads); free(db_portable);
        }
        free(x); free(y); free(dy);
    }
    /* what it does not take: padding, stride 2, a 3x3 pool */
    ct_conv2d_shape padded = fast_conv_shape(&FAST_CONV_CASES[2]);
    ct_pool2d_shape pool = {padded.n_batch, padded.out_channels, padded.out_h, padded.out_w,
                            padded.out_h / 2, padded.out_w / 2, 2, 2, 2, 2, 0, 0, false};
    CHECK(!ct_cpu_conv2d_pooled_weight_fits(&padded, &pool), "a padded convolution fits");
    ct_conv2d_shape plain = fast_conv_shape(&cases[0]);
    pool = (ct_pool2d_shape){plain.n_batch, plain.out_channels, plain.out_h, plain.out_w,
                             plain.out_h / 2, plain.out_w / 2, 2, 2, 2, 2, 0, 0, false};
    ct_pool2d_shape wide = pool;
    wide.kernel_h = wide.kernel_w = 3;
    CHECK(!ct_cpu_conv2d_pooled_weight_fits(&plain, &wide), "a 3x3 pool fits");
    plain.stride_h = plain.stride_w = 2;
    CHECK(!ct_cpu_conv2d_pooled_weight_fits(&plain, &pool), "a stride-2 convolution fits");
}

/* ---- fused relu ------------------------------------------------------------ */

/* conv+relu, conv+relu+maxpool and linear+relu kernels equal the unfused
 * kernels one after the other, bit for bit, NaN included, on both paths
 * (cases 3 and 4 have odd output sizes: the pool drops a row or column). */
static void fused_relu_kernels_same_bits(void)
{
    for (int fast = 0; fast < 2; fast++) {
        ct_cpu_simd_set(fast);
        for (int index = 0; index < N_FAST_CONV_CASES; index++) {
            ct_conv2d_shape s = fast_conv_shape(&FAST_CONV_CASES[index]);
            int64_t nx = (int64_t)s.n_batch * s.in_channels * s.in_h * s.in_w;
            int64_t ny = (int64_t)s.n_batch * s.out_channels * s.out_h * s.out_w;
            int64_t nw = (int64_t)s.out_channels * s.in_channels * s.kernel_h * s.kernel_w;
            float *x = random_floats(nx, 500 + index), *w = random_floats(nw, 600 + index);
            float *bias = random_floats(s.out_channels, 700);
            x[nx / 2] = NAN;
            float *y = nan_floats(ny), *y_fused = nan_floats(ny);
            void *workspace = malloc(ct_cpu_conv2d_workspace(&s, ct_cpu_max_threads()));
            conv_path path = fast ? PATH_DIRECT : PATH_IM2COL;
            conv_forward_on(path, &s, x, w, bias, false, y, workspace);
            ct_cpu_relu_forward(ny, y, y);
            conv_forward_on(path, &s, x, w, bias, true, y_fused, workspace);
            CHECK(memcmp(y, y_fused, sizeof(float) * (size_t)ny) == 0,
                  "conv case %d (%s): fused relu differs", index, PATH_NAMES[path]);
            /* ... and conv+relu+maxpool 2x2 equals maxpool of that */
            ct_pool2d_shape pool = {s.n_batch, s.out_channels, s.out_h, s.out_w, s.out_h / 2,
                                    s.out_w / 2, 2, 2, 2, 2, 0, 0, false};
            int64_t np = (int64_t)s.n_batch * s.out_channels * (s.out_h / 2) * (s.out_w / 2);
            float *pooled = nan_floats(np), *pooled_fused = nan_floats(np);
            ct_cpu_maxpool2d_forward(&pool, y, pooled);
#ifdef CT_CPU_HAVE_AVX2_KERNELS
            if (path == PATH_DIRECT && ct_cpu_simd_avx2()) {
                ct_cpu_conv2d_direct_forward_relu_maxpool(&s, x, w, bias, NULL, false,
                                                          pooled_fused, workspace);
                /* training's version: y written too, the same pool */
                float *y_kept = nan_floats(ny), *pooled_kept = nan_floats(np);
                ct_cpu_conv2d_direct_forward_relu_maxpool(&s, x, w, bias, y_kept, false,
                                                          pooled_kept, workspace);
                CHECK(memcmp(y, y_kept, sizeof(float) * (size_t)ny) == 0 &&
                          memcmp(pooled, pooled_kept, sizeof(float) * (size_t)np) == 0,
                      "conv case %d (direct): relu+maxpool keeping y differs", index);
                /* ... or the windows' argmax codes in y's place: those of
                 * the pool over y, the same pool */
                uint8_t *want_codes = malloc((size_t)np);
                float *pooled_again = nan_floats(np);
                ct_cpu_maxpool2x2_planes_codes(s.n_batch * s.out_channels, s.out_h, s.out_w, y,
                                               pooled_again, want_codes);
                for (int wide = 1; wide >= 0; wide--) { /* the 16-float kernel, AVX2's */
                    ct_cpu_simd_set_avx512(wide);
                    memset(y_kept, 0xff, sizeof(float) * (size_t)ny);
                    ct_cpu_conv2d_direct_forward_relu_maxpool(&s, x, w, bias, y_kept, true,
                                                              pooled_kept, workspace);
                    CHECK(memcmp(pooled, pooled_kept, sizeof(float) * (size_t)np) == 0 &&
                              memcmp(pooled, pooled_again, sizeof(float) * (size_t)np) == 0 &&
                              memcmp(want_codes, y_kept, (size_t)np) == 0,
                          "conv case %d (direct, %s): relu+maxpool with argmax codes differs",
                          index, wide ? "AVX-512" : "AVX2");
                }
                ct_cpu_simd_set_avx512(true);
                free(y_kept); free(pooled_kept); free(want_codes); free(pooled_again);
            } else
#endif
                ct_cpu_conv2d_forward_relu_maxpool(&s, x, w, bias, y_fused, pooled_fused,
                                                   workspace);
            CHECK(memcmp(pooled, pooled_fused, sizeof(float) * (size_t)np) == 0,
                  "conv case %d (%s): fused relu+maxpool differs", index, PATH_NAMES[path]);
            free(pooled); free(pooled_fused);
            free(x); free(w); free(bias); free(y); free(y_fused); free(workspace);
        }
        int n = 7, in = 13, out = 9;
        float *x = random_floats(n * in, 800), *w = random_floats(out * in, 801);
        float *bias = random_floats(out, 802), *y = nan_floats(n * out), *y_fused = nan_floats(n * out);
        x[3] = NAN;
        ct_cpu_linear_forward(n, in, out, x, w, bias, y);
        ct_cpu_relu_forward(n * out, y, y);
        ct_cpu_linear_forward_relu(n, in, out, x, w, bias, y_fused);
        CHECK(memcmp(y, y_fused, sizeof(float) * (size_t)(n * out)) == 0,
              "linear: fused relu differs");
        free(x); free(w); free(bias); free(y); free(y_fused);
    }
    ct_cpu_simd_set(true);
}

/* A small CNN trained 3 steps with its conv->relu and linear->relu fused by
 * the plan, and with fusion prevented (the producers kept): the same loss
 * and parameters, bit for bit. */
static void plan_fusion_trains_the_same_on(const char *path)
{
    float losses[2][3], weights[2][4 * 1 * 3 * 3];
    for (int variant = 0; variant < 2; variant++) {
        ct_graph *graph = ct_graph_new();
        ct_tensor *x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){4, 1, 12, 12});
        ct_tensor *labels = ct_input(graph, "labels", CT_I64, 1, (int64_t[]){4});
        ct_tensor *conv = ct_layer_conv2d(graph, "conv1", x, 4, 3, 3, (ct_conv_args){0}, true);
        ct_tensor *h = ct_maxpool2d(graph, ct_relu(graph, conv), (ct_pool_args){.kernel = {2, 2}});
        ct_tensor *fc = ct_layer_linear(graph, "fc1", ct_flatten(graph, h), 8, true);
        ct_tensor *logits = ct_layer_linear(graph, "fc2", ct_relu(graph, fc), 3, true);
        ct_tensor *loss = ct_cross_entropy(graph, logits, labels, 0);
        if (variant == 1) {
            ct_tensor_keep(conv);
            ct_tensor_keep(fc);
        }
        CHECK_OK(ct_graph_status(graph));
        CHECK_OK(ct_graph_backward(graph, loss));
        CHECK_OK(ct_graph_sgd(graph, (ct_sgd_args){.lr = 0.1f, .momentum = 0.9f}));
        ct_backend *backend = NULL;
        ct_plan *plan = NULL;
        CHECK_OK(ct_backend_new("cpu:2", &backend));
        CHECK_OK(ct_plan_new(graph, backend, 3, &plan));
        if (!plan) {
            ct_backend_free(backend);
            ct_graph_free(graph);
            return;
        }
        /* fused, conv1 stores its pool's argmax codes for the weight
         * gradient, not its values (it and its relu: 2 nodes) */
        ct_exec exec = ct_plan_exec(plan, CT_TRAIN);
        int codes = 0;
        for (int i = 0; i < plan->n_nodes; i++)
            codes += exec.pool_codes && exec.pool_codes[i];
        CHECK(codes == (variant == 0 ? 2 : 0), "%s, variant %d: %d nodes hold argmax codes",
              path, variant, codes);
        float images[4 * 144];
        int64_t classes[4] = {0, 1, 2, 1};
        harness_fill(images, 4 * 144, 9, -1.0f, 1.0f);
        for (int step = 0; step < 3; step++) {
            CHECK_OK(ct_plan_write(plan, x, images, sizeof images));
            CHECK_OK(ct_plan_write(plan, labels, classes, sizeof classes));
            CHECK_OK(ct_plan_run(plan, CT_TRAIN));
            CHECK_OK(ct_plan_read(plan, loss, &losses[variant][step], sizeof(float)));
        }
        CHECK_OK(ct_plan_read(plan, ct_graph_find(graph, "conv1.weight"), weights[variant],
                              sizeof weights[variant]));
        ct_plan_free(plan);
        ct_backend_free(backend);
        ct_graph_free(graph);
    }
    CHECK(memcmp(losses[0], losses[1], sizeof losses[0]) == 0,
          "%s: losses differ: fused %g %g %g, unfused %g %g %g", path, losses[0][0],
          losses[0][1], losses[0][2], losses[1][0], losses[1][1], losses[1][2]);
    CHECK(memcmp(weights[0], weights[1], sizeof weights[0]) == 0, "%s: conv1.weight differs",
          path);
}
static void plan_fusion_trains_the_same(void)
{
    for (int fast = 0; fast < 2; fast++) {
        ct_cpu_simd_set(fast);
        plan_fusion_trains_the_same_on(fast ? "vector" : "portable");
    }
    ct_cpu_simd_set(true);
}

/* Inference-only: conv->relu->pool twice; in evaluation the plan computes
 * each pool inside its conv, and the second pool's output is written while
 * the first pool's output (the conv's input, dead right after) is read, so
 * the memory plan must keep them apart.  Same logits as with fusion
 * prevented (conv outputs kept), bit for bit, on both kernel paths. */
static void plan_eval_pool_fusion_same_logits(void)
{
    float logits[2][2][6 * 5];
    for (int fast = 0; fast < 2; fast++) {
        ct_cpu_simd_set(fast);
        for (int variant = 0; variant < 2; variant++) {
            ct_graph *graph = ct_graph_new();
            ct_tensor *x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){6, 2, 20, 20});
            ct_pool_args pool = {.kernel = {2, 2}};
            ct_tensor *c1 = ct_layer_conv2d(graph, "conv1", x, 5, 3, 3, (ct_conv_args){0}, true);
            ct_tensor *h = ct_maxpool2d(graph, ct_relu(graph, c1), pool);
            ct_tensor *c2 = ct_layer_conv2d(graph, "conv2", h, 7, 3, 3, (ct_conv_args){0}, true);
            h = ct_maxpool2d(graph, ct_relu(graph, c2), pool);
            ct_tensor *out = ct_layer_linear(graph, "fc", ct_flatten(graph, h), 5, true);
            ct_tensor_keep(out);
            if (variant == 1) {
                ct_tensor_keep(c1);
                ct_tensor_keep(c2);
            }
            CHECK_OK(ct_graph_status(graph));
            ct_backend *backend = NULL;
            ct_plan *plan = NULL;
            CHECK_OK(ct_backend_new("cpu:2", &backend));
            CHECK_OK(ct_plan_new(graph, backend, 5, &plan));
            static float images[6 * 2 * 20 * 20];
            harness_fill(images, 6 * 2 * 20 * 20, 11, -1.0f, 1.0f);
            if (plan) {
                CHECK_OK(ct_plan_write(plan, x, images, sizeof images));
                CHECK_OK(ct_plan_run(plan, CT_EVAL));
                CHECK_OK(ct_plan_read(plan, out, logits[fast][variant], sizeof logits[0][0]));
            }
            ct_plan_free(plan);
            ct_backend_free(backend);
            ct_graph_free(graph);
        }
        CHECK(memcmp(logits[fast][0], logits[fast][1], sizeof logits[0][0]) == 0,
              "%s: fused and unfused logits differ", fast ? "avx2" : "portable");
    }
    ct_cpu_simd_set(true);
}

/* The memory plan with the eval pool fusion: a conv that also writes its
 * max pool's output writes it while still reading its input, so the pool's
 * bytes must not overlap the conv's input (which the plan would otherwise
 * free at the conv) nor its own output.  A spy wraps the CPU backend's
 * run_node and checks the addresses of the fused conv.  The shapes make the
 * planner (largest first, lowest offset) put conv1's output y1 at 0 and its
 * input h0 right after it, where the pool would land if its lifetime began
 * at the pool's own position: y1 = 16 planes > h0 = 8 > pool = 4. */
static const ct_backend_i *spied_iface;
static int spy_fused, spy_overlaps;

static bool bytes_overlap(const ct_exec *exec, const ct_tensor *a, const ct_tensor *b)
{
    const uint8_t *pa = ct_exec_data(exec, a), *pb = ct_exec_data(exec, b);
    return pa < pb + ct_tensor_bytes((ct_tensor *)b) && pb < pa + ct_tensor_bytes((ct_tensor *)a);
}

static ct_status spy_run_node(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                              const ct_impl *impl)
{
    const ct_tensor *pool = exec->pool_into ? exec->pool_into[node->id] : NULL;
    if (pool) {
        spy_fused++;
        spy_overlaps += bytes_overlap(exec, node->src[0], pool) + bytes_overlap(exec, node, pool);
    }
    return spied_iface->run_node ? spied_iface->run_node(backend, exec, node, impl)
                                 : impl->run(backend, exec, node);
}

static void plan_eval_pool_fusion_keeps_input_apart(void)
{
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){4, 3, 32, 32});
    ct_conv_args same = {.pad = {1, 1}};
    ct_tensor *h = ct_relu(graph, ct_layer_conv2d(graph, "conv0", x, 8, 3, 3, same, true));
    h = ct_relu(graph, ct_layer_conv2d(graph, "conv1", h, 16, 3, 3, same, true));
    h = ct_maxpool2d(graph, h, (ct_pool_args){.kernel = {2, 2}});
    ct_tensor *out = ct_layer_linear(graph, "fc", ct_flatten(graph, h), 5, true);
    ct_tensor_keep(out);
    CHECK_OK(ct_graph_status(graph));
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu:2", &backend));
    static ct_backend_i spy;
    spied_iface = backend->iface;
    spy = *backend->iface;
    spy.run_node = spy_run_node;
    backend->iface = &spy;
    spy_fused = spy_overlaps = 0;
    CHECK_OK(ct_plan_new(graph, backend, 5, &plan));
    if (plan)
        CHECK_OK(ct_plan_run(plan, CT_EVAL));
    CHECK(spy_fused == 1, "%d convs computed their pool, not 1", spy_fused);
    CHECK(spy_overlaps == 0, "%d fused convs write their pool over memory they read",
          spy_overlaps);
    ct_plan_free(plan);
    backend->iface = spied_iface;
    ct_backend_free(backend);
    ct_graph_free(graph);
}

/* ---- optimizers ---------------------------------------------------------- */

typedef struct optimizer_case {
    bool adam, decoupled, nesterov;
    float momentum, dampening, weight_decay;
} optimizer_case;

/* Three steps of one optimizer over a group of tensors whose sizes end in
 * every vector tail (and a 44,426-element one, SimpleCNN's parameters), with
 * inf and NaN gradients among them; params and state out. */
static void optimizer_steps(const optimizer_case *k, bool avx512, float *params, float *state0,
                            float *state1, const int64_t *counts, int n)
{
    ct_cpu_update_tensor tensors[8];
    int64_t at = 0;
    for (int t = 0; t < n; t++) {
        tensors[t] = (ct_cpu_update_tensor){counts[t], params + at, NULL, {state0 + at,
                                                                           state1 + at}};
        at += counts[t];
    }
    harness_fill(params, at, 11, -1.0f, 1.0f);
    memset(state0, 0, sizeof(float) * (size_t)at);
    memset(state1, 0, sizeof(float) * (size_t)at);
    float *grad = random_floats(at, 12);
    grad[3] = INFINITY;
    grad[at - 2] = NAN;
    for (int t = 0, from = 0; t < n; from += (int)counts[t], t++)
        tensors[t].grad = grad + from;
    ct_cpu_simd_set_avx512(avx512);
    for (int step = 1; step <= 3; step++) {
        if (k->adam)
            ct_cpu_adam_update_group(n, tensors, 0.5f, 1e-3f, 0.9f, 0.999f, 1e-8f,
                                     k->weight_decay, k->decoupled, step);
        else
            ct_cpu_sgd_update_group(n, tensors, 0.5f, 0.05f, k->momentum, k->dampening,
                                    k->weight_decay, k->nesterov, step == 1);
    }
    ct_cpu_simd_set_avx512(true);
    free(grad);
}

/* The optimizers' AVX-512 loops (optim.c) against the baseline build's:
 * the same bits, SGD plain, with momentum, dampening, Nesterov and weight
 * decay, Adam and AdamW. */
static void optimizer_vector_same_bits(void)
{
    if (!ct_cpu_simd_avx512())
        fprintf(stderr, "  note: no AVX-512 here: both runs take the portable loops\n");
    static const optimizer_case CASES[] = {
        {false, false, false, 0.0f, 0.0f, 0.0f},   {false, false, false, 0.0f, 0.0f, 5e-3f},
        {false, false, false, 0.9f, 0.0f, 0.0f},   {false, false, false, 0.9f, 0.3f, 5e-3f},
        {false, false, true, 0.9f, 0.0f, 5e-3f},   {true, false, false, 0.0f, 0.0f, 0.0f},
        {true, false, false, 0.0f, 0.0f, 1e-2f},   {true, true, false, 0.0f, 0.0f, 1e-2f},
    };
    static const int64_t COUNTS[] = {1, 15, 17, 33, 44426, 7};
    int n = (int)(sizeof COUNTS / sizeof COUNTS[0]);
    int64_t total = 0;
    for (int t = 0; t < n; t++)
        total += COUNTS[t];
    float *out[2][3];
    for (int v = 0; v < 2; v++)
        for (int a = 0; a < 3; a++)
            out[v][a] = malloc(sizeof(float) * (size_t)total);
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        for (int v = 0; v < 2; v++)
            optimizer_steps(&CASES[c], v == 1, out[v][0], out[v][1], out[v][2], COUNTS, n);
        for (int a = 0; a < 3; a++)
            CHECK(memcmp(out[0][a], out[1][a], sizeof(float) * (size_t)total) == 0,
                  "case %zu, array %d (param, state 0, state 1)", c, a);
        CHECK(isnan(out[1][0][total - 2]) && !isfinite(out[1][0][3]),
              "case %zu: the inf and NaN gradients' params %g %g", c, out[1][0][3],
              out[1][0][total - 2]);
    }
    for (int v = 0; v < 2; v++)
        for (int a = 0; a < 3; a++)
            free(out[v][a]);
}

int main(void)
{
    RUN(direct_conv_takes_the_cases);
    RUN(direct_conv_matches_reference);
    RUN(direct_conv_same_bits_for_any_thread_count);
    RUN(direct_conv_avx2_only_matches_reference);
    RUN(direct_conv_wide_blocks_same_bits);
    RUN(linear_small_same_bits_for_any_thread_count);
    RUN(linear_small_blocks_same_bits);
    RUN(winograd_takes_the_cases);
    RUN(winograd_matches_reference);
    RUN(winograd_same_bits_for_any_thread_count);
    RUN(avgpool_2x2_same_bits);
    RUN(tanh_vector_matches_libm);
    RUN(maxpool_2x2_backward_same_bits);
    RUN(pooled_weight_matches_unfused);
    RUN(fused_relu_kernels_same_bits);
    RUN(plan_fusion_trains_the_same);
    RUN(plan_eval_pool_fusion_same_logits);
    RUN(plan_eval_pool_fusion_keeps_input_apart);
    RUN(optimizer_vector_same_bits);
    return harness_finish();
}
