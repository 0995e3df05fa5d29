/*
 * A custom op from outside the library: Mish (mish.c, mish_cuda.cu)
 * registered with cuttle, then used by name in a model file, trained on
 * generated data on the device given (default cpu):
 *
 *   ./mish_demo [cpu|cuda]
 *
 * Exits 0 when the loss falls below half its first value.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuttle.h"
#include "mish.h"

enum { BATCH = 64, FEATURES = 8, CLASSES = 3, STEPS = 60 };

static const char model_text[] = "model mish_mlp\n"
                                 "flatten\n"
                                 "fc1: linear 32\n"
                                 "custom mish\n"
                                 "fc2: linear classes\n";

static void check(ct_status status, const char *what)
{
    if (status != CT_OK) {
        fprintf(stderr, "mish_demo: %s: %s\n", what, ct_last_error());
        exit(1);
    }
}

/* Points labelled by two of their coordinates: learnable, not trivial. */
static void make_batch(float *x, int64_t *labels)
{
    unsigned state = 2024;
    for (int i = 0; i < BATCH * FEATURES; i++) {
        state = state * 1103515245u + 12345u;
        x[i] = (float)((state >> 8) % 2001) / 1000.0f - 1.0f;
    }
    for (int i = 0; i < BATCH; i++)
        labels[i] = (x[i * FEATURES] > 0) + (x[i * FEATURES + 1] > 0.3f);
}

int main(int argc, char **argv)
{
    const char *device = argc > 1 ? argv[1] : "cpu";
    check(mish_register(), "registering mish");
    ct_graph *g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 4, (int64_t[]){BATCH, FEATURES, 1, 1});
    ct_tensor *labels = ct_input(g, "labels", CT_I64, 1, (int64_t[]){BATCH});
    ct_tensor *loss = ct_cross_entropy(g, ct_model_build(g, model_text, x, CLASSES), labels, 0);
    ct_tensor_keep(loss);
    check(ct_graph_status(g), "building the model");
    check(ct_graph_backward(g, loss), "backward");
    check(ct_graph_sgd(g, (ct_sgd_args){.lr = 0.1f, .momentum = 0.9f}), "sgd");
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    check(ct_backend_new(device, &backend), device);
    check(ct_plan_new(g, backend, 1, &plan), "planning");
    float xs[BATCH * FEATURES], first = 0, last = 0;
    int64_t ys[BATCH];
    make_batch(xs, ys);
    check(ct_plan_write(plan, x, xs, sizeof xs), "writing x");
    check(ct_plan_write(plan, labels, ys, sizeof ys), "writing the labels");
    for (int step = 0; step < STEPS; step++) {
        check(ct_plan_run(plan, CT_TRAIN), "a training step");
        check(ct_plan_read(plan, loss, &last, sizeof last), "reading the loss");
        if (step == 0)
            first = last;
    }
    printf("mish_demo on %s: loss %.4f after 1 step, %.4f after %d\n", ct_backend_name(backend),
           first, last, STEPS);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(g);
    return last < 0.5f * first ? 0 : 1;
}
