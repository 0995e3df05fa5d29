/*
 * What inference keeps between runs (graph/prepared.h): the CPU's Winograd
 * convolution transforms its weights once and reuses them, and its output
 * must follow every change of those weights: a ct_plan_write (a load, a
 * new checkpoint), a training step.  Each case compares a plan that kept
 * the transform with a fresh plan given the same weights, bit for bit (the
 * same kernel computes both).
 */
#include <string.h>

#include "cpu/simd.h"
#include "cuttle.h"
#include "graph/plan.h"
#include "harness.h"

/* x [2, 32, 12, 12] -> conv 3x3 pad 1 -> y: 18 tiles of 4x4, Winograd's */
enum { N = 2, C = 32, S = 12, CLASSES = C };
#define X_COUNT (N * C * S * S)
#define W_COUNT (C * C * 9)
#define U_BYTES (36 * C * C * sizeof(float))

typedef struct net {
    ct_graph *graph;
    ct_tensor *x, *w, *bias, *y, *labels;
} net;

typedef enum net_kind {
    NET_PLAIN,   /* the convolution */
    NET_TRAIN,   /* and a loss and SGD after it */
    NET_COMPUTED /* on a computed weight, w + w: nothing may be kept */
} net_kind;

static net make_net(net_kind kind)
{
    net n = {ct_graph_new(), NULL, NULL, NULL, NULL, NULL};
    n.x = ct_input(n.graph, "x", CT_F32, 4, (int64_t[]){N, C, S, S});
    n.w = ct_param(n.graph, "conv.weight", 4, (int64_t[]){C, C, 3, 3}, CT_INIT_CONST, 0.0f);
    n.bias = ct_param(n.graph, "conv.bias", 1, (int64_t[]){C}, CT_INIT_CONST, 0.0f);
    ct_tensor *w = kind == NET_COMPUTED ? ct_add(n.graph, n.w, n.w) : n.w;
    n.y = ct_conv2d(n.graph, n.x, w, n.bias, (ct_conv_args){.pad = {1, 1}});
    ct_tensor_keep(n.y);
    if (kind == NET_TRAIN) {
        n.labels = ct_input(n.graph, "labels", CT_I32, 1, (int64_t[]){N});
        ct_tensor *logits = ct_flatten(n.graph, ct_global_avgpool(n.graph, n.y));
        CHECK_OK(ct_graph_backward(n.graph, ct_cross_entropy(n.graph, logits, n.labels, 0.0f)));
        CHECK_OK(ct_graph_sgd(n.graph, (ct_sgd_args){.lr = 0.5f}));
    }
    return n;
}

static float zeros[C];

/* bias NULL: zeros */
static void write_inputs(ct_plan *plan, const net *n, const float *x, const float *w,
                         const float *bias)
{
    CHECK_OK(ct_plan_write(plan, n->x, x, sizeof(float) * X_COUNT));
    CHECK_OK(ct_plan_write(plan, n->w, w, sizeof(float) * W_COUNT));
    CHECK_OK(ct_plan_write(plan, n->bias, bias ? bias : zeros, sizeof zeros));
    if (n->labels)
        CHECK_OK(ct_plan_write(plan, n->labels, (int32_t[]){3, 17}, 2 * sizeof(int32_t)));
}

/* A net, its plan on the Winograd kernels given x, w and bias (NULL:
 * zeros), after one inference run. */
typedef struct session {
    net n;
    ct_backend *backend;
    ct_plan *plan; /* NULL when it could not be made (a failed CHECK says why) */
} session;

static session open_session(net_kind kind, const float *x, const float *w, const float *bias)
{
    session s = {make_net(kind), NULL, NULL};
    CHECK_OK(ct_backend_new("cpu", &s.backend));
    CHECK_OK(ct_backend_set_kernels(s.backend, "winograd"));
    CHECK_OK(ct_plan_new(s.n.graph, s.backend, 1, &s.plan));
    if (s.plan) {
        write_inputs(s.plan, &s.n, x, w, bias);
        CHECK_OK(ct_plan_run(s.plan, CT_EVAL));
    }
    return s;
}

static void close_session(session *s)
{
    ct_plan_free(s->plan);
    ct_backend_free(s->backend);
    ct_graph_free(s->n.graph);
}

/* y of a fresh plan given x, w and bias. */
static void fresh_eval(net_kind kind, const float *x, const float *w, const float *bias,
                       float *y)
{
    session s = open_session(kind, x, w, bias);
    if (s.plan)
        CHECK_OK(ct_plan_read(s.plan, s.n.y, y, sizeof(float) * X_COUNT));
    close_session(&s);
}

static bool have_winograd(void)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    return ct_cpu_simd_avx2();
#else
    return false;
#endif
}

static float x_values[X_COUNT], w_first[W_COUNT], w_second[W_COUNT];
static float y_kept[X_COUNT], y_again[X_COUNT], y_fresh[X_COUNT];

