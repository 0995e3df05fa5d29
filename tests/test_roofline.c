/*
 * The roofline model (src/prof/roofline.c) on hand-computed cases, and the
 * profiler's predictions from an emulated GPU's counters end to end: a
 * SimpleCNN training step profiled on `cuda` counts every node that runs
 * cuttle's kernels, and a relu backward's traffic is exactly its inputs and
 * output.
 * On the CPU nothing is counted.  Where no emulated GPU with counters is
 * present (a CPU build, the sanitized build) the end-to-end case says so
 * and passes on the model alone.
 */
#include <string.h>

#include "cuttle.h"
#include "harness.h"
#include "prof/roofline.h"
#ifdef CT_HAVE_CUDA
#include <cuda_runtime_api.h> /* the emulator's: CUDA_EMU and what it counts */
#endif

#define BATCH 16
#define CLASSES 10

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fabs(b) + 1e-9;
}

/* Each limit in turn: FLOPs, DRAM, L2, shared memory, launches. */
static void model_takes_the_busiest_unit(void)
{
    const ct_gpu_model *gpu = &ct_gpu_h100_sxm;
    ct_kernel_counts c = {.counted = true, .launches = 1};
    /* 66.9 GFLOP: 1 ms of FP32 at peak, nothing moved */
    ct_roofline_predict(gpu, 66.9e9, 0, &c);
    CHECK(near(c.predicted_ns, 1e6 + gpu->kernel_tail_ns) && near(c.roofline_ns, 1e6),
          "compute-bound: %g ns predicted, %g floor", c.predicted_ns, c.roofline_ns);
    /* 989 GFLOP all on tensor cores: 1 ms at their dense bf16/fp16 rate;
     * half of 133.8 GFLOP on them: 1 ms of FP32 plus 67.6 us */
    c = (ct_kernel_counts){.counted = true, .launches = 1, .flops_executed = 989e9,
                           .tensor_flops = 989e9};
    ct_roofline_predict(gpu, 989e9, 0, &c);
    CHECK(near(c.predicted_ns, 1e6 + gpu->kernel_tail_ns) && near(c.roofline_ns, 1e6),
          "tensor-core-bound: %g ns predicted, %g floor", c.predicted_ns, c.roofline_ns);
    c = (ct_kernel_counts){.counted = true, .launches = 1, .flops_executed = 133.8e9,
                           .tensor_flops = 66.9e9};
    ct_roofline_predict(gpu, 133.8e9, 0, &c);
    CHECK(near(c.roofline_ns, 1e6 + 66.9e9 / 989e12 * 1e9), "mixed: %g ns floor",
          c.roofline_ns);
    /* 3.35 GB from DRAM: 1 ms */
    c = (ct_kernel_counts){.counted = true, .launches = 1, .dram_bytes = 3.35e9,
                           .bytes_moved = 3.35e9};
    ct_roofline_predict(gpu, 0, 3.35e9, &c);
    CHECK(near(c.predicted_ns, 1e6 + gpu->kernel_tail_ns) && near(c.roofline_ns, 1e6),
          "DRAM-bound: %g ns, %g floor", c.predicted_ns, c.roofline_ns);
    /* 5.5 GB through L2 (sectors re-read), 1 GB from DRAM: L2 bounds it */
    c = (ct_kernel_counts){.counted = true, .launches = 1, .dram_bytes = 1e9,
                           .bytes_moved = 5.5e9};
    ct_roofline_predict(gpu, 0, 1e9, &c);
    CHECK(near(c.predicted_ns, 1e6 + gpu->kernel_tail_ns), "L2-bound: %g ns", c.predicted_ns);
    /* 32x conflicted shared memory: wavefronts of 132 SMs at 1.98 GHz */
    c = (ct_kernel_counts){.counted = true, .launches = 1, .shared_wavefronts = 132 * 1.98e6};
    ct_roofline_predict(gpu, 0, 0, &c);
    CHECK(near(c.predicted_ns, 1e6 + gpu->kernel_tail_ns), "shared-bound: %g ns",
          c.predicted_ns);
    /* 100 tiny launches: the host's eager launches bound it */
    c = (ct_kernel_counts){.counted = true, .launches = 100, .dram_bytes = 800};
    ct_roofline_predict(gpu, 100, 800, &c);
    CHECK(near(c.predicted_ns, 100 * gpu->launch_ns), "launch-bound: %g ns", c.predicted_ns);
    /* ... replayed from a CUDA Graph, only the GPU's cost per kernel is left */
    CHECK(near(c.predicted_graph_ns, 800 / gpu->dram_bytes * 1e9 + 100 * gpu->kernel_tail_ns),
          "replayed: %g ns", c.predicted_graph_ns);
}

