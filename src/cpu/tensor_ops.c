/*
 * Fill, copy, add, and the channel concat/slice of [n, c, inner] tensors.
 * Outputs are written with =.  add may run in place (y == a or y == b):
 * each element is read before it is written.  concat and slice copy
 * contiguous runs of c_i*inner floats, one (n, input) run per iteration.
 */
#include <string.h>

#include "core/math_shared.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"

/* Below this many elements a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

/* y[i] = value */
void ct_cpu_fill(int64_t count, float value, float *restrict y)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        y[i] = value;
}

/* y[i] = x[i] */
void ct_cpu_copy(int64_t count, const float *restrict x, float *restrict y)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        y[i] = x[i];
}

/* y[i] = a[i] + b[i] */
void ct_cpu_add(int64_t count, const float *restrict a, const float *restrict b,
                float *restrict y)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        y[i] = a[i] + b[i];
}

/* y = max(a + b, 0): the add of a residual block with its relu fused */
void ct_cpu_add_relu(int64_t count, const float *a, const float *b, float *y)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        y[i] = ct_relu(a[i] + b[i]);
}

/* y = ct_relu_grad(mask, a + b): a gradient's two parts summed, then the
 * backward of the relu whose output is mask (graph/fuse.c), by chunks of
 * ADD_CHUNK: the sums into y, then the mask over them while they are in
 * L1.  In one loop GCC would not compute a + b where the select drops it
 * (an FP add may trap, even with `omp simd`): a scalar loop with a branch
 * on random signs, 10x the unfused pair's time (ResNet-18, B16).  In place
 * as ct_cpu_add (each element read before it is written). */
enum { ADD_CHUNK = 2048 };

static void add_relu_grad_chunk(int64_t len, const float *restrict a, const float *restrict b,
                                const float *restrict mask, float *restrict y)
{
    for (int64_t i = 0; i < len; i++)
        y[i] = a[i] + b[i];
    for (int64_t i = 0; i < len; i++)
        y[i] = ct_relu_grad(mask[i], y[i]);
}

void ct_cpu_add_relu_grad(int64_t count, const float *a, const float *b, const float *mask,
                          float *y)
{
    int64_t chunks = (count + ADD_CHUNK - 1) / ADD_CHUNK;
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t chunk = 0; chunk < chunks; chunk++) {
        int64_t lo = chunk * ADD_CHUNK, len = count - lo < ADD_CHUNK ? count - lo : ADD_CHUNK;
        add_relu_grad_chunk(len, a + lo, b + lo, mask + lo, y + lo);
    }
}

/* y[b, off_k + j, i] = xs[k][b, j, i],  off_k = sum_{m<k} channels[m];
 * xs[k]: [n, channels[k], inner],  y: [n, sum_k channels[k], inner] */
void ct_cpu_concat(int n, int inner, int n_inputs, const int *channels, const float *const *xs,
                   float *y)
{
    int64_t c_total = 0;
    for (int k = 0; k < n_inputs; k++)
        c_total += channels[k];
    int64_t runs = (int64_t)n * n_inputs;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static)
    for (int64_t run = 0; run < runs; run++) {
        int b = (int)(run / n_inputs), k = (int)(run % n_inputs);
        int64_t offset = 0;
        for (int m = 0; m < k; m++)
            offset += channels[m];
        int64_t len = (int64_t)channels[k] * inner;
        memcpy(y + ((int64_t)b * c_total + offset) * inner, xs[k] + (int64_t)b * len,
               (size_t)len * sizeof(float));
    }
}

/* y[b, j, i] = x[b, start + j, i],  x: [n, c_total, inner],  y: [n, count, inner] */
void ct_cpu_slice_channels(int n, int inner, int c_total, int start, int count, const float *x,
                           float *y)
{
    int64_t len = (int64_t)count * inner;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static)
    for (int b = 0; b < n; b++)
        memcpy(y + (int64_t)b * len, x + ((int64_t)b * c_total + start) * inner,
               (size_t)len * sizeof(float));
}
