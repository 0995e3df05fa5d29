/*
 * CUDA Graphs (graph/replay.h): a plan on a CUDA backend records its step
 * after two steps node by node and replays it from then on.  A replayed
 * step must give the same bits as the same step run node by node, take the
 * learning rate and step count of its own step (dropout masks, Adam's bias
 * correction, a schedule), allocate nothing, still report a bad label, and
 * fall back to node by node, saying why, when recording fails.
 *
 * Each case runs the same graph on two CUDA backends, one with graphs on
 * (the default) and one with them off, from the same data, and compares
 * every output, parameter, gradient and optimizer buffer bit for bit; the
 * training cases also compare the parameters with the CPU's.
 *
 * Without a GPU (or without CUDA) it prints "test_cuda_graph: skipped ..."
 * and exits 0, unless CT_REQUIRE_GPU is set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "harness.h"
#include "step_bytes.h"
#ifdef CT_HAVE_CUDA
#include <cuda_runtime_api.h> /* the emulator's: CUDA_EMU, cuda_emu_fail */
#endif

enum { STEPS = 6 };

#define TOL_TRAINING 1e-4 /* GPU against CPU after several steps (test_gpu's) */

static ct_backend *graphs_on, *graphs_off, *cpu;

/* A graph under test: its inputs (x, labels) and what a step computes. */
typedef struct model {
    ct_graph *graph;
    ct_tensor *x, *labels, *loss;
    int classes;
} model;

/* SimpleCNN at batch 8 with SGD (Nesterov momentum): the README's step. */
static void build_simplecnn(model *m)
{
    m->graph = ct_graph_new();
    m->classes = 10;
    m->x = ct_input(m->graph, "x", CT_F32, 4, (int64_t[]){8, 1, 28, 28});
    m->labels = ct_input(m->graph, "labels", CT_I64, 1, (int64_t[]){8});
    m->loss = ct_cross_entropy(m->graph, ct_model_simplecnn(m->graph, m->x, 10), m->labels, 0.0f);
    CHECK_OK(ct_graph_backward(m->graph, m->loss));
    CHECK_OK(ct_graph_sgd(m->graph, (ct_sgd_args){.lr = 0.05f, .momentum = 0.9f,
                                                  .weight_decay = 5e-4f, .nesterov = true}));
}

/* Dropout and AdamW: the step count reaches the mask and the bias correction. */
static void build_dropout_adamw(model *m)
{
    m->graph = ct_graph_new();
    m->classes = 6;
    m->x = ct_input(m->graph, "x", CT_F32, 2, (int64_t[]){16, 20});
    m->labels = ct_input(m->graph, "labels", CT_I64, 1, (int64_t[]){16});
    ct_tensor *h = ct_relu(m->graph, ct_layer_linear(m->graph, "fc1", m->x, 32, true));
    h = ct_dropout(m->graph, h, 0.3f);
    m->loss = ct_cross_entropy(m->graph, ct_layer_linear(m->graph, "fc2", h, 6, true),
                               m->labels, 0.0f);
    CHECK_OK(ct_graph_backward(m->graph, m->loss));
    ct_adam_args args = ct_adam_defaults();
    args.lr = 0.01f;
    args.weight_decay = 1e-2f;
    args.decoupled = true;
    CHECK_OK(ct_graph_adam(m->graph, args));
}

/* A tensor's seeded data: labels in range, variances positive. */
static void fill_tensor(ct_plan *plan, ct_tensor *t, int classes, uint64_t seed)
{
    int64_t count = ct_tensor_numel(t);
    size_t bytes = ct_tensor_bytes(t);
    void *data = calloc(1, bytes ? bytes : 1);
    if (ct_tensor_dtype(t) == CT_I64) {
        for (int64_t j = 0; j < count; j++)
            ((int64_t *)data)[j] = (j * 7 + 3) % classes;
    } else {
        bool positive = strstr(ct_tensor_name(t), "running_var") ||
                        strstr(ct_tensor_name(t), "exp_avg_sq");
        harness_fill(data, count, seed, positive ? 0.5f : -0.5f, 0.5f);
    }
    CHECK_OK(ct_plan_write(plan, t, data, bytes));
    free(data);
}

/* The same inputs, parameters and buffers on a plan. */
static void fill(ct_plan *plan, const model *m)
{
    fill_tensor(plan, m->x, m->classes, 100);
    fill_tensor(plan, m->labels, m->classes, 101);
    for (int i = 0; i < ct_graph_n_state(m->graph); i++)
        fill_tensor(plan, ct_graph_state(m->graph, i), m->classes, 300 + (uint64_t)i);
}

