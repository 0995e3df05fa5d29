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
#include "graph/precision.h"
#include "graph/prepared.h"
#include "graph/replay.h"

#define CT_MODE_COUNT 2

struct ct_plan {
    ct_graph *graph;
    ct_backend *backend;
    int n_nodes; /* the graph's size when planned: it must not change */
    const ct_tensor **schedule[CT_MODE_COUNT];
    int n_schedule[CT_MODE_COUNT];
    /* The nodes that run a kernel: the schedule without views and without
     * ops fused into their producer (relus; in eval, also 2x2 max pools). */
    const ct_tensor **runs[CT_MODE_COUNT];
    int n_runs[CT_MODE_COUNT];
    size_t *offsets;  /* by node id */
    uint8_t *storage; /* ct_storage by node id */
    const ct_tensor **alias_of; /* by node id: a fused relu's producer, else NULL */
    uint8_t *epilogue;          /* ct_epilogue by node id */
    const ct_tensor **eval_pool_into; /* by node id: the pool an eval conv also computes */
    bool *eval_skip;                  /* by node id: computed by another kernel in eval */
    void *arena, *state, *workspace;
    size_t arena_bytes, state_bytes, workspace_bytes;
    ct_step_values *step_values; /* in the backend's memory: see ct_exec */
    ct_loss_scaler scaler;       /* fp16's loss scaling (graph/precision.h) */
    ct_replay replay;
    uint64_t seed;
    int64_t step;
    float lr;
    ct_run_hook *hook; /* the profiler, when profiling is on */
    ct_grad_points grad; /* data parallel's hook between backward and the optimizer */
    /* ct_plan_set_check_numerics: a host copy of the largest float output */
    bool check_numerics;
    void *numerics_buffer;
    /* Nodes the backend cannot run, run by its fallback (the CPU) on host
     * copies of the arena and state (NULL when there are none). */
    bool *on_host;
    void *host_arena, *host_state, *host_workspace;
    size_t host_workspace_bytes;
    ct_prepared *prepared; /* what kernels keep between inference runs */
};

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
        if (!t->view_of && !plan->alias_of[t->id]) {
            plan->storage[t->id] = CT_STORAGE_ARENA;
            item_of[t->id] = n_items;
            items[n_items++] = (ct_lifetime){pos, pos, ct_tensor_bytes(t)};
        }
        for (int s = 0; s <= t->n_src; s++) {
            const ct_tensor *used = s < t->n_src ? t->src[s] : t;
            const ct_tensor *root = plan_root(plan, used);
            if (root->op == CT_OP_LEAF)
                continue;
            ct_lifetime *life = &items[item_of[root->id]];
            if (pos > life->last)
                life->last = pos;
            if (used->keep)
                life->last = INT_MAX;
        }
    }
    /* An evaluation conv that also computes a max pool writes the pool's
     * output at its own position: the pool's bytes must not share memory
     * with anything that dies in between (the conv's input, say). */
    for (int pos = 0; pos < n; pos++) {
        const ct_tensor *pool = plan->eval_pool_into[schedule[pos]->id];
        if (pool && item_of[pool->id] >= 0 && items[item_of[pool->id]].first > pos)
            items[item_of[pool->id]].first = pos;
    }
    size_t peak = ct_memplan_layout(items, n_items, item_offsets);
    /* In schedule order, so a fused relu is placed before views of it. */
    for (int pos = 0; pos < n; pos++) {
        const ct_tensor *t = schedule[pos];
        const ct_tensor *producer = plan->alias_of[t->id];
        if (producer) {
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

/* An op the backend cannot run goes to its fallback (shared/DESIGN.md: "an
 * unsupported op falls back to the CPU with a clear log line"), unless the
 * backend is strict or has none.  Marks plan->on_host and says so once. */
static ct_status find_host_nodes(ct_plan *plan)
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

/* The workspace each side needs: the largest of its nodes'. */
static void size_workspaces(ct_plan *plan)
{
    for (int mode = 0; mode < CT_MODE_COUNT; mode++) {
        for (int i = 0; i < plan->n_runs[mode]; i++) {
            const ct_tensor *t = plan->runs[mode][i];
            bool host = plan->on_host && plan->on_host[t->id];
            const ct_backend *runner = host ? plan->backend->fallback : plan->backend;
            size_t bytes = ct_impl_workspace(runner, t);
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

/* The fallback's memory: host copies of the arena and the state, at the
 * same offsets, so its kernels find every tensor where the plan put it. */
static ct_status allocate_host_copies(ct_plan *plan)
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
            !(mode == CT_EVAL && plan->eval_skip[node->id]))
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
    plan->eval_pool_into = calloc((size_t)plan->n_nodes + 1, sizeof *plan->eval_pool_into);
    plan->eval_skip = calloc((size_t)plan->n_nodes + 1, sizeof *plan->eval_skip);
    if (!plan->offsets || !plan->storage || !plan->alias_of || !plan->epilogue ||
        !plan->eval_pool_into || !plan->eval_skip)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_new: out of host memory");
    CT_TRY(ct_prepared_new(plan->n_nodes, &plan->prepared));
    CT_TRY(build_schedule(plan, CT_TRAIN));
    CT_TRY(build_schedule(plan, CT_EVAL));
    CT_TRY(find_host_nodes(plan));
    ct_fuse_relu(plan->graph, plan->backend, plan->on_host, plan->alias_of, plan->epilogue);
    ct_fuse_eval_maxpool(plan->graph, plan->backend, plan->on_host, plan->schedule[CT_EVAL],
                         plan->n_schedule[CT_EVAL], plan->alias_of, plan->epilogue,
                         plan->eval_pool_into);
    for (int i = 0; i < plan->n_nodes; i++)
        if (plan->eval_pool_into[i])
            plan->eval_skip[plan->eval_pool_into[i]->id] = true;
    CT_TRY(build_runs(plan, CT_TRAIN));
    CT_TRY(build_runs(plan, CT_EVAL));
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
    CT_TRY(allocate_host_copies(plan));
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
    free(plan->eval_pool_into);
    free(plan->eval_skip);
    free(plan);
}

static ct_exec exec_of(const ct_plan *plan, ct_mode mode)
{
    ct_exec exec = {
        .arena = plan->arena,
        .state = plan->state,
        .offsets = plan->offsets,
        .storage = plan->storage,
        .workspace = plan->workspace,
        .epilogue = plan->epilogue,
        .pool_into = mode == CT_EVAL ? plan->eval_pool_into : NULL,
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
static ct_status run_on_host(ct_plan *plan, const ct_exec *exec, const ct_tensor *node,
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
            CT_TRY(run_on_host(plan, exec, node, &ran));
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
    if (!plan)
        return ct_set_error(CT_ERR_ARG, "ct_plan_run: plan is NULL");
    if (mode != CT_TRAIN && mode != CT_EVAL)
        return ct_set_error(CT_ERR_ARG, "ct_plan_run: mode %d is neither CT_TRAIN nor CT_EVAL",
                            (int)mode);
    if (plan->graph->n_nodes != plan->n_nodes)
        return ct_set_error(CT_ERR_STATE,
                            "ct_plan_run: the graph grew after the plan was made; make a new "
                            "plan");
    ct_exec exec = exec_of(plan, mode);
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

/* Resolve a tensor for copying; `writing` allows only inputs and state. */
static ct_status locate(const ct_plan *plan, const ct_tensor *t, size_t bytes, bool writing,
                        void **where)
{
    const char *what = writing ? "ct_plan_write" : "ct_plan_read";
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
                            "ct_plan_write: '%s' is computed by the graph; only inputs, "
                            "parameters and buffers can be written",
                            ct_tensor_name(t));
    if (!writing && storage != CT_STORAGE_STATE && !(storage == CT_STORAGE_ARENA && t->keep))
        return ct_set_error(CT_ERR_ARG,
                            "ct_plan_read: '%s' is not kept after a run; call ct_tensor_keep "
                            "on it before ct_plan_new",
                            ct_tensor_name(t));
    ct_exec exec = exec_of(plan, CT_EVAL);
    *where = ct_exec_data(&exec, t);
    return CT_OK;
}

ct_status ct_plan_write(ct_plan *plan, ct_tensor *t, const void *host, size_t bytes)
{
    void *dst = NULL;
    CT_TRY(locate(plan, t, bytes, true, &dst));
    if (!host)
        return ct_set_error(CT_ERR_ARG, "ct_plan_write: host data is NULL");
    ct_prepared_wrote(plan->prepared, t);
    return plan->backend->iface->write(plan->backend, dst, host, bytes);
}

size_t ct_plan_kept_bytes(const ct_plan *plan)
{
    return plan ? ct_prepared_bytes(plan->prepared) : 0;
}

uint64_t ct_plan_kept_made(const ct_plan *plan)
{
    return plan && plan->prepared ? plan->prepared->made : 0;
}

ct_status ct_plan_read(ct_plan *plan, const ct_tensor *t, void *host, size_t bytes)
{
    void *src = NULL;
    CT_TRY(locate(plan, t, bytes, false, &src));
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

void ct_plan_set_lr(ct_plan *plan, float lr)
{
    if (plan)
        plan->lr = lr;
}

float ct_plan_lr(const ct_plan *plan)
{
    return plan ? plan->lr : 0.0f;
}

int64_t ct_plan_step(const ct_plan *plan)
{
    return plan ? plan->step : 0;
}

void ct_plan_set_step(ct_plan *plan, int64_t step)
{
    if (plan && step >= 0)
        plan->step = step;
}

ct_graph *ct_plan_graph(const ct_plan *plan)
{
    return plan ? plan->graph : NULL;
}

size_t ct_plan_arena_bytes(const ct_plan *plan)
{
    return plan ? plan->arena_bytes : 0;
}

size_t ct_plan_state_bytes(const ct_plan *plan)
{
    return plan ? plan->state_bytes : 0;
}

int ct_plan_n_nodes(const ct_plan *plan, ct_mode mode)
{
    if (!plan || (mode != CT_TRAIN && mode != CT_EVAL))
        return 0;
    return plan->n_schedule[mode];
}

void ct_plan_set_hook(ct_plan *plan, ct_run_hook *hook)
{
    if (plan->hook && plan->hook != hook)
        plan->hook->destroy(plan->hook);
    plan->hook = hook;
}

ct_status ct_plan_set_grad_hook(ct_plan *plan, ct_grad_hook *hook)
{
    ct_grad_points_free(&plan->grad);
    if (!hook)
        return CT_OK;
    ct_status status = ct_grad_points_build(&plan->grad, plan->graph, plan->runs[CT_TRAIN],
                                            plan->n_runs[CT_TRAIN], plan->alias_of);
    if (status != CT_OK) {
        hook->destroy(hook);
        return status;
    }
    plan->grad.hook = hook;
    return CT_OK;
}

ct_grad_hook *ct_plan_grad_hook(const ct_plan *plan)
{
    return plan->grad.hook;
}

ct_grad_hook *ct_plan_swap_grad_hook(ct_plan *plan, ct_grad_hook *hook)
{
    ct_grad_hook *before = plan->grad.hook;
    plan->grad.hook = hook;
    return before;
}

ct_run_hook *ct_plan_swap_hook(ct_plan *plan, ct_run_hook *hook)
{
    ct_run_hook *before = plan->hook;
    plan->hook = hook;
    return before;
}

ct_status ct_plan_set_check_numerics(ct_plan *plan, bool on)
{
    if (!plan)
        return ct_set_error(CT_ERR_ARG, "ct_plan_set_check_numerics: plan is NULL");
    if (on && !plan->numerics_buffer) {
        size_t largest = 1;
        for (int mode = 0; mode < CT_MODE_COUNT; mode++)
            for (int i = 0; i < plan->n_runs[mode]; i++) {
                size_t bytes = ct_tensor_bytes(plan->runs[mode][i]);
                largest = bytes > largest ? bytes : largest;
            }
        if (!(plan->numerics_buffer = malloc(largest)))
            return ct_set_error(CT_ERR_MEMORY, "ct_plan_set_check_numerics: out of host memory "
                                "for %zu bytes", largest);
    }
    plan->check_numerics = on;
    return CT_OK;
}

ct_status ct_plan_peek(const ct_plan *plan, const ct_tensor *t, void *host, size_t bytes)
{
    ct_exec exec = exec_of(plan, CT_TRAIN);
    return plan->backend->iface->read(plan->backend, host, ct_exec_data(&exec, t), bytes);
}

ct_run_hook *ct_plan_hook(const ct_plan *plan)
{
    return plan->hook;
}

ct_backend *ct_plan_backend(const ct_plan *plan)
{
    return plan->backend;
}

const ct_tensor *const *ct_plan_runs(const ct_plan *plan, ct_mode mode, int *count)
{
    *count = plan->n_runs[mode];
    return plan->runs[mode];
}
