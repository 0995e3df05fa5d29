/*
 * fp16's dynamic loss scaling and the steps it skips (graph/precision.c,
 * ops/optim.c), and a loss that is not finite in any precision: the step
 * updates nothing and ct_plan_find_nonfinite names the first op with an inf
 * or NaN (graph/nonfinite.c); with ct_plan_set_check_numerics, the step
 * stops at the first op that makes one.  On the CPU and, where there is one,
 * a CUDA device (emulated or real); tests/test_cuda_graph.c replays a
 * skipped step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "graph/impl.h"
#include "harness.h"

/* ---- fp16's loss scaling ------------------------------------------------------------ */

typedef struct scaled_mlp {
    ct_graph *graph;
    ct_plan *plan;
    ct_tensor *x, *labels;
} scaled_mlp;

/* An MLP (conv-free: two linear layers) with SGD (or Adam), planned on backend. */
static scaled_mlp make_mlp(ct_backend *backend, ct_precision precision, bool adam)
{
    scaled_mlp m = {.graph = ct_graph_new()};
    ct_graph *g = m.graph;
    m.x = ct_input(g, "x", CT_F32, 2, (int64_t[]){8, 12});
    m.labels = ct_input(g, "labels", CT_I64, 1, (int64_t[]){8});
    CHECK_OK(ct_graph_set_precision(g, precision));
    ct_tensor *h = ct_relu(g, ct_layer_linear(g, "fc1", m.x, 16, true));
    ct_tensor *loss = ct_cross_entropy(g, ct_layer_linear(g, "fc2", h, 5, true), m.labels, 0);
    CHECK_OK(ct_graph_backward(g, loss));
    if (adam)
        CHECK_OK(ct_graph_adam(g, ct_adam_defaults()));
    else
        CHECK_OK(ct_graph_sgd(g, (ct_sgd_args){.lr = 0.1f, .momentum = 0.9f}));
    CHECK_OK(ct_plan_new(g, backend, 3, &m.plan));
    float x[8 * 12];
    int64_t labels[8];
    harness_fill(x, 8 * 12, 17, -1.0f, 1.0f);
    for (int i = 0; i < 8; i++)
        labels[i] = i % 5;
    CHECK_OK(ct_plan_write(m.plan, m.x, x, sizeof x));
    CHECK_OK(ct_plan_write(m.plan, m.labels, labels, sizeof labels));
    return m;
}

static scaled_mlp make_scaled_mlp(ct_backend *backend, ct_precision precision)
{
    return make_mlp(backend, precision, false);
}

/* Every parameter of the plan, concatenated into out (at most capacity floats). */
static int read_params(scaled_mlp *m, float *out, int capacity)
{
    int used = 0;
    for (int i = 0; i < ct_graph_n_state(m->graph); i++) {
        ct_tensor *t = ct_graph_state(m->graph, i);
        if (!ct_tensor_is_param(t) || used + ct_tensor_numel(t) > capacity)
            continue;
        CHECK_OK(ct_plan_read(m->plan, t, out + used, ct_tensor_bytes(t)));
        used += (int)ct_tensor_numel(t);
    }
    return used;
}

enum { MLP_PARAMS = 12 * 16 + 16 + 16 * 5 + 5 };

/* A forced overflow skips the step (no parameter moves) and halves the
 * scale; growth_interval clean steps double it; scales that do not
 * overflow give the same update (the unscaling is exact). */
