/*
 * Custom ops (ct_custom_op_register, ct_custom): a one-input op (Mish) and
 * a two-input op with attributes (a*x0 + b*x1), registered from here as a
 * user would, gradient-checked on the CPU against double-precision
 * references; bad registrations and bad uses; a small network with Mish
 * that trains; and, where a CUDA backend exists (the emulated device in
 * make test-gpu-emu), the same training on it, where the op, having no
 * CUDA kernel, runs on the CPU fallback.
 */
#include <math.h>
#include <string.h>

#include "cuttle.h"
#include "gradcheck.h"
#include "harness.h"

/* ---- the ops, as a user writes them ---------------------------------------------- */

static float softplus(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

/* y = x * tanh(softplus(x)) */
static ct_status mish_forward(const ct_custom_call *call)
{
    const float *x = call->inputs[0];
    for (int64_t i = 0; i < call->out_numel; i++)
        call->out[i] = x[i] * tanhf(softplus(x[i]));
    return CT_OK;
}

/* dx = dy * (tanh(sp) + x * (1 - tanh(sp)^2) * sigmoid(x)), sp = softplus(x) */
static ct_status mish_backward(const ct_custom_call *call)
{
    const float *x = call->inputs[0];
    for (int64_t i = 0; i < call->out_numel; i++) {
        float t = tanhf(softplus(x[i])), sigmoid = 1.0f / (1.0f + expf(-x[i]));
        call->out[i] = call->dy[i] * (t + x[i] * (1.0f - t * t) * sigmoid);
    }
    return CT_OK;
}

static const ct_custom_op mish = {"mish", 1, NULL, mish_forward, mish_backward, NULL, NULL, NULL};

/* y = a*x0 + b*x1 (attrs a, b): both inputs of one shape. */
static ct_status axpby_shape(const ct_custom_call *call, int *ndim, int64_t shape[CT_MAX_DIMS])
{
    if (call->n_attrs != 2 || call->input_ndims[0] != call->input_ndims[1] ||
        memcmp(call->input_shapes[0], call->input_shapes[1],
               sizeof(int64_t) * (size_t)call->input_ndims[0]) != 0)
        return CT_ERR_SHAPE;
    *ndim = call->input_ndims[0];
    memcpy(shape, call->input_shapes[0], sizeof(int64_t) * (size_t)*ndim);
    return CT_OK;
}

static ct_status axpby_forward(const ct_custom_call *call)
{
    for (int64_t i = 0; i < call->out_numel; i++)
        call->out[i] = call->attrs[0] * call->inputs[0][i] + call->attrs[1] * call->inputs[1][i];
    return CT_OK;
}

static ct_status axpby_backward(const ct_custom_call *call)
{
    float scale = call->attrs[call->wrt];
    for (int64_t i = 0; i < call->out_numel; i++)
        call->out[i] = scale * call->dy[i];
    return CT_OK;
}

static const ct_custom_op axpby = {"axpby", 2, axpby_shape, axpby_forward, axpby_backward,
                                   NULL, NULL, NULL};

static void register_ops(void)
{
    CHECK_OK(ct_custom_op_register(&mish));
    CHECK_OK(ct_custom_op_register(&axpby));
}

/* ---- gradient checks -------------------------------------------------------------- */

static void mish_reference(const gc_case *c, double *y)
{
    const double *x = c->values[0].f64;
    for (int64_t i = 0; i < c->ny; i++) {
        double sp = x[i] > 20.0 ? x[i] : log1p(exp(x[i]));
        y[i] = x[i] * tanh(sp);
    }
}

static void test_mish_gradients(void)
{
    gc_case c;
    if (!gc_begin(&c, mish_reference, NULL, 7))
        return;
    const int64_t shape[4] = {3, 5, 7, 9};
    ct_tensor *x = gc_input(&c, "x", 4, shape, -4.0f, 4.0f);
    gc_finish(&c, ct_custom(c.graph, "mish", 1, &x, NULL, 0), 4, shape);
}

static const float axpby_attrs[2] = {0.75f, -2.5f};

static void axpby_reference(const gc_case *c, double *y)
{
    for (int64_t i = 0; i < c->ny; i++)
        y[i] = (double)axpby_attrs[0] * c->values[0].f64[i] +
               (double)axpby_attrs[1] * c->values[1].f64[i];
}

static void test_two_inputs_and_attributes(void)
{
    gc_case c;
    if (!gc_begin(&c, axpby_reference, NULL, 8))
        return;
    const int64_t shape[2] = {6, 11};
    ct_tensor *in[2] = {gc_input(&c, "x0", 2, shape, -1.0f, 1.0f),
                        gc_param(&c, "x1", 2, shape, -1.0f, 1.0f)};
    gc_finish(&c, ct_custom(c.graph, "axpby", 2, in, axpby_attrs, 2), 2, shape);
}

/* ---- errors ------------------------------------------------------------------------ */

static void test_bad_registrations(void)
{
    ct_custom_op op = mish;
    CHECK(ct_custom_op_register(&op) == CT_ERR_ARG && strstr(ct_last_error(), "already"),
          "a second 'mish': %s", ct_last_error());
    op.name = "Mish!";
    CHECK(ct_custom_op_register(&op) == CT_ERR_ARG && strstr(ct_last_error(), "[a-z0-9_]"),
          "a bad name: %s", ct_last_error());
    op.name = "no_forward";
    op.forward = NULL;
    CHECK(ct_custom_op_register(&op) == CT_ERR_ARG && strstr(ct_last_error(), "forward"),
          "no forward kernel: %s", ct_last_error());
    op = mish;
    op.name = "too_many";
    op.n_inputs = CT_CUSTOM_MAX_INPUTS + 1;
    CHECK(ct_custom_op_register(&op) == CT_ERR_ARG, "%d inputs", op.n_inputs);
    CHECK(ct_custom_op_register(NULL) == CT_ERR_ARG, "NULL");
}

static void test_bad_uses(void)
{
    ct_graph *g = ct_graph_new();
    ct_tensor *a = ct_input(g, "a", CT_F32, 2, (int64_t[]){2, 3});
    ct_tensor *b = ct_input(g, "b", CT_F32, 2, (int64_t[]){3, 2});
    CHECK(ct_custom(g, "swish", 1, &a, NULL, 0) == NULL &&
              strstr(ct_last_error(), "no op 'swish' is registered"),
          "%s", ct_last_error());
    ct_graph_free(g);
    g = ct_graph_new();
    a = ct_input(g, "a", CT_F32, 2, (int64_t[]){2, 3});
    b = ct_input(g, "b", CT_F32, 2, (int64_t[]){3, 2});
    ct_tensor *in[2] = {a, b};
    CHECK(ct_custom(g, "axpby", 2, in, axpby_attrs, 2) == NULL &&
              ct_graph_status(g) == CT_ERR_SHAPE && strstr(ct_last_error(), "axpby"),
          "mismatched shapes: %s", ct_last_error());
    ct_graph_free(g);
    g = ct_graph_new();
    a = ct_input(g, "a", CT_F32, 2, (int64_t[]){2, 3});
    CHECK(ct_custom(g, "axpby", 1, &a, axpby_attrs, 2) == NULL &&
              strstr(ct_last_error(), "takes 2 input(s), given 1"),
          "one input: %s", ct_last_error());
    ct_graph_free(g);
}

/* ---- model files --------------------------------------------------------------------- */

/* `custom NAME [numbers]` in a model file: the registered op on the current
 * tensor, the numbers its attributes. */
static void test_in_a_model_file(void)
{
    static const char text[] = "model with_mish\n"
                               "flatten\n"
                               "fc1: linear 8\n"
                               "custom mish\n"
                               "fc2: linear classes\n";
    ct_graph *g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 4, (int64_t[]){4, 1, 2, 3});
    ct_tensor *y = ct_model_build(g, text, x, 3);
    CHECK(y && ct_tensor_ndim(y) == 2 && ct_tensor_dim(y, 1) == 3, "%s", ct_last_error());
    ct_graph_free(g);
    g = ct_graph_new();
    x = ct_input(g, "x", CT_F32, 4, (int64_t[]){4, 1, 2, 3});
    CHECK(!ct_model_build(g, "model m\ncustom gelu 1.5\n", x, 3) &&
              strstr(ct_last_error(), "no op 'gelu' is registered"),
          "an unregistered op: %s", ct_last_error());
    ct_graph_free(g);
    g = ct_graph_new();
    x = ct_input(g, "x", CT_F32, 4, (int64_t[]){4, 1, 2, 3});
    CHECK(!ct_model_build(g, "model m\ncustom\n", x, 3) &&
              strstr(ct_last_error(), "the name of a custom op"),
          "no op name: %s", ct_last_error());
    ct_graph_free(g);
}

