/*
 * cuBLAS, cuDNN and NCCL, loaded when first used (dlopen), not linked: a CUDA
 * build of cuttle starts on a machine without them (or without any GPU),
 * and a command that never touches the GPU does not pay to map them
 * (about 0.2 s and 220 MB for cuBLAS, cuBLASLt and cuDNN).
 *
 * Include this instead of <cublas_v2.h>, <cudnn.h> and <nccl.h>.  Every function
 * cuttle calls is listed below; after ct_cublas_load() or ct_cudnn_load()
 * succeeded, the macros at the end make a plain call such as
 * `cublasSgemm(...)` go through the loaded table, so blas.c and dnn.c read
 * as ordinary library code (and error messages quote the call as written).
 * A call before its library loaded is a bug (a NULL function pointer).
 *
 * The library files are the sonames of the major versions cuttle was built
 * against (libcublas.so.13, libcudnn.so.9, libnccl.so.2), found as the
 * dynamic linker finds libraries (the build's rpath, LD_LIBRARY_PATH,
 * ld.so.cache); CUTTLE_CUBLAS, CUTTLE_CUDNN and CUTTLE_NCCL name other files.  The emulated build
 * (make CUDA=emu) resolves the same names in its shims (emu/libraries.cpp).
 */
#ifndef CT_CUDA_VENDOR_API_H
#define CT_CUDA_VENDOR_API_H

#include "cuttle.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CT_HAVE_CUBLAS
#include <cublas_v2.h>

/* The symbols, as the library exports them (cublas_v2.h maps cublasCreate
 * to cublasCreate_v2, and so on). */
#define CT_CUBLAS_FUNCTIONS(X)                                                             \
    X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetMathMode)      \
    X(cublasSgemm_v2) X(cublasGemmEx) X(cublasGetProperty) X(cublasGetStatusName)           \
    X(cublasGetStatusString)

#define CT_VENDOR_FIELD(name) __typeof__(name) *name;
typedef struct ct_cublas_api {
    CT_CUBLAS_FUNCTIONS(CT_VENDOR_FIELD)
} ct_cublas_api;
extern ct_cublas_api ct_cublas;
#endif

#ifdef CT_HAVE_CUDNN
#include <cudnn.h>

#define CT_CUDNN_FUNCTIONS(X)                                                              \
    X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy)                \
    X(cudnnSetStream) X(cudnnCreateTensorDescriptor) X(cudnnDestroyTensorDescriptor)        \
    X(cudnnSetTensor4dDescriptor) X(cudnnCreateFilterDescriptor)                            \
    X(cudnnDestroyFilterDescriptor) X(cudnnSetFilter4dDescriptor)                           \
    X(cudnnCreateConvolutionDescriptor) X(cudnnDestroyConvolutionDescriptor)                \
    X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount)                     \
    X(cudnnSetConvolutionMathType) X(cudnnGetConvolution2dForwardOutputDim)                 \
    X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                        \
    X(cudnnFindConvolutionForwardAlgorithm) X(cudnnFindConvolutionBackwardDataAlgorithm)    \
    X(cudnnFindConvolutionBackwardFilterAlgorithm)                                          \
    X(cudnnGetConvolutionForwardWorkspaceSize)                                              \
    X(cudnnGetConvolutionBackwardDataWorkspaceSize)                                         \
    X(cudnnGetConvolutionBackwardFilterWorkspaceSize) X(cudnnConvolutionForward)            \
    X(cudnnConvolutionBackwardData) X(cudnnConvolutionBackwardFilter)                       \
    X(cudnnCreatePoolingDescriptor) X(cudnnDestroyPoolingDescriptor)                        \
    X(cudnnSetPooling2dDescriptor) X(cudnnPoolingForward)

typedef struct ct_cudnn_api {
    CT_CUDNN_FUNCTIONS(CT_VENDOR_FIELD)
} ct_cudnn_api;
extern ct_cudnn_api ct_cudnn;
#endif

#ifdef CT_HAVE_NCCL
#include <nccl.h>

/* What data-parallel training on GPUs calls (dist/nccl.c). */
#define CT_NCCL_FUNCTIONS(X)                                                               \
    X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommInitAll)            \
    X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommGetAsyncError) X(ncclCommCount)          \
    X(ncclCommCuDevice) X(ncclCommUserRank) X(ncclAllReduce) X(ncclBroadcast)              \
    X(ncclGroupStart) X(ncclGroupEnd) X(ncclGetErrorString) X(ncclGetLastError)

typedef struct ct_nccl_api {
    CT_NCCL_FUNCTIONS(CT_VENDOR_FIELD)
} ct_nccl_api;
extern ct_nccl_api ct_nccl;
#endif

/* Load the library and every function above, once per process (later
 * calls return the first answer).  CT_OK, or CT_ERR_UNSUPPORTED (the build
 * has no such library, or it could not be loaded) with the reason in
 * ct_last_error(), which ct_cublas_why()/ct_cudnn_why() also give later
 * (NULL once loaded). */
ct_status ct_cublas_load(void);
ct_status ct_cudnn_load(void);
ct_status ct_nccl_load(void);
const char *ct_cublas_why(void);
const char *ct_cudnn_why(void);
const char *ct_nccl_why(void);

#ifdef __cplusplus
}
#endif

/* The calls, through the tables (vendor_api.c defines the tables and must
 * not see these). */
