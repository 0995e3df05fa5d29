/*
 * Forward and gradient checks of the activations (relu, sigmoid, tanh),
 * softmax and the cross-entropy loss (i32 and i64 labels, label smoothing).
 * The fixture is tests/gradcheck.h's.
 */
#include <stdbool.h>
#include <stdint.h>

#include "gradcheck.h"
#include "harness.h"
#include "ref.h"

/* ---- activations ---------------------------------------------------------------- */

typedef enum act_kind { ACT_RELU, ACT_SIGMOID, ACT_TANH } act_kind;

typedef struct act_case {
    act_kind kind;
    int ndim;
    int64_t shape[4];
} act_case;

static void act_forward(const gc_case *c, double *y)
{
    const act_case *a = c->args;
    if (a->kind == ACT_RELU)
        ref_relu(c->ny, c->values[0].f64, y);
    else if (a->kind == ACT_SIGMOID)
        ref_sigmoid(c->ny, c->values[0].f64, y);
    else
        ref_tanh(c->ny, c->values[0].f64, y);
}

static void check_act(const act_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, act_forward, a, seed))
        return;
    ct_tensor *x = gc_input(&c, "x", a->ndim, a->shape, -3.0f, 3.0f);
    if (a->kind == ACT_RELU && c.n_values == 1)
        gc_away_from_zero(&c.values[0], RELU_MIN_ABS);
    ct_tensor *y = a->kind == ACT_RELU      ? ct_relu(c.graph, x)
                   : a->kind == ACT_SIGMOID ? ct_sigmoid(c.graph, x)
                                            : ct_tanh(c.graph, x);
    gc_finish(&c, y, a->ndim, a->shape);
}

static void test_relu_batch1_3x32x32(void)
{
    act_case a = {ACT_RELU, 4, {1, 3, 32, 32}};
    check_act(&a, 51);
}

static void test_relu_batch7_2d(void)
{
    act_case a = {ACT_RELU, 2, {7, 10}};
    check_act(&a, 52);
}

static void test_sigmoid_batch3(void)
{
    act_case a = {ACT_SIGMOID, 4, {3, 4, 5, 5}};
    check_act(&a, 53);
}

static void test_sigmoid_batch7_2d(void)
{
    act_case a = {ACT_SIGMOID, 2, {7, 10}};
    check_act(&a, 54);
}

static void test_tanh_batch3(void)
{
    act_case a = {ACT_TANH, 4, {3, 4, 5, 5}};
    check_act(&a, 55);
}

static void test_tanh_batch1_3x32x32(void)
{
    act_case a = {ACT_TANH, 4, {1, 3, 32, 32}};
    check_act(&a, 56);
}

/* ---- softmax and cross-entropy ---------------------------------------------------- */

typedef struct softmax_case {
    int n, c;
} softmax_case;

static void softmax_forward(const gc_case *c, double *y)
{
    const softmax_case *a = c->args;
    ref_softmax(a->n, a->c, c->values[0].f64, y);
}

static void check_softmax(const softmax_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, softmax_forward, a, seed))
        return;
    int64_t shape[2] = {a->n, a->c};
    ct_tensor *x = gc_input(&c, "x", 2, shape, -3.0f, 3.0f);
    c.work = 4.0 * a->n * a->c;
    gc_finish(&c, ct_softmax(c.graph, x), 2, shape);
}

static void test_softmax_batch1(void)
{
    softmax_case a = {1, 10};
    check_softmax(&a, 91);
}

static void test_softmax_batch7(void)
{
    softmax_case a = {7, 10};
    check_softmax(&a, 92);
}

static void test_softmax_batch3_wide(void)
{
    softmax_case a = {3, 100};
    check_softmax(&a, 93);
}

#define CE_MAX_BATCH 16

typedef struct ce_case {
    int n, c;
    float label_smoothing;
    bool labels_i64;
    int64_t labels[CE_MAX_BATCH];
} ce_case;

static void ce_forward(const gc_case *c, double *y)
{
    const ce_case *a = c->args;
    y[0] = ref_cross_entropy(a->n, a->c, c->values[0].f64, a->labels, a->label_smoothing);
}

static void check_cross_entropy(ce_case *a, uint64_t seed)
{
    gc_case c;
    if (!gc_begin(&c, ce_forward, a, seed))
        return;
    int32_t labels_i32[CE_MAX_BATCH];
    uint64_t state = seed;
    for (int b = 0; b < a->n; b++) {
        a->labels[b] = (int64_t)(harness_uniform(&state, 0.0f, 1.0f) * (float)a->c) % a->c;
        labels_i32[b] = (int32_t)a->labels[b];
    }
    int64_t logits_shape[2] = {a->n, a->c}, labels_shape[1] = {a->n};
    ct_tensor *logits = gc_input(&c, "logits", 2, logits_shape, -3.0f, 3.0f);
    ct_tensor *labels = ct_input(c.graph, "labels", a->labels_i64 ? CT_I64 : CT_I32, 1,
                                 labels_shape);
    CHECK(labels != NULL, "ct_input(labels): %s", ct_last_error());
    c.writes[c.n_writes++] = (gc_write){labels, a->labels_i64 ? (const void *)a->labels
                                                              : (const void *)labels_i32,
                                        (size_t)a->n * (a->labels_i64 ? 8 : 4)};
    ct_tensor *loss = ct_cross_entropy(c.graph, logits, labels, a->label_smoothing);
    c.work = 4.0 * a->n * a->c;
    if (gc_plan(&c, loss, 0, NULL, GC_LOSS)) {
        gc_check_forward(&c);
        gc_check_grads(&c);
    }
    gc_end(&c);
}

static void test_cross_entropy_i64_batch7(void)
{
    ce_case a = {7, 10, 0.0f, true, {0}};
    check_cross_entropy(&a, 101);
}

static void test_cross_entropy_i32_smoothing_batch3(void)
{
    ce_case a = {3, 5, 0.1f, false, {0}};
    check_cross_entropy(&a, 102);
}

static void test_cross_entropy_i64_smoothing_batch1(void)
{
    ce_case a = {1, 4, 0.2f, true, {0}};
    check_cross_entropy(&a, 103);
}

int main(void)
{
    RUN(test_relu_batch1_3x32x32);
    RUN(test_relu_batch7_2d);
    RUN(test_sigmoid_batch3);
    RUN(test_sigmoid_batch7_2d);
    RUN(test_tanh_batch3);
    RUN(test_tanh_batch1_3x32x32);
    RUN(test_softmax_batch1);
    RUN(test_softmax_batch7);
    RUN(test_softmax_batch3_wide);
    RUN(test_cross_entropy_i64_batch7);
    RUN(test_cross_entropy_i32_smoothing_batch3);
    RUN(test_cross_entropy_i64_smoothing_batch1);
    return harness_finish();
}
