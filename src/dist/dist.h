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

#endif
