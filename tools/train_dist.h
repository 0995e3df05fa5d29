/*
 * cuttle train under mpirun (docs/distributed.md): the job's ranks, what
 * they must agree on before training, their shared figures, and how a
 * failed rank ends the job.  Without mpirun the job is one process, and
 * each of these is what a single process would do.
 */
#ifndef CUTTLE_TOOLS_TRAIN_DIST_H
#define CUTTLE_TOOLS_TRAIN_DIST_H

#include "cli.h"
#include "train_options.h"

typedef struct train_job {
    ct_dist *dist;
    int rank, size;
    /* every rank knows the run failed (they disagreed), so each exits on
     * its own: no rank has to end the others */
    bool failed_together;
    FILE *quiet; /* the log of ranks other than 0: /dev/null */
    char device[32]; /* "cuda:<local rank>" for a rank given --device cuda */
} train_job;

/* Joins the job (ct_dist_init).  Under mpirun, --device cuda becomes the
 * GPU of the rank's place on its machine (opts->device then points into
 * the job). */
int train_job_join(train_job *job, train_options *opts);
/* Where rank 0 logs `log`; the others, nothing. */
FILE *train_job_log(train_job *job, FILE *log);
/* Leaves the job.  A rank that failed alone prints that it did and ends
 * every rank (ct_dist_abort: mpirun's exit status is then this one's). */
int train_job_end(train_job *job, int exit_status);

/* What the ranks must agree on, gathered from every rank and compared with
 * rank 0's: on a difference every rank stops (CLI_EXIT_USAGE) and rank 0
 * says which ranks differ in what ("rank 1 has --batch 16, rank 0 has
 * --batch 32"). */
typedef struct train_identity {
    const train_options *opts;
    const char *model_text;
    int64_t train_images, test_images, first_step;
} train_identity;
int train_job_agree(train_job *job, const train_identity *identity);

/* Makes the plan's training steps data-parallel: rank 0's weights and
 * optimizer state into every rank's plan (the same seed gave the same
 * ones; a resumed run read them from one file: this makes sure), then
 * gradients averaged over the ranks in buckets of bucket_mb MB, and with
 * sync_bn batchnorm over all ranks' batches (--sync-bn). */
int train_job_share(train_job *job, ct_plan *plan, double bucket_mb, bool sync_bn);
/* One line on `log` of what the all-reduces cost rank 0 over the run. */
void train_job_report(train_job *job, FILE *log, double train_seconds, bool on_gpu);

/* Sums of doubles over the ranks, in place. */
int train_job_sum(train_job *job, double *values, int count);
/* Mean loss and accuracy over the test set: each rank evaluates its share
 * (every size-th item from its rank) and the sums are added up. */
int train_job_evaluate(train_job *job, cli_evaluator *ev, const ct_dataset *data, double *loss,
                       double *accuracy);

#endif
