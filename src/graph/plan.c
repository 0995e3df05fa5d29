/*
 * Plans: a graph laid out on a backend and run step after step.
 *
 * ct_plan_new orders the nodes of each mode (creation order, pruned to what
 * the roots need), places every transient tensor in one arena by liveness
 * over the training schedule, puts inputs and state in a second buffer, and
 * sizes one workspace for the hungriest kernel.  The evaluation schedule is
 * a subsequence of the training one in which every tensor dies no later, so
 * it reuses the same layout.  Running a step allocates nothing.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "graph/backend.h"
#include "graph/fuse.h"
#include "graph/grad_hook.h"
#include "graph/impl.h"
#include "graph/memplan.h"
#include "graph/plan.h"
#include "graph/plan_impl.h"
#include "graph/precision.h"
#include "graph/prepared.h"
#include "graph/replay.h"

static bool is_root(const ct_tensor *t, ct_mode mode)
{
    if (mode == CT_EVAL)
        return t->keep && t->phase == CT_PHASE_FORWARD;
    return t->keep || (t->phase == CT_PHASE_OPTIMIZER && t->op != CT_OP_LEAF);
}

/* The nodes a mode runs, in creation order (a topological order). */
static ct_status build_schedule(ct_plan *plan, ct_mode mode)
{
    const ct_graph *graph = plan->graph;
    bool *needed = calloc((size_t)plan->n_nodes, sizeof *needed);
    plan->schedule[mode] = malloc(sizeof(ct_tensor *) * (size_t)plan->n_nodes);
    if (!needed || !plan->schedule[mode]) {
        free(needed);
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory");
    }
    for (int i = plan->n_nodes - 1; i >= 0; i--) {
        const ct_tensor *t = graph->nodes[i];
        needed[i] = needed[i] || is_root(t, mode);
        if (!needed[i])
            continue;
        for (int s = 0; s < t->n_src; s++)
            needed[t->src[s]->id] = true;
        if (t->view_of)
            needed[t->view_of->id] = true;
    }
    int count = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        if (needed[i] && graph->nodes[i]->op != CT_OP_LEAF)
            plan->schedule[mode][count++] = graph->nodes[i];
    }
    plan->n_schedule[mode] = count;
    free(needed);
    return CT_OK;
}

static size_t align_up(size_t value)
{
    return (value + CT_ARENA_ALIGNMENT - 1) / CT_ARENA_ALIGNMENT * CT_ARENA_ALIGNMENT;
}

/* Inputs, parameters and buffers, one after another. */
static void layout_state(ct_plan *plan)
{
    size_t offset = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        const ct_tensor *t = plan->graph->nodes[i];
        if (t->op != CT_OP_LEAF)
            continue;
        plan->storage[i] = CT_STORAGE_STATE;
        plan->offsets[i] = offset;
        offset = align_up(offset + ct_tensor_bytes(t));
    }
    plan->state_bytes = offset;
}

/* The node whose arena item holds t's bytes: its storage root, or the
 * producer that a fused relu writes through. */
static const ct_tensor *plan_root(const ct_plan *plan, const ct_tensor *t)
{
    const ct_tensor *root = ct_storage_root(t);
    return plan->alias_of[root->id] ? plan->alias_of[root->id] : root;
}

/* `used` is read at schedule position pos: its arena item lives to there
 * (for ever where it is kept). */
static void extend_life(const ct_plan *plan, ct_lifetime *items, const int *item_of,
                        const ct_tensor *used, int pos)
{
    const ct_tensor *root = plan_root(plan, used);
    if (root->op == CT_OP_LEAF)
        return;
    ct_lifetime *life = &items[item_of[root->id]];
    if (pos > life->last)
        life->last = pos;
    if (used->keep)
        life->last = INT_MAX;
}

/* `used` is read at pos: its bytes, or where it has none (its reader
 * computes it, ct_exec.computed_in) the inputs it is computed from. */
