/*
 * The synthetic workload of bench and profile (see workload.h).
 */
#include "workload.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "run_info.h"

#define KIB 1024

const char *const workload_modes[] = {"train", "infer", NULL};

/* An ONNX model: its input shape and classes are the file's; --input may
 * repeat the shape but not change it. */
static int open_onnx(const char *command, workload_options *opts, workload *w, int input[3])
{
    if (ct_onnx_load(opts->model, &w->onnx) != CT_OK)
        return cli_fail(command);
    int64_t shape[4];
    ct_onnx_input_shape(w->onnx, shape);
    for (int d = 0; d < 3; d++)
        input[d] = (int)shape[d + 1];
    int given[3];
    if (opts->input &&
        (!cli_parse_input(opts->input, given) || memcmp(given, input, sizeof given) != 0)) {
        fprintf(stderr, "cuttle %s: %s takes %dx%dx%d images; leave --input out or give that\n",
                command, opts->model, input[0], input[1], input[2]);
        return CLI_EXIT_USAGE;
    }
    opts->classes = ct_onnx_classes(w->onnx);
    return CLI_EXIT_OK;
}

/* --weights: a cuttle checkpoint gives the model, input and classes (unless
 * --model names another definition); an int8 model needs infer mode. */
static int open_weights(const char *command, workload_options *opts, workload *w, int input[3])
{
    if (cli_model_is_onnx(opts->model)) {
        fprintf(stderr, "cuttle %s: %s holds its weights; leave --weights out\n", command,
                opts->model);
        return CLI_EXIT_USAGE;
    }
    if (ct_checkpoint_open(opts->weights, &w->checkpoint) != CT_OK)
        return cli_fail(command);
    bool int8 = ct_checkpoint_is_int8(w->checkpoint);
    if (int8 && strcmp(opts->mode, "infer") != 0) {
        fprintf(stderr, "cuttle %s: %s is an int8 model, which runs inference only: give "
                        "--mode infer\n", command, opts->weights);
        return CLI_EXIT_USAGE;
    }
    if (int8 && (opts->no_optimize || (opts->precision && strcmp(opts->precision, "fp32")))) {
        fprintf(stderr, "cuttle %s: %s is an int8 model, built from the optimized fp32 graph: "
                        "leave --no-optimize and --precision out\n", command, opts->weights);
        return CLI_EXIT_USAGE;
    }
    if (!ct_checkpoint_meta(w->checkpoint, "model"))
        return CLI_EXIT_OK; /* a plain state_dict: --model, --input and --classes say */
    run_info info;
    int exit_status = run_info_read(command, w->checkpoint, opts->weights, &info);
    int given[3];
    if (exit_status == CLI_EXIT_OK && opts->input &&
        (!cli_parse_input(opts->input, given) || memcmp(given, info.input, sizeof given))) {
        fprintf(stderr, "cuttle %s: %s takes %dx%dx%d images; leave --input out or give that\n",
                command, opts->weights, info.input[0], info.input[1], info.input[2]);
        exit_status = CLI_EXIT_USAGE;
    }
    if (exit_status == CLI_EXIT_OK) {
        memcpy(input, info.input, sizeof info.input);
        opts->classes = info.classes;
        if (opts->model == workload_defaults.model) { /* --model not given */
            w->model_text = info.text;
            info.text = NULL;
            snprintf(w->model_name, sizeof w->model_name, "%s", info.name);
            opts->model = w->model_name;
        }
    }
    run_info_free(&info);
    return exit_status;
}

