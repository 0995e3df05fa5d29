/*
 * cuttle profile: where a step's time goes.  Runs warm-up steps, then N
 * steps with the plan's profiler on (ct_plan_set_profiling), and prints per
 * phase (forward, backward, optimizer) one row per op and implementation
 * that ran it ("winograd", "cudnn", ...; ct_backend_set_kernels): calls,
 * total and mean time, share of the measured step time, and the GFLOP/s and GB/s
 * that the estimated FLOPs and bytes of the op (src/ops/cost.c) give.  The
 * nodes' times must add up to the step time measured around ct_plan_run;
 * the last line says how closely they do.  --trace writes every profiled
 * step as a Chrome trace (docs/profiling.md), and beside it (TRACE.json
 * gives TRACE.svg) a bar chart of the time per step of each op (plot.h);
 * --svg FILE writes the chart without a trace, or somewhere else.
 * --layers adds one row per node, in order (its name, kernel, shapes, mean
 * time, GFLOP/s and, on the CPU, the share of the measured FMA peak), so
 * that the slow layers are known by name.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_peak.h"
#include "plot.h"
#include "workload.h"

#define DEFAULT_STEPS 10
#define DEFAULT_WARMUP 3
#define NS_PER_MS 1e6
#define OP_LABEL_CAPACITY 96

typedef struct profile_options {
    workload_options work;
    long steps, warmup;
    const char *trace_path;
    const char *svg_path;
    bool json, layers;
} profile_options;

/* The time of one op in one phase over all the profiled steps. */
typedef struct op_row {
    ct_prof_phase phase;
    const char *op;
    const char *kernel;
    long calls;
    int64_t total_ns;
    double flops, bytes;
    long counted_calls;     /* calls an emulated GPU counted (ct_kernel_counts) */
    ct_kernel_counts counts; /* their sums */
} op_row;

/* One node over the profiled steps (--layers). */
typedef struct layer_row {
    const ct_prof_record *record; /* the last step's: its strings stay valid */
    int64_t total_ns;
} layer_row;

typedef struct profile_totals {
    op_row *rows;
    int n_rows, capacity;
    layer_row *layers; /* --layers: by node, in run order */
    int n_layers;
    cpu_peak peak;     /* --layers on a CPU: its FMA peak; zeros elsewhere */
    int64_t step_ns;  /* measured around ct_plan_run */
    int64_t nodes_ns; /* the nodes' own times */
    const char *predicted_for; /* ct_profile.predicted_for */
    double graph_launch_ns;    /* ct_profile.graph_launch_ns */
} profile_totals;

static op_row *row_of(profile_totals *totals, const ct_prof_record *r)
{
    for (int i = 0; i < totals->n_rows; i++)
        if (totals->rows[i].phase == r->phase && strcmp(totals->rows[i].op, r->op) == 0 &&
            strcmp(totals->rows[i].kernel, r->kernel) == 0)
            return &totals->rows[i];
    if (totals->n_rows == totals->capacity)
        return NULL;
    op_row *row = &totals->rows[totals->n_rows++];
    *row = (op_row){.phase = r->phase, .op = r->op, .kernel = r->kernel};
    return row;
}

static void add_counts(op_row *row, const ct_kernel_counts *c)
{
    ct_kernel_counts *sum = &row->counts;
    row->counted_calls++;
    sum->counted = true;
    sum->launches += c->launches;
    sum->bytes_used += c->bytes_used;
    sum->bytes_moved += c->bytes_moved;
    sum->dram_bytes += c->dram_bytes;
    sum->shared_wavefronts += c->shared_wavefronts;
    sum->shared_ideal_wavefronts += c->shared_ideal_wavefronts;
    sum->flops_executed += c->flops_executed;
    sum->tensor_flops += c->tensor_flops;
    sum->branches += c->branches;
    sum->divergent_branches += c->divergent_branches;
    sum->warp_instructions += c->warp_instructions;
    sum->chain_instructions += c->chain_instructions;
    sum->chain_load_rounds += c->chain_load_rounds;
    sum->chain_collectives += c->chain_collectives;
    sum->chain_barriers += c->chain_barriers;
    sum->sm_instructions += c->sm_instructions;
    sum->latency_clocks += c->latency_clocks;
    sum->latency_ns += c->latency_ns;
    sum->predicted_ns += c->predicted_ns;
    sum->predicted_graph_ns += c->predicted_graph_ns;
    sum->roofline_ns += c->roofline_ns;
}

