/*
 * A communicator: the transport under data-parallel training, as a small
 * vtable.  MPI (dist/mpi.c) is the first, for tensors in host memory; a
 * job of one (dist/dist.c) is the trivial second.  NCCL (dist/nccl.c), for
 * GPU tensors, is the third: the gradient sums on device memory, ordered on
 * the GPU's stream.
 *
 * Calls come from one thread.  Collectives (all but destroy) must be made
 * by every rank in the same order, with the same counts.
 */
#ifndef CT_DIST_COMM_H
#define CT_DIST_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuttle.h"

typedef struct ct_comm ct_comm;

typedef struct ct_comm_i {
    /* Room for n_slots sums in flight at once (before a step, not during:
     * it may allocate). */
    ct_status (*reserve)(ct_comm *comm, int n_slots);
    /* Starts the sum over the ranks of data[0..count) in place, in `slot`;
     * data must stay untouched until wait(slot) returns. */
    ct_status (*sum_start)(ct_comm *comm, int slot, float *data, int64_t count);
    /* Lets the sums in flight progress (MPI moves data only inside its
     * calls); *done: slot's sum is finished. */
    ct_status (*test)(ct_comm *comm, int slot, bool *done);
    ct_status (*wait)(ct_comm *comm, int slot);
    /* Blocking sums in place. */
    ct_status (*sum_f32)(ct_comm *comm, float *data, int64_t count);
    ct_status (*sum_f64)(ct_comm *comm, double *data, int count);
    /* Device communicators only (NULL on the others): the sums over the
     * ranks, in place, of `count` doubles of the GPU's memory, queued on
     * the backend's stream after the work queued there before the call,
     * and before the work queued after it; the host does not wait. */
    ct_status (*sum_f64_queued)(ct_comm *comm, double *data, int count);
    ct_status (*broadcast)(ct_comm *comm, void *data, size_t bytes, int root);
    ct_status (*allgather)(ct_comm *comm, const void *mine, size_t bytes, void *all);
    ct_status (*barrier)(ct_comm *comm);
    /* Ends the whole job with `status`; returns only in a job of one. */
    void (*abort)(ct_comm *comm, int status);
    void (*destroy)(ct_comm *comm);
} ct_comm_i;

struct ct_comm {
    const ct_comm_i *iface;
    int rank, size;
    int local_rank; /* among the ranks on this machine */
    /* Its sums take memory of one GPU and are ordered on that GPU's stream:
     * sum_start after the work queued there before it, wait before the work
     * queued after it (neither waits on the host); such a sum leaves the
     * mean over the ranks, not the sum.  It has only reserve, sum_start,
     * test, wait, sum_f64_queued, abort and destroy: the job's host
     * communicator carries everything else. */
    bool device;
};

#ifdef CT_HAVE_MPI
/* Initializes MPI unless it is already (then leaves it to its owner). */
ct_status ct_comm_mpi_new(ct_comm **out);
/* MPI_Get_library_version's first line. Static. */
const char *ct_comm_mpi_library(void);
#endif

#if defined(CT_HAVE_CUDA) && defined(CT_HAVE_NCCL)
/* NCCL between the GPUs of the job's ranks, one GPU per rank: the GPU and
 * stream of `backend` (a CUDA backend); `host`, the job's communicator,
 * carries NCCL's unique id from rank 0.  Collective: every rank calls it. */
ct_status ct_comm_nccl_new(ct_comm *host, ct_backend *backend, ct_comm **out);
/* NCCL between the GPUs of n backends of this process (ncclCommInitAll):
 * out[i] is rank i on backends[i]'s GPU and stream.  Each rank's calls must
 * come from a thread of its own (or its collectives wait for the others). */
ct_status ct_comm_nccl_group_new(ct_backend *const *backends, int n, ct_comm **out);
#endif

#endif