static void read_at(const ct_plan *plan, ct_lifetime *items, const int *item_of,
                    const ct_tensor *used, int pos)
{
    const ct_tensor *root = plan_root(plan, used);
    if (!plan->computed_in[root->id]) {
        extend_life(plan, items, item_of, used, pos);
        return;
    }
    for (int s = 0; s < root->n_src; s++)
        read_at(plan, items, item_of, root->src[s], pos);
}

/* Transient tensors of the training schedule, placed by liveness. */
static ct_status layout_arena(ct_plan *plan)
{
    const ct_tensor **schedule = plan->schedule[CT_TRAIN];
    int n = plan->n_schedule[CT_TRAIN];
    int *item_of = malloc(sizeof *item_of * (size_t)plan->n_nodes);
    ct_lifetime *items = malloc(sizeof *items * (size_t)(n > 0 ? n : 1));
    size_t *item_offsets = malloc(sizeof *item_offsets * (size_t)(n > 0 ? n : 1));
    if (!item_of || !items || !item_offsets) {
        free(item_of);
        free(items);
        free(item_offsets);
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory");
    }
    int n_items = 0;
    for (int pos = 0; pos < n; pos++) {
        const ct_tensor *t = schedule[pos];
        item_of[t->id] = -1;
        if (plan->computed_in[t->id])
            continue; /* no bytes: its reader reads its inputs (below) */
        if (!t->view_of && !plan->alias_of[t->id]) {
            plan->storage[t->id] = CT_STORAGE_ARENA;
            item_of[t->id] = n_items;
            items[n_items++] = (ct_lifetime){pos, pos, ct_tensor_bytes(t)};
        }
        for (int s = 0; s <= t->n_src; s++)
            read_at(plan, items, item_of, s < t->n_src ? t->src[s] : t, pos);
    }
    /* A conv that also computes a max pool writes the pool's output at its
     * own position: the pool's bytes must not share memory with anything
     * that dies in between (the conv's input, say). */
    for (int pos = 0; pos < n; pos++) {
        for (int mode = 0; mode < CT_MODE_COUNT; mode++) {
            const ct_tensor *pool = plan->pool_into[mode][schedule[pos]->id];
            if (pool && item_of[pool->id] >= 0 && items[item_of[pool->id]].first > pos)
                items[item_of[pool->id]].first = pos;
        }
        /* the same for a bias gradient that a weight gradient writes, a
         * loss's gradient that the loss writes, the outputs of a weight
         * gradient that may run paired with this backward data, and the
         * batchnorm parameter gradients the maker of their dy writes */
        int id = schedule[pos]->id;
        const ct_tensor *partner = plan->pair_next[id];
        const ct_tensor *also[6] = {plan->bias_into[id], plan->grad_into[id], partner,
                                    partner ? plan->bias_into[partner->id] : NULL,
                                    plan->bn_params_into[id][0], plan->bn_params_into[id][1]};
        for (int a = 0; a < 6; a++)
            if (also[a] && item_of[also[a]->id] >= 0 && items[item_of[also[a]->id]].first > pos)
                items[item_of[also[a]->id]].first = pos;
    }
    /* the backend's small training plans without reuse
     * (ct_backend.apart_arena_max): an inference plan keeps the least memory */
    size_t peak = (size_t)-1, apart_max = plan->backend->apart_arena_max;
    if (apart_max && plan->n_runs[CT_TRAIN] > plan->n_runs[CT_EVAL])
        peak = ct_memplan_apart(items, n_items, item_offsets);
    if (peak > apart_max) /* too large, out of memory, or not asked for */
        peak = ct_memplan_layout(items, n_items, item_offsets);
    /* In schedule order, so a fused relu is placed before views of it. */
    for (int pos = 0; pos < n; pos++) {
        const ct_tensor *t = schedule[pos];
        const ct_tensor *producer = plan->alias_of[t->id];
        if (plan->computed_in[t->id]) {
            continue; /* CT_STORAGE_NONE */
        } else if (producer) {
            plan->storage[t->id] = plan->storage[producer->id];
            plan->offsets[t->id] = plan->offsets[producer->id];
        } else if (t->view_of) {
            plan->storage[t->id] = plan->storage[t->view_of->id];
        } else {
            plan->offsets[t->id] = item_offsets[item_of[t->id]];
        }
    }
    free(item_of);
    free(items);
    free(item_offsets);
    if (peak == (size_t)-1)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory");
    plan->arena_bytes = peak;
    return CT_OK;
}

