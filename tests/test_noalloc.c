/*
 * A training step allocates nothing (also profiled, also data-parallel):
 * this binary is linked with
 * -Wl,--wrap=malloc,... so every allocation made by cuttle's own code goes
 * through the counters below.  (OpenMP and OpenBLAS are shared libraries
 * and are not counted; their allocations are theirs.)
 */
#include <stddef.h>

#include "alloc_wrap.h"
#include "cuttle.h"
#include "harness.h"


static long allocations;

void *__wrap_malloc(size_t size)
{
    allocations++;
    return __real_malloc(size);
}

void *__wrap_calloc(size_t count, size_t size)
{
    allocations++;
    return __real_calloc(count, size);
}

void *__wrap_realloc(void *ptr, size_t size)
{
    allocations++;
    return __real_realloc(ptr, size);
}

void *__wrap_aligned_alloc(size_t alignment, size_t size)
{
    allocations++;
    return __real_aligned_alloc(alignment, size);
}

static void test_training_step_allocates_nothing(void)
{
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){16, 3, 32, 32});
    ct_tensor *labels = ct_input(graph, "labels", CT_I32, 1, (int64_t[]){16});
    ct_tensor *h = ct_layer_conv2d(graph, "stem", x, 8, 3, 3, (ct_conv_args){.pad = {1, 1}},
                                   false);
    h = ct_relu(graph, ct_layer_batchnorm2d(graph, "bn", h));
    h = ct_add(graph, h, ct_dropout(graph, h, 0.1f));
    ct_tensor *logits = ct_model_simplecnn(graph, h, 10);
    ct_tensor *loss = ct_cross_entropy(graph, logits, labels, 0.1f);
    CHECK_OK(ct_graph_backward(graph, loss));
    CHECK_OK(ct_graph_adam(graph, ct_adam_defaults()));
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    CHECK_OK(ct_plan_new(graph, backend, 3, &plan));
    if (!plan)
        return;
    static float images[16 * 3 * 32 * 32];
    static int32_t classes[16];
    harness_fill(images, 16 * 3 * 32 * 32, 1, -1, 1);
    for (int i = 0; i < 16; i++)
        classes[i] = i % 10;
    CHECK_OK(ct_plan_write(plan, x, images, sizeof images));
    CHECK_OK(ct_plan_write(plan, labels, classes, sizeof classes));
    CHECK_OK(ct_plan_run(plan, CT_TRAIN));
    long before = allocations;
    for (int step = 0; step < 3; step++) {
        CHECK_OK(ct_plan_run(plan, CT_TRAIN));
        CHECK_OK(ct_plan_run(plan, CT_EVAL));
    }
    CHECK(allocations == before, "%ld allocations during 3 train + 3 eval steps",
          allocations - before);
    CHECK(before > 0, "the allocation counter is not wired (no allocations at all)");
    CHECK_OK(ct_plan_set_profiling(plan, true)); /* allocates the records, once */
    before = allocations;
    for (int step = 0; step < 3; step++) {
        ct_profile profile;
        CHECK_OK(ct_plan_run(plan, CT_TRAIN));
        CHECK_OK(ct_plan_profile(plan, &profile));
        CHECK_OK(ct_plan_run(plan, CT_EVAL));
        CHECK_OK(ct_plan_profile(plan, &profile));
    }
    CHECK(allocations == before, "%ld allocations during 3 profiled train + eval steps",
          allocations - before);
    /* data parallel, in a job of one: the gradients still go through buckets */
    ct_dist *dist = NULL;
    CHECK_OK(ct_plan_set_profiling(plan, false));
    CHECK_OK(ct_dist_init(&dist));
    CHECK_OK(ct_plan_set_dist(plan, dist, 4096));
    before = allocations;
    for (int step = 0; step < 3; step++)
        CHECK_OK(ct_plan_run(plan, CT_TRAIN));
    CHECK(allocations == before, "%ld allocations during 3 data-parallel train steps",
          allocations - before);
    ct_plan_free(plan);
    ct_dist_free(dist);
    ct_backend_free(backend);
    ct_graph_free(graph);
}

int main(void)
{
    RUN(test_training_step_allocates_nothing);
    return harness_finish();
}