/* The parameters and optimizer state against the CPU's: the learning rate
 * and step count of each step reached the kernels (the same bits on both
 * GPU plans would not show a value both failed to update). */
static void check_against_cpu(ct_plan *gpu, ct_plan *host, const model *m)
{
    for (int i = 0; i < ct_graph_n_state(m->graph); i++) {
        const ct_tensor *t = ct_graph_state(m->graph, i);
        int64_t count = ct_tensor_numel(t);
        float *want = malloc(ct_tensor_bytes(t)), *got = malloc(ct_tensor_bytes(t));
        CHECK_OK(ct_plan_read(host, t, want, ct_tensor_bytes(t)));
        CHECK_OK(ct_plan_read(gpu, t, got, ct_tensor_bytes(t)));
        double err = harness_rel_err_f32(got, want, count);
        CHECK(err <= TOL_TRAINING, "'%s' after replayed steps: rel error %.3g against the CPU",
              ct_tensor_name(t), err);
        free(want);
        free(got);
    }
}

static void check_same_bits(ct_plan *replayed, ct_plan *eager, const model *m, const char *when)
{
    size_t bytes_a = 0, bytes_b = 0;
    void *a = step_bytes(replayed, m->graph, m->loss, &bytes_a);
    void *b = step_bytes(eager, m->graph, m->loss, &bytes_b);
    CHECK(bytes_a == bytes_b && memcmp(a, b, bytes_a) == 0,
          "%s: replayed steps differ from the same steps node by node (%zu bytes)", when,
          bytes_a);
    free(a);
    free(b);
}

/* One training step on the plans with this step's learning rate (a
 * schedule: a replay that kept the recorded rate would drift apart). */
static void step_plans(ct_plan *const *plans, int n, int step)
{
    for (int i = 0; i < n; i++) {
        ct_plan_set_lr(plans[i], 0.02f + 0.01f * (float)step);
        CHECK_OK(ct_plan_run(plans[i], CT_TRAIN));
    }
}

static void step_both(ct_plan *a, ct_plan *b, int step)
{
    step_plans((ct_plan *[]){a, b}, 2, step);
}

/* STEPS training steps replayed against node by node, the same bits, and
 * against the CPU. */
static void replay_matches(void (*build)(model *), const char *kernels)
{
    model m = {0};
    build(&m);
    ct_plan *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(ct_backend_set_kernels(graphs_on, kernels));
    CHECK_OK(ct_backend_set_kernels(graphs_off, kernels));
    CHECK_OK(ct_plan_new(m.graph, graphs_on, 7, &a));
    CHECK_OK(ct_plan_new(m.graph, graphs_off, 7, &b));
    CHECK_OK(ct_plan_new(m.graph, cpu, 7, &c));
    if (a && b && c) {
        fill(a, &m);
        fill(b, &m);
        fill(c, &m);
        for (int step = 0; step < STEPS; step++)
            step_plans((ct_plan *[]){a, b, c}, 3, step);
        int nodes = 0;
        const char *why = NULL;
        int state = ct_plan_cuda_graph(a, CT_TRAIN, &nodes, &why);
        CHECK(state == 1 && nodes > 0, "graphs on: state %d, %d nodes (%s)", state, nodes,
              why ? why : "");
        CHECK(ct_plan_cuda_graph(b, CT_TRAIN, NULL, NULL) == 0, "graphs off, yet replayed");
        check_same_bits(a, b, &m, kernels);
        check_against_cpu(a, c, &m);
    }
    ct_plan_free(a);
    ct_plan_free(b);
    ct_plan_free(c);
    ct_graph_free(m.graph);
}

/* 26 linear layers: 52 parameters, more than one grouped update launch
 * takes (CT_CUDA_GROUP_MAX), so the update runs as two. */
static void build_deep_mlp(model *m)
{
    m->graph = ct_graph_new();
    m->classes = 4;
    m->x = ct_input(m->graph, "x", CT_F32, 2, (int64_t[]){8, 12});
    m->labels = ct_input(m->graph, "labels", CT_I64, 1, (int64_t[]){8});
    ct_tensor *h = m->x;
    char name[32];
    for (int layer = 0; layer < 25; layer++) {
        snprintf(name, sizeof name, "fc%d", layer);
        h = ct_relu(m->graph, ct_layer_linear(m->graph, name, h, 12, true));
    }
    m->loss = ct_cross_entropy(m->graph, ct_layer_linear(m->graph, "out", h, 4, true),
                               m->labels, 0.0f);
    CHECK_OK(ct_graph_backward(m->graph, m->loss));
    CHECK_OK(ct_graph_sgd(m->graph, (ct_sgd_args){.lr = 0.05f, .momentum = 0.9f}));
}

