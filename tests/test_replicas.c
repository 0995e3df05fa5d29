/*
 * Data parallel inside one process (ct_replicas, src/dist/replicas.c): plans
 * of one model on two GPUs, each fed half of a batch, end where one plan fed
 * the whole batch does; they stay equal bit for bit; a step that fails on
 * one GPU fails the run without leaving the other waiting, and the replicas
 * refuse to go on; with batchnorm synchronized they end where one plan of
 * the whole batch does (and without, elsewhere); two plans on one GPU,
 * plans of different models and bad arguments are refused.  The two-GPU cases need two CUDA devices (the
 * emulated suite runs with CUDA_EMU_DEVICES=2) and NCCL.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "harness.h"

enum { HALF = 4, BATCH = 2 * HALF, SIDE = 8, CLASSES = 5, STEPS = 3 };
enum { IMAGE = 2 * SIDE * SIDE };

typedef struct net {
    ct_graph *graph;
    ct_plan *plan;
    ct_tensor *x, *labels;
} net;

/* conv 3x3 (-> batchnorm) -> relu -> linear, SGD with momentum, batch
 * `batch`, on `device`. */
static net make_net_of(const char *device, int batch, int hidden, bool bn, ct_backend **backend)
{
    net n = {.graph = ct_graph_new()};
    ct_graph *g = n.graph;
    n.x = ct_input(g, "x", CT_F32, 4, (int64_t[]){batch, 2, SIDE, SIDE});
    n.labels = ct_input(g, "labels", CT_I64, 1, (int64_t[]){batch});
    ct_tensor *h = ct_layer_conv2d(g, "conv", n.x, hidden, 3, 3,
                                   (ct_conv_args){.stride = {1, 1}, .pad = {1, 1},
                                                  .dilation = {1, 1}, .groups = 1},
                                   !bn);
    h = ct_relu(g, bn ? ct_layer_batchnorm2d(g, "bn", h) : h);
    ct_tensor *logits = ct_layer_linear(g, "fc", ct_flatten(g, h), CLASSES, true);
    CHECK_OK(ct_graph_backward(g, ct_cross_entropy(g, logits, n.labels, 0)));
    CHECK_OK(ct_graph_sgd(g, (ct_sgd_args){.lr = 0.05f, .momentum = 0.9f, .nesterov = true}));
    CHECK_OK(ct_backend_new(device, backend));
    CHECK_OK(ct_plan_new(g, *backend, 7, &n.plan));
    return n;
}

static net make_net(const char *device, int batch, int hidden, ct_backend **backend)
{
    return make_net_of(device, batch, hidden, false, backend);
}

static void net_free(net *n, ct_backend *backend)
{
    ct_plan_free(n->plan);
    ct_graph_free(n->graph);
    ct_backend_free(backend);
}

/* Step `step`'s batch: images and labels of BATCH items. */
static void batch_of(int step, float *images, int64_t *labels)
{
    harness_fill(images, (int64_t)BATCH * IMAGE, 100 + (uint64_t)step, -1.0f, 1.0f);
    for (int i = 0; i < BATCH; i++)
        labels[i] = (i * 3 + step) % CLASSES;
}

/* Items [first, first + count) of the batch into n's inputs. */
static void feed(net *n, const float *images, const int64_t *labels, int first, int count)
{
    CHECK_OK(ct_plan_write(n->plan, n->x, images + (size_t)first * IMAGE,
                           sizeof *images * (size_t)count * IMAGE));
    CHECK_OK(ct_plan_write(n->plan, n->labels, labels + first, sizeof *labels * (size_t)count));
}

/* Every parameter (and, with buffers, every float buffer: running
 * statistics), concatenated into out; how many floats. */
static int read_state(net *n, bool buffers, float *out, int capacity)
{
    int used = 0;
    for (int i = 0; i < ct_graph_n_state(n->graph); i++) {
        ct_tensor *t = ct_graph_state(n->graph, i);
        bool wanted = ct_tensor_is_param(t) || (buffers && ct_tensor_dtype(t) == CT_F32);
        if (!wanted || used + ct_tensor_numel(t) > capacity)
            continue;
        CHECK_OK(ct_plan_read(n->plan, t, out + used, ct_tensor_bytes(t)));
        used += (int)ct_tensor_numel(t);
    }
    return used;
}

static int read_params(net *n, float *out, int capacity)
{
    return read_state(n, false, out, capacity);
}

enum { PARAMS = 6 * 2 * 9 + 6 + 6 * SIDE * SIDE * CLASSES + CLASSES };

