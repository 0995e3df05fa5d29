/*
 * Shared pieces of the command-line program: options, models, evaluation.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const cli_datasets[] = {"fashion-mnist", "mnist", "cifar10", "cifar100", "folder",
                                    NULL};

/* ---- options ------------------------------------------------------------------ */

static void print_help(const char *command, const char *usage, const cli_option *options,
                       int n_options)
{
    printf("usage: cuttle %s %s\n\noptions:\n", command, usage);
    for (int i = 0; i < n_options; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", options[i].name, options[i].metavar ? " " : "",
                 options[i].metavar ? options[i].metavar : "");
        printf("  %-20s %s\n", left, options[i].help);
    }
    printf("  %-20s %s\n", "--help", "show this help");
}

static bool is_choice(const char *const *choices, const char *text)
{
    for (int c = 0; choices[c]; c++)
        if (strcmp(choices[c], text) == 0)
            return true;
    return false;
}

/* Store `text` in the option's value, or print why it is refused. */
static bool set_value(const char *command, const cli_option *option, const char *text)
{
    char *end = NULL;
    errno = 0;
    switch (option->kind) {
    case CLI_FLAG:
        *(bool *)option->value = true;
        return true;
    case CLI_INT: {
        long number = strtol(text, &end, 10);
        if (end == text || *end || errno || number < option->min || number > option->max) {
            fprintf(stderr, "cuttle %s: %s expects a whole number from %.0f to %.0f, got '%s'\n",
                    command, option->name, option->min, option->max, text);
            return false;
        }
        *(long *)option->value = number;
        return true;
    }
    case CLI_FLOAT: {
        double number = strtod(text, &end);
        if (end == text || *end || errno || !(number >= option->min && number <= option->max)) {
            fprintf(stderr, "cuttle %s: %s expects a number from %g to %g, got '%s'\n", command,
                    option->name, option->min, option->max, text);
            return false;
        }
        *(double *)option->value = number;
        return true;
    }
    case CLI_TEXT:
        if (option->choices && !is_choice(option->choices, text)) {
            fprintf(stderr, "cuttle %s: %s '%s' is not known; choose one of:", command,
                    option->name, text);
            for (int c = 0; option->choices[c]; c++)
                fprintf(stderr, " %s", option->choices[c]);
            fprintf(stderr, "\n");
            return false;
        }
        if (!*text) {
            fprintf(stderr, "cuttle %s: %s needs a non-empty value\n", command, option->name);
            return false;
        }
        *(const char **)option->value = text;
        return true;
    }
    return false;
}

bool cli_parse_only = false;

cli_parsed cli_parse(const char *command, const char *usage, int n_args, char **args,
                     const cli_option *options, int n_options)
{
    return cli_parse_positional(command, usage, n_args, args, options, n_options, NULL, NULL);
}

cli_parsed cli_parse_positional(const char *command, const char *usage, int n_args, char **args,
                                const cli_option *options, int n_options, char **positional,
                                int *n_positional)
{
    if (n_positional)
        *n_positional = 0;
    for (int i = 0; i < n_args; i++) {
        const char *arg = args[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_help(command, usage, options, n_options);
            return CLI_PARSED_HELP;
        }
        const char *equals = strchr(arg, '=');
        size_t name_length = equals ? (size_t)(equals - arg) : strlen(arg);
        const cli_option *option = NULL;
        for (int o = 0; o < n_options && !option; o++)
            if (strlen(options[o].name) == name_length &&
                strncmp(options[o].name, arg, name_length) == 0)
                option = &options[o];
        /* Positional: what is not "--..." nor a short option such as -o. */
        if (positional && !option && strncmp(arg, "--", 2) != 0) {
            positional[(*n_positional)++] = args[i];
            continue;
        }
        if (!option) {
            fprintf(stderr, "cuttle %s: unknown %s '%.*s' (see cuttle %s --help)\n", command,
                    arg[0] == '-' ? "option" : "argument", (int)name_length, arg, command);
            return CLI_PARSED_ERROR;
        }
        const char *text = NULL;
        if (option->kind == CLI_FLAG) {
            if (equals) {
                fprintf(stderr, "cuttle %s: %s takes no value\n", command, option->name);
                return CLI_PARSED_ERROR;
            }
        } else if (equals) {
            text = equals + 1;
        } else if (i + 1 < n_args) {
            text = args[++i];
        } else {
            fprintf(stderr, "cuttle %s: %s needs a value (%s)\n", command, option->name,
                    option->metavar);
            return CLI_PARSED_ERROR;
        }
        if (!set_value(command, option, text))
            return CLI_PARSED_ERROR;
    }
    return CLI_PARSED_RUN;
}

