/*
 * cuBLAS for the linear layer.  cuBLAS is column-major; a row-major
 * c[m,n] = op(a) op(b) is the column-major c^T[n,m] = op(b)^T op(a)^T, so
 * every call swaps the operands and the sizes (row_major_gemm).  TF32 only
 * when enabled (CUBLAS_TF32_TENSOR_OP_MATH); otherwise the default math,
 * which keeps f32 precision.  Outputs are written with = (beta = 0).
 */
#include "cuda/vendor.h"

#include <stdlib.h>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/vendor_api.h"

ct_status ct_cuda_vendor_relu_bwd(const ct_exec *exec, const ct_tensor *node, void *dx,
                                  int64_t count, cudaStream_t stream)
{
    if (exec->epilogue[node->id] != CT_EPILOGUE_RELU_BWD)
        return CT_OK;
    return ct_cuda_relu_backward(node->dtype, count,
                                 ct_exec_data(exec, exec->epilogue_src[node->id]), dx, dx,
                                 stream);
}

ct_status ct_cuda_vendor_bias_grad(const ct_exec *exec, const ct_tensor *node, const void *dy,
                                   int n, int c, int inner, cudaStream_t stream)
{
    float *db = ct_exec_bias_grad(exec, node);
    if (!db)
        return CT_OK;
    return ct_cuda_channel_sum(node->src[1]->dtype, n, c, inner, dy, db, exec->workspace,
                               stream);
}

#ifdef CT_HAVE_CUBLAS

struct ct_cuda_blas {
    cublasHandle_t handle;
    cudaStream_t stream;
};

ct_status ct_cuda_blas_new(cudaStream_t stream, bool tf32, ct_cuda_blas **out)
{
    *out = NULL;
    CT_TRY(ct_cublas_load());
    ct_cuda_blas *blas = calloc(1, sizeof *blas);
    if (!blas)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory");
    blas->stream = stream;
    int code = cublasCreate(&blas->handle);
    if (code != CUBLAS_STATUS_SUCCESS) {
        free(blas);
        return ct_cublas_fail(code, __FILE__, __LINE__, "cublasCreate(&blas->handle)");
    }
    *out = blas;
    code = cublasSetStream(blas->handle, stream);
    if (code != CUBLAS_STATUS_SUCCESS)
        return ct_cublas_fail(code, __FILE__, __LINE__, "cublasSetStream(handle, stream)");
    return ct_cuda_blas_set_tf32(blas, tf32);
}

void ct_cuda_blas_free(ct_cuda_blas *blas)
{
    if (!blas)
        return;
    cublasDestroy(blas->handle);
    free(blas);
}

ct_status ct_cuda_blas_set_tf32(ct_cuda_blas *blas, bool tf32)
{
    if (blas)
        CT_CUBLAS_CALL(cublasSetMathMode(blas->handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                            : CUBLAS_DEFAULT_MATH));
    return CT_OK;
}

bool ct_cuda_blas_supports(const ct_cuda_blas *blas, const ct_tensor *node)
{
    return blas && (node->op == CT_OP_LINEAR || node->op == CT_OP_LINEAR_BWD_DATA ||
                    node->op == CT_OP_LINEAR_BWD_WEIGHT);
}

/* Row-major c[m,n] = op(a)[m,k] op(b)[k,n] (op(a) = a^T when trans_a, a stored [k,m]). */
static ct_status row_major_gemm(ct_cuda_blas *blas, bool trans_a, bool trans_b, int m, int n,
                                int k, const float *a, int lda, const float *b, int ldb,
                                float *c, int ldc)
{
    const float one = 1.0f, zero = 0.0f;
    CT_CUBLAS_CALL(cublasSgemm(blas->handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                               trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, b, ldb, a,
                               lda, &zero, c, ldc));
    return CT_OK;
}

ct_status ct_cuda_blas_run(ct_cuda_blas *blas, const ct_exec *exec, const ct_tensor *node)
{
    const float *a = ct_exec_data(exec, node->src[0]), *b = ct_exec_data(exec, node->src[1]);
    float *out = ct_exec_data(exec, node);
    switch (node->op) {
    case CT_OP_LINEAR: { /* y[n,o] = x . w^T (+ bias) */
        int n = (int)node->src[0]->shape[0], in = (int)node->src[0]->shape[1];
        int o = (int)node->src[1]->shape[0];
        CT_TRY(row_major_gemm(blas, false, true, n, o, in, a, in, b, in, out, o));
        return ct_cuda_add_bias(CT_F32, n, o, 1,
                                node->n_src > 2 ? ct_exec_data(exec, node->src[2]) : NULL,
                                exec->epilogue[node->id] == CT_EPILOGUE_RELU, out,
                                blas->stream);
    }
    case CT_OP_LINEAR_BWD_DATA: { /* dx[n,i] = dy . w */
        int n = (int)node->src[0]->shape[0], o = (int)node->src[1]->shape[0];
        int in = (int)node->src[1]->shape[1];
        CT_TRY(row_major_gemm(blas, false, false, n, in, o, a, o, b, in, out, in));
        return ct_cuda_vendor_relu_bwd(exec, node, out, (int64_t)n * in, blas->stream);
    }
    case CT_OP_LINEAR_BWD_WEIGHT: { /* dw[o,i] = dy^T . x  (src: x, dy) */
        int n = (int)node->src[0]->shape[0], in = (int)node->src[0]->shape[1];
        int o = (int)node->src[1]->shape[1];
        CT_TRY(row_major_gemm(blas, true, false, o, in, n, b, o, a, in, out, in));
        return ct_cuda_vendor_bias_grad(exec, node, b, n, o, 1, blas->stream);
    }
    default:
        return ct_set_error(CT_ERR_INTERNAL, "cuBLAS path asked to run %s",
                            ct_op_name(node->op));
    }
}

#else /* no cuBLAS in this build */

ct_status ct_cuda_blas_new(cudaStream_t stream, bool tf32, ct_cuda_blas **out)
{
    (void)stream;
    (void)tf32;
    *out = NULL;
    return CT_OK;
}

void ct_cuda_blas_free(ct_cuda_blas *blas) { (void)blas; }

ct_status ct_cuda_blas_set_tf32(ct_cuda_blas *blas, bool tf32)
{
    (void)blas;
    (void)tf32;
    return CT_OK;
}

bool ct_cuda_blas_supports(const ct_cuda_blas *blas, const ct_tensor *node)
{
    (void)blas;
    (void)node;
    return false;
}

ct_status ct_cuda_blas_run(ct_cuda_blas *blas, const ct_exec *exec, const ct_tensor *node)
{
    (void)blas;
    (void)exec;
    return ct_set_error(CT_ERR_INTERNAL, "cuBLAS path asked to run %s in a build without it",
                        ct_op_name(node->op));
}

#endif
