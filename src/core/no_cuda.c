/*
 * include/cuttle_cuda.h in a build without a CUDA backend (CPU only, or
 * nvcc was not found): no device, and why.  The CUDA build has
 * src/cuda/probe.c instead.
 */
#include <string.h>

#include "cuttle_cuda.h"

#ifndef CT_HAVE_CUDA

#include "core/error.h"

static const char NO_CUDA[] = "this build of cuttle has no CUDA backend (nvcc was not found "
                              "when it was built, or CUDA=0; see `make config`)";

void ct_cuda_probe_versions(ct_cuda_versions *out)
{
    memset(out, 0, sizeof *out);
    out->driver_error = NO_CUDA;
}

int ct_cuda_probe_device_count(const char **why)
{
    *why = NO_CUDA;
    return 0;
}

ct_status ct_cuda_probe_device(int device, ct_cuda_device_info *out)
{
    memset(out, 0, sizeof *out);
    return ct_set_error(CT_ERR_UNSUPPORTED, "device cuda:%d: %s", device, NO_CUDA);
}

const char *ct_cuda_probe_archs(void)
{
    return "";
}

int ct_cuda_probe_ptx_arch(void)
{
    return 0;
}

#endif
