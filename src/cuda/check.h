/*
 * Checking CUDA, cuBLAS and cuDNN calls.  Every call goes through one of
 * these macros, and every kernel launch goes through CT_CUDA_LAUNCH (common.cuh): a
 * failure becomes a ct_status (CT_ERR_MEMORY when memory ran out,
 * CT_ERR_DEVICE otherwise) with a message that names the file, the line,
 * the call and the library's own description, and the enclosing function
 * returns it.  Usable from C and from CUDA C++.
 */
#ifndef CT_CUDA_CHECK_H
#define CT_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "cuttle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record the failure of `call` at file:line; returns its status. */
ct_status ct_cuda_fail(cudaError_t error, const char *file, int line, const char *call);
ct_status ct_cublas_fail(int status, const char *file, int line, const char *call);
ct_status ct_cudnn_fail(int status, const char *file, int line, const char *call);

#ifdef __cplusplus
}
#endif

#define CT_CUDA_CALL(call)                                                   \
    do {                                                                     \
        cudaError_t ct_cuda_error_ = (call);                                 \
        if (ct_cuda_error_ != cudaSuccess)                                   \
            return ct_cuda_fail(ct_cuda_error_, __FILE__, __LINE__, #call);  \
    } while (0)

/* After a launch: a bad launch configuration or an earlier asynchronous
 * error (CT_CUDA_LAUNCH in common.cuh calls it). */
#define CT_CUDA_LAUNCH_CHECK(kernel_name)                                                \
    do {                                                                                 \
        cudaError_t ct_cuda_error_ = cudaGetLastError();                                 \
        if (ct_cuda_error_ != cudaSuccess)                                               \
            return ct_cuda_fail(ct_cuda_error_, __FILE__, __LINE__, "launch of " kernel_name); \
    } while (0)

/* The same for a launch named by a string that is not a literal. */
#define CT_CUDA_LAUNCH_CHECK_NAMED(name)                                                 \
    do {                                                                                 \
        cudaError_t ct_cuda_error_ = cudaGetLastError();                                 \
        if (ct_cuda_error_ != cudaSuccess)                                               \
            return ct_cuda_fail(ct_cuda_error_, __FILE__, __LINE__, name);               \
    } while (0)

#define CT_CUBLAS_CALL(call)                                                     \
    do {                                                                         \
        int ct_cublas_status_ = (int)(call);                                     \
        if (ct_cublas_status_ != 0)                                              \
            return ct_cublas_fail(ct_cublas_status_, __FILE__, __LINE__, #call); \
    } while (0)

#define CT_CUDNN_CALL(call)                                                    \
    do {                                                                       \
        int ct_cudnn_status_ = (int)(call);                                    \
        if (ct_cudnn_status_ != 0)                                             \
            return ct_cudnn_fail(ct_cudnn_status_, __FILE__, __LINE__, #call); \
    } while (0)

#endif