int workload_check(const char *command, workload_options *opts, workload *w)
{
    int input[3] = {1, 28, 28};
    if (opts->weights)
        CLI_TRY(open_weights(command, opts, w, input));
    else if (cli_model_is_onnx(opts->model))
        CLI_TRY(open_onnx(command, opts, w, input));
    else if (opts->input && !cli_parse_input(opts->input, input)) {
        fprintf(stderr,
                "cuttle %s: --input expects CxHxW, three whole numbers such as 3x32x32, got "
                "'%s'\n",
                command, opts->input);
        return CLI_EXIT_USAGE;
    }
    w->channels = input[0];
    w->height = input[1];
    w->width = input[2];
    w->mode = strcmp(opts->mode, "train") == 0 ? CT_TRAIN : CT_EVAL;
    const char *device = opts->device;
    if (strcmp(device, "cpu") == 0 && opts->threads > 0) {
        snprintf(w->device, sizeof w->device, "cpu:%ld", opts->threads);
    } else if (strncmp(device, "cpu:", 4) == 0 && opts->threads > 0 &&
               strtol(device + 4, NULL, 10) != opts->threads) {
        fprintf(stderr, "cuttle %s: --device %s and --threads %ld disagree; give one of them\n",
                command, device, opts->threads);
        return CLI_EXIT_USAGE;
    } else if (strlen(device) >= sizeof w->device) {
        fprintf(stderr, "cuttle %s: --device '%s' is too long\n", command, device);
        return CLI_EXIT_USAGE;
    } else {
        snprintf(w->device, sizeof w->device, "%s", device);
    }
    return CLI_EXIT_OK;
}

/* splitmix64: the seeded synthetic batch. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Images uniform in [-1, 1), labels uniform in [0, classes). */
static int write_batch(const char *command, const workload_options *opts, workload *w)
{
    size_t n_pixels = (size_t)ct_tensor_numel(w->x), n_labels = (size_t)opts->batch;
    float *images = malloc(sizeof *images * n_pixels);
    int64_t *labels = malloc(sizeof *labels * n_labels);
    int exit_status = CLI_EXIT_OK;
    if (!images || !labels) {
        fprintf(stderr, "cuttle %s: out of host memory for the synthetic batch\n", command);
        exit_status = CLI_EXIT_FAILED;
    } else {
        uint64_t state = (uint64_t)opts->seed;
        for (size_t i = 0; i < n_pixels; i++)
            images[i] = (float)((double)(next_random(&state) >> 11) * 0x1p-52 - 1.0);
        for (size_t i = 0; i < n_labels; i++)
            labels[i] = (int64_t)(next_random(&state) % (uint64_t)opts->classes);
        if (ct_plan_write(w->plan, w->x, images, sizeof *images * n_pixels) != CT_OK ||
            (w->labels &&
             ct_plan_write(w->plan, w->labels, labels, sizeof *labels * n_labels) != CT_OK))
            exit_status = cli_fail(command);
    }
    free(images);
    free(labels);
    return exit_status;
}

const workload_options workload_defaults = {
    .model = "simplecnn", .device = "cpu", .mode = "train", .batch = 64, .classes = 10,
    .seed = 1};

void workload_option_table(workload_options *opts, cli_option *out)
{
    const cli_option shared[WORKLOAD_N_OPTIONS] = {
        {"--model", "NAME|FILE", CLI_TEXT, &opts->model, 0, 0, NULL,
         "the model: a name, a model file or an ONNX file with its weights (default "
         "simplecnn)"},
        {"--weights", "FILE", CLI_TEXT, &opts->weights, 0, 0, NULL,
         "a checkpoint's weights (default: seeded random ones); one from cuttle train or "
         "quantize -o (an int8 model: --mode infer) also gives the model, input and classes"},
        {"--batch", "B", CLI_INT, &opts->batch, 1, 65536, NULL, "batch size (default 64)"},
        {"--input", "CxHxW", CLI_TEXT, &opts->input, 0, 0, NULL,
         "image channels x height x width (default 1x28x28; an ONNX model's own)"},
        {"--classes", "K", CLI_INT, &opts->classes, 2, 100000, NULL,
         "classes of the model's output (default 10; an ONNX model's own)"},
        {"--device", "DEV", CLI_TEXT, &opts->device, 0, 0, NULL,
         "cpu, cpu:N (N threads) or cuda[:N] (default cpu)"},
        {"--threads", "T", CLI_INT, &opts->threads, 0, 4096, NULL,
         "CPU threads, 0 for all cores (default 0)"},
        {"--strict-device", NULL, CLI_FLAG, &opts->strict_device, 0, 0, NULL,
         "refuse a model with ops the device cannot run (default: they run on the CPU)"},
        {"--kernels", "K", CLI_TEXT, &opts->kernels, 0, 0, NULL, CLI_KERNELS_HELP},
        {"--cuda-graph", "on|off", CLI_TEXT, &opts->cuda_graph, 0, 0, cli_on_off,
         CLI_CUDA_GRAPH_HELP},
        {"--precision", "P", CLI_TEXT, &opts->precision, 0, 0, cli_precisions,
         CLI_PRECISION_HELP},
        {"--mode", "MODE", CLI_TEXT, &opts->mode, 0, 0, workload_modes,
         "train (forward, backward, SGD step) or infer (forward) (default train)"},
        {"--seed", "S", CLI_INT, &opts->seed, 0, 2147483647, NULL,
         "seed of the weights and the synthetic batch (default 1)"},
        {"--no-optimize", NULL, CLI_FLAG, &opts->no_optimize, 0, 0, NULL,
         "infer mode: run the model as built, without batchnorm folding and dropout "
         "removal (docs/optimize.md)"},
    };
    memcpy(out, shared, sizeof shared);
}

