/*
 * cuttle quantize: saved weights and their model made INT8 on the CPU
 * (ct_plan_quantize: batchnorms folded, N batches of a dataset split for
 * calibration, each conv2d and linear layer but the classifier int8), with
 * the error of every layer (SQNR), the accuracy of both models on the
 * dataset's test split and their time per batch; with -o DIR, the int8
 * model is saved to DIR/model.safetensors (ct_quantized_save, with the
 * metadata eval, predict, bench and export read: docs/quantization.md).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run_files.h"
#include "run_info.h"

#define QUANTIZE_TIMED_RUNS 5

typedef struct quantize_options {
    const char *weights, *model, *calib, *data_dir, *method, *out, *device, *eval_split;
    long calib_batches, batch, threads;
    double percentile;
    bool quantize_last, quantize_shallow;
} quantize_options;

static const char *const methods[] = {"minmax", "percentile", "entropy", NULL};

static int check_dataset(const run_info *info, const ct_dataset *data, const char *name)
{
    int shape[3] = {ct_dataset_channels(data), ct_dataset_height(data), ct_dataset_width(data)};
    if (memcmp(shape, info->input, sizeof shape) == 0 && ct_dataset_classes(data) == info->classes)
        return CLI_EXIT_OK;
    fprintf(stderr, "cuttle quantize: %s holds %dx%dx%d images of %d classes, but %s takes "
                    "%dx%dx%d and %d classes: calibrate on the data it was trained on\n",
            name, shape[0], shape[1], shape[2], ct_dataset_classes(data), info->name,
            info->input[0], info->input[1], info->input[2], info->classes);
    return CLI_EXIT_USAGE;
}

/* N batches of B images spread evenly over the split. */
static int calibration_batches(const quantize_options *o, const ct_dataset *data,
                               float **batches)
{
    int64_t size = ct_dataset_size(data), total = o->calib_batches * o->batch;
    if (total > size) {
        fprintf(stderr, "cuttle quantize: --calib %s holds %lld images, fewer than "
                        "--calib-batches %ld x --batch %ld\n",
                o->calib, (long long)size, o->calib_batches, o->batch);
        return CLI_EXIT_USAGE;
    }
    int64_t item = (int64_t)ct_dataset_channels(data) * ct_dataset_height(data) *
                   ct_dataset_width(data);
    int64_t *indices = malloc(sizeof *indices * (size_t)o->batch);
    int exit_status = indices ? CLI_EXIT_OK : CLI_EXIT_FAILED;
    for (long b = 0; exit_status == CLI_EXIT_OK && b < o->calib_batches; b++) {
        if (!(batches[b] = malloc(sizeof(float) * (size_t)(item * o->batch)))) {
            exit_status = CLI_EXIT_FAILED;
            break;
        }
        for (long i = 0; i < o->batch; i++)
            indices[i] = (b * o->batch + i) * size / total;
        if (ct_dataset_batch(data, indices, (int)o->batch, batches[b], NULL) != CT_OK)
            exit_status = cli_fail("quantize");
    }
    if (!indices || (exit_status == CLI_EXIT_FAILED && ct_last_error()[0] == '\0'))
        fprintf(stderr, "cuttle quantize: out of host memory for the calibration batches\n");
    free(indices);
    return exit_status;
}

