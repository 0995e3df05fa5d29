/* Memory kernels keep between a plan's runs (graph/prepared.h). */
#include <stdlib.h>

#include "core/error.h"
#include "graph/prepared.h"

ct_status ct_prepared_new(int n_nodes, ct_prepared **out)
{
    *out = NULL;
    ct_prepared *p = calloc(1, sizeof *p);
    if (p) {
        p->n_nodes = n_nodes;
        p->writes = calloc((size_t)n_nodes + 1, sizeof *p->writes);
        p->slots = calloc((size_t)n_nodes + 1, sizeof *p->slots);
    }
    if (!p || !p->writes || !p->slots) {
        ct_prepared_free(p);
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory");
    }
    *out = p;
    return CT_OK;
}

void ct_prepared_free(ct_prepared *prepared)
{
    if (!prepared)
        return;
    for (int i = 0; prepared->slots && i < prepared->n_nodes; i++) {
        ct_prepared_slot *slot = &prepared->slots[i];
        if (slot->data)
            slot->backend->iface->release(slot->backend, slot->data);
    }
    free(prepared->writes);
    free(prepared->slots);
    free(prepared);
}

size_t ct_prepared_bytes(const ct_prepared *prepared)
{
    size_t bytes = 0;
    for (int i = 0; prepared && i < prepared->n_nodes; i++)
        bytes += prepared->slots[i].data ? prepared->slots[i].bytes : 0;
    return bytes;
}

static const ct_tensor *root_of(const ct_tensor *t)
{
    return t->view_of ? t->view_of : t;
}

void ct_prepared_wrote(ct_prepared *prepared, const ct_tensor *t)
{
    if (prepared && root_of(t)->id < prepared->n_nodes)
        prepared->writes[root_of(t)->id]++;
}

void ct_prepared_stepped(ct_prepared *prepared)
{
    if (prepared)
        prepared->steps++;
}

void *ct_exec_prepared(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                       const ct_tensor *from, size_t bytes, bool *fresh)
{
    *fresh = false;
    ct_prepared *p = exec->prepared;
    const ct_tensor *source = root_of(from);
    /* Only state the plan holds (a parameter, written by ct_plan_write or
     * training steps, whose counts say when it changed): a computed weight,
     * such as a 16-bit cast of the f32 one, changes with what it is
     * computed from, which these counts do not follow. */
    if (!p || exec->training || node->id >= p->n_nodes || source->id >= p->n_nodes ||
        source->op != CT_OP_LEAF || exec->storage[source->id] != CT_STORAGE_STATE)
        return NULL;
    ct_prepared_slot *slot = &p->slots[node->id];
    uint64_t writes = p->writes[source->id];
    if (slot->data && (slot->backend != backend || slot->bytes < bytes)) {
        slot->backend->iface->release(slot->backend, slot->data);
        *slot = (ct_prepared_slot){0};
    }
    if (!slot->data) {
        void *data = NULL;
        if (backend->iface->alloc(backend, bytes, &data) != CT_OK)
            return NULL; /* the kernel works without (the message is not an error) */
        *slot = (ct_prepared_slot){backend, data, bytes, writes, p->steps};
        p->made++;
        return data; /* not fresh: the caller fills it */
    }
    *fresh = slot->writes == writes && slot->steps == p->steps;
    p->made += !*fresh;
    slot->writes = writes;
    slot->steps = p->steps;
    return slot->data;
}
