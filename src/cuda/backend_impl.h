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
    ct_cuda_allocator allocator;
    ct_cuda_blas *blas;
    ct_cuda_dnn *dnn;
    bool tf32;
    bool device_current;           /* cudaSetDevice done for this step */
    int *bad_row;                  /* device: first row with a bad label (cross-entropy) */
    const ct_tensor *ce_node;      /* the cross-entropy node of this step, if any */
    const void *ce_labels;
} cuda_backend;

/* The op table (table.c; graph/impl.h). */
extern const ct_impl *const ct_cuda_impls[CT_OP_COUNT][CT_MAX_IMPLS];

/* Convolution and linear of 16-bit nodes on tensor cores (table_tc.c). */
extern const ct_impl ct_cuda_conv2d_tc, ct_cuda_conv2d_bwd_data_tc, ct_cuda_conv2d_bwd_weight_tc;
extern const ct_impl ct_cuda_linear_tc, ct_cuda_linear_bwd_data_tc, ct_cuda_linear_bwd_weight_tc;

#endif
