/*
 * Graph, plan and executor: memory planning, determinism, evaluation mode,
 * and the errors that building and running return.
 */
#include <math.h>
#include <string.h>

#include "cuttle.h"
#include "core/error.h"
#include "graph/backend.h"
#include "graph/memplan.h"
#include "graph/plan.h"
#include "ops/ops.h"
#include "harness.h"

/* ---- memory plan ---------------------------------------------------------- */

static void test_memplan_no_live_overlap(void)
{
    enum { N = 200 };
    ct_lifetime items[N];
    size_t offsets[N];
    uint64_t state = 7;
    size_t total = 0;
    for (int i = 0; i < N; i++) {
        int first = (int)harness_uniform(&state, 0, 100);
        items[i].first = first;
        items[i].last = first + (int)harness_uniform(&state, 0, 20);
        items[i].bytes = 1 + (size_t)harness_uniform(&state, 0, 5000);
        total += items[i].bytes;
    }
    size_t peak = ct_memplan_layout(items, N, offsets);
    int overlaps = 0;
    for (int i = 0; i < N; i++) {
        CHECK(offsets[i] % CT_ARENA_ALIGNMENT == 0, "offset %zu unaligned", offsets[i]);
        CHECK(offsets[i] + items[i].bytes <= peak, "item %d ends past the peak", i);
        for (int j = i + 1; j < N; j++) {
            bool live_together = items[i].first <= items[j].last &&
                                 items[j].first <= items[i].last;
            bool share = offsets[i] < offsets[j] + items[j].bytes &&
                         offsets[j] < offsets[i] + items[i].bytes;
            overlaps += live_together && share;
        }
    }
    CHECK(overlaps == 0, "%d pairs of live tensors share memory", overlaps);
    CHECK(peak < total, "no reuse: peak %zu vs total %zu", peak, total);
}

/* ---- helpers ---------------------------------------------------------------- */

typedef struct cnn {
    ct_graph *graph;
    ct_tensor *x, *labels, *logits, *loss;
} cnn;

/* SimpleCNN on [batch,1,28,28] with dropout before the classifier. */
static cnn build_cnn(int batch, bool with_dropout, bool with_optimizer)
{
    cnn m = {0};
    m.graph = ct_graph_new();
    m.x = ct_input(m.graph, "x", CT_F32, 4, (int64_t[]){batch, 1, 28, 28});
    m.labels = ct_input(m.graph, "labels", CT_I64, 1, (int64_t[]){batch});
    ct_tensor *h = m.x;
    if (with_dropout)
        h = ct_dropout(m.graph, h, 0.2f);
    m.logits = ct_model_simplecnn(m.graph, h, 10);
    m.loss = ct_cross_entropy(m.graph, m.logits, m.labels, 0.1f);
    ct_tensor_keep(m.logits);
    CHECK_OK(ct_graph_status(m.graph));
    CHECK_OK(ct_graph_backward(m.graph, m.loss));
    if (with_optimizer) {
        ct_sgd_args sgd = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f,
                           .nesterov = true};
        CHECK_OK(ct_graph_sgd(m.graph, sgd));
    }
    return m;
}

static void write_batch(ct_plan *plan, const cnn *m, int batch, uint64_t seed)
{
    float *images = malloc(sizeof(float) * (size_t)batch * 28 * 28);
    int64_t *labels = malloc(sizeof(int64_t) * (size_t)batch);
    harness_fill(images, (int64_t)batch * 28 * 28, seed, -1, 1);
    for (int i = 0; i < batch; i++)
        labels[i] = (int64_t)((seed + (uint64_t)i * 7) % 10);
    CHECK_OK(ct_plan_write(plan, m->x, images, sizeof(float) * (size_t)batch * 28 * 28));
    CHECK_OK(ct_plan_write(plan, m->labels, labels, sizeof(int64_t) * (size_t)batch));
    free(images);
    free(labels);
}

