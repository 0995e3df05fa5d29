/*
 * The training loop that cuttle train runs and cuttle prune fine-tunes
 * with: a model's training graph (forward, backward, optimizer) and plan,
 * the loader that feeds it, and an epoch of steps on a learning-rate
 * schedule, with an optional hook after every step.
 */
#ifndef CUTTLE_TOOLS_TRAINER_H
#define CUTTLE_TOOLS_TRAINER_H

#include "cli.h"
#include "run_info.h"
#include "train_options.h"

/* Called after every training step with the plan (NULL: none); an exit
 * status other than CLI_EXIT_OK ends the epoch with it.  Pruning puts its
 * zeros back this way. */
typedef int (*trainer_after_step)(void *user, ct_plan *plan);

/* The training graph and plan, the loader, and host memory for one batch. */
typedef struct trainer {
    const char *command; /* "train", "prune": for messages */
    ct_graph *graph;
    ct_plan *plan;
    ct_loader *loader;
    ct_tensor *x, *labels, *logits, *loss;
    int batch, classes;
    float *scores;
    bool loss_scaling; /* fp16: an overflowing step is skipped, and training goes on */
    trainer_after_step after_step;
    void *user;
} trainer;

/* The model of info->text with opts' optimizer, precision, seed, batch and
 * augmentation, on `data` (the shard `rank` of `ranks`: 0 and 1 for all). */
int trainer_init(trainer *t, const char *command, const train_options *opts,
                 const run_info *info, const ct_dataset *data, ct_backend *backend, int rank,
                 int ranks);
void trainer_free(trainer *t);

/* Running sums over an epoch. */
typedef struct epoch_sums {
    double loss;
    int64_t correct, steps;
} epoch_sums;

/* Where an epoch stands in the run. */
typedef struct trainer_epoch {
    long epoch, epochs;   /* numbered from 1 */
    int64_t first_batch;  /* 0, or where a resumed run left off */
    int64_t total_steps;  /* of the whole run: the schedule spans them */
    int64_t max_steps;    /* stop when the plan has run this many (0: no limit) */
    const char *schedule;
    double lr;            /* the schedule's peak */
    int ranks;            /* processes training together (the speed on the bar) */
    FILE *log;            /* the progress bar */
} trainer_epoch;

/* One epoch's steps into *sums (rank-local). */
int trainer_run_epoch(trainer *t, const trainer_epoch *e, epoch_sums *sums);

#endif
