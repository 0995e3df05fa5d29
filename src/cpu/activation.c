/*
 * Elementwise activations over `count` floats.  Outputs are written with =.
 * Each loop is one flat pass with restrict pointers so gcc vectorizes it.
 * Running in place (y == x) works because each element is read before it is
 * written; a partly overlapping output does not.
 * The formulas are core/math_shared.h's, shared with the CUDA kernels;
 * backward rules take the forward output y.
 */
#include <math.h>

#include "core/math_shared.h"
#include "cpu/activation_avx2.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"

/* Below this many elements a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

void ct_cpu_relu_forward(int64_t count, const float *restrict x, float *restrict y)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        y[i] = ct_relu(x[i]);
}

/* The blend of ct_relu_grad, not a branch: a branch mispredicts on every
 * other element of a real network's activations (10x slower). */
void ct_cpu_relu_backward(int64_t count, const float *restrict y, const float *restrict dy,
                          float *restrict dx)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        dx[i] = ct_relu_grad(y[i], dy[i]);
}

void ct_cpu_sigmoid_forward(int64_t count, const float *restrict x, float *restrict y)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        y[i] = ct_sigmoid(x[i]);
}

void ct_cpu_sigmoid_backward(int64_t count, const float *restrict y, const float *restrict dy,
                             float *restrict dx)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        dx[i] = ct_sigmoid_grad(y[i], dy[i]);
}

/* y = tanh(x): libm's tanhf, or 8 at a time with AVX2 (activation_avx2.c,
 * within 2 ulp of it) in blocks of TANH_BLOCK over the threads. */
enum { TANH_BLOCK = 4096 };

void ct_cpu_tanh_forward(int64_t count, const float *restrict x, float *restrict y)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (ct_cpu_simd_avx2()) {
        int64_t blocks = (count + TANH_BLOCK - 1) / TANH_BLOCK;
        ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t begin = b * TANH_BLOCK;
            int64_t n = count - begin < TANH_BLOCK ? count - begin : TANH_BLOCK;
            int64_t vectors = n / 8 * 8;
            ct_cpu_tanh_avx2(vectors, x + begin, y + begin);
            for (int64_t i = begin + vectors; i < begin + n; i++)
                y[i] = tanhf(x[i]);
        }
        return;
    }
#endif
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        y[i] = tanhf(x[i]);
}

void ct_cpu_tanh_backward(int64_t count, const float *restrict y, const float *restrict dy,
                          float *restrict dx)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if (count >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int64_t i = 0; i < count; i++)
        dx[i] = ct_tanh_grad(y[i], dy[i]);
}