/* Every parameter of the plan, concatenated. */
static float *read_params(ct_plan *plan, const ct_graph *graph, int64_t *count)
{
    *count = 0;
    for (int i = 0; i < ct_graph_n_state(graph); i++) {
        ct_tensor *t = ct_graph_state(graph, i);
        if (ct_tensor_is_param(t))
            *count += ct_tensor_numel(t);
    }
    float *all = malloc(sizeof(float) * (size_t)*count);
    int64_t at = 0;
    for (int i = 0; i < ct_graph_n_state(graph); i++) {
        ct_tensor *t = ct_graph_state(graph, i);
        if (!ct_tensor_is_param(t))
            continue;
        CHECK_OK(ct_plan_read(plan, t, all + at, ct_tensor_bytes(t)));
        at += ct_tensor_numel(t);
    }
    return all;
}

/* Train `steps` steps from `seed` and return the parameters. */
static float *train_params(uint64_t seed, int steps, int64_t *count, float *last_loss)
{
    cnn m = build_cnn(8, true, true);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    CHECK_OK(ct_plan_new(m.graph, backend, seed, &plan));
    for (int step = 0; step < steps; step++) {
        write_batch(plan, &m, 8, 100 + (uint64_t)step);
        CHECK_OK(ct_plan_run(plan, CT_TRAIN));
    }
    CHECK_OK(ct_plan_read(plan, m.loss, last_loss, sizeof *last_loss));
    float *params = read_params(plan, m.graph, count);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(m.graph);
    return params;
}

/* ---- determinism and memory ----------------------------------------------------- */

static void test_same_seed_same_training_bit_for_bit(void)
{
    int64_t count_a, count_b, count_c;
    float loss_a, loss_b, loss_c;
    float *a = train_params(1234, 4, &count_a, &loss_a);
    float *b = train_params(1234, 4, &count_b, &loss_b);
    float *c = train_params(999, 4, &count_c, &loss_c);
    CHECK(count_a == count_b && count_a == 44426, "parameter count %lld",
          (long long)count_a);
    CHECK(memcmp(a, b, sizeof(float) * (size_t)count_a) == 0,
          "same seed gave different parameters");
    CHECK(memcmp(&loss_a, &loss_b, sizeof loss_a) == 0, "same seed, losses %.9g vs %.9g",
          loss_a, loss_b);
    CHECK(memcmp(a, c, sizeof(float) * (size_t)count_a) != 0,
          "different seeds gave the same parameters");
    CHECK(isfinite(loss_a) && loss_a > 0, "loss %g", loss_a);
    free(a);
    free(b);
    free(c);
}

/* The arena of a plan on backend `device` for SimpleCNN at batch `batch`. */
static size_t simplecnn_arena(const char *device, int batch)
{
    cnn m = build_cnn(batch, false, true);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new(device, &backend));
    if (backend)
        CHECK_OK(ct_plan_new(m.graph, backend, 1, &plan));
    size_t arena = plan ? ct_plan_arena_bytes(plan) : 0;
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(m.graph);
    return arena;
}

static void test_arena_reuses_memory(void)
{
    cnn m = build_cnn(64, false, true);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu:1", &backend));
    CHECK_OK(ct_plan_new(m.graph, backend, 1, &plan));
    /* The activations of one SimpleCNN step at batch 64 (forward outputs alone
     * are ~2.5 MB); with reuse the arena must stay well below their sum. */
    size_t arena = ct_plan_arena_bytes(plan);
    CHECK(arena > 1000000 && arena < 2000000, "arena %zu bytes", arena);
    /* On more threads than one a plan of at most 4 MiB gives each tensor its
     * own bytes (cpu/backend.c), a larger one reuses them as on one thread. */
    ct_backend *two = NULL;
    CHECK_OK(ct_backend_new("cpu:2", &two));
    if (two && strstr(ct_backend_name(two), "2 threads")) { /* else: no OpenMP */
        size_t apart = simplecnn_arena("cpu:2", 64);
        CHECK(apart > arena + 300000 && apart <= (4u << 20),
              "two threads: arena %zu bytes, %zu on one", apart, arena);
        size_t large = simplecnn_arena("cpu:1", 256), large_two = simplecnn_arena("cpu:2", 256);
        CHECK(large > (4u << 20) && large_two == large,
              "batch 256: arena %zu bytes on one thread, %zu on two", large, large_two);
    }
    ct_backend_free(two);
    CHECK(ct_plan_state_bytes(plan) >= 44426 * 4 * 2, "state %zu bytes",
          ct_plan_state_bytes(plan));
    CHECK(ct_plan_n_nodes(plan, CT_EVAL) < ct_plan_n_nodes(plan, CT_TRAIN),
          "eval runs %d nodes, train %d", ct_plan_n_nodes(plan, CT_EVAL),
          ct_plan_n_nodes(plan, CT_TRAIN));
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(m.graph);
}

