/* A plan's step recorded once and replayed (graph/replay.h). */
#include "graph/replay.h"

#include <stdio.h>

#include "core/error.h"
#include "graph/impl.h"

static void drop(ct_replay *r, ct_backend *backend, int mode)
{
    if (r->recorded[mode])
        backend->iface->replay_free(backend, r->recorded[mode]);
    r->recorded[mode] = NULL;
    r->eager_runs[mode] = 0;
}

/* Records the nodes' work without running it.  On failure nothing is kept
 * and the reason goes to r->why: the step then runs node by node, which is
 * not an error. */
static void record(ct_replay *r, ct_backend *backend, ct_mode mode, const ct_exec *exec,
                   const ct_tensor *const *runs, int n_runs)
{
    ct_status status = backend->iface->capture_begin(backend);
    if (status == CT_OK) {
        backend->capturing = true;
        backend->iface->begin_step(backend);
        for (int i = 0, done = 1; i < n_runs && status == CT_OK; i += done)
            status = ct_impl_run_next(backend, exec, runs + i, n_runs - i, &done, NULL);
        backend->capturing = false;
        char failure[CT_REPLAY_WHY_CAPACITY] = "";
        if (status != CT_OK)
            snprintf(failure, sizeof failure, "%s", ct_last_error());
        void *recorded = NULL;
        ct_status end = backend->iface->capture_end(backend, &recorded); /* always ends it */
        if (status == CT_OK && end == CT_OK) {
            r->recorded[mode] = recorded;
            r->choices[mode] = backend->choices;
            return;
        }
        if (recorded)
            backend->iface->replay_free(backend, recorded);
        if (status == CT_OK)
            snprintf(failure, sizeof failure, "%s", ct_last_error());
        snprintf(r->why, sizeof r->why, "%s", failure);
    } else {
        snprintf(r->why, sizeof r->why, "%s", ct_last_error());
    }
    r->failed = true;
}

ct_status ct_replay_run(ct_replay *r, ct_backend *backend, ct_mode mode, const ct_exec *exec,
                        const ct_tensor *const *runs, int n_runs, bool possible,
                        bool *replayed)
{
    *replayed = false;
    if (r->recorded[mode] && (r->choices[mode] != backend->choices || backend->replay_off))
        drop(r, backend, mode); /* recorded with other kernels, or turned off */
    if (backend->replay_off || r->failed || !possible || !backend->iface->capture_begin)
        return CT_OK;
    if (!r->recorded[mode] && r->eager_runs[mode] >= CT_REPLAY_AFTER)
        record(r, backend, mode, exec, runs, n_runs);
    if (!r->recorded[mode])
        return CT_OK;
    backend->iface->begin_step(backend);
    CT_TRY(backend->iface->replay(backend, r->recorded[mode]));
    *replayed = true;
    return CT_OK;
}

void ct_replay_count_eager(ct_replay *r, ct_mode mode)
{
    r->eager_runs[mode]++;
}

void ct_replay_free(ct_replay *r, ct_backend *backend)
{
    for (int mode = 0; mode < 2; mode++)
        drop(r, backend, mode);
}