static void simplecnn_native(void) { replay_matches(build_simplecnn, "native"); }
static void deep_mlp_native(void) { replay_matches(build_deep_mlp, "native"); }
static void simplecnn_vendor(void) { replay_matches(build_simplecnn, "vendor"); }
static void dropout_adamw_native(void) { replay_matches(build_dropout_adamw, "native"); }

/* Replays allocate nothing (the step's memory is the plan's), and each
 * step is one graph launch. */
static void replay_allocates_nothing(void)
{
    model m = {0};
    build_simplecnn(&m);
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_set_kernels(graphs_on, "native"));
    CHECK_OK(ct_plan_new(m.graph, graphs_on, 7, &plan));
    if (plan) {
        fill(plan, &m);
        for (int step = 0; step < 3; step++) /* two node by node, one recorded and replayed */
            CHECK_OK(ct_plan_run(plan, CT_TRAIN));
        ct_memory_stats before, after;
        CHECK_OK(ct_backend_memory_stats(graphs_on, &before));
#ifdef CUDA_EMU
        unsigned long long launches = cuda_emu_graph_launches();
#endif
        for (int step = 0; step < 4; step++)
            CHECK_OK(ct_plan_run(plan, CT_TRAIN));
        CHECK_OK(ct_backend_memory_stats(graphs_on, &after));
        CHECK(after.n_allocs == before.n_allocs && after.n_device_allocs == before.n_device_allocs,
              "replayed steps allocated: %lld -> %lld blocks, %lld -> %lld cudaMalloc",
              (long long)before.n_allocs, (long long)after.n_allocs,
              (long long)before.n_device_allocs, (long long)after.n_device_allocs);
#ifdef CUDA_EMU
        CHECK(cuda_emu_graph_launches() - launches == 4, "%llu graph launches for 4 steps",
              cuda_emu_graph_launches() - launches);
#endif
    }
    ct_plan_free(plan);
    ct_graph_free(m.graph);
}

/* A bad label in a replayed step is still the step's error. */
static void replay_reports_bad_label(void)
{
    model m = {0};
    build_simplecnn(&m);
    ct_plan *plan = NULL;
    CHECK_OK(ct_plan_new(m.graph, graphs_on, 7, &plan));
    if (plan) {
        fill(plan, &m);
        for (int step = 0; step < 3; step++)
            CHECK_OK(ct_plan_run(plan, CT_TRAIN));
        CHECK(ct_plan_cuda_graph(plan, CT_TRAIN, NULL, NULL) == 1, "not replaying");
        int64_t labels[8] = {1, 2, 3, 4, 5, 10, 0, 1}; /* row 5: one past the last class */
        CHECK_OK(ct_plan_write(plan, m.labels, labels, sizeof labels));
        ct_status status = ct_plan_run(plan, CT_TRAIN);
        CHECK(status == CT_ERR_ARG && strstr(ct_last_error(), "row 5"), "status %s: %s",
              ct_status_name(status), ct_last_error());
    }
    ct_plan_free(plan);
    ct_graph_free(m.graph);
    CHECK_OK(ct_backend_synchronize(graphs_on));
}

/* Evaluation steps replay too, with the same outputs. */
static void eval_steps_replay(void)
{
    model m = {0};
    build_simplecnn(&m);
    ct_tensor_keep(m.loss); /* what the eval steps compute */
    ct_plan *a = NULL, *b = NULL;
    CHECK_OK(ct_plan_new(m.graph, graphs_on, 7, &a));
    CHECK_OK(ct_plan_new(m.graph, graphs_off, 7, &b));
    if (a && b) {
        fill(a, &m);
        fill(b, &m);
        float la = 0.0f, lb = 0.0f;
        for (int step = 0; step < 4; step++) {
            CHECK_OK(ct_plan_run(a, CT_EVAL));
            CHECK_OK(ct_plan_run(b, CT_EVAL));
        }
        CHECK_OK(ct_plan_read(a, m.loss, &la, sizeof la));
        CHECK_OK(ct_plan_read(b, m.loss, &lb, sizeof lb));
        CHECK(memcmp(&la, &lb, sizeof la) == 0, "eval loss %.9g replayed, %.9g not", la, lb);
        CHECK(ct_plan_cuda_graph(a, CT_EVAL, NULL, NULL) == 1, "eval steps not replayed");
        CHECK(ct_plan_cuda_graph(a, CT_TRAIN, NULL, NULL) == 0, "train recorded without a step");
    }
    ct_plan_free(a);
    ct_plan_free(b);
    ct_graph_free(m.graph);
}

