/*
 * How a kernel adds numbers over the ranks of a data-parallel job
 * (synchronized batchnorm): the plan hands kernels this, the communicator
 * of src/dist/ stands behind it, and the kernels need not know MPI.
 */
#ifndef CT_CORE_RANK_SUM_H
#define CT_CORE_RANK_SUM_H

#include <stdbool.h>

/* sum(ctx, values, count) replaces values[0..count) by their sums over the
 * ranks; every rank calls it at the same point of the same step.  It
 * returns 0, or the ct_status of its failure (the message set); an int, so
 * that the CPU kernels, which do not include cuttle.h, can carry it. */
typedef struct ct_rank_sum {
    int (*sum)(void *ctx, double *values, int count);
    void *ctx;
    /* values are in the GPU memory of the plan's backend, and sum only
     * queues the sums on its stream (NCCL): the work queued after it sees
     * them, the host waits for nothing.  false: host memory, and sum
     * returns with the sums in place (MPI). */
    bool device;
} ct_rank_sum;

#endif