static void init_values(const ct_tensor *t, uint64_t seed, void *dst)
{
    int64_t count = ct_tensor_numel(t);
    uint32_t stream = (uint32_t)t->state_index;
    if (t->dtype == CT_I64) {
        int64_t *values = dst;
        for (int64_t i = 0; i < count; i++)
            values[i] = (int64_t)t->init_scale;
        return;
    }
    float *values = dst;
    for (int64_t i = 0; i < count; i++) {
        if (t->init == CT_INIT_CONST) {
            values[i] = t->init_scale;
        } else if (t->init == CT_INIT_UNIFORM) {
            float u = ct_rng_uniform(seed, stream, CT_RNG_INIT_STEP, (uint64_t)i);
            values[i] = (2.0f * u - 1.0f) * t->init_scale;
        } else {
            /* Box-Muller from draws 2i and 2i+1; 1-u keeps log away from 0. */
            float u1 = 1.0f - ct_rng_uniform(seed, stream, CT_RNG_INIT_STEP, 2 * (uint64_t)i);
            float u2 = ct_rng_uniform(seed, stream, CT_RNG_INIT_STEP, 2 * (uint64_t)i + 1);
            values[i] = t->init_scale * sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
        }
    }
}

/* Fill the state buffer: state tensors from their init rule, inputs zero. */
static ct_status init_state(ct_plan *plan)
{
    if (plan->state_bytes == 0)
        return CT_OK;
    uint8_t *host = calloc(1, plan->state_bytes);
    if (!host)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory for %zu bytes",
                            plan->state_bytes);
    for (int i = 0; i < plan->graph->n_state; i++) {
        const ct_tensor *t = plan->graph->state[i];
        init_values(t, plan->seed, host + plan->offsets[t->id]);
    }
    ct_status status = plan->backend->iface->write(plan->backend, plan->state, host,
                                                   plan->state_bytes);
    free(host);
    return status;
}

/* The workspace each side needs: the largest of its nodes'. */
static void size_workspaces(ct_plan *plan)
{
    for (int mode = 0; mode < CT_MODE_COUNT; mode++) {
        for (int i = 0; i < plan->n_runs[mode]; i++) {
            const ct_tensor *t = plan->runs[mode][i];
            bool host = plan->on_host && plan->on_host[t->id];
            const ct_backend *runner = host ? plan->backend->fallback : plan->backend;
            size_t bytes = ct_impl_workspace(runner, t);
            /* a fused bias gradient may run its own kernel after the
             * weight gradient's (a vendor call's), in the same workspace */
            const ct_tensor *bias = mode == CT_TRAIN ? plan->bias_into[t->id] : NULL;
            if (bias && ct_impl_workspace(runner, bias) > bytes)
                bytes = ct_impl_workspace(runner, bias);
            /* the batchnorm parameter gradients this node makes the dy of,
             * each its own part, at once (ct_fuse_bn_params) */
            size_t params = 0;
            for (int k = 0; mode == CT_TRAIN && k < 2; k++)
                if (plan->bn_params_into[t->id][k])
                    params += ct_impl_workspace(runner, plan->bn_params_into[t->id][k]);
            if (params > bytes)
                bytes = params;
            /* a pair's two kernels at once (ct_impl_pair_workspace) */
            const ct_tensor *partner = mode == CT_TRAIN ? plan->pair_next[t->id] : NULL;
            if (partner && ct_impl_pair_workspace(runner, t, partner) > bytes)
                bytes = ct_impl_pair_workspace(runner, t, partner);
            size_t *most = host ? &plan->host_workspace_bytes : &plan->workspace_bytes;
            if (bytes > *most)
                *most = bytes;
        }
    }
}

