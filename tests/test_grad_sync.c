/*
 * The point between backward and the optimizer (graph/grad_hook.h) and the
 * data-parallel steps built on it (src/dist/), in a job of one process
 * (tests/test_dist.sh runs several under mpirun):
 *   - a hook sees every gradient once, finished, before any update, and
 *     what it writes into them is what the optimizer uses, also fp16's
 *     check for inf and NaN;
 *   - steps through buckets (several, or one) change nothing in a job of
 *     one: the same bits as plain steps;
 *   - the collectives of a job of one are the identity.
 */
#include <math.h>
#include <string.h>

#include "cuttle.h"
#include "graph/plan.h"
#include "harness.h"

#define BATCH 4
#define FEATURES 6
#define HIDDEN 5
#define CLASSES 3
#define STEPS 3

typedef struct net {
    ct_graph *graph;
    ct_tensor *x, *labels, *w1, *w2;
    ct_backend *backend;
    ct_plan *plan;
} net;

/* x [4, 6] -> linear 5 -> relu -> linear 3 -> cross-entropy; plain SGD. */
static void net_new(net *n, ct_precision precision)
{
    memset(n, 0, sizeof *n);
    n->graph = ct_graph_new();
    ct_graph_set_precision(n->graph, precision);
    n->x = ct_input(n->graph, "x", CT_F32, 2, (int64_t[]){BATCH, FEATURES});
    n->labels = ct_input(n->graph, "labels", CT_I64, 1, (int64_t[]){BATCH});
    ct_tensor *h = ct_relu(n->graph, ct_layer_linear(n->graph, "fc1", n->x, HIDDEN, true));
    ct_tensor *logits = ct_layer_linear(n->graph, "fc2", h, CLASSES, true);
    ct_tensor *loss = ct_cross_entropy(n->graph, logits, n->labels, 0);
    CHECK_OK(ct_graph_backward(n->graph, loss));
    CHECK_OK(ct_graph_sgd(n->graph, (ct_sgd_args){.lr = 0.5f}));
    n->w1 = ct_graph_find(n->graph, "fc1.weight");
    n->w2 = ct_graph_find(n->graph, "fc2.weight");
    CHECK_OK(ct_backend_new("cpu:1", &n->backend));
    CHECK_OK(ct_plan_new(n->graph, n->backend, 7, &n->plan));
    float x[BATCH * FEATURES];
    int64_t labels[BATCH] = {0, 2, 1, 2};
    harness_fill(x, BATCH * FEATURES, 3, -1, 1);
    CHECK_OK(ct_plan_write(n->plan, n->x, x, sizeof x));
    CHECK_OK(ct_plan_write(n->plan, n->labels, labels, sizeof labels));
}

static void net_free(net *n)
{
    ct_plan_free(n->plan);
    ct_backend_free(n->backend);
    ct_graph_free(n->graph);
}

/* A hook that counts, checks the order, and zeroes or poisons the gradients. */
typedef struct test_hook {
    ct_grad_hook hook;
    net *n;
    int ready, done, ready_after_done;
    bool updated_before_done;
    float w1_before[HIDDEN * FEATURES];
    void *grads[8];
    size_t bytes[8];
    float poison; /* written into every gradient in grads_done */
} test_hook;

static ct_status hook_ready(ct_grad_hook *hook, const ct_tensor *param, void *grad)
{
    test_hook *h = (test_hook *)hook;
    h->ready_after_done += h->done > 0;
    if (h->ready < 8) {
        h->grads[h->ready] = grad;
        h->bytes[h->ready] = ct_tensor_bytes(param);
    }
    h->ready++;
    return CT_OK;
}

static ct_status hook_done(ct_grad_hook *hook)
{
    test_hook *h = (test_hook *)hook;
    float w1[HIDDEN * FEATURES];
    CHECK_OK(ct_plan_read(h->n->plan, h->n->w1, w1, sizeof w1));
    h->updated_before_done = memcmp(w1, h->w1_before, sizeof w1) != 0;
    for (int i = 0; i < h->ready && i < 8; i++)
        for (size_t k = 0; k < h->bytes[i] / sizeof(float); k++)
            ((float *)h->grads[i])[k] = h->poison;
    h->done++;
    return CT_OK;
}

static void hook_destroy(ct_grad_hook *hook)
{
    (void)hook; /* on the test's stack */
}

static void test_hook_runs_between_backward_and_the_optimizer(void)
{
    net n;
    net_new(&n, CT_PRECISION_FP32);
    if (!n.plan)
        return;
    test_hook h = {.hook = {hook_ready, hook_done, hook_destroy}, .n = &n, .poison = 0};
    CHECK_OK(ct_plan_read(n.plan, n.w1, h.w1_before, sizeof h.w1_before));
    CHECK_OK(ct_plan_set_grad_hook(n.plan, &h.hook));
    CHECK_OK(ct_plan_run(n.plan, CT_TRAIN));
    CHECK(h.ready == 4 && h.done == 1 && h.ready_after_done == 0,
          "%d gradients ready (4 parameters), grads_done %d times, %d gradients after it",
          h.ready, h.done, h.ready_after_done);
    CHECK(!h.updated_before_done, "a parameter was updated before grads_done");
    float w1[HIDDEN * FEATURES];
    CHECK_OK(ct_plan_read(n.plan, n.w1, w1, sizeof w1));
    CHECK(memcmp(w1, h.w1_before, sizeof w1) == 0,
          "the optimizer did not use the zeroed gradients: the weights moved");
    CHECK_OK(ct_plan_run(n.plan, CT_EVAL));
    CHECK(h.done == 1, "the hook ran in an evaluation step");
    ct_plan_swap_grad_hook(n.plan, NULL);
    net_free(&n);
}

