/*
 * A roofline model of a GPU: the time a node's kernels would take, predicted
 * from what the emulated device counted of them (ct_kernel_counts) and the
 * op's arithmetic (src/ops/cost.c).  The device's constants live here, in
 * one place; docs/roofline.md gives their sources, the model's assumptions
 * and its known errors.  Predictions, never measurements.
 */
#ifndef CT_PROF_ROOFLINE_H
#define CT_PROF_ROOFLINE_H

#include "cuttle.h"

typedef struct ct_gpu_model {
    const char *name;
    double fp32_flops;      /* FLOP/s, FMA counted as 2, CUDA cores */
    double tensor_flops;    /* FLOP/s, dense bf16/fp16 on tensor cores, f32 accumulate */
    double dram_bytes;      /* bytes/s, HBM */
    double l2_bytes;        /* bytes/s, L2 to the SMs */
    double l2_capacity;     /* bytes */
    double shared_wavefronts; /* shared-memory wavefronts/s over all SMs */
    double launch_ns;       /* host cost of one eager launch, or of one graph launch */
    double kernel_tail_ns;  /* a kernel's ramp-up and drain on the GPU */
    /* The latency term: what one warp's chain costs in clocks */
    double clock_hz;
    double issue_per_clock;   /* warp instructions issued per clock, all SMs */
    double sm_issue_per_clock; /* ... by one SM (its schedulers) */
    double instruction_clocks; /* a dependent instruction, one warp alone */
    double load_clocks;       /* a round trip of a global load */
    double collective_clocks; /* a shuffle or vote */
    double barrier_clocks;    /* __syncthreads */
} ct_gpu_model;

/* The default: an H100 SXM5 (80 GB). */
extern const ct_gpu_model ct_gpu_h100_sxm;

/* Fills counts->predicted_ns, predicted_graph_ns and roofline_ns for a node whose
 * kernels counted `counts` and whose op does `flops` and needs at least
 * `least_bytes` of memory traffic. */
void ct_roofline_predict(const ct_gpu_model *gpu, double flops, double least_bytes,
                         ct_kernel_counts *counts);

#endif
