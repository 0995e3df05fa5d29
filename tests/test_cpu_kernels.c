/*
 * The CPU kernels of pool.c, activation.c, batchnorm.c, dropout.c,
 * softmax.c, tensor_ops.c and optim.c against naive double-precision loops
 * written here from the PyTorch definitions.  Outputs are poisoned with NaN
 * before every call, inputs are random and never zero, and results must
 * agree within TOLERANCE (relative to the reference's largest magnitude).
 */
#include <float.h>
#include <math.h>
#include "cpu/threads.h"
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "cpu/kernels.h"
#include "cpu/lanes.h"
#include "harness.h"

#define TOLERANCE 1e-5

/* ---- helpers --------------------------------------------------------------- */

static float *new_floats(int64_t count)
{
    float *p = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static double *new_doubles(int64_t count)
{
    double *p = calloc((size_t)(count > 0 ? count : 1), sizeof(double));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static float *random_floats(int64_t count, uint64_t seed, float lo, float hi)
{
    float *p = new_floats(count);
    harness_fill(p, count, seed, lo, hi);
    return p;
}

static void poison(float *p, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        p[i] = NAN;
}

#define CHECK_CLOSE(got, want, count, what)                                                \
    do {                                                                                   \
        double rel_err_ = harness_rel_err_f64((got), (want), (count));                     \
        CHECK(rel_err_ <= TOLERANCE, "%s: rel err %.3g", (what), rel_err_);               \
    } while (0)

/* ---- pooling --------------------------------------------------------------- */

static ct_pool2d_shape pool_shape(int n, int c, int h, int w, int kh, int kw, int sh, int sw,
                                  int ph, int pw, bool exclude_pad)
{
    ct_pool2d_shape s = {n, c, h, w, (h + 2 * ph - kh) / sh + 1, (w + 2 * pw - kw) / sw + 1,
                         kh, kw, sh, sw, ph, pw, exclude_pad};
    return s;
}

/* PyTorch's ceil_mode=True output size: the last window may hang over the
 * bottom/right padding, but it must start inside the input or left padding. */
static ct_pool2d_shape pool_shape_ceil(int n, int c, int h, int w, int k, int stride, int pad,
                                       bool exclude_pad)
{
    ct_pool2d_shape s = pool_shape(n, c, h, w, k, k, stride, stride, pad, pad, exclude_pad);
    s.out_h = (h + 2 * pad - k + stride - 1) / stride + 1;
    s.out_w = (w + 2 * pad - k + stride - 1) / stride + 1;
    if ((s.out_h - 1) * stride >= h + pad)
        s.out_h--;
    if ((s.out_w - 1) * stride >= w + pad)
        s.out_w--;
    return s;
}

static int64_t pool_in_count(const ct_pool2d_shape *s)
{
    return (int64_t)s->n_batch * s->channels * s->in_h * s->in_w;
}

static int64_t pool_out_count(const ct_pool2d_shape *s)
{
    return (int64_t)s->n_batch * s->channels * s->out_h * s->out_w;
}

/* Max pooling by definition: scan each window row-major, keep the first
 * strictly larger value; dx gets dy at that position. */
static void ref_maxpool(const ct_pool2d_shape *s, const float *x, const float *dy, double *y,
                        double *dx)
{
    for (int p = 0; p < s->n_batch * s->channels; p++)
        for (int oh = 0; oh < s->out_h; oh++)
            for (int ow = 0; ow < s->out_w; ow++) {
                int64_t best = -1;
                for (int i = 0; i < s->kernel_h; i++)
                    for (int j = 0; j < s->kernel_w; j++) {
                        int h = oh * s->stride_h - s->pad_h + i;
                        int w = ow * s->stride_w - s->pad_w + j;
                        if (h < 0 || h >= s->in_h || w < 0 || w >= s->in_w)
                            continue;
                        int64_t at = ((int64_t)p * s->in_h + h) * s->in_w + w;
                        if (best < 0 || x[at] > x[best])
                            best = at;
                    }
                int64_t out = ((int64_t)p * s->out_h + oh) * s->out_w + ow;
                y[out] = x[best];
                dx[best] += dy[out];
            }
}

/* Average pooling by definition: the divisor counts window positions inside
 * the padded input, or inside the input itself with exclude_pad. */
static void ref_avgpool(const ct_pool2d_shape *s, const float *x, const float *dy, double *y,
                        double *dx)
{
    for (int p = 0; p < s->n_batch * s->channels; p++)
        for (int oh = 0; oh < s->out_h; oh++)
            for (int ow = 0; ow < s->out_w; ow++) {
                double sum = 0;
                int inside = 0, inside_padded = 0;
                for (int i = 0; i < s->kernel_h; i++)
                    for (int j = 0; j < s->kernel_w; j++) {
                        int h = oh * s->stride_h - s->pad_h + i;
                        int w = ow * s->stride_w - s->pad_w + j;
                        inside_padded += h < s->in_h + s->pad_h && w < s->in_w + s->pad_w;
                        if (h < 0 || h >= s->in_h || w < 0 || w >= s->in_w)
                            continue;
                        inside++;
                        sum += x[((int64_t)p * s->in_h + h) * s->in_w + w];
                    }
                int divisor = s->exclude_pad ? inside : inside_padded;
                int64_t out = ((int64_t)p * s->out_h + oh) * s->out_w + ow;
                y[out] = sum / divisor;
                for (int i = 0; i < s->kernel_h; i++)
                    for (int j = 0; j < s->kernel_w; j++) {
                        int h = oh * s->stride_h - s->pad_h + i;
                        int w = ow * s->stride_w - s->pad_w + j;
                        if (h >= 0 && h < s->in_h && w >= 0 && w < s->in_w)
                            dx[((int64_t)p * s->in_h + h) * s->in_w + w] += dy[out] / divisor;
                    }
            }
}

/* Integers in [-3, 3] (never 0) so that windows hold ties. */
static void make_ties(float *x, int64_t count)
{
    for (int64_t i = 0; i < count; i++) {
        float v = floorf(x[i] * 3.5f);
        x[i] = v == 0.0f ? 1.0f : v;
    }
}

static void check_pool(const ct_pool2d_shape *s, bool is_max, bool ties, const char *name)
{
    int64_t in = pool_in_count(s), out = pool_out_count(s);
    float *x = random_floats(in, 1011 + (uint64_t)in, -1, 1);
    float *dy = random_floats(out, 12 + (uint64_t)out, -1, 1);
    float *y = new_floats(out), *dx = new_floats(in);
    double *y_ref = new_doubles(out), *dx_ref = new_doubles(in);
    if (ties)
        make_ties(x, in);
    poison(y, out);
    poison(dx, in);
    if (is_max) {
        ct_cpu_maxpool2d_forward(s, x, y);
        ct_cpu_maxpool2d_backward(s, x, dy, false, dx);
        ref_maxpool(s, x, dy, y_ref, dx_ref);
    } else {
        ct_cpu_avgpool2d_forward(s, x, y);
        ct_cpu_avgpool2d_backward(s, dy, dx);
        ref_avgpool(s, x, dy, y_ref, dx_ref);
    }
    char what[128];
    snprintf(what, sizeof what, "%s forward", name);
    CHECK_CLOSE(y, y_ref, out, what);
    snprintf(what, sizeof what, "%s backward", name);
    CHECK_CLOSE(dx, dx_ref, in, what);
    free(x), free(dy), free(y), free(dx), free(y_ref), free(dx_ref);
}

/* The backward with the relu's fused (x a relu's output, half of it 0):
 * the plain backward's dx where x > 0, 0 elsewhere. */
static void check_pool_relu(const ct_pool2d_shape *s, const char *name)
{
    int64_t in = pool_in_count(s), out = pool_out_count(s);
    float *x = random_floats(in, 77 + (uint64_t)in, -1, 1);
    float *dy = random_floats(out, 78 + (uint64_t)out, -1, 1);
    float *dx = new_floats(in), *fused = new_floats(in);
    for (int64_t i = 0; i < in; i++)
        x[i] = x[i] < 0 ? 0.0f : x[i];
    poison(fused, in);
    ct_cpu_maxpool2d_backward(s, x, dy, false, dx);
    ct_cpu_maxpool2d_backward(s, x, dy, true, fused);
    int64_t wrong = 0;
    for (int64_t i = 0; i < in; i++)
        wrong += memcmp(&fused[i], x[i] > 0 ? &dx[i] : &(float){0.0f}, sizeof(float)) != 0;
    CHECK(wrong == 0, "%s: %lld of %lld values differ from relu_bwd(pool_bwd)", name,
          (long long)wrong, (long long)in);
    free(x), free(dy), free(dx), free(fused);
}

static void test_maxpool_2x2_fast_path(void)
{
    int batches[] = {1, 3, 7};
    for (int b = 0; b < 3; b++) {
        ct_pool2d_shape even = pool_shape(batches[b], 4, 8, 12, 2, 2, 2, 2, 0, 0, false);
        ct_pool2d_shape odd = pool_shape(batches[b], 3, 7, 9, 2, 2, 2, 2, 0, 0, false);
        /* 50 x batch planes of 16 windows: stacked 64 at a time, a remainder */
        ct_pool2d_shape stacked = pool_shape(batches[b], 50, 8, 9, 2, 2, 2, 2, 0, 0, false);
        check_pool(&even, true, false, "maxpool 2x2 even");
        check_pool(&odd, true, false, "maxpool 2x2 odd");
        check_pool(&even, true, true, "maxpool 2x2 ties");
        check_pool(&stacked, true, false, "maxpool 2x2 stacked planes");
        /* rows of 8 inputs: the AVX-512 forward's 16 windows from 4 pairs
         * of rows (pool_avx2.c), whole (8x8) and with a last group of
         * fewer (6x8: 12 windows a plane) */
        ct_pool2d_shape packed = pool_shape(batches[b], 50, 8, 8, 2, 2, 2, 2, 0, 0, false);
        ct_pool2d_shape packed_tail = pool_shape(batches[b], 5, 6, 8, 2, 2, 2, 2, 0, 0, false);
        check_pool(&packed, true, false, "maxpool 2x2 rows of 8");
        check_pool(&packed, true, true, "maxpool 2x2 rows of 8 ties");
        check_pool(&packed_tail, true, false, "maxpool 2x2 rows of 8, 12 windows a plane");
        check_pool_relu(&packed, "maxpool 2x2 rows of 8 relu");
        check_pool_relu(&even, "maxpool 2x2 relu");
        check_pool_relu(&odd, "maxpool 2x2 odd relu");
        check_pool_relu(&stacked, "maxpool 2x2 stacked relu");
    }
    ct_pool2d_shape general = pool_shape(3, 5, 9, 7, 3, 3, 2, 2, 1, 1, false);
    check_pool_relu(&general, "maxpool k3 s2 p1 relu");
}

static void test_maxpool_general(void)
{
    int batches[] = {1, 3, 7};
    for (int b = 0; b < 3; b++) {
        ct_pool2d_shape k3 = pool_shape(batches[b], 5, 9, 7, 3, 3, 2, 2, 1, 1, false);
        ct_pool2d_shape rect = pool_shape(batches[b], 2, 6, 11, 3, 2, 2, 1, 1, 0, false);
        ct_pool2d_shape overlap = pool_shape(batches[b], 3, 5, 5, 3, 3, 1, 1, 1, 1, false);
        check_pool(&k3, true, false, "maxpool k3 s2 p1");
        check_pool(&rect, true, false, "maxpool k3x2 s2x1 p1x0");
        check_pool(&overlap, true, true, "maxpool k3 s1 p1 ties");
        ct_pool2d_shape ceil = pool_shape_ceil(batches[b], 3, 6, 8, 3, 2, 1, false);
        check_pool(&ceil, true, false, "maxpool k3 s2 p1 ceil_mode");
    }
}

/* A NaN wins its windows and no other (the general forward checks each
 * plane for NaN and takes the exact path there). */
static void test_maxpool_general_nan(void)
{
    ct_pool2d_shape s = pool_shape(1, 2, 5, 5, 3, 3, 2, 2, 1, 1, false); /* 3x3 outputs */
    float x[50], y[18];
    for (int i = 0; i < 50; i++)
        x[i] = (float)((i * 7) % 13);
    x[12] = NAN; /* plane 0, (2, 2): only output (1, 1) has it in its window */
    ct_cpu_maxpool2d_forward(&s, x, y);
    for (int o = 0; o < 18; o++) {
        int plane = o / 9, oh = o % 9 / 3, ow = o % 3;
        float expected = -INFINITY;
        for (int h = 2 * oh - 1; h <= 2 * oh + 1; h++)
            for (int w = 2 * ow - 1; w <= 2 * ow + 1; w++)
                if (h >= 0 && h < 5 && w >= 0 && w < 5 && !(x[plane * 25 + h * 5 + w] <= expected))
                    expected = x[plane * 25 + h * 5 + w];
        bool nan_expected = plane == 0 && oh == 1 && ow == 1;
        CHECK(nan_expected ? isnan(y[o]) : y[o] == expected, "y[%d] = %g, expected %g", o,
              (double)y[o], nan_expected ? (double)NAN : (double)expected);
    }
}

/* The 2x2 forward on rows of 8 (16 windows from 4 pairs of rows): a NaN
 * wins its window wherever it sits in it, and no other window. */
static void test_maxpool_2x2_rows_of_8_nan(void)
{
    ct_pool2d_shape s = pool_shape(1, 3, 8, 8, 2, 2, 2, 2, 0, 0, false); /* 3 planes of 16 */
    float x[192], y[48];
    for (int i = 0; i < 192; i++)
        x[i] = (float)((i * 7) % 13);
    int nans[] = {0, 9, 70, 135, 191}; /* each corner of a window, in 3 planes */
    for (int k = 0; k < 5; k++)
        x[nans[k]] = NAN;
    ct_cpu_maxpool2d_forward(&s, x, y);
    for (int o = 0; o < 48; o++) {
        int plane = o / 16, oh = o % 16 / 4, ow = o % 4;
        float expected = -INFINITY;
        bool nan = false;
        for (int h = 2 * oh; h < 2 * oh + 2; h++)
            for (int w = 2 * ow; w < 2 * ow + 2; w++) {
                float v = x[plane * 64 + h * 8 + w];
                nan |= isnan(v);
                expected = v > expected ? v : expected;
            }
        CHECK(nan ? isnan(y[o]) : y[o] == expected, "y[%d] = %g, expected %s%g", o,
              (double)y[o], nan ? "NaN, not " : "", (double)expected);
    }
}

static void test_avgpool(void)
{
    int batches[] = {1, 3, 7};
    for (int b = 0; b < 3; b++)
        for (int exclude = 0; exclude <= 1; exclude++) {
            ct_pool2d_shape k3 = pool_shape(batches[b], 5, 9, 7, 3, 3, 2, 2, 1, 1, exclude);
            ct_pool2d_shape rect = pool_shape(batches[b], 2, 6, 11, 2, 3, 1, 2, 1, 1, exclude);
            ct_pool2d_shape plain = pool_shape(batches[b], 3, 8, 8, 2, 2, 2, 2, 0, 0, exclude);
            check_pool(&k3, false, false, exclude ? "avgpool k3 exclude" : "avgpool k3 s2 p1");
            check_pool(&rect, false, false, exclude ? "avgpool k2x3 exclude" : "avgpool k2x3");
            check_pool(&plain, false, false, "avgpool 2x2");
            ct_pool2d_shape ceil = pool_shape_ceil(batches[b], 3, 6, 8, 3, 2, 1, exclude);
            check_pool(&ceil, false, false, exclude ? "avgpool ceil exclude" : "avgpool ceil");
        }
}

static void test_global_avgpool(void)
{
    int batches[] = {1, 3, 7}, c = 6, inner = 7 * 5;
    for (int b = 0; b < 3; b++) {
        int n = batches[b];
        float *x = random_floats((int64_t)n * c * inner, 21, -2, 3);
        float *dy = random_floats((int64_t)n * c, 22, -1, 1);
        float *y = new_floats(n * c), *dx = new_floats((int64_t)n * c * inner);
        double *y_ref = new_doubles(n * c), *dx_ref = new_doubles((int64_t)n * c * inner);
        for (int p = 0; p < n * c; p++) {
            for (int i = 0; i < inner; i++) {
                y_ref[p] += x[(int64_t)p * inner + i] / (double)inner;
                dx_ref[(int64_t)p * inner + i] = dy[p] / (double)inner;
            }
        }
        poison(y, n * c);
        poison(dx, (int64_t)n * c * inner);
        ct_cpu_global_avgpool_forward(n, c, inner, x, y);
        ct_cpu_global_avgpool_backward(n, c, inner, dy, NULL, dx);
        CHECK_CLOSE(y, y_ref, n * c, "global avgpool forward");
        CHECK_CLOSE(dx, dx_ref, (int64_t)n * c * inner, "global avgpool backward");
        free(x), free(dy), free(y), free(dx), free(y_ref), free(dx_ref);
    }
}

/* ---- activations ------------------------------------------------------------- */

typedef enum activation { RELU, SIGMOID, TANH } activation;

static double ref_activation(activation a, double x)
{
    switch (a) {
    case RELU: return x > 0 ? x : 0;
    case SIGMOID: return 1 / (1 + exp(-x));
    case TANH: return tanh(x);
    }
    return NAN;
}

static double ref_activation_grad(activation a, double y, double dy)
{
    switch (a) {
    case RELU: return y > 0 ? dy : 0;
    case SIGMOID: return dy * y * (1 - y);
    case TANH: return dy * (1 - y * y);
    }
    return NAN;
}

static void run_activation(activation a, int64_t count, const float *x, const float *y_in,
                           const float *dy, float *y, float *dx)
{
    switch (a) {
    case RELU:
        ct_cpu_relu_forward(count, x, y);
        ct_cpu_relu_backward(count, y_in, dy, dx);
        break;
    case SIGMOID:
        ct_cpu_sigmoid_forward(count, x, y);
        ct_cpu_sigmoid_backward(count, y_in, dy, dx);
        break;
    case TANH:
        ct_cpu_tanh_forward(count, x, y);
        ct_cpu_tanh_backward(count, y_in, dy, dx);
        break;
    }
}

/* Forward against the definition; backward fed with the reference output
 * rounded to float, so it is checked on its own. */
static void check_activation(activation a, int64_t count, const char *name)
{
    float *x = random_floats(count, 231 + (uint64_t)a, -6, 6);
    float *dy = random_floats(count, 32, -1, 1);
    float *y_in = new_floats(count), *y = new_floats(count), *dx = new_floats(count);
    double *y_ref = new_doubles(count), *dx_ref = new_doubles(count);
    for (int64_t i = 0; i < count; i++) {
        y_ref[i] = ref_activation(a, x[i]);
        y_in[i] = (float)y_ref[i];
        dx_ref[i] = ref_activation_grad(a, y_in[i], dy[i]);
    }
    poison(y, count);
    poison(dx, count);
    run_activation(a, count, x, y_in, dy, y, dx);
    char what[64];
    snprintf(what, sizeof what, "%s forward n=%lld", name, (long long)count);
    CHECK_CLOSE(y, y_ref, count, what);
    snprintf(what, sizeof what, "%s backward n=%lld", name, (long long)count);
    CHECK_CLOSE(dx, dx_ref, count, what);
    free(x), free(dy), free(y_in), free(y), free(dx), free(y_ref), free(dx_ref);
}

static void test_activations(void)
{
    int64_t counts[] = {1, 37, 100003};
    for (int i = 0; i < 3; i++) {
        check_activation(RELU, counts[i], "relu");
        check_activation(SIGMOID, counts[i], "sigmoid");
        check_activation(TANH, counts[i], "tanh");
    }
}

static void test_sigmoid_extremes(void)
{
    float x[] = {-1000.0f, -100.0f, -88.0f, 88.0f, 100.0f, 1000.0f};
    float y[6];
    poison(y, 6);
    ct_cpu_sigmoid_forward(6, x, y);
    for (int i = 0; i < 6; i++) {
        double want = 1 / (1 + exp(-(double)x[i]));
        CHECK(isfinite(y[i]) && fabs(y[i] - want) <= 1e-6 * fmax(want, 1e-30) + 1e-40,
              "sigmoid(%g) = %g, want %g", x[i], y[i], want);
    }
    CHECK(y[2] > 0.0f, "sigmoid(-88) underflowed to %g", y[2]);
}

/* ---- batchnorm ------------------------------------------------------------- */

typedef struct bn_ref {
    double *mean, *var_biased, *y, *dgamma, *dbeta, *dx;
} bn_ref;

/* BatchNorm2d in training mode by definition, in double. */
static bn_ref ref_batchnorm_train(int n, int c, int inner, const float *x, const float *gamma,
                                  const float *beta, const float *dy, double eps)
{
    bn_ref r = {new_doubles(c), new_doubles(c), new_doubles((int64_t)n * c * inner),
                new_doubles(c), new_doubles(c), new_doubles((int64_t)n * c * inner)};
    double m = (double)n * inner;
    for (int ch = 0; ch < c; ch++) {
        for (int b = 0; b < n; b++)
            for (int i = 0; i < inner; i++)
                r.mean[ch] += x[((int64_t)b * c + ch) * inner + i] / m;
        for (int b = 0; b < n; b++)
            for (int i = 0; i < inner; i++) {
                double d = x[((int64_t)b * c + ch) * inner + i] - r.mean[ch];
                r.var_biased[ch] += d * d / m;
            }
        double invstd = 1 / sqrt(r.var_biased[ch] + eps);
        for (int b = 0; b < n; b++)
            for (int i = 0; i < inner; i++) {
                int64_t at = ((int64_t)b * c + ch) * inner + i;
                double xhat = (x[at] - r.mean[ch]) * invstd;
                r.y[at] = xhat * gamma[ch] + beta[ch];
                r.dgamma[ch] += dy[at] * xhat;
                r.dbeta[ch] += dy[at];
            }
        for (int b = 0; b < n; b++)
            for (int i = 0; i < inner; i++) {
                int64_t at = ((int64_t)b * c + ch) * inner + i;
                double xhat = (x[at] - r.mean[ch]) * invstd;
                r.dx[at] = gamma[ch] * invstd / m *
                           (m * dy[at] - r.dbeta[ch] - xhat * r.dgamma[ch]);
            }
    }
    return r;
}

static void bn_ref_free(bn_ref r)
{
    free(r.mean), free(r.var_biased), free(r.y), free(r.dgamma), free(r.dbeta), free(r.dx);
}

static void check_batchnorm_train(int n, int c, int inner)
{
    int64_t count = (int64_t)n * c * inner;
    const float momentum = 0.1f, eps = 1e-5f;
    float *x = random_floats(count, 1041 + (uint64_t)n, -1, 3);
    float *dy = random_floats(count, 42, -1, 1);
    float *gamma = random_floats(c, 43, 0.5f, 1.5f), *beta = random_floats(c, 44, -1, 1);
    float *running_mean = random_floats(c, 45, -1, 1);
    float *running_var = random_floats(c, 46, 0.5f, 2);
    double *mean_want = new_doubles(c), *var_want = new_doubles(c);
    double *stats_want = new_doubles(2 * c), *dparams_want = new_doubles(2 * c);
    bn_ref r = ref_batchnorm_train(n, c, inner, x, gamma, beta, dy, eps);
    double m = (double)n * inner;
    for (int ch = 0; ch < c; ch++) {
        double var_unbiased = m > 1 ? r.var_biased[ch] * m / (m - 1) : r.var_biased[ch];
        mean_want[ch] = (1 - (double)momentum) * running_mean[ch] + momentum * r.mean[ch];
        var_want[ch] = (1 - (double)momentum) * running_var[ch] + momentum * var_unbiased;
        stats_want[ch] = r.mean[ch];
        stats_want[c + ch] = 1 / sqrt(r.var_biased[ch] + eps);
        dparams_want[ch] = r.dgamma[ch];
        dparams_want[c + ch] = r.dbeta[ch];
    }
    float *stats = new_floats(2 * c), *dparams = new_floats(2 * c);
    float *y = new_floats(count), *dx = new_floats(count);
    poison(stats, 2 * c), poison(dparams, 2 * c), poison(y, count), poison(dx, count);
    ct_cpu_batchnorm_stats(n, c, inner, x, true, momentum, eps, running_mean, running_var, stats);
    ct_cpu_batchnorm_apply(n, c, inner, x, stats, gamma, beta, false, y);
    ct_cpu_batchnorm_backward_params(n, c, inner, x, dy, stats, dparams);
    ct_cpu_batchnorm_backward_data(n, c, inner, x, dy, stats, gamma, dparams, dx);
    CHECK_CLOSE(stats, stats_want, c, "batchnorm mean");
    CHECK_CLOSE(stats + c, stats_want + c, c, "batchnorm invstd");
    CHECK_CLOSE(running_mean, mean_want, c, "batchnorm running_mean");
    CHECK_CLOSE(running_var, var_want, c, "batchnorm running_var (unbiased)");
    CHECK_CLOSE(y, r.y, count, "batchnorm apply");
    CHECK_CLOSE(dparams, dparams_want, c, "batchnorm dgamma");
    CHECK_CLOSE(dparams + c, dparams_want + c, c, "batchnorm dbeta");
    CHECK_CLOSE(dx, r.dx, count, "batchnorm dx");
    bn_ref_free(r);
    free(x), free(dy), free(gamma), free(beta), free(running_mean), free(running_var);
    free(mean_want), free(var_want), free(stats_want), free(dparams_want);
    free(stats), free(dparams), free(y), free(dx);
}

static void test_batchnorm_training(void)
{
    check_batchnorm_train(1, 5, 7 * 9);
    check_batchnorm_train(3, 4, 5 * 5);
    check_batchnorm_train(7, 6, 3 * 4);
    check_batchnorm_train(3, 2, 1); /* BatchNorm1d-like: inner 1 */
}

/* Eval mode normalizes with the running statistics and leaves them alone. */
static void test_batchnorm_eval(void)
{
    int n = 3, c = 5, inner = 6 * 7;
    int64_t count = (int64_t)n * c * inner;
    float *x = random_floats(count, 51, -2, 2);
    float *gamma = random_floats(c, 52, 0.5f, 1.5f), *beta = random_floats(c, 53, -1, 1);
    float *running_mean = random_floats(c, 54, -1, 1);
    float *running_var = random_floats(c, 55, 0.5f, 2);
    float mean_before[5], var_before[5];
    memcpy(mean_before, running_mean, sizeof mean_before);
    memcpy(var_before, running_var, sizeof var_before);
    float *stats = new_floats(2 * c), *y = new_floats(count);
    double *y_want = new_doubles(count);
    for (int64_t at = 0; at < count; at++) {
        int ch = (int)(at / inner % c);
        y_want[at] = (x[at] - (double)running_mean[ch]) / sqrt(running_var[ch] + 1e-5) *
                         gamma[ch] + beta[ch];
    }
    poison(stats, 2 * c), poison(y, count);
    ct_cpu_batchnorm_stats(n, c, inner, x, false, 0.1f, 1e-5f, running_mean, running_var, stats);
    ct_cpu_batchnorm_apply(n, c, inner, x, stats, gamma, beta, false, y);
    CHECK_CLOSE(y, y_want, count, "batchnorm eval");
    CHECK(memcmp(mean_before, running_mean, sizeof mean_before) == 0, "eval moved running_mean");
    CHECK(memcmp(var_before, running_var, sizeof var_before) == 0, "eval moved running_var");
    free(x), free(gamma), free(beta), free(running_mean), free(running_var);
    free(stats), free(y), free(y_want);
}

/* ---- dropout ---------------------------------------------------------------- */

static void test_dropout_mask(void)
{
    const int64_t count = 100003; /* not a multiple of 4: the last philox block is partial */
    const float p = 0.3f, scale = 1.0f / (1.0f - p);
    const uint64_t seed = 0x1234567887654321ULL;
    float *x = random_floats(count, 61, 0.5f, 2), *y = new_floats(count);
    poison(y, count);
    ct_cpu_dropout(count, x, y, p, seed, 7, 3);
    int64_t dropped = 0, wrong = 0;
    for (int64_t i = 0; i < count; i++) {
        bool keep = ct_rng_uniform(seed, 7, 3, (uint64_t)i) >= p;
        dropped += y[i] == 0.0f;
        wrong += keep ? y[i] != x[i] * scale : y[i] != 0.0f;
    }
    CHECK(wrong == 0, "%lld elements differ from keep(i) ? x*scale : 0", (long long)wrong);
    double fraction = (double)dropped / count;
    CHECK(fabs(fraction - p) < 0.01, "dropped fraction %.4f, want about %.2f", fraction, p);
    free(x), free(y);
}

static void test_dropout_keys(void)
{
    const int64_t count = 4099;
    float *x = random_floats(count, 62, -1, 1);
    float *a = new_floats(count), *b = new_floats(count), *c = new_floats(count);
    poison(a, count), poison(b, count), poison(c, count);
    ct_cpu_dropout(count, x, a, 0.5f, 99, 1, 10);
    ct_cpu_dropout(count, x, b, 0.5f, 99, 1, 10);
    ct_cpu_dropout(count, x, c, 0.5f, 99, 1, 11);
    CHECK(memcmp(a, b, (size_t)count * sizeof(float)) == 0, "same key, different masks");
    CHECK(memcmp(a, c, (size_t)count * sizeof(float)) != 0, "next step, same mask");
    poison(a, count);
    ct_cpu_dropout(count, x, a, 0.0f, 99, 1, 10);
    CHECK(memcmp(a, x, (size_t)count * sizeof(float)) == 0, "p = 0 is not a copy");
    free(x), free(a), free(b), free(c);
}

/* ---- softmax and cross-entropy ------------------------------------------------ */

static void ref_softmax_row(int c, const float *x, double *p)
{
    double m = x[0], sum = 0;
    for (int j = 1; j < c; j++)
        m = fmax(m, x[j]);
    for (int j = 0; j < c; j++)
        sum += exp(x[j] - m);
    for (int j = 0; j < c; j++)
        p[j] = exp(x[j] - m) / sum;
}

static void check_softmax(int n, int c, float offset)
{
    int64_t count = (int64_t)n * c;
    float *x = random_floats(count, 171 + (uint64_t)n, -4, 4);
    for (int64_t i = 0; i < count; i++)
        x[i] += offset;
    float *dy = random_floats(count, 72, -1, 1);
    float *y = new_floats(count), *dx = new_floats(count);
    double *y_want = new_doubles(count), *dx_want = new_doubles(count);
    for (int row = 0; row < n; row++) {
        ref_softmax_row(c, x + (int64_t)row * c, y_want + (int64_t)row * c);
        double dot = 0;
        for (int j = 0; j < c; j++)
            dot += dy[row * c + j] * y_want[row * c + j];
        for (int j = 0; j < c; j++)
            dx_want[row * c + j] = y_want[row * c + j] * (dy[row * c + j] - dot);
    }
    poison(y, count), poison(dx, count);
    ct_cpu_softmax_forward(n, c, x, y);
    CHECK_CLOSE(y, y_want, count, "softmax forward");
    float *y_in = new_floats(count);
    for (int64_t i = 0; i < count; i++)
        y_in[i] = (float)y_want[i];
    ct_cpu_softmax_backward(n, c, y_in, dy, dx);
    CHECK_CLOSE(dx, dx_want, count, "softmax backward");
    free(x), free(dy), free(y), free(dx), free(y_want), free(dx_want), free(y_in);
}

static void test_softmax(void)
{
    check_softmax(1, 10, 0);
    check_softmax(3, 17, 0);
    check_softmax(7, 1000, 0);
    check_softmax(3, 10, 1000.0f); /* exp(1000) overflows without the max shift */
}

/* Random labels in [0, c), as int64 and as the same values in int32. */
static void make_labels(int n, int c, int64_t *labels64, int32_t *labels32)
{
    uint64_t state = 77 + (uint64_t)n;
    for (int i = 0; i < n; i++) {
        labels64[i] = (int64_t)(harness_uniform(&state, 0, 1) * c) % c;
        labels32[i] = (int32_t)labels64[i];
    }
}

static void check_cross_entropy(int n, int c, bool i64, float smoothing)
{
    int64_t count = (int64_t)n * c, *label_of = malloc((size_t)n * sizeof(int64_t));
    int32_t *labels32 = malloc((size_t)n * sizeof(int32_t));
    make_labels(n, c, label_of, labels32);
    const void *labels = i64 ? (const void *)label_of : (const void *)labels32;
    float *x = random_floats(count, 81 + (uint64_t)n, -5, 5);
    double *p = new_doubles(c), *grad_want = new_doubles(count), loss_want = 0;
    const float dloss = 0.75f;
    for (int row = 0; row < n; row++) {
        const float *xr = x + (int64_t)row * c;
        ref_softmax_row(c, xr, p);
        for (int j = 0; j < c; j++) {
            double target = (1 - (double)smoothing) * (j == label_of[row]) + smoothing / (double)c;
            loss_want -= target * log(p[j]) / n;
            grad_want[(int64_t)row * c + j] = dloss * (p[j] - target) / n;
        }
    }
    float loss = NAN, *grad = new_floats(count);
    poison(grad, count);
    int bad = ct_cpu_cross_entropy_forward(n, c, x, labels, i64, smoothing, 0.0f, &loss, NULL);
    ct_cpu_cross_entropy_backward(n, c, x, labels, i64, smoothing, &dloss, grad);
    CHECK(bad == -1, "good labels reported bad at row %d", bad);
    CHECK_CLOSE(&loss, &loss_want, 1, "cross-entropy loss");
    CHECK_CLOSE(grad, grad_want, count, "cross-entropy grad");
    /* the gradient fused into the forward pass: the same bits as both apart */
    float fused_loss = NAN, *fused = new_floats(count);
    poison(fused, count);
    bad = ct_cpu_cross_entropy_forward(n, c, x, labels, i64, smoothing, dloss, &fused_loss,
                                       fused);
    CHECK(bad == -1 && memcmp(&fused_loss, &loss, sizeof loss) == 0 &&
              memcmp(fused, grad, sizeof(float) * (size_t)count) == 0,
          "%d x %d: the fused loss and gradient differ from the two passes", n, c);
    /* rows in parallel (from 512 elements), the losses summed in row order:
     * the same bits on one thread */
    int saved = ct_cpu_max_threads();
    float one_loss = NAN, *one = new_floats(count);
    ct_cpu_set_threads(1);
    bad = ct_cpu_cross_entropy_forward(n, c, x, labels, i64, smoothing, dloss, &one_loss, one);
    ct_cpu_set_threads(saved);
    CHECK(bad == -1 && memcmp(&one_loss, &fused_loss, sizeof loss) == 0 &&
              memcmp(one, fused, sizeof(float) * (size_t)count) == 0,
          "%d x %d: one thread's loss and gradient differ from %d threads'", n, c, saved);
    free(one);
    free(label_of), free(labels32), free(x), free(p), free(grad_want), free(grad), free(fused);
}

static void test_cross_entropy(void)
{
    int rows[] = {1, 3, 7};
    for (int r = 0; r < 3; r++)
        for (int i64 = 0; i64 <= 1; i64++) {
            check_cross_entropy(rows[r], 10, i64, 0.0f);
            check_cross_entropy(rows[r], 13, i64, 0.1f);
        }
    check_cross_entropy(2500, 3, false, 0.2f); /* more rows than one stack chunk */
    check_cross_entropy(64, 10, true, 0.0f);  /* SimpleCNN's, rows in parallel */
    check_cross_entropy(4, 1, true, 0.0f);
}

static void test_cross_entropy_bad_label(void)
{
    float logits[6 * 4], loss, dloss = 1.0f, grad[6 * 4];
    harness_fill(logits, 6 * 4, 91, -1, 1);
    int32_t labels32[6] = {0, 3, 1, 2, 4, -1};
    int64_t labels64[6] = {0, 1, 2, 3, (int64_t)1 << 40, 2};
    CHECK(ct_cpu_cross_entropy_forward(6, 4, logits, labels32, false, 0.0f, 1.0f, &loss, grad) == 4,
          "int32 label 4 of 4 classes not caught at row 4");
    CHECK(ct_cpu_cross_entropy_forward(6, 4, logits, labels64, true, 0.1f, 0.0f, &loss, NULL) == 4,
          "int64 label 2^40 not caught at row 4 (truncated?)");
    labels32[4] = 1;
    CHECK(ct_cpu_cross_entropy_forward(6, 4, logits, labels32, false, 0.0f, 0.0f, &loss, NULL) == 5,
          "negative label not caught at row 5");
    /* Backward must not index with a bad label either (ASan checks this). */
    poison(grad, 6 * 4);
    ct_cpu_cross_entropy_backward(6, 4, logits, labels64, true, 0.0f, &dloss, grad);
    for (int i = 0; i < 6 * 4; i++)
        CHECK(isfinite(grad[i]), "grad[%d] = %g with a bad label", i, grad[i]);
}

/* ---- tensor ops ----------------------------------------------------------------- */

static void test_fill_copy_add(void)
{
    const int64_t count = 70001;
    float *a = random_floats(count, 101, -1, 1), *b = random_floats(count, 102, -1, 1);
    float *y = new_floats(count);
    double *want = new_doubles(count);
    poison(y, count);
    ct_cpu_add(count, a, b, y);
    for (int64_t i = 0; i < count; i++)
        want[i] = (double)a[i] + b[i];
    CHECK_CLOSE(y, want, count, "add");
    poison(y, count);
    ct_cpu_copy(count, a, y);
    CHECK(memcmp(y, a, (size_t)count * sizeof(float)) == 0, "copy differs");
    poison(y, count);
    ct_cpu_fill(count, -2.5f, y);
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; i++)
        wrong += y[i] != -2.5f;
    CHECK(wrong == 0, "fill left %lld elements", (long long)wrong);
    free(a), free(b), free(y), free(want);
}

/* concat of three tensors against index arithmetic, then slices give them back. */
static void check_concat_slice(int n, int inner)
{
    int channels[3] = {2, 5, 1}, c_total = 8, start = 0;
    float *xs[3];
    for (int k = 0; k < 3; k++)
        xs[k] = random_floats((int64_t)n * channels[k] * inner, 111 + (uint64_t)k, -1, 1);
    int64_t total = (int64_t)n * c_total * inner;
    float *y = new_floats(total);
    poison(y, total);
    ct_cpu_concat(n, inner, 3, channels, (const float *const *)xs, y);
    for (int k = 0; k < 3; k++) {
        int64_t wrong = 0, part = (int64_t)n * channels[k] * inner;
        for (int b = 0; b < n; b++)
            for (int j = 0; j < channels[k]; j++)
                for (int i = 0; i < inner; i++)
                    wrong += y[((int64_t)b * c_total + start + j) * inner + i] !=
                             xs[k][((int64_t)b * channels[k] + j) * inner + i];
        CHECK(wrong == 0, "concat input %d: %lld elements misplaced", k, (long long)wrong);
        float *back = new_floats(part);
        poison(back, part);
        ct_cpu_slice_channels(n, inner, c_total, start, channels[k], y, back);
        CHECK(memcmp(back, xs[k], (size_t)part * sizeof(float)) == 0,
              "slice of input %d does not round-trip", k);
        start += channels[k];
        free(back);
    }
    for (int k = 0; k < 3; k++)
        free(xs[k]);
    free(y);
}

static void test_concat_slice(void)
{
    check_concat_slice(1, 6);
    check_concat_slice(3, 1);
    check_concat_slice(7, 35);
}

/* ---- optimizers -------------------------------------------------------------- */

typedef struct sgd_config {
    float lr, momentum, dampening, weight_decay;
    bool nesterov;
    const char *name;
} sgd_config;

/* torch.optim.SGD's step by definition, in double. */
static void ref_sgd_step(int64_t count, double *param, const float *grad, double *buf,
                         sgd_config k, bool first)
{
    for (int64_t i = 0; i < count; i++) {
        double g = grad[i] + (double)k.weight_decay * param[i];
        if (k.momentum != 0) {
            buf[i] = first ? g : k.momentum * buf[i] + (1 - (double)k.dampening) * g;
            g = k.nesterov ? g + k.momentum * buf[i] : buf[i];
        }
        param[i] -= k.lr * g;
    }
}

static void check_sgd(sgd_config k)
{
    const int64_t count = 1031;
    float *param = random_floats(count, 121, -1, 1), *buf = new_floats(count);
    double *param_want = new_doubles(count), *buf_want = new_doubles(count);
    for (int64_t i = 0; i < count; i++)
        param_want[i] = param[i];
    poison(buf, count); /* the first step must not read it */
    for (int step = 0; step < 3; step++) {
        float *grad = random_floats(count, 130 + (uint64_t)step, -1, 1);
        ref_sgd_step(count, param_want, grad, buf_want, k, step == 0);
        ct_cpu_sgd_update(count, param, grad, 1.0f, k.momentum != 0 ? buf : NULL, k.lr,
                          k.momentum, k.dampening, k.weight_decay, k.nesterov, step == 0);
        free(grad);
    }
    CHECK_CLOSE(param, param_want, count, k.name);
    if (k.momentum != 0)
        CHECK_CLOSE(buf, buf_want, count, k.name);
    free(param), free(buf), free(param_want), free(buf_want);
}

/* ct_cpu_all_finite (the loss scaler's check): every kind of non-finite
 * value at every place of a few vector widths, and the finite extremes. */
static void test_all_finite(void)
{
    enum { N = 37 };
    float x[N];
    const float special[] = {INFINITY, -INFINITY, NAN, -NAN};
    for (int i = 0; i < N; i++)
        x[i] = i % 3 == 0 ? FLT_MAX : i % 3 == 1 ? -1e-42f : -0.0f; /* max, subnormal, -0 */
    CHECK(ct_cpu_all_finite(N, x), "finite values read as non-finite");
    CHECK(ct_cpu_all_finite(0, x), "an empty tensor read as non-finite");
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
        for (int at = 0; at < N; at++) {
            float keep = x[at];
            x[at] = special[k];
            CHECK(!ct_cpu_all_finite(N, x), "%g at %d of %d not found", special[k], at, N);
            CHECK(ct_cpu_all_finite(at, x), "%g past the first %d elements read", special[k],
                  at);
            x[at] = keep;
        }
}

static void test_sgd(void)
{
    check_sgd((sgd_config){0.1f, 0.0f, 0.0f, 0.0f, false, "sgd plain"});
    check_sgd((sgd_config){0.1f, 0.0f, 0.0f, 1e-2f, false, "sgd weight decay"});
    check_sgd((sgd_config){0.05f, 0.9f, 0.0f, 0.0f, false, "sgd momentum"});
    check_sgd((sgd_config){0.05f, 0.9f, 0.3f, 5e-3f, false, "sgd momentum dampening wd"});
    check_sgd((sgd_config){0.05f, 0.9f, 0.0f, 5e-3f, true, "sgd nesterov wd"});
}

/* torch.optim.Adam / AdamW's step by definition, in double. */
static void ref_adam_step(int64_t count, double *param, const float *grad, double *m, double *v,
                          double lr, double b1, double b2, double eps, double wd,
                          bool decoupled, int t)
{
    for (int64_t i = 0; i < count; i++) {
        if (decoupled)
            param[i] *= 1 - lr * wd;
        double g = decoupled ? grad[i] : grad[i] + wd * param[i];
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        double m_hat = m[i] / (1 - pow(b1, t)), v_hat = v[i] / (1 - pow(b2, t));
        param[i] -= lr * m_hat / (sqrt(v_hat) + eps);
    }
}

static void check_adam(bool decoupled, float weight_decay, const char *name)
{
    const int64_t count = 1031;
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float *param = random_floats(count, 141, -1, 1);
    float *m = new_floats(count), *v = new_floats(count);
    double *param_want = new_doubles(count), *m_want = new_doubles(count);
    double *v_want = new_doubles(count);
    for (int64_t i = 0; i < count; i++) {
        param_want[i] = param[i];
        m[i] = v[i] = 0.0f; /* torch.optim starts both moments at zero */
    }
    for (int step = 1; step <= 3; step++) {
        float *grad = random_floats(count, 150 + (uint64_t)step, -1, 1);
        ref_adam_step(count, param_want, grad, m_want, v_want, lr, b1, b2, eps, weight_decay,
                      decoupled, step);
        ct_cpu_adam_update(count, param, grad, 1.0f, m, v, lr, b1, b2, eps, weight_decay,
                           decoupled, step);
        free(grad);
    }
    CHECK_CLOSE(param, param_want, count, name);
    CHECK_CLOSE(m, m_want, count, name);
    CHECK_CLOSE(v, v_want, count, name);
    free(param), free(m), free(v), free(param_want), free(m_want), free(v_want);
}

static void test_adam(void)
{
    check_adam(false, 0.0f, "adam");
    check_adam(false, 1e-2f, "adam weight decay");
    check_adam(true, 1e-2f, "adamw");
}

/* One step of SGD (with nesterov momentum) or Adam over the group's tensors
 * at once, or tensor by tensor; state is zeroed first, params start equal. */
static void step_optimizer_group(bool adam, bool grouped, int n, const int64_t *counts,
                                 float **params, float **grads, float **s0, float **s1, int step)
{
    ct_cpu_update_tensor tensors[8];
    for (int k = 0; k < n; k++)
        tensors[k] = (ct_cpu_update_tensor){counts[k], params[k], grads[k], {s0[k], s1[k]}};
    if (grouped && adam)
        ct_cpu_adam_update_group(n, tensors, 0.5f, 1e-2f, 0.9f, 0.999f, 1e-8f, 1e-2f, true, step);
    else if (grouped)
        ct_cpu_sgd_update_group(n, tensors, 0.5f, 0.05f, 0.9f, 0.0f, 5e-3f, true, step == 1);
    for (int k = 0; k < n && !grouped; k++) {
        if (adam)
            ct_cpu_adam_update(counts[k], params[k], grads[k], 0.5f, s0[k], s1[k], 1e-2f, 0.9f,
                               0.999f, 1e-8f, 1e-2f, true, step);
        else
            ct_cpu_sgd_update(counts[k], params[k], grads[k], 0.5f, s0[k], 0.05f, 0.9f, 0.0f,
                              5e-3f, true, step == 1);
    }
}

/* The optimizer's group update (every parameter in one parallel region,
 * cpu/table_step.c) gives the same bits as one update per tensor, with 1, 2
 * and 3 threads splitting the tensors anywhere (SimpleCNN's sizes: the
 * 44,426 elements are past the parallel threshold, no tensor alone is). */
static void test_optimizer_groups(void)
{
    enum { N = 6 };
    const int64_t counts[N] = {150, 6, 2400, 30720, 7, 10080};
    int saved = ct_cpu_max_threads();
    for (int adam = 0; adam < 2; adam++)
        for (int threads = 1; threads <= 3; threads++) {
            ct_cpu_set_threads(threads);
            float *p[2][N], *s0[2][N], *s1[2][N], *g[N];
            for (int k = 0; k < N; k++) {
                g[k] = random_floats(counts[k], 170 + (uint64_t)k, -1, 1);
                for (int run = 0; run < 2; run++) {
                    p[run][k] = random_floats(counts[k], 160 + (uint64_t)k, -1, 1);
                    s0[run][k] = new_floats(counts[k]);
                    s1[run][k] = new_floats(counts[k]);
                    memset(s0[run][k], 0, sizeof(float) * (size_t)counts[k]);
                    memset(s1[run][k], 0, sizeof(float) * (size_t)counts[k]);
                }
            }
            for (int step = 1; step <= 2; step++)
                for (int run = 0; run < 2; run++)
                    step_optimizer_group(adam, run == 1, N, counts, p[run], g, s0[run], s1[run],
                                         step);
            for (int k = 0; k < N; k++) {
                size_t bytes = sizeof(float) * (size_t)counts[k];
                CHECK(memcmp(p[0][k], p[1][k], bytes) == 0 &&
                          memcmp(s0[0][k], s0[1][k], bytes) == 0 &&
                          memcmp(s1[0][k], s1[1][k], bytes) == 0,
                      "%s, %d threads: tensor %d grouped differs from alone",
                      adam ? "adamw" : "sgd nesterov", threads, k);
                free(g[k]);
                for (int run = 0; run < 2; run++)
                    free(p[run][k]), free(s0[run][k]), free(s1[run][k]);
            }
        }
    ct_cpu_set_threads(saved);
}

/* ---- determinism -------------------------------------------------------------- */

/* The reductions give the same bits on 1 thread as on 4. */
static void test_thread_count_independent(void)
{
    int n = 7, c = 6, inner = 9 * 9;
    int64_t count = (int64_t)n * c * inner;
    float *x = random_floats(count, 161, -2, 2);
    int64_t labels[7] = {0, 5, 2, 3, 1, 4, 0};
    float out[2][4 * 6], loss[2], rm[2][6], rv[2][6];
    float *soft[2] = {new_floats(count), new_floats(count)};
    int threads[2] = {1, 4};
    int saved = ct_cpu_max_threads();
    for (int t = 0; t < 2; t++) {
        ct_cpu_set_threads(threads[t]);
        for (int ch = 0; ch < c; ch++)
            rm[t][ch] = 0.0f, rv[t][ch] = 1.0f;
        ct_cpu_batchnorm_stats(n, c, inner, x, true, 0.1f, 1e-5f, rm[t], rv[t], out[t]);
        ct_cpu_batchnorm_backward_params(n, c, inner, x, x, out[t], out[t] + 2 * c);
        ct_cpu_softmax_forward(n * c, inner, x, soft[t]);
        ct_cpu_cross_entropy_forward(n, c * inner, x, labels, true, 0.1f, 0.0f, &loss[t], NULL);
    }
    ct_cpu_set_threads(saved);
    CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0, "batchnorm stats depend on threads");
    CHECK(memcmp(rm[0], rm[1], sizeof rm[0]) == 0 && memcmp(rv[0], rv[1], sizeof rv[0]) == 0,
          "running stats depend on threads");
    CHECK(memcmp(soft[0], soft[1], (size_t)count * sizeof(float)) == 0,
          "softmax depends on threads");
    CHECK(memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0, "cross-entropy depends on threads");
    free(x), free(soft[0]), free(soft[1]);
}

