/*
 * Elementwise activations on the GPU, with the CPU's formulas
 * (core/math_shared.h; backward rules take the forward output y), four
 * floats or eight halves per thread with 128-bit accesses (elementwise.cuh).
 * f16 and bf16 tensors are computed in f32 and rounded once per stored
 * value, as the CPU reference rounds them.  Outputs are written with =; in
 * place (y == x) works.
 */
#include <math.h>

#include "core/math_shared.h"
#include "cuda/elementwise.cuh"

/* y = f(x), from arrays {x, y}; dx = f(y, dy), from {y, dy, dx}; every
 * array of storage type T (elementwise.cuh) */
#define CT_CUDA_FORWARD(kernel, f)                                                      \
    template <class T> __global__ void kernel(int64_t count, const T *x, T *y)          \
    {                                                                                   \
        T *const arrays[2] = {(T *)x, y};                                               \
        ct_map(count, arrays, 0x1u, 0x2u, [](float *e) { e[1] = f(e[0]); });             \
    }
#define CT_CUDA_BACKWARD(kernel, f)                                                     \
    template <class T>                                                                  \
    __global__ void kernel(int64_t count, const T *y, const T *dy, T *dx)               \
    {                                                                                   \
        T *const arrays[3] = {(T *)y, (T *)dy, dx};                                     \
        ct_map(count, arrays, 0x3u, 0x4u, [](float *e) { e[2] = f(e[0], e[1]); });       \
    }

CT_CUDA_FORWARD(relu_forward_kernel, ct_relu)
CT_CUDA_BACKWARD(relu_backward_kernel, ct_relu_grad)
CT_CUDA_FORWARD(sigmoid_forward_kernel, ct_sigmoid)
CT_CUDA_BACKWARD(sigmoid_backward_kernel, ct_sigmoid_grad)
CT_CUDA_FORWARD(tanh_forward_kernel, tanhf)
CT_CUDA_BACKWARD(tanh_backward_kernel, ct_tanh_grad)

#define CT_CUDA_UNARY(name, kernel)                                                       \
    extern "C" ct_status name(ct_dtype dtype, int64_t count, const void *x, void *y,      \
                              cudaStream_t stream)                                        \
    {                                                                                     \
        return ct_with_storage(dtype, [&](auto tag) -> ct_status {                        \
            using T = decltype(tag);                                                      \
            CT_CUDA_LAUNCH_MAP_OF(T, kernel<T>, count, stream, count, (const T *)x,       \
                                  (T *)y);                                                \
            return CT_OK;                                                                 \
        });                                                                               \
    }

#define CT_CUDA_BINARY(name, kernel)                                                      \
    extern "C" ct_status name(ct_dtype dtype, int64_t count, const void *y, const void *dy, \
                              void *dx, cudaStream_t stream)                              \
    {                                                                                     \
        return ct_with_storage(dtype, [&](auto tag) -> ct_status {                        \
            using T = decltype(tag);                                                      \
            CT_CUDA_LAUNCH_MAP_OF(T, kernel<T>, count, stream, count, (const T *)y,       \
                                  (const T *)dy, (T *)dx);                                \
            return CT_OK;                                                                 \
        });                                                                               \
    }

CT_CUDA_UNARY(ct_cuda_relu_forward, relu_forward_kernel)
CT_CUDA_BINARY(ct_cuda_relu_backward, relu_backward_kernel)
CT_CUDA_UNARY(ct_cuda_sigmoid_forward, sigmoid_forward_kernel)
CT_CUDA_BINARY(ct_cuda_sigmoid_backward, sigmoid_backward_kernel)
CT_CUDA_UNARY(ct_cuda_tanh_forward, tanh_forward_kernel)
CT_CUDA_BINARY(ct_cuda_tanh_backward, tanh_backward_kernel)
