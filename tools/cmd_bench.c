/*
 * cuttle bench: the speed of a model's training or inference step on
 * synthetic data.  Warm-up steps first, then N timed steps (each one
 * ct_plan_run, synchronization included); prints the median, spread and
 * images per second (batch / median step), peak memory and the plan's
 * sizes.  bench/peers/torch_bench.py measures PyTorch the same way with the
 * same options and JSON fields, and bench/compare runs both (docs/bench.md).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_peak.h"
#include "workload.h"

#define DEFAULT_STEPS 50
#define DEFAULT_WARMUP 5
#define MS_PER_S 1e3

typedef struct bench_options {
    workload_options work;
    long steps, warmup;
    bool json, param_shapes;
} bench_options;

typedef struct bench_result {
    double median_ms, p10_ms, p90_ms, min_ms, max_ms, mean_ms, images_per_second;
    int64_t peak_host_bytes;
    int64_t peak_device_bytes; /* the device allocator's peak in use; -1: no such allocator */
    double gflops_per_step;   /* the ops' arithmetic (ct_plan_flops) */
    double gflops_per_second; /* ... over the median step */
    cpu_peak peak;            /* the CPU's FMA peak, measured; zeros when not a CPU */
} bench_result;

static void arithmetic(const workload *w, bench_result *r)
{
    r->gflops_per_step = ct_plan_flops(w->plan, w->mode) / 1e9;
    r->gflops_per_second = r->gflops_per_step / (r->median_ms / MS_PER_S);
    if (strncmp(ct_backend_name(w->backend), "cpu", 3) != 0)
        return;
    cpu_peak_measure(ct_backend_threads(w->backend), &r->peak);
}

static int time_steps(const bench_options *opts, workload *w, double *times)
{
    for (long step = 0; step < opts->warmup + opts->steps; step++) {
        double start = cli_now();
        if (ct_plan_run(w->plan, w->mode) != CT_OK)
            return cli_fail("bench");
        if (step >= opts->warmup)
            times[step - opts->warmup] = cli_now() - start;
    }
    return CLI_EXIT_OK;
}

static void summarize(const bench_options *opts, double *times, bench_result *r)
{
    int n = (int)opts->steps;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        times[i] *= MS_PER_S;
        sum += times[i];
    }
    workload_sort(times, n);
    r->median_ms = workload_quantile(times, n, 0.5);
    r->p10_ms = workload_quantile(times, n, 0.1);
    r->p90_ms = workload_quantile(times, n, 0.9);
    r->min_ms = times[0];
    r->max_ms = times[n - 1];
    r->mean_ms = sum / n;
    r->images_per_second = (double)opts->work.batch / (r->median_ms / MS_PER_S);
    r->peak_host_bytes = workload_peak_host_bytes();
}

/* The most bytes the backend's device allocator has had handed out
 * (ct_memory_stats.peak_in_use: arena, state, workspaces), as PyTorch's
 * torch.cuda.max_memory_allocated counts; -1 on a backend without one. */
static int64_t peak_device_bytes(const workload *w)
{
    ct_memory_stats stats;
    if (ct_backend_memory_stats(w->backend, &stats) != CT_OK)
        return -1;
    return (int64_t)stats.peak_in_use;
}

/* How the plan ran its steps, for a CUDA backend (NULL otherwise):
 * "replayed" (*nodes: the device operations per replay), "off", "not
 * recorded" (fewer steps than recording waits for), or "failed" (*why). */
static const char *cuda_graph_state(const workload *w, int *nodes, const char **why)
{
    *nodes = 0;
    *why = NULL;
    if (strncmp(ct_backend_name(w->backend), "cuda", 4) != 0)
        return NULL;
    int state = ct_plan_cuda_graph(w->plan, w->mode, nodes, why);
    return state > 0 ? "replayed" : state < 0 ? "failed" : !w->cuda_graph ? "off" : "not recorded";
}