static void replicas_equal_one_plan_of_twice_the_batch(void)
{
    ct_backend *one_backend, *backends[2];
    net one = make_net("cuda:0", BATCH, 6, &one_backend);
    net halves[2] = {make_net("cuda:0", HALF, 6, &backends[0]),
                     make_net("cuda:1", HALF, 6, &backends[1])};
    ct_replicas *replicas = NULL;
    CHECK_OK(ct_replicas_new((ct_plan *[]){halves[0].plan, halves[1].plan}, 2, 0, &replicas));
    float images[BATCH * IMAGE];
    int64_t labels[BATCH];
    for (int step = 0; step < STEPS; step++) {
        batch_of(step, images, labels);
        feed(&one, images, labels, 0, BATCH);
        CHECK_OK(ct_plan_run(one.plan, CT_TRAIN));
        feed(&halves[0], images, labels, 0, HALF);
        feed(&halves[1], images, labels, HALF, HALF);
        CHECK_OK(ct_replicas_run(replicas, CT_TRAIN));
    }
    float expected[PARAMS], got[2][PARAMS];
    CHECK(read_params(&one, expected, PARAMS) == PARAMS, "parameters");
    read_params(&halves[0], got[0], PARAMS);
    read_params(&halves[1], got[1], PARAMS);
    double gap = harness_rel_err_f32(expected, got[0], PARAMS);
    CHECK(gap < 1e-5, "2 GPUs of %d vs 1 of %d: %g apart", HALF, BATCH, gap);
    CHECK(memcmp(got[0], got[1], sizeof got[0]) == 0, "the replicas differ after %d steps",
          STEPS);
    ct_dist_stats stats;
    CHECK_OK(ct_replicas_stats(replicas, &stats));
    CHECK(stats.steps == STEPS && stats.buckets == 1 && stats.bytes == sizeof(float) * PARAMS,
          "stats: %lld steps, %d buckets, %zu bytes", (long long)stats.steps, stats.buckets,
          stats.bytes);
    ct_replicas_free(replicas);
    net_free(&one, one_backend);
    net_free(&halves[0], backends[0]);
    net_free(&halves[1], backends[1]);
}

/* With batchnorm synchronized (ct_plan_set_sync_bn), two GPUs of HALF end
 * with the parameters and running statistics of one of BATCH; without it
 * each normalizes its own half, and they end elsewhere. */
static void sync_bn_replicas_equal_one_plan(void)
{
    enum { STATE = 8192 }; /* room for every f32 tensor of the state */
    ct_backend *one_backend, *backends[2][2];
    net one = make_net_of("cuda:0", BATCH, 6, true, &one_backend);
    float expected[STATE], got[2][STATE];
    net halves[2][2];
    ct_replicas *replicas[2] = {NULL, NULL};
    for (int sync = 0; sync < 2; sync++) {
        halves[sync][0] = make_net_of("cuda:0", HALF, 6, true, &backends[sync][0]);
        halves[sync][1] = make_net_of("cuda:1", HALF, 6, true, &backends[sync][1]);
        CHECK_OK(ct_replicas_new((ct_plan *[]){halves[sync][0].plan, halves[sync][1].plan}, 2,
                                 0, &replicas[sync]));
        for (int k = 0; sync && k < 2; k++)
            CHECK_OK(ct_plan_set_sync_bn(halves[sync][k].plan, true));
    }
    float images[BATCH * IMAGE];
    int64_t labels[BATCH];
    for (int step = 0; step < STEPS; step++) {
        batch_of(step, images, labels);
        feed(&one, images, labels, 0, BATCH);
        CHECK_OK(ct_plan_run(one.plan, CT_TRAIN));
        for (int sync = 0; sync < 2; sync++) {
            feed(&halves[sync][0], images, labels, 0, HALF);
            feed(&halves[sync][1], images, labels, HALF, HALF);
            CHECK_OK(ct_replicas_run(replicas[sync], CT_TRAIN));
        }
    }
    int count = read_state(&one, true, expected, STATE);
    CHECK(count > PARAMS - 6 * CLASSES, "%d floats of state", count); /* with running stats */
    for (int sync = 0; sync < 2; sync++) {
        CHECK(read_state(&halves[sync][0], true, got[0], STATE) == count &&
                  read_state(&halves[sync][1], true, got[1], STATE) == count,
              "the replicas' state");
        double gap = harness_rel_err_f32(expected, got[0], count);
        if (sync)
            CHECK(gap < 1e-5, "synchronized: 2 GPUs of %d vs 1 of %d: %g apart", HALF, BATCH,
                  gap);
        else
            CHECK(gap > 1e-3, "per-GPU batchnorm ended %g from one of %d", gap, BATCH);
        /* (unsynchronized, each GPU keeps its own running statistics) */
        CHECK(!sync || memcmp(got[0], got[1], sizeof(float) * (size_t)count) == 0,
              "the synchronized replicas differ");
        ct_replicas_free(replicas[sync]);
        net_free(&halves[sync][0], backends[sync][0]);
        net_free(&halves[sync][1], backends[sync][1]);
    }
    net_free(&one, one_backend);
}

/* A NaN in one GPU's images with --check-numerics: its step stops in the
 * forward pass, the other's ends (the stopped one starts the sums it owed),
 * the run names the stopped plan, and the replicas refuse another step. */
