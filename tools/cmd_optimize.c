/*
 * cuttle optimize: saved weights and their model, optimized for inference
 * (ct_plan_optimize: batchnorm folded into the layer before it, dropout
 * removed, a forward-only memory plan), checked against the model as built
 * on a random batch, timed beside it, and written as DIR/model.onnx with
 * the checkpoint's metadata, which predict, eval and bench run (and ONNX
 * Runtime).  docs/optimize.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_writer.h"
#include "cli.h"
#include "run_files.h"
#include "run_info.h"

#define OPTIMIZE_SEED 1
#define OPTIMIZE_TIMED_RUNS 20
/* Beyond float rounding: the optimized model is wrong, write nothing. */
#define OPTIMIZE_TOLERANCE 1e-4

typedef struct optimize_options {
    const char *weights, *model, *data, *data_dir, *input, *out, *device;
    long classes, batch, threads;
    bool json;
} optimize_options;

typedef struct measured {
    double error;                /* max |a - b| / max |a| over one random batch */
    double ms_before, ms_after;  /* medians of interleaved runs */
} measured;

typedef struct model_plan {
    ct_graph *graph;
    ct_plan *plan;
    ct_tensor *x, *y;
} model_plan;

static int build(const optimize_options *o, const run_info *info, const ct_checkpoint *checkpoint,
                 ct_backend *backend, model_plan *m)
{
    if (!(m->graph = ct_graph_new()))
        return cli_fail("optimize");
    int64_t shape[4] = {o->batch, info->input[0], info->input[1], info->input[2]};
    m->x = ct_input(m->graph, "x", CT_F32, 4, shape);
    m->y = cli_model_build(m->graph, info->text, info->onnx, m->x, info->classes);
    if (ct_graph_status(m->graph) != CT_OK)
        return cli_fail("optimize");
    ct_tensor_keep(m->y);
    if (ct_plan_new(m->graph, backend, OPTIMIZE_SEED, &m->plan) != CT_OK ||
        (checkpoint && ct_plan_load_checkpoint(m->plan, checkpoint, CT_SAVE_MODEL) != CT_OK) ||
        (info->onnx && ct_plan_load_onnx(m->plan, info->onnx) != CT_OK))
        return cli_fail("optimize");
    return CLI_EXIT_OK;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One random batch through both; then both timed, alternating. */
static int measure(const model_plan *m, const ct_optimized *opt, measured *out)
{
    int64_t nx = ct_tensor_numel(m->x), ny = ct_tensor_numel(m->y);
    float *x = malloc(sizeof *x * (size_t)nx), *a = malloc(sizeof *a * (size_t)ny),
          *b = malloc(sizeof *b * (size_t)ny);
    double times[2][OPTIMIZE_TIMED_RUNS];
    int exit_status = x && a && b ? CLI_EXIT_OK : CLI_EXIT_FAILED;
    if (exit_status != CLI_EXIT_OK)
        fprintf(stderr, "cuttle optimize: out of host memory\n");
    uint64_t state = 0x9e3779b97f4a7c15u;
    for (int64_t i = 0; exit_status == CLI_EXIT_OK && i < nx; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)((double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    if (exit_status == CLI_EXIT_OK &&
        (ct_plan_write(m->plan, m->x, x, sizeof *x * (size_t)nx) != CT_OK ||
         ct_plan_write(opt->plan, opt->x, x, sizeof *x * (size_t)nx) != CT_OK))
        exit_status = cli_fail("optimize");
    for (int run = 0; exit_status == CLI_EXIT_OK && run < 2 * OPTIMIZE_TIMED_RUNS + 2; run++) {
        bool after = run % 2;
        double start = cli_now();
        if (ct_plan_run(after ? opt->plan : m->plan, CT_EVAL) != CT_OK)
            exit_status = cli_fail("optimize");
        if (run >= 2) /* the first of each warms up */
            times[after][run / 2 - 1] = 1e3 * (cli_now() - start);
    }
    if (exit_status == CLI_EXIT_OK &&
        (ct_plan_read_f32(m->plan, m->y, a, ny) != CT_OK ||
         ct_plan_read_f32(opt->plan, opt->y, b, ny) != CT_OK))
        exit_status = cli_fail("optimize");
    if (exit_status == CLI_EXIT_OK) {
        double largest = 0, worst = 0;
        for (int64_t i = 0; i < ny; i++) {
            largest = fmax(largest, fabs(a[i]));
            worst = fmax(worst, fabs((double)a[i] - b[i]));
        }
        out->error = largest > 0 ? worst / largest : worst;
        for (int k = 0; k < 2; k++)
            qsort(times[k], OPTIMIZE_TIMED_RUNS, sizeof(double), compare_doubles);
        out->ms_before = times[0][OPTIMIZE_TIMED_RUNS / 2];
        out->ms_after = times[1][OPTIMIZE_TIMED_RUNS / 2];
    }
    free(x);
    free(a);
    free(b);
    return exit_status;
}

static void print_report(const optimize_options *o, const run_info *info, const ct_backend *backend,
                         const ct_optimize_report *r, const measured *mm, const char *path)
{
    const double mib = 1048576.0;
    if (o->json) {
        json_writer out = json_writer_start(stdout);
        json_object(&out);
        json_field_string(&out, "model", info->name);
        json_field_string(&out, "onnx", path);
        json_field_int(&out, "folded", r->folded);
        json_field_int(&out, "removed", r->removed);
        json_field_int(&out, "kernels_before", r->kernels_before);
        json_field_int(&out, "kernels_after", r->kernels_after);
        json_field_int(&out, "arena_bytes_before", (long long)r->arena_before);
        json_field_int(&out, "arena_bytes_after", (long long)r->arena_after);
        json_field_int(&out, "values_before", r->values_before);
        json_field_int(&out, "values_after", r->values_after);
        json_field_number(&out, "max_relative_error", mm->error);
        json_field_int(&out, "batch", o->batch);
        json_field_string(&out, "device", ct_backend_name(backend));
        json_field_fixed(&out, "ms_before", mm->ms_before, 4);
        json_field_fixed(&out, "ms_after", mm->ms_after, 4);
        json_end(&out);
        return;
    }
    printf("optimized %s (%dx%dx%d -> %d classes) for inference:\n", info->name, info->input[0],
           info->input[1], info->input[2], info->classes);
    printf("  batchnorms folded   %d (into the convolution or linear layer before each)\n",
           r->folded);
    printf("  dropouts removed    %d\n", r->removed);
    printf("  kernels per step    %d -> %d\n", r->kernels_before, r->kernels_after);
    printf("  activation memory   %.2f -> %.2f MiB (the planned peak at batch %ld)\n",
           (double)r->arena_before / mib, (double)r->arena_after / mib, o->batch);
    printf("  weight values       %lld -> %lld\n", (long long)r->values_before,
           (long long)r->values_after);
    printf("  outputs             equal within %.2g of the largest (a random batch)\n",
           mm->error);
    printf("  time per batch      %.3f -> %.3f ms (batch %ld on %s, median of %d interleaved "
           "runs)\n",
           mm->ms_before, mm->ms_after, o->batch, ct_backend_name(backend), OPTIMIZE_TIMED_RUNS);
    printf("wrote %s: cuttle predict --model %s IMAGE...\n", path, path);
}

static int write_onnx(const run_info *info, const ct_optimized *opt, const char *path)
{
    run_meta meta = {.n = 0};
    int exit_status = CLI_EXIT_OK;
    if (!run_meta_add_info(&meta, info)) {
        fprintf(stderr, "cuttle optimize: out of host memory for the metadata\n");
        exit_status = CLI_EXIT_FAILED;
    }
    ct_onnx_export_args args = {.model_name = info->name, .n_meta = meta.n, .meta = meta.items};
    if (exit_status == CLI_EXIT_OK &&
        ct_onnx_export(opt->plan, opt->x, opt->y, &args, path) != CT_OK)
        exit_status = cli_fail("optimize");
    run_meta_free(&meta);
    return exit_status;
}

static int optimize_model(const optimize_options *o)
{
    ct_checkpoint *checkpoint = NULL;
    run_info info;
    ct_backend *backend = NULL;
    model_plan m = {0};
    ct_optimized opt = {0};
    measured mm = {0};
    char path[4096];
    int exit_status = run_info_open("optimize", &(run_source){o->weights, o->model, o->data,
                                                             o->data_dir, o->input, o->classes},
                                    &checkpoint, &info);
    if (exit_status == CLI_EXIT_OK &&
        snprintf(path, sizeof path, "%s/model.onnx", o->out) >= (int)sizeof path) {
        fprintf(stderr, "cuttle optimize: the path %s is too long\n", o->out);
        exit_status = CLI_EXIT_USAGE;
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = cli_backend("optimize",
                                  &(cli_device){o->device, o->threads, false, NULL, false, NULL},
                                  o->json ? stderr : stdout, &backend);
    if (exit_status == CLI_EXIT_OK)
        exit_status = build(o, &info, checkpoint, backend, &m);
    if (exit_status == CLI_EXIT_OK && ct_plan_optimize(m.plan, m.x, m.y, &opt) != CT_OK)
        exit_status = cli_fail("optimize");
    if (exit_status == CLI_EXIT_OK)
        exit_status = measure(&m, &opt, &mm);
    if (exit_status == CLI_EXIT_OK && !(mm.error <= OPTIMIZE_TOLERANCE)) {
        fprintf(stderr, "cuttle optimize: the optimized model's outputs differ from the "
                        "model's by %.3g of the largest (more than %g): nothing written; "
                        "please report this with the model\n",
                mm.error, OPTIMIZE_TOLERANCE);
        exit_status = CLI_EXIT_FAILED;
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = run_prepare_dir("optimize", o->out);
    if (exit_status == CLI_EXIT_OK)
        exit_status = write_onnx(&info, &opt, path);
    if (exit_status == CLI_EXIT_OK)
        print_report(o, &info, backend, &opt.report, &mm, path);
    ct_optimized_free(&opt);
    ct_plan_free(m.plan);
    ct_graph_free(m.graph);
    ct_backend_free(backend);
    run_info_free(&info);
    ct_checkpoint_close(checkpoint);
    return exit_status;
}

int cmd_optimize(int argc, char **argv)
{
    optimize_options o = {.batch = 1, .device = "cpu"};
    const cli_option options[] = {
        {"--weights", "FILE", CLI_TEXT, &o.weights, 0, 0, NULL,
         "the checkpoint (model.safetensors from cuttle train, or a state_dict); not for an "
         "ONNX --model"},
        {"-o", "DIR", CLI_TEXT, &o.out, 0, 0, NULL,
         "where to write model.onnx, the optimized model (required)"},
        {"--out", "DIR", CLI_TEXT, &o.out, 0, 0, NULL, "the same as -o"},
        {"--model", "NAME|FILE", CLI_TEXT, &o.model, 0, 0, NULL,
         "the model (default: the one recorded in the checkpoint), or an ONNX file"},
        {"--batch", "B", CLI_INT, &o.batch, 1, 65536, NULL,
         "the batch the check, the timing and the memory figure use (default 1; the file "
         "takes any batch)"},
        {"--device", "DEV", CLI_TEXT, &o.device, 0, 0, NULL,
         "where to check and time: cpu, cpu:N or cuda[:N] (default cpu)"},
        {"--threads", "T", CLI_INT, &o.threads, 0, 4096, NULL, "CPU threads (default all)"},
        RUN_SOURCE_OPTIONS(o),
        {"--json", NULL, CLI_FLAG, &o.json, 0, 0, NULL, "the report as one JSON object"},
    };
    cli_parsed parsed = cli_parse("optimize", "--weights FILE -o DIR [options]", argc, argv,
                                  options, (int)(sizeof options / sizeof options[0]));
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    bool onnx = o.model && cli_model_is_onnx(o.model);
    if (!o.out || (!o.weights && !onnx)) {
        fprintf(stderr, "cuttle optimize: --weights FILE (or --model FILE.onnx) and -o DIR are "
                        "required (see cuttle optimize --help)\n");
        return CLI_EXIT_USAGE;
    }
    return cli_parse_only ? CLI_EXIT_OK : optimize_model(&o);
}
