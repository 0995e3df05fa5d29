/*
 * Shared pieces of the cuttle command-line program: a table-driven option
 * parser (the same table prints --help, so the help lists every option),
 * dataset loading and model building with messages for the user, and the
 * evaluator that train uses on the test split.
 *
 * Exit statuses: 0 success, 1 the library failed (ct_last_error() is
 * printed), 2 a bad command line (the message names the option).
 */
#ifndef CUTTLE_TOOLS_CLI_H
#define CUTTLE_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cuttle.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAILED = 1, CLI_EXIT_USAGE = 2 };

/* Return from the calling function when an exit status is not CLI_EXIT_OK. */
#define CLI_TRY(expr)                                                          \
    do {                                                                       \
        int cli_try_status_ = (expr);                                          \
        if (cli_try_status_ != CLI_EXIT_OK)                                    \
            return cli_try_status_;                                            \
    } while (0)

typedef enum cli_kind {
    CLI_FLAG,  /* bool: present or not */
    CLI_INT,   /* long, from min to max */
    CLI_FLOAT, /* double, from min to max */
    CLI_TEXT   /* const char *: one of choices, or anything when choices is NULL */
} cli_kind;

typedef struct cli_option {
    const char *name;    /* "--epochs" */
    const char *metavar; /* "N"; NULL for flags */
    cli_kind kind;
    void *value;                 /* bool *, long *, double * or const char ** */
    double min, max;             /* CLI_INT and CLI_FLOAT */
    const char *const *choices;  /* CLI_TEXT: NULL-terminated, or NULL */
    const char *help;            /* one line, with the default */
} cli_option;

/* What cli_parse found. */
typedef enum cli_parsed {
    CLI_PARSED_RUN,   /* go on with the values */
    CLI_PARSED_HELP,  /* --help was printed: exit 0 */
    CLI_PARSED_ERROR  /* a message naming the option was printed: exit 2 */
} cli_parsed;

/* Parse only (the command-line fuzz target, tests/fuzz/fuzz_cli.c): each
 * command returns CLI_EXIT_OK once its options are parsed and checked,
 * before it opens a dataset, a checkpoint or a device.  False otherwise. */
extern bool cli_parse_only;

/* Parse "--name value", "--name=value" and flags from args[0..n_args)
 * into the options' values, which hold their defaults beforehand. */
cli_parsed cli_parse(const char *command, const char *usage, int n_args, char **args,
                     const cli_option *options, int n_options);

/* The same, collecting arguments that do not start with "--" into
 * positional (room for n_args) and their count into *n_positional. */
cli_parsed cli_parse_positional(const char *command, const char *usage, int n_args, char **args,
                                const cli_option *options, int n_options, char **positional,
                                int *n_positional);

/* "cuttle <command>: <ct_last_error()>" on stderr; returns CLI_EXIT_FAILED. */
int cli_fail(const char *command);

/* Seconds on a monotonic clock. */
double cli_now(void);

/* The definition text of --model: a built-in name or a model file; on
 * failure prints why and returns CLI_EXIT_USAGE.  *text is malloc'ed. */
int cli_model_text(const char *command, const char *model, char **text);
/* A short name for a --model value: the built-in name, or the file name
 * without directory and ".model" or ".onnx". */
void cli_model_name(const char *model, char *out, size_t capacity);
/* "CxHxW" (--input) into channels, height, width, each 1 to CLI_MAX_SIDE. */
#define CLI_MAX_SIDE 65536
bool cli_parse_input(const char *text, int out[3]);
/* Whether a --model value names an ONNX file (".onnx"). */
bool cli_model_is_onnx(const char *model);
/* The model on x: from its definition text, or from an ONNX file (then
 * text is NULL and classes is the file's). */
ct_tensor *cli_model_build(ct_graph *graph, const char *text, const ct_onnx *onnx, ct_tensor *x,
                           int classes);

/* The choices of an on/off option: "on", "off", NULL; cli_on: the value
 * is not "off" (NULL, an option not given, is on). */
extern const char *const cli_on_off[];
bool cli_on(const char *value);
#define CLI_KERNELS_HELP                                                                 \
    "native, vendor, auto or one implementation (im2col, winograd, cudnn, ...); "         \
    "default: native on the CPU, auto on CUDA"
#define CLI_CUDA_GRAPH_HELP                                                              \
    "on: record the step once as a CUDA Graph and replay it (one launch per step); off: " \
    "launch node by node (default on; no effect on the CPU)"

/* --precision: its choices (NULL-terminated) and the ct_precision of a
 * value (NULL, the option not given: fp32). */
extern const char *const cli_precisions[];
ct_precision cli_precision(const char *value);
#define CLI_PRECISION_HELP                                                                 \
    "fp32 (default); tf32 (a GPU's TF32 tensor-core math for f32); bf16 or fp16 (16-bit " \
    "activations, f32 weights, statistics and loss; on the CPU a slow rounding reference)"

