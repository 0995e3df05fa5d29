/*
 * The CUDA backend's state, shared by backend.c (the vtable, memory, kernel
 * choice) and table.c (the native op table).
 */
#ifndef CT_CUDA_BACKEND_H
#define CT_CUDA_BACKEND_H

#include <stdbool.h>

#include <cuda_runtime_api.h>

#include "cuda/allocator.h"
#include "cuda/vendor.h"
#include "graph/backend.h"

enum { CT_CUDA_KEY_INTS = 3 * CT_MAX_DIMS + 12 };

typedef enum kernels_mode { KERNELS_NATIVE = 0, KERNELS_VENDOR, KERNELS_AUTO } kernels_mode;

/* What the backend learned about one node shape (op, TF32, shapes, attributes). */
typedef struct tuned {
    int64_t key[CT_CUDA_KEY_INTS];
    bool timed;         /* auto mode timed both implementations */
    bool vendor;        /* ... and the vendor library was faster */
    bool vendor_failed; /* the vendor library failed on it: native from then on */
} tuned;

typedef struct cuda_backend {
    int device;
    char gpu_name[256];
    cudaStream_t stream;
    cudaEvent_t tune_start, tune_stop;
    ct_cuda_allocator allocator;
    ct_cuda_blas *blas;
    ct_cuda_dnn *dnn;
    kernels_mode kernels;
    bool tf32;
    bool device_current;           /* cudaSetDevice done for this step */
    int vendor_fallbacks;          /* vendor calls that failed and ran native instead */
    uint64_t refused_ops;          /* test hook: ops (bit per ct_op) it claims not to run */
    tuned *choices;
    int n_choices, choices_capacity;
    int *bad_row;                  /* device: first row with a bad label (cross-entropy) */
    const ct_tensor *ce_node;      /* the cross-entropy node of this step, if any */
    const void *ce_labels;
} cuda_backend;

/* The native op table (table.c): whether an op has a kernel, and running it. */
bool ct_cuda_native_has(ct_op op);
ct_status ct_cuda_run_native(cuda_backend *b, const ct_exec *exec, const ct_tensor *node);

#endif
