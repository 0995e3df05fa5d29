/*
 * A data-parallel job (include/cuttle.h, ct_dist): its communicator and
 * what its gradient steps cost (dist/grad_sync.c adds to the statistics).
 */
#ifndef CT_DIST_DIST_H
#define CT_DIST_DIST_H

#include "dist/comm.h"

struct ct_dist {
    ct_comm *comm;
    ct_dist_stats stats;
};

/* Data-parallel steps for `plan` (dist/grad_sync.c): its gradients
 * averaged over `grads` (owned by the hook when owns_grads, destroyed
 * also when this fails) in buckets of about bucket_bytes (0: the default),
 * what they cost added to *stats; `host` carries synchronized batchnorm's
 * sums (NULL: it cannot be turned on).  The graph must have gradients. */
ct_status ct_grad_sync_attach(ct_plan *plan, ct_dist_stats *stats, ct_comm *host,
                              ct_comm *grads, bool owns_grads, size_t bucket_bytes);
/* After a training step of `plan` failed: starts the sums it had not
 * started, over whatever its buckets hold, in the order of the last whole
 * step, and waits for all (on a GPU: orders its stream after them), so
 * that the others waiting for its sums end their step.  Their updates are
 * then not to be trusted.  Nothing without data-parallel steps. */
ct_status ct_grad_sync_drain(ct_plan *plan);

#endif