/* The CPU fuses SimpleCNN's backward as CUDA does (graph/fuse.c): each
 * relu before a max pool has its backward in the pool's, every bias
 * gradient is computed by its layer's weight gradient, the loss's gradient
 * by the loss (its seed fill with it), the relu_bwd of fc1 and fc2 by the
 * backward data of fc2 and fc3, each max pool by its conv's forward; and
 * (the CPU alone) conv1's pool backward, with its relu's, by conv1's weight
 * gradient (ct_fuse_pool_bwd).  What runs: no relu_bwd, channel_sum,
 * cross_entropy_bwd, fill or max pool, one max pool backward; the math of
 * the step (ct_plan_flops) counts the fused nodes' too.  A step gives the
 * unfused plan's loss and parameters, bit for bit, but for conv1's, whose
 * gradient sums the same products in another order (within 1e-6 of the
 * largest); the next step's loss then agrees to 1e-5. */
static void test_cpu_training_step_fuses_relu_bwd_and_bias_grads(void)
{
    cnn m = build_cnn(8, false, true);
    ct_backend *backend = NULL, *unfused = NULL;
    ct_plan *plan = NULL, *reference = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    CHECK_OK(ct_backend_new("cpu", &unfused));
    unfused->unfused = true;
    CHECK_OK(ct_plan_new(m.graph, backend, 1, &plan));
    CHECK_OK(ct_plan_new(m.graph, unfused, 1, &reference));
    int n = 0, relu_bwd = 0, channel_sum = 0, loss_grad = 0, pools = 0, pool_bwd = 0;
    const ct_tensor *const *runs = ct_plan_runs(plan, CT_TRAIN, &n);
    for (int i = 0; i < n; i++) {
        relu_bwd += runs[i]->op == CT_OP_RELU_BWD;
        channel_sum += runs[i]->op == CT_OP_CHANNEL_SUM;
        loss_grad += runs[i]->op == CT_OP_CROSS_ENTROPY_BWD || runs[i]->op == CT_OP_FILL;
        pools += runs[i]->op == CT_OP_MAXPOOL2D;
        pool_bwd += runs[i]->op == CT_OP_MAXPOOL2D_BWD;
    }
    CHECK(relu_bwd == 0 && channel_sum == 0 && loss_grad == 0 && pools == 0 && pool_bwd == 1,
          "%d relu_bwd, %d channel_sum, %d cross_entropy_bwd and fill, %d max pools, "
          "%d max pool backwards run", relu_bwd, channel_sum, loss_grad, pools, pool_bwd);
    /* fewer than unfused: the 4 forward relus, 4 relu_bwd, 5 bias sums,
     * the loss's backward and its seed, the 2 max pools (their convs pool
     * as they store, and write their own outputs for the pools' backward),
     * conv1's max pool backward */
    int n_unfused = 0;
    ct_plan_runs(reference, CT_TRAIN, &n_unfused);
    CHECK(n_unfused - n == 4 + 4 + 5 + 2 + 2 + 1, "train runs %d nodes, %d unfused", n,
          n_unfused);
    CHECK(ct_plan_flops(plan, CT_TRAIN) == ct_plan_flops(reference, CT_TRAIN),
          "%.0f FLOPs fused, %.0f unfused", ct_plan_flops(plan, CT_TRAIN),
          ct_plan_flops(reference, CT_TRAIN));
    float loss[2][2];
    ct_plan *plans[2] = {plan, reference};
    for (int p = 0; p < 2; p++) {
        write_batch(plans[p], &m, 8, 40);
        CHECK_OK(ct_plan_run(plans[p], CT_TRAIN));
        CHECK_OK(ct_plan_read(plans[p], m.loss, &loss[p][0], sizeof(float)));
    }
    CHECK(memcmp(&loss[0][0], &loss[1][0], sizeof(float)) == 0, "losses differ: %.9g and %.9g",
          loss[0][0], loss[1][0]);
    for (int i = 0; i < ct_graph_n_state(m.graph); i++) {
        ct_tensor *t = ct_graph_state(m.graph, i);
        if (!ct_tensor_is_param(t))
            continue;
        int64_t count = ct_tensor_numel(t);
        float *a = malloc(sizeof(float) * (size_t)count), *b = malloc(sizeof(float) * (size_t)count);
        CHECK_OK(ct_plan_read(plan, t, a, ct_tensor_bytes(t)));
        CHECK_OK(ct_plan_read(reference, t, b, ct_tensor_bytes(t)));
        const char *name = ct_tensor_name(t);
        if (strncmp(name, "conv1.", 6) == 0) {
            float largest = 0.0f, worst = 0.0f;
            for (int64_t k = 0; k < count; k++) {
                largest = fmaxf(largest, fabsf(b[k]));
                worst = fmaxf(worst, fabsf(a[k] - b[k]));
            }
            CHECK(worst <= 1e-6f * largest, "%s: fused and unfused differ by %g (largest %g)",
                  name, worst, largest);
        } else {
            CHECK(memcmp(a, b, sizeof(float) * (size_t)count) == 0,
                  "%s: fused and unfused steps differ", name);
        }
        free(a);
        free(b);
    }
    for (int p = 0; p < 2; p++) {
        write_batch(plans[p], &m, 8, 41);
        CHECK_OK(ct_plan_run(plans[p], CT_TRAIN));
        CHECK_OK(ct_plan_read(plans[p], m.loss, &loss[p][1], sizeof(float)));
    }
    CHECK(fabsf(loss[0][1] - loss[1][1]) <= 1e-5f * fabsf(loss[1][1]),
          "second losses differ: %.9g and %.9g", loss[0][1], loss[1][1]);
    ct_plan_free(plan);
    ct_plan_free(reference);
    ct_backend_free(backend);
    ct_backend_free(unfused);
    ct_graph_free(m.graph);
}

