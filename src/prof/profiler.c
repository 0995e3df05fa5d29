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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "ops/cost.h"

#define SHAPES_CAPACITY 128

struct ct_profiler {
    ct_backend *backend;
    ct_prof_record *records[CT_PROF_MODE_COUNT];
    int n_records[CT_PROF_MODE_COUNT];
    char *shapes; /* SHAPES_CAPACITY bytes per record, both modes */
    void *timer;  /* the backend's device timer, or NULL */
    bool has_last;
    ct_profile last;
};

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
        .op = ct_op_info_of(node->op)->name,
        .label = ct_tensor_name(node),
        .shapes = shapes,
        .phase = phase_of(node),
        .device_start_ns = -1,
        .device_end_ns = -1,
        .flops = cost.flops,
        .bytes = cost.bytes,
    };
}

void ct_profiler_free(ct_profiler *prof)
{
    if (!prof)
        return;
    if (prof->timer)
        prof->backend->iface->timer_free(prof->backend, prof->timer);
    for (int mode = 0; mode < CT_PROF_MODE_COUNT; mode++)
        free(prof->records[mode]);
    free(prof->shapes);
    free(prof);
}

static int count_runnable(const ct_tensor **schedule, int n)
{
    int count = 0;
    for (int i = 0; i < n; i++)
        count += schedule[i]->op != CT_OP_VIEW;
    return count;
}

ct_status ct_profiler_new(ct_backend *backend, const ct_tensor **const schedules[],
                          const int n_schedule[], ct_profiler **out)
{
    *out = NULL;
    ct_profiler *prof = calloc(1, sizeof *prof);
    if (!prof)
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_set_profiling: out of host memory");
    prof->backend = backend;
    int total = 0, most = 0;
    for (int mode = 0; mode < CT_PROF_MODE_COUNT; mode++) {
        prof->n_records[mode] = count_runnable(schedules[mode], n_schedule[mode]);
        prof->records[mode] = calloc((size_t)prof->n_records[mode] + 1, sizeof(ct_prof_record));
        total += prof->n_records[mode];
        most = prof->n_records[mode] > most ? prof->n_records[mode] : most;
    }
    prof->shapes = malloc((size_t)(total + 1) * SHAPES_CAPACITY);
    if (!prof->records[0] || !prof->records[1] || !prof->shapes) {
        ct_profiler_free(prof);
        return ct_set_error(CT_ERR_MEMORY, "ct_plan_set_profiling: out of host memory");
    }
    char *shapes = prof->shapes;
    for (int mode = 0; mode < CT_PROF_MODE_COUNT; mode++) {
        int r = 0;
        for (int i = 0; i < n_schedule[mode]; i++) {
            if (schedules[mode][i]->op == CT_OP_VIEW)
                continue;
            describe(schedules[mode][i], shapes, &prof->records[mode][r++]);
            shapes += SHAPES_CAPACITY;
        }
    }
    const ct_backend_i *iface = backend->iface;
    if (iface->timer_new && iface->timer_mark && iface->timer_elapsed_ns && iface->timer_free) {
        ct_status status = iface->timer_new(backend, most + 1, &prof->timer);
        if (status != CT_OK) {
            prof->timer = NULL;
            ct_profiler_free(prof);
            return status;
        }
    }
    *out = prof;
    return CT_OK;
}

/* Device times of the step's records, from the marks around each node. */
static ct_status read_device_times(ct_profiler *prof, ct_prof_record *records, int n,
                                   int64_t step_start_ns)
{
    ct_backend *backend = prof->backend;
    int64_t before = 0;
    CT_TRY(backend->iface->timer_elapsed_ns(backend, prof->timer, 0, &before));
    for (int r = 0; r < n; r++) {
        int64_t after = 0;
        CT_TRY(backend->iface->timer_elapsed_ns(backend, prof->timer, r + 1, &after));
        records[r].device_start_ns = step_start_ns + before;
        records[r].device_end_ns = step_start_ns + after;
        before = after;
    }
    return CT_OK;
}

ct_status ct_profiler_run(ct_profiler *prof, const ct_exec *exec, ct_mode mode,
                          const ct_tensor *const *schedule, int n_schedule, int64_t step)
{
    ct_backend *backend = prof->backend;
    ct_prof_record *records = prof->records[mode];
    const ct_backend_i *iface = backend->iface;
    prof->has_last = false;
    int64_t step_start = ct_prof_now_ns();
    iface->begin_step(backend);
    if (prof->timer)
        iface->timer_mark(backend, prof->timer, 0);
    int r = 0;
    for (int i = 0; i < n_schedule; i++) {
        const ct_tensor *node = schedule[i];
        if (node->op == CT_OP_VIEW)
            continue;
        CT_ASSERT(r < prof->n_records[mode]);
        records[r].start_ns = ct_prof_now_ns();
        CT_TRY(iface->run_node(backend, exec, node));
        records[r].end_ns = ct_prof_now_ns();
        r++;
        if (prof->timer)
            iface->timer_mark(backend, prof->timer, r);
    }
    CT_ASSERT(r == prof->n_records[mode]);
    CT_TRY(iface->synchronize(backend));
    if (prof->timer)
        CT_TRY(read_device_times(prof, records, r, step_start));
    prof->last = (ct_profile){
        .mode = mode,
        .step = step,
        .start_ns = step_start,
        .end_ns = ct_prof_now_ns(),
        .n_records = r,
        .records = records,
    };
    prof->has_last = true;
    return CT_OK;
}

ct_status ct_profiler_last(const ct_profiler *prof, ct_profile *out)
{
    if (!prof || !prof->has_last)
        return ct_set_error(CT_ERR_STATE,
                            "ct_plan_profile: no step has run with profiling on; call "
                            "ct_plan_set_profiling(plan, true) and then ct_plan_run");
    *out = prof->last;
    return CT_OK;
}
