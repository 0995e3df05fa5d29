/*
 * The CUDA op table's vendor entries (table.c lists them after the native
 * kernels): cuDNN for convolution and pooling forward (dnn.c), cuBLAS for
 * linear (blas.c).
 */
#include <string.h>

#include "cuda/backend_impl.h"
#include "cuda/vendor.h"
#include "graph/impl.h"

static bool cudnn_supports(const ct_backend *backend, const ct_tensor *node)
{
    return ct_cuda_dnn_supports(((cuda_backend *)backend->impl)->dnn, node);
}

static bool cudnn_ready(const ct_backend *backend)
{
    return ((cuda_backend *)backend->impl)->dnn != NULL;
}

/* The algorithm is chosen at plan time, here (once per shape; cached; under
 * `auto` the fastest that cuDNN times); a shape with none runs another
 * implementation and needs no workspace. */
static size_t cudnn_workspace(const ct_backend *backend, const ct_tensor *node)
{
    size_t bytes = 0;
    bool timed = strcmp(backend->kernels, "auto") == 0;
    ct_cuda_dnn *dnn = ((cuda_backend *)backend->impl)->dnn;
    return ct_cuda_dnn_workspace(dnn, node, timed, &bytes) == CT_OK ? bytes : 0;
}

static ct_status run_cudnn(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_dnn_run(b->dnn, e, n);
}

static bool cublas_supports(const ct_backend *backend, const ct_tensor *node)
{
    return ct_cuda_blas_supports(((cuda_backend *)backend->impl)->blas, node);
}

static bool cublas_ready(const ct_backend *backend)
{
    return ((cuda_backend *)backend->impl)->blas != NULL;
}

static size_t cublas_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cuda_blas_workspace(node);
}

static ct_status run_cublas(cuda_backend *b, const ct_exec *e, const ct_tensor *n)
{
    return ct_cuda_blas_run(b->blas, e, n);
}

/* The vendor calls apply a fused relu with the bias (ct_cuda_add_bias); a
 * fused bias gradient runs channel_sum's kernel after cuDNN's or cuBLAS's
 * weight gradient, a fused relu_bwd relu_bwd's kernel after their backward
 * data (ct_cuda_relu_backward_fused). */
CT_CUDA_IMPL(, ct_cuda_cudnn, "cudnn", run_cudnn, .kind = CT_IMPL_VENDOR,
             .supports = cudnn_supports, .ready = cudnn_ready, .workspace = cudnn_workspace,
             .half = true, .fuses = CT_FUSES_RELU | CT_FUSES_BIAS_GRAD | CT_FUSES_RELU_BWD);
CT_CUDA_IMPL(, ct_cuda_cublas, "cublas", run_cublas, .kind = CT_IMPL_VENDOR,
             .supports = cublas_supports, .ready = cublas_ready, .workspace = cublas_workspace,
             .half = true, .fuses = CT_FUSES_RELU | CT_FUSES_BIAS_GRAD | CT_FUSES_RELU_BWD);
