/*
 * The ops that behave differently in training and in evaluation: batchnorm
 * (forward, gradients and running statistics in both modes) and dropout (the
 * mask, its gradient, a new mask each step, the identity in evaluation and a
 * reproducible first mask).  The fixture is tests/gradcheck.h's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "harness.h"
#include "ref.h"

#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f
#define BN_MAX_CHANNELS 64 /* of the batchnorm cases, for the stack arrays */

/* ---- batchnorm --------------------------------------------------------------- */

typedef struct bn_case {
    int ndim; /* 4: [n, c, h, w]; 2: [n, c] */
    int n, c, h, w;
} bn_case;

/* values: 0 x, 1 gamma, 2 beta, 3 running_mean, 4 running_var */
static void bn_train_forward(const gc_case *c, double *y)
{
    const bn_case *a = c->args;
    ref_batchnorm2d_train(a->n, a->c, a->h * a->w, c->values[0].f64, c->values[1].f64,
                          c->values[2].f64, BN_EPS, BN_MOMENTUM, NULL, NULL, y);
}

static void bn_eval_forward(const gc_case *c, double *y)
{
    const bn_case *a = c->args;
    ref_batchnorm2d_eval(a->n, a->c, a->h * a->w, c->values[0].f64, c->values[1].f64,
                         c->values[2].f64, c->values[3].f64, c->values[4].f64, BN_EPS, y);
}

/* Builds x, the parameters, the buffers and the op; NULL on error. */
static ct_tensor *bn_build(gc_case *c, const bn_case *a, int64_t *x_shape)
{
    x_shape[0] = a->n;
    x_shape[1] = a->c;
    x_shape[2] = a->h;
    x_shape[3] = a->w;
    int64_t c_shape[1] = {a->c};
    /* An offset mean and a non-unit spread, so normalization does something. */
    ct_tensor *x = gc_input(c, "x", a->ndim, x_shape, -1.5f, 2.5f);
    ct_tensor *gamma = gc_param(c, "bn.weight", 1, c_shape, 0.5f, 1.5f);
    ct_tensor *beta = gc_param(c, "bn.bias", 1, c_shape, -0.5f, 0.5f);
    ct_tensor *mean = gc_buffer(c, "bn.running_mean", 1, c_shape, -0.5f, 0.5f);
    ct_tensor *var = gc_buffer(c, "bn.running_var", 1, c_shape, 0.5f, 2.0f);
    return ct_batchnorm2d(c->graph, x, gamma, beta, mean, var, BN_EPS, BN_MOMENTUM);
}

/* Compares the running statistics in the plan with expected ones. */
static void bn_check_running(gc_case *c, const double *mean, const double *var, int channels)
{
    float got[2][BN_MAX_CHANNELS];
    const double *expected[2] = {mean, var};
    for (int k = 0; k < 2 && channels <= BN_MAX_CHANNELS; k++) {
        ct_tensor *t = c->values[3 + k].tensor;
        ct_status status = ct_plan_read(c->plan, t, got[k], (size_t)channels * sizeof(float));
        CHECK(status == CT_OK, "ct_plan_read(%s): %s", ct_tensor_name(t), ct_last_error());
        double err = harness_rel_err_f64(got[k], expected[k], channels);
        CHECK(err <= FORWARD_TOL, "%s rel err %.3g (got[0] %.8g, expected %.8g)",
              ct_tensor_name(t), err, got[k][0], expected[k][0]);
    }
}

static void check_bn_train(const bn_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, bn_train_forward, a, seed))
        return;
    int64_t x_shape[4];
    ct_tensor *y = bn_build(&c, a, x_shape);
    c.work = 6.0 * a->n * a->c * a->h * a->w;
    if (gc_plan(&c, y, a->ndim, x_shape, GC_VJP)) {
        gc_check_forward(&c);
        gc_check_grads(&c);
        double mean[BN_MAX_CHANNELS], var[BN_MAX_CHANNELS];
        double *y_ref = gc_calloc(c.ny, sizeof(double));
        for (int ch = 0; ch < a->c && ch < BN_MAX_CHANNELS; ch++) {
            mean[ch] = c.values[3].f64[ch];
            var[ch] = c.values[4].f64[ch];
        }
        ref_batchnorm2d_train(a->n, a->c, a->h * a->w, c.values[0].f64, c.values[1].f64,
                              c.values[2].f64, BN_EPS, BN_MOMENTUM, mean, var, y_ref);
        bn_check_running(&c, mean, var, a->c);
        free(y_ref);
    }
    gc_end(&c);
}