static void print_layers(const ct_quantized *q, const quantize_options *o, const char *name)
{
    printf("quantized %s to INT8 on the CPU (%s calibration, %ld batches of %ld from %s):\n",
           name, o->method, o->calib_batches, o->batch, o->calib);
    printf("  batchnorms folded first: %d\n", q->optimize.folded);
    printf("  %-16s %-6s %-24s %-18s %s\n", "layer", "int8", "input range", "scale / zero",
           "SQNR (dB, output vs f32)");
    int u8 = 0, int8 = 0;
    for (int k = 0; k < q->n_layers; k++) {
        const ct_quantize_layer *l = &q->layers[k];
        u8 += l->out_u8;
        int8 += l->quantized;
        if (l->quantized)
            printf("  %-16s %-6s [%9.4g, %9.4g]   %-9.3g / %-6d %6.1f%s\n", l->name, "yes",
                   (double)l->in_lo, (double)l->in_hi, (double)l->in_scale, l->in_zero_point,
                   l->sqnr_db, l->out_u8 ? "  (writes u8)" : "");
        else
            printf("  %-16s %-6s %-43s %6.1f  (%s)\n", l->name, "f32", "", l->sqnr_db,
                   l->reason);
    }
    printf("  between int8 layers: %d of %d int8 layers write u8 for the int8 layers after "
           "them (the rest feed f32 ops)\n", u8, int8);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median ms per batch of each plan, runs interleaved (the input is whatever
 * the last evaluation left: the time does not depend on it). */
static int time_plans(ct_plan *const plans[2], double ms[2])
{
    double times[2][QUANTIZE_TIMED_RUNS];
    for (int run = 0; run < 2 * (QUANTIZE_TIMED_RUNS + 1); run++) {
        double start = cli_now();
        if (ct_plan_run(plans[run % 2], CT_EVAL) != CT_OK)
            return cli_fail("quantize");
        if (run >= 2)
            times[run % 2][run / 2 - 1] = 1e3 * (cli_now() - start);
    }
    for (int k = 0; k < 2; k++) {
        qsort(times[k], QUANTIZE_TIMED_RUNS, sizeof(double), compare_doubles);
        ms[k] = times[k][QUANTIZE_TIMED_RUNS / 2];
    }
    return CLI_EXIT_OK;
}

static int evaluate(const quantize_options *o, const char *dataset, cli_evaluator *const ev[2],
                    const ct_backend *backend)
{
    ct_dataset *data = NULL;
    CLI_TRY(cli_load_dataset("quantize", dataset, o->data_dir, o->eval_split, &data));
    double loss[2] = {0}, accuracy[2] = {0}, ms[2] = {0};
    int exit_status = CLI_EXIT_OK;
    for (int k = 0; k < 2 && exit_status == CLI_EXIT_OK; k++)
        exit_status = cli_evaluate("quantize", ev[k], data, &loss[k], &accuracy[k], NULL);
    ct_plan *plans[2] = {cli_evaluator_plan(ev[0]), cli_evaluator_plan(ev[1])};
    if (exit_status == CLI_EXIT_OK)
        exit_status = time_plans(plans, ms);
    if (exit_status == CLI_EXIT_OK) {
        printf("  accuracy on %s %s (%lld images): f32 %.2f%%, int8 %.2f%% (%+.2f points)\n",
               dataset, o->eval_split, (long long)ct_dataset_size(data), 100 * accuracy[0],
               100 * accuracy[1], 100 * (accuracy[1] - accuracy[0]));
        printf("  time per batch: f32 %.2f ms, int8 %.2f ms (%.2fx; batch %ld on %s, median of "
               "%d interleaved runs)\n",
               ms[0], ms[1], ms[0] / ms[1], o->batch, ct_backend_name(backend),
               QUANTIZE_TIMED_RUNS);
    }
    ct_dataset_free(data);
    return exit_status;
}

/* DIR/model.safetensors: the int8 model with the run's metadata and where
 * its calibration images came from. */
static int save(const quantize_options *o, const run_info *info, const ct_quantized *q)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/model.safetensors", o->out) >= (int)sizeof path) {
        fprintf(stderr, "cuttle quantize: -o %s: the path is too long\n", o->out);
        return CLI_EXIT_USAGE;
    }
    CLI_TRY(run_prepare_dir("quantize", o->out));
    run_meta meta = {.n = 0};
    int exit_status = CLI_EXIT_OK;
    char calib[256];
    snprintf(calib, sizeof calib, "%s%s", o->calib, strchr(o->calib, ':') ? "" : ":train");
    if (!run_meta_add_info(&meta, info) || !run_meta_add(&meta, "calibration_data", calib)) {
        fprintf(stderr, "cuttle quantize: out of host memory for the metadata\n");
        exit_status = CLI_EXIT_FAILED;
    } else if (ct_quantized_save(q, path, meta.n, meta.items) != CT_OK) {
        exit_status = cli_fail("quantize");
    } else {
        int n_int8 = 0;
        for (int k = 0; k < q->n_layers; k++)
            n_int8 += q->layers[k].quantized;
        printf("saved the int8 model to %s (%d int8 layer%s, %d f32); run it with cuttle eval "
               "or predict --weights %s, export it with cuttle export\n",
               path, n_int8, n_int8 == 1 ? "" : "s", q->n_layers - n_int8, path);
    }
    run_meta_free(&meta);
    return exit_status;
}

