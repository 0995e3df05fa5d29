/*
 * Training (or, with --eval 1, inference) throughput of SimpleCNN on
 * synthetic data: one JSON line.
 *   simplecnn_train [--batch B] [--channels C] [--size S] [--steps N]
 *                   [--warmup N] [--threads T] [--eval 0|1]
 * The PyTorch peer, bench/peers/torch_simplecnn.py, prints the same fields;
 * bench/compare_simplecnn.sh runs both alternately.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "timing.h"

static void die(const char *what)
{
    fprintf(stderr, "simplecnn_train: %s: %s\n", what, ct_last_error());
    exit(1);
}

int main(int argc, char **argv)
{
    int batch = 64, channels = 1, size = 28, steps = 50, warmup = 5, threads = 0, eval = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        int value = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--batch") == 0) batch = value;
        else if (strcmp(argv[i], "--channels") == 0) channels = value;
        else if (strcmp(argv[i], "--size") == 0) size = value;
        else if (strcmp(argv[i], "--steps") == 0) steps = value;
        else if (strcmp(argv[i], "--warmup") == 0) warmup = value;
        else if (strcmp(argv[i], "--threads") == 0) threads = value;
        else if (strcmp(argv[i], "--eval") == 0) eval = value;
        else { fprintf(stderr, "simplecnn_train: unknown option %s\n", argv[i]); return 2; }
    }
    if (batch < 1 || channels < 1 || size < 16 || steps < 1 || warmup < 0) {
        fprintf(stderr, "simplecnn_train: bad sizes\n");
        return 2;
    }
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){batch, channels, size, size});
    ct_tensor *labels = ct_input(graph, "labels", CT_I64, 1, (int64_t[]){batch});
    ct_tensor *loss = ct_cross_entropy(graph, ct_model_simplecnn(graph, x, 10), labels, 0);
    if (ct_graph_status(graph) != CT_OK || ct_graph_backward(graph, loss) != CT_OK ||
        ct_graph_sgd(graph, (ct_sgd_args){.lr = 0.01f, .momentum = 0.9f}) != CT_OK)
        die("building the graph");
    char device[32] = "cpu";
    if (threads > 0)
        snprintf(device, sizeof device, "cpu:%d", threads);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    if (ct_backend_new(device, &backend) != CT_OK || ct_plan_new(graph, backend, 1, &plan))
        die("planning");
    size_t n_pixels = (size_t)batch * channels * size * size;
    float *images = malloc(sizeof(float) * n_pixels);
    int64_t *classes = malloc(sizeof(int64_t) * (size_t)batch);
    double *times = malloc(sizeof(double) * (size_t)steps);
    unsigned state = 1;
    for (size_t i = 0; i < n_pixels; i++) {
        state = state * 1664525u + 1013904223u;
        images[i] = (float)(state >> 8) / 16777216.0f - 0.5f;
    }
    for (int i = 0; i < batch; i++)
        classes[i] = i % 10;
    for (int step = 0; step < warmup + steps; step++) {
        double start = now_seconds();
        if (ct_plan_write(plan, x, images, sizeof(float) * n_pixels) != CT_OK ||
            ct_plan_write(plan, labels, classes, sizeof(int64_t) * (size_t)batch) != CT_OK ||
            ct_plan_run(plan, eval ? CT_EVAL : CT_TRAIN) != CT_OK)
            die("running a step");
        if (step >= warmup)
            times[step - warmup] = now_seconds() - start;
    }
    qsort(times, (size_t)steps, sizeof *times, compare_doubles);
    double median = times[steps / 2];
    printf("{\"framework\": \"cuttle\", \"model\": \"simplecnn\", \"mode\": \"%s\", "
           "\"batch\": %d, \"input\": \"%dx%dx%d\", \"backend\": \"%s\", "
           "\"median_step_ms\": %.3f, \"min_step_ms\": %.3f, \"max_step_ms\": %.3f, "
           "\"images_per_second\": %.1f, \"arena_bytes\": %zu}\n",
           eval ? "eval" : "train", batch, channels, size, size, ct_backend_name(backend), 1e3 * median, 1e3 * times[0],
           1e3 * times[steps - 1], batch / median, ct_plan_arena_bytes(plan));
    free(images);
    free(classes);
    free(times);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
    return 0;
}
