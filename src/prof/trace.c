/*
 * Chrome trace files (the "JSON Object Format" of the Trace Event Format):
 *   {"traceEvents": [ {...}, ... ], "displayTimeUnit": "ms"}
 * Every step, phase and node is one complete event ("ph": "X") with ts and
 * dur in microseconds from the first step traced.  Host times are process 1
 * (a step contains its phases, a phase its nodes, so viewers stack them);
 * device times, when a backend has a clock, are process 2.  Perfetto
 * (ui.perfetto.dev) and chrome://tracing open the file (docs/profiling.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/json.h"

#define HOST_PID 1
#define DEVICE_PID 2
#define TRACK_TID 1
#define NAME_CAPACITY 256

struct ct_trace {
    FILE *file;
    char *path;
    bool any_event;    /* a comma goes before the next event */
    bool has_origin;
    int64_t origin_ns; /* ts 0: the start of the first step traced */
    bool device_named;
};

/* A JSON string literal of s, cut to fit NAME_CAPACITY. */
static const char *quoted(char *buf, const char *s)
{
    size_t length = strlen(s);
    while (ct_json_escape(buf, NAME_CAPACITY, s, length) >= NAME_CAPACITY)
        length /= 2;
    return buf;
}

static void begin_event(ct_trace *trace)
{
    fputs(trace->any_event ? ",\n" : "\n", trace->file);
    trace->any_event = true;
}

static void name_track(ct_trace *trace, int pid, const char *process, const char *thread)
{
    begin_event(trace);
    fprintf(trace->file,
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
            "\"args\": {\"name\": \"%s\"}}",
            pid, process);
    begin_event(trace);
    fprintf(trace->file,
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
            "\"args\": {\"name\": \"%s\"}}",
            pid, TRACK_TID, thread);
}

ct_status ct_trace_open(const char *path, ct_trace **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_trace_open: out is NULL");
    *out = NULL;
    if (!path)
        return ct_set_error(CT_ERR_ARG, "ct_trace_open: path is NULL");
    ct_trace *trace = calloc(1, sizeof *trace);
    char *copy = malloc(strlen(path) + 1);
    if (!trace || !copy) {
        free(trace);
        free(copy);
        return ct_set_error(CT_ERR_MEMORY, "ct_trace_open: out of host memory");
    }
    trace->file = fopen(path, "w");
    if (!trace->file) {
        free(trace);
        free(copy);
        return ct_set_error(CT_ERR_IO, "cannot create the trace file %s: is its folder there "
                                       "and writable?", path);
    }
    trace->path = strcpy(copy, path);
    fputs("{\"traceEvents\": [", trace->file);
    name_track(trace, HOST_PID, "cuttle host", "steps, phases and nodes");
    *out = trace;
    return CT_OK;
}

/* One "X" event; args_json is the inside of the args object. */
static void complete_event(ct_trace *trace, int pid, const char *name, const char *category,
                           int64_t start_ns, int64_t end_ns, const char *args_json)
{
    char name_buf[NAME_CAPACITY];
    begin_event(trace);
    fprintf(trace->file,
            "{\"name\": %s, \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, "
            "\"pid\": %d, \"tid\": %d, \"args\": {%s}}",
            quoted(name_buf, name), category, (double)(start_ns - trace->origin_ns) / 1e3,
            (double)(end_ns - start_ns) / 1e3, pid, TRACK_TID, args_json);
}