/* New kernel choices drop the recording; it is made again, and turning
 * graphs off drops it for good. */
static void choices_record_again(void)
{
    model m = {0};
    build_simplecnn(&m);
    ct_plan *a = NULL, *b = NULL;
    CHECK_OK(ct_backend_set_kernels(graphs_on, "native"));
    CHECK_OK(ct_backend_set_kernels(graphs_off, "native"));
    CHECK_OK(ct_plan_new(m.graph, graphs_on, 7, &a));
    CHECK_OK(ct_plan_new(m.graph, graphs_off, 7, &b));
    if (a && b) {
        fill(a, &m);
        fill(b, &m);
        for (int step = 0; step < 3; step++)
            step_both(a, b, step);
        CHECK(ct_plan_cuda_graph(a, CT_TRAIN, NULL, NULL) == 1, "not replaying");
        CHECK_OK(ct_backend_set_kernels(graphs_on, "vendor"));
        CHECK_OK(ct_backend_set_kernels(graphs_off, "vendor"));
        step_both(a, b, 3);
        CHECK(ct_plan_cuda_graph(a, CT_TRAIN, NULL, NULL) == 0,
              "the native recording replayed after --kernels vendor");
        for (int step = 4; step < 7; step++)
            step_both(a, b, step);
        CHECK(ct_plan_cuda_graph(a, CT_TRAIN, NULL, NULL) == 1, "not recorded again");
        check_same_bits(a, b, &m, "after the kernels changed");
        CHECK_OK(ct_backend_set_cuda_graph(graphs_on, false));
        step_both(a, b, 7);
        CHECK(ct_plan_cuda_graph(a, CT_TRAIN, NULL, NULL) == 0, "replayed with graphs off");
        check_same_bits(a, b, &m, "after graphs were turned off");
        CHECK_OK(ct_backend_set_cuda_graph(graphs_on, true));
    }
    ct_plan_free(a);
    ct_plan_free(b);
    ct_graph_free(m.graph);
}

#ifdef CUDA_EMU
/* A vendor call that fails while the step is recorded: the step runs node
 * by node (the failure handled there as ever), steps stay right, and the
 * plan says why it does not replay. */
static void failed_recording_runs_node_by_node(void)
{
    model m = {0};
    build_simplecnn(&m);
    ct_plan *a = NULL, *b = NULL;
    CHECK_OK(ct_backend_set_kernels(graphs_on, "vendor"));
    CHECK_OK(ct_backend_set_kernels(graphs_off, "vendor"));
    CHECK_OK(ct_plan_new(m.graph, graphs_on, 7, &a));
    CHECK_OK(ct_plan_new(m.graph, graphs_off, 7, &b));
    if (a && b) {
        fill(a, &m);
        fill(b, &m);
        for (int step = 0; step < 2; step++)
            step_both(a, b, step);
        cuda_emu_fail("cudnnConvolutionForward"); /* from the recording step on */
        for (int step = 2; step < STEPS; step++)
            step_both(a, b, step);
        cuda_emu_fail(NULL);
        const char *why = NULL;
        int state = ct_plan_cuda_graph(a, CT_TRAIN, NULL, &why);
        CHECK(state == -1 && why && strstr(why, "cudnnConvolutionForward"),
              "state %d, why: %s", state, why ? why : "(none)");
        check_same_bits(a, b, &m, "after a failed recording");
    }
    ct_plan_free(a);
    ct_plan_free(b);
    ct_graph_free(m.graph);
}
#endif

static int skip(const char *reason)
{
    printf("test_cuda_graph: skipped: %s\n", reason);
    if (getenv("CT_REQUIRE_GPU")) {
        printf("FAIL gpu_available (CT_REQUIRE_GPU is set)\n");
        return 1;
    }
    return 0;
}