/* ResNet-18 (the model file) on [2, 3, 16, 16], with a loss and SGD when
 * `training`, else its forward pass alone (the layout that forward gives:
 * each activation dies at its last reader). */
static cnn build_resnet18(bool training)
{
    cnn m = {0};
    char *text = NULL;
    CHECK_OK(ct_model_source("resnet18", &text));
    m.graph = ct_graph_new();
    m.x = ct_input(m.graph, "x", CT_F32, 4, (int64_t[]){2, 3, 16, 16});
    m.logits = ct_model_build(m.graph, text, m.x, 10);
    free(text);
    ct_tensor_keep(m.logits);
    if (training) {
        m.labels = ct_input(m.graph, "labels", CT_I64, 1, (int64_t[]){2});
        m.loss = ct_cross_entropy(m.graph, m.logits, m.labels, 0.0f);
        CHECK_OK(ct_graph_backward(m.graph, m.loss));
        CHECK_OK(ct_graph_sgd(m.graph, (ct_sgd_args){.lr = 0.1f, .momentum = 0.9f}));
    }
    CHECK_OK(ct_graph_status(m.graph));
    return m;
}

/* A residual block's add computes its batchnorms (bn2, and the
 * downsampling shortcut's): ResNet-18 runs 11 of its 20 applies inside its
 * adds, in training and in evaluation, with the bits of the unfused plan.
 * Forward only, the downsampling convolution runs between bn2's apply and
 * the add, where bn2's input would have died: the plan keeps it alive to
 * the add (the same logits as unfused). */
/* A NaN in conv1's bias, with numerics checked: the step stops at conv1,
 * in training (where conv1 stores its pool's argmax codes, not its
 * values) and in evaluation (where it writes only the pool), found in the
 * max pool it computes. */