/* The latency term: one block's warp running a chain of 1,000 loads in a
 * loop and 10,000 instructions takes their latencies in series, however
 * little it moves; a launch whose busiest SM issues more takes that. */
static void model_takes_the_longest_chain(void)
{
    const ct_gpu_model *gpu = &ct_gpu_h100_sxm;
    ct_kernel_counts c = {.counted = true, .launches = 1, .dram_bytes = 4000,
                          .chain_instructions = 1e4, .chain_load_rounds = 1e3,
                          .chain_collectives = 10, .chain_barriers = 20,
                          .warp_instructions = 1e4, .sm_instructions = 1e4};
    ct_roofline_predict(gpu, 0, 4000, &c);
    double chain = (1e4 * gpu->instruction_clocks + 1e3 * gpu->load_clocks +
                    10 * gpu->collective_clocks + 20 * gpu->barrier_clocks) /
                   gpu->clock_hz * 1e9;
    CHECK(near(c.latency_ns, chain) && chain > 300e3,
          "a chain of 1,000 loads: %g ns (want %g)", c.latency_ns, chain);
    CHECK(near(c.predicted_graph_ns, chain + gpu->kernel_tail_ns) &&
              near(c.predicted_ns, chain + gpu->kernel_tail_ns),
          "the chain bounds it: %g ns replayed, %g eager", c.predicted_graph_ns, c.predicted_ns);
    /* 8 blocks of 10^6 warp instructions each on one SM: 4 schedulers */
    c = (ct_kernel_counts){.counted = true, .launches = 1, .chain_instructions = 1e5,
                           .warp_instructions = 8e6, .sm_instructions = 8e6};
    ct_roofline_predict(gpu, 0, 0, &c);
    CHECK(near(c.latency_ns, 8e6 / gpu->sm_issue_per_clock / gpu->clock_hz * 1e9),
          "one SM's issue: %g ns", c.latency_ns);
    /* the same instructions spread over every SM: the chain is short, and
     * the whole GPU's issue rate bounds it */
    c = (ct_kernel_counts){.counted = true, .launches = 1, .warp_instructions = 132 * 8e6};
    ct_roofline_predict(gpu, 0, 0, &c);
    CHECK(near(c.predicted_graph_ns,
               132 * 8e6 / gpu->issue_per_clock / gpu->clock_hz * 1e9 + gpu->kernel_tail_ns),
          "issue-bound: %g ns", c.predicted_graph_ns);
    /* two launches, one bound by its chain (1e5 instructions), one by its
     * SM (8e6 on one): the sum of each one's larger term, where the counts
     * have it per launch, over the larger of the sums */
    c = (ct_kernel_counts){.counted = true, .launches = 2, .chain_instructions = 1e5 + 10,
                           .warp_instructions = 8e6 + 1e5, .sm_instructions = 8e6 + 1e5,
                           .latency_clocks = 2e5 + 2e6};
    ct_roofline_predict(gpu, 0, 0, &c);
    CHECK(near(c.latency_ns, 2.2e6 / gpu->clock_hz * 1e9),
          "each launch's larger term: %g ns (want %g)", c.latency_ns,
          2.2e6 / gpu->clock_hz * 1e9);
}