static ct_status allocate(ct_plan *plan, size_t bytes, void **out, const char *what)
{
    *out = NULL;
    if (bytes == 0)
        return CT_OK;
    ct_status status = plan->backend->iface->alloc(plan->backend, bytes, out);
    if (status != CT_OK)
        return ct_set_error(status, "ct_plan_new: cannot allocate the %s (%zu bytes) on %s: %s",
                            what, bytes, plan->backend->name, ct_last_error());
    return CT_OK;
}

/* Consecutive training runs that may run as a pair (ct_impl_pairs): a
 * layer's backward data and, next, its weight gradient, both on the
 * backend. */
static void find_pairs(ct_plan *plan)
{
    const ct_tensor *const *runs = plan->runs[CT_TRAIN];
    for (int i = 0; i + 1 < plan->n_runs[CT_TRAIN]; i++) {
        const ct_tensor *node = runs[i], *next = runs[i + 1];
        if ((plan->on_host && (plan->on_host[node->id] || plan->on_host[next->id])) ||
            !ct_impl_pairs(plan->backend, node, next))
            continue;
        plan->pair_next[node->id] = next;
        i++; /* a node is in one pair at most */
    }
}

/* The schedule's nodes that run a kernel (after fusion). */
static ct_status build_runs(ct_plan *plan, ct_mode mode)
{
    int n = plan->n_schedule[mode];
    plan->runs[mode] = malloc(sizeof(ct_tensor *) * (size_t)(n > 0 ? n : 1));
    if (!plan->runs[mode])
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory");
    int count = 0;
    for (int i = 0; i < n; i++) {
        const ct_tensor *node = plan->schedule[mode][i];
        if (node->op != CT_OP_VIEW && !plan->alias_of[node->id] &&
            !plan->pool_skip[mode][node->id] && !plan->written_by[node->id] &&
            !plan->computed_in[node->id])
            plan->runs[mode][count++] = node;
    }
    plan->n_runs[mode] = count;
    return CT_OK;
}

