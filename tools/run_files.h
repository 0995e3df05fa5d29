/*
 * A training run's directory (--out): its checkpoints and metrics, and
 * reading them back for --resume.
 *
 * Every epoch writes, in this order: a line of metrics.jsonl, then
 * state.safetensors (weights + optimizer state + where the run is), then
 * model.safetensors (weights + what eval/predict need).  Each checkpoint is
 * replaced atomically, and --resume trusts only state.safetensors, so a
 * kill at any moment leaves a run that resumes from its last whole epoch;
 * metrics lines past that epoch are dropped on resume.
 */
#ifndef CUTTLE_TOOLS_RUN_FILES_H
#define CUTTLE_TOOLS_RUN_FILES_H

#include "run_info.h"

#define RUN_MODEL_FILE "model.safetensors"
#define RUN_STATE_FILE "state.safetensors"
#define RUN_METRICS_FILE "metrics.jsonl"

/* The command-line arguments that define a run (without --resume). */
typedef struct run_args {
    char **items;
    int n;
} run_args;

/* Append argv[0..argc), leaving out --resume, --stop-after and --max-steps
 * (with their values), which steer one invocation; an argument that is not
 * UTF-8 is refused (CLI_EXIT_USAGE), since checkpoints keep them as text. */
int run_args_append(run_args *args, int argc, char **argv);
void run_args_free(run_args *args);

/* One epoch's numbers, as metrics.jsonl records them. */
typedef struct epoch_metrics {
    long epoch;
    double train_loss, train_accuracy, test_loss, test_accuracy;
    double seconds, train_seconds, images_per_second, lr;
    bool loss_scaling;     /* fp16: the two below are written too */
    double loss_scale;     /* at the epoch's end (ct_plan_loss_scale) */
    int64_t skipped_steps; /* in the whole run so far */
    bool partial;          /* stopped by --max-steps before its end ("partial": true) */
} epoch_metrics;

/* mkdir -p dir; exit status. */
int run_prepare_dir(const char *command, const char *dir);
/* Append the metrics line, then write both checkpoints, of a run trained
 * by `ranks` processes (mpirun -np). A partial epoch is saved as the one
 * before it with the steps after: --resume continues inside it. */
int run_save_epoch(const char *dir, ct_plan *plan, const run_info *info, const run_args *args,
                   const epoch_metrics *m, int ranks);

/* From DIR/state.safetensors: the saved arguments; the model text; and the
 * weights, optimizer state and step into a plan with the number of whole
 * epochs done in *epochs_done, refusing a run of another number of ranks. */
int run_resume_args(const char *dir, run_args *args);
int run_resume_model_text(const char *dir, char **text);
int run_resume_state(const char *dir, ct_plan *plan, int ranks, long *epochs_done);
/* Keep the metrics lines of epochs <= epochs_done. */
int run_trim_metrics(const char *dir, long epochs_done);

#endif
