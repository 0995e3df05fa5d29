/*
 * Backend selection from a device string ("cpu", "cpu:N", "cuda", "cuda:N"):
 * the one place that knows every backend.  It sits above them (they know
 * only the backend interface of graph/backend.h), so the graph layer never
 * names a backend and a new one is added here.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cpu/backend.h"
#include "graph/backend.h"
#ifdef CT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#ifdef CT_HAVE_CUDA
/* A GPU backend runs the ops it lacks on a CPU backend (graph/plan.c). */
static ct_status with_cpu_fallback(ct_status status, ct_backend **out)
{
    if (status != CT_OK)
        return status;
    status = ct_cpu_backend_new(0, &(*out)->fallback);
    if (status != CT_OK) {
        ct_backend_free(*out);
        *out = NULL;
    }
    return status;
}
#endif

static bool parse_thread_count(const char *text, int *out)
{
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 1 || value > 4096)
        return false;
    *out = (int)value;
    return true;
}

ct_status ct_backend_new(const char *device, ct_backend **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_backend_new: out is NULL");
    *out = NULL;
    if (!device)
        device = "cpu";
    if (strcmp(device, "cpu") == 0)
        return ct_cpu_backend_new(0, out);
    if (strncmp(device, "cpu:", 4) == 0) {
        int n_threads;
        if (!parse_thread_count(device + 4, &n_threads))
            return ct_set_error(CT_ERR_ARG,
                                "device '%s': expected cpu:N with N a thread count from 1 to "
                                "4096",
                                device);
        return ct_cpu_backend_new(n_threads, out);
    }
    if (strcmp(device, "cuda") == 0 || strncmp(device, "cuda:", 5) == 0) {
        int gpu = 0;
        if (device[4] == ':') {
            char *end = NULL;
            long value = strtol(device + 5, &end, 10);
            if (end == device + 5 || *end != '\0' || value < 0 || value > 1023)
                return ct_set_error(CT_ERR_ARG,
                                    "device '%s': expected cuda:N with N a GPU number from 0",
                                    device);
            gpu = (int)value;
        }
#ifdef CT_HAVE_CUDA
        return with_cpu_fallback(ct_cuda_backend_new(gpu, out), out);
#else
        (void)gpu;
        return ct_set_error(CT_ERR_UNSUPPORTED,
                            "device '%s': this build of cuttle has no CUDA backend (rebuild "
                            "where nvcc is installed, see `make config`); use 'cpu'",
                            device);
#endif
    }
    return ct_set_error(CT_ERR_ARG, "unknown device '%s': use cpu, cpu:N or cuda[:N]", device);
}