static ct_status plan_build(ct_plan *plan)
{
    plan->offsets = calloc((size_t)plan->n_nodes + 1, sizeof *plan->offsets);
    plan->storage = calloc((size_t)plan->n_nodes + 1, sizeof *plan->storage);
    plan->alias_of = calloc((size_t)plan->n_nodes + 1, sizeof *plan->alias_of);
    plan->epilogue = calloc((size_t)plan->n_nodes + 1, sizeof *plan->epilogue);
    bool pools = true;
    for (int mode = 0; mode < CT_MODE_COUNT; mode++) {
        plan->pool_into[mode] = calloc((size_t)plan->n_nodes + 1, sizeof *plan->pool_into[mode]);
        plan->pool_skip[mode] = calloc((size_t)plan->n_nodes + 1, sizeof *plan->pool_skip[mode]);
        pools = pools && plan->pool_into[mode] && plan->pool_skip[mode];
    }
    plan->bias_into = calloc((size_t)plan->n_nodes + 1, sizeof *plan->bias_into);
    plan->grad_into = calloc((size_t)plan->n_nodes + 1, sizeof *plan->grad_into);
    plan->epilogue_src = calloc((size_t)plan->n_nodes + 1, sizeof *plan->epilogue_src);
    plan->written_by = calloc((size_t)plan->n_nodes + 1, sizeof *plan->written_by);
    plan->pair_next = calloc((size_t)plan->n_nodes + 1, sizeof *plan->pair_next);
    plan->computed_in = calloc((size_t)plan->n_nodes + 1, sizeof *plan->computed_in);
    plan->pool_codes = calloc((size_t)plan->n_nodes + 1, sizeof *plan->pool_codes);
    plan->bn_params_into = calloc((size_t)plan->n_nodes + 1, sizeof *plan->bn_params_into);
    if (!plan->offsets || !plan->storage || !plan->alias_of || !plan->epilogue ||
        !pools || !plan->bias_into || !plan->written_by ||
        !plan->epilogue_src || !plan->grad_into || !plan->pair_next || !plan->computed_in ||
        !plan->pool_codes || !plan->bn_params_into)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory");
    CT_TRY(ct_prepared_new(plan->n_nodes, &plan->prepared));
    CT_TRY(build_schedule(plan, CT_TRAIN));
    CT_TRY(build_schedule(plan, CT_EVAL));
    CT_TRY(ct_plan_find_host_nodes(plan));
    ct_fuse_relu(plan->graph, plan->backend, plan->on_host, plan->alias_of, plan->epilogue,
                 plan->epilogue_src);
    for (int mode = 0; mode < CT_MODE_COUNT; mode++) {
        ct_fuse_maxpool(plan->graph, plan->backend, plan->on_host, plan->schedule[mode],
                        plan->n_schedule[mode], plan->alias_of, plan->epilogue,
                        mode == CT_TRAIN, plan->pool_into[mode]);
        for (int i = 0; i < plan->n_nodes; i++)
            if (plan->pool_into[mode][i])
                plan->pool_skip[mode][plan->pool_into[mode][i]->id] = true;
    }
    ct_fuse_bias_grad(plan->graph, plan->backend, plan->on_host, plan->bias_into);
    for (int i = 0; i < plan->n_nodes; i++)
        if (plan->bias_into[i])
            plan->written_by[plan->bias_into[i]->id] = plan->graph->nodes[i];
    ct_fuse_loss_grad(plan->graph, plan->backend, plan->on_host, plan->grad_into);
    for (int i = 0; i < plan->n_nodes; i++) {
        const ct_tensor *grad = plan->grad_into[i];
        if (grad) {
            plan->written_by[grad->id] = plan->graph->nodes[i];
            plan->written_by[grad->src[0]->id] = plan->graph->nodes[i]; /* the seed */
        }
    }
    ct_fuse_bn_add(plan->graph, plan->backend, plan->on_host, plan->computed_in);
    ct_fuse_pool_bwd(plan->graph, plan->backend, plan->on_host, plan->alias_of, plan->bias_into,
                     plan->computed_in);
    ct_fuse_pool_codes(plan->graph, plan->backend, plan->on_host, plan->alias_of,
                       plan->pool_into[CT_TRAIN], plan->computed_in, plan->pool_codes);
    ct_fuse_bn_params(plan->graph, plan->backend, plan->on_host, plan->alias_of,
                      plan->bn_params_into);
    for (int i = 0; i < plan->n_nodes; i++)
        for (int k = 0; k < 2; k++)
            if (plan->bn_params_into[i][k])
                plan->written_by[plan->bn_params_into[i][k]->id] = plan->graph->nodes[i];
    CT_TRY(build_runs(plan, CT_TRAIN));
    CT_TRY(build_runs(plan, CT_EVAL));
    find_pairs(plan);
    layout_state(plan);
    CT_TRY(layout_arena(plan));
    size_workspaces(plan);
    CT_TRY(allocate(plan, plan->arena_bytes, &plan->arena, "activation arena"));
    CT_TRY(allocate(plan, plan->state_bytes, &plan->state, "parameters and inputs"));
    CT_TRY(allocate(plan, plan->workspace_bytes, &plan->workspace, "kernel workspace"));
    CT_TRY(allocate(plan, sizeof(ct_step_values), (void **)&plan->step_values,
                    "per-step values"));
    ct_step_values none = {.lr = plan->lr, .loss_scale = plan->scaler.scale};
    CT_TRY(plan->backend->iface->write(plan->backend, plan->step_values, &none, sizeof none));
    CT_TRY(ct_plan_allocate_host_copies(plan));
    return init_state(plan);
}

