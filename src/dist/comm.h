/*
 * A communicator: the transport under data-parallel training, as a small
 * vtable.  MPI (dist/mpi.c) is the first, for tensors in host memory; a
 * job of one (dist/dist.c) is the trivial second.  NCCL, for GPU tensors,
 * would be a third: the same calls on device memory, ordered on a stream.
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
};

#ifdef CT_HAVE_MPI
/* Initializes MPI unless it is already (then leaves it to its owner). */
ct_status ct_comm_mpi_new(ct_comm **out);
/* MPI_Get_library_version's first line. Static. */
const char *ct_comm_mpi_library(void);
#endif

#endif
