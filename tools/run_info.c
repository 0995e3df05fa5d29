/*
 * Checkpoint metadata: writing it from a run and reading it back (run_info.h).
 */
#include "run_info.h"

#include <stdlib.h>
#include <string.h>

#include "lib_internal.h"

#define META_JSON_DEPTH 4

void run_info_free(run_info *info)
{
    if (!info)
        return;
    for (int c = 0; info->class_names && c < info->classes; c++)
        free(info->class_names[c]);
    free(info->class_names);
    free(info->name);
    free(info->text);
    free(info->dataset);
    ct_onnx_free(info->onnx);
    memset(info, 0, sizeof *info);
}

static int out_of_memory(const char *command)
{
    fprintf(stderr, "cuttle %s: out of host memory\n", command);
    return CLI_EXIT_FAILED;
}

int run_info_from_dataset(const char *command, const char *model_name, const char *model_text,
                          const char *dataset_name, const ct_dataset *data, run_info *info)
{
    memset(info, 0, sizeof *info);
    info->input[0] = ct_dataset_channels(data);
    info->input[1] = ct_dataset_height(data);
    info->input[2] = ct_dataset_width(data);
    info->classes = ct_dataset_classes(data);
    if (info->input[0] > RUN_MAX_CHANNELS) {
        fprintf(stderr, "cuttle %s: images with %d channels are not supported (at most %d)\n",
                command, info->input[0], RUN_MAX_CHANNELS);
        return CLI_EXIT_FAILED;
    }
    for (int c = 0; c < info->input[0]; c++) {
        info->mean[c] = ct_dataset_mean(data, c);
        info->std[c] = ct_dataset_std(data, c);
    }
    info->name = strdup(model_name);
    info->text = strdup(model_text);
    info->dataset = strdup(dataset_name);
    info->class_names = calloc((size_t)info->classes, sizeof *info->class_names);
    if (!info->name || !info->text || !info->dataset || !info->class_names)
        return out_of_memory(command);
    for (int c = 0; c < info->classes; c++)
        if (!(info->class_names[c] = strdup(ct_dataset_class_name(data, c))))
            return out_of_memory(command);
    return CLI_EXIT_OK;
}

/* ---- writing --------------------------------------------------------------------- */

bool run_meta_add(run_meta *meta, const char *key, const char *value)
{
    if (!value || meta->n == RUN_META_CAPACITY)
        return false;
    char *copy = strdup(value);
    if (!copy)
        return false;
    meta->owned[meta->n] = copy;
    meta->items[meta->n] = (ct_meta){key, copy};
    meta->n++;
    return true;
}

void run_meta_free(run_meta *meta)
{
    for (int i = 0; i < meta->n; i++)
        free(meta->owned[i]);
    meta->n = 0;
}

/* "[a, b, c]" of floats, with enough digits to read back the same float. */
static char *float_array(const float *values, int n)
{
    char *out = malloc((size_t)n * 20 + 3);
    if (!out)
        return NULL;
    size_t len = 0;
    out[len++] = '[';
    for (int i = 0; i < n; i++)
        len += (size_t)sprintf(out + len, "%s%.9g", i ? ", " : "", (double)values[i]);
    strcpy(out + len, "]");
    return out;
}

static char *string_array(char *const *values, int n)
{
    size_t cap = 3, len = 0;
    for (int i = 0; i < n; i++)
        cap += ct_json_escape(NULL, 0, values[i], strlen(values[i])) + 2;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    out[len++] = '[';
    for (int i = 0; i < n; i++) {
        if (i)
            len += (size_t)sprintf(out + len, ", ");
        len += ct_json_escape(out + len, cap - len, values[i], strlen(values[i]));
    }
    strcpy(out + len, "]");
    return out;
}