static void loss_scaler_on(ct_backend *backend)
{
    scaled_mlp m = make_scaled_mlp(backend, CT_PRECISION_FP16);
    CHECK(ct_plan_loss_scale(m.plan) == 65536.0f, "the first scale is %g",
          (double)ct_plan_loss_scale(m.plan));
    float before[MLP_PARAMS], after[MLP_PARAMS];
    CHECK(read_params(&m, before, MLP_PARAMS) == MLP_PARAMS, "parameters");
    CHECK_OK(ct_plan_set_loss_scale(m.plan, 0x1p100f, 2000)); /* 16-bit gradients overflow */
    CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
    read_params(&m, after, MLP_PARAMS);
    CHECK(ct_plan_step_skipped(m.plan) && ct_plan_skipped_steps(m.plan) == 1,
          "the overflowing step was not skipped");
    CHECK(memcmp(before, after, sizeof before) == 0, "a skipped step moved the parameters");
    CHECK(ct_plan_loss_scale(m.plan) == 0x1p99f, "scale %g after an overflow, not 2^99",
          (double)ct_plan_loss_scale(m.plan));
    CHECK_OK(ct_plan_set_loss_scale(m.plan, 0x1p10f, 3));
    for (int s = 0; s < 3; s++)
        CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
    read_params(&m, after, MLP_PARAMS);
    CHECK(!ct_plan_step_skipped(m.plan) && ct_plan_skipped_steps(m.plan) == 1,
          "a clean step was skipped");
    CHECK(ct_plan_loss_scale(m.plan) == 0x1p11f, "scale %g after 3 clean steps, not 2^11",
          (double)ct_plan_loss_scale(m.plan));
    CHECK(memcmp(before, after, sizeof before) != 0, "clean steps did not train");
    ct_plan_free(m.plan);
    ct_graph_free(m.graph);

    /* one step at 2^6 and at 2^12 from the same start: the same parameters */
    float updated[2][MLP_PARAMS];
    for (int k = 0; k < 2; k++) {
        m = make_scaled_mlp(backend, CT_PRECISION_FP16);
        CHECK_OK(ct_plan_set_loss_scale(m.plan, k == 0 ? 0x1p6f : 0x1p12f, 2000));
        CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
        read_params(&m, updated[k], MLP_PARAMS);
        ct_plan_free(m.plan);
        ct_graph_free(m.graph);
    }
    double gap = harness_rel_err_f32(updated[0], updated[1], MLP_PARAMS);
    CHECK(gap < 1e-6, "the scale changed the update by %g", gap);
}

/* A skipped step is no update for the optimizer, as in PyTorch (GradScaler
 * does not call the optimizer's step): after an overflow, the first clean
 * step is Adam's first (bias correction with t = 1) and SGD's first (its
 * momentum buffer set to the gradient), so the parameters end bit for bit
 * where one clean step from the same start leaves them. */
static void skipped_steps_are_not_updates(ct_backend *backend)
{
    for (int adam = 0; adam < 2; adam++) {
        float ends[2][MLP_PARAMS];
        for (int skip = 0; skip < 2; skip++) {
            scaled_mlp m = make_mlp(backend, CT_PRECISION_FP16, adam);
            if (skip) {
                CHECK_OK(ct_plan_set_loss_scale(m.plan, 0x1p100f, 2000));
                CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
                CHECK(ct_plan_step_skipped(m.plan), "the overflow was not skipped");
            }
            CHECK_OK(ct_plan_set_loss_scale(m.plan, 0x1p10f, 2000));
            CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
            CHECK(!ct_plan_step_skipped(m.plan), "a clean step was skipped");
            read_params(&m, ends[skip], MLP_PARAMS);
            ct_plan_free(m.plan);
            ct_graph_free(m.graph);
        }
        CHECK(memcmp(ends[0], ends[1], sizeof ends[0]) == 0,
              "%s: a skipped step counted as an update (%g apart)", adam ? "Adam" : "SGD",
              harness_rel_err_f32(ends[0], ends[1], MLP_PARAMS));
    }
}

/* bf16 and fp32 scale nothing. */
static void loss_scaler_off(ct_backend *backend)
{
    for (int p = 0; p < 2; p++) {
        scaled_mlp m = make_scaled_mlp(backend, p == 0 ? CT_PRECISION_BF16 : CT_PRECISION_FP32);
        CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
        CHECK(ct_plan_loss_scale(m.plan) == 1.0f && ct_plan_skipped_steps(m.plan) == 0,
              "scale %g", (double)ct_plan_loss_scale(m.plan));
        CHECK(ct_plan_set_loss_scale(m.plan, 2.0f, 10) == CT_ERR_STATE, "a scale was set");
        ct_plan_free(m.plan);
        ct_graph_free(m.graph);
    }
}

/* ---- a loss that is not finite ------------------------------------------------------- */

/* An inf planted in fc2's weight: the loss is NaN, the step updates
 * nothing, and running it again names fc2's linear (in bf16 the cast
 * making its 16-bit weight) as the first op with an inf or NaN (fc1 and its
 * relu are finite). */