static void test_check_numerics_sees_through_the_fused_pool(void)
{
    cnn m = build_cnn(8, false, true);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    CHECK_OK(ct_plan_new(m.graph, backend, 1, &plan));
    ct_tensor *bias = ct_graph_find(m.graph, "conv1.bias");
    CHECK(bias != NULL, "no conv1.bias");
    if (!plan || !bias)
        return;
    CHECK_OK(ct_plan_set_check_numerics(plan, true));
    write_batch(plan, &m, 8, 44);
    CHECK_OK(ct_plan_run(plan, CT_TRAIN));
    float values[6];
    CHECK_OK(ct_plan_read(plan, bias, values, sizeof values));
    values[2] = NAN;
    CHECK_OK(ct_plan_write(plan, bias, values, sizeof values));
    for (int mode = 0; mode < 2; mode++) {
        ct_status status = ct_plan_run(plan, mode == 0 ? CT_TRAIN : CT_EVAL);
        const char *message = ct_last_error();
        CHECK(status == CT_ERR_NUMERIC && strstr(message, "layer 'conv1'") &&
                  strstr(message, "(conv2d)") && strstr(message, "of the max pool it computes"),
              "%s: %s (%s)", mode == 0 ? "training" : "evaluation", ct_status_name(status),
              message);
    }
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(m.graph);
}

static void test_residual_add_computes_its_batchnorms(void)
{
    ct_backend *backend = NULL, *unfused = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    CHECK_OK(ct_backend_new("cpu", &unfused));
    unfused->unfused = true;
    for (int training = 1; training >= 0; training--) {
        cnn m = build_resnet18(training);
        ct_plan *plans[2] = {NULL, NULL};
        CHECK_OK(ct_plan_new(m.graph, backend, 3, &plans[0]));
        CHECK_OK(ct_plan_new(m.graph, unfused, 3, &plans[1]));
        for (int mode = training ? CT_TRAIN : CT_EVAL; mode <= CT_EVAL; mode++) {
            int fused = ct_plan_count_runs(plans[0], mode, CT_OP_BN_APPLY);
            int all = ct_plan_count_runs(plans[1], mode, CT_OP_BN_APPLY);
            CHECK(all == 20 && fused == 9, "%s: %d of %d batchnorm applies run on their own",
                  mode == CT_TRAIN ? "train" : "eval", fused, all);
        }
        float logits[2][2 * 10];
        float *params[2] = {NULL, NULL};
        int64_t count = 0;
        for (int p = 0; p < 2; p++) {
            float images[2 * 3 * 16 * 16];
            harness_fill(images, 2 * 3 * 16 * 16, 9, -1, 1);
            CHECK_OK(ct_plan_write(plans[p], m.x, images, sizeof images));
            if (training) {
                int64_t labels[2] = {3, 7};
                CHECK_OK(ct_plan_write(plans[p], m.labels, labels, sizeof labels));
                for (int step = 0; step < 2; step++)
                    CHECK_OK(ct_plan_run(plans[p], CT_TRAIN));
            }
            CHECK_OK(ct_plan_run(plans[p], CT_EVAL));
            CHECK_OK(ct_plan_read(plans[p], m.logits, logits[p], sizeof logits[p]));
            params[p] = read_params(plans[p], m.graph, &count);
        }
        CHECK(memcmp(logits[0], logits[1], sizeof logits[0]) == 0 &&
                  memcmp(params[0], params[1], sizeof(float) * (size_t)count) == 0,
              "%s: fused and unfused differ (logit 0: %.9g and %.9g)",
              training ? "training" : "forward only", logits[0][0], logits[1][0]);
        for (int p = 0; p < 2; p++) {
            free(params[p]);
            ct_plan_free(plans[p]);
        }
        ct_graph_free(m.graph);
    }
    ct_backend_free(backend);
    ct_backend_free(unfused);
}

static void test_eval_is_deterministic_and_does_not_train(void)
{
    cnn m = build_cnn(4, true, true);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu:1", &backend));
    CHECK_OK(ct_plan_new(m.graph, backend, 5, &plan));
    write_batch(plan, &m, 4, 3);
    float first[40], second[40];
    int64_t count;
    float *before = read_params(plan, m.graph, &count);
    CHECK_OK(ct_plan_run(plan, CT_EVAL));
    CHECK_OK(ct_plan_read(plan, m.logits, first, sizeof first));
    CHECK_OK(ct_plan_run(plan, CT_EVAL));
    CHECK_OK(ct_plan_read(plan, m.logits, second, sizeof second));
    float *after = read_params(plan, m.graph, &count);
    CHECK(memcmp(first, second, sizeof first) == 0, "eval runs differ (dropout on?)");
    CHECK(memcmp(before, after, sizeof(float) * (size_t)count) == 0, "eval changed weights");
    CHECK(ct_plan_step(plan) == 0, "eval advanced the step to %lld",
          (long long)ct_plan_step(plan));
    CHECK_OK(ct_plan_run(plan, CT_TRAIN));
    CHECK(ct_plan_step(plan) == 1, "train did not advance the step");
    free(before);
    free(after);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(m.graph);
}

