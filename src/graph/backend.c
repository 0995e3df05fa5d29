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
    if (strncmp(device, "cuda", 4) == 0)
        return ct_set_error(CT_ERR_UNSUPPORTED,
                            "device '%s': this build of cuttle has no CUDA backend; use 'cpu'",
                            device);
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

int ct_backend_threads(const ct_backend *backend)
{
    return backend ? backend->n_threads : 0;
}