static int add_step(profile_totals *totals, const ct_profile *profile)
{
    totals->predicted_for = profile->predicted_for;
    totals->graph_launch_ns = profile->graph_launch_ns;
    for (int i = 0; i < profile->n_records; i++) {
        const ct_prof_record *r = &profile->records[i];
        op_row *row = row_of(totals, r);
        if (!row) {
            fprintf(stderr, "cuttle profile: more ops than nodes (a bug in cuttle: please "
                            "report it)\n");
            return CLI_EXIT_FAILED;
        }
        /* On a GPU the host times are when a node was queued: the device
         * clock (CUDA events) says how long it ran. */
        int64_t ns = r->device_start_ns >= 0 ? r->device_end_ns - r->device_start_ns
                                             : r->end_ns - r->start_ns;
        if (totals->layers && i < totals->capacity) {
            totals->layers[i].record = r;
            totals->layers[i].total_ns += ns;
            totals->n_layers = i + 1 > totals->n_layers ? i + 1 : totals->n_layers;
        }
        row->calls++;
        row->total_ns += ns;
        row->flops += r->flops;
        row->bytes += r->bytes;
        totals->nodes_ns += ns;
        if (r->counts.counted && r->group == 0)
            row->counted_calls++; /* its kernels are counted in its group's first record */
        else if (r->counts.counted && r->counts.launches > 0)
            add_counts(row, &r->counts);
    }
    return CLI_EXIT_OK;
}

/* Steps with the profiler on, each added to the totals and the trace. */
static int profile_steps(const profile_options *opts, workload *w, profile_totals *totals)
{
    ct_trace *trace = NULL;
    if (ct_plan_set_profiling(w->plan, true) != CT_OK ||
        (opts->trace_path && ct_trace_open(opts->trace_path, &trace) != CT_OK))
        return cli_fail("profile");
    totals->capacity = ct_plan_n_nodes(w->plan, w->mode);
    totals->rows = calloc((size_t)totals->capacity + 1, sizeof *totals->rows);
    if (opts->layers)
        totals->layers = calloc((size_t)totals->capacity + 1, sizeof *totals->layers);
    int exit_status = totals->rows && (totals->layers || !opts->layers) ? CLI_EXIT_OK
                                                                         : CLI_EXIT_FAILED;
    if (exit_status != CLI_EXIT_OK)
        fprintf(stderr, "cuttle profile: out of host memory\n");
    for (long step = 0; step < opts->steps && exit_status == CLI_EXIT_OK; step++) {
        ct_profile profile;
        double start = cli_now();
        if (ct_plan_run(w->plan, w->mode) != CT_OK)
            exit_status = cli_fail("profile");
        totals->step_ns += (int64_t)((cli_now() - start) * 1e9);
        if (exit_status == CLI_EXIT_OK && (ct_plan_profile(w->plan, &profile) != CT_OK ||
                                           (trace && ct_trace_add(trace, &profile) != CT_OK)))
            exit_status = cli_fail("profile");
        if (exit_status == CLI_EXIT_OK)
            exit_status = add_step(totals, &profile);
    }
    if (ct_trace_close(trace) != CT_OK && exit_status == CLI_EXIT_OK)
        exit_status = cli_fail("profile");
    return exit_status;
}