ct_status ct_plan_new(ct_graph *graph, ct_backend *backend, uint64_t seed, ct_plan **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_plan_new: out is NULL");
    *out = NULL;
    if (!graph || !backend)
        return ct_set_error(CT_ERR_ARG, "ct_plan_new: graph and backend are required");
    if (graph->status != CT_OK)
        return ct_set_error(graph->status,
                            "ct_plan_new: the graph has an error from building it (check "
                            "ct_graph_status after building)");
    CT_TRY(ct_plan_precision(graph, backend));
    ct_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory");
    plan->graph = graph;
    plan->backend = backend;
    plan->n_nodes = graph->n_nodes;
    plan->seed = seed;
    plan->lr = graph->optimizer_lr;
    ct_loss_scaler_init(&plan->scaler, graph);
    ct_status status = plan_build(plan);
    if (status != CT_OK) {
        ct_plan_free(plan);
        return status;
    }
    *out = plan;
    return CT_OK;
}

void ct_plan_free(ct_plan *plan)
{
    if (!plan)
        return;
    ct_backend *backend = plan->backend;
    ct_replay_free(&plan->replay, backend);
    if (plan->step_values)
        backend->iface->release(backend, plan->step_values);
    if (plan->arena)
        backend->iface->release(backend, plan->arena);
    if (plan->state)
        backend->iface->release(backend, plan->state);
    if (plan->workspace)
        backend->iface->release(backend, plan->workspace);
    void *host_copies[3] = {plan->host_arena, plan->host_state, plan->host_workspace};
    for (int i = 0; i < 3; i++)
        if (host_copies[i])
            backend->fallback->iface->release(backend->fallback, host_copies[i]);
    ct_prepared_free(plan->prepared);
    ct_staging_free(plan->staging, backend);
    free(plan->on_host);
    free(plan->numerics_buffer);
    ct_plan_set_hook(plan, NULL);
    ct_grad_points_free(&plan->grad);
    for (int mode = 0; mode < CT_MODE_COUNT; mode++) {
        free(plan->schedule[mode]);
        free(plan->runs[mode]);
    }
    free(plan->offsets);
    free(plan->storage);
    free(plan->alias_of);
    free(plan->epilogue);
    for (int mode = 0; mode < CT_MODE_COUNT; mode++) {
        free(plan->pool_into[mode]);
        free(plan->pool_skip[mode]);
    }
    free(plan->bias_into);
    free(plan->grad_into);
    free(plan->epilogue_src);
    free(plan->written_by);
    free(plan->pair_next);
    free(plan->computed_in);
    free(plan->pool_codes);
    free(plan->bn_params_into);
    free(plan);
}

ct_exec ct_plan_exec(const ct_plan *plan, ct_mode mode)
{
    ct_exec exec = {
        .arena = plan->arena,
        .state = plan->state,
        .offsets = plan->offsets,
        .storage = plan->storage,
        .workspace = plan->workspace,
        .epilogue = plan->epilogue,
        .epilogue_src = plan->epilogue_src,
        .pool_into = plan->pool_into[mode],
        .bias_into = mode == CT_TRAIN ? plan->bias_into : NULL,
        .grad_into = mode == CT_TRAIN ? plan->grad_into : NULL,
        .pair_next = mode == CT_TRAIN ? plan->pair_next : NULL,
        .computed_in = plan->computed_in,
        .pool_codes = mode == CT_TRAIN ? plan->pool_codes : NULL,
        .bn_params_into = mode == CT_TRAIN ? plan->bn_params_into : NULL,
        .training = mode == CT_TRAIN,
        .step = plan->step,
        .updates = plan->step - plan->scaler.skipped,
        .lr = plan->lr,
        .seed = plan->seed,
        .step_values = mode == CT_TRAIN ? plan->step_values : NULL,
        .sync_bn = mode == CT_TRAIN && plan->grad.hook ? plan->grad.hook->sync_bn : NULL,
        .prepared = mode == CT_EVAL ? plan->prepared : NULL,
    };
    return exec;
}

/* The one run loop: every step, profiled or not, replayed or not, goes
 * through it. */
