/*
 * cuttle eval: the accuracy and loss of saved weights on a dataset split,
 * and optionally the confusion matrix.  The model, its input and the
 * dataset come from the checkpoint's metadata unless options say otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "json_writer.h"
#include "cli.h"
#include "run_info.h"

#define DEFAULT_EVAL_BATCH 500
#define NORMALIZATION_TOLERANCE 1e-5f

static const char *const splits[] = {"test", "train", NULL};

typedef struct eval_options {
    const char *weights, *model, *data, *data_dir, *split, *device, *cuda_graph, *precision;
    long batch, threads;
    bool confusion, json, strict_device, no_optimize;
} eval_options;

/* The dataset must be the shape the model was trained on. */
static int check_dataset(const run_info *info, const ct_dataset *data, const char *name)
{
    int shape[3] = {ct_dataset_channels(data), ct_dataset_height(data), ct_dataset_width(data)};
    if (memcmp(shape, info->input, sizeof shape) != 0 || ct_dataset_classes(data) != info->classes) {
        fprintf(stderr,
                "cuttle eval: %s has images %dx%dx%d in %d classes, but the model takes "
                "%dx%dx%d in %d classes\n",
                name, shape[0], shape[1], shape[2], ct_dataset_classes(data), info->input[0],
                info->input[1], info->input[2], info->classes);
        return CLI_EXIT_USAGE;
    }
    for (int c = 0; c < shape[0]; c++) {
        float dm = ct_dataset_mean(data, c) - info->mean[c];
        float ds = ct_dataset_std(data, c) - info->std[c];
        if (dm > NORMALIZATION_TOLERANCE || dm < -NORMALIZATION_TOLERANCE ||
            ds > NORMALIZATION_TOLERANCE || ds < -NORMALIZATION_TOLERANCE)
            fprintf(stderr,
                    "cuttle eval: note: %s normalizes channel %d with mean %g std %g, the "
                    "model was trained with mean %g std %g\n",
                    name, c, (double)ct_dataset_mean(data, c), (double)ct_dataset_std(data, c),
                    (double)info->mean[c], (double)info->std[c]);
    }
    return CLI_EXIT_OK;
}

static void print_confusion(FILE *out, const run_info *info, const int64_t *confusion)
{
    int k = info->classes;
    fprintf(out, "confusion matrix (rows: true class, columns: predicted):\n%14s", "");
    for (int p = 0; p < k; p++)
        fprintf(out, " %6d", p);
    fprintf(out, "\n");
    for (int t = 0; t < k; t++) {
        fprintf(out, "%2d %-11.11s", t, info->class_names[t]);
        for (int p = 0; p < k; p++)
            fprintf(out, " %6lld", (long long)confusion[t * k + p]);
        fprintf(out, "\n");
    }
}

static void print_json(const eval_options *o, const run_info *info, int64_t n, double accuracy,
                       double loss, const int64_t *confusion)
{
    json_writer out = json_writer_start(stdout);
    json_object(&out);
    json_field_string(&out, "weights", o->weights);
    json_field_string(&out, "model", info->name);
    json_field_string(&out, "dataset", o->data);
    json_field_string(&out, "split", o->split);
    json_field_int(&out, "n", n);
    json_field_fixed(&out, "accuracy", accuracy, 6);
    json_field_fixed(&out, "loss", loss, 6);
    if (confusion) {
        json_key(&out, "confusion");
        json_array(&out);
        for (int t = 0; t < info->classes; t++) {
            json_array(&out);
            for (int p = 0; p < info->classes; p++)
                json_int(&out, confusion[t * info->classes + p]);
            json_end(&out);
        }
        json_end(&out);
    }
    json_end(&out);
}

