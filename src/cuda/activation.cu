/*
 * Elementwise activations on the GPU, the formulas of src/cpu/activation.c
 * (backward rules take the forward output y).  Outputs are written with =;
 * in place (y == x) works.
 */
#include <math.h>

#include "cuda/common.cuh"

/* y = max(x, 0), NaN passes through */
__global__ void relu_forward_kernel(int64_t count, const float *x, float *y)
{
    CT_CUDA_GRID_STRIDE(i, count) { y[i] = x[i] < 0.0f ? 0.0f : x[i]; }
}

/* dx = y <= 0 ? 0 : dy */
__global__ void relu_backward_kernel(int64_t count, const float *y, const float *dy, float *dx)
{
    CT_CUDA_GRID_STRIDE(i, count) { dx[i] = y[i] <= 0.0f ? 0.0f : dy[i]; }
}

/* y = 1 / (1 + exp(-x)), from e = exp(-|x|) so nothing overflows */
__global__ void sigmoid_forward_kernel(int64_t count, const float *x, float *y)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        float e = expf(-fabsf(x[i]));
        y[i] = (x[i] >= 0.0f ? 1.0f : e) / (1.0f + e);
    }
}

/* dx = dy * y * (1 - y) */
__global__ void sigmoid_backward_kernel(int64_t count, const float *y, const float *dy,
                                        float *dx)
{
    CT_CUDA_GRID_STRIDE(i, count) { dx[i] = dy[i] * y[i] * (1.0f - y[i]); }
}

/* y = tanh(x) */
__global__ void tanh_forward_kernel(int64_t count, const float *x, float *y)
{
    CT_CUDA_GRID_STRIDE(i, count) { y[i] = tanhf(x[i]); }
}

/* dx = dy * (1 - y)(1 + y) */
__global__ void tanh_backward_kernel(int64_t count, const float *y, const float *dy, float *dx)
{
    CT_CUDA_GRID_STRIDE(i, count) { dx[i] = dy[i] * ((1.0f - y[i]) * (1.0f + y[i])); }
}

#define CT_CUDA_UNARY(name, kernel)                                                      \
    extern "C" ct_status name(int64_t count, const float *x, float *y, cudaStream_t stream) \
    {                                                                                    \
        CT_CUDA_LAUNCH_ITEMS(kernel, count, stream, count, x, y);                      \
        return CT_OK;                                                                    \
    }

#define CT_CUDA_BINARY(name, kernel)                                                      \
    extern "C" ct_status name(int64_t count, const float *y, const float *dy, float *dx,  \
                              cudaStream_t stream)                                        \
    {                                                                                     \
        CT_CUDA_LAUNCH_ITEMS(kernel, count, stream, count, y, dy, dx);                 \
        return CT_OK;                                                                     \
    }

CT_CUDA_UNARY(ct_cuda_relu_forward, relu_forward_kernel)
CT_CUDA_BINARY(ct_cuda_relu_backward, relu_backward_kernel)
CT_CUDA_UNARY(ct_cuda_sigmoid_forward, sigmoid_forward_kernel)
CT_CUDA_BINARY(ct_cuda_sigmoid_backward, sigmoid_backward_kernel)
CT_CUDA_UNARY(ct_cuda_tanh_forward, tanh_forward_kernel)
CT_CUDA_BINARY(ct_cuda_tanh_backward, tanh_backward_kernel)