static ct_status run_schedule(ct_plan *plan, ct_mode mode, const ct_exec *exec)
{
    ct_backend *backend = plan->backend;
    ct_run_hook *hook = plan->hook;
    const ct_grad_points *grad = mode == CT_TRAIN && plan->grad.hook ? &plan->grad : NULL;
    bool replayed = false;
    CT_TRY(ct_replay_run(&plan->replay, backend, mode, exec, plan->runs[mode],
                         plan->n_runs[mode],
                         !hook && !plan->on_host && !grad && !plan->check_numerics, &replayed));
    if (replayed)
        return backend->iface->synchronize(backend);
    ct_replay_count_eager(&plan->replay, mode);
    backend->iface->begin_step(backend);
    if (hook)
        hook->step_begin(hook, mode);
    for (int i = 0, done = 1; i < plan->n_runs[mode]; i += done) {
        const ct_tensor *node = plan->runs[mode][i];
        const ct_impl *ran = NULL;
        if (grad)
            CT_TRY(ct_grad_points_before(grad, i));
        if (hook)
            hook->node_begin(hook, mode, i);
        done = 1;
        if (plan->on_host && plan->on_host[node->id])
            CT_TRY(ct_plan_run_on_host(plan, exec, node, &ran));
        else
            CT_TRY(ct_impl_run_next(backend, exec, plan->runs[mode] + i,
                                    plan->n_runs[mode] - i, &done, &ran));
        if (hook) /* a group's time and counts are its first node's */
            for (int k = 0; k < done; k++) {
                if (k > 0)
                    hook->node_begin(hook, mode, i + k);
                hook->node_end(hook, mode, i + k, ran->name, k == 0 ? done : 0);
            }
        if (plan->check_numerics)
            for (int k = 0; k < done; k++)
                CT_TRY(ct_numerics_check(plan, mode, plan->runs[mode][i + k],
                                         plan->numerics_buffer));
        if (grad)
            CT_TRY(ct_grad_points_after(grad, exec, i, done));
    }
    if (grad)
        CT_TRY(ct_grad_points_before(grad, plan->n_runs[mode]));
    CT_TRY(backend->iface->synchronize(backend));
    return hook ? hook->step_end(hook, mode, plan->step) : CT_OK;
}

ct_status ct_plan_run(ct_plan *plan, ct_mode mode)
{
    return ct_plan_run_taking(plan, mode, true);
}

ct_status ct_plan_run_taking(ct_plan *plan, ct_mode mode, bool take_staged)
{
    if (!plan)
        return ct_set_error(CT_ERR_ARG, "ct_plan_run: plan is NULL");
    if (mode != CT_TRAIN && mode != CT_EVAL)
        return ct_set_error(CT_ERR_ARG, "ct_plan_run: mode %d is neither CT_TRAIN nor CT_EVAL",
                            (int)mode);
    if (plan->graph->n_nodes != plan->n_nodes)
        return ct_set_error(CT_ERR_STATE,
                            "ct_plan_run: the graph grew after the plan was made; make a new "
                            "plan");
    ct_exec exec = ct_plan_exec(plan, mode);
    if (take_staged)
        CT_TRY(ct_staging_take(plan->staging, plan->backend, &exec));
    if (mode == CT_TRAIN) {
        ct_prepared_stepped(plan->prepared); /* the step updates the parameters */
        ct_step_values values = {.lr = plan->lr, .loss_scale = plan->scaler.scale,
                                 .step = plan->step, .updates = exec.updates};
        CT_TRY(plan->backend->iface->write(plan->backend, plan->step_values, &values,
                                           sizeof values));
    }
    CT_TRY(run_schedule(plan, mode, &exec));
    if (mode == CT_TRAIN && plan->scaler.on) {
        ct_step_values values;
        CT_TRY(ct_plan_step_values(plan, &values));
        ct_loss_scaler_update(&plan->scaler, values.found_inf != 0);
    }
    if (mode == CT_TRAIN)
        plan->step++;
    return CT_OK;
}

ct_status ct_plan_step_values(const ct_plan *plan, ct_step_values *out)
{
    return plan->backend->iface->read(plan->backend, out, plan->step_values, sizeof *out);
}

ct_loss_scaler *ct_plan_loss_scaler(const ct_plan *plan)
{
    return (ct_loss_scaler *)&plan->scaler;
}