int cli_fail(const char *command)
{
    fprintf(stderr, "cuttle %s: %s\n", command, ct_last_error());
    return CLI_EXIT_FAILED;
}

double cli_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

int cli_model_text(const char *command, const char *model, char **text)
{
    if (ct_model_source(model, text) == CT_OK)
        return CLI_EXIT_OK;
    fprintf(stderr, "cuttle %s: %s\n  built-in models:", command, ct_last_error());
    for (const char *const *name = ct_model_builtin_names(); *name; name++)
        fprintf(stderr, " %s", *name);
    fprintf(stderr, "\n");
    return CLI_EXIT_USAGE;
}

bool cli_parse_input(const char *text, int out[3])
{
    const char *at = text;
    for (int i = 0; i < 3; i++) {
        char *end = NULL;
        long value = strtol(at, &end, 10);
        if (end == at || value < 1 || value > CLI_MAX_SIDE || (i < 2 && *end != 'x') ||
            (i == 2 && *end != '\0'))
            return false;
        out[i] = (int)value;
        at = end + 1;
    }
    return true;
}

static bool ends_with(const char *text, const char *suffix)
{
    size_t len = strlen(text), suffix_len = strlen(suffix);
    return len > suffix_len && strcmp(text + len - suffix_len, suffix) == 0;
}

bool cli_model_is_onnx(const char *model)
{
    return ends_with(model, ".onnx");
}

void cli_model_name(const char *model, char *out, size_t capacity)
{
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    size_t len = strlen(base);
    if (ends_with(base, ".model"))
        len -= strlen(".model");
    else if (ends_with(base, ".onnx"))
        len -= strlen(".onnx");
    snprintf(out, capacity, "%.*s", (int)len, base);
}

ct_tensor *cli_model_build(ct_graph *graph, const char *text, const ct_onnx *onnx, ct_tensor *x,
                           int classes)
{
    return onnx ? ct_onnx_build(graph, onnx, x) : ct_model_build(graph, text, x, classes);
}

static int open_backend(const char *command, const char *device, long threads, bool int8,
                        FILE *log, ct_backend **out)
{
    char name[64];
    bool is_auto = strcmp(device, "auto") == 0;
    if (is_auto && int8) {
        snprintf(name, sizeof name, threads > 0 ? "cpu:%ld" : "cpu", threads);
        if (ct_backend_new(name, out) != CT_OK)
            return cli_fail(command);
        fprintf(log, "device auto: %s (an int8 model: its int8 kernels run on the CPU)\n",
                ct_backend_name(*out));
        return CLI_EXIT_OK;
    }
    if (is_auto) {
        if (ct_backend_new("cuda", out) == CT_OK) {
            fprintf(log, "device auto: %s\n", ct_backend_name(*out));
            return CLI_EXIT_OK;
        }
        char reason[256];
        snprintf(reason, sizeof reason, "%s", ct_last_error());
        snprintf(name, sizeof name, threads > 0 ? "cpu:%ld" : "cpu", threads);
        if (ct_backend_new(name, out) != CT_OK)
            return cli_fail(command);
        fprintf(log, "device auto: %s (no GPU: %s)\n", ct_backend_name(*out), reason);
        return CLI_EXIT_OK;
    }
    if (strcmp(device, "cpu") == 0 && threads > 0)
        snprintf(name, sizeof name, "cpu:%ld", threads);
    else
        snprintf(name, sizeof name, "%s", device);
    if (ct_backend_new(name, out) != CT_OK)
        return cli_fail(command);
    return CLI_EXIT_OK;
}

