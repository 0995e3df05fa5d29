/* Backend selection from a device string. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/backend.h"

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
        return ct_cuda_backend_new(gpu, out);
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

void ct_backend_free(ct_backend *backend)
{
    if (backend)
        backend->iface->destroy(backend);
}

const char *ct_backend_name(const ct_backend *backend)
{
    return backend ? backend->name : "(null)";
}

bool ct_backend_emulated(const ct_backend *backend)
{
    return backend && backend->emulated;
}

int ct_backend_threads(const ct_backend *backend)
{
    return backend ? backend->n_threads : 0;
}

ct_status ct_backend_synchronize(ct_backend *backend)
{
    if (!backend)
        return ct_set_error(CT_ERR_ARG, "ct_backend_synchronize: backend is NULL");
    return backend->iface->synchronize(backend);
}

/* The optional entries of the vtable: NULL means this backend has no such thing. */
static ct_status unsupported(const ct_backend *backend, const char *what)
{
    if (!backend)
        return ct_set_error(CT_ERR_ARG, "%s: backend is NULL", what);
    return ct_set_error(CT_ERR_UNSUPPORTED, "%s: backend %s has no device memory or kernel "
                        "choice (a CUDA backend has)", what, backend->name);
}

ct_status ct_backend_memory_stats(const ct_backend *backend, ct_memory_stats *out)
{
    if (!backend || !backend->iface->memory_stats)
        return unsupported(backend, "ct_backend_memory_stats");
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_backend_memory_stats: out is NULL");
    return backend->iface->memory_stats(backend, out);
}

ct_status ct_backend_release_cache(ct_backend *backend)
{
    if (!backend || !backend->iface->release_cache)
        return unsupported(backend, "ct_backend_release_cache");
    return backend->iface->release_cache(backend);
}

ct_status ct_backend_set_memory_limit(ct_backend *backend, size_t bytes)
{
    if (!backend || !backend->iface->set_memory_limit)
        return unsupported(backend, "ct_backend_set_memory_limit");
    return backend->iface->set_memory_limit(backend, bytes);
}

ct_status ct_backend_set_kernels(ct_backend *backend, const char *kernels)
{
    if (!backend || !backend->iface->set_kernels)
        return unsupported(backend, "ct_backend_set_kernels");
    if (!kernels)
        return ct_set_error(CT_ERR_ARG, "ct_backend_set_kernels: kernels is NULL");
    return backend->iface->set_kernels(backend, kernels);
}

ct_status ct_backend_set_tf32(ct_backend *backend, bool enabled)
{
    if (!backend || !backend->iface->set_tf32)
        return unsupported(backend, "ct_backend_set_tf32");
    return backend->iface->set_tf32(backend, enabled);
}