static int quantize(quantize_options *o)
{
    char dataset[64];
    const char *colon = strchr(o->calib, ':');
    snprintf(dataset, sizeof dataset, "%.*s", (int)(colon ? colon - o->calib : 63), o->calib);
    ct_quantize_args args = {.percentile = o->percentile, .quantize_last = o->quantize_last,
                             .quantize_shallow = o->quantize_shallow};
    if (ct_calib_method_parse(o->method, &args.method) != CT_OK)
        return cli_fail("quantize");
    ct_checkpoint *checkpoint = NULL;
    run_info info;
    CLI_TRY(run_info_open("quantize", &(run_source){o->weights, o->model, dataset, o->data_dir,
                                                    NULL, 0},
                          &checkpoint, &info));
    if (o->out && info.onnx) {
        fprintf(stderr, "cuttle quantize: -o: %s is an ONNX model, and an int8 file records "
                        "the model's definition, which an ONNX file does not have: quantize "
                        "the cuttle checkpoint it came from\n", o->model);
        run_info_free(&info);
        return CLI_EXIT_USAGE;
    }
    ct_dataset *calib = NULL;
    ct_backend *backend = NULL;
    cli_evaluator *ev[2] = {NULL, NULL};
    float **batches = calloc((size_t)o->calib_batches, sizeof *batches);
    int exit_status = batches ? cli_load_dataset("quantize", dataset, o->data_dir,
                                                 colon ? colon + 1 : "train", &calib)
                              : CLI_EXIT_FAILED;
    if (exit_status == CLI_EXIT_OK)
        exit_status = check_dataset(&info, calib, o->calib);
    if (exit_status == CLI_EXIT_OK)
        exit_status = calibration_batches(o, calib, batches);
    if (exit_status == CLI_EXIT_OK)
        exit_status = cli_backend("quantize",
                                  &(cli_device){o->device, o->threads, false, NULL, false, NULL},
                                  stdout, &backend);
    for (int k = 0; k < 2 && exit_status == CLI_EXIT_OK; k++) {
        exit_status = cli_evaluator_new("quantize", info.text, info.onnx, info.input,
                                        info.classes, (int)o->batch, CT_PRECISION_FP32, backend,
                                        &ev[k]);
        if (exit_status == CLI_EXIT_OK && checkpoint &&
            ct_plan_load_checkpoint(cli_evaluator_plan(ev[k]), checkpoint, CT_SAVE_MODEL) != CT_OK)
            exit_status = cli_fail("quantize");
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = cli_evaluator_optimize("quantize", ev[0]);
    const ct_quantized *q = NULL;
    if (exit_status == CLI_EXIT_OK &&
        !(q = cli_evaluator_quantize("quantize", ev[1], &args, (const float *const *)batches,
                                     (int)o->calib_batches)))
        exit_status = CLI_EXIT_FAILED;
    if (exit_status == CLI_EXIT_OK) {
        print_layers(q, o, info.name);
        exit_status = evaluate(o, dataset, ev, backend);
    }
    if (exit_status == CLI_EXIT_OK && o->out)
        exit_status = save(o, &info, q);
    else if (exit_status == CLI_EXIT_OK)
        printf("nothing written (-o DIR saves the int8 model)\n");
    for (long b = 0; batches && b < o->calib_batches; b++)
        free(batches[b]);
    free(batches);
    for (int k = 0; k < 2; k++)
        cli_evaluator_free(ev[k]);
    ct_backend_free(backend);
    ct_dataset_free(calib);
    run_info_free(&info);
    ct_checkpoint_close(checkpoint);
    return exit_status;
}

int cmd_quantize(int argc, char **argv)
{
    quantize_options o = {.method = "percentile", .calib_batches = 10, .batch = 64,
                          .device = "cpu", .eval_split = "test"};
    const cli_option options[] = {
        {"--weights", "FILE", CLI_TEXT, &o.weights, 0, 0, NULL,
         "the checkpoint (model.safetensors from cuttle train, or a state_dict with --model)"},
        {"--model", "NAME|FILE", CLI_TEXT, &o.model, 0, 0, NULL,
         "the model (default: the one recorded in the checkpoint)"},
        {"--calib", "DATASET[:SPLIT]", CLI_TEXT, &o.calib, 0, 0, NULL,
         "the calibration data (required; split default train); its test split is evaluated"},
        {"--calib-batches", "N", CLI_INT, &o.calib_batches, 1, 100000, NULL,
         "calibration batches (default 10)"},
        {"--batch", "B", CLI_INT, &o.batch, 1, 65536, NULL,
         "images per batch: calibration, evaluation and timing (default 64)"},
        {"--method", "M", CLI_TEXT, &o.method, 0, 0, methods,
         "calibration: minmax, percentile (default) or entropy (KL divergence, TensorRT's)"},
        {"--percentile", "P", CLI_FLOAT, &o.percentile, 50.0001, 100, NULL,
         "for --method percentile: the share of values the range keeps (default 99.99)"},
        {"--quantize-last", NULL, CLI_FLAG, &o.quantize_last, 0, 0, NULL,
         "quantize the last layer (the classifier) too (default: it stays f32)"},
        {"--quantize-shallow", NULL, CLI_FLAG, &o.quantize_shallow, 0, 0, NULL,
         "quantize layers with dot products shorter than 32 too (a first convolution on 1 or "
         "3 channels; default: f32, faster there)"},
        {"--eval-split", "SPLIT", CLI_TEXT, &o.eval_split, 0, 0, NULL,
         "the split both models are evaluated on (default test)"},
        {"--data-dir", "DIR", CLI_TEXT, &o.data_dir, 0, 0, NULL,
         "where the dataset's files are (default: Debian's place for fashion-mnist)"},
        {"--device", "DEV", CLI_TEXT, &o.device, 0, 0, NULL,
         "cpu or cpu:N (the int8 kernels are CPU-only; default cpu)"},
        {"--threads", "T", CLI_INT, &o.threads, 0, 4096, NULL, "CPU threads (default all)"},
        {"-o", "DIR", CLI_TEXT, &o.out, 0, 0, NULL,
         "save the int8 model to DIR/model.safetensors, which eval, predict, bench --weights "
         "and export take (default: nothing written)"},
    };
    cli_parsed parsed = cli_parse("quantize", "--weights FILE --calib DATASET[:SPLIT] [options]",
                                  argc, argv, options, (int)(sizeof options / sizeof options[0]));
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!o.weights || !o.calib) {
        fprintf(stderr, "cuttle quantize: --weights FILE and --calib DATASET[:SPLIT] are "
                        "required (see cuttle quantize --help)\n");
        return CLI_EXIT_USAGE;
    }
    return cli_parse_only ? CLI_EXIT_OK : quantize(&o);
}
