/* Inputs staged for later runs (graph/staging.h). */
#include "graph/staging.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct staged_input {
    const ct_tensor *t;
    size_t bytes;
    void *buffers[CT_STAGE_DEPTH]; /* the backend's stages, or host memory */
    int first, count;              /* queued: buffers[first], then the next ones, in a ring */
} staged_input;

struct ct_staging {
    staged_input *inputs;
    int n, capacity;
};

static bool backend_stages(const ct_backend *backend)
{
    return backend->iface->stage_new != NULL;
}

static staged_input *find(const ct_staging *staging, const ct_tensor *t)
{
    for (int i = 0; staging && i < staging->n; i++)
        if (staging->inputs[i].t == t)
            return &staging->inputs[i];
    return NULL;
}

static ct_status add(ct_staging **staging, const ct_tensor *t, size_t bytes, staged_input **out)
{
    if (!*staging && !(*staging = calloc(1, sizeof **staging)))
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_stage: out of host memory");
    ct_staging *s = *staging;
    if (s->n == s->capacity) {
        int capacity = s->capacity ? 2 * s->capacity : 4;
        staged_input *grown = realloc(s->inputs, sizeof *grown * (size_t)capacity);
        if (!grown)
            return ct_set_error(CT_ERR_MEMORY, "ct_plan_stage: out of host memory");
        s->inputs = grown;
        s->capacity = capacity;
    }
    *out = &s->inputs[s->n++];
    **out = (staged_input){.t = t, .bytes = bytes};
    return CT_OK;
}

/* The buffer of ring position `slot`, made at its first use. */
static ct_status buffer_at(ct_backend *backend, staged_input *in, int slot)
{
    if (in->buffers[slot])
        return CT_OK;
    if (backend_stages(backend))
        return backend->iface->stage_new(backend, in->bytes, &in->buffers[slot]);
    if (!(in->buffers[slot] = malloc(in->bytes ? in->bytes : 1)))
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_stage: out of host memory for %zu bytes "
                            "of '%s'", in->bytes, ct_tensor_name(in->t));
    return CT_OK;
}

ct_status ct_staging_put(ct_staging **staging, ct_backend *backend, const ct_tensor *t,
                         const void *host, size_t bytes)
{
    staged_input *in = find(*staging, t);
    if (!in)
        CT_TRY(add(staging, t, bytes, &in));
    if (in->count == CT_STAGE_DEPTH)
        return ct_set_error(CT_ERR_STATE,
                            "ct_plan_stage: %d values of '%s' are already waiting for runs; "
                            "run the plan (ct_plan_run) before staging another",
                            CT_STAGE_DEPTH, ct_tensor_name(t));
    int slot = (in->first + in->count) % CT_STAGE_DEPTH;
    CT_TRY(buffer_at(backend, in, slot));
    if (backend_stages(backend))
        CT_TRY(backend->iface->stage_put(backend, in->buffers[slot], host, bytes));
    else
        memcpy(in->buffers[slot], host, bytes);
    in->count++;
    return CT_OK;
}

ct_status ct_staging_take(ct_staging *staging, ct_backend *backend, const ct_exec *exec)
{
    for (int i = 0; staging && i < staging->n; i++) {
        staged_input *in = &staging->inputs[i];
        if (in->count == 0)
            continue;
        void *dst = ct_exec_data(exec, in->t), *buffer = in->buffers[in->first];
        in->first = (in->first + 1) % CT_STAGE_DEPTH;
        in->count--;
        if (backend_stages(backend))
            CT_TRY(backend->iface->stage_take(backend, buffer, dst, in->bytes));
        else
            CT_TRY(backend->iface->write(backend, dst, buffer, in->bytes));
    }
    return CT_OK;
}

void ct_staging_free(ct_staging *staging, ct_backend *backend)
{
    if (!staging)
        return;
    for (int i = 0; i < staging->n; i++)
        for (int k = 0; k < CT_STAGE_DEPTH; k++) {
            void *buffer = staging->inputs[i].buffers[k];
            if (buffer && backend_stages(backend))
                backend->iface->stage_free(backend, buffer);
            else
                free(buffer);
        }
    free(staging->inputs);
    free(staging);
}