bool run_meta_add_info(run_meta *meta, const run_info *info)
{
    char input[64];
    snprintf(input, sizeof input, "[%d, %d, %d]", info->input[0], info->input[1],
             info->input[2]);
    char *mean = float_array(info->mean, info->input[0]);
    char *std = float_array(info->std, info->input[0]);
    char *classes = string_array(info->class_names, info->classes);
    bool ok = mean && std && classes && run_meta_add(meta, "cuttle_version", ct_version()) &&
              run_meta_add(meta, "model_name", info->name) &&
              run_meta_add(meta, "model", info->text) && run_meta_add(meta, "input", input) &&
              run_meta_add(meta, "mean", mean) && run_meta_add(meta, "std", std) &&
              run_meta_add(meta, "classes", classes) &&
              (!info->dataset || run_meta_add(meta, "dataset", info->dataset));
    free(mean);
    free(std);
    free(classes);
    return ok;
}

/* ---- reading --------------------------------------------------------------------- */

/* Where metadata is read from: a checkpoint or an ONNX file. */
typedef struct meta_source {
    const char *(*get)(const void *from, const char *key);
    const void *from;
} meta_source;

static const char *checkpoint_meta(const void *from, const char *key)
{
    return ct_checkpoint_meta(from, key);
}

static const char *onnx_meta(const void *from, const char *key)
{
    return ct_onnx_meta(from, key);
}

static int bad_meta(const char *command, const char *path, const char *key, const char *why)
{
    fprintf(stderr,
            "cuttle %s: %s: metadata '%s' %s; was it written by cuttle train? (a plain "
            "state_dict needs --model and the input shape from its run)\n",
            command, path, key, why);
    return CLI_EXIT_FAILED;
}

/* Parse a metadata value that is a JSON array of `n` numbers (n < 0: any
 * length, returned in *count). */
static int read_numbers(const char *command, const char *path, meta_source source,
                        const char *key, double *out, int capacity, int *count)
{
    const char *text = source.get(source.from, key);
    if (!text)
        return bad_meta(command, path, key, "is missing");
    ct_json_doc doc = {0};
    ct_json_error error;
    if (ct_json_parse(text, strlen(text), META_JSON_DEPTH, &doc, &error) != CT_OK)
        return bad_meta(command, path, key, "is not valid JSON");
    const ct_json_value *root = ct_json_root(&doc);
    int exit_status = CLI_EXIT_OK;
    if (root->type != CT_JSON_ARRAY || root->count > capacity) {
        exit_status = bad_meta(command, path, key, "is not a short array of numbers");
    } else {
        const ct_json_value *v = ct_json_first(root);
        for (int i = 0; i < root->count && exit_status == CLI_EXIT_OK; i++, v = ct_json_next(v)) {
            if (v->type != CT_JSON_NUMBER)
                exit_status = bad_meta(command, path, key, "holds something not a number");
            else
                out[i] = v->number;
        }
        *count = root->count;
    }
    ct_json_free(&doc);
    return exit_status;
}

static int read_class_names(const char *command, const char *path, meta_source source,
                            run_info *info)
{
    const char *text = source.get(source.from, "classes");
    if (!text)
        return bad_meta(command, path, "classes", "is missing");
    ct_json_doc doc = {0};
    ct_json_error error;
    if (ct_json_parse(text, strlen(text), META_JSON_DEPTH, &doc, &error) != CT_OK)
        return bad_meta(command, path, "classes", "is not valid JSON");
    const ct_json_value *root = ct_json_root(&doc);
    int exit_status = CLI_EXIT_OK;
    if (root->type != CT_JSON_ARRAY || root->count < 1) {
        exit_status = bad_meta(command, path, "classes", "is not a list of names");
    } else {
        info->classes = root->count;
        info->class_names = calloc((size_t)root->count, sizeof *info->class_names);
        if (!info->class_names)
            exit_status = out_of_memory(command);
        const ct_json_value *v = ct_json_first(root);
        for (int i = 0; i < root->count && exit_status == CLI_EXIT_OK; i++, v = ct_json_next(v)) {
            if (v->type != CT_JSON_STRING)
                exit_status = bad_meta(command, path, "classes", "holds something not a name");
            else if (!(info->class_names[i] = strdup(v->string)))
                exit_status = out_of_memory(command);
        }
    }
    ct_json_free(&doc);
    return exit_status;
}

static int read_text(const char *command, const char *path, meta_source source,
                     const char *key, char **out)
{
    const char *text = source.get(source.from, key);
    if (!text)
        return bad_meta(command, path, key, "is missing");
    if (!(*out = strdup(text)))
        return out_of_memory(command);
    return CLI_EXIT_OK;
}