const char *const cli_on_off[] = {"on", "off", NULL};

const char *const cli_precisions[] = {"fp32", "tf32", "bf16", "fp16", NULL};

ct_precision cli_precision(const char *value)
{
    ct_precision precision = CT_PRECISION_FP32;
    if (value && ct_precision_parse(value, &precision) != CT_OK)
        return CT_PRECISION_FP32; /* the option table checked it against cli_precisions */
    return precision;
}

bool cli_on(const char *value)
{
    return !value || strcmp(value, "off") != 0;
}

int cli_backend(const char *command, const cli_device *device, FILE *log, ct_backend **out)
{
    int exit_status = open_backend(command, device->device, device->threads, device->int8, log,
                                   out);
    if (exit_status == CLI_EXIT_OK) {
        ct_backend_set_strict(*out, device->strict);
        ct_backend_set_cuda_graph(*out, cli_on(device->cuda_graph));
        ct_status status = device->kernels ? ct_backend_set_kernels(*out, device->kernels) : CT_OK;
        if (status != CT_OK) {
            exit_status = cli_fail(command);
            exit_status = status == CT_ERR_ARG ? CLI_EXIT_USAGE : exit_status;
            ct_backend_free(*out);
            *out = NULL;
        }
    }
    return exit_status;
}

int cli_load_dataset(const char *command, const char *name, const char *dir, const char *split,
                     ct_dataset **out)
{
    if (ct_dataset_load(name, dir, split, out) != CT_OK)
        return cli_fail(command);
    return CLI_EXIT_OK;
}

/* ---- evaluation ------------------------------------------------------------------ */

struct cli_evaluator {
    ct_graph *graph;
    ct_plan *plan;
    ct_tensor *x, *logits;
    int batch, classes;
    float *images, *scores;
    int64_t *labels, *indices;
    void *copy_buffer; /* big enough for the largest state tensor */
    ct_quantized *quantized; /* after cli_evaluator_quantize: its layers and weights */
};

void cli_evaluator_free(cli_evaluator *ev)
{
    if (!ev)
        return;
    if (ev->quantized) { /* the plan and graph are its: freed before the weights they read */
        ct_quantized_free(ev->quantized);
    } else {
        ct_plan_free(ev->plan);
        ct_graph_free(ev->graph);
    }
    free(ev->quantized);
    free(ev->images);
    free(ev->scores);
    free(ev->labels);
    free(ev->indices);
    free(ev->copy_buffer);
    free(ev);
}

/* The seed fills weights that are overwritten before use. */
#define EVALUATOR_SEED 1

