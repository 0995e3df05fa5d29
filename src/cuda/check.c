/* The failure half of the check macros (check.h). */
#include "cuda/check.h"

#include "core/error.h"

#include "cuda/vendor_api.h"

ct_status ct_cuda_fail(cudaError_t error, const char *file, int line, const char *call)
{
    ct_status status = error == cudaErrorMemoryAllocation ? CT_ERR_MEMORY : CT_ERR_DEVICE;
    return ct_set_error(status, "%s:%d: %s failed: %s (%s)", file, line, call,
                        cudaGetErrorName(error), cudaGetErrorString(error));
}

ct_status ct_cublas_fail(int code, const char *file, int line, const char *call)
{
#ifdef CT_HAVE_CUBLAS
    cublasStatus_t status = (cublasStatus_t)code;
    return ct_set_error(status == CUBLAS_STATUS_ALLOC_FAILED ? CT_ERR_MEMORY : CT_ERR_DEVICE,
                        "%s:%d: %s failed: %s (%s)", file, line, call,
                        cublasGetStatusName(status), cublasGetStatusString(status));
#else
    return ct_set_error(CT_ERR_INTERNAL, "%s:%d: %s failed with cuBLAS status %d", file, line,
                        call, code);
#endif
}

ct_status ct_cudnn_fail(int code, const char *file, int line, const char *call)
{
#ifdef CT_HAVE_CUDNN
    cudnnStatus_t status = (cudnnStatus_t)code;
#if CUDNN_MAJOR >= 9
    bool out_of_memory = status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                         status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
#else
    bool out_of_memory = status == CUDNN_STATUS_ALLOC_FAILED;
#endif
    return ct_set_error(out_of_memory ? CT_ERR_MEMORY : CT_ERR_DEVICE,
                        "%s:%d: %s failed: %s", file, line, call, cudnnGetErrorString(status));
#else
    return ct_set_error(CT_ERR_INTERNAL, "%s:%d: %s failed with cuDNN status %d", file, line,
                        call, code);
#endif
}
