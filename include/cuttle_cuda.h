/*
 * cuttle_cuda.h — what the public API offers about the CUDA side of this
 * build and machine (what `cuttle doctor` reports): the library versions
 * compiled in and loaded, the GPUs, and whether this binary carries machine
 * code for each.  Every build has these functions: one without a CUDA
 * backend reports no device, with the reason.
 *
 * The backend itself is used through cuttle.h: ct_backend_new("cuda:0").
 */
#ifndef CUTTLE_CUDA_H
#define CUTTLE_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "cuttle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Versions: 0 when unknown or absent.  Encoded as the libraries do
 * (CUDA 13000 = 13.0; cuBLAS 130100 = 13.1.0; cuDNN 91900 = 9.19.0;
 * NCCL 22809 = 2.28.9). */
typedef struct ct_cuda_versions {
    int driver;           /* cudaDriverGetVersion: the newest CUDA the driver runs */
    int runtime_built;    /* CUDART_VERSION cuttle was compiled with */
    int runtime_loaded;   /* cudaRuntimeGetVersion (static cudart: the same) */
    int cublas_built, cublas_loaded;
    int cudnn_built, cudnn_loaded;
    const char *cublas_error;    /* why cuBLAS is not loaded (absent, no such file), or NULL */
    const char *cudnn_error;     /* the same for cuDNN */
    int nccl_built, nccl_loaded; /* loaded: the NCCL data-parallel training uses */
    const char *nccl_error;      /* why NCCL is not loaded, or NULL */
    const char *driver_error;    /* why the driver could not be asked, or NULL */
    bool emulated;               /* the emulated device (make CUDA=emu): no driver, shims */
} ct_cuda_versions;

CT_API void ct_cuda_probe_versions(ct_cuda_versions *out);

typedef struct ct_cuda_device_info {
    char name[256];
    int major, minor;            /* compute capability */
    int sm_count;
    size_t memory_bytes;
    size_t shared_per_block;     /* opt-in maximum */
    bool has_sass;               /* the binary has machine code this GPU runs */
    int sass_arch;               /* the sm_XY it runs (e.g. 80 on an 8.6 GPU), 0 if none */
    bool has_ptx;                /* PTX it can compile at load time */
} ct_cuda_device_info;

/* Number of GPUs (0 with *why set when there are none, no driver, or no
 * CUDA backend in this build). */
CT_API int ct_cuda_probe_device_count(const char **why);
CT_API ct_status ct_cuda_probe_device(int device, ct_cuda_device_info *out);
/* The architectures compiled into this binary: "80 86 89 90" ("" without
 * CUDA), and PTX's (0 without CUDA). */
CT_API const char *ct_cuda_probe_archs(void);
CT_API int ct_cuda_probe_ptx_arch(void);

#ifdef __cplusplus
}
#endif

/* For the CUDA kernels of a custom op (ct_custom_op, cuttle.h), in a .cu
 * file: CT_LAUNCH(kernel, grid, block, shared_bytes, call->stream, args...)
 * is kernel<<<grid, block, shared_bytes, stream>>>(args...) under nvcc, and
 * the emulator's launcher when the file is compiled for cuttle's emulated
 * device (make CUDA=emu), so the same source runs in both.  It returns
 * CT_OK, or CT_ERR_DEVICE when the launch failed. */
#ifdef __cplusplus
#ifdef CUDA_EMU
#define CT_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                           \
    (CT_EMU_LAUNCH(kernel, grid, block, shared_bytes, (cudaStream_t)(stream), __VA_ARGS__) ==  \
             cudaSuccess                                                                    \
         ? CT_OK                                                                            \
         : CT_ERR_DEVICE)
#elif defined(__CUDACC__)
#define CT_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                           \
    (kernel<<<grid, block, shared_bytes, (cudaStream_t)(stream)>>>(__VA_ARGS__),             \
     cudaPeekAtLastError() == cudaSuccess ? CT_OK : CT_ERR_DEVICE)
#endif
#endif

#endif
