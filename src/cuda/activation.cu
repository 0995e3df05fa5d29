/*
 * Elementwise activations on the GPU, with the CPU's formulas
 * (core/math_shared.h; backward rules take the forward output y), four
 * elements per thread with 128-bit accesses (elementwise.cuh).  Outputs are
 * written with =; in place (y == x) works.
 */
#include <math.h>

#include "core/math_shared.h"
#include "cuda/elementwise.cuh"

/* y = f(x), from arrays {x, y}; dx = f(y, dy), from {y, dy, dx} (elementwise.cuh) */
#define CT_CUDA_FORWARD(kernel, f)                                                      \
    __global__ void kernel(int64_t count, const float *x, float *y)                     \
    {                                                                                   \
        float *const arrays[2] = {(float *)x, y};                                       \
        ct_map(count, arrays, 0x1u, 0x2u, [](float *e) { e[1] = f(e[0]); });             \
    }
#define CT_CUDA_BACKWARD(kernel, f)                                                     \
    __global__ void kernel(int64_t count, const float *y, const float *dy, float *dx)    \
    {                                                                                   \
        float *const arrays[3] = {(float *)y, (float *)dy, dx};                          \
        ct_map(count, arrays, 0x3u, 0x4u, [](float *e) { e[2] = f(e[0], e[1]); });       \
    }

CT_CUDA_FORWARD(relu_forward_kernel, ct_relu)
CT_CUDA_BACKWARD(relu_backward_kernel, ct_relu_grad)
CT_CUDA_FORWARD(sigmoid_forward_kernel, ct_sigmoid)
CT_CUDA_BACKWARD(sigmoid_backward_kernel, ct_sigmoid_grad)
CT_CUDA_FORWARD(tanh_forward_kernel, tanhf)
CT_CUDA_BACKWARD(tanh_backward_kernel, ct_tanh_grad)

#define CT_CUDA_UNARY(name, kernel)                                                      \
    extern "C" ct_status name(int64_t count, const float *x, float *y, cudaStream_t stream) \
    {                                                                                    \
        CT_CUDA_LAUNCH_MAP(kernel, count, stream, count, x, y);                      \
        return CT_OK;                                                                    \
    }

#define CT_CUDA_BINARY(name, kernel)                                                      \
    extern "C" ct_status name(int64_t count, const float *y, const float *dy, float *dx,  \
                              cudaStream_t stream)                                        \
    {                                                                                     \
        CT_CUDA_LAUNCH_MAP(kernel, count, stream, count, y, dy, dx);                 \
        return CT_OK;                                                                     \
    }

CT_CUDA_UNARY(ct_cuda_relu_forward, relu_forward_kernel)
CT_CUDA_BINARY(ct_cuda_relu_backward, relu_backward_kernel)
CT_CUDA_UNARY(ct_cuda_sigmoid_forward, sigmoid_forward_kernel)
CT_CUDA_BINARY(ct_cuda_sigmoid_backward, sigmoid_backward_kernel)
CT_CUDA_UNARY(ct_cuda_tanh_forward, tanh_forward_kernel)
CT_CUDA_BINARY(ct_cuda_tanh_backward, tanh_backward_kernel)
