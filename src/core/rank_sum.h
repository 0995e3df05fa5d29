/*
 * How a kernel adds numbers over the ranks of a data-parallel job
 * (synchronized batchnorm): the plan hands kernels this, the communicator
 * of src/dist/ stands behind it, and the kernels need not know MPI.
 */
#ifndef CT_CORE_RANK_SUM_H
#define CT_CORE_RANK_SUM_H

/* sum(ctx, values, count) replaces values[0..count) by their sums over the
 * ranks; every rank calls it at the same point of the same step.  It
 * returns 0, or the ct_status of its failure (the message set); an int, so
 * that the CPU kernels, which do not include cuttle.h, can carry it. */
typedef struct ct_rank_sum {
    int (*sum)(void *ctx, double *values, int count);
    void *ctx;
} ct_rank_sum;

#endif