static void eval_follows_written_weights_on(ct_plan *plan, const net *n)
{
    CHECK(ct_plan_kept_bytes(plan) == U_BYTES, "kept %zu bytes, expected the transform's %zu",
          ct_plan_kept_bytes(plan), U_BYTES);
    CHECK_OK(ct_plan_read(plan, n->y, y_kept, sizeof y_kept));
    CHECK_OK(ct_plan_run(plan, CT_EVAL)); /* on the kept transform */
    CHECK(ct_plan_kept_made(plan) == 1, "the transform was made %d times in two runs",
          (int)ct_plan_kept_made(plan));
    CHECK_OK(ct_plan_read(plan, n->y, y_again, sizeof y_again));
    CHECK(memcmp(y_kept, y_again, sizeof y_kept) == 0, "a second run changed y");
    fresh_eval(NET_PLAIN, x_values, w_first, NULL, y_fresh);
    CHECK(memcmp(y_kept, y_fresh, sizeof y_kept) == 0, "the kept transform is not a fresh one");

    /* new weights: the next run transforms them */
    CHECK_OK(ct_plan_write(plan, n->w, w_second, sizeof w_second));
    CHECK_OK(ct_plan_run(plan, CT_EVAL));
    CHECK_OK(ct_plan_read(plan, n->y, y_kept, sizeof y_kept));
    fresh_eval(NET_PLAIN, x_values, w_second, NULL, y_fresh);
    CHECK(memcmp(y_kept, y_fresh, sizeof y_kept) == 0,
          "after ct_plan_write of new weights, y is not what they give");
    CHECK(memcmp(y_kept, y_again, sizeof y_kept) != 0, "the two weights gave the same y");
    CHECK(ct_plan_kept_made(plan) == 2, "made %d times", (int)ct_plan_kept_made(plan));
    /* a new input alone keeps the transform */
    CHECK_OK(ct_plan_write(plan, n->x, x_values, sizeof x_values));
    CHECK_OK(ct_plan_run(plan, CT_EVAL));
    CHECK(ct_plan_kept_made(plan) == 2, "a new input made the transform again");
    CHECK(ct_plan_kept_bytes(plan) == U_BYTES, "kept %zu bytes after a new input",
          ct_plan_kept_bytes(plan));
}

static void eval_follows_training_steps_on(ct_plan *plan, const net *n)
{
    CHECK_OK(ct_plan_read(plan, n->y, y_again, sizeof y_again));
    CHECK_OK(ct_plan_run(plan, CT_TRAIN)); /* the forward on w_first, then w changes */
    CHECK(ct_plan_kept_bytes(plan) == U_BYTES, "a training step kept %zu bytes more",
          ct_plan_kept_bytes(plan) - U_BYTES);
    CHECK_OK(ct_plan_run(plan, CT_EVAL));
    CHECK(ct_plan_kept_made(plan) == 2, "made %d times around a training step",
          (int)ct_plan_kept_made(plan));
    CHECK_OK(ct_plan_read(plan, n->y, y_kept, sizeof y_kept));
    static float trained[W_COUNT], trained_bias[C];
    CHECK_OK(ct_plan_read(plan, n->w, trained, sizeof trained));
    CHECK_OK(ct_plan_read(plan, n->bias, trained_bias, sizeof trained_bias));
    CHECK(memcmp(trained, w_first, sizeof trained) != 0, "the step did not change the weights");
    fresh_eval(NET_TRAIN, x_values, trained, trained_bias, y_fresh);
    CHECK(memcmp(y_kept, y_fresh, sizeof y_kept) == 0,
          "after a training step, y is not what the trained weights give");
    CHECK(memcmp(y_kept, y_again, sizeof y_kept) != 0, "the step left y as it was");
}

/* A weight computed from a parameter (as a 16-bit cast of the f32 weight
 * is) changes when the parameter is written, which no count of the
 * computed tensor shows: such a weight is transformed on every run. */
static void computed_weights_are_not_kept_on(ct_plan *plan, const net *n)
{
    CHECK(ct_plan_kept_bytes(plan) == 0, "kept %zu bytes for a computed weight",
          ct_plan_kept_bytes(plan));
    CHECK_OK(ct_plan_write(plan, n->w, w_second, sizeof w_second));
    CHECK_OK(ct_plan_run(plan, CT_EVAL));
    CHECK_OK(ct_plan_read(plan, n->y, y_kept, sizeof y_kept));
    fresh_eval(NET_COMPUTED, x_values, w_second, NULL, y_fresh);
    CHECK(memcmp(y_kept, y_fresh, sizeof y_kept) == 0,
          "after a write of the parameter, y is not what the new weight gives");
}

/* Each case on a session of its kind, given x_values and w_first. */
static void in_session(net_kind kind, void (*body)(ct_plan *plan, const net *n))
{
    session s = open_session(kind, x_values, w_first, NULL);
    if (s.plan)
        body(s.plan, &s.n);
    close_session(&s);
}

static void eval_follows_written_weights(void)
{
    in_session(NET_PLAIN, eval_follows_written_weights_on);
}

static void eval_follows_training_steps(void)
{
    in_session(NET_TRAIN, eval_follows_training_steps_on);
}

static void computed_weights_are_not_kept(void)
{
    in_session(NET_COMPUTED, computed_weights_are_not_kept_on);
}

int main(void)
{
    if (!have_winograd()) {
        printf("test_prepared: skipped: no AVX2 kernels here (the Winograd convolution)\n");
        return 0;
    }
    harness_fill(x_values, X_COUNT, 1, -1, 1);
    harness_fill(w_first, W_COUNT, 2, -0.1f, 0.1f);
    harness_fill(w_second, W_COUNT, 3, -0.1f, 0.1f);
    RUN(eval_follows_written_weights);
    RUN(eval_follows_training_steps);
    RUN(computed_weights_are_not_kept);
    return harness_finish();
}
