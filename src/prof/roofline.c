/* The roofline model (roofline.h; docs/roofline.md). */
#include "prof/roofline.h"

/* H100 SXM5: 132 SMs at a 1.98 GHz boost clock.  FP32: 128 lanes per SM x
 * 2 FLOPs per FMA = 66.9 TFLOP/s; dense bf16/fp16 tensor cores with f32
 * accumulation 989 TFLOP/s (NVIDIA's datasheet); HBM3 3.35 TB/s; L2 50 MB; shared memory
 * one wavefront (32 banks x 4 bytes) per SM per clock.  L2 bandwidth is not
 * published: 5.5 TB/s is what public microbenchmarks measure for reads.
 * A launch costs the host about 3 us in eager mode (cudaLaunchKernel), as
 * does a CUDA Graph's launch (cudaGraphLaunch, once per replayed step), and
 * a kernel about 1 us to fill and drain the GPU.
 *
 * The latency chain (docs/roofline.md): 4 schedulers per SM issue one warp
 * instruction a clock each; one warp alone waits about 4 clocks between
 * dependent FP32 instructions (the pipeline's depth) and issues about one
 * in 2 of its instructions back to back with the next, so 2 clocks each on
 * average; a global load that misses L1 returns after about 600 clocks
 * (public microbenchmarks of Hopper: 260 from L2, 480-650 from HBM); a
 * shuffle 24 (its latency plus the reduction step's add); a barrier 24. */
const ct_gpu_model ct_gpu_h100_sxm = {
    .name = "H100 SXM",
    .fp32_flops = 66.9e12,
    .tensor_flops = 989e12,
    .dram_bytes = 3.35e12,
    .l2_bytes = 5.5e12,
    .l2_capacity = 50e6,
    .shared_wavefronts = 132 * 1.98e9,
    .launch_ns = 3000.0,
    .kernel_tail_ns = 1000.0,
    .clock_hz = 1.98e9,
    .issue_per_clock = 132 * 4,
    .sm_issue_per_clock = 4,
    .instruction_clocks = 2.0,
    .load_clocks = 600.0,
    .collective_clocks = 24.0,
    .barrier_clocks = 24.0,
};

static double larger(double a, double b)
{
    return a > b ? a : b;
}

void ct_roofline_predict(const ct_gpu_model *gpu, double flops, double least_bytes,
                         ct_kernel_counts *counts)
{
    double s_to_ns = 1e9;
    /* the kernels' own arithmetic where the emulator counted more than the
     * op needs (a tile padded past the matrix does FMAs for nothing); the
     * op's where it counted nothing, or less (the formula counts products
     * with padding zeros that a kernel may skip) */
    double executed = counts->flops_executed > flops ? counts->flops_executed : flops;
    /* the share of the kernels' work on tensor cores runs at their rate, the
     * op's floor too (a 16-bit convolution's formula is tensor-core work) */
    double tensor = counts->flops_executed > 0 ? counts->tensor_flops / counts->flops_executed
                                               : 0.0;
    double seconds_per_flop = tensor / gpu->tensor_flops + (1.0 - tensor) / gpu->fp32_flops;
    double compute = executed * seconds_per_flop * s_to_ns;
    double least_compute = flops * seconds_per_flop * s_to_ns;
    double dram = counts->dram_bytes / gpu->dram_bytes * s_to_ns;
    double l2 = counts->bytes_moved / gpu->l2_bytes * s_to_ns;
    double shared = counts->shared_wavefronts / gpu->shared_wavefronts * s_to_ns;
    double issue = counts->warp_instructions / (gpu->issue_per_clock * gpu->clock_hz) * s_to_ns;
    /* the longest warp's chain, once per wave of blocks: a kernel of few
     * blocks doing long serial work takes that however idle the GPU is */
    double chain = counts->chain_instructions * gpu->instruction_clocks +
                   counts->chain_load_rounds * gpu->load_clocks +
                   counts->chain_collectives * gpu->collective_clocks +
                   counts->chain_barriers * gpu->barrier_clocks;
    /* ... or the busiest SM's issue: its blocks' warps share 4 schedulers;
     * each launch's larger one where the counts have them (the launches
     * run one after another: a node whose launches are bound by different
     * terms takes the sum of each one's), else the larger of the sums */
    double sm_issue = counts->sm_instructions / gpu->sm_issue_per_clock;
    double clocks = counts->latency_clocks > 0 ? counts->latency_clocks : larger(chain, sm_issue);
    counts->latency_ns = clocks / gpu->clock_hz * s_to_ns;
    /* the busiest unit, or the chain, bounds the kernels; each pays its
     * tail; in eager mode the GPU cannot run kernels faster than the host
     * launches them */
    double busy = larger(larger(larger(compute, dram), larger(l2, shared)),
                         larger(issue, counts->latency_ns));
    double launches = (double)counts->launches;
    counts->predicted_ns = larger(busy + launches * gpu->kernel_tail_ns,
                                  launches * gpu->launch_ns);
    /* replayed from a graph, the host launches the step once (the step
     * pays that, not the node) and only the GPU's cost per kernel is left */
    counts->predicted_graph_ns = busy + launches * gpu->kernel_tail_ns;
    counts->roofline_ns = larger(least_compute, least_bytes / gpu->dram_bytes * s_to_ns);
}
