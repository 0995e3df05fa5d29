/*
 * A two-layer network trained through the public API on generated data:
 * points in the plane, labelled by which of three interleaved spiral arms
 * they lie on.  Build the graph, add backward and an optimizer, plan it on
 * the CPU, then write a batch and run a step, again and again.
 *
 * Exits 0 when the network fits the training points (>= 90% accuracy).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuttle.h"

enum { N_POINTS = 300, N_CLASSES = 3, HIDDEN = 64, STEPS = 400 };

#define CHECK(call)                                                                       \
    do {                                                                                  \
        ct_status status_ = (call);                                                       \
        if (status_ != CT_OK) {                                                           \
            fprintf(stderr, "%s failed: %s: %s\n", #call, ct_status_name(status_),        \
                    ct_last_error());                                                     \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* Three spiral arms, 100 points each, with a little deterministic jitter. */
static void make_spirals(float *points, int32_t *labels)
{
    unsigned state = 12345;
    for (int i = 0; i < N_POINTS; i++) {
        int arm = i % N_CLASSES;
        float t = (float)(i / N_CLASSES) / (N_POINTS / N_CLASSES);
        state = state * 1103515245u + 12345u;
        float jitter = ((float)(state >> 16 & 0x7fff) / 32768.0f - 0.5f) * 0.2f;
        float angle = 4.0f * t + 2.0944f * (float)arm + jitter;
        points[2 * i] = t * cosf(angle);
        points[2 * i + 1] = t * sinf(angle);
        labels[i] = arm;
    }
}

int main(void)
{
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 2, (int64_t[]){N_POINTS, 2});
    ct_tensor *labels = ct_input(graph, "labels", CT_I32, 1, (int64_t[]){N_POINTS});
    ct_tensor *hidden = ct_relu(graph, ct_layer_linear(graph, "fc1", x, HIDDEN, true));
    ct_tensor *logits = ct_layer_linear(graph, "fc2", hidden, N_CLASSES, true);
    ct_tensor *loss = ct_cross_entropy(graph, logits, labels, 0.0f);
    CHECK(ct_graph_status(graph));
    ct_tensor_keep(logits);
    CHECK(ct_graph_backward(graph, loss));
    ct_adam_args adam = ct_adam_defaults();
    adam.lr = 0.02f;
    CHECK(ct_graph_adam(graph, adam));

    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK(ct_backend_new("cpu", &backend));
    CHECK(ct_plan_new(graph, backend, 42, &plan));
    printf("backend %s, arena %zu bytes, state %zu bytes\n", ct_backend_name(backend),
           ct_plan_arena_bytes(plan), ct_plan_state_bytes(plan));

    static float points[N_POINTS * 2], scores[N_POINTS * N_CLASSES];
    static int32_t truth[N_POINTS];
    make_spirals(points, truth);
    CHECK(ct_plan_write(plan, x, points, sizeof points));
    CHECK(ct_plan_write(plan, labels, truth, sizeof truth));

    float loss_value = 0;
    for (int step = 0; step < STEPS; step++) {
        CHECK(ct_plan_run(plan, CT_TRAIN));
        CHECK(ct_plan_read(plan, loss, &loss_value, sizeof loss_value));
        if (step % 100 == 0 || step == STEPS - 1)
            printf("step %3d  loss %.4f\n", step, loss_value);
    }
    CHECK(ct_plan_run(plan, CT_EVAL));
    CHECK(ct_plan_read(plan, logits, scores, sizeof scores));
    int correct = 0;
    for (int i = 0; i < N_POINTS; i++) {
        int best = 0;
        for (int c = 1; c < N_CLASSES; c++)
            best = scores[i * N_CLASSES + c] > scores[i * N_CLASSES + best] ? c : best;
        correct += best == truth[i];
    }
    double accuracy = (double)correct / N_POINTS;
    printf("training accuracy %.1f%%\n", 100.0 * accuracy);

    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
    return accuracy >= 0.9 ? 0 : 1;
}