int cli_evaluator_new(const char *command, const char *model_text, const ct_onnx *onnx,
                      const int input[3], int classes, int batch, ct_precision precision,
                      ct_backend *backend, cli_evaluator **out)
{
    *out = NULL;
    cli_evaluator *ev = calloc(1, sizeof *ev);
    if (!ev) {
        fprintf(stderr, "cuttle %s: out of host memory\n", command);
        return CLI_EXIT_FAILED;
    }
    if (!(ev->graph = ct_graph_new())) {
        free(ev);
        return cli_fail(command);
    }
    ev->batch = batch;
    ev->classes = classes;
    int64_t shape[4] = {batch, input[0], input[1], input[2]};
    ev->x = ct_input(ev->graph, "x", CT_F32, 4, shape);
    ct_graph_set_precision(ev->graph, precision);
    ev->logits = cli_model_build(ev->graph, model_text, onnx, ev->x, classes);
    ct_status status = ct_graph_status(ev->graph);
    if (status == CT_OK) {
        ct_tensor_keep(ev->logits);
        status = ct_plan_new(ev->graph, backend, EVALUATOR_SEED, &ev->plan);
    }
    if (status == CT_OK && onnx)
        status = ct_plan_load_onnx(ev->plan, onnx);
    size_t largest = 0;
    for (int i = 0; i < ct_graph_n_state(ev->graph); i++) {
        size_t bytes = ct_tensor_bytes(ct_graph_state(ev->graph, i));
        largest = bytes > largest ? bytes : largest;
    }
    size_t image_floats = (size_t)(shape[0] * shape[1] * shape[2] * shape[3]);
    ev->images = malloc(sizeof *ev->images * image_floats);
    ev->scores = malloc(sizeof *ev->scores * (size_t)batch * (size_t)ev->classes);
    ev->labels = malloc(sizeof *ev->labels * 2 * (size_t)batch); /* two batches' */
    ev->indices = malloc(sizeof *ev->indices * (size_t)batch);
    ev->copy_buffer = malloc(largest ? largest : 1);
    int exit_status = status == CT_OK ? CLI_EXIT_OK : cli_fail(command);
    if (exit_status == CLI_EXIT_OK &&
        (!ev->images || !ev->scores || !ev->labels || !ev->indices || !ev->copy_buffer)) {
        fprintf(stderr, "cuttle %s: out of host memory for the evaluation batch\n", command);
        exit_status = CLI_EXIT_FAILED;
    }
    if (exit_status != CLI_EXIT_OK) {
        cli_evaluator_free(ev);
        return exit_status;
    }
    *out = ev;
    return CLI_EXIT_OK;
}

ct_plan *cli_evaluator_plan(cli_evaluator *ev)
{
    return ev->plan;
}

int cli_optimize(const char *command, ct_graph **graph, ct_plan **plan, ct_tensor **x,
                 ct_tensor **y, ct_optimize_report *report)
{
    ct_optimized optimized;
    if (ct_plan_optimize(*plan, *x, *y, &optimized) != CT_OK)
        return cli_fail(command);
    ct_plan_free(*plan);
    ct_graph_free(*graph);
    *graph = optimized.graph;
    *plan = optimized.plan;
    *x = optimized.x;
    *y = optimized.y;
    if (report)
        *report = optimized.report;
    return CLI_EXIT_OK;
}

int cli_evaluator_optimize(const char *command, cli_evaluator *ev)
{
    return cli_optimize(command, &ev->graph, &ev->plan, &ev->x, &ev->logits, NULL);
}

/* The evaluator's model becomes q's int8 graph and plan (q owns them). */
static void take_quantized(cli_evaluator *ev, ct_quantized *q)
{
    ct_plan_free(ev->plan);
    ct_graph_free(ev->graph);
    ev->graph = q->graph;
    ev->plan = q->plan;
    ev->x = q->x;
    ev->logits = q->y;
    ev->quantized = q;
}

const ct_quantized *cli_evaluator_quantize(const char *command, cli_evaluator *ev,
                                           const ct_quantize_args *args,
                                           const float *const *batches, int n_batches)
{
    ct_quantized *q = calloc(1, sizeof *q);
    if (!q) {
        fprintf(stderr, "cuttle %s: out of host memory\n", command);
        return NULL;
    }
    if (ct_plan_quantize(ev->plan, ev->x, ev->logits, args, batches, n_batches, q) != CT_OK) {
        free(q);
        cli_fail(command);
        return NULL;
    }
    take_quantized(ev, q);
    return q;
}

