/* The nodes of a plan that its backend cannot run, run by the backend's
 * fallback (the CPU) on host copies of the arena and the state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/impl.h"
#include "graph/plan_impl.h"

/* An op the backend cannot run goes to its fallback (shared/DESIGN.md: "an
 * unsupported op falls back to the CPU with a clear log line"), unless the
 * backend is strict or has none.  Marks plan->on_host and says so once. */
ct_status ct_plan_find_host_nodes(ct_plan *plan)
{
    const ct_backend *backend = plan->backend, *fallback = backend->fallback;
    char names[256] = "";
    bool named[CT_OP_COUNT] = {false};
    int count = 0, n_named = 0;
    /* The training schedule holds the evaluation one (see the top). */
    for (int i = 0; i < plan->n_schedule[CT_TRAIN]; i++) {
        const ct_tensor *t = plan->schedule[CT_TRAIN][i];
        if (t->op == CT_OP_LEAF || t->op == CT_OP_VIEW || ct_impl_supported(backend, t))
            continue;
        if (backend->strict || !fallback || !ct_impl_supported(fallback, t))
            return ct_set_error(CT_ERR_UNSUPPORTED, "backend %s cannot run %s (%s)%s",
                                backend->name, ct_tensor_name(t), ct_op_name(t->op),
                                backend->strict ? " and is strict (ct_backend_set_strict)" : "");
        if (!plan->on_host && !(plan->on_host = calloc((size_t)plan->n_nodes, sizeof(bool))))
            return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory");
        plan->on_host[t->id] = true;
        count++;
        if (!named[t->op] && n_named++ < 6)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     n_named > 1 ? ", " : "", ct_op_name(t->op));
        named[t->op] = true;
    }
    if (count > 0)
        fprintf(stderr,
                "cuttle: %s cannot run %d node(s) of this graph (%s%s); they run on %s, with "
                "copies between them (a strict backend refuses instead)\n",
                backend->name, count, names, n_named > 6 ? ", ..." : "", fallback->name);
    return CT_OK;
}

/* The fallback's memory: host copies of the arena and the state, at the
 * same offsets, so its kernels find every tensor where the plan put it. */
ct_status ct_plan_allocate_host_copies(ct_plan *plan)
{
    if (!plan->on_host)
        return CT_OK;
    ct_backend *host = plan->backend->fallback;
    const size_t bytes[3] = {plan->arena_bytes, plan->state_bytes, plan->host_workspace_bytes};
    void **where[3] = {&plan->host_arena, &plan->host_state, &plan->host_workspace};
    for (int i = 0; i < 3; i++)
        if (bytes[i] > 0 && host->iface->alloc(host, bytes[i], where[i]) != CT_OK)
            return ct_set_error(CT_ERR_MEMORY,
                                "ct_plan_new: no host memory (%zu bytes) for the nodes that "
                                "run on %s",
                                bytes[i], host->name);
    return CT_OK;
}

/* Copies a tensor's bytes between the backend's memory and the host copy. */
static ct_status copy_tensor(ct_plan *plan, const ct_exec *exec, const ct_exec *host,
                             const ct_tensor *t, bool to_host)
{
    ct_backend *backend = plan->backend;
    size_t bytes = ct_tensor_bytes(t);
    void *there = ct_exec_data(exec, t), *here = ct_exec_data(host, t);
    return to_host ? backend->iface->read(backend, here, there, bytes)
                   : backend->iface->write(backend, there, here, bytes);
}

/* A node the backend cannot run, on its fallback: its inputs copied to the
 * host, the fallback's kernel, then its output and every state tensor it
 * reads copied back (optimizer updates and batchnorm statistics change
 * their state sources in place).  read() waits for the backend's queued
 * work; the copies back are queued before the next kernel. */
ct_status ct_plan_run_on_host(ct_plan *plan, const ct_exec *exec, const ct_tensor *node,
                              const ct_impl **ran)
{
    ct_backend *host = plan->backend->fallback;
    ct_exec host_exec = *exec;
    host_exec.arena = plan->host_arena;
    host_exec.state = plan->host_state;
    host_exec.workspace = plan->host_workspace;
    /* the step's values in host memory, and the finding of an inf or NaN
     * (the loss, fp16's check) back to the backend's */
    ct_step_values values;
    if (exec->step_values) {
        CT_TRY(plan->backend->iface->read(plan->backend, &values, exec->step_values,
                                          sizeof values));
        host_exec.step_values = &values;
    }
    int32_t found_before = exec->step_values ? values.found_inf : 0;
    for (int s = 0; s < node->n_src; s++)
        CT_TRY(copy_tensor(plan, exec, &host_exec, node->src[s], true));
    host->iface->begin_step(host);
    CT_TRY(ct_impl_run(host, &host_exec, node, ran));
    CT_TRY(host->iface->synchronize(host));
    if (exec->step_values && values.found_inf != found_before)
        CT_TRY(plan->backend->iface->write(plan->backend, (void *)exec->step_values, &values,
                                           sizeof values));
    CT_TRY(copy_tensor(plan, exec, &host_exec, node, false));
    for (int s = 0; s < node->n_src; s++) {
        const ct_tensor *src = node->src[s]->view_of ? node->src[s]->view_of : node->src[s];
        if (exec->storage[src->id] == CT_STORAGE_STATE)
            CT_TRY(copy_tensor(plan, exec, &host_exec, node->src[s], false));
    }
    return CT_OK;
}
