/*
 * Fill, copy, add, bias, and the channel concat/slice of [n, c, inner]
 * tensors on the GPU.  Concat and slice are strided copies
 * (cudaMemcpy2DAsync): n rows of c_i*inner elements.  Copy, add, concat and
 * slice take f16 and bf16 tensors too (add: the f32 sum rounded once; the
 * copies move the bits).  Outputs are written with = (add_bias adds into
 * its output by definition); add may run in place.
 */
#include "core/half.h"
#include "core/math_shared.h"
#include "cuda/elementwise.cuh"

/* y[i] = value (times *scale, the step's loss scale, where given: read on
 * the device, so that a replayed step takes its own), 128-bit stores
 * (elementwise.cuh) */
__global__ void fill_kernel(int64_t count, float value, const float *scale, float *y)
{
    if (scale)
        value *= *scale;
    float *const arrays[1] = {y};
    ct_map(count, arrays, 0x0u, 0x1u, [value](float *e) { e[0] = value; });
}

/* y[i] = a[i] + b[i], 128-bit accesses; every array of storage type T */
template <class T>
__global__ void add_kernel(int64_t count, const T *a, const T *b, bool relu, T *y)
{
    T *const arrays[3] = {(T *)a, (T *)b, y};
    ct_map(count, arrays, 0x3u, 0x4u, [relu](float *e) {
        float v = e[0] + e[1];
        e[2] = relu ? ct_relu(v) : v; /* the fused relu (graph/fuse.c) */
    });
}

/* y[i] = ct_relu_grad(mask[i], a[i] + b[i]): a gradient's two parts summed,
 * then the backward of the relu whose output is mask (a residual block's
 * relu_bwd fused into the add that sums its dy, graph/fuse.c) */
template <class T>
__global__ void add_relu_grad_kernel(int64_t count, const T *a, const T *b, const T *mask, T *y)
{
    T *const arrays[4] = {(T *)a, (T *)b, (T *)mask, y};
    ct_map(count, arrays, 0x7u, 0x8u, [](float *e) { e[3] = ct_relu_grad(e[2], e[0] + e[1]); });
}

/* y[r, ch, i] += bias[ch] (bias f32, may be NULL), then max(y, 0) when
 * relu (a NaN stays NaN, as the relu kernel's); y of storage type T, the
 * sum in f32 rounded once */
template <class T>
__global__ void add_bias_kernel(int64_t count, int c, int inner, const float *bias, bool relu,
                                T *y)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        float v = ct_load_f32(y, i);
        if (bias)
            v += bias[i / inner % c];
        ct_store_f32(y, i, relu && v < 0.0f ? 0.0f : v);
    }
}

/* A float of dtype `dtype` (f32, f16, bf16) as f32, and back (round to
 * nearest even into 16 bits: core/half.h's bit-exact conversions). */
__device__ inline float load_as_f32(const void *p, int64_t i, ct_dtype dtype)
{
    if (dtype == CT_F32)
        return ((const float *)p)[i];
    uint16_t bits = ((const uint16_t *)p)[i];
    return dtype == CT_BF16 ? ct_bf16_to_f32(bits) : ct_f16_to_f32(bits);
}

__device__ inline void store_from_f32(void *p, int64_t i, ct_dtype dtype, float v)
{
    if (dtype == CT_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dtype == CT_BF16 ? ct_bf16_from_f32(v) : ct_f16_from_f32(v);
}

/* y[i] = x[i] converted (the dtypes are the same for every thread: no divergence) */
__global__ void cast_kernel(int64_t count, const void *x, ct_dtype from, void *y, ct_dtype to)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        store_from_f32(y, i, to, load_as_f32(x, i, from));
    }
}

extern "C" ct_status ct_cuda_cast(int64_t count, const void *x, ct_dtype from, void *y,
                                  ct_dtype to, cudaStream_t stream)
{
    CT_CUDA_LAUNCH_ITEMS(cast_kernel, count, stream, count, x, from, y, to);
    return CT_OK;
}

extern "C" ct_status ct_cuda_fill(int64_t count, float value, const float *scale, float *y,
                                  cudaStream_t stream)
{
    CT_CUDA_LAUNCH_MAP(fill_kernel, count, stream, count, value, scale, y);
    return CT_OK;
}

extern "C" ct_status ct_cuda_copy(ct_dtype dtype, int64_t count, const void *x, void *y,
                                  cudaStream_t stream)
{
    if (count > 0 && x != y)
        CT_CUDA_CALL(cudaMemcpyAsync(y, x, (size_t)count * ct_dtype_size(dtype),
                                     cudaMemcpyDeviceToDevice, stream));
    return CT_OK;
}

extern "C" ct_status ct_cuda_add(ct_dtype dtype, int64_t count, const void *a, const void *b,
                                 bool relu, const void *mask, void *y, cudaStream_t stream)
{
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        if (mask)
            CT_CUDA_LAUNCH_MAP_OF(T, add_relu_grad_kernel<T>, count, stream, count,
                                  (const T *)a, (const T *)b, (const T *)mask, (T *)y);
        else
            CT_CUDA_LAUNCH_MAP_OF(T, add_kernel<T>, count, stream, count, (const T *)a,
                                  (const T *)b, relu, (T *)y);
        return CT_OK;
    });
}

extern "C" ct_status ct_cuda_add_bias(ct_dtype dtype, int rows, int c, int inner,
                                      const float *bias, bool relu, void *y,
                                      cudaStream_t stream)
{
    int64_t count = (int64_t)rows * c * inner;
    if (!bias && !relu)
        return CT_OK;
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH_ITEMS(add_bias_kernel<T>, count, stream, count, c, inner, bias, relu,
                             (T *)y);
        return CT_OK;
    });
}

/* y[b, off_k + j, i] = xs[k][b, j, i],  off_k = sum_{m<k} channels[m] */
extern "C" ct_status ct_cuda_concat(ct_dtype dtype, int n, int inner, int n_inputs,
                                    const int *channels, const void *const *xs, void *y,
                                    cudaStream_t stream)
{
    size_t element = ct_dtype_size(dtype);
    int64_t c_total = 0;
    for (int k = 0; k < n_inputs; k++)
        c_total += channels[k];
    size_t row_pitch = (size_t)c_total * inner * element;
    int64_t offset = 0;
    for (int k = 0; k < n_inputs; k++) {
        size_t width = (size_t)channels[k] * inner * element;
        if (width > 0 && n > 0)
            CT_CUDA_CALL(cudaMemcpy2DAsync((char *)y + offset * inner * element, row_pitch,
                                           xs[k], width, width, (size_t)n,
                                           cudaMemcpyDeviceToDevice, stream));
        offset += channels[k];
    }
    return CT_OK;
}

/* y[b, j, i] = x[b, start + j, i],  x: [n, c_total, inner],  y: [n, count, inner] */
extern "C" ct_status ct_cuda_slice_channels(ct_dtype dtype, int n, int inner, int c_total,
                                            int start, int count, const void *x, void *y,
                                            cudaStream_t stream)
{
    size_t element = ct_dtype_size(dtype);
    size_t width = (size_t)count * inner * element;
    if (width > 0 && n > 0)
        CT_CUDA_CALL(cudaMemcpy2DAsync(y, width, (const char *)x + (size_t)start * inner * element,
                                       (size_t)c_total * inner * element, width, (size_t)n,
                                       cudaMemcpyDeviceToDevice, stream));
    return CT_OK;
}
