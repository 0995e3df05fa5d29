/*
 * cuBLAS for the linear layer.  cuBLAS is column-major; a row-major
 * c[m,n] = op(a) op(b) is the column-major c^T[n,m] = op(b)^T op(a)^T, so
 * every call swaps the operands and the sizes (row_major_gemm).  TF32 only
 * when enabled (CUBLAS_TF32_TENSOR_OP_MATH); otherwise the default math,
 * which keeps f32 precision.  Outputs are written with = (beta = 0).
 *
 * The linear layers of a bf16 or fp16 graph run here too (cublasGemmEx: A
 * and B of the node's dtype, the sums f32, CUBLAS_COMPUTE_32F), beside the
 * tensor-core kernels (table_tc.c).  A forward pass with a bias takes its
 * product in f32 into the workspace, adds the bias (and relu) there and
 * rounds once into y, as every other path does; the others write their
 * 16-bit output directly (a fused relu or relu_bwd after it rounds
 * nothing).
 */
#include "cuda/vendor.h"

#include <stdlib.h>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/vendor_api.h"
#include "graph/impl.h"

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

/* A 16-bit forward pass with a bias: its f32 product in the workspace. */
size_t ct_cuda_blas_workspace(const ct_tensor *node)
{
    bool biased_half = node->op == CT_OP_LINEAR && ct_dtype_is_half(node->dtype) &&
                       node->n_src > 2;
    return biased_half ? (size_t)ct_tensor_numel(node) * sizeof(float) : 0;
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

/* f32 nodes; and linear layers of a bf16 or fp16 graph (ct_half_layer_inputs). */
bool ct_cuda_blas_supports(const ct_cuda_blas *blas, const ct_tensor *node)
{
    bool linear = node->op == CT_OP_LINEAR || node->op == CT_OP_LINEAR_BWD_DATA ||
                  node->op == CT_OP_LINEAR_BWD_WEIGHT;
    if (!blas || !linear)
        return false;
    return ct_dtype_is_half(node->dtype) ? ct_half_layer_inputs(node) : node->dtype == CT_F32;
}

static cudaDataType data_type(ct_dtype dtype)
{
    return dtype == CT_BF16 ? CUDA_R_16BF : dtype == CT_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* Row-major c[m,n] = op(a)[m,k] op(b)[k,n] (op(a) = a^T when trans_a, a stored
 * [k,m]); a and b of dtype `in`, c of `out` (f32, or `in`). */
static ct_status row_major_gemm(ct_cuda_blas *blas, ct_dtype in, ct_dtype out, bool trans_a,
                                bool trans_b, int m, int n, int k, const void *a, int lda,
                                const void *b, int ldb, void *c, int ldc)
{
    const float one = 1.0f, zero = 0.0f;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (in == CT_F32 && out == CT_F32)
        CT_CUBLAS_CALL(cublasSgemm(blas->handle, op_b, op_a, n, m, k, &one, b, ldb, a, lda,
                                   &zero, c, ldc));
    else
        CT_CUBLAS_CALL(cublasGemmEx(blas->handle, op_b, op_a, n, m, k, &one, b, data_type(in),
                                    ldb, a, data_type(in), lda, &zero, c, data_type(out), ldc,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return CT_OK;
}

/* y[n,o] = x . w^T (+ bias), relu if fused; a 16-bit y with a bias from its
 * f32 product in the workspace, rounded once. */
static ct_status linear_forward(ct_cuda_blas *blas, const ct_exec *exec, const ct_tensor *node)
{
    int n = (int)node->src[0]->shape[0], in = (int)node->src[0]->shape[1];
    int o = (int)node->src[1]->shape[0];
    const float *bias = node->n_src > 2 ? ct_exec_data(exec, node->src[2]) : NULL;
    bool relu = exec->epilogue[node->id] == CT_EPILOGUE_RELU;
    ct_dtype dtype = node->dtype;
    void *y = ct_exec_data(exec, node);
    bool widened = ct_dtype_is_half(dtype) && bias;
    void *product = widened ? exec->workspace : y;
    CT_TRY(row_major_gemm(blas, dtype, widened ? CT_F32 : dtype, false, true, n, o, in,
                          ct_exec_data(exec, node->src[0]), in,
                          ct_exec_data(exec, node->src[1]), in, product, o));
    CT_TRY(ct_cuda_add_bias(widened ? CT_F32 : dtype, n, o, 1, bias, relu, product,
                            blas->stream));
    return widened ? ct_cuda_cast((int64_t)n * o, product, CT_F32, y, dtype, blas->stream)
                   : CT_OK;
}

ct_status ct_cuda_blas_run(ct_cuda_blas *blas, const ct_exec *exec, const ct_tensor *node)
{
    const void *a = ct_exec_data(exec, node->src[0]), *b = ct_exec_data(exec, node->src[1]);
    void *out = ct_exec_data(exec, node);
    ct_dtype dtype = node->dtype;
    switch (node->op) {
    case CT_OP_LINEAR:
        return linear_forward(blas, exec, node);
    case CT_OP_LINEAR_BWD_DATA: { /* dx[n,i] = dy . w */
        int n = (int)node->src[0]->shape[0], o = (int)node->src[1]->shape[0];
        int in = (int)node->src[1]->shape[1];
        CT_TRY(row_major_gemm(blas, dtype, dtype, false, false, n, in, o, a, o, b, in, out,
                              in));
        return ct_cuda_vendor_relu_bwd(exec, node, out, (int64_t)n * in, blas->stream);
    }
    case CT_OP_LINEAR_BWD_WEIGHT: { /* dw[o,i] = dy^T . x  (src: x, dy) */
        int n = (int)node->src[0]->shape[0], in = (int)node->src[0]->shape[1];
        int o = (int)node->src[1]->shape[1];
        CT_TRY(row_major_gemm(blas, dtype, dtype, true, false, o, in, n, b, o, a, in, out,
                              in));
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
