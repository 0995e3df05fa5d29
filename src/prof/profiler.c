/*
 * Per-node timing of plan steps.  On the CPU a node's time is the host
 * clock around run_node (kernels are synchronous; clock_gettime costs tens
 * of nanoseconds, far below any kernel).  A backend with a device clock
 * (the vtable's timer_* entries, see graph/backend.h) also gets marks
 * recorded between nodes, and its device times are mapped onto the host
 * clock at the step's start: on a GPU the host times show when work was
 * queued, the device times when it ran.
 */
#include "prof/profiler.h"
#include "prof/roofline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "graph/plan.h"
#include "ops/cost.h"
#include "ops/ops.h"

#define SHAPES_CAPACITY 128
#define CT_PROF_MODE_COUNT 2

/* A hook on the plan's run loop (graph/plan.h): records made once for the
 * nodes of both modes, with what does not change between steps (op, label,
 * shapes, phase, estimated cost) filled in then; a step only writes times
 * into them. */
typedef struct ct_profiler {
    ct_run_hook hook; /* first: the plan holds the profiler by it */
    ct_backend *backend;
    ct_prof_record *records[CT_PROF_MODE_COUNT];
    int n_records[CT_PROF_MODE_COUNT];
    char *shapes; /* SHAPES_CAPACITY bytes per record, both modes */
    void *timer;  /* the backend's device timer, or NULL */
    bool has_last;
    ct_profile last;
    int64_t step_start;
} ct_profiler;

int64_t ct_prof_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + (int64_t)now.tv_nsec;
}

const char *ct_prof_phase_name(ct_prof_phase phase)
{
    switch (phase) {
    case CT_PROF_FORWARD:
        return "forward";
    case CT_PROF_BACKWARD:
        return "backward";
    case CT_PROF_OPTIMIZER:
        return "optimizer";
    case CT_PROF_PHASE_COUNT:
        break;
    }
    return "unknown";
}

static ct_prof_phase phase_of(const ct_tensor *node)
{
    switch (node->phase) {
    case CT_PHASE_BACKWARD:
        return CT_PROF_BACKWARD;
    case CT_PHASE_OPTIMIZER:
        return CT_PROF_OPTIMIZER;
    case CT_PHASE_FORWARD:
        break;
    }
    return CT_PROF_FORWARD;
}

