/*
 * The CPU backend: host memory, and its op table (cpu/table.c), which maps
 * each op to its kernels in src/cpu/<family>.c.  Kernels run one after
 * another; each one is parallel inside (OpenMP) with the backend's thread
 * count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef CT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "core/error.h"
#include "cpu/backend.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"
#include "graph/backend.h"
#include "graph/impl.h"
#include "ops/ops.h"

#define CT_CPU_ALIGNMENT 64
/* the largest arena a plan on several threads lays out without reuse (above) */
#define CT_CPU_APART_ARENA ((size_t)4 << 20)

static ct_status cpu_alloc(ct_backend *backend, size_t bytes, void **out)
{
    (void)backend;
    size_t rounded = (bytes + CT_CPU_ALIGNMENT - 1) / CT_CPU_ALIGNMENT * CT_CPU_ALIGNMENT;
    *out = aligned_alloc(CT_CPU_ALIGNMENT, rounded);
    if (!*out)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory allocating %zu bytes", bytes);
    return CT_OK;
}

static void cpu_release(ct_backend *backend, void *ptr)
{
    (void)backend;
    free(ptr);
}

static ct_status cpu_copy(ct_backend *backend, void *dst, const void *src, size_t bytes)
{
    (void)backend;
    memcpy(dst, src, bytes);
    return CT_OK;
}

static void cpu_begin_step(ct_backend *backend)
{
    ct_cpu_set_threads(backend->n_threads);
#ifdef CT_HAVE_OPENBLAS
    openblas_set_num_threads(backend->n_threads);
#endif
    (void)backend;
}

static ct_status cpu_synchronize(ct_backend *backend)
{
    (void)backend;
    return CT_OK;
}

/* f32 kernels; a node with 16-bit tensors runs on widened copies (widen.c). */
static ct_status cpu_run_node(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                              const ct_impl *impl)
{
    if (ct_node_touches_half(node))
        return ct_cpu_run_widened(backend, exec, node, impl);
    return impl->run(backend, exec, node);
}

static void cpu_destroy(ct_backend *backend)
{
    free(backend);
}

static const ct_backend_i cpu_backend_i = {
    .alloc = cpu_alloc,
    .release = cpu_release,
    .write = cpu_copy,
    .read = cpu_copy,
    .copy = cpu_copy,
    .begin_step = cpu_begin_step,
    .run_node = cpu_run_node,
    .synchronize = cpu_synchronize,
    .destroy = cpu_destroy,
};


ct_status ct_cpu_backend_new(int n_threads, ct_backend **out)
{
    ct_backend *backend = calloc(1, sizeof *backend);
    if (!backend)
        return ct_set_error(CT_ERR_MEMORY, "ct_backend_new: out of host memory");
    backend->iface = &cpu_backend_i;
    backend->impls = ct_cpu_impls;
    backend->widens_half = true;
    snprintf(backend->kernels, sizeof backend->kernels, "native");
    backend->n_threads = n_threads > 0 ? n_threads : ct_cpu_n_procs();
#ifndef _OPENMP
    backend->n_threads = 1; /* a build without OpenMP runs one thread, and says so */
#endif
    /* Reused bytes are last written by whichever core wrote the tensor
     * before: on two threads SimpleCNN's B64 step (an arena of 1.78 MiB,
     * 2.16 without reuse) was 10-14 us faster with each tensor its own, so
     * that each core's share of a tensor stays in its cache from step to
     * step; on one thread 4 us slower (docs/perf.md, 2026-12-07 seventh
     * session).  So small plans on more threads than one do without reuse. */
    backend->apart_arena_max = backend->n_threads > 1 ? CT_CPU_APART_ARENA : 0;
    snprintf(backend->name, sizeof backend->name, "cpu (%d thread%s, %s gemm)",
             backend->n_threads, backend->n_threads == 1 ? "" : "s", ct_cpu_gemm_name());
    *out = backend;
    return CT_OK;
}