/* ---- training ------------------------------------------------------------------------ */

enum { BATCH = 16, FEATURES = 12, HIDDEN = 24, CLASSES = 3, STEPS = 30 };

/* A profile names the op as registered, forward and backward. */
static void check_profile_names(const ct_plan *plan)
{
    ct_profile profile;
    CHECK_OK(ct_plan_profile(plan, &profile));
    int forward = 0, backward = 0;
    for (int i = 0; i < profile.n_records; i++) {
        forward += strcmp(profile.records[i].op, "mish") == 0;
        backward += strcmp(profile.records[i].op, "mish_bwd") == 0;
    }
    CHECK(forward == 1 && backward == 1, "%d 'mish' and %d 'mish_bwd' records", forward,
          backward);
}

/* linear -> mish -> linear -> cross-entropy, SGD; the losses of each step. */
static bool train(const char *device, float *losses)
{
    ct_graph *g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 2, (int64_t[]){BATCH, FEATURES});
    ct_tensor *labels = ct_input(g, "labels", CT_I64, 1, (int64_t[]){BATCH});
    ct_tensor *h = ct_layer_linear(g, "fc1", x, HIDDEN, true);
    h = ct_custom(g, "mish", 1, &h, NULL, 0);
    ct_tensor *loss = ct_cross_entropy(g, ct_layer_linear(g, "fc2", h, CLASSES, true), labels,
                                       0.0f);
    ct_tensor_keep(loss);
    CHECK_OK(ct_graph_status(g));
    CHECK_OK(ct_graph_backward(g, loss));
    CHECK_OK(ct_graph_sgd(g, (ct_sgd_args){.lr = 0.1f, .momentum = 0.9f}));
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    bool ran = ct_backend_new(device, &backend) == CT_OK;
    if (ran) {
        CHECK_OK(ct_plan_new(g, backend, 3, &plan));
        CHECK_OK(ct_plan_set_profiling(plan, true));
        float xs[BATCH * FEATURES];
        int64_t ys[BATCH];
        harness_fill(xs, BATCH * FEATURES, 5, -1.0f, 1.0f);
        for (int i = 0; i < BATCH; i++)
            ys[i] = (xs[i * FEATURES] > 0) + (xs[i * FEATURES + 1] > 0.5f);
        CHECK_OK(ct_plan_write(plan, x, xs, sizeof xs));
        CHECK_OK(ct_plan_write(plan, labels, ys, sizeof ys));
        for (int s = 0; s < STEPS; s++) {
            CHECK_OK(ct_plan_run(plan, CT_TRAIN));
            CHECK_OK(ct_plan_read(plan, loss, &losses[s], sizeof(float)));
        }
        check_profile_names(plan);
    }
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(g);
    return ran;
}