/* SimpleCNN, a loss and SGD on `device`; NULL plan when it cannot be made. */
static ct_plan *simplecnn_plan(ct_graph *g, const char *device, const char *kernels,
                               ct_backend **backend)
{
    ct_tensor *x = ct_input(g, "x", CT_F32, 4, (int64_t[]){BATCH, 1, 28, 28});
    ct_tensor *labels = ct_input(g, "labels", CT_I64, 1, (int64_t[]){BATCH});
    ct_tensor *logits = ct_model_simplecnn(g, x, CLASSES);
    ct_tensor *loss = ct_cross_entropy(g, logits, labels, 0);
    CHECK_OK(ct_graph_backward(g, loss));
    CHECK_OK(ct_graph_sgd(g, (ct_sgd_args){.lr = 0.01f, .momentum = 0.9f}));
    ct_plan *plan = NULL;
    if (ct_backend_new(device, backend) != CT_OK)
        return NULL;
    if (kernels)
        CHECK_OK(ct_backend_set_kernels(*backend, kernels));
    CHECK_OK(ct_plan_new(g, *backend, 3, &plan));
    return plan;
}

static void cpu_counts_nothing(void)
{
    ct_graph *g = ct_graph_new();
    ct_backend *backend = NULL;
    ct_plan *plan = simplecnn_plan(g, "cpu:1", NULL, &backend);
    ct_profile p;
    CHECK_OK(ct_plan_set_profiling(plan, true));
    CHECK_OK(ct_plan_run(plan, CT_TRAIN));
    CHECK_OK(ct_plan_profile(plan, &p));
    CHECK(p.predicted_for == NULL, "the CPU predicted for %s", p.predicted_for);
    for (int i = 0; i < p.n_records; i++)
        CHECK(!p.records[i].counts.counted, "record %d (%s) counted on the CPU", i,
              p.records[i].op);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(g);
}

/* Whether this build counts the kernels' arithmetic (the LLVM pass). */
static bool counts_flops(void)
{
#ifdef CUDA_EMU
    return cuda_emu_counters_fp_and_branches() != 0;
#else
    return false;
#endif
}

/* Every node that ran cuttle's kernels was counted and predicted; the
 * relus ran inside the convolutions and linear layers and their backwards
 * inside the max pools' and linear layers' backward (fused); a 2x2 max
 * pool reads x and writes y once, every byte used, and does no arithmetic
 * (checked where `one_kernel_each`: with "auto" kernels the autotuner's
 * trial runs of the pool's implementations count in its record too); a
 * convolution does at least its formula's; the ten parameter updates are
 * one launch, counted on the first, and so is a backward pair (its weight
 * gradient has none of its own). */