int cli_evaluator_load(const char *command, cli_evaluator *ev, const ct_checkpoint *checkpoint,
                       bool optimize)
{
    if (!ct_checkpoint_is_int8(checkpoint)) {
        if (ct_plan_load_checkpoint(ev->plan, checkpoint, CT_SAVE_MODEL) != CT_OK)
            return cli_fail(command);
        return optimize ? cli_evaluator_optimize(command, ev) : CLI_EXIT_OK;
    }
    if (!optimize) {
        fprintf(stderr, "cuttle %s: --no-optimize: an int8 model is built from the optimized "
                        "graph (its batchnorms are folded into the int8 weights); leave the "
                        "option out\n", command);
        return CLI_EXIT_USAGE;
    }
    if (ct_graph_precision(ev->graph) != CT_PRECISION_FP32) {
        fprintf(stderr, "cuttle %s: --precision %s: an int8 model runs its int8 layers on u8 "
                        "and int8 values and the others in fp32; leave --precision out\n",
                command, ct_precision_name(ct_graph_precision(ev->graph)));
        return CLI_EXIT_USAGE;
    }
    ct_quantized *q = calloc(1, sizeof *q);
    if (!q) {
        fprintf(stderr, "cuttle %s: out of host memory\n", command);
        return CLI_EXIT_FAILED;
    }
    if (ct_plan_load_quantized(ev->plan, ev->x, ev->logits, checkpoint, q) != CT_OK) {
        free(q);
        return cli_fail(command);
    }
    take_quantized(ev, q);
    return CLI_EXIT_OK;
}

const ct_quantized *cli_evaluator_quantized(const cli_evaluator *ev)
{
    return ev->quantized;
}

int cli_evaluator_copy_weights(const char *command, cli_evaluator *ev, ct_plan *plan)
{
    const ct_graph *graph = ct_plan_graph(plan);
    for (int i = 0; i < ct_graph_n_state(ev->graph); i++) {
        ct_tensor *dst = ct_graph_state(ev->graph, i);
        const ct_tensor *src = ct_graph_find(graph, ct_tensor_name(dst));
        size_t bytes = ct_tensor_bytes(dst);
        if (!src || ct_tensor_bytes(src) != bytes) {
            fprintf(stderr,
                    "cuttle %s: the evaluation model's '%s' has no match in the training "
                    "model (a bug in cuttle: please report it)\n",
                    command, ct_tensor_name(dst));
            return CLI_EXIT_FAILED;
        }
        if (ct_plan_read(plan, src, ev->copy_buffer, bytes) != CT_OK ||
            ct_plan_write(ev->plan, dst, ev->copy_buffer, bytes) != CT_OK)
            return cli_fail(command);
    }
    return CLI_EXIT_OK;
}

int cli_evaluator_logits(const char *command, cli_evaluator *ev, const float *images, int n,
                         float *logits)
{
    size_t item = (size_t)(ct_tensor_numel(ev->x) / ev->batch);
    /* padding: repeat the first image */
    for (int b = 0; b < ev->batch; b++)
        memcpy(ev->images + (size_t)b * item, images + (size_t)(b < n ? b : 0) * item,
               sizeof *images * item);
    int64_t scores = (int64_t)ev->batch * ev->classes;
    if (ct_plan_write(ev->plan, ev->x, ev->images, ct_tensor_bytes(ev->x)) != CT_OK ||
        ct_plan_run(ev->plan, CT_EVAL) != CT_OK ||
        ct_plan_read_f32(ev->plan, ev->logits, ev->scores, scores) != CT_OK)
        return cli_fail(command);
    memcpy(logits, ev->scores, sizeof *logits * (size_t)n * (size_t)ev->classes);
    return CLI_EXIT_OK;
}

int cli_argmax(const float *row, int classes)
{
    int best = 0;
    for (int c = 1; c < classes; c++)
        if (row[c] > row[best])
            best = c;
    return best;
}

/* -log softmax(row)[label], computed stably. */
double cli_cross_entropy(const float *row, int classes, int64_t label)
{
    double largest = row[0];
    for (int c = 1; c < classes; c++)
        largest = row[c] > largest ? row[c] : largest;
    double sum = 0;
    for (int c = 0; c < classes; c++)
        sum += exp((double)row[c] - largest);
    return largest + log(sum) - (double)row[label];
}

