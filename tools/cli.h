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

/* Parse "--name value", "--name=value" and flags from args[0..n_args)
 * into the options' values, which hold their defaults beforehand. */
cli_parsed cli_parse(const char *command, const char *usage, int n_args, char **args,
                     const cli_option *options, int n_options);

/* "cuttle <command>: <ct_last_error()>" on stderr; returns CLI_EXIT_FAILED. */
int cli_fail(const char *command);

/* Seconds on a monotonic clock. */
double cli_now(void);

/* The model named on the command line on input x, or NULL (an unknown name
 * is refused by the option table before this). */
ct_tensor *cli_build_model(ct_graph *graph, const char *model, ct_tensor *x, int n_classes);

extern const char *const cli_models[];   /* NULL-terminated */
extern const char *const cli_datasets[]; /* NULL-terminated */

/* Forward passes over a dataset at a fixed batch size in CT_EVAL mode; the
 * last partial batch is padded and the padding ignored. */
typedef struct cli_evaluator cli_evaluator;

/* Each returns an exit status (CLI_EXIT_OK or CLI_EXIT_FAILED, after
 * printing what went wrong, prefixed with "cuttle <command>:"). */
int cli_evaluator_new(const char *command, const char *model, const ct_dataset *data,
                      int batch, ct_backend *backend, uint64_t seed, cli_evaluator **out);
void cli_evaluator_free(cli_evaluator *ev);
/* Copy every parameter and buffer of the evaluator's graph from the tensor
 * of the same name in another plan (the training plan). */
int cli_evaluator_copy_weights(const char *command, cli_evaluator *ev, const ct_graph *graph,
                               ct_plan *plan);
/* Mean cross-entropy and accuracy (0..1) over the whole dataset. */
int cli_evaluate(const char *command, cli_evaluator *ev, const ct_dataset *data, double *loss,
                 double *accuracy);

/* Row-wise helpers on logits [n, classes]. */
int cli_argmax(const float *row, int classes);
double cli_cross_entropy(const float *row, int classes, int64_t label);

int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_profile(int argc, char **argv);

#endif