static void nan_loss_names_the_first_op(ct_backend *backend, ct_precision precision)
{
    scaled_mlp m = make_scaled_mlp(backend, precision);
    ct_tensor *w2 = ct_graph_find(m.graph, "fc2.weight");
    float w[16 * 5];
    CHECK_OK(ct_plan_read(m.plan, w2, w, sizeof w));
    w[7] = INFINITY;
    CHECK_OK(ct_plan_write(m.plan, w2, w, sizeof w));
    float before[MLP_PARAMS], after[MLP_PARAMS];
    read_params(&m, before, MLP_PARAMS);
    CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
    read_params(&m, after, MLP_PARAMS);
    CHECK(ct_plan_step_skipped(m.plan), "%s: a NaN loss's step was not skipped",
          ct_precision_name(precision));
    CHECK(memcmp(before, after, sizeof before) == 0, "%s: the NaN step moved the parameters",
          ct_precision_name(precision));
    char where[256] = "?";
    ct_plan_set_step(m.plan, ct_plan_step(m.plan) - 1);
    CHECK_OK(ct_plan_find_nonfinite(m.plan, CT_TRAIN, where, sizeof where));
    /* bf16: the first is the 16-bit copy of the weight, a cast */
    CHECK((strstr(where, "(linear)") || (precision != CT_PRECISION_FP32 && strstr(where, "(cast)")))
              && strstr(where, "reading 'fc2.weight'"),
          "%s: the first inf or NaN: %s", ct_precision_name(precision), where);
    ct_plan_free(m.plan);
    ct_graph_free(m.graph);
}

static void nan_loss(ct_backend *backend)
{
    nan_loss_names_the_first_op(backend, CT_PRECISION_FP32);
    nan_loss_names_the_first_op(backend, CT_PRECISION_BF16);
}

/* ---- ct_plan_set_check_numerics ----------------------------------------------------- */

static void plant(scaled_mlp *m, const char *name, int index, float value)
{
    ct_tensor *t = ct_graph_find(m->graph, name);
    CHECK(t != NULL, "no tensor '%s'", name);
    if (!t)
        return;
    float values[16 * 12];
    CHECK(ct_tensor_bytes(t) <= sizeof values, "'%s' is larger than expected", name);
    CHECK_OK(ct_plan_read(m->plan, t, values, ct_tensor_bytes(t)));
    values[index] = value;
    CHECK_OK(ct_plan_write(m->plan, t, values, ct_tensor_bytes(t)));
}

/* An inf planted in fc2's weight after two clean steps (the second
 * checked): the third stops at fc2's linear (in bf16, the cast making its
 * 16-bit weight), naming the step, the pass and the layer; it does not
 * count and updates nothing.  Off again, the step runs as it always did. */
static void check_numerics_stops_at_the_first_op(ct_backend *backend, ct_precision precision)
{
    scaled_mlp m = make_scaled_mlp(backend, precision);
    const char *name = ct_precision_name(precision);
    CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
    CHECK_OK(ct_plan_set_check_numerics(m.plan, true));
    CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
    plant(&m, "fc2.weight", 7, INFINITY);
    float before[MLP_PARAMS], after[MLP_PARAMS];
    read_params(&m, before, MLP_PARAMS);
    ct_status status = ct_plan_run(m.plan, CT_TRAIN);
    const char *message = ct_last_error();
    CHECK(status == CT_ERR_NUMERIC, "%s: %s (%s)", name, ct_status_name(status), message);
    CHECK(strstr(message, "step 2 (training, forward pass)") &&
              (strstr(message, "(linear)") ||
               (precision != CT_PRECISION_FP32 && strstr(message, "(cast)"))) &&
              strstr(message, "layer 'fc2' (it reads 'fc2.weight')") &&
              (strstr(message, "inf at [") || strstr(message, "nan at [")) &&
              strstr(message, "first non-finite value"),
          "%s: the message should name the step, pass, op and layer: %s", name, message);
    CHECK(ct_plan_step(m.plan) == 2, "%s: the stopped step counted", name);
    read_params(&m, after, MLP_PARAMS);
    CHECK(memcmp(before, after, sizeof before) == 0, "%s: the stopped step moved the parameters",
          name);
    CHECK_OK(ct_plan_set_check_numerics(m.plan, false));
    CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
    CHECK(ct_plan_step_skipped(m.plan), "%s: unchecked, the NaN loss's step was not skipped", name);
    CHECK(ct_plan_set_check_numerics(NULL, true) == CT_ERR_ARG, "NULL plan");
    ct_plan_free(m.plan);
    ct_graph_free(m.graph);
}

/* A NaN in fc1's momentum buffer leaves the loss finite: unchecked, the
 * step goes through and writes NaN into fc1's weight unnoticed; checked,
 * it stops at the optimizer's update, naming fc1. */
