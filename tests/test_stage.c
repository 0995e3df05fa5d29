/*
 * Staged inputs (ct_plan_stage, graph/staging.h): a training loop that
 * stages batch j+1 before it runs step j must leave exactly what a loop of
 * ct_plan_write + ct_plan_run leaves, on the CPU and on a GPU (there the
 * copy runs on a stream of its own, from pinned memory, ordered by events:
 * the emulated device's reverse and shuffled orders show a missing wait).
 * The host's buffer is free on return, ct_plan_find_nonfinite's run takes
 * nothing, and misuse gets a clear error.
 *
 * The GPU cases need a CUDA device (the emulated one in make
 * test-gpu-emu); without one they are skipped, unless CT_REQUIRE_GPU is set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "harness.h"
#include "step_bytes.h"

enum { BATCH = 8, STEPS = 6, CLASSES = 10, IMAGE = 28 * 28 };

typedef struct model {
    ct_graph *graph;
    ct_tensor *x, *labels, *loss;
} model;

/* SimpleCNN at batch 8 with SGD (Nesterov momentum). */
static model build(void)
{
    model m = {.graph = ct_graph_new()};
    m.x = ct_input(m.graph, "x", CT_F32, 4, (int64_t[]){BATCH, 1, 28, 28});
    m.labels = ct_input(m.graph, "labels", CT_I64, 1, (int64_t[]){BATCH});
    m.loss = ct_cross_entropy(m.graph, ct_model_simplecnn(m.graph, m.x, CLASSES), m.labels,
                              0.0f);
    CHECK_OK(ct_graph_backward(m.graph, m.loss));
    CHECK_OK(ct_graph_sgd(m.graph, (ct_sgd_args){.lr = 0.05f, .momentum = 0.9f,
                                                 .nesterov = true}));
    return m;
}

/* Batch j: its own images and labels. */
static void batch(int j, float *images, int64_t *labels)
{
    harness_fill(images, (int64_t)BATCH * IMAGE, 1000 + (uint64_t)j, -1.0f, 1.0f);
    for (int b = 0; b < BATCH; b++)
        labels[b] = (b * 3 + j) % CLASSES;
}

/* Batch j into plan p: staged (then the host's copy, which the plan must
 * no longer need, scribbled over) or written. */
static void feed_batch(ct_plan *p, const model *m, int j, bool stage)
{
    float images[BATCH * IMAGE];
    int64_t labels[BATCH];
    batch(j, images, labels);
    ct_status (*feed)(ct_plan *, ct_tensor *, const void *, size_t) =
        stage ? ct_plan_stage : ct_plan_write;
    CHECK_OK(feed(p, m->x, images, sizeof images));
    CHECK_OK(feed(p, m->labels, labels, sizeof labels));
    memset(images, 0xff, sizeof images);
    memset(labels, 0xff, sizeof labels);
}

/* STEPS steps fed the pipelined way (stage j+1, then run j) against the
 * same steps fed by ct_plan_write: the same bits after every step. */
static void pipelined_matches_written(const char *device, bool cuda_graph)
{
    ct_backend *backend = NULL;
    CHECK_OK(ct_backend_new(device, &backend));
    if (!backend)
        return;
    CHECK_OK(ct_backend_set_kernels(backend, "native"));
    CHECK_OK(ct_backend_set_cuda_graph(backend, cuda_graph));
    model m = build();
    ct_plan *staged = NULL, *written = NULL;
    CHECK_OK(ct_plan_new(m.graph, backend, 7, &staged));
    CHECK_OK(ct_plan_new(m.graph, backend, 7, &written));
    if (staged && written) {
        feed_batch(staged, &m, 0, true);
        for (int j = 0; j < STEPS; j++) {
            if (j + 1 < STEPS)
                feed_batch(staged, &m, j + 1, true);
            CHECK_OK(ct_plan_run(staged, CT_TRAIN));
            feed_batch(written, &m, j, false);
            CHECK_OK(ct_plan_run(written, CT_TRAIN));
            size_t bytes_a = 0, bytes_b = 0;
            void *a = step_bytes(staged, m.graph, m.loss, &bytes_a);
            void *b = step_bytes(written, m.graph, m.loss, &bytes_b);
            CHECK(bytes_a == bytes_b && memcmp(a, b, bytes_a) == 0,
                  "%s (CUDA graph %s), step %d: the staged plan differs from the written one",
                  device, cuda_graph ? "on" : "off", j);
            free(a);
            free(b);
        }
        if (cuda_graph && strcmp(device, "cpu") != 0)
            CHECK(ct_plan_cuda_graph(staged, CT_TRAIN, NULL, NULL) == 1,
                  "the staged plan's steps were not replayed");
    }
    ct_plan_free(staged);
    ct_plan_free(written);
    ct_graph_free(m.graph);
    ct_backend_free(backend);
}

