/*
 * Where each gradient of a training step is finished (graph/grad_hook.h).
 *
 * A parameter's gradient is the output of one node (autodiff sums several
 * contributions with add nodes first, ops/autodiff.c).  The "all done"
 * point is the first node of the optimizer phase (fp16's finite check is
 * one, ops/optim.c): no backward node runs after it, so a hook may change
 * the gradients in place there even if a backward node read one too.
 */
#include <stdlib.h>

#include "core/error.h"
#include "graph/grad_hook.h"

/* The node whose run writes t's bytes. */
static const ct_tensor *writer_of(const ct_tensor *t, const ct_tensor *const *alias_of,
                                  const ct_tensor *const *written_by)
{
    const ct_tensor *root = ct_storage_root(t);
    if (written_by[root->id])
        return written_by[root->id];
    return alias_of[root->id] ? alias_of[root->id] : root;
}

ct_status ct_grad_points_build(ct_grad_points *points, const ct_graph *graph,
                               const ct_tensor *const *runs, int n_runs,
                               const ct_tensor *const *alias_of,
                               const ct_tensor *const *written_by)
{
    int n_nodes = graph->n_nodes;
    int *run_of = malloc(sizeof *run_of * (size_t)(n_nodes + 1));
    points->first = calloc((size_t)n_runs + 2, sizeof *points->first);
    points->params = malloc(sizeof *points->params * (size_t)(graph->n_state + 1));
    points->n_runs = n_runs;
    ct_status status = CT_OK;
    if (!run_of || !points->first || !points->params) {
        status = ct_set_error(CT_ERR_MEMORY, "gradient hook: out of host memory");
        goto done;
    }
    for (int i = 0; i < n_nodes; i++)
        run_of[i] = -1;
    for (int i = 0; i < n_runs; i++)
        run_of[runs[i]->id] = i;
    points->done_at = n_runs;
    for (int i = n_runs - 1; i >= 0 && runs[i]->phase == CT_PHASE_OPTIMIZER; i--)
        points->done_at = i;
    /* count per run, then place (a counting sort, in state order) */
    for (int pass = 0; pass < 2 && status == CT_OK; pass++) {
        for (int i = 0; i < graph->n_state; i++) {
            const ct_tensor *param = graph->state[i];
            if (param->role != CT_ROLE_PARAM || !param->grad)
                continue;
            int at = run_of[writer_of(param->grad, alias_of, written_by)->id];
            if (at < 0 || at >= points->done_at) {
                status = ct_set_error(CT_ERR_STATE,
                                      "gradient hook: the gradient of '%s' is written %s",
                                      ct_tensor_name(param),
                                      at < 0 ? "by no node of the training step"
                                             : "in the optimizer phase");
                break;
            }
            if (pass == 0)
                points->first[at + 2]++;
            else
                points->params[points->first[at + 1]++] = param;
        }
        for (int i = 0; pass == 0 && i < n_runs; i++)
            points->first[i + 2] += points->first[i + 1];
    }
done:
    free(run_of);
    if (status != CT_OK) {
        free(points->first);
        free(points->params);
        points->first = NULL;
        points->params = NULL;
    }
    return status;
}

void ct_grad_points_free(ct_grad_points *points)
{
    if (points->hook)
        points->hook->destroy(points->hook);
    free(points->first);
    free(points->params);
    *points = (ct_grad_points){0};
}

ct_status ct_grad_points_before(const ct_grad_points *points, int index)
{
    return index == points->done_at ? points->hook->grads_done(points->hook) : CT_OK;
}

ct_status ct_grad_points_after(const ct_grad_points *points, const ct_exec *exec, int index,
                               int count)
{
    for (int k = points->first[index]; k < points->first[index + count]; k++) {
        const ct_tensor *param = points->params[k];
        CT_TRY(points->hook->grad_ready(points->hook, param, ct_exec_data(exec, param->grad)));
    }
    return CT_OK;
}
