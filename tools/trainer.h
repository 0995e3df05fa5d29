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

/* One device's training graph and plan. */
typedef struct trainer_part {
    ct_graph *graph;
    ct_plan *plan;
    ct_tensor *x, *labels, *logits, *loss;
} trainer_part;

#define TRAINER_MAX_PARTS 16

/* The training graph and plan, the loader, and host memory for one batch.
 * On several GPUs of this process (--device cuda:0,1) each has its part of
 * every batch, the parts' plans joined by ct_replicas (trainer_join); part
 * 0's plan is the one saved, resumed and evaluated. */
typedef struct trainer {
    const char *command; /* "train", "prune": for messages */
    ct_graph *graph;     /* part 0's */
    ct_plan *plan;       /* part 0's */
    ct_loader *loader;
    ct_tensor *x, *labels, *logits, *loss; /* part 0's */
    int batch, classes;  /* batch: the loader's, all parts' together */
    trainer_part parts[TRAINER_MAX_PARTS];
    int n_parts, part_batch;
    ct_replicas *replicas; /* several parts: made by trainer_join */
    float *scores;
    int64_t *step_labels; /* the running step's labels (the loader's slot moves on) */
    bool loss_scaling; /* fp16: an overflowing step is skipped, and training goes on */
    trainer_after_step after_step;
    void *user;
} trainer;

/* The model of info->text with opts' optimizer, precision, seed, batch and
 * augmentation, on `data` (the shard `rank` of `ranks`: 0 and 1 for all),
 * one part (opts->batch images) on each of the n_backends backends. */
int trainer_init(trainer *t, const char *command, const train_options *opts,
                 const run_info *info, const ct_dataset *data, ct_backend *const *backends,
                 int n_backends, int rank, int ranks);
/* Several parts: part 0's weights, state and step into the others (once
 * part 0 is where it starts: after a resume), and the parts joined;
 * sync_bn: their batchnorms over the whole batch (--sync-bn). */
int trainer_join(trainer *t, double bucket_mb, bool sync_bn);
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
