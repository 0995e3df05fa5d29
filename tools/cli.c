/*
 * Shared pieces of the command-line program: options, models, evaluation.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const cli_models[] = {"simplecnn", NULL};
const char *const cli_datasets[] = {"fashion-mnist", "mnist", NULL};

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

cli_parsed cli_parse(const char *command, const char *usage, int n_args, char **args,
                     const cli_option *options, int n_options)
{
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

ct_tensor *cli_build_model(ct_graph *graph, const char *model, ct_tensor *x, int n_classes)
{
    if (strcmp(model, "simplecnn") == 0)
        return ct_model_simplecnn(graph, x, n_classes);
    return NULL;
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
};

void cli_evaluator_free(cli_evaluator *ev)
{
    if (!ev)
        return;
    ct_plan_free(ev->plan);
    ct_graph_free(ev->graph);
    free(ev->images);
    free(ev->scores);
    free(ev->labels);
    free(ev->indices);
    free(ev->copy_buffer);
    free(ev);
}

int cli_evaluator_new(const char *command, const char *model, const ct_dataset *data,
                      int batch, ct_backend *backend, uint64_t seed, cli_evaluator **out)
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
    ev->classes = ct_dataset_classes(data);
    int64_t shape[4] = {batch, ct_dataset_channels(data), ct_dataset_height(data),
                        ct_dataset_width(data)};
    ev->x = ct_input(ev->graph, "x", CT_F32, 4, shape);
    ev->logits = cli_build_model(ev->graph, model, ev->x, ev->classes);
    ct_status status = ct_graph_status(ev->graph);
    if (status == CT_OK) {
        ct_tensor_keep(ev->logits);
        status = ct_plan_new(ev->graph, backend, seed, &ev->plan);
    }
    size_t largest = 0;
    for (int i = 0; i < ct_graph_n_state(ev->graph); i++) {
        size_t bytes = ct_tensor_bytes(ct_graph_state(ev->graph, i));
        largest = bytes > largest ? bytes : largest;
    }
    size_t image_floats = (size_t)(shape[0] * shape[1] * shape[2] * shape[3]);
    ev->images = malloc(sizeof *ev->images * image_floats);
    ev->scores = malloc(sizeof *ev->scores * (size_t)batch * (size_t)ev->classes);
    ev->labels = malloc(sizeof *ev->labels * (size_t)batch);
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

int cli_evaluator_copy_weights(const char *command, cli_evaluator *ev, const ct_graph *graph,
                               ct_plan *plan)
{
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

int cli_evaluate(const char *command, cli_evaluator *ev, const ct_dataset *data, double *loss,
                 double *accuracy)
{
    int64_t n = ct_dataset_size(data), correct = 0;
    double loss_sum = 0;
    for (int64_t start = 0; start < n; start += ev->batch) {
        int valid = (int)(n - start < ev->batch ? n - start : ev->batch);
        for (int b = 0; b < ev->batch; b++)
            ev->indices[b] = b < valid ? start + b : start; /* padding: repeat an item */
        ct_status status = ct_dataset_batch(data, ev->indices, ev->batch, ev->images, ev->labels);
        size_t image_bytes = ct_tensor_bytes(ev->x);
        size_t score_bytes = sizeof *ev->scores * (size_t)ev->batch * (size_t)ev->classes;
        if (status == CT_OK)
            status = ct_plan_write(ev->plan, ev->x, ev->images, image_bytes);
        if (status == CT_OK)
            status = ct_plan_run(ev->plan, CT_EVAL);
        if (status == CT_OK)
            status = ct_plan_read(ev->plan, ev->logits, ev->scores, score_bytes);
        if (status != CT_OK)
            return cli_fail(command);
        for (int b = 0; b < valid; b++) {
            const float *row = ev->scores + (size_t)b * (size_t)ev->classes;
            correct += cli_argmax(row, ev->classes) == ev->labels[b];
            loss_sum += cli_cross_entropy(row, ev->classes, ev->labels[b]);
        }
    }
    *loss = loss_sum / (double)n;
    *accuracy = (double)correct / (double)n;
    return CLI_EXIT_OK;
}