static void pipelined_cpu(void) { pipelined_matches_written("cpu", false); }
static void pipelined_cuda_replayed(void) { pipelined_matches_written("cuda", true); }
static void pipelined_cuda_node_by_node(void) { pipelined_matches_written("cuda", false); }

/* Staged values wait for a run in order; ct_plan_write does not drop
 * them; a third one, a parameter, a wrong size or no data is an error that
 * says so. */
static void queue_and_errors(const char *device)
{
    ct_backend *backend = NULL;
    CHECK_OK(ct_backend_new(device, &backend));
    if (!backend)
        return;
    ct_graph *g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 1, (int64_t[]){4});
    ct_tensor *w = ct_param(g, "w", 1, (int64_t[]){4}, CT_INIT_CONST, 0.0f);
    ct_tensor *y = ct_add(g, x, w);
    ct_tensor_keep(y);
    ct_plan *p = NULL;
    CHECK_OK(ct_plan_new(g, backend, 1, &p));
    if (p) {
        float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {9, 9, 9, 9}, got[4];
        CHECK_OK(ct_plan_write(p, x, c, sizeof c));
        CHECK_OK(ct_plan_stage(p, x, a, sizeof a));
        CHECK_OK(ct_plan_stage(p, x, b, sizeof b));
        CHECK(ct_plan_stage(p, x, c, sizeof c) == CT_ERR_STATE &&
                  strstr(ct_last_error(), "already waiting"),
              "%s: a third staged value: %s", device, ct_last_error());
        CHECK_OK(ct_plan_read(p, x, got, sizeof got));
        CHECK(memcmp(got, c, sizeof c) == 0, "%s: staging changed x before a run", device);
        CHECK_OK(ct_plan_run(p, CT_EVAL));
        CHECK_OK(ct_plan_read(p, y, got, sizeof got));
        CHECK(memcmp(got, a, sizeof a) == 0, "%s: the first run did not take the first value "
              "(%g %g %g %g)", device, got[0], got[1], got[2], got[3]);
        CHECK_OK(ct_plan_write(p, x, c, sizeof c)); /* written now; b still waits */
        CHECK_OK(ct_plan_run(p, CT_EVAL));
        CHECK_OK(ct_plan_read(p, y, got, sizeof got));
        CHECK(memcmp(got, b, sizeof b) == 0, "%s: the second run did not take the second "
              "value", device);
        CHECK_OK(ct_plan_run(p, CT_EVAL)); /* nothing queued: x keeps b */
        CHECK_OK(ct_plan_read(p, y, got, sizeof got));
        CHECK(memcmp(got, b, sizeof b) == 0, "%s: a run with nothing staged changed x", device);
        CHECK(ct_plan_stage(p, w, a, sizeof a) == CT_ERR_ARG &&
                  strstr(ct_last_error(), "not an input"),
              "%s: staging a parameter: %s", device, ct_last_error());
        CHECK(ct_plan_stage(p, x, a, 8) == CT_ERR_ARG && strstr(ct_last_error(), "ct_plan_stage"),
              "%s: a wrong size: %s", device, ct_last_error());
        CHECK(ct_plan_stage(p, x, NULL, sizeof a) == CT_ERR_ARG,
              "%s: NULL data: %s", device, ct_last_error());
        CHECK(ct_plan_stage(p, y, a, sizeof a) == CT_ERR_ARG &&
                  strstr(ct_last_error(), "computed by the graph"),
              "%s: staging a computed tensor: %s", device, ct_last_error());
        CHECK_OK(ct_plan_stage(p, x, a, sizeof a)); /* left queued: freed with the plan */
    }
    ct_plan_free(p);
    ct_graph_free(g);
    ct_backend_free(backend);
}