/* The model's metadata; its definition text too unless it is an ONNX file. */
static int read_info(const char *command, meta_source source, const char *path, bool text,
                     run_info *info)
{
    double input[3], mean[RUN_MAX_CHANNELS], std[RUN_MAX_CHANNELS];
    int n_input = 0, n_mean = 0, n_std = 0;
    if (text)
        CLI_TRY(read_text(command, path, source, "model", &info->text));
    CLI_TRY(read_text(command, path, source, "model_name", &info->name));
    if (source.get(source.from, "dataset")) /* none for a model that was not trained here */
        CLI_TRY(read_text(command, path, source, "dataset", &info->dataset));
    CLI_TRY(read_numbers(command, path, source, "input", input, 3, &n_input));
    CLI_TRY(read_numbers(command, path, source, "mean", mean, RUN_MAX_CHANNELS, &n_mean));
    CLI_TRY(read_numbers(command, path, source, "std", std, RUN_MAX_CHANNELS, &n_std));
    CLI_TRY(read_class_names(command, path, source, info));
    if (n_input != 3)
        return bad_meta(command, path, "input", "is not [channels, height, width]");
    for (int d = 0; d < 3; d++) {
        if (!(input[d] >= 1 && input[d] <= 65536))
            return bad_meta(command, path, "input", "has a size out of range");
        info->input[d] = (int)input[d];
    }
    if (n_mean != info->input[0] || n_std != info->input[0])
        return bad_meta(command, path, "mean", "does not give one value per channel");
    for (int c = 0; c < info->input[0]; c++) {
        if (!(std[c] > 0))
            return bad_meta(command, path, "std", "holds a value that is not positive");
        info->mean[c] = (float)mean[c];
        info->std[c] = (float)std[c];
    }
    return CLI_EXIT_OK;
}

int run_info_read(const char *command, const ct_checkpoint *checkpoint, const char *path,
                  run_info *info)
{
    memset(info, 0, sizeof *info);
    return read_info(command, (meta_source){checkpoint_meta, checkpoint}, path, true, info);
}

int run_info_plain(const char *command, const char *name, const char *text, const int input[3],
                   int classes, run_info *info)
{
    if (input[0] > RUN_MAX_CHANNELS) {
        fprintf(stderr, "cuttle %s: %d channels; at most %d\n", command, input[0],
                RUN_MAX_CHANNELS);
        return CLI_EXIT_USAGE;
    }
    memcpy(info->input, input, sizeof info->input);
    info->classes = classes;
    if (text && !(info->text = strdup(text)))
        return out_of_memory(command);
    info->name = strdup(name);
    info->class_names = calloc((size_t)info->classes, sizeof *info->class_names);
    if (!info->name || !info->class_names)
        return out_of_memory(command);
    for (int c = 0; c < info->input[0]; c++) {
        info->mean[c] = 0.0f;
        info->std[c] = 1.0f;
    }
    for (int c = 0; c < info->classes; c++) {
        char label[24];
        snprintf(label, sizeof label, "%d", c);
        if (!(info->class_names[c] = strdup(label)))
            return out_of_memory(command);
    }
    return CLI_EXIT_OK;
}

/* The input and classes an ONNX file's own shapes give, against what its
 * metadata or a dataset says. */