/* "[8,3] " appended at buf[*used]; stops quietly when full. */
static void append_shape(char *buf, size_t *used, const ct_tensor *t, const char *after)
{
    for (int d = -1; d <= t->ndim && *used < SHAPES_CAPACITY; d++) {
        int written;
        size_t room = SHAPES_CAPACITY - *used;
        if (d < 0)
            written = snprintf(buf + *used, room, "[");
        else if (d < t->ndim)
            written = snprintf(buf + *used, room, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        else
            written = snprintf(buf + *used, room, "]%s", after);
        *used += written > 0 ? (size_t)written : 0;
    }
    if (*used >= SHAPES_CAPACITY)
        *used = SHAPES_CAPACITY - 1;
}

/* The parts of a record that do not change between steps. */
static void describe(const ct_tensor *node, char *shapes, ct_prof_record *record)
{
    size_t used = 0;
    shapes[0] = '\0';
    for (int i = 0; i < node->n_src; i++)
        append_shape(shapes, &used, node->src[i], " ");
    if (used + 4 < SHAPES_CAPACITY)
        used += (size_t)snprintf(shapes + used, SHAPES_CAPACITY - used, "-> ");
    append_shape(shapes, &used, node, "");
    ct_cost cost = ct_op_cost(node);
    *record = (ct_prof_record){
        .op = ct_node_op_name(node),
        .label = ct_tensor_name(node),
        .shapes = shapes,
        .phase = phase_of(node),
        .device_start_ns = -1,
        .device_end_ns = -1,
        .flops = cost.flops,
        .bytes = cost.bytes,
    };
}

static void profiler_destroy(ct_run_hook *hook)
{
    ct_profiler *prof = (ct_profiler *)hook;
    if (prof->timer)
        prof->backend->iface->timer_free(prof->backend, prof->timer);
    for (int mode = 0; mode < CT_PROF_MODE_COUNT; mode++)
        free(prof->records[mode]);
    free(prof->shapes);
    free(prof);
}

static void profiler_step_begin(ct_run_hook *hook, ct_mode mode)
{
    ct_profiler *prof = (ct_profiler *)hook;
    (void)mode;
    prof->has_last = false;
    prof->step_start = ct_prof_now_ns();
    if (prof->timer)
        prof->backend->iface->timer_mark(prof->backend, prof->timer, 0);
}

static void profiler_node_begin(ct_run_hook *hook, ct_mode mode, int index)
{
    ct_profiler *prof = (ct_profiler *)hook;
    prof->records[mode][index].start_ns = ct_prof_now_ns();
}

static void profiler_node_end(ct_run_hook *hook, ct_mode mode, int index, const char *kernel,
                              int group)
{
    ct_profiler *prof = (ct_profiler *)hook;
    prof->records[mode][index].end_ns = ct_prof_now_ns();
    prof->records[mode][index].kernel = kernel;
    prof->records[mode][index].group = group;
    if (prof->timer)
        prof->backend->iface->timer_mark(prof->backend, prof->timer, index + 1);
}

/* Device times of the step's records, from the marks around each node. */
static ct_status read_device_times(ct_profiler *prof, ct_prof_record *records, int n)
{
    ct_backend *backend = prof->backend;
    int64_t before = 0;
    CT_TRY(backend->iface->timer_elapsed_ns(backend, prof->timer, 0, &before));
    for (int r = 0; r < n; r++) {
        int64_t after = 0;
        CT_TRY(backend->iface->timer_elapsed_ns(backend, prof->timer, r + 1, &after));
        records[r].device_start_ns = prof->step_start + before;
        records[r].device_end_ns = prof->step_start + after;
        before = after;
    }
    return CT_OK;
}

/* An emulated GPU's counters per record (the difference between the marks
 * around it) and the roofline model's prediction from them. */
static ct_status read_device_counts(ct_profiler *prof, ct_prof_record *records, int n,
                                    bool *counted)
{
    ct_backend *backend = prof->backend;
    *counted = false;
    ct_kernel_counts before = {0};
    ct_status status = backend->iface->timer_counts(backend, prof->timer, 0, &before);
    if (status == CT_ERR_UNSUPPORTED)
        return CT_OK;
    CT_TRY(status);
    for (int r = 0; r < n; r++) {
        ct_kernel_counts after = {0};
        CT_TRY(backend->iface->timer_counts(backend, prof->timer, r + 1, &after));
        ct_kernel_counts *c = &records[r].counts;
        *c = (ct_kernel_counts){
            .counted = true,
            .launches = after.launches - before.launches,
            .bytes_used = after.bytes_used - before.bytes_used,
            .bytes_moved = after.bytes_moved - before.bytes_moved,
            .dram_bytes = after.dram_bytes - before.dram_bytes,
            .shared_wavefronts = after.shared_wavefronts - before.shared_wavefronts,
            .shared_ideal_wavefronts =
                after.shared_ideal_wavefronts - before.shared_ideal_wavefronts,
            .flops_executed = after.flops_executed - before.flops_executed,
            .tensor_flops = after.tensor_flops - before.tensor_flops,
            .branches = after.branches - before.branches,
            .divergent_branches = after.divergent_branches - before.divergent_branches,
            .warp_instructions = after.warp_instructions - before.warp_instructions,
            .chain_instructions = after.chain_instructions - before.chain_instructions,
            .chain_load_rounds = after.chain_load_rounds - before.chain_load_rounds,
            .chain_collectives = after.chain_collectives - before.chain_collectives,
            .chain_barriers = after.chain_barriers - before.chain_barriers,
            .sm_instructions = after.sm_instructions - before.sm_instructions,
            .latency_clocks = after.latency_clocks - before.latency_clocks,
        };
        /* a group's kernels did its members' work: their arithmetic and
         * least traffic are the floor of its first record */
        double flops = 0, bytes = 0;
        for (int g = r; g < r + (records[r].group > 1 ? records[r].group : 1) && g < n; g++)
            flops += records[g].flops, bytes += records[g].bytes;
        ct_roofline_predict(&ct_gpu_h100_sxm, flops, bytes, c);
        before = after;
    }
    *counted = true;
    return CT_OK;
}

static ct_status profiler_step_end(ct_run_hook *hook, ct_mode mode, int64_t step)
{
    ct_profiler *prof = (ct_profiler *)hook;
    int n = prof->n_records[mode];
    if (prof->timer)
        CT_TRY(read_device_times(prof, prof->records[mode], n));
    bool counted = false;
    if (prof->timer && prof->backend->iface->timer_counts)
        CT_TRY(read_device_counts(prof, prof->records[mode], n, &counted));
    prof->last = (ct_profile){
        .mode = mode,
        .step = step,
        .start_ns = prof->step_start,
        .end_ns = ct_prof_now_ns(),
        .n_records = n,
        .records = prof->records[mode],
        .predicted_for = counted ? ct_gpu_h100_sxm.name : NULL,
        .graph_launch_ns = counted ? ct_gpu_h100_sxm.launch_ns : 0.0,
    };
    prof->has_last = true;
    return CT_OK;
}

/* Records for every node the plan runs, described once. */
static ct_status profiler_new(ct_plan *plan, ct_profiler **out)
{
    *out = NULL;
    ct_profiler *prof = calloc(1, sizeof *prof);
    if (!prof)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_set_profiling: out of host memory");
    prof->hook = (ct_run_hook){profiler_step_begin, profiler_node_begin, profiler_node_end,
                               profiler_step_end, profiler_destroy};
    prof->backend = ct_plan_backend(plan);
    const ct_tensor *const *runs[CT_PROF_MODE_COUNT];
    int total = 0, most = 0;
    for (int mode = 0; mode < CT_PROF_MODE_COUNT; mode++) {
        runs[mode] = ct_plan_runs(plan, (ct_mode)mode, &prof->n_records[mode]);
        prof->records[mode] = calloc((size_t)prof->n_records[mode] + 1, sizeof(ct_prof_record));
        total += prof->n_records[mode];
        most = prof->n_records[mode] > most ? prof->n_records[mode] : most;
    }
    prof->shapes = malloc((size_t)(total + 1) * SHAPES_CAPACITY);
    if (!prof->records[0] || !prof->records[1] || !prof->shapes) {
        profiler_destroy(&prof->hook);
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_set_profiling: out of host memory");
    }
    char *shapes = prof->shapes;
    for (int mode = 0; mode < CT_PROF_MODE_COUNT; mode++)
        for (int i = 0; i < prof->n_records[mode]; i++, shapes += SHAPES_CAPACITY)
            describe(runs[mode][i], shapes, &prof->records[mode][i]);
    /* a node that computes batchnorms' parameter gradients does their
     * arithmetic and reads their x: their least traffic but dy's, which it
     * writes itself, is its floor too */
    for (int i = 0; i < prof->n_records[CT_TRAIN]; i++)
        for (int k = 0; k < 2; k++) {
            const ct_tensor *params = ct_plan_bn_params_of(plan, runs[CT_TRAIN][i], k);
            if (!params)
                continue;
            ct_cost cost = ct_op_cost(params);
            prof->records[CT_TRAIN][i].flops += cost.flops;
            prof->records[CT_TRAIN][i].bytes +=
                cost.bytes - (double)ct_tensor_bytes(params->src[1]);
        }
    const ct_backend_i *iface = prof->backend->iface;
    if (iface->timer_new && iface->timer_mark && iface->timer_elapsed_ns && iface->timer_free) {
        ct_status status = iface->timer_new(prof->backend, most + 1, true, &prof->timer);
        if (status != CT_OK) {
            prof->timer = NULL;
            profiler_destroy(&prof->hook);
            return status;
        }
    }
    *out = prof;
    return CT_OK;
}

double ct_plan_flops(const ct_plan *plan, ct_mode mode)
{
    if (!plan || (mode != CT_TRAIN && mode != CT_EVAL))
        return 0.0;
    /* fused nodes too: their arithmetic is done, in another node's kernel */
    int n = 0;
    const ct_tensor *const *nodes = ct_plan_schedule(plan, mode, &n);
    double flops = 0.0;
    for (int i = 0; i < n; i++)
        flops += ct_op_cost(nodes[i]).flops;
    return flops;
}

ct_status ct_plan_set_profiling(ct_plan *plan, bool on)
{
    if (!plan)
        return ct_set_error(CT_ERR_ARG, "ct_plan_set_profiling: plan is NULL");
    if (!on) {
        ct_plan_set_hook(plan, NULL);
        return CT_OK;
    }
    if (ct_plan_hook(plan))
        return CT_OK;
    ct_profiler *prof = NULL;
    CT_TRY(profiler_new(plan, &prof));
    ct_plan_set_hook(plan, &prof->hook);
    return CT_OK;
}

ct_status ct_plan_profile(const ct_plan *plan, ct_profile *out)
{
    if (!plan || !out)
        return ct_set_error(CT_ERR_ARG, "ct_plan_profile: plan and out are required");
    const ct_profiler *prof = (const ct_profiler *)ct_plan_hook(plan);
    if (!prof || !prof->has_last)
        return ct_set_error(CT_ERR_STATE,
                            "ct_plan_profile: no step has run with profiling on; call "
                            "ct_plan_set_profiling(plan, true) and then ct_plan_run");
    *out = prof->last;
    return CT_OK;
}