static void queue_cpu(void) { queue_and_errors("cpu"); }
static void queue_cuda(void) { queue_and_errors("cuda"); }

/* The run that looks for a non-finite value repeats the last step on its
 * own inputs: a value staged for the next step stays queued. */
static void find_nonfinite_takes_nothing(void)
{
    ct_backend *backend = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    ct_graph *g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 1, (int64_t[]){2});
    ct_tensor *y = ct_relu(g, x);
    ct_tensor_keep(y);
    ct_plan *p = NULL;
    CHECK_OK(ct_plan_new(g, backend, 1, &p));
    if (p) {
        float bad[2] = {1.0f, 0.0f}, next[2] = {3.0f, 4.0f}, got[2];
        bad[1] = bad[1] / bad[1]; /* NaN */
        CHECK_OK(ct_plan_write(p, x, bad, sizeof bad));
        CHECK_OK(ct_plan_stage(p, x, next, sizeof next));
        char where[256] = "";
        CHECK_OK(ct_plan_find_nonfinite(p, CT_EVAL, where, sizeof where));
        CHECK(where[0] != '\0', "the NaN input was not found (its run took the staged value?)");
        CHECK_OK(ct_plan_run(p, CT_EVAL));
        CHECK_OK(ct_plan_read(p, y, got, sizeof got));
        CHECK(got[0] == 3.0f && got[1] == 4.0f, "the staged value was lost: %g %g",
              (double)got[0], (double)got[1]);
    }
    ct_plan_free(p);
    ct_graph_free(g);
    ct_backend_free(backend);
}

/* Staged steps, replayed, allocate nothing once each input's two stages
 * are made (its first two values). */
static void staged_replay_allocates_nothing(void)
{
    ct_backend *backend = NULL;
    CHECK_OK(ct_backend_new("cuda", &backend));
    if (!backend)
        return;
    CHECK_OK(ct_backend_set_kernels(backend, "native"));
    model m = build();
    ct_plan *p = NULL;
    CHECK_OK(ct_plan_new(m.graph, backend, 7, &p));
    if (p) {
        feed_batch(p, &m, 0, true);
        for (int j = 0; j < 3; j++) { /* two node by node, one recorded */
            feed_batch(p, &m, j + 1, true);
            CHECK_OK(ct_plan_run(p, CT_TRAIN));
        }
        ct_memory_stats before, after;
        CHECK_OK(ct_backend_memory_stats(backend, &before));
        for (int j = 3; j < 7; j++) {
            feed_batch(p, &m, j + 1, true);
            CHECK_OK(ct_plan_run(p, CT_TRAIN));
        }
        CHECK_OK(ct_backend_memory_stats(backend, &after));
        CHECK(after.n_allocs == before.n_allocs && after.n_device_allocs == before.n_device_allocs,
              "staged replayed steps allocated: %lld -> %lld blocks",
              (long long)before.n_allocs, (long long)after.n_allocs);
    }
    ct_plan_free(p);
    ct_graph_free(m.graph);
    ct_backend_free(backend);
}

int main(void)
{
    RUN(pipelined_cpu);
    RUN(queue_cpu);
    RUN(find_nonfinite_takes_nothing);
    ct_backend *probe = NULL;
    if (ct_backend_new("cuda", &probe) != CT_OK) {
        printf("test_stage: GPU cases skipped: %s\n", ct_last_error());
        if (getenv("CT_REQUIRE_GPU"))
            CHECK(false, "CT_REQUIRE_GPU is set, yet no CUDA device: %s", ct_last_error());
        return harness_finish();
    }
    ct_backend_free(probe);
    RUN(pipelined_cuda_replayed);
    RUN(pipelined_cuda_node_by_node);
    RUN(queue_cuda);
    RUN(staged_replay_allocates_nothing);
    return harness_finish();
}