static int evaluate(eval_options *o)
{
    ct_checkpoint *checkpoint = NULL;
    run_info info;
    ct_dataset *data = NULL;
    ct_backend *backend = NULL;
    cli_evaluator *ev = NULL;
    int64_t *confusion = NULL;
    FILE *log = o->json ? stderr : stdout;
    int exit_status =
        run_info_open("eval", &(run_source){o->weights, o->model, o->data, o->data_dir, NULL, 0},
                      &checkpoint, &info);
    if (exit_status == CLI_EXIT_OK && !o->data && !info.dataset) {
        fprintf(stderr, "cuttle eval: %s does not say which dataset it was trained on: give "
                "--data\n", o->model);
        exit_status = CLI_EXIT_USAGE;
    }
    if (exit_status == CLI_EXIT_OK) {
        if (!o->data)
            o->data = info.dataset;
        exit_status = cli_load_dataset("eval", o->data, o->data_dir, o->split, &data);
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = check_dataset(&info, data, o->data);
    if (exit_status == CLI_EXIT_OK)
        exit_status = cli_backend("eval", &(cli_device){o->device, o->threads, o->strict_device,
                                                      o->cuda_graph,
                                                      checkpoint &&
                                                          ct_checkpoint_is_int8(checkpoint),
                                                      NULL},
                                  log, &backend);
    int64_t n = data ? ct_dataset_size(data) : 0;
    int batch = (int)(o->batch < n ? o->batch : n);
    if (exit_status == CLI_EXIT_OK)
        exit_status = cli_evaluator_new("eval", info.text, info.onnx, info.input, info.classes,
                                        batch, cli_precision(o->precision), backend, &ev);
    if (exit_status == CLI_EXIT_OK && checkpoint)
        exit_status = cli_evaluator_load("eval", ev, checkpoint, !o->no_optimize);
    else if (exit_status == CLI_EXIT_OK && !o->no_optimize)
        exit_status = cli_evaluator_optimize("eval", ev);
    if (exit_status == CLI_EXIT_OK && o->confusion &&
        !(confusion = calloc((size_t)info.classes * (size_t)info.classes, sizeof *confusion))) {
        fprintf(stderr, "cuttle eval: out of host memory\n");
        exit_status = CLI_EXIT_FAILED;
    }
    double loss = 0, accuracy = 0;
    if (exit_status == CLI_EXIT_OK)
        exit_status = cli_evaluate("eval", ev, data, &loss, &accuracy, confusion);
    const ct_quantized *int8 = ev ? cli_evaluator_quantized(ev) : NULL;
    if (exit_status == CLI_EXIT_OK && int8) {
        int n_int8 = 0;
        for (int k = 0; k < int8->n_layers; k++)
            n_int8 += int8->layers[k].quantized;
        fprintf(log, "int8 model (%s calibration): %d of %d conv and linear layers int8\n",
                ct_calib_method_name(int8->args.method), n_int8, int8->n_layers);
    }
    if (exit_status == CLI_EXIT_OK) {
        fprintf(log, "%s on %s %s: accuracy %.2f%% (%lld/%lld), loss %.4f\n", info.name, o->data,
                o->split, 100.0 * accuracy, (long long)(accuracy * (double)n + 0.5),
                (long long)n, loss);
        if (confusion)
            print_confusion(log, &info, confusion);
        if (o->json)
            print_json(o, &info, n, accuracy, loss, confusion);
    }
    free(confusion);
    cli_evaluator_free(ev);
    ct_backend_free(backend);
    ct_dataset_free(data);
    run_info_free(&info);
    ct_checkpoint_close(checkpoint);
    return exit_status;
}

int cmd_eval(int argc, char **argv)
{
    eval_options o = {.split = "test", .device = "cpu", .batch = DEFAULT_EVAL_BATCH};
    const cli_option options[] = {
        {"--weights", "FILE", CLI_TEXT, &o.weights, 0, 0, NULL,
         "the checkpoint (model.safetensors from cuttle train or cuttle quantize -o, or a "
         "state_dict) (required unless --model is an ONNX file)"},
        {"--model", "NAME|FILE", CLI_TEXT, &o.model, 0, 0, NULL,
         "the model (default: the one recorded in the checkpoint); an .onnx file holds its "
         "weights"},
        {"--data", "NAME", CLI_TEXT, &o.data, 0, 0, cli_datasets,
         "the dataset (default: the one recorded in the checkpoint)"},
        {"--data-dir", "DIR", CLI_TEXT, &o.data_dir, 0, 0, NULL,
         "where the dataset's files are (default: Debian's place for fashion-mnist)"},
        {"--split", "NAME", CLI_TEXT, &o.split, 0, 0, splits, "test or train (default test)"},
        {"--batch", "B", CLI_INT, &o.batch, 1, 65536, NULL, "batch size (default 500)"},
        {"--device", "DEV", CLI_TEXT, &o.device, 0, 0, NULL,
         "auto, cpu, cpu:N, cuda or cuda:N (default cpu)"},
        {"--threads", "T", CLI_INT, &o.threads, 0, 4096, NULL,
         "CPU threads, 0 for all cores (default 0)"},
        {"--cuda-graph", "on|off", CLI_TEXT, &o.cuda_graph, 0, 0, cli_on_off,
         CLI_CUDA_GRAPH_HELP},
        {"--precision", "P", CLI_TEXT, &o.precision, 0, 0, cli_precisions,
         CLI_PRECISION_HELP},
        {"--no-optimize", NULL, CLI_FLAG, &o.no_optimize, 0, 0, NULL,
         "run the model as built: no batchnorm folding, no dropout removal (docs/optimize.md)"},
        {"--strict-device", NULL, CLI_FLAG, &o.strict_device, 0, 0, NULL,
         "refuse a model with ops the device cannot run (default: they run on the CPU)"},
        {"--confusion", NULL, CLI_FLAG, &o.confusion, 0, 0, NULL,
         "also print the confusion matrix"},
        {"--json", NULL, CLI_FLAG, &o.json, 0, 0, NULL,
         "print the result as one JSON object on stdout (accuracy, loss, n)"},
    };
    cli_parsed parsed = cli_parse("eval", "--weights FILE [options] | --model FILE.onnx [options]",
                                  argc, argv, options, (int)(sizeof options / sizeof options[0]));
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    return cli_parse_only ? CLI_EXIT_OK : evaluate(&o);
}
