/* The backend interface's dispatch: what every backend answers through its
 * vtable (graph/backend.h).  Which backends exist is src/devices/'s business. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/backend.h"
#include "graph/impl.h"

void ct_backend_free(ct_backend *backend)
{
    if (!backend)
        return;
    ct_backend_free(backend->fallback);
    ct_impl_memo_free(backend);
    backend->iface->destroy(backend);
}

ct_status ct_backend_set_strict(ct_backend *backend, bool strict)
{
    if (!backend)
        return ct_set_error(CT_ERR_ARG, "ct_backend_set_strict: backend is NULL");
    backend->strict = strict;
    return CT_OK;
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
    return ct_set_error(CT_ERR_UNSUPPORTED, "%s: backend %s has no device memory or such "
                        "setting (a CUDA backend has)", what, backend->name);
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
    if (!backend || !kernels)
        return ct_set_error(CT_ERR_ARG, "ct_backend_set_kernels: backend and kernels are "
                            "required");
    return ct_impl_set_choice(backend, kernels);
}

ct_status ct_backend_refuse(ct_backend *backend, ct_op op)
{
    if (!backend || op >= 64)
        return ct_set_error(CT_ERR_ARG, "ct_backend_refuse: no backend, or op %d", (int)op);
    backend->refused_ops |= (uint64_t)1 << op;
    return CT_OK;
}

ct_status ct_backend_set_cuda_graph(ct_backend *backend, bool enabled)
{
    if (!backend)
        return ct_set_error(CT_ERR_ARG, "ct_backend_set_cuda_graph: backend is NULL");
    backend->replay_off = !enabled;
    return CT_OK;
}

ct_status ct_backend_set_tf32(ct_backend *backend, bool enabled)
{
    if (!backend || !backend->iface->set_tf32)
        return unsupported(backend, "ct_backend_set_tf32");
    return backend->iface->set_tf32(backend, enabled);
}