static void check_bn_eval(const bn_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, bn_eval_forward, a, seed))
        return;
    int64_t x_shape[4];
    ct_tensor *y = bn_build(&c, a, x_shape);
    if (gc_plan(&c, y, a->ndim, x_shape, GC_EVAL)) {
        gc_check_forward(&c);
        /* Evaluation leaves the running statistics alone. */
        bn_check_running(&c, c.values[3].f64, c.values[4].f64, a->c);
    }
    gc_end(&c);
}

/* batchnorm -> relu: the plan fuses the relu into batchnorm's kernel
 * (graph/fuse.c); the forward, gradients (relu_bwd reading the fused
 * output) and, in evaluation, the output against relu(batchnorm). */
static void bn_relu_train_forward(const gc_case *c, double *y)
{
    bn_train_forward(c, y);
    ref_relu(c->ny, y, y);
}

static void bn_relu_eval_forward(const gc_case *c, double *y)
{
    bn_eval_forward(c, y);
    ref_relu(c->ny, y, y);
}

static void check_bn_relu(const bn_case *a, uint64_t seed, bool train)
{
    gc_case c;
    if (!gc_begin(&c, train ? bn_relu_train_forward : bn_relu_eval_forward, a, seed))
        return;
    int64_t x_shape[4];
    ct_tensor *y = ct_relu(c.graph, bn_build(&c, a, x_shape));
    c.work = 7.0 * a->n * a->c * a->h * a->w;
    if (gc_plan(&c, y, a->ndim, x_shape, train ? GC_VJP : GC_EVAL)) {
        gc_check_forward(&c);
        if (train)
            gc_check_grads(&c);
    }
    gc_end(&c);
}

static void test_batchnorm_relu_fused(void)
{
    bn_case a = {4, 3, 5, 4, 6};
    check_bn_relu(&a, 41, true);
    check_bn_relu(&a, 42, false);
}

static void test_batchnorm_train_batch3(void)
{
    bn_case a = {4, 3, 4, 5, 5};
    check_bn_train(&a, 61);
}

static void test_batchnorm_train_batch1(void)
{
    bn_case a = {4, 1, 3, 4, 6};
    check_bn_train(&a, 62);
}

static void test_batchnorm_train_batch7_3x32x32(void)
{
    bn_case a = {4, 7, 3, 32, 32};
    check_bn_train(&a, 63);
}

static void test_batchnorm_train_2d(void)
{
    bn_case a = {2, 7, 6, 1, 1};
    check_bn_train(&a, 64);
}

static void test_batchnorm_eval_batch3(void)
{
    bn_case a = {4, 3, 4, 5, 5};
    check_bn_eval(&a, 65);
}

static void test_batchnorm_eval_batch1_2d(void)
{
    bn_case a = {2, 1, 5, 1, 1};
    check_bn_eval(&a, 66);
}

/* ---- dropout ----------------------------------------------------------------- */

#define DROPOUT_P 0.3f
#define DROPOUT_EXACT_TOL 1e-6

/* Recovers keep = (y != 0) and checks y = x * keep / (1-p).  Returns the
 * number of kept elements. */
static int64_t dropout_mask(const float *x, const float *y, int64_t count, uint8_t *keep)
{
    int64_t kept = 0;
    double *x_f64 = gc_calloc(count, sizeof(double));
    double *y_ref = gc_calloc(count, sizeof(double));
    for (int64_t i = 0; i < count; i++) {
        keep[i] = y[i] != 0.0f;
        kept += keep[i];
        x_f64[i] = x[i];
    }
    ref_dropout(count, x_f64, keep, DROPOUT_P, y_ref);
    double err = harness_rel_err_f64(y, y_ref, count);
    CHECK(err <= DROPOUT_EXACT_TOL, "dropout y != x*mask/(1-p): rel err %.3g", err);
    free(x_f64);
    free(y_ref);
    return kept;
}

static void check_kept_fraction(int64_t kept, int64_t count)
{
    double fraction = (double)kept / (double)count;
    double sigma = sqrt(DROPOUT_P * (1.0 - DROPOUT_P) / (double)count);
    CHECK(fabs(fraction - (1.0 - DROPOUT_P)) <= 6.0 * sigma,
          "kept fraction %.4f, expected %.4f +- %.4f", fraction, 1.0 - DROPOUT_P, 6.0 * sigma);
}