/* ---- errors --------------------------------------------------------------------- */

static void test_run_refuses_bad_labels(void)
{
    cnn m = build_cnn(4, false, false);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    CHECK_OK(ct_plan_new(m.graph, backend, 5, &plan));
    write_batch(plan, &m, 4, 3);
    int64_t labels[4] = {1, 2, 10, 0};
    CHECK_OK(ct_plan_write(plan, m.labels, labels, sizeof labels));
    ct_status status = ct_plan_run(plan, CT_TRAIN);
    CHECK(status == CT_ERR_ARG, "status %s", ct_status_name(status));
    CHECK(strstr(ct_last_error(), "label 10 in row 2") != NULL, "message: %s",
          ct_last_error());
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(m.graph);
}

static void test_plan_access_errors(void)
{
    cnn m = build_cnn(2, false, false);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    CHECK_OK(ct_plan_new(m.graph, backend, 5, &plan));
    float small[3] = {1, 2, 3};
    CHECK(ct_plan_write(plan, m.x, small, sizeof small) == CT_ERR_ARG, "short write taken");
    CHECK(strstr(ct_last_error(), "6272 bytes") != NULL, "message: %s", ct_last_error());
    float logits[20];
    CHECK(ct_plan_write(plan, m.logits, logits, sizeof logits) == CT_ERR_ARG,
          "wrote a computed tensor");
    CHECK_OK(ct_plan_read(plan, m.logits, logits, sizeof logits));
    ct_tensor *w = ct_graph_find(m.graph, "conv1.weight");
    CHECK(w && ct_tensor_grad(w), "conv1.weight has no gradient");
    float grad[150];
    CHECK_OK(ct_plan_read(plan, ct_tensor_grad(w), grad, sizeof grad));
    /* A node added after planning invalidates the plan. */
    ct_relu(m.graph, m.logits);
    CHECK(ct_plan_run(plan, CT_TRAIN) == CT_ERR_STATE, "ran a stale plan");
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(m.graph);
}

static void test_build_errors(void)
{
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){2, 3, 8, 8});
    CHECK(ct_input(graph, "x", CT_F32, 1, (int64_t[]){2}) == NULL, "duplicate name taken");
    CHECK(ct_graph_status(graph) == CT_ERR_ARG, "status %d", ct_graph_status(graph));
    ct_graph_free(graph);

    graph = ct_graph_new();
    x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){2, 3, 8, 8});
    ct_tensor *y = ct_maxpool2d(graph, x, (ct_pool_args){.kernel = {9, 9}});
    CHECK(y == NULL && ct_graph_status(graph) == CT_ERR_SHAPE, "9x9 pool on 8x8 accepted");
    CHECK(strstr(ct_last_error(), "maxpool2d") && strstr(ct_last_error(), "[2,3,8,8]"),
          "message: %s", ct_last_error());
    /* Later calls with the NULL keep the first message. */
    CHECK(ct_relu(graph, y) == NULL, "relu of NULL");
    CHECK(strstr(ct_last_error(), "maxpool2d") != NULL, "first error lost: %s",
          ct_last_error());
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    CHECK(ct_plan_new(graph, backend, 1, &plan) == CT_ERR_SHAPE && !plan,
          "planned a broken graph");
    ct_backend_free(backend);
    ct_graph_free(graph);

    graph = ct_graph_new();
    x = ct_input(graph, "x", CT_F32, 2, (int64_t[]){2, 3});
    CHECK(ct_graph_sgd(graph, (ct_sgd_args){.lr = 0.1f}) == CT_ERR_STATE,
          "optimizer before backward");
    ct_tensor *relu = ct_relu(graph, x);
    CHECK(ct_graph_backward(graph, relu) == CT_ERR_SHAPE, "non-scalar loss accepted");
    ct_graph_free(graph);
}

/* An allocator that refuses every request, as a device that is full would. */
static ct_status refuse_alloc(ct_backend *backend, size_t bytes, void **out)
{
    (void)backend;
    *out = NULL;
    return ct_set_error(CT_ERR_MEMORY, "test allocator: refusing %zu bytes", bytes);
}