/* The lane sums of several rows side by side (cpu/lanes.h) are the bits of
 * one row's: the bias gradients and batchnorm's statistics sum planes four
 * at a time, and test_graph's fused and unfused plans must agree. */
static void test_lane_sums_side_by_side(void)
{
    static const int counts[] = {1, 7, 8, 9, 64, 577};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        int count = counts[k], n = 7, c = 3;
        size_t stride = (size_t)count + 5;
        float *v = random_floats((int64_t)stride * 6, 40 + k, -2.0f, 3.0f);
        double rows[6];
        ct_lanes_sum_rows(v, stride, 6, count, rows);
        for (int r = 0; r < 6; r++) {
            double one = ct_lanes_sum(v + r * stride, count);
            CHECK(memcmp(&rows[r], &one, sizeof one) == 0, "row %d of %d floats: %.17g != %.17g",
                  r, count, rows[r], one);
        }
        free(v);
        float *x = random_floats((int64_t)n * c * count, 50 + k, -2.0f, 3.0f);
        for (int ch = 0; ch < c; ch++) {
            double want = 0.0;
            for (int b = 0; b < n; b++)
                want += ct_lanes_sum(x + ((size_t)b * c + ch) * count, count);
            double got = ct_lanes_sum_images(n, c, count, x, ch);
            CHECK(memcmp(&got, &want, sizeof got) == 0, "channel %d of %d floats: %.17g != %.17g",
                  ch, count, got, want);
        }
        free(x);
    }
}

int main(void)
{
    RUN(test_lane_sums_side_by_side);
    RUN(test_maxpool_2x2_fast_path);
    RUN(test_maxpool_general);
    RUN(test_maxpool_general_nan);
    RUN(test_maxpool_2x2_rows_of_8_nan);
    RUN(test_avgpool);
    RUN(test_global_avgpool);
    RUN(test_activations);
    RUN(test_sigmoid_extremes);
    RUN(test_batchnorm_training);
    RUN(test_batchnorm_eval);
    RUN(test_dropout_mask);
    RUN(test_dropout_keys);
    RUN(test_softmax);
    RUN(test_cross_entropy);
    RUN(test_cross_entropy_bad_label);
    RUN(test_fill_copy_add);
    RUN(test_concat_slice);
    RUN(test_all_finite);
    RUN(test_sgd);
    RUN(test_adam);
    RUN(test_optimizer_groups);
    RUN(test_thread_count_independent);
    return harness_finish();
}