/* Resolve a tensor for copying by the function `what`; `writing` allows
 * only inputs and state. */
static ct_status locate(const ct_plan *plan, const ct_tensor *t, size_t bytes, const char *what,
                        bool writing, void **where)
{
    if (!plan || !t)
        return ct_set_error(CT_ERR_ARG, "%s: plan and tensor are required", what);
    if (t->graph != plan->graph || t->id >= plan->n_nodes)
        return ct_set_error(CT_ERR_ARG, "%s: '%s' is not a tensor of this plan's graph", what,
                            ct_tensor_name(t));
    if (bytes != ct_tensor_bytes(t)) {
        char desc[CT_DESCRIBE_CAPACITY];
        return ct_set_error(CT_ERR_ARG, "%s: %s (%s) holds %zu bytes, not %zu", what,
                            ct_tensor_describe(t, desc, sizeof desc), ct_dtype_name(t->dtype),
                            ct_tensor_bytes(t), bytes);
    }
    const ct_tensor *root = ct_storage_root(t);
    ct_storage storage = (ct_storage)plan->storage[root->id];
    if (writing && t->op != CT_OP_LEAF)
        return ct_set_error(CT_ERR_ARG,
                            "%s: '%s' is computed by the graph; only inputs, "
                            "parameters and buffers can be written",
                            what, ct_tensor_name(t));
    if (!writing && storage != CT_STORAGE_STATE && !(storage == CT_STORAGE_ARENA && t->keep))
        return ct_set_error(CT_ERR_ARG,
                            "ct_plan_read: '%s' is not kept after a run; call ct_tensor_keep "
                            "on it before ct_plan_new",
                            ct_tensor_name(t));
    ct_exec exec = ct_plan_exec(plan, CT_EVAL);
    *where = ct_exec_data(&exec, t);
    return CT_OK;
}

ct_status ct_plan_write(ct_plan *plan, ct_tensor *t, const void *host, size_t bytes)
{
    void *dst = NULL;
    CT_TRY(locate(plan, t, bytes, "ct_plan_write", true, &dst));
    if (!host)
        return ct_set_error(CT_ERR_ARG, "ct_plan_write: host data is NULL");
    ct_prepared_wrote(plan->prepared, t);
    return plan->backend->iface->write(plan->backend, dst, host, bytes);
}

ct_status ct_plan_stage(ct_plan *plan, ct_tensor *t, const void *host, size_t bytes)
{
    void *dst = NULL;
    CT_TRY(locate(plan, t, bytes, "ct_plan_stage", true, &dst));
    if (t->role != CT_ROLE_INPUT)
        return ct_set_error(CT_ERR_ARG,
                            "ct_plan_stage: '%s' is not an input (ct_input); write parameters "
                            "and buffers with ct_plan_write",
                            ct_tensor_name(t));
    if (!host)
        return ct_set_error(CT_ERR_ARG, "ct_plan_stage: host data is NULL");
    return ct_staging_put(&plan->staging, plan->backend, t, host, bytes);
}

ct_status ct_plan_read(ct_plan *plan, const ct_tensor *t, void *host, size_t bytes)
{
    void *src = NULL;
    CT_TRY(locate(plan, t, bytes, "ct_plan_read", false, &src));
    if (!host)
        return ct_set_error(CT_ERR_ARG, "ct_plan_read: host buffer is NULL");
    return plan->backend->iface->read(plan->backend, host, src, bytes);
}

int ct_plan_cuda_graph(const ct_plan *plan, ct_mode mode, int *nodes, const char **why)
{
    if (nodes)
        *nodes = 0;
    if (why)
        *why = NULL;
    if (!plan || (mode != CT_TRAIN && mode != CT_EVAL))
        return 0;
    const ct_replay *r = &plan->replay;
    if (r->recorded[mode]) {
        if (nodes)
            *nodes = plan->backend->iface->replay_nodes(plan->backend, r->recorded[mode]);
        return 1;
    }
    if (r->failed && why)
        *why = r->why;
    return r->failed ? -1 : 0;
}