void cli_softmax(const float *row, int classes, double *probabilities)
{
    double largest = row[0], sum = 0;
    for (int c = 1; c < classes; c++)
        largest = row[c] > largest ? row[c] : largest;
    for (int c = 0; c < classes; c++)
        sum += probabilities[c] = exp((double)row[c] - largest);
    for (int c = 0; c < classes; c++)
        probabilities[c] /= sum;
}

/* Batch j of the shard (rows past its end repeat its first item) into
 * ev->images and labels, and staged for a later run. */
static ct_status prepare_batch(cli_evaluator *ev, const ct_dataset *data, int shard, int n_shards,
                               int64_t n_mine, int64_t j, int64_t *labels)
{
    int64_t start = j * ev->batch;
    int valid = (int)(n_mine - start < ev->batch ? n_mine - start : ev->batch);
    for (int b = 0; b < ev->batch; b++) /* padding: repeat an item */
        ev->indices[b] = shard + (start + (b < valid ? b : 0)) * n_shards;
    ct_status status = ct_dataset_batch(data, ev->indices, ev->batch, ev->images, labels);
    return status == CT_OK ? ct_plan_stage(ev->plan, ev->x, ev->images, ct_tensor_bytes(ev->x))
                           : status;
}

/* Batch j + 1 is staged before batch j runs: on a GPU its copy runs beside
 * batch j (ct_plan_stage); ev->labels holds both batches' labels. */
int cli_evaluate_sums(const char *command, cli_evaluator *ev, const ct_dataset *data, int shard,
                      int n_shards, cli_eval_sums *sums, int64_t *confusion)
{
    int64_t n = ct_dataset_size(data);
    int64_t n_mine = n > shard ? (n - shard + n_shards - 1) / n_shards : 0;
    int64_t n_batches = (n_mine + ev->batch - 1) / ev->batch;
    *sums = (cli_eval_sums){0};
    if (n_batches > 0 && prepare_batch(ev, data, shard, n_shards, n_mine, 0, ev->labels) != CT_OK)
        return cli_fail(command);
    for (int64_t j = 0; j < n_batches; j++) {
        int64_t *labels = ev->labels + (j % 2) * ev->batch;
        int valid = (int)(n_mine - j * ev->batch < ev->batch ? n_mine - j * ev->batch : ev->batch);
        ct_status status = CT_OK;
        if (j + 1 < n_batches)
            status = prepare_batch(ev, data, shard, n_shards, n_mine, j + 1,
                                   ev->labels + ((j + 1) % 2) * ev->batch);
        if (status == CT_OK)
            status = ct_plan_run(ev->plan, CT_EVAL);
        if (status == CT_OK)
            status = ct_plan_read_f32(ev->plan, ev->logits, ev->scores,
                                      (int64_t)ev->batch * ev->classes);
        if (status != CT_OK)
            return cli_fail(command);
        for (int b = 0; b < valid; b++) {
            const float *row = ev->scores + (size_t)b * (size_t)ev->classes;
            int predicted = cli_argmax(row, ev->classes);
            sums->correct += predicted == labels[b];
            sums->loss += cli_cross_entropy(row, ev->classes, labels[b]);
            if (confusion)
                confusion[labels[b] * ev->classes + predicted]++;
        }
    }
    sums->count = n_mine;
    return CLI_EXIT_OK;
}

int cli_evaluate(const char *command, cli_evaluator *ev, const ct_dataset *data, double *loss,
                 double *accuracy, int64_t *confusion)
{
    cli_eval_sums sums;
    CLI_TRY(cli_evaluate_sums(command, ev, data, 0, 1, &sums, confusion));
    *loss = sums.loss / (double)sums.count;
    *accuracy = (double)sums.correct / (double)sums.count;
    return CLI_EXIT_OK;
}