/* The model on x; in train mode also the loss, backward and optimizer. */
static int build_graph(const char *command, const workload_options *opts, workload *w,
                       bool with_training)
{
    if (!(w->graph = ct_graph_new()))
        return cli_fail(command);
    int64_t shape[4] = {opts->batch, w->channels, w->height, w->width};
    w->x = ct_input(w->graph, "x", CT_F32, 4, shape);
    ct_graph_set_precision(w->graph, cli_precision(opts->precision));
    char *text = NULL;
    if (!w->onnx && !w->model_text)
        CLI_TRY(cli_model_text(command, opts->model, &text));
    w->logits = cli_model_build(w->graph, w->model_text ? w->model_text : text, w->onnx, w->x,
                                (int)opts->classes);
    free(text);
    if (ct_graph_status(w->graph) != CT_OK)
        return cli_fail(command);
    ct_tensor_keep(w->logits);
    if (!with_training)
        return CLI_EXIT_OK;
    w->labels = ct_input(w->graph, "labels", CT_I64, 1, shape);
    ct_tensor *loss = ct_cross_entropy(w->graph, w->logits, w->labels, 0.0f);
    ct_sgd_args sgd = {.lr = WORKLOAD_LR, .momentum = WORKLOAD_MOMENTUM,
                       .weight_decay = WORKLOAD_WEIGHT_DECAY, .nesterov = true};
    if (ct_graph_status(w->graph) != CT_OK || ct_graph_backward(w->graph, loss) != CT_OK ||
        ct_graph_sgd(w->graph, sgd) != CT_OK)
        return cli_fail(command);
    return CLI_EXIT_OK;
}

/* The int8 model of --weights replaces the f32 one. */
static int load_int8(const char *command, workload *w)
{
    if (!(w->quantized = calloc(1, sizeof *w->quantized))) {
        fprintf(stderr, "cuttle %s: out of host memory\n", command);
        return CLI_EXIT_FAILED;
    }
    if (ct_plan_load_quantized(w->plan, w->x, w->logits, w->checkpoint, w->quantized) != CT_OK) {
        free(w->quantized);
        w->quantized = NULL;
        return cli_fail(command);
    }
    ct_plan_free(w->plan);
    ct_graph_free(w->graph);
    w->plan = w->quantized->plan;
    w->graph = w->quantized->graph;
    w->x = w->quantized->x;
    w->logits = w->quantized->y;
    w->optimized = w->quantized->optimize;
    return CLI_EXIT_OK;
}

