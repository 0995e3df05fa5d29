/*
 * What the CUDA backend offers besides the vtable, for `cuttle doctor` and
 * the GPU tests (tools/cmd_doctor.c, tests/test_gpu.c).  C-callable; these
 * exist only in builds with CT_HAVE_CUDA.
 */
#ifndef CT_CUDA_CUDA_H
#define CT_CUDA_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "cuttle.h"

/* Fill every block the backend's allocator hands out with 0xff bytes (NaN
 * floats), so a kernel that leaves an output element unwritten shows up. */
ct_status ct_cuda_backend_poison(ct_backend *backend, bool enabled);

/* How many vendor-library calls (cuBLAS/cuDNN) failed, for any reason
 * (including "no algorithm for this shape"), so that the native kernel ran
 * in their place; 0 for a backend that is not CUDA.  Tests use it to tell
 * "the vendor path is right" from "the vendor path failed quietly". */
int ct_cuda_vendor_fallbacks(const ct_backend *backend);

/* Versions: 0 when unknown or absent.  Encoded as the libraries do
 * (CUDA 13000 = 13.0; cuBLAS 130100 = 13.1.0; cuDNN 91900 = 9.19.0;
 * NCCL 22809 = 2.28.9). */
typedef struct ct_cuda_versions {
    int driver;           /* cudaDriverGetVersion: the newest CUDA the driver runs */
    int runtime_built;    /* CUDART_VERSION cuttle was compiled with */
    int runtime_loaded;   /* cudaRuntimeGetVersion (static cudart: the same) */
    int cublas_built, cublas_loaded;
    int cudnn_built, cudnn_loaded;
    int nccl_built, nccl_loaded; /* loaded: dlopen("libnccl.so.2") + ncclGetVersion */
    const char *driver_error;    /* why the driver could not be asked, or NULL */
    bool emulated;               /* the emulated device (make CUDA=emu): no driver, shims */
} ct_cuda_versions;

void ct_cuda_probe_versions(ct_cuda_versions *out);

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

/* Number of GPUs (0 with *why set when there are none or no driver). */
int ct_cuda_probe_device_count(const char **why);
ct_status ct_cuda_probe_device(int device, ct_cuda_device_info *out);
/* The architectures compiled into this binary: "80 86 89 90", and PTX's. */
const char *ct_cuda_probe_archs(void);
int ct_cuda_probe_ptx_arch(void);

#endif
