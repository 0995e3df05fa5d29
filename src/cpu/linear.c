/*
 * Linear (fully connected) layer on the CPU, PyTorch layout:
 *   x: [n, in]   w: [out, in]   bias: [out]   y: [n, out]
 * Each pass is one GEMM; the bias gradient is ct_cpu_channel_sum with
 * inner = 1.  All outputs are written with =.
 */
#include "cpu/kernels.h"

/* Below this many elements, the bias is added on one thread. */
enum { LINEAR_PARALLEL_MIN_ELEMENTS = 1 << 15 };

/* y[n,o] = bias[o] + sum_i x[n,i] w[o,i]:  y = x . w^T */
void ct_cpu_linear_forward(int n, int in, int out, const float *x, const float *w,
                           const float *bias, float *y)
{
    ct_cpu_gemm(false, true, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (!bias)
        return;
    bool parallel = (double)n * out >= LINEAR_PARALLEL_MIN_ELEMENTS;
#pragma omp parallel for schedule(static) if (parallel)
    for (int row = 0; row < n; row++)
        for (int o = 0; o < out; o++)
            y[(size_t)row * out + o] += bias[o];
}

/* dx[n,i] = sum_o dy[n,o] w[o,i]:  dx = dy . w */
void ct_cpu_linear_backward_data(int n, int in, int out, const float *dy, const float *w,
                                 float *dx)
{
    ct_cpu_gemm(false, false, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

/* dw[o,i] = sum_n dy[n,o] x[n,i]:  dw = dy^T . x */
void ct_cpu_linear_backward_weight(int n, int in, int out, const float *x, const float *dy,
                                   float *dw)
{
    ct_cpu_gemm(true, false, out, in, n, 1.0f, dy, out, x, in, 0.0f, dw, in);
}