/* What --device, --threads, --strict-device and --cuda-graph say. */
typedef struct cli_device {
    const char *device;     /* auto, cpu, cpu:N, cuda, cuda:N */
    long threads;           /* > 0: the CPU threads */
    bool strict;            /* ct_backend_set_strict */
    const char *cuda_graph; /* "on" or NULL, or "off": ct_backend_set_cuda_graph */
    bool int8;              /* the model is int8 (CPU kernels only): "auto" takes the CPU */
    const char *kernels;    /* NULL: the backend's default; ct_backend_set_kernels */
} cli_device;

/* The backend for a cli_device.  "auto" takes the GPU when there is one
 * and says in one line on `log` which it took. */
int cli_backend(const char *command, const cli_device *device, FILE *log, ct_backend **out);

extern const char *const cli_datasets[]; /* NULL-terminated */
/* Load a split of a named dataset (fashion-mnist, mnist, cifar10, cifar100,
 * folder) from dir (NULL: the default place). */
int cli_load_dataset(const char *command, const char *name, const char *dir, const char *split,
                     ct_dataset **out);

/* Forward passes over a dataset at a fixed batch size in CT_EVAL mode; the
 * last partial batch is padded and the padding ignored. */
typedef struct cli_evaluator cli_evaluator;

/* Each returns an exit status (CLI_EXIT_OK or CLI_EXIT_FAILED, after
 * printing what went wrong, prefixed with "cuttle <command>:").  The model
 * takes images [batch, channels, height, width]; it is a definition text or
 * an ONNX file, whose weights the evaluator loads. */
int cli_evaluator_new(const char *command, const char *model_text, const ct_onnx *onnx,
                      const int input[3], int classes, int batch, ct_precision precision,
                      ct_backend *backend, cli_evaluator **out);
void cli_evaluator_free(cli_evaluator *ev);
/* The evaluator's plan (to load weights into) and graph.  Borrowed. */
ct_plan *cli_evaluator_plan(cli_evaluator *ev);
/* Replace a plan (and its graph) computing y from x by its optimized form
 * (ct_plan_optimize), freeing the old; *x and *y become the new graph's.
 * report may be NULL. */
int cli_optimize(const char *command, ct_graph **graph, ct_plan **plan, ct_tensor **x,
                 ct_tensor **y, ct_optimize_report *report);
/* Replace the evaluator's plan by its optimized form (ct_plan_optimize:
 * batchnorm folded, dropout removed, a forward-only arena), from the
 * weights it holds now: call it after loading them, and not before
 * cli_evaluator_copy_weights (the folded model has other tensors). */
int cli_evaluator_optimize(const char *command, cli_evaluator *ev);
/* Copy every parameter and buffer of the evaluator's graph from the tensor
 * of the same name in another plan (the training plan). */
/* Replaces the evaluator's model by its INT8 version (ct_plan_quantize,
 * calibrated on the batches, each of the evaluator's batch); the report is
 * borrowed from the evaluator.  NULL (a message printed) on failure. */
const ct_quantized *cli_evaluator_quantize(const char *command, cli_evaluator *ev,
                                           const ct_quantize_args *args,
                                           const float *const *batches, int n_batches);
int cli_evaluator_copy_weights(const char *command, cli_evaluator *ev, ct_plan *plan);
/* Load a checkpoint's model into the evaluator: an fp32 one's weights
 * (then, if optimize, cli_evaluator_optimize), or an int8 model
 * (ct_checkpoint_is_int8: ct_plan_load_quantized replaces the model by its
 * int8 graph; it must be fp32 precision and optimize true, else
 * CLI_EXIT_USAGE with a message). */
int cli_evaluator_load(const char *command, cli_evaluator *ev, const ct_checkpoint *checkpoint,
                       bool optimize);
/* The int8 model after cli_evaluator_quantize or an int8 cli_evaluator_load,
 * else NULL.  Borrowed. */
const ct_quantized *cli_evaluator_quantized(const cli_evaluator *ev);
/* Mean cross-entropy and accuracy (0..1) over the whole dataset; with
 * `confusion` non-NULL, also counts [true][predicted] (classes x classes). */
int cli_evaluate(const char *command, cli_evaluator *ev, const ct_dataset *data, double *loss,
                 double *accuracy, int64_t *confusion);
/* The sums behind them over the items shard, shard + n_shards, ... (a
 * rank's share of a test set under mpirun; 0 and 1 for all). */
typedef struct cli_eval_sums {
    double loss; /* of the items' cross-entropies */
    int64_t correct, count;
} cli_eval_sums;
int cli_evaluate_sums(const char *command, cli_evaluator *ev, const ct_dataset *data, int shard,
                      int n_shards, cli_eval_sums *sums, int64_t *confusion);
/* Logits [n, classes] of n <= batch images [n, C, H, W]. */
int cli_evaluator_logits(const char *command, cli_evaluator *ev, const float *images, int n,
                         float *logits);

/* Row-wise helpers on logits [n, classes]. */
int cli_argmax(const float *row, int classes);
double cli_cross_entropy(const float *row, int classes, int64_t label);
/* Softmax of one row into probabilities. */
void cli_softmax(const float *row, int classes, double *probabilities);

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_optimize(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_prune(int argc, char **argv);

#endif