static void test_trains_on_the_cpu(void)
{
    float losses[STEPS];
    CHECK(train("cpu", losses), "no CPU backend: %s", ct_last_error());
    CHECK(losses[STEPS - 1] < 0.5f * losses[0], "loss %g -> %g", losses[0], losses[STEPS - 1]);
}

/* Without a CUDA kernel the op runs on the CPU fallback, with copies: the
 * same losses as on the CPU, within float noise of the other kernels. */
static void test_trains_on_the_gpu_through_the_fallback(void)
{
    float cpu[STEPS], gpu[STEPS];
    if (!train("cuda", gpu)) {
        printf("# no CUDA backend here (%s): the GPU run is skipped\n", ct_last_error());
        return;
    }
    CHECK(train("cpu", cpu), "cpu");
    for (int s = 0; s < STEPS; s++)
        CHECK(fabsf(cpu[s] - gpu[s]) <= 1e-4f * fabsf(cpu[s]) + 1e-6f,
              "step %d: cpu %.7g, cuda %.7g", s, cpu[s], gpu[s]);
}

int main(void)
{
    register_ops();
    RUN(test_mish_gradients);
    RUN(test_two_inputs_and_attributes);
    RUN(test_bad_registrations);
    RUN(test_bad_uses);
    RUN(test_in_a_model_file);
    RUN(test_trains_on_the_cpu);
    RUN(test_trains_on_the_gpu_through_the_fallback);
    return harness_finish();
}