static void failed_step_ends_every_replica(void)
{
    ct_backend *backends[2];
    net halves[2] = {make_net("cuda:0", HALF, 6, &backends[0]),
                     make_net("cuda:1", HALF, 6, &backends[1])};
    ct_replicas *replicas = NULL;
    CHECK_OK(ct_replicas_new((ct_plan *[]){halves[0].plan, halves[1].plan}, 2, 0, &replicas));
    CHECK_OK(ct_plan_set_check_numerics(halves[1].plan, true));
    float images[BATCH * IMAGE];
    int64_t labels[BATCH];
    batch_of(0, images, labels);
    feed(&halves[0], images, labels, 0, HALF);
    CHECK_OK(ct_replicas_run(replicas, CT_TRAIN));
    images[HALF * IMAGE + 5] = NAN;
    feed(&halves[1], images, labels, HALF, HALF);
    ct_status status = ct_replicas_run(replicas, CT_TRAIN);
    CHECK(status == CT_ERR_NUMERIC && strstr(ct_last_error(), "plan 1 (of 2 replicas)"),
          "status %d: %s", (int)status, ct_last_error());
    CHECK(ct_replicas_run(replicas, CT_TRAIN) == CT_ERR_STATE, "a broken set ran again");
    ct_replicas_free(replicas);
    net_free(&halves[0], backends[0]);
    net_free(&halves[1], backends[1]);
}

static void one_gpu_twice_refused(void)
{
    ct_backend *backends[2];
    net halves[2] = {make_net("cuda:0", HALF, 6, &backends[0]),
                     make_net("cuda:0", HALF, 6, &backends[1])};
    ct_replicas *replicas = NULL;
    ct_status status =
        ct_replicas_new((ct_plan *[]){halves[0].plan, halves[1].plan}, 2, 0, &replicas);
    CHECK(status == CT_ERR_ARG && strstr(ct_last_error(), "both on cuda:0") && !replicas,
          "status %d: %s", (int)status, ct_last_error());
    net_free(&halves[0], backends[0]);
    net_free(&halves[1], backends[1]);
}

/* On the CPU: plans of two models, bad arguments, and one plan alone. */
static void refusals_and_one_plan(void)
{
    ct_backend *backends[2];
    net a = make_net("cpu", HALF, 6, &backends[0]);
    net b = make_net("cpu", HALF, 7, &backends[1]);
    ct_replicas *replicas = NULL;
    ct_status status = ct_replicas_new((ct_plan *[]){a.plan, b.plan}, 2, 0, &replicas);
    CHECK(status == CT_ERR_ARG && strstr(ct_last_error(), "not of one model"), "status %d: %s",
          (int)status, ct_last_error());
    CHECK(ct_replicas_new((ct_plan *[]){a.plan, NULL}, 2, 0, &replicas) == CT_ERR_ARG,
          "a NULL plan");
    CHECK(ct_replicas_new((ct_plan *[]){a.plan}, 0, 0, &replicas) == CT_ERR_ARG, "no plans");
    CHECK(ct_replicas_run(NULL, CT_TRAIN) == CT_ERR_ARG, "NULL replicas");
    ct_replicas_free(NULL);

    float images[BATCH * IMAGE], before[PARAMS], after[PARAMS];
    int64_t labels[BATCH];
    batch_of(0, images, labels);
    feed(&a, images, labels, 0, HALF);
    read_params(&a, before, PARAMS);
    CHECK_OK(ct_replicas_new((ct_plan *[]){a.plan}, 1, 0, &replicas));
    CHECK_OK(ct_replicas_run(replicas, CT_TRAIN));
    read_params(&a, after, PARAMS);
    CHECK(memcmp(before, after, sizeof before) != 0, "one plan alone did not train");
    ct_replicas_free(replicas);
    net_free(&a, backends[0]);
    net_free(&b, backends[1]);
}

/* CT_REQUIRE_GPUS=2 (the emulated suite, which has two devices) or
 * CT_REQUIRE_GPU=1 on a machine without any GPU: a skip would hide a fault.
 * A one-GPU machine skips the two-GPU cases even under CT_REQUIRE_GPU. */
static bool two_gpus_required(void)
{
    const char *gpus = getenv("CT_REQUIRE_GPUS");
    if (gpus && atoi(gpus) >= 2)
        return true;
    if (!getenv("CT_REQUIRE_GPU"))
        return false;
    ct_backend *one = NULL;
    if (ct_backend_new("cuda:0", &one) != CT_OK)
        return true;
    ct_backend_free(one);
    return false;
}

int main(void)
{
    RUN(refusals_and_one_plan);
    ct_backend *probe = NULL;
    if (ct_backend_new("cuda:1", &probe) == CT_OK) {
        ct_backend_free(probe);
        RUN(replicas_equal_one_plan_of_twice_the_batch);
        RUN(sync_bn_replicas_equal_one_plan);
        RUN(failed_step_ends_every_replica);
        RUN(one_gpu_twice_refused);
    } else if (two_gpus_required()) {
        printf("FAIL cuda_cases (two CUDA devices needed: %s)\n", ct_last_error());
        harness_failed++;
    } else {
        fprintf(stderr, "test_replicas: skipped 4 cases on two GPUs: %s\n", ct_last_error());
    }
    return harness_finish();
}
