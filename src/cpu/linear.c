/*
 * Linear (fully connected) layer on the CPU, PyTorch layout:
 *   x: [n, in]   w: [out, in]   bias: [out]   y: [n, out]
 * Each pass is one GEMM (small layers on AVX-512: linear_avx512.c); the
 * bias gradient is ct_cpu_channel_sum with inner = 1.  All outputs are
 * written with =.
 */
#include "core/math_shared.h"
#include "cpu/kernels.h"
#include "cpu/linear_small.h"
#include "cpu/threads.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS
#define SMALL_FITS(n, in, out) ct_cpu_linear_small_fits(n, in, out)
#else
#define SMALL_FITS(n, in, out) false
#define ct_cpu_linear_small_forward(...) (void)0
#define ct_cpu_linear_small_backward_data(...) (void)0
#define ct_cpu_linear_small_backward_weight(...) (void)0
#endif

/* Below this many elements, the bias is added on one thread. */
enum { LINEAR_PARALLEL_MIN_ELEMENTS = 1 << 15 };

/* y[n,o] = relu?(bias[o] + sum_i x[n,i] w[o,i]):  y = x . w^T;  relu keeps NaN */
static void linear_forward(int n, int in, int out, const float *x, const float *w,
                           const float *bias, bool relu, float *y)
{
    if (SMALL_FITS(n, in, out)) {
        ct_cpu_linear_small_forward(n, in, out, x, w, bias, relu, y);
        return;
    }
    ct_cpu_gemm(false, true, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (!bias && !relu)
        return;
    bool parallel = (double)n * out >= LINEAR_PARALLEL_MIN_ELEMENTS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int row = 0; row < n; row++)
        for (int o = 0; o < out; o++) {
            float v = y[(size_t)row * out + o] + (bias ? bias[o] : 0.0f);
            y[(size_t)row * out + o] = relu && v < 0.0f ? 0.0f : v;
        }
}

void ct_cpu_linear_forward(int n, int in, int out, const float *x, const float *w,
                           const float *bias, float *y)
{
    linear_forward(n, in, out, x, w, bias, false, y);
}

void ct_cpu_linear_forward_relu(int n, int in, int out, const float *x, const float *w,
                                const float *bias, float *y)
{
    linear_forward(n, in, out, x, w, bias, true, y);
}

/* dx[n,i] = relu_grad?(relu_y[n,i], sum_o dy[n,o] w[o,i]):  dx = dy . w */
void ct_cpu_linear_backward_data(int n, int in, int out, const float *dy, const float *w,
                                 const float *relu_y, float *dx)
{
    if (SMALL_FITS(n, in, out)) {
        ct_cpu_linear_small_backward_data(n, in, out, dy, w, relu_y, dx); /* masks as it stores */
        return;
    }
    ct_cpu_gemm(false, false, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    if (!relu_y)
        return;
    int64_t count = (int64_t)n * in;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (count >= LINEAR_PARALLEL_MIN_ELEMENTS)
    for (int64_t i = 0; i < count; i++)
        dx[i] = ct_relu_grad(relu_y[i], dx[i]);
}

/* dw[o,i] = sum_n dy[n,o] x[n,i]:  dw = dy^T . x */
void ct_cpu_linear_backward_weight(int n, int in, int out, const float *x, const float *dy,
                                   float *dw)
{
    if (SMALL_FITS(n, in, out))
        ct_cpu_linear_small_backward_weight(n, in, out, x, dy, dw);
    else
        ct_cpu_gemm(true, false, out, in, n, 1.0f, dy, out, x, in, 0.0f, dw, in);
}
