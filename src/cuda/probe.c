/*
 * What `cuttle doctor` reports about the CUDA side (cuda.h): library
 * versions compiled in and loaded, and each GPU with whether this binary
 * carries machine code (SASS) for it or only PTX to compile at load time.
 *
 * SASS for sm_XY runs on GPUs of the same major version with minor >= Y;
 * PTX for compute_XY is compiled by the driver for any GPU of capability
 * >= X.Y (slower first start, and the driver must be new enough).
 */
#include "cuda/cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "cuda/check.h"

#include "cuda/vendor_api.h"
#ifdef CT_HAVE_NCCL_H
#include <nccl.h>
#endif

const char *ct_cuda_probe_archs(void)
{
    return CT_CUDA_ARCHS;
}

int ct_cuda_probe_ptx_arch(void)
{
    return CT_CUDA_PTX_ARCH;
}

/* The NCCL that data-parallel training would use: the one vendor_api.c
 * loads (libnccl.so.2, CUTTLE_NCCL, or the emulator's); in a build without
 * nccl.h, whichever libnccl.so.2 the loader finds.  0: none. */
static int nccl_loaded_version(void)
{
    int version = 0;
#ifdef CT_HAVE_NCCL
    if (ct_nccl_why() || ncclGetVersion(&version) != ncclSuccess)
        version = 0;
#else
    void *library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!library)
        return 0;
    int (*get_version)(int *) = NULL;
    *(void **)&get_version = dlsym(library, "ncclGetVersion");
    if (!get_version || get_version(&version) != 0)
        version = 0;
    dlclose(library);
#endif
    return version;
}

void ct_cuda_probe_versions(ct_cuda_versions *out)
{
    memset(out, 0, sizeof *out);
#ifdef CUDA_EMU
    out->emulated = true;
#endif
    out->runtime_built = CUDART_VERSION;
    cudaError_t error = cudaDriverGetVersion(&out->driver);
    if (error != cudaSuccess || out->driver == 0)
        out->driver_error = error != cudaSuccess ? cudaGetErrorString(error)
                                                 : "no NVIDIA driver is installed";
    if (cudaRuntimeGetVersion(&out->runtime_loaded) != cudaSuccess)
        out->runtime_loaded = 0;
    (void)cudaGetLastError();
    out->cublas_error = ct_cublas_why();
    out->cudnn_error = ct_cudnn_why();
#ifdef CT_HAVE_CUBLAS
    out->cublas_built = CUBLAS_VERSION;
    int major = 0, minor = 0, patch = 0;
    if (!out->cublas_error && cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
        out->cublas_loaded = major * 10000 + minor * 100 + patch;
#endif
#ifdef CT_HAVE_CUDNN
    out->cudnn_built = CUDNN_VERSION;
    out->cudnn_loaded = out->cudnn_error ? 0 : (int)cudnnGetVersion();
#endif
#ifdef CT_HAVE_NCCL_H
    out->nccl_built = NCCL_VERSION_CODE;
#endif
    out->nccl_loaded = nccl_loaded_version();
    out->nccl_error = ct_nccl_why();
}

int ct_cuda_probe_device_count(const char **why)
{
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    *why = NULL;
    if (error != cudaSuccess) {
        *why = cudaGetErrorString(error);
        (void)cudaGetLastError();
        return 0;
    }
    if (count == 0)
        *why = "the driver sees no GPU";
    return count;
}

/* The best SASS in CT_CUDA_ARCHS for capability major.minor: the highest
 * sm_XY with X == major and Y <= minor, or 0. */
static int sass_for(int major, int minor)
{
    const char *text = CT_CUDA_ARCHS;
    int best = 0;
    while (*text) {
        char *end = NULL;
        long arch = strtol(text, &end, 10);
        if (end == text)
            break;
        if (arch / 10 == major && arch % 10 <= minor && arch > best)
            best = (int)arch;
        text = end;
    }
    return best;
}

ct_status ct_cuda_probe_device(int device, ct_cuda_device_info *out)
{
    memset(out, 0, sizeof *out);
    struct cudaDeviceProp props;
    CT_CUDA_CALL(cudaGetDeviceProperties(&props, device));
    snprintf(out->name, sizeof out->name, "%s", props.name);
    out->major = props.major;
    out->minor = props.minor;
    out->sm_count = props.multiProcessorCount;
    out->memory_bytes = props.totalGlobalMem;
    out->shared_per_block = props.sharedMemPerBlockOptin;
    out->sass_arch = sass_for(props.major, props.minor);
    out->has_sass = out->sass_arch != 0;
    out->has_ptx = props.major * 10 + props.minor >= CT_CUDA_PTX_ARCH;
    return CT_OK;
}