/* peak_device_bytes is null on a backend without a device allocator. */
static void print_json(const bench_options *opts, const workload *w, const bench_result *r)
{
    const workload_options *o = &opts->work;
    json_writer out = json_writer_start(stdout);
    json_object(&out);
    workload_json_fields(&out, o, w);
    json_field_int(&out, "classes", o->classes);
    json_field_string(&out, "backend", ct_backend_name(w->backend));
    json_field_string(&out, "precision", ct_precision_name(ct_graph_precision(w->graph)));
    json_field_string(&out, "mode", o->mode);
    json_field_int(&out, "steps", opts->steps);
    json_field_int(&out, "warmup", opts->warmup);
    json_field_fixed(&out, "median_ms", r->median_ms, 4);
    json_field_fixed(&out, "p10_ms", r->p10_ms, 4);
    json_field_fixed(&out, "p90_ms", r->p90_ms, 4);
    json_field_fixed(&out, "min_ms", r->min_ms, 4);
    json_field_fixed(&out, "max_ms", r->max_ms, 4);
    json_field_fixed(&out, "mean_ms", r->mean_ms, 4);
    json_field_fixed(&out, "images_per_second", r->images_per_second, 1);
    json_field_int(&out, "peak_host_bytes", r->peak_host_bytes);
    if (r->peak_device_bytes >= 0)
        json_field_int(&out, "peak_device_bytes", r->peak_device_bytes);
    else
        json_field_null(&out, "peak_device_bytes");
    json_field_int(&out, "params", workload_params(w));
    json_field_int(&out, "threads", ct_backend_threads(w->backend));
    json_field_int(&out, "arena_bytes", (long long)ct_plan_arena_bytes(w->plan));
    json_field_int(&out, "state_bytes", (long long)ct_plan_state_bytes(w->plan));
    json_field_int(&out, "kept_bytes", (long long)ct_plan_kept_bytes(w->plan));
    json_field_fixed(&out, "gflop_per_step", r->gflops_per_step, 6);
    json_field_fixed(&out, "gflops_per_second", r->gflops_per_second, 3);
    bool peak = r->peak.gflops > 0;
    json_field_fixed(&out, "peak_gflops", peak ? r->peak.gflops : NAN, 1);
    json_field_fixed(&out, "share_of_peak", peak ? r->gflops_per_second / r->peak.gflops : NAN,
                     4);
    json_field_string(&out, "peak_isa", peak ? r->peak.isa : NULL);
    json_field_fixed(&out, "avx2_peak_gflops", peak ? r->peak.avx2_gflops : NAN, 1);
    if (w->quantized) {
        int n_int8 = 0;
        for (int k = 0; k < w->quantized->n_layers; k++)
            n_int8 += w->quantized->layers[k].quantized;
        printf("  int8 model (%s calibration): %d of %d conv and linear layers int8; their "
               "arithmetic is not in the GFLOP count\n",
               ct_calib_method_name(w->quantized->args.method), n_int8, w->quantized->n_layers);
    }
    const ct_optimize_report *opt = &w->optimized;
    json_key(&out, "optimized");
    if (opt->kernels_before > 0) {
        json_object(&out);
        json_field_int(&out, "folded", opt->folded);
        json_field_int(&out, "removed", opt->removed);
        json_field_int(&out, "kernels_before", opt->kernels_before);
        json_field_int(&out, "kernels_after", opt->kernels_after);
        json_end(&out);
    } else {
        json_null(&out);
    }
    int nodes = 0;
    const char *why = NULL, *graph = cuda_graph_state(w, &nodes, &why);
    json_field_string(&out, "cuda_graph", graph);
    if (graph)
        json_field_int(&out, "graph_nodes", nodes);
    else
        json_field_null(&out, "graph_nodes");
    json_end(&out);
}