static int compare_rows(const void *a, const void *b)
{
    const op_row *x = a, *y = b;
    if (x->phase != y->phase)
        return (int)x->phase - (int)y->phase;
    return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

static double per_second(double amount, int64_t ns)
{
    return ns > 0 ? amount / (double)ns : 0.0; /* amount/ns = G amount/s */
}

static double ratio(double part, double whole)
{
    return whole > 0 ? part / whole : 0.0;
}

/* The emulated GPU's counts per row and the roofline model's prediction
 * (docs/roofline.md), per step; nothing when no row was counted. */
static void print_predicted(const profile_options *opts, const profile_totals *totals)
{
    double steps = (double)opts->steps, predicted = 0, replayed = 0, floor = 0, launches = 0;
    long uncounted = 0;
    for (int i = 0; i < totals->n_rows; i++) {
        const op_row *row = &totals->rows[i];
        predicted += row->counts.predicted_ns;
        replayed += row->counts.predicted_graph_ns;
        floor += row->counts.roofline_ns;
        launches += (double)row->counts.launches;
        uncounted += row->calls - row->counted_calls;
    }
    if (launches == 0 || !totals->predicted_for)
        return;
    printf("\npredicted for an %s from the emulator's counts (a model, not a measurement; "
           "docs/roofline.md)\n",
           totals->predicted_for);
    printf("%-24s %-13s %8s %9s %9s %6s %7s %8s %6s %7s %8s %10s %10s %6s\n", "phase / op",
           "kernel", "launches", "L2 MB", "DRAM MB", "FLOP/B", "ld/st", "conflict", "FLOP x",
           "diverg", "chain us", "pred. us", "floor us", "of max");
    for (int i = 0; i < totals->n_rows; i++) {
        const op_row *row = &totals->rows[i];
        const ct_kernel_counts *c = &row->counts;
        if (!row->counted_calls)
            continue;
        printf("  %-22s %-13s %8.0f %9.3f %9.3f %6.1f %6.1f%% %7.1f%% %6.1f %6.1f%% %8.2f "
               "%10.2f %10.2f %5.0f%%\n",
               row->op, row->kernel, (double)c->launches / steps, c->bytes_moved / 1e6 / steps,
               c->dram_bytes / 1e6 / steps, ratio(row->flops, c->dram_bytes),
               100.0 * ratio(c->bytes_used, c->bytes_moved),
               100.0 * ratio(c->shared_wavefronts - c->shared_ideal_wavefronts,
                             c->shared_wavefronts),
               ratio(c->flops_executed, row->flops), 100.0 * ratio(c->divergent_branches,
                                                                   c->branches),
               c->latency_ns / 1e3 / steps, c->predicted_ns / 1e3 / steps, c->roofline_ns / 1e3 / steps,
               100.0 * ratio(c->roofline_ns, c->predicted_ns));
    }
    printf("\npredicted step %.3f ms on the model (%0.f launches); the ops' roofline floor "
           "%.3f ms (%.0f%% of it)%s\n",
           predicted / 1e6 / steps, launches / steps, floor / 1e6 / steps,
           100.0 * ratio(floor, predicted),
           uncounted ? "; nodes without kernels of cuttle's (vendor calls, the CPU) are "
                       "not in it"
                     : "");
    double graph_step = replayed / steps + totals->graph_launch_ns;
    printf("replayed as one CUDA Graph (--cuda-graph on; the profiler's own steps run node "
           "by node): %.3f ms (%.0f%% of the floor)\n",
           graph_step / 1e6, 100.0 * ratio(floor / steps, graph_step));
}

/* A layer's mean time per step (ns), and its share of the CPU's peak. */
static double layer_ns(const profile_options *opts, const layer_row *l)
{
    return (double)l->total_ns / (double)opts->steps;
}

/* The arithmetic and bytes of layer i's time: a group's first node ran
 * the whole group (the optimizer's updates, a backward pair), so its time
 * is for all of theirs, and each later member's is none (0, `member`). */
static void layer_work(const profile_totals *totals, int i, double *flops, double *bytes,
                       bool *member)
{
    const ct_prof_record *r = totals->layers[i].record;
    *member = r->group == 0;
    *flops = *bytes = 0;
    for (int k = i; !*member && k < totals->n_layers && k < i + (r->group > 1 ? r->group : 1);
         k++) {
        *flops += totals->layers[k].record->flops;
        *bytes += totals->layers[k].record->bytes;
    }
}

static double layer_share_of_peak(const profile_totals *totals, double flops, double ns)
{
    return totals->peak.gflops > 0 && ns > 0 ? flops / ns / totals->peak.gflops : 0;
}

/* --layers: every node in run order, the slow ones findable by name. */
static void print_layers(const profile_options *opts, const profile_totals *totals)
{
    if (!totals->layers)
        return;
    printf("\nper layer, in run order (mean per step");
    if (totals->peak.gflops > 0)
        printf("; %% of peak: of the measured %s FMA peak, %.1f GFLOP/s", totals->peak.isa,
               totals->peak.gflops);
    printf(")\n%-30s %-9s %-10s %9s %6s %8s %7s %8s  %s\n", "layer", "phase", "kernel", "ms",
           "share", "GFLOP/s", "% peak", "GB/s", "shapes");
    for (int i = 0; i < totals->n_layers; i++) {
        const layer_row *l = &totals->layers[i];
        const ct_prof_record *r = l->record;
        double ns = layer_ns(opts, l), flops, bytes;
        bool member;
        layer_work(totals, i, &flops, &bytes, &member);
        char rate[16] = "-", share_of_peak[16] = "-", byte_rate[16] = "-";
        if (!member) {
            snprintf(rate, sizeof rate, "%.2f", ns > 0 ? flops / ns : 0.0);
            snprintf(byte_rate, sizeof byte_rate, "%.2f", ns > 0 ? bytes / ns : 0.0);
            if (totals->peak.gflops > 0)
                snprintf(share_of_peak, sizeof share_of_peak, "%.1f%%",
                         100.0 * layer_share_of_peak(totals, flops, ns));
        }
        printf("%-30s %-9s %-10s %9.4f %5.1f%% %8s %7s %8s  %s%s\n", r->label,
               ct_prof_phase_name(r->phase), r->kernel, ns / NS_PER_MS,
               100.0 * ns * (double)opts->steps / (double)totals->step_ns, rate, share_of_peak,
               byte_rate, r->shapes, member ? " (run by the group above)" : "");
    }
    if (totals->peak.gflops > 0)
        printf("(FLOPs are the direct method's: a kernel that does less arithmetic for the "
               "same result, Winograd's, can pass 100%%)\n");
}

static void print_text(const profile_options *opts, const workload *w,
                       const profile_totals *totals)
{
    const workload_options *o = &opts->work;
    double steps = (double)opts->steps;
    printf("profile %s %s, batch %ld, input %dx%dx%d, on %s: %ld steps after %ld "
           "warm-up\n\n",
           o->model, o->mode, o->batch, w->channels, w->height, w->width,
           ct_backend_name(w->backend), opts->steps, opts->warmup);
    workload_print_emulation_note(w);
    if (ct_backend_emulated(w->backend))
        printf("\n");
    printf("%-24s %-13s %7s %10s %9s %7s %9s %8s\n", "phase / op", "kernel", "calls",
           "total ms", "mean ms", "share", "GFLOP/s", "GB/s");
    for (int i = 0; i < totals->n_rows; i++) {
        const op_row *row = &totals->rows[i];
        if (i == 0 || row->phase != totals->rows[i - 1].phase) {
            int64_t phase_ns = 0;
            for (int j = i; j < totals->n_rows && totals->rows[j].phase == row->phase; j++)
                phase_ns += totals->rows[j].total_ns;
            printf("%-24s %-13s %7s %10.3f %9s %6.1f%%\n", ct_prof_phase_name(row->phase), "", "",
                   (double)phase_ns / NS_PER_MS, "",
                   100.0 * (double)phase_ns / (double)totals->step_ns);
        }
        printf("  %-22s %-13s %7ld %10.3f %9.4f %6.1f%% %9.2f %8.2f\n", row->op, row->kernel,
               row->calls,
               (double)row->total_ns / NS_PER_MS,
               (double)row->total_ns / NS_PER_MS / (double)row->calls,
               100.0 * (double)row->total_ns / (double)totals->step_ns,
               per_second(row->flops, row->total_ns), per_second(row->bytes, row->total_ns));
    }
    double step_ms = (double)totals->step_ns / NS_PER_MS / steps;
    double nodes_ms = (double)totals->nodes_ns / NS_PER_MS / steps;
    printf("\nper step: nodes %.3f ms, measured step %.3f ms (the nodes are %.1f%% of it)\n",
           nodes_ms, step_ms, 100.0 * nodes_ms / step_ms);
    print_predicted(opts, totals);
    print_layers(opts, totals);
}

/* The emulated device's counters of one op row and the model's times. */
static void print_json_counts(json_writer *out, const ct_kernel_counts *c)
{
    json_key(out, "predicted");
    json_object(out);
    json_field_int(out, "launches", (long long)c->launches);
    json_field_fixed(out, "bytes_moved", c->bytes_moved, 0);
    json_field_fixed(out, "dram_bytes", c->dram_bytes, 0);
    json_field_fixed(out, "bytes_used", c->bytes_used, 0);
    json_field_fixed(out, "shared_wavefronts", c->shared_wavefronts, 0);
    json_field_fixed(out, "shared_ideal_wavefronts", c->shared_ideal_wavefronts, 0);
    json_field_fixed(out, "flops_executed", c->flops_executed, 0);
    json_field_fixed(out, "tensor_flops", c->tensor_flops, 0);
    json_field_fixed(out, "branches", c->branches, 0);
    json_field_fixed(out, "divergent_branches", c->divergent_branches, 0);
    json_field_fixed(out, "warp_instructions", c->warp_instructions, 0);
    json_field_fixed(out, "chain_instructions", c->chain_instructions, 0);
    json_field_fixed(out, "chain_load_rounds", c->chain_load_rounds, 0);
    json_field_fixed(out, "chain_collectives", c->chain_collectives, 0);
    json_field_fixed(out, "chain_barriers", c->chain_barriers, 0);
    json_field_fixed(out, "sm_instructions", c->sm_instructions, 0);
    json_field_fixed(out, "latency_clocks", c->latency_clocks, 0);
    json_field_fixed(out, "latency_ms", c->latency_ns / 1e6, 6);
    json_field_fixed(out, "predicted_ms", c->predicted_ns / 1e6, 6);
    json_field_fixed(out, "predicted_graph_ms", c->predicted_graph_ns / 1e6, 6);
    json_field_fixed(out, "roofline_ms", c->roofline_ns / 1e6, 6);
    json_end(out);
}

static void print_json_layers(json_writer *out, const profile_options *opts,
                              const profile_totals *totals)
{
    bool peak = totals->peak.gflops > 0;
    json_field_fixed(out, "peak_gflops", peak ? totals->peak.gflops : NAN, 1);
    json_key(out, "layers");
    json_array(out);
    for (int i = 0; i < totals->n_layers; i++) {
        const layer_row *l = &totals->layers[i];
        const ct_prof_record *r = l->record;
        double ns = layer_ns(opts, l), flops, bytes;
        bool member;
        layer_work(totals, i, &flops, &bytes, &member);
        json_object(out);
        json_field_string(out, "layer", r->label);
        json_field_string(out, "phase", ct_prof_phase_name(r->phase));
        json_field_string(out, "op", r->op);
        json_field_string(out, "kernel", r->kernel);
        json_field_string(out, "shapes", r->shapes);
        json_field_fixed(out, "mean_ms", ns / NS_PER_MS, 5);
        json_field_fixed(out, "flops", r->flops, 0);
        json_field_fixed(out, "bytes", r->bytes, 0);
        /* a group's rates are its first node's, over the whole group's work */
        json_field_bool(out, "run_by_group", member);
        json_field_fixed(out, "gflops_per_s", ns > 0 ? flops / ns : 0.0, 3);
        json_field_fixed(out, "share_of_peak",
                         peak ? layer_share_of_peak(totals, flops, ns) : NAN, 4);
        json_end(out);
    }
    json_end(out);
}

static void print_json(const profile_options *opts, const workload *w,
                       const profile_totals *totals)
{
    const workload_options *o = &opts->work;
    double steps = (double)opts->steps;
    json_writer out = json_writer_start(stdout);
    json_object(&out);
    workload_json_fields(&out, o, w);
    json_field_string(&out, "mode", o->mode);
    json_field_int(&out, "steps", opts->steps);
    json_field_int(&out, "warmup", opts->warmup);
    json_field_int(&out, "threads", ct_backend_threads(w->backend));
    json_field_fixed(&out, "step_ms", (double)totals->step_ns / NS_PER_MS / steps, 4);
    json_field_fixed(&out, "nodes_ms", (double)totals->nodes_ns / NS_PER_MS / steps, 4);
    json_key(&out, "ops");
    json_array(&out);
    for (int i = 0; i < totals->n_rows; i++) {
        const op_row *row = &totals->rows[i];
        json_object(&out);
        json_field_string(&out, "phase", ct_prof_phase_name(row->phase));
        json_field_string(&out, "op", row->op);
        json_field_string(&out, "kernel", row->kernel);
        json_field_int(&out, "calls", row->calls);
        json_field_fixed(&out, "total_ms", (double)row->total_ns / NS_PER_MS, 4);
        json_field_fixed(&out, "mean_ms", (double)row->total_ns / NS_PER_MS / (double)row->calls,
                         5);
        json_field_fixed(&out, "share", (double)row->total_ns / (double)totals->step_ns, 5);
        json_field_fixed(&out, "flops", row->flops, 0);
        json_field_fixed(&out, "bytes", row->bytes, 0);
        json_field_fixed(&out, "gflops_per_s", per_second(row->flops, row->total_ns), 3);
        json_field_fixed(&out, "gbytes_per_s", per_second(row->bytes, row->total_ns), 3);
        if (row->counted_calls)
            print_json_counts(&out, &row->counts);
        json_end(&out);
    }
    json_end(&out);
    if (totals->layers)
        print_json_layers(&out, opts, totals);
    json_end(&out);
}

/* The chart's path: --svg, else the trace's with ".svg" for its ".json"
 * (or after it); NULL for none. */
static const char *svg_path(const profile_options *opts, char *buffer, size_t capacity)
{
    if (opts->svg_path || !opts->trace_path)
        return opts->svg_path;
    size_t len = strlen(opts->trace_path);
    if (len >= 5 && strcmp(opts->trace_path + len - 5, ".json") == 0)
        len -= 5;
    if ((size_t)snprintf(buffer, capacity, "%.*s.svg", (int)len, opts->trace_path) >= capacity)
        return NULL;
    return buffer;
}

/* Each row's milliseconds per step as a bar, the phase its colour. */
static int write_svg(const profile_options *opts, const workload *w,
                     const profile_totals *totals, const char *path)
{
    plot_bar *bars = calloc((size_t)totals->n_rows + 1, sizeof *bars);
    char *labels = calloc((size_t)totals->n_rows + 1, OP_LABEL_CAPACITY);
    if (!bars || !labels) {
        free(bars);
        free(labels);
        fprintf(stderr, "cuttle profile: out of host memory\n");
        return CLI_EXIT_FAILED;
    }
    for (int i = 0; i < totals->n_rows; i++) {
        const op_row *row = &totals->rows[i];
        char *label = labels + (size_t)i * OP_LABEL_CAPACITY;
        snprintf(label, OP_LABEL_CAPACITY, "%s (%s)", row->op, row->kernel);
        bars[i] = (plot_bar){.label = label, .group = ct_prof_phase_name(row->phase),
                             .value = (double)row->total_ns / NS_PER_MS / (double)opts->steps};
    }
    char title[512];
    snprintf(title, sizeof title, "profile %s %s, batch %ld, on %s: time per step",
             opts->work.model, opts->work.mode, opts->work.batch, ct_backend_name(w->backend));
    int exit_status = plot_bars_write("profile", bars, totals->n_rows, title, "ms",
                                      "time per step (ms)", path);
    free(bars);
    free(labels);
    return exit_status;
}

static int run(const profile_options *opts, workload *w)
{
    int exit_status = workload_init("profile", &opts->work, w);
    for (long step = 0; step < opts->warmup && exit_status == CLI_EXIT_OK; step++)
        if (ct_plan_run(w->plan, w->mode) != CT_OK)
            exit_status = cli_fail("profile");
    profile_totals totals = {0};
    if (exit_status == CLI_EXIT_OK)
        exit_status = profile_steps(opts, w, &totals);
    if (exit_status == CLI_EXIT_OK && totals.layers &&
        strncmp(ct_backend_name(w->backend), "cpu", 3) == 0)
        cpu_peak_measure(ct_backend_threads(w->backend), &totals.peak);
    if (exit_status == CLI_EXIT_OK) {
        qsort(totals.rows, (size_t)totals.n_rows, sizeof *totals.rows, compare_rows);
        (opts->json ? print_json : print_text)(opts, w, &totals);
    }
    char buffer[1100];
    const char *chart = svg_path(opts, buffer, sizeof buffer);
    if (exit_status == CLI_EXIT_OK && opts->trace_path && !chart) {
        fprintf(stderr, "cuttle profile: the path %s.svg is too long\n", opts->trace_path);
        exit_status = CLI_EXIT_USAGE;
    } else if (exit_status == CLI_EXIT_OK && chart) {
        exit_status = write_svg(opts, w, &totals, chart);
    }
    free(totals.rows);
    free(totals.layers);
    return exit_status;
}

int cmd_profile(int argc, char **argv)
{
    profile_options opts = {
        .work = workload_defaults,
        .steps = DEFAULT_STEPS, .warmup = DEFAULT_WARMUP};
    cli_option options[WORKLOAD_N_OPTIONS + 6];
    workload_option_table(&opts.work, options);
    const cli_option own[] = {
        {"--steps", "N", CLI_INT, &opts.steps, 1, 100000, NULL, "profiled steps (default 10)"},
        {"--warmup", "N", CLI_INT, &opts.warmup, 0, 100000, NULL,
         "unprofiled steps first (default 3)"},
        {"--trace", "FILE", CLI_TEXT, &opts.trace_path, 0, 0, NULL,
         "write the profiled steps as a Chrome trace (open it in ui.perfetto.dev), and the "
         "time per op as an SVG bar chart beside it (FILE.json: FILE.svg)"},
        {"--svg", "FILE", CLI_TEXT, &opts.svg_path, 0, 0, NULL,
         "write the time per op as an SVG bar chart to FILE (default: beside --trace)"},
        {"--layers", NULL, CLI_FLAG, &opts.layers, 0, 0, NULL,
         "also one row per node in run order: kernel, shapes, time, GFLOP/s and the share of "
         "the CPU's measured FMA peak"},
        {"--json", NULL, CLI_FLAG, &opts.json, 0, 0, NULL, "print one JSON object"},
    };
    memcpy(options + WORKLOAD_N_OPTIONS, own, sizeof own);
    cli_parsed parsed = cli_parse("profile", "[options]", argc, argv, options,
                                  (int)(sizeof options / sizeof options[0]));
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    workload w = {0};
    int exit_status = workload_check("profile", &opts.work, &w);
    if (exit_status == CLI_EXIT_OK && !cli_parse_only)
        exit_status = run(&opts, &w);
    workload_free(&w);
    return exit_status;
}
