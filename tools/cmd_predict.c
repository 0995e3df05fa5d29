/*
 * cuttle predict: the top classes of saved weights (or of an ONNX model) for
 * some inputs.  An input is a PNG or JPEG file (converted to the model's
 * channels and size and normalized as in training), a .npy array of images
 * already normalized, or DATASET:SPLIT:INDEX (or INDEX-LAST) for items of a
 * dataset.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json_writer.h"
#include "cli.h"
#include "npy.h"
#include "run_info.h"

#define PREDICT_BATCH 64
#define DEFAULT_TOP 5
#define MAX_INPUTS 100000

typedef struct predict_options {
    const char *weights, *model, *data_dir, *device, *cuda_graph, *precision, *input;
    long top, threads, classes;
    bool json, strict_device, no_optimize;
} predict_options;

/* One image to classify; label is -1 when unknown (image files). */
typedef struct item {
    char name[256];
    int64_t label;
} item;

typedef struct inputs {
    item *items;
    float *images; /* [n, C, H, W] */
    int64_t n, capacity;
    size_t item_floats;
} inputs;

static int grow(inputs *in, int64_t extra)
{
    if (in->n + extra > MAX_INPUTS) {
        fprintf(stderr, "cuttle predict: more than %d inputs; predict in parts\n", MAX_INPUTS);
        return CLI_EXIT_USAGE;
    }
    if (in->n + extra <= in->capacity)
        return CLI_EXIT_OK;
    int64_t capacity = in->n + extra;
    item *items = realloc(in->items, sizeof *items * (size_t)capacity);
    if (items)
        in->items = items;
    float *images = realloc(in->images, sizeof *images * in->item_floats * (size_t)capacity);
    if (images)
        in->images = images;
    if (!items || !images) {
        fprintf(stderr, "cuttle predict: out of host memory for %lld inputs\n",
                (long long)capacity);
        return CLI_EXIT_FAILED;
    }
    in->capacity = capacity;
    return CLI_EXIT_OK;
}

/* "fashion-mnist:test:3" or "fashion-mnist:test:0-9" into its parts;
 * false if the text does not have that form. */
static bool parse_dataset_ref(const char *text, char *name, char *split, size_t capacity,
                              int64_t *first, int64_t *last)
{
    const char *colon1 = strchr(text, ':');
    const char *colon2 = colon1 ? strchr(colon1 + 1, ':') : NULL;
    if (!colon2 || (size_t)(colon1 - text) >= capacity || (size_t)(colon2 - colon1) > capacity)
        return false;
    snprintf(name, capacity, "%.*s", (int)(colon1 - text), text);
    snprintf(split, capacity, "%.*s", (int)(colon2 - colon1 - 1), colon1 + 1);
    char *end = NULL;
    errno = 0;
    *first = strtoll(colon2 + 1, &end, 10);
    *last = *first;
    if (end != colon2 + 1 && *end == '-') {
        const char *start = end + 1;
        *last = strtoll(start, &end, 10);
        if (end == start)
            return false;
    }
    return end != colon2 + 1 && *end == '\0' && errno == 0 && *first >= 0 && *last >= *first;
}