static int check_onnx_shapes(const char *command, const char *path, const char *from,
                             const run_info *info)
{
    int64_t shape[4];
    ct_onnx_input_shape(info->onnx, shape);
    if (shape[1] != info->input[0] || shape[2] != info->input[1] || shape[3] != info->input[2] ||
        ct_onnx_classes(info->onnx) != info->classes) {
        fprintf(stderr, "cuttle %s: %s takes %lldx%lldx%lld images into %lld classes; %s says "
                "%dx%dx%d and %d\n", command, path, (long long)shape[1], (long long)shape[2],
                (long long)shape[3], (long long)ct_onnx_classes(info->onnx), from,
                info->input[0], info->input[1], info->input[2], info->classes);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* An ONNX model: its weights are inside; its normalization and class names
 * come from its metadata (cuttle export writes them), or from --data, or
 * are none and numbers. */
static int open_onnx(const char *command, const char *path, const char *data,
                     const char *data_dir, run_info *info)
{
    ct_onnx *onnx = NULL;
    if (ct_onnx_load(path, &onnx) != CT_OK)
        return cli_fail(command);
    char name[128];
    cli_model_name(path, name, sizeof name);
    int exit_status = CLI_EXIT_OK;
    if (data) {
        ct_dataset *dataset = NULL;
        exit_status = cli_load_dataset(command, data, data_dir, "train", &dataset);
        if (exit_status == CLI_EXIT_OK)
            exit_status = run_info_from_dataset(command, name, "", data, dataset, info);
        ct_dataset_free(dataset);
    } else if (ct_onnx_meta(onnx, "input")) {
        exit_status = read_info(command, (meta_source){onnx_meta, onnx}, path, false, info);
    } else {
        int64_t shape[4];
        ct_onnx_input_shape(onnx, shape);
        int input[3] = {(int)shape[1], (int)shape[2], (int)shape[3]};
        exit_status = run_info_plain(command, name, NULL, input, (int)ct_onnx_classes(onnx), info);
    }
    info->onnx = onnx;
    if (exit_status == CLI_EXIT_OK)
        exit_status = check_onnx_shapes(command, path, data ? data : "its metadata", info);
    return exit_status;
}

/* A plain state_dict: --model with --data, or with --input and --classes. */
static int open_plain(const char *command, const run_source *src, run_info *info)
{
    int input[3];
    if (!src->model || (!src->data && (!src->input || !src->classes))) {
        fprintf(stderr, "cuttle %s: %s has no cuttle metadata (a plain state_dict?); give --model "
                "with --data, or with --input and --classes, so the model, its input and its "
                "classes are known\n", command, src->weights);
        return CLI_EXIT_USAGE;
    }
    if (!src->data && !cli_parse_input(src->input, input)) {
        fprintf(stderr, "cuttle %s: --input expects CxHxW, such as 3x32x32, got '%s'\n", command,
                src->input);
        return CLI_EXIT_USAGE;
    }
    char *text = NULL, name[128];
    ct_dataset *dataset = NULL;
    CLI_TRY(cli_model_text(command, src->model, &text));
    cli_model_name(src->model, name, sizeof name);
    int exit_status = CLI_EXIT_OK;
    if (src->data) {
        exit_status = cli_load_dataset(command, src->data, src->data_dir, "train", &dataset);
        if (exit_status == CLI_EXIT_OK)
            exit_status = run_info_from_dataset(command, name, text, src->data, dataset, info);
    } else {
        exit_status = run_info_plain(command, name, text, input, (int)src->classes, info);
    }
    ct_dataset_free(dataset);
    free(text);
    return exit_status;
}

int run_info_open(const char *command, const run_source *src, ct_checkpoint **checkpoint,
                  run_info *info)
{
    memset(info, 0, sizeof *info);
    *checkpoint = NULL;
    if (src->model && cli_model_is_onnx(src->model)) {
        if (src->weights) {
            fprintf(stderr, "cuttle %s: %s holds its weights; --weights is for model definitions "
                    "(leave it out)\n", command, src->model);
            return CLI_EXIT_USAGE;
        }
        return open_onnx(command, src->model, src->data, src->data_dir, info);
    }
    if (!src->weights) {
        fprintf(stderr, "cuttle %s: --weights FILE is required (or an ONNX file as --model)\n",
                command);
        return CLI_EXIT_USAGE;
    }
    if (ct_checkpoint_open(src->weights, checkpoint) != CT_OK)
        return cli_fail(command);
    if (!ct_checkpoint_meta(*checkpoint, "model"))
        return open_plain(command, src, info);
    CLI_TRY(run_info_read(command, *checkpoint, src->weights, info));
    if (!src->model)
        return CLI_EXIT_OK;
    char *text = NULL;
    CLI_TRY(cli_model_text(command, src->model, &text));
    free(info->text);
    info->text = text;
    return CLI_EXIT_OK;
}