#ifndef CT_VENDOR_API_TABLES
#ifdef CT_HAVE_CUBLAS
#define cublasCreate_v2 (ct_cublas.cublasCreate_v2)
#define cublasDestroy_v2 (ct_cublas.cublasDestroy_v2)
#define cublasSetStream_v2 (ct_cublas.cublasSetStream_v2)
#define cublasSetMathMode (ct_cublas.cublasSetMathMode)
#define cublasSgemm_v2 (ct_cublas.cublasSgemm_v2)
#define cublasGemmEx (ct_cublas.cublasGemmEx)
#define cublasGetProperty (ct_cublas.cublasGetProperty)
#define cublasGetStatusName (ct_cublas.cublasGetStatusName)
#define cublasGetStatusString (ct_cublas.cublasGetStatusString)
#endif
#ifdef CT_HAVE_CUDNN
#define cudnnGetVersion (ct_cudnn.cudnnGetVersion)
#define cudnnGetErrorString (ct_cudnn.cudnnGetErrorString)
#define cudnnCreate (ct_cudnn.cudnnCreate)
#define cudnnDestroy (ct_cudnn.cudnnDestroy)
#define cudnnSetStream (ct_cudnn.cudnnSetStream)
#define cudnnCreateTensorDescriptor (ct_cudnn.cudnnCreateTensorDescriptor)
#define cudnnDestroyTensorDescriptor (ct_cudnn.cudnnDestroyTensorDescriptor)
#define cudnnSetTensor4dDescriptor (ct_cudnn.cudnnSetTensor4dDescriptor)
#define cudnnCreateFilterDescriptor (ct_cudnn.cudnnCreateFilterDescriptor)
#define cudnnDestroyFilterDescriptor (ct_cudnn.cudnnDestroyFilterDescriptor)
#define cudnnSetFilter4dDescriptor (ct_cudnn.cudnnSetFilter4dDescriptor)
#define cudnnCreateConvolutionDescriptor (ct_cudnn.cudnnCreateConvolutionDescriptor)
#define cudnnDestroyConvolutionDescriptor (ct_cudnn.cudnnDestroyConvolutionDescriptor)
#define cudnnSetConvolution2dDescriptor (ct_cudnn.cudnnSetConvolution2dDescriptor)
#define cudnnSetConvolutionGroupCount (ct_cudnn.cudnnSetConvolutionGroupCount)
#define cudnnSetConvolutionMathType (ct_cudnn.cudnnSetConvolutionMathType)
#define cudnnGetConvolution2dForwardOutputDim (ct_cudnn.cudnnGetConvolution2dForwardOutputDim)
#define cudnnGetConvolutionForwardAlgorithm_v7 (ct_cudnn.cudnnGetConvolutionForwardAlgorithm_v7)
#define cudnnGetConvolutionBackwardDataAlgorithm_v7                                         \
    (ct_cudnn.cudnnGetConvolutionBackwardDataAlgorithm_v7)
#define cudnnGetConvolutionBackwardFilterAlgorithm_v7                                       \
    (ct_cudnn.cudnnGetConvolutionBackwardFilterAlgorithm_v7)
#define cudnnFindConvolutionForwardAlgorithm (ct_cudnn.cudnnFindConvolutionForwardAlgorithm)
#define cudnnFindConvolutionBackwardDataAlgorithm                                           \
    (ct_cudnn.cudnnFindConvolutionBackwardDataAlgorithm)
#define cudnnFindConvolutionBackwardFilterAlgorithm                                         \
    (ct_cudnn.cudnnFindConvolutionBackwardFilterAlgorithm)
#define cudnnGetConvolutionForwardWorkspaceSize (ct_cudnn.cudnnGetConvolutionForwardWorkspaceSize)
#define cudnnGetConvolutionBackwardDataWorkspaceSize                                        \
    (ct_cudnn.cudnnGetConvolutionBackwardDataWorkspaceSize)
#define cudnnGetConvolutionBackwardFilterWorkspaceSize                                      \
    (ct_cudnn.cudnnGetConvolutionBackwardFilterWorkspaceSize)
#define cudnnConvolutionForward (ct_cudnn.cudnnConvolutionForward)
#define cudnnConvolutionBackwardData (ct_cudnn.cudnnConvolutionBackwardData)
#define cudnnConvolutionBackwardFilter (ct_cudnn.cudnnConvolutionBackwardFilter)
#define cudnnCreatePoolingDescriptor (ct_cudnn.cudnnCreatePoolingDescriptor)
#define cudnnDestroyPoolingDescriptor (ct_cudnn.cudnnDestroyPoolingDescriptor)
#define cudnnSetPooling2dDescriptor (ct_cudnn.cudnnSetPooling2dDescriptor)
#define cudnnPoolingForward (ct_cudnn.cudnnPoolingForward)
#endif
#ifdef CT_HAVE_NCCL
#define ncclGetVersion (ct_nccl.ncclGetVersion)
#define ncclGetUniqueId (ct_nccl.ncclGetUniqueId)
#define ncclCommInitRank (ct_nccl.ncclCommInitRank)
#define ncclCommInitAll (ct_nccl.ncclCommInitAll)
#define ncclCommDestroy (ct_nccl.ncclCommDestroy)
#define ncclCommAbort (ct_nccl.ncclCommAbort)
#define ncclCommGetAsyncError (ct_nccl.ncclCommGetAsyncError)
#define ncclCommCount (ct_nccl.ncclCommCount)
#define ncclCommCuDevice (ct_nccl.ncclCommCuDevice)
#define ncclCommUserRank (ct_nccl.ncclCommUserRank)
#define ncclAllReduce (ct_nccl.ncclAllReduce)
#define ncclBroadcast (ct_nccl.ncclBroadcast)
#define ncclGroupStart (ct_nccl.ncclGroupStart)
#define ncclGroupEnd (ct_nccl.ncclGroupEnd)
#define ncclGetErrorString (ct_nccl.ncclGetErrorString)
#define ncclGetLastError (ct_nccl.ncclGetLastError)
#endif
#endif

#endif