static int add_dataset_items(inputs *in, const run_info *info, const char *ref,
                             const char *data_dir)
{
    char name[64], split[64];
    int64_t first = 0, last = 0;
    if (!parse_dataset_ref(ref, name, split, sizeof name, &first, &last)) {
        fprintf(stderr,
                "cuttle predict: '%s' is neither an image file nor DATASET:SPLIT:INDEX (e.g. "
                "fashion-mnist:test:0 or fashion-mnist:test:0-9)\n",
                ref);
        return CLI_EXIT_USAGE;
    }
    ct_dataset *data = NULL;
    CLI_TRY(cli_load_dataset("predict", name, data_dir, split, &data));
    int shape[3] = {ct_dataset_channels(data), ct_dataset_height(data), ct_dataset_width(data)};
    int exit_status = CLI_EXIT_OK;
    if (memcmp(shape, info->input, sizeof shape) != 0) {
        fprintf(stderr, "cuttle predict: %s has images %dx%dx%d; the model takes %dx%dx%d\n",
                name, shape[0], shape[1], shape[2], info->input[0], info->input[1],
                info->input[2]);
        exit_status = CLI_EXIT_USAGE;
    } else if (last >= ct_dataset_size(data)) {
        fprintf(stderr, "cuttle predict: %s %s has %lld items; index %lld is out of range\n",
                name, split, (long long)ct_dataset_size(data), (long long)last);
        exit_status = CLI_EXIT_USAGE;
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = grow(in, last - first + 1);
    for (int64_t i = first; exit_status == CLI_EXIT_OK && i <= last; i++) {
        item *it = &in->items[in->n];
        snprintf(it->name, sizeof it->name, "%s:%s:%lld", name, split, (long long)i);
        if (ct_dataset_batch(data, &i, 1, in->images + (size_t)in->n * in->item_floats,
                             &it->label) != CT_OK)
            exit_status = cli_fail("predict");
        else
            in->n++;
    }
    ct_dataset_free(data);
    return exit_status;
}

/* A .npy array of images [N, C, H, W] or one image [C, H, W], already
 * normalized: items "FILE[0]", "FILE[1]", ... */
static int add_npy_items(inputs *in, const run_info *info, const char *path)
{
    npy_array a;
    CLI_TRY(npy_read_f32("predict", path, &a));
    int first = a.ndim == 4 ? 1 : 0;
    bool fits = a.ndim == 3 || a.ndim == 4;
    for (int d = 0; fits && d < 3; d++)
        fits = a.shape[first + d] == info->input[d];
    int64_t n = a.ndim == 4 ? a.shape[0] : 1;
    int exit_status = CLI_EXIT_OK;
    if (!fits) {
        fprintf(stderr, "cuttle predict: %s holds a %dD array; the model takes [N, %d, %d, %d] "
                "or [%d, %d, %d]\n", path, a.ndim, info->input[0], info->input[1],
                info->input[2], info->input[0], info->input[1], info->input[2]);
        exit_status = CLI_EXIT_USAGE;
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = grow(in, n);
    for (int64_t i = 0; exit_status == CLI_EXIT_OK && i < n; i++) {
        item *it = &in->items[in->n];
        snprintf(it->name, sizeof it->name, "%s[%lld]", path, (long long)i);
        it->label = -1;
        memcpy(in->images + (size_t)in->n * in->item_floats, a.data + (size_t)i * in->item_floats,
               sizeof *a.data * in->item_floats);
        in->n++;
    }
    free(a.data);
    return exit_status;
}

static int add_input(inputs *in, const run_info *info, const char *arg, const char *data_dir)
{
    struct stat st;
    if (stat(arg, &st) != 0)
        return add_dataset_items(in, info, arg, data_dir);
    size_t len = strlen(arg);
    if (len > 4 && strcmp(arg + len - 4, ".npy") == 0)
        return add_npy_items(in, info, arg);
    CLI_TRY(grow(in, 1));
    item *it = &in->items[in->n];
    snprintf(it->name, sizeof it->name, "%s", arg);
    it->label = -1;
    if (ct_image_load(arg, info->input[0], info->input[1], info->input[2], info->mean, info->std,
                      in->images + (size_t)in->n * in->item_floats) != CT_OK)
        return cli_fail("predict");
    in->n++;
    return CLI_EXIT_OK;
}

/* The indices of the k largest probabilities, largest first. */
static void top_k(const double *probabilities, int classes, int k, int *out)
{
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int c = 0; c < classes; c++) {
            bool taken = false;
            for (int j = 0; j < i; j++)
                taken = taken || out[j] == c;
            if (!taken && (best < 0 || probabilities[c] > probabilities[best]))
                best = c;
        }
        out[i] = best;
    }
}

/* One item's top-k, as text, or as an element of the predictions array of
 * json (NULL for text). */
static void print_item(const predict_options *o, const run_info *info, const item *it,
                       const float *logits, json_writer *json)
{
    int k = (int)(o->top < info->classes ? o->top : info->classes);
    double *probabilities = malloc(sizeof *probabilities * (size_t)info->classes);
    int *best = malloc(sizeof *best * (size_t)k);
    if (!probabilities || !best) {
        free(probabilities);
        free(best);
        return;
    }
    cli_softmax(logits, info->classes, probabilities);
    top_k(probabilities, info->classes, k, best);
    if (!json) {
        printf("%s", it->name);
        if (it->label >= 0)
            printf("  (labelled %s)", info->class_names[it->label]);
        printf("\n");
        for (int i = 0; i < k; i++)
            printf("  %d. %-20s %.4f\n", i + 1, info->class_names[best[i]],
                   probabilities[best[i]]);
    } else {
        json_object(json);
        json_field_string(json, "input", it->name);
        json_field_int(json, "label", it->label);
        json_key(json, "top");
        json_array(json);
        for (int i = 0; i < k; i++) {
            json_object(json);
            json_field_int(json, "index", best[i]);
            json_field_string(json, "class", info->class_names[best[i]]);
            json_field_number(json, "probability", probabilities[best[i]]);
            json_end(json);
        }
        json_end(json);
        json_key(json, "logits");
        json_array(json);
        for (int c = 0; c < info->classes; c++)
            json_number(json, logits[c]);
        json_end(json);
        json_end(json);
    }
    free(probabilities);
    free(best);
}