static void check_numerics_catches_what_the_loss_misses(ct_backend *backend)
{
    for (int on = 0; on < 2; on++) {
        scaled_mlp m = make_scaled_mlp(backend, CT_PRECISION_FP32);
        CHECK_OK(ct_plan_run(m.plan, CT_TRAIN));
        plant(&m, "fc1.weight.momentum_buffer", 5, NAN);
        CHECK_OK(ct_plan_set_check_numerics(m.plan, on));
        ct_status status = ct_plan_run(m.plan, CT_TRAIN);
        float weight[16 * 12];
        CHECK_OK(ct_plan_read(m.plan, ct_graph_find(m.graph, "fc1.weight"), weight,
                              sizeof weight));
        if (!on)
            CHECK(status == CT_OK && !ct_plan_step_skipped(m.plan) && isnan(weight[5]),
                  "unchecked, the NaN should have reached the weight silently: %s",
                  ct_status_name(status));
        else
            CHECK(status == CT_ERR_NUMERIC && strstr(ct_last_error(), "step 1 (training, "
                                                     "optimizer pass)") &&
                      strstr(ct_last_error(), "'fc1.weight'"),
                  "checked: %s (%s)", ct_status_name(status), ct_last_error());
        ct_plan_free(m.plan);
        ct_graph_free(m.graph);
    }
}

/* fp16: a gradient that overflows under a huge loss scale is the scaler's
 * to handle (the step skipped, the scale halved), not a stop. */
static void check_numerics_leaves_fp16_overflow_to_the_scaler(ct_backend *backend)
{
    scaled_mlp m = make_scaled_mlp(backend, CT_PRECISION_FP16);
    CHECK_OK(ct_plan_set_loss_scale(m.plan, 0x1p100f, 2000));
    CHECK_OK(ct_plan_set_check_numerics(m.plan, true));
    ct_status status = ct_plan_run(m.plan, CT_TRAIN);
    CHECK(status == CT_OK && ct_plan_step_skipped(m.plan), "%s (%s)", ct_status_name(status),
          ct_last_error());
    ct_plan_free(m.plan);
    ct_graph_free(m.graph);
}

static void check_numerics(ct_backend *backend)
{
    check_numerics_stops_at_the_first_op(backend, CT_PRECISION_FP32);
    check_numerics_stops_at_the_first_op(backend, CT_PRECISION_BF16);
    check_numerics_catches_what_the_loss_misses(backend);
    check_numerics_leaves_fp16_overflow_to_the_scaler(backend);
}

static ct_backend *cpu_backend, *cuda_backend;

static void cpu_loss_scaler(void)
{
    loss_scaler_on(cpu_backend);
    loss_scaler_off(cpu_backend);
}

static void cpu_skipped_steps_are_not_updates(void)
{
    skipped_steps_are_not_updates(cpu_backend);
}

static void cuda_loss_scaler(void)
{
    loss_scaler_on(cuda_backend);
    loss_scaler_off(cuda_backend);
}

static void cuda_skipped_steps_are_not_updates(void)
{
    skipped_steps_are_not_updates(cuda_backend);
}

static void cpu_nan_loss(void)
{
    nan_loss(cpu_backend);
}

static void cpu_check_numerics(void)
{
    check_numerics(cpu_backend);
}

static void cuda_check_numerics(void)
{
    check_numerics(cuda_backend);
}

static void cuda_nan_loss(void)
{
    nan_loss(cuda_backend);
    /* the cross-entropy on the CPU fallback: its finding reaches the GPU's
     * updates (the step values copied to the host and back) */
    ct_backend *refusing = NULL;
    CHECK_OK(ct_backend_new("cuda", &refusing));
    CHECK_OK(ct_backend_refuse(refusing, CT_OP_CROSS_ENTROPY));
    nan_loss_names_the_first_op(refusing, CT_PRECISION_FP32);
    ct_backend_free(refusing);
}

int main(void)
{
    if (ct_backend_new("cpu", &cpu_backend) != CT_OK)
        return 1;
    RUN(cpu_loss_scaler);
    RUN(cpu_skipped_steps_are_not_updates);
    RUN(cpu_nan_loss);
    RUN(cpu_check_numerics);
    if (ct_backend_new("cuda", &cuda_backend) == CT_OK) {
        RUN(cuda_loss_scaler);
        RUN(cuda_skipped_steps_are_not_updates);
        RUN(cuda_nan_loss);
        RUN(cuda_check_numerics);
        ct_backend_free(cuda_backend);
    } else if (getenv("CT_REQUIRE_GPU")) {
        printf("FAIL cuda_cases (no CUDA device: %s)\n", ct_last_error());
        harness_failed++;
    } else {
        fprintf(stderr, "test_loss_scaling: skipped 4 CUDA cases: %s\n", ct_last_error());
    }
    ct_backend_free(cpu_backend);
    return harness_finish();
}