/* fp16: the optimizer's check for inf and NaN sees what the hook wrote. */
static void test_fp16_check_sees_the_hook(void)
{
    net n;
    net_new(&n, CT_PRECISION_FP16);
    if (!n.plan)
        return;
    test_hook h = {.hook = {hook_ready, hook_done, hook_destroy}, .n = &n, .poison = INFINITY};
    CHECK_OK(ct_plan_read(n.plan, n.w1, h.w1_before, sizeof h.w1_before));
    CHECK_OK(ct_plan_set_grad_hook(n.plan, &h.hook));
    CHECK_OK(ct_plan_run(n.plan, CT_TRAIN));
    CHECK(ct_plan_step_skipped(n.plan) && ct_plan_skipped_steps(n.plan) == 1,
          "gradients made inf by the hook: the step was not skipped");
    ct_plan_swap_grad_hook(n.plan, NULL);
    net_free(&n);
}

/* Train STEPS steps; the weights after them. */
static void train(net *n, float *w1, float *w2)
{
    for (int step = 0; step < STEPS; step++)
        CHECK_OK(ct_plan_run(n->plan, CT_TRAIN));
    CHECK_OK(ct_plan_read(n->plan, n->w1, w1, sizeof(float) * HIDDEN * FEATURES));
    CHECK_OK(ct_plan_read(n->plan, n->w2, w2, sizeof(float) * CLASSES * HIDDEN));
}

static void test_job_of_one_changes_nothing(void)
{
    float plain1[HIDDEN * FEATURES], plain2[CLASSES * HIDDEN];
    net n;
    net_new(&n, CT_PRECISION_FP32);
    train(&n, plain1, plain2);
    net_free(&n);
    ct_dist *dist = NULL;
    CHECK_OK(ct_dist_init(&dist));
    /* 64 bytes: a bucket per parameter; 0: one bucket of 25 MB */
    const size_t bucket_bytes[] = {64, 0};
    for (int i = 0; i < 2; i++) {
        float w1[HIDDEN * FEATURES], w2[CLASSES * HIDDEN];
        ct_dist_stats stats;
        net_new(&n, CT_PRECISION_FP32);
        CHECK_OK(ct_plan_set_dist(n.plan, dist, bucket_bytes[i]));
        train(&n, w1, w2);
        CHECK_OK(ct_dist_stats_get(dist, &stats));
        CHECK(stats.buckets == (i == 0 ? 4 : 1) && stats.steps == STEPS * (i + 1) &&
                  stats.bytes == sizeof(float) * (HIDDEN * (FEATURES + 1) + CLASSES * (HIDDEN + 1)),
              "%d buckets of %zu bytes in all, %lld steps", stats.buckets, stats.bytes,
              (long long)stats.steps);
        CHECK(memcmp(w1, plain1, sizeof w1) == 0 && memcmp(w2, plain2, sizeof w2) == 0,
              "buckets of %zu bytes: the weights differ from plain steps", bucket_bytes[i]);
        CHECK_OK(ct_plan_set_dist(n.plan, NULL, 0));
        net_free(&n);
    }
    ct_dist_free(dist);
}

static void test_collectives_of_one(void)
{
    ct_dist *dist = NULL;
    CHECK_OK(ct_dist_init(&dist));
    CHECK(ct_dist_rank(dist) == 0 && ct_dist_size(dist) == 1, "rank %d of %d",
          ct_dist_rank(dist), ct_dist_size(dist));
    float values[3] = {1.5f, -2, 3};
    double sums[2] = {4, 5};
    char mine[4] = "abc", all[4] = "";
    CHECK_OK(ct_dist_allreduce(dist, values, 3, true));
    CHECK_OK(ct_dist_allreduce_f64(dist, sums, 2));
    CHECK_OK(ct_dist_allgather(dist, mine, sizeof mine, all));
    CHECK_OK(ct_dist_broadcast(dist, values, sizeof values, 0));
    CHECK_OK(ct_dist_barrier(dist));
    CHECK(values[0] == 1.5f && values[1] == -2 && values[2] == 3 && sums[0] == 4 &&
              sums[1] == 5 && strcmp(all, "abc") == 0,
          "a job of one changed its values");
    CHECK(ct_dist_broadcast(dist, values, sizeof values, 1) == CT_ERR_ARG,
          "a broadcast from rank 1 of 1 was accepted");
    ct_dist_abort(dist, 1); /* returns in a job of one */
#ifdef CT_HAVE_MPI
    CHECK(ct_dist_library() && strstr(ct_dist_library(), "MPI"), "MPI library: %s",
          ct_dist_library() ? ct_dist_library() : "NULL");
#else
    CHECK(!ct_dist_library(), "a build without MPI names a library");
#endif
    ct_dist_free(dist);
}

int main(void)
{
    RUN(test_hook_runs_between_backward_and_the_optimizer);
    RUN(test_fp16_check_sees_the_hook);
    RUN(test_job_of_one_changes_nothing);
    RUN(test_collectives_of_one);
    return harness_finish();
}