/* The plan puts its context in front of the backend's message and keeps that
 * message whole (the message is formatted from the buffer it is written to). */
static void test_plan_keeps_the_backend_allocation_error(void)
{
    cnn m = build_cnn(4, false, false);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu:1", &backend));
    CHECK_OK(ct_plan_new(m.graph, backend, 1, &plan));
    size_t arena = ct_plan_arena_bytes(plan);
    ct_plan_free(plan);

    ct_backend_i refusing = *backend->iface;
    refusing.alloc = refuse_alloc;
    backend->iface = &refusing;
    ct_status status = ct_plan_new(m.graph, backend, 1, &plan);
    CHECK(status == CT_ERR_MEMORY && !plan, "status %s", ct_status_name(status));
    char expected[512];
    snprintf(expected, sizeof expected,
             "ct_plan_new: cannot allocate the activation arena (%zu bytes) on %s: "
             "test allocator: refusing %zu bytes",
             arena, ct_backend_name(backend), arena);
    CHECK(strcmp(ct_last_error(), expected) == 0, "message:\n    %s\n  expected:\n    %s",
          ct_last_error(), expected);
    ct_backend_free(backend);
    ct_graph_free(m.graph);
}

/* Backward and the optimizers name the error that building the graph hit. */
static void test_earlier_graph_error_is_kept(void)
{
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){2, 3, 8, 8});
    ct_tensor *y = ct_maxpool2d(graph, x, (ct_pool_args){.kernel = {9, 9}});
    char first[512];
    snprintf(first, sizeof first, "%s", ct_last_error());
    char expected[600];

    CHECK(ct_graph_backward(graph, y) == CT_ERR_SHAPE, "backward of a broken graph");
    snprintf(expected, sizeof expected, "ct_graph_backward: the graph has an earlier error: %s",
             first);
    CHECK(strcmp(ct_last_error(), expected) == 0, "message:\n    %s\n  expected:\n    %s",
          ct_last_error(), expected);

    snprintf(first, sizeof first, "%s", ct_last_error());
    CHECK(ct_graph_sgd(graph, (ct_sgd_args){.lr = 0.1f}) == CT_ERR_SHAPE,
          "sgd on a broken graph");
    snprintf(expected, sizeof expected, "ct_graph_sgd: the graph has an earlier error: %s",
             first);
    CHECK(strcmp(ct_last_error(), expected) == 0, "message:\n    %s\n  expected:\n    %s",
          ct_last_error(), expected);
    ct_graph_free(graph);
}

static void test_backend_names(void)
{
    ct_backend *backend = NULL;
    CHECK(ct_backend_new("cpu:0", &backend) == CT_ERR_ARG && !backend, "cpu:0 accepted");
    CHECK(ct_backend_new("tpu", &backend) == CT_ERR_ARG, "tpu accepted");
    CHECK(strstr(ct_last_error(), "tpu") != NULL, "message: %s", ct_last_error());
    CHECK_OK(ct_backend_new("cpu:3", &backend));
    CHECK(strstr(ct_backend_name(backend), "3 threads") ||
              strstr(ct_backend_name(backend), "(1 thread,"), /* built without OpenMP */
          "name %s",
          ct_backend_name(backend));
    ct_backend_free(backend);
    ct_backend_free(NULL);
    ct_plan_free(NULL);
    ct_graph_free(NULL);
}

int main(void)
{
    RUN(test_memplan_no_live_overlap);
    RUN(test_same_seed_same_training_bit_for_bit);
    RUN(test_arena_reuses_memory);
    RUN(test_cpu_training_step_fuses_relu_bwd_and_bias_grads);
    RUN(test_check_numerics_sees_through_the_fused_pool);
    RUN(test_residual_add_computes_its_batchnorms);
    RUN(test_eval_is_deterministic_and_does_not_train);
    RUN(test_run_refuses_bad_labels);
    RUN(test_plan_access_errors);
    RUN(test_build_errors);
    RUN(test_plan_keeps_the_backend_allocation_error);
    RUN(test_earlier_graph_error_is_kept);
    RUN(test_backend_names);
    return harness_finish();
}