static void check_counted_step(const ct_profile *p, bool one_kernel_each)
{
    int pools = 0, convs = 0, updates = 0;
    int64_t update_launches = 0;
    for (int i = 0; i < p->n_records; i++) {
        const ct_prof_record *r = &p->records[i];
        const ct_kernel_counts *c = &r->counts;
        if (strcmp(r->op, "sgd_update") == 0) { /* one launch for them all: the first's */
            updates++;
            update_launches += c->launches;
            CHECK(c->launches == (updates == 1) && r->group == (updates == 1 ? 10 : 0),
                  "update %d: %lld launches, group %d", updates, (long long)c->launches,
                  r->group);
            double flops = 0, bytes = 0; /* the group's floor is all ten updates' */
            for (int g = i; updates == 1 && g < i + 10 && g < p->n_records; g++)
                flops += p->records[g].flops, bytes += p->records[g].bytes;
            double floor = fmax(flops / ct_gpu_h100_sxm.fp32_flops,
                                bytes / ct_gpu_h100_sxm.dram_bytes) * 1e9;
            CHECK(updates > 1 || near(c->roofline_ns, floor),
                  "the updates' floor %g ns, %g for all ten", c->roofline_ns, floor);
            continue;
        }
        if (r->group == 0 && i > 0 && p->records[i - 1].group == 2) {
            /* a weight gradient run with its backward data as a pair
             * (graph/impl.h's run_pair): its launch is the pair's, counted
             * on the first */
            CHECK(c->launches == 0 && strstr(r->op, "bwd_weight"),
                  "record %d (%s): %lld launches as a pair's second", i, r->op,
                  (long long)c->launches);
            continue;
        }
        CHECK(c->counted && c->launches >= 1, "record %d (%s): %lld launches", i, r->op,
              (long long)c->launches);
        CHECK(c->predicted_ns >= c->launches * ct_gpu_h100_sxm.launch_ns &&
                  c->predicted_ns >= c->roofline_ns,
              "record %d (%s): predicted %g ns, floor %g ns", i, r->op, c->predicted_ns,
              c->roofline_ns);
        CHECK(c->bytes_moved >= c->bytes_used && c->bytes_used > 0 && c->dram_bytes > 0,
              "record %d (%s): %g bytes used, %g moved, %g DRAM", i, r->op, c->bytes_used,
              c->bytes_moved, c->dram_bytes);
        if (counts_flops() && strcmp(r->op, "conv2d") == 0) {
            convs++;
            CHECK(c->flops_executed >= r->flops && c->predicted_graph_ns <= c->predicted_ns,
                  "conv %d: %g FLOPs executed for %g needed; %g ns replayed, %g eager", i,
                  c->flops_executed, r->flops, c->predicted_graph_ns, c->predicted_ns);
        }
        CHECK(strcmp(r->op, "relu") != 0 && strcmp(r->op, "relu_bwd") != 0,
              "record %d: a %s ran on its own", i, r->op);
        if (strcmp(r->op, "maxpool2d") != 0)
            continue;
        pools++;
        if (!one_kernel_each)
            continue;
        /* r->bytes, the cost model's least traffic, is input + output */
        CHECK(c->dram_bytes == r->bytes && c->bytes_used == r->bytes &&
                  c->bytes_moved == r->bytes,
              "maxpool2d %d: %g DRAM, %g used, %g moved bytes (want %g each)", i, c->dram_bytes,
              c->bytes_used, c->bytes_moved, r->bytes);
        CHECK(c->flops_executed == 0, "maxpool2d %d: %g FLOPs executed", i, c->flops_executed);
    }
    CHECK(pools == 2, "%d maxpool2d records", pools);
    CHECK(updates == 10 && update_launches == 1, "%d updates in %lld launches", updates,
          (long long)update_launches);
    CHECK(!counts_flops() || convs == 2, "%d conv records with executed FLOPs", convs);
}

/* One profiled step in `kernels` mode: with "auto" the autotuner times the
 * first run of each conv and linear shape inside the step, with timers of
 * its own, and every node must still be counted. */
static void profile_counts_each_node(const char *kernels)
{
    ct_graph *g = ct_graph_new();
    ct_backend *backend = NULL;
    ct_plan *plan = simplecnn_plan(g, "cuda", kernels, &backend);
    if (!plan || !ct_backend_emulated(backend)) {
        printf("# no emulated GPU here (%s): the model's cases only\n",
               backend ? ct_backend_name(backend) : "no CUDA backend");
        goto done;
    }
    ct_profile p;
    CHECK_OK(ct_plan_set_profiling(plan, true));
    CHECK_OK(ct_plan_run(plan, CT_TRAIN));
    CHECK_OK(ct_plan_profile(plan, &p));
    if (!p.predicted_for) {
        printf("# this emulated build counts nothing (no clang hooks): skipped\n");
        goto done;
    }
    CHECK(strcmp(p.predicted_for, ct_gpu_h100_sxm.name) == 0, "predicted for %s",
          p.predicted_for);
    check_counted_step(&p, strcmp(kernels, "native") == 0);
done:
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(g);
}

static void emulated_gpu_counts_each_node(void)
{
    profile_counts_each_node("native");
}

static void emulated_gpu_counts_while_autotuning(void)
{
    profile_counts_each_node("auto");
}

int main(void)
{
    RUN(model_takes_the_busiest_unit);
    RUN(model_takes_the_longest_chain);
    RUN(cpu_counts_nothing);
    RUN(emulated_gpu_counts_each_node);
    RUN(emulated_gpu_counts_while_autotuning);
    return harness_finish();
}