/* fp16 SimpleCNN (tensor cores, loss scaling): replayed steps give the
 * eager steps' bits, and a step whose scale overflows the gradients (set to
 * 2^100 while replaying) is skipped by both alike, the scale halved. */
static void fp16_replay_skips_like_eager(void)
{
    model m = {.graph = ct_graph_new(), .classes = 10};
    m.x = ct_input(m.graph, "x", CT_F32, 4, (int64_t[]){8, 1, 28, 28});
    m.labels = ct_input(m.graph, "labels", CT_I64, 1, (int64_t[]){8});
    CHECK_OK(ct_graph_set_precision(m.graph, CT_PRECISION_FP16));
    m.loss = ct_cross_entropy(m.graph, ct_model_simplecnn(m.graph, m.x, 10), m.labels, 0.0f);
    CHECK_OK(ct_graph_backward(m.graph, m.loss));
    CHECK_OK(ct_graph_sgd(m.graph, (ct_sgd_args){.lr = 0.05f, .momentum = 0.9f,
                                                 .nesterov = true}));
    ct_plan *a = NULL, *b = NULL;
    CHECK_OK(ct_backend_set_kernels(graphs_on, "native"));
    CHECK_OK(ct_backend_set_kernels(graphs_off, "native"));
    CHECK_OK(ct_plan_new(m.graph, graphs_on, 7, &a));
    CHECK_OK(ct_plan_new(m.graph, graphs_off, 7, &b));
    if (a && b) { /* the model's own initial weights (seed 7 on both), seeded data */
        for (int k = 0; k < 2; k++) {
            fill_tensor(k ? b : a, m.x, m.classes, 100);
            fill_tensor(k ? b : a, m.labels, m.classes, 101);
        }
        CHECK_OK(ct_plan_set_loss_scale(a, 0x1p10f, 2000)); /* no overflow before the forced one */
        CHECK_OK(ct_plan_set_loss_scale(b, 0x1p10f, 2000));
        for (int step = 0; step < STEPS; step++) {
            bool skip = step == STEPS - 2; /* replaying by now */
            if (step >= STEPS - 2) { /* 2^100: the gradients overflow; then 2^10 */
                CHECK_OK(ct_plan_set_loss_scale(a, skip ? 0x1p100f : 0x1p10f, 2000));
                CHECK_OK(ct_plan_set_loss_scale(b, skip ? 0x1p100f : 0x1p10f, 2000));
            }
            step_both(a, b, step);
            CHECK(ct_plan_step_skipped(a) == skip && ct_plan_step_skipped(b) == skip,
                  "step %d: skipped %d (replayed) and %d (node by node), expected %d", step,
                  ct_plan_step_skipped(a), ct_plan_step_skipped(b), skip);
            check_same_bits(a, b, &m, "fp16");
            if (skip)
                CHECK(ct_plan_loss_scale(a) == 0x1p99f && ct_plan_loss_scale(b) == 0x1p99f,
                      "scales %g and %g after the skip", (double)ct_plan_loss_scale(a),
                      (double)ct_plan_loss_scale(b));
        }
        CHECK(ct_plan_cuda_graph(a, CT_TRAIN, NULL, NULL) == 1, "fp16 steps not replayed");
        CHECK(ct_plan_skipped_steps(a) == 1 && ct_plan_skipped_steps(b) == 1,
              "%lld and %lld steps skipped", (long long)ct_plan_skipped_steps(a),
              (long long)ct_plan_skipped_steps(b));
    }
    ct_plan_free(a);
    ct_plan_free(b);
    ct_graph_free(m.graph);
}

int main(void)
{
    if (ct_backend_new("cuda", &graphs_on) != CT_OK)
        return skip(ct_last_error());
    CHECK_OK(ct_backend_new("cuda", &graphs_off));
    CHECK_OK(ct_backend_set_cuda_graph(graphs_off, false));
    CHECK_OK(ct_backend_new("cpu", &cpu));
    RUN(simplecnn_native);
    RUN(simplecnn_vendor);
    RUN(dropout_adamw_native);
    RUN(deep_mlp_native);
    RUN(replay_allocates_nothing);
    RUN(replay_reports_bad_label);
    RUN(eval_steps_replay);
    RUN(choices_record_again);
    RUN(fp16_replay_skips_like_eager);
#ifdef CUDA_EMU
    RUN(failed_recording_runs_node_by_node);
#endif
    ct_backend_free(graphs_on);
    ct_backend_free(graphs_off);
    ct_backend_free(cpu);
    return harness_finish();
}