static void node_event(ct_trace *trace, const ct_prof_record *r, bool device)
{
    char label[NAME_CAPACITY], shapes[NAME_CAPACITY], args[6 * NAME_CAPACITY];
    int used = snprintf(args, sizeof args,
                        "\"node\": %s, \"kernel\": \"%s\", \"shapes\": %s, \"flops\": %.0f, "
                        "\"bytes\": %.0f",
                        quoted(label, r->label), r->kernel ? r->kernel : "",
                        quoted(shapes, r->shapes), r->flops, r->bytes);
    const ct_kernel_counts *c = &r->counts;
    if (c->counted && used > 0 && (size_t)used < sizeof args)
        snprintf(args + used, sizeof args - (size_t)used,
                 ", \"launches\": %lld, \"bytes_moved\": %.0f, \"dram_bytes\": %.0f, "
                 "\"bytes_used\": %.0f, \"shared_wavefronts\": %.0f, "
                 "\"shared_ideal_wavefronts\": %.0f, \"flops_executed\": %.0f, "
                 "\"tensor_flops\": %.0f, \"divergent_branches\": %.0f, "
                 "\"warp_instructions\": %.0f, \"latency_us\": %.3f, \"predicted_us\": %.3f, "
                 "\"predicted_graph_us\": %.3f, \"roofline_us\": %.3f",
                 (long long)c->launches, c->bytes_moved, c->dram_bytes, c->bytes_used,
                 c->shared_wavefronts, c->shared_ideal_wavefronts, c->flops_executed,
                 c->tensor_flops, c->divergent_branches, c->warp_instructions,
                 c->latency_ns / 1e3, c->predicted_ns / 1e3,
                 c->predicted_graph_ns / 1e3, c->roofline_ns / 1e3);
    if (device)
        complete_event(trace, DEVICE_PID, r->op, ct_prof_phase_name(r->phase),
                       r->device_start_ns, r->device_end_ns, args);
    else
        complete_event(trace, HOST_PID, r->op, ct_prof_phase_name(r->phase), r->start_ns,
                       r->end_ns, args);
}

/* Each phase spans its first node's start to its last node's end. */
static void phase_events(ct_trace *trace, const ct_profile *profile)
{
    for (int phase = 0; phase < CT_PROF_PHASE_COUNT; phase++) {
        int64_t start = INT64_MAX, end = INT64_MIN;
        double flops = 0;
        for (int i = 0; i < profile->n_records; i++) {
            const ct_prof_record *r = &profile->records[i];
            if ((int)r->phase != phase)
                continue;
            start = r->start_ns < start ? r->start_ns : start;
            end = r->end_ns > end ? r->end_ns : end;
            flops += r->flops;
        }
        if (start > end)
            continue;
        char args[64];
        snprintf(args, sizeof args, "\"flops\": %.0f", flops);
        complete_event(trace, HOST_PID, ct_prof_phase_name((ct_prof_phase)phase), "phase", start,
                       end, args);
    }
}

ct_status ct_trace_add(ct_trace *trace, const ct_profile *profile)
{
    if (!trace || !profile)
        return ct_set_error(CT_ERR_ARG, "ct_trace_add: trace and profile are required");
    if (!trace->has_origin) {
        trace->origin_ns = profile->start_ns;
        trace->has_origin = true;
    }
    const char *mode = profile->mode == CT_TRAIN ? "train" : "eval";
    char name[64], args[96];
    snprintf(name, sizeof name, "step %lld (%s)", (long long)profile->step, mode);
    snprintf(args, sizeof args, "\"mode\": \"%s\", \"step\": %lld, \"nodes\": %d", mode,
             (long long)profile->step, profile->n_records);
    complete_event(trace, HOST_PID, name, "step", profile->start_ns, profile->end_ns, args);
    phase_events(trace, profile);
    bool device = false;
    for (int i = 0; i < profile->n_records; i++) {
        node_event(trace, &profile->records[i], false);
        device = device || profile->records[i].device_start_ns >= 0;
    }
    if (device && !trace->device_named) {
        name_track(trace, DEVICE_PID, "device", "kernels");
        trace->device_named = true;
    }
    for (int i = 0; device && i < profile->n_records; i++)
        node_event(trace, &profile->records[i], true);
    if (ferror(trace->file))
        return ct_set_error(CT_ERR_IO, "cannot write the trace file %s (disk full?)",
                            trace->path);
    return CT_OK;
}

ct_status ct_trace_close(ct_trace *trace)
{
    if (!trace)
        return CT_OK;
    fputs("\n],\n\"displayTimeUnit\": \"ms\"}\n", trace->file);
    bool failed = ferror(trace->file) != 0;
    failed = fclose(trace->file) != 0 || failed;
    ct_status status = CT_OK;
    if (failed)
        status = ct_set_error(CT_ERR_IO, "cannot write the trace file %s (disk full?)",
                              trace->path);
    free(trace->path);
    free(trace);
    return status;
}