static void print_text(const bench_options *opts, const workload *w, const bench_result *r)
{
    const workload_options *o = &opts->work;
    printf("bench %s %s, batch %ld, input %dx%dx%d, %ld classes, %s, on %s\n", o->model,
           o->mode, o->batch, w->channels, w->height, w->width, o->classes,
           ct_precision_name(ct_graph_precision(w->graph)), ct_backend_name(w->backend));
    workload_print_emulation_note(w);
    printf("  %ld steps after %ld warm-up: median %.3f ms  (p10 %.3f, p90 %.3f, min %.3f, "
           "max %.3f)\n",
           opts->steps, opts->warmup, r->median_ms, r->p10_ms, r->p90_ms, r->min_ms, r->max_ms);
    printf("  %.1f images/s\n", r->images_per_second);
    printf("  %.3f GFLOP per step (the ops' formulas): %.1f GFLOP/s", r->gflops_per_step,
           r->gflops_per_second);
    if (r->peak.gflops > 0)
        printf(", %.0f%% of the measured FMA peak of %.0f GFLOP/s (%d threads, %s)",
               100.0 * r->gflops_per_second / r->peak.gflops, r->peak.gflops,
               ct_backend_threads(w->backend), r->peak.isa);
    /* (the AVX2 peak stays in the JSON: since 2026-11-28 the convolutions,
     * linear layers and pools run on 512-bit vectors where the CPU has them,
     * so the 256-bit peak no longer bounds the step) */
    printf("\n");
    printf("  %lld parameters; arena %.2f MiB, state %.2f MiB", (long long)workload_params(w),
           (double)ct_plan_arena_bytes(w->plan) / 1048576.0,
           (double)ct_plan_state_bytes(w->plan) / 1048576.0);
    if (ct_plan_kept_bytes(w->plan) > 0)
        printf(", kept between runs %.2f MiB", (double)ct_plan_kept_bytes(w->plan) / 1048576.0);
    printf("; peak host memory %.1f MiB\n", (double)r->peak_host_bytes / 1048576.0);
    if (w->quantized) {
        int n_int8 = 0;
        for (int k = 0; k < w->quantized->n_layers; k++)
            n_int8 += w->quantized->layers[k].quantized;
        printf("  int8 model (%s calibration): %d of %d conv and linear layers int8; their "
               "arithmetic is not in the GFLOP count\n",
               ct_calib_method_name(w->quantized->args.method), n_int8, w->quantized->n_layers);
    }
    const ct_optimize_report *opt = &w->optimized;
    if (opt->kernels_before > 0)
        printf("  optimized for inference: %d batchnorm(s) folded, %d dropout(s) removed, %d "
               "kernels per step instead of %d (--no-optimize: as built)\n",
               opt->folded, opt->removed, opt->kernels_after, opt->kernels_before);
    if (r->peak_device_bytes >= 0)
        printf("  peak device memory %.1f MiB (the allocator's most in use)\n",
               (double)r->peak_device_bytes / 1048576.0);
    int nodes = 0;
    const char *why = NULL, *graph = cuda_graph_state(w, &nodes, &why);
    if (graph && nodes > 0)
        printf("  CUDA Graph: %s, %d device operations per step in one launch\n", graph, nodes);
    else if (graph && why)
        printf("  CUDA Graph: %s (%s); steps launched node by node\n", graph, why);
    else if (graph)
        printf("  CUDA Graph: %s; steps launched node by node%s\n", graph,
               w->cuda_graph ? " (recording waits for two steps)" : "");
}

static int run(const bench_options *opts, workload *w)
{
    if (opts->param_shapes)
        return workload_print_param_shapes("bench", &opts->work, w);
    int exit_status = workload_init("bench", &opts->work, w);
    double *times = malloc(sizeof *times * (size_t)opts->steps);
    if (exit_status == CLI_EXIT_OK && !times) {
        fprintf(stderr, "cuttle bench: out of host memory\n");
        exit_status = CLI_EXIT_FAILED;
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = time_steps(opts, w, times);
    if (exit_status == CLI_EXIT_OK) {
        bench_result result = {0};
        summarize(opts, times, &result);
        result.peak_device_bytes = peak_device_bytes(w);
        arithmetic(w, &result);
        (opts->json ? print_json : print_text)(opts, w, &result);
    }
    free(times);
    return exit_status;
}

int cmd_bench(int argc, char **argv)
{
    bench_options opts = {
        .work = workload_defaults,
        .steps = DEFAULT_STEPS, .warmup = DEFAULT_WARMUP};
    cli_option options[WORKLOAD_N_OPTIONS + 4];
    workload_option_table(&opts.work, options);
    const cli_option own[] = {
        {"--steps", "N", CLI_INT, &opts.steps, 1, 1000000, NULL, "timed steps (default 50)"},
        {"--warmup", "N", CLI_INT, &opts.warmup, 0, 1000000, NULL,
         "untimed steps first (default 5)"},
        {"--json", NULL, CLI_FLAG, &opts.json, 0, 0, NULL, "print one JSON object"},
        {"--param-shapes", NULL, CLI_FLAG, &opts.param_shapes, 0, 0, NULL,
         "print the model's state_dict names and shapes as JSON, and run nothing"},
    };
    memcpy(options + WORKLOAD_N_OPTIONS, own, sizeof own);
    cli_parsed parsed = cli_parse("bench", "[options]", argc, argv, options,
                                  (int)(sizeof options / sizeof options[0]));
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    workload w = {0};
    int exit_status = workload_check("bench", &opts.work, &w);
    if (exit_status == CLI_EXIT_OK && !cli_parse_only)
        exit_status = run(&opts, &w);
    workload_free(&w);
    return exit_status;
}
