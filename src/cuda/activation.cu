/*
 * Elementwise activations on the GPU, with the CPU's formulas
 * (core/math_shared.h; backward rules take the forward output y).  Outputs are written with =;
 * in place (y == x) works.
 */
#include <math.h>

#include "core/math_shared.h"
#include "cuda/common.cuh"

__global__ void relu_forward_kernel(int64_t count, const float *x, float *y)
{
    CT_CUDA_GRID_STRIDE(i, count) { y[i] = ct_relu(x[i]); }
}

__global__ void relu_backward_kernel(int64_t count, const float *y, const float *dy, float *dx)
{
    CT_CUDA_GRID_STRIDE(i, count) { dx[i] = ct_relu_grad(y[i], dy[i]); }
}

__global__ void sigmoid_forward_kernel(int64_t count, const float *x, float *y)
{
    CT_CUDA_GRID_STRIDE(i, count) { y[i] = ct_sigmoid(x[i]); }
}

__global__ void sigmoid_backward_kernel(int64_t count, const float *y, const float *dy,
                                        float *dx)
{
    CT_CUDA_GRID_STRIDE(i, count) { dx[i] = ct_sigmoid_grad(y[i], dy[i]); }
}

__global__ void tanh_forward_kernel(int64_t count, const float *x, float *y)
{
    CT_CUDA_GRID_STRIDE(i, count) { y[i] = tanhf(x[i]); }
}

__global__ void tanh_backward_kernel(int64_t count, const float *y, const float *dy, float *dx)
{
    CT_CUDA_GRID_STRIDE(i, count) { dx[i] = ct_tanh_grad(y[i], dy[i]); }
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