static int predict(const predict_options *o, char **args, int n_args)
{
    ct_checkpoint *checkpoint = NULL;
    run_info info;
    ct_backend *backend = NULL;
    cli_evaluator *ev = NULL;
    inputs in = {0};
    float *logits = NULL;
    FILE *log = o->json ? stderr : stdout;
    int exit_status =
        run_info_open("predict", &(run_source){o->weights, o->model, NULL, o->data_dir, o->input,
                                               o->classes},
                      &checkpoint, &info);
    in.item_floats = (size_t)info.input[0] * (size_t)info.input[1] * (size_t)info.input[2];
    for (int i = 0; exit_status == CLI_EXIT_OK && i < n_args; i++)
        exit_status = add_input(&in, &info, args[i], o->data_dir);
    int batch = (int)(in.n < PREDICT_BATCH ? in.n : PREDICT_BATCH);
    if (exit_status == CLI_EXIT_OK)
        exit_status = cli_backend("predict", &(cli_device){o->device, o->threads, o->strict_device,
                                                      o->cuda_graph,
                                                      checkpoint &&
                                                          ct_checkpoint_is_int8(checkpoint),
                                                      NULL},
                                  log, &backend);
    if (exit_status == CLI_EXIT_OK)
        exit_status = cli_evaluator_new("predict", info.text, info.onnx, info.input, info.classes, batch,
                                        cli_precision(o->precision), backend, &ev);
    if (exit_status == CLI_EXIT_OK && checkpoint)
        exit_status = cli_evaluator_load("predict", ev, checkpoint, !o->no_optimize);
    else if (exit_status == CLI_EXIT_OK && !o->no_optimize)
        exit_status = cli_evaluator_optimize("predict", ev);
    if (exit_status == CLI_EXIT_OK &&
        !(logits = malloc(sizeof *logits * (size_t)batch * (size_t)info.classes))) {
        fprintf(stderr, "cuttle predict: out of host memory\n");
        exit_status = CLI_EXIT_FAILED;
    }
    json_writer json = json_writer_start(stdout);
    if (exit_status == CLI_EXIT_OK && o->json) {
        json_object(&json);
        json_field_string(&json, "model", info.name);
        json_key(&json, "predictions");
        json_array(&json);
    }
    for (int64_t start = 0; exit_status == CLI_EXIT_OK && start < in.n; start += batch) {
        int n = (int)(in.n - start < batch ? in.n - start : batch);
        exit_status = cli_evaluator_logits("predict", ev, in.images + (size_t)start * in.item_floats,
                                           n, logits);
        for (int b = 0; exit_status == CLI_EXIT_OK && b < n; b++)
            print_item(o, &info, &in.items[start + b], logits + (size_t)b * (size_t)info.classes,
                       o->json ? &json : NULL);
    }
    if (exit_status == CLI_EXIT_OK && o->json) {
        json_end(&json);
        json_end(&json);
    }
    free(logits);
    free(in.items);
    free(in.images);
    cli_evaluator_free(ev);
    ct_backend_free(backend);
    run_info_free(&info);
    ct_checkpoint_close(checkpoint);
    return exit_status;
}

int cmd_predict(int argc, char **argv)
{
    predict_options o = {.device = "cpu", .top = DEFAULT_TOP};
    const cli_option options[] = {
        {"--weights", "FILE", CLI_TEXT, &o.weights, 0, 0, NULL,
         "the checkpoint (model.safetensors from cuttle train or cuttle quantize -o) (required "
         "unless --model is an ONNX file)"},
        {"--model", "NAME|FILE", CLI_TEXT, &o.model, 0, 0, NULL,
         "the model (default: the one recorded in the checkpoint); an .onnx file holds its "
         "weights"},
        {"--top", "K", CLI_INT, &o.top, 1, 1000, NULL, "how many classes to show (default 5)"},
        {"--input", "CxHxW", CLI_TEXT, &o.input, 0, 0, NULL,
         "for a plain state_dict: the input's channels x height x width"},
        {"--classes", "K", CLI_INT, &o.classes, 2, 100000, NULL,
         "for a plain state_dict: the number of classes"},
        {"--data-dir", "DIR", CLI_TEXT, &o.data_dir, 0, 0, NULL,
         "where the dataset of DATASET:SPLIT:INDEX inputs is (default: Debian's place)"},
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
        {"--json", NULL, CLI_FLAG, &o.json, 0, 0, NULL,
         "print one JSON object: per input the top classes, probabilities and logits"},
    };
    char **positional = malloc(sizeof *positional * (size_t)(argc > 0 ? argc : 1));
    int n_positional = 0;
    if (!positional) {
        fprintf(stderr, "cuttle predict: out of host memory\n");
        return CLI_EXIT_FAILED;
    }
    cli_parsed parsed = cli_parse_positional(
        "predict", "--weights FILE [options] INPUT...  (INPUT: a PNG/JPEG file, a .npy "
                   "float32 array [N,C,H,W] of normalized images, or DATASET:SPLIT:INDEX[-LAST]; "
                   "--model FILE.onnx instead of --weights runs an ONNX model)",
        argc, argv, options, (int)(sizeof options / sizeof options[0]), positional,
        &n_positional);
    int exit_status = parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (parsed == CLI_PARSED_RUN && n_positional == 0)
        fprintf(stderr, "cuttle predict: no INPUT given: name image files or "
                        "DATASET:SPLIT:INDEX items\n");
    else if (parsed == CLI_PARSED_RUN)
        exit_status = cli_parse_only ? CLI_EXIT_OK : predict(&o, positional, n_positional);
    free(positional);
    return exit_status;
}
