/*
 * The CUDA backend's state, shared by backend.c (the vtable, memory) and
 * table.c (the op table).
 */
#ifndef CT_CUDA_BACKEND_H
#define CT_CUDA_BACKEND_H

#include <stdbool.h>

#include <cuda_runtime_api.h>

#include "cuda/allocator.h"
#include "cuda/vendor.h"
#include "graph/backend.h"

typedef struct cuda_backend {
    int device;
    char gpu_name[256];
    int major, minor;              /* compute capability */
    cudaStream_t stream;
    cudaStream_t copy_stream;      /* staged inputs' copies (staging.c), made at first use */
    ct_cuda_allocator allocator;
    ct_cuda_blas *blas;
    ct_cuda_dnn *dnn;
    bool tf32;
    bool device_current;           /* cudaSetDevice done for this step */
    int *bad_row;                  /* device: first row with a bad label (cross-entropy) */
    unsigned *tickets;             /* device: CT_CUDA_TICKETS, the stream's (kernels.h) */
    const ct_tensor *ce_node;      /* the cross-entropy node of this step, if any */
    const void *ce_labels;
} cuda_backend;

/* Staged inputs (staging.c; graph/backend.h's stage_*). */
ct_status ct_cuda_stage_new(ct_backend *backend, size_t bytes, void **stage);
ct_status ct_cuda_stage_put(ct_backend *backend, void *stage, const void *host, size_t bytes);
ct_status ct_cuda_stage_take(ct_backend *backend, void *stage, void *dst, size_t bytes);
void ct_cuda_stage_free(ct_backend *backend, void *stage);

/* The op table (table.c; graph/impl.h). */
extern const ct_impl *const ct_cuda_impls[CT_OP_COUNT][CT_MAX_IMPLS];

/* An implementation named `label` that runs fn(cuda_backend *, exec, node)
 * on the backend's stream; `linkage` static, or empty for one another
 * table file lists. */
#define CT_CUDA_IMPL(linkage, var, label, fn, ...)                                         \
    static ct_status var##_run(ct_backend *backend, const ct_exec *e, const ct_tensor *n) \
    {                                                                                     \
        return fn(backend->impl, e, n);                                                   \
    }                                                                                     \
    linkage const ct_impl var = {.name = label, .run = var##_run, __VA_ARGS__}

/* The optimizers' updates, each parameter's or all of them in a few
 * launches, and fp16's finite check (table_optim.c). */
extern const ct_impl ct_cuda_sgd_update_impl, ct_cuda_adam_update_impl, ct_cuda_check_finite_impl;

/* The vendor libraries: cuDNN and cuBLAS (table_vendor.c). */
extern const ct_impl ct_cuda_cudnn, ct_cuda_cublas;

/* Convolution and linear of 16-bit nodes on tensor cores (table_tc.c). */
extern const ct_impl ct_cuda_conv2d_tc, ct_cuda_conv2d_bwd_data_tc, ct_cuda_conv2d_bwd_weight_tc;
extern const ct_impl ct_cuda_linear_tc, ct_cuda_linear_bwd_data_tc, ct_cuda_linear_bwd_weight_tc;

#endif