int workload_init(const char *command, const workload_options *opts, workload *w)
{
    int exit_status = build_graph(command, opts, w, w->mode == CT_TRAIN);
    if (exit_status != CLI_EXIT_OK)
        return exit_status;
    ct_status status = ct_backend_new(w->device, &w->backend);
    if (status != CT_OK) { /* a device string it cannot parse is a bad command line */
        cli_fail(command);
        return status == CT_ERR_ARG ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    ct_backend_set_strict(w->backend, opts->strict_device);
    w->cuda_graph = cli_on(opts->cuda_graph);
    ct_backend_set_cuda_graph(w->backend, w->cuda_graph);
    if (opts->kernels && (status = ct_backend_set_kernels(w->backend, opts->kernels)) != CT_OK) {
        cli_fail(command);
        return status == CT_ERR_ARG ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    if (ct_plan_new(w->graph, w->backend, (uint64_t)opts->seed, &w->plan) != CT_OK ||
        (w->onnx && ct_plan_load_onnx(w->plan, w->onnx) != CT_OK))
        return cli_fail(command);
    w->params = 0;
    for (int i = 0; i < ct_graph_n_state(w->graph); i++) {
        const ct_tensor *t = ct_graph_state(w->graph, i);
        w->params += ct_tensor_is_param(t) ? ct_tensor_numel(t) : 0;
    }
    if (w->checkpoint && ct_checkpoint_is_int8(w->checkpoint))
        CLI_TRY(load_int8(command, w));
    else if (w->checkpoint && ct_plan_load_checkpoint(w->plan, w->checkpoint, CT_SAVE_MODEL))
        return cli_fail(command);
    if (w->mode == CT_EVAL && !opts->no_optimize && !w->quantized)
        CLI_TRY(cli_optimize(command, &w->graph, &w->plan, &w->x, &w->logits, &w->optimized));
    return write_batch(command, opts, w);
}

void workload_free(workload *w)
{
    if (w->quantized) { /* its plan and graph, before the weights they read */
        ct_quantized_free(w->quantized);
        free(w->quantized);
    } else {
        ct_plan_free(w->plan);
        ct_graph_free(w->graph);
    }
    ct_backend_free(w->backend);
    ct_onnx_free(w->onnx);
    ct_checkpoint_close(w->checkpoint);
    free(w->model_text);
    memset(w, 0, sizeof *w);
}

int64_t workload_params(const workload *w)
{
    return w->params;
}

void workload_json_fields(json_writer *out, const workload_options *opts, const workload *w)
{
    char framework[64], input[64];
    snprintf(framework, sizeof framework, "cuttle %s", ct_version());
    snprintf(input, sizeof input, "%dx%dx%d", w->channels, w->height, w->width);
    json_field_string(out, "framework", framework);
    json_field_string(out, "model", opts->model);
    json_field_int(out, "batch", opts->batch);
    json_field_string(out, "input", input);
    json_field_string(out, "device", opts->device);
    json_field_bool(out, "emulated", ct_backend_emulated(w->backend));
}

void workload_print_emulation_note(const workload *w)
{
    if (ct_backend_emulated(w->backend))
        printf("  emulated device: these times are the CPU's time to emulate the kernels, "
               "not GPU speed\n");
}

int workload_print_param_shapes(const char *command, const workload_options *opts,
                                const workload *w)
{
    workload model = *w;
    model.graph = NULL;
    int exit_status = build_graph(command, opts, &model, false);
    if (exit_status == CLI_EXIT_OK) {
        json_writer out = json_writer_start(stdout);
        json_object(&out);
        for (int i = 0; i < ct_graph_n_state(model.graph); i++) {
            const ct_tensor *t = ct_graph_state(model.graph, i);
            json_key(&out, ct_tensor_name(t));
            json_array(&out);
            for (int d = 0; d < ct_tensor_ndim(t); d++)
                json_int(&out, ct_tensor_dim(t, d));
            json_end(&out);
        }
        json_end(&out);
    }
    ct_graph_free(model.graph);
    return exit_status;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void workload_sort(double *values, int n)
{
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
}

double workload_quantile(const double *sorted, int n, double q)
{
    if (n <= 0)
        return 0.0;
    double position = q * (double)(n - 1);
    int below = (int)position;
    if (below >= n - 1)
        return sorted[n - 1];
    double fraction = position - (double)below;
    return sorted[below] + fraction * (sorted[below + 1] - sorted[below]);
}

int64_t workload_peak_host_bytes(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return -1;
    return (int64_t)usage.ru_maxrss * KIB; /* Linux reports KiB */
}
