/*
 * The emulated device's cuDNN (cudnn.h): the library, handles, tensor,
 * filter and pooling descriptors, and pooling forward, queued on the
 * handle's stream.  Convolutions are emu/cudnn_conv.cpp; the computations
 * emu/cudnn_math.cpp.
 *
 * Written from NVIDIA's public cuDNN documentation to test cuttle's glue
 * (src/cuda/dnn.c, check.c, probe.c), not NVIDIA's library.  Descriptors
 * are checked when set, as cuDNN documents; only 4-d NCHW float tensors are
 * supported (anything else is CUDNN_STATUS_NOT_SUPPORTED).  A failing call
 * says why on stderr, in one line that starts "cuda-emu: ".
 */
#include <cstdarg>
#include <cstdint>
#include <cstdio>

#include "cudnn_internal.h"
#include "emu.h"

using namespace emu_dnn;

namespace emu_dnn {

cudnnStatus_t reject(cudnnStatus_t status, const char *function, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    emu::report_rejection(function, format, args);
    va_end(args);
    return status;
}

bool device_elements(const char *fn, const char *name, const void *ptr, size_t count,
                     cudnnDataType_t type)
{
    if (emu::is_device_range(ptr, count * element_bytes(type)))
        return true;
    reject(CUDNN_STATUS_BAD_PARAM, fn,
           "%s = %p (%zu elements of %zu bytes) is not inside one device allocation", name, ptr,
           count, element_bytes(type));
    return false;
}

} // namespace emu_dnn

namespace {

/* Only what the emulator computes: 4-d NCHW float, half or bfloat16 (the
 * 16-bit types for convolutions, computed in float: cuDNN's
 * PSEUDO_HALF_CONFIG and PSEUDO_BFLOAT16_CONFIG). */
cudnnStatus_t check_layout(const char *fn, cudnnTensorFormat_t format, cudnnDataType_t type)
{
    if ((int)format < CUDNN_TENSOR_NCHW || format > CUDNN_TENSOR_NCHW_VECT_C ||
        (int)type < CUDNN_DATA_FLOAT || type > CUDNN_DATA_FAST_FLOAT_FOR_FP8)
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "format %d or data type %d is not an enum value",
                      (int)format, (int)type);
    if (format != CUDNN_TENSOR_NCHW ||
        (type != CUDNN_DATA_FLOAT && type != CUDNN_DATA_HALF && type != CUDNN_DATA_BFLOAT16))
        return reject(CUDNN_STATUS_NOT_SUPPORTED, fn,
                      "the emulator supports only NCHW float, half and bfloat16, not format %d "
                      "type %d",
                      (int)format, (int)type);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_dims(const char *fn, int a, int b, int c, int d)
{
    if (a <= 0 || b <= 0 || c <= 0 || d <= 0)
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "dimensions [%d,%d,%d,%d] must be positive",
                      a, b, c, d);
    if ((int64_t)a * b * c * d > INT32_MAX)
        return reject(CUDNN_STATUS_NOT_SUPPORTED, fn, "[%d,%d,%d,%d] has over 2^31 elements",
                      a, b, c, d);
    return CUDNN_STATUS_SUCCESS;
}

} // namespace

extern "C" {

size_t cudnnGetVersion(void)
{
    return CUDNN_VERSION;
}

#define STATUS_NAME(status) \
    case status:            \
        return #status;

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    switch (status) {
        STATUS_NAME(CUDNN_STATUS_SUCCESS)
        STATUS_NAME(CUDNN_STATUS_NOT_INITIALIZED)
        STATUS_NAME(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_DEPRECATED)
        STATUS_NAME(CUDNN_STATUS_LICENSE_ERROR)
        STATUS_NAME(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
        STATUS_NAME(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
        STATUS_NAME(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM)
        STATUS_NAME(CUDNN_STATUS_INVALID_VALUE)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
    }
    return "CUDNN_STATUS_UNKNOWN";
}

#undef STATUS_NAME

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    return create("cudnnCreate", handle);
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    if (handle)
        (void)cudaDeviceSynchronize(); /* an error here belongs to the work, not to us */
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream)
{
    if (!handle)
        return reject(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream", "handle is NULL");
    handle->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *desc)
{
    return create("cudnnCreateTensorDescriptor", desc);
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc)
{
    delete desc;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w)
{
    static const char fn[] = "cudnnSetTensor4dDescriptor";
    if (!desc)
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "descriptor is NULL");
    cudnnStatus_t status = check_layout(fn, format, dataType);
    if (status == CUDNN_STATUS_SUCCESS)
        status = check_dims(fn, n, c, h, w);
    if (status == CUDNN_STATUS_SUCCESS)
        *desc = {true, n, c, h, w, dataType};
    return status;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *desc)
{
    return create("cudnnCreateFilterDescriptor", desc);
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc)
{
    delete desc;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w)
{
    static const char fn[] = "cudnnSetFilter4dDescriptor";
    if (!desc)
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "descriptor is NULL");
    cudnnStatus_t status = check_layout(fn, format, dataType);
    if (status == CUDNN_STATUS_SUCCESS)
        status = check_dims(fn, k, c, h, w);
    if (status == CUDNN_STATUS_SUCCESS)
        *desc = {true, k, c, h, w, dataType};
    return status;
}

cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *desc)
{
    return create("cudnnCreatePoolingDescriptor", desc);
}

cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t desc)
{
    delete desc;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t desc, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t maxpoolingNanOpt,
                                          int windowHeight, int windowWidth,
                                          int verticalPadding, int horizontalPadding,
                                          int verticalStride, int horizontalStride)
{
    if (!desc || (int)mode < CUDNN_POOLING_MAX || mode > CUDNN_POOLING_MAX_DETERMINISTIC ||
        (maxpoolingNanOpt != CUDNN_NOT_PROPAGATE_NAN && maxpoolingNanOpt != CUDNN_PROPAGATE_NAN) ||
        windowHeight < 1 || windowWidth < 1 || verticalPadding < 0 || horizontalPadding < 0 ||
        verticalStride < 1 || horizontalStride < 1)
        return reject(CUDNN_STATUS_BAD_PARAM, "cudnnSetPooling2dDescriptor",
                      "descriptor %p, mode %d, NaN option %d, window %dx%d and strides %dx%d "
                      "(>= 1), pads %dx%d (>= 0)",
                      (void *)desc, (int)mode, (int)maxpoolingNanOpt, windowHeight, windowWidth,
                      verticalStride, horizontalStride, verticalPadding, horizontalPadding);
    *desc = {true,          mode,          maxpoolingNanOpt, windowHeight, windowWidth,
             verticalPadding, horizontalPadding, verticalStride,   horizontalStride};
    return CUDNN_STATUS_SUCCESS;
}

/* The output must have x's n and c and the size cudnnGetPooling2dForwardOutputDim
 * gives, 1 + (in + 2 pad - window) / stride (the emulator insists on it). */
cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc,
                                  const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                  const void *x, const void *beta,
                                  const cudnnTensorDescriptor_t yDesc, void *y)
{
    static const char fn[] = "cudnnPoolingForward";
    if (emu::injected_failure(fn))
        return reject(CUDNN_STATUS_EXECUTION_FAILED, fn, "failure injected (CUDA_EMU_FAIL)");
    if (!handle || !alpha || !beta || !poolingDesc || !xDesc || !yDesc || !poolingDesc->set ||
        !xDesc->set || !yDesc->set)
        return reject(CUDNN_STATUS_BAD_PARAM, fn,
                      "handle, alpha, beta or a descriptor is NULL or was never set");
    const cudnnPoolingStruct &p = *poolingDesc;
    pool_shape s = {xDesc->n * xDesc->c,
                    xDesc->h,
                    xDesc->w,
                    output_dim(xDesc->h, p.pad_h, p.window_h, 1, p.stride_h),
                    output_dim(xDesc->w, p.pad_w, p.window_w, 1, p.stride_w),
                    p.window_h,
                    p.window_w,
                    p.pad_h,
                    p.pad_w,
                    p.stride_h,
                    p.stride_w,
                    p.mode == CUDNN_POOLING_MAX || p.mode == CUDNN_POOLING_MAX_DETERMINISTIC,
                    p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                    p.nan == CUDNN_PROPAGATE_NAN};
    if (yDesc->n != xDesc->n || yDesc->c != xDesc->c || yDesc->h != s.out_h ||
        yDesc->w != s.out_w)
        return reject(CUDNN_STATUS_BAD_PARAM, fn,
                      "output [%d,%d,%d,%d], the %dx%d window on [%d,%d,%d,%d] padded %dx%d "
                      "with strides %dx%d gives [%d,%d,%d,%d]",
                      yDesc->n, yDesc->c, yDesc->h, yDesc->w, p.window_h, p.window_w,
                      xDesc->n, xDesc->c, xDesc->h, xDesc->w, p.pad_h, p.pad_w, p.stride_h,
                      p.stride_w, xDesc->n, xDesc->c, s.out_h, s.out_w);
    if (xDesc->type != CUDNN_DATA_FLOAT || yDesc->type != CUDNN_DATA_FLOAT)
        return reject(CUDNN_STATUS_NOT_SUPPORTED, fn,
                      "the emulator pools float tensors only, not data types %d and %d",
                      (int)xDesc->type, (int)yDesc->type);
    if (!device_floats(fn, "x", x, (size_t)s.planes * s.h * s.w) ||
        !device_floats(fn, "y", y, (size_t)s.planes * s.out_h * s.out_w))
        return CUDNN_STATUS_BAD_PARAM;
    float a = *(const float *)alpha, b = *(const float *)beta;
    const float *in = (const float *)x;
    float *out = (float *)y;
    cudaError_t error = emu::enqueue(handle->stream, fn,
                                     [s, in, out, a, b]() { pooling_forward(s, in, out, a, b); });
    if (error != cudaSuccess)
        return reject(CUDNN_STATUS_EXECUTION_FAILED, fn, "could not queue the work: %s",
                      cudaGetErrorName(error));
    return CUDNN_STATUS_SUCCESS;
}

} // extern "C"
