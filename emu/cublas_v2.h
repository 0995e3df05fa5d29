/*
 * The emulated device's cuBLAS: the subset that cuttle's vendor glue calls
 * (src/cuda/blas.c, check.c, probe.c), in C.
 *
 * This header stands in for the toolkit's cublas_v2.h when cuttle is built
 * with `make CUDA=emu`: the same names, types and numeric codes, implemented
 * by emu/cublas.cpp on the CPU.  It is written from NVIDIA's public cuBLAS
 * documentation and exists to test cuttle's glue, not NVIDIA's library.
 */
#ifndef CT_EMU_CUBLAS_V2_H
#define CT_EMU_CUBLAS_V2_H

#include "cuda_runtime_api.h"

/* CUBLAS_VERSION is major * 10000 + minor * 100 + patch, as NVIDIA's is. */
#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 1
#define CUBLAS_VER_PATCH 0
#define CUBLAS_VER_BUILD 0
#define CUBLAS_VERSION (CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cublasContext *cublasHandle_t;

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum {
    CUBLAS_OP_N = 0,
    CUBLAS_OP_T = 1,
    CUBLAS_OP_C = 2
} cublasOperation_t;

/* A base mode, optionally or-ed with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION. */
typedef enum {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1, /* deprecated by NVIDIA; not modelled here */
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
} cublasMath_t;

/* library_types.h's type in the toolkit; guarded so another emulated
 * library header may declare it too. */
#ifndef CT_EMU_LIBRARY_PROPERTY_TYPE
#define CT_EMU_LIBRARY_PROPERTY_TYPE
typedef enum libraryPropertyType_t {
    MAJOR_VERSION = 0,
    MINOR_VERSION = 1,
    PATCH_LEVEL = 2
} libraryPropertyType;
#endif

/* library_types.h's data types that cublasGemmEx takes here, and the
 * compute type and algorithm it is called with (the toolkit's values). */
#ifndef CT_EMU_CUDA_DATA_TYPE
#define CT_EMU_CUDA_DATA_TYPE
typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_16F = 2,
    CUDA_R_16BF = 14
} cudaDataType;
#endif
typedef enum {
    CUBLAS_COMPUTE_32F = 68
} cublasComputeType_t;
typedef enum {
    CUBLAS_GEMM_DEFAULT = -1
} cublasGemmAlgo_t;

/* As the toolkit's header: the v2 API under the plain names. */
#define cublasCreate cublasCreate_v2
#define cublasDestroy cublasDestroy_v2
#define cublasSetStream cublasSetStream_v2
#define cublasGetStream cublasGetStream_v2
#define cublasSgemm cublasSgemm_v2

cublasStatus_t cublasCreate(cublasHandle_t *handle);
/* Waits for the device (cudaDeviceSynchronize), as NVIDIA documents. */
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t *stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode);
cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value);
/* "CUBLAS_STATUS_..." and a description; static strings. */
const char *cublasGetStatusName(cublasStatus_t status);
const char *cublasGetStatusString(cublasStatus_t status);

/* C = alpha op(A) op(B) + beta C, column-major: op(A) m x k, op(B) k x n,
 * C m x n.  alpha and beta are host pointers (the host pointer mode). */
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc);

/* The same product with A and B of one type (CUDA_R_16F or CUDA_R_16BF, or
 * CUDA_R_32F), C of theirs or CUDA_R_32F, computed in float
 * (CUBLAS_COMPUTE_32F): the products of the widened inputs summed in float,
 * each C rounded once; alpha and beta are floats. */
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);

#ifdef __cplusplus
}
#endif

#endif
