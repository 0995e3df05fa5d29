/*
 * What a node costs, estimated from its op and shapes alone: the arithmetic
 * (FLOPs, a multiply-add counted as 2) and the least memory traffic (every
 * input read once, every output written once).  The profiler divides them
 * by measured times to report GFLOP/s and GB/s; they are estimates of the
 * work the math needs, not of what a given kernel happens to do.
 */
#ifndef CT_OPS_COST_H
#define CT_OPS_COST_H

#include "graph/graph.h"

typedef struct ct_cost {
    double flops;
    double bytes;
} ct_cost;

/* The cost of one run of a computed node (zero for leaves and views). */
ct_cost ct_op_cost(const ct_tensor *node);

#endif