static void test_dropout(void)
{
    gc_case c;
    if (!gc_begin(&c, NULL, NULL, 71))
        return;
    int64_t x_shape[4] = {4, 8, 16, 16};
    ct_tensor *x = gc_input(&c, "x", 4, x_shape, -1.0f, 1.0f);
    if (c.n_values == 1)
        gc_away_from_zero(&c.values[0], RELU_MIN_ABS);
    ct_tensor *y = ct_dropout(c.graph, x, DROPOUT_P);
    if (!gc_plan(&c, y, 4, x_shape, GC_VJP)) {
        gc_end(&c);
        return;
    }
    int64_t count = c.ny;
    const float *x_f32 = c.values[0].f32;
    uint8_t *mask = gc_calloc(count, 1);
    uint8_t *mask_next = gc_calloc(count, 1);
    float *buffer = gc_calloc(count, sizeof(float));
    check_kept_fraction(dropout_mask(x_f32, c.y_f32, count, mask), count);

    /* dx = dy * mask / (1-p) */
    ct_tensor *dx = ct_tensor_grad(x);
    CHECK(dx != NULL, "no gradient for x");
    if (dx) {
        CHECK_OK(ct_plan_read(c.plan, dx, buffer, (size_t)count * sizeof(float)));
        double *dx_ref = gc_calloc(count, sizeof(double));
        ref_dropout(count, c.dy_f64, mask, DROPOUT_P, dx_ref);
        double err = harness_rel_err_f64(buffer, dx_ref, count);
        CHECK(err <= DROPOUT_EXACT_TOL, "dx != dy*mask/(1-p): rel err %.3g", err);
        free(dx_ref);
    }

    /* The next step draws another mask. */
    int64_t step = ct_plan_step(c.plan);
    CHECK(step == 1, "ct_plan_step after one run = %lld, expected 1", (long long)step);
    CHECK_OK(ct_plan_run(c.plan, CT_TRAIN));
    CHECK_OK(ct_plan_read(c.plan, y, buffer, (size_t)count * sizeof(float)));
    check_kept_fraction(dropout_mask(x_f32, buffer, count, mask_next), count);
    CHECK(memcmp(mask, mask_next, (size_t)count) != 0, "step 2 drew the same mask as step 1");

    /* Evaluation is the identity. */
    CHECK_OK(ct_plan_run(c.plan, CT_EVAL));
    CHECK_OK(ct_plan_read(c.plan, y, buffer, (size_t)count * sizeof(float)));
    CHECK(memcmp(buffer, x_f32, (size_t)count * sizeof(float)) == 0,
          "dropout in CT_EVAL is not the identity");

    /* A fresh plan with the same seed reproduces the first mask. */
    ct_plan_free(c.plan);
    c.plan = NULL;
    ct_status status = ct_plan_new(c.graph, c.backend, PLAN_SEED, &c.plan);
    CHECK(status == CT_OK, "second ct_plan_new: %s", ct_last_error());
    if (status == CT_OK) {
        CHECK_OK(ct_plan_write(c.plan, x, x_f32, (size_t)count * sizeof(float)));
        CHECK_OK(ct_plan_write(c.plan, c.dy, c.dy_f32, (size_t)count * sizeof(float)));
        CHECK_OK(ct_plan_run(c.plan, CT_TRAIN));
        CHECK_OK(ct_plan_read(c.plan, y, buffer, (size_t)count * sizeof(float)));
        CHECK(memcmp(buffer, c.y_f32, (size_t)count * sizeof(float)) == 0,
              "a fresh plan with the same seed gave another output");
    }
    free(mask);
    free(mask_next);
    free(buffer);
    gc_end(&c);
}

int main(void)
{
    RUN(test_batchnorm_train_batch3);
    RUN(test_batchnorm_train_batch1);
    RUN(test_batchnorm_train_batch7_3x32x32);
    RUN(test_batchnorm_train_2d);
    RUN(test_batchnorm_eval_batch3);
    RUN(test_batchnorm_eval_batch1_2d);
    RUN(test_batchnorm_relu_fused);
    RUN(test_dropout);
    return harness_finish();
}
